"""The built ros2_control stack (``scripts/ros2_control_stack.sh``) for the tests that run the qv nodes behind
controller_manager: its environment, its processes (ros2_control_node, the spawner, the qv nodes) and a recorder.

The stack is found through ``ros2_control_stack.sh env`` (its cache, ``QV_R2C_CACHE``); :func:`stack_or_skip`
skips a test with the reason when it is not built (CI does not build it), in well under a second.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ros2_control_stack.sh"
PANDA_JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
# what each test needs from the install prefix: (path below it, what it is)
NEEDS = {
    "mock": [("lib/controller_manager/ros2_control_node", "controller_manager"),
             ("lib/controller_manager/spawner", "the spawner"),
             ("lib/controller_manager/unspawner", "the unspawner"),
             ("lib/libmock_components.so", "mock_components"),
             ("lib/libforward_command_controller.so", "forward_command_controller"),
             ("lib/libjoint_state_broadcaster.so", "joint_state_broadcaster")],
    "mujoco": [("lib/mujoco_ros2_control/ros2_control_node", "mujoco_ros2_control"),
               ("lib/libmujoco_ros2_control.so", "the MujocoSystemInterface plugin"),
               ("lib/libforce_torque_sensor_broadcaster.so", "force_torque_sensor_broadcaster")],
}


# 1-min load average per core above which the realtime runs skip (QV_R2C_OVERLOAD overrides): the plant's threads
# and the test's own recorder are not realtime ones. Measured here: everything passed at 3.8-4.6 per core; at
# 6.5-8.7 per core the recorder lagged the topics by hundreds of ms and the MuJoCo plant stalled.
OVERLOAD = float(os.environ.get("QV_R2C_OVERLOAD", "5.0"))


# the qv controller as a realtime process (controller_manager's own loop runs at SCHED_FIFO 50): a shared machine's
# load then neither starves the 1 kHz loop nor trips the controller's watchdog (launch argument controller_prefix)
CONTROLLER_PREFIX = "chrt -f 30" if os.geteuid() == 0 and shutil.which("chrt") else ""


def skip_if_overloaded(what: str) -> float:
    """The 1-min load average, after skipping the calling test when it exceeds OVERLOAD per core."""
    load = os.getloadavg()[0]
    if load > OVERLOAD * os.cpu_count():
        pytest.skip(f"load average {load:.1f} on {os.cpu_count()} cores (above {OVERLOAD:g} per core): too loaded "
                    f"to time {what}")
    return load


def stack_env() -> tuple[dict | None, str]:
    """(environment of the built stack, "") or (None, why not)."""
    if not SCRIPT.exists():
        return None, f"{SCRIPT} missing"
    try:
        out = subprocess.run(["bash", str(SCRIPT), "env"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0:
            return None, (out.stderr.strip().splitlines() or ["no stack"])[-1]
        out = subprocess.run(["bash", "-c", 'eval "$1" && env -0', "_", out.stdout], capture_output=True,
                             timeout=30)
    except subprocess.TimeoutExpired:
        return None, "ros2_control_stack.sh env timed out"
    env = dict(kv.split("=", 1) for kv in out.stdout.decode().split("\0") if "=" in kv)
    env["QV_R2C_RUN_PYTHON"] = sys.executable
    return env, ""


def stack_or_skip(*parts: str) -> dict:
    """The stack's environment with every file of ``NEEDS[part]``, else ``pytest.skip`` naming what is missing."""
    env, why = stack_env()
    if env is None:
        pytest.skip(f"ros2_control stack not built ({why}): bash scripts/ros2_control_stack.sh")
    prefix = Path(env["QV_R2C_PREFIX"])
    missing = [what for p in parts for rel, what in NEEDS[p] if not (prefix / rel).exists()]
    if missing:
        pytest.skip(f"ros2_control stack at {prefix} lacks {', '.join(missing)}: bash scripts/ros2_control_stack.sh")
    return env


class Proc:
    """A process whose output goes to a log file (never a full pipe), with a wait for a line of it."""

    def __init__(self, name: str, argv: list, env: dict, logdir: Path):
        self.name, self.log = name, Path(logdir) / f"{name}.log"
        self._f = open(self.log, "w")
        self.p = subprocess.Popen([str(a) for a in argv], env=env, stdout=self._f, stderr=subprocess.STDOUT,
                                  start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_line(self, text: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.text():
                return
            if self.p.poll() is not None:
                raise AssertionError(f"{self.name} exited ({self.p.returncode}) before {text!r}:\n{self.tail()}")
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no {text!r} within {timeout} s:\n{self.tail()}")

    def tail(self, n: int = 25) -> str:
        return "\n".join(self.text().splitlines()[-n:])

    def stop(self, timeout: float = 20.0):
        import signal

        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._f.close()
        return self.p.returncode


def run_tool(probe: "Probe", env: dict, tool: str, args: list, logdir: Path, timeout: float = 120.0) -> str:
    """controller_manager's ``spawner`` / ``unspawner``, or ``ros2`` (the stack's ros2cli), to its end while the
    probe spins; its output, or AssertionError with it unless it exits 0."""
    args = [str(a) for a in args]
    if tool == "ros2":
        argv = ["ros2", *args]
    else:
        extra = ["--controller-manager-timeout", "60"] if tool == "spawner" else []
        argv = [Path(env["QV_R2C_PREFIX"]) / "lib" / "controller_manager" / tool, *args, *extra]
    name = f"{tool}_{'_'.join(a.strip('/').replace('/', '_') for a in args if not a.startswith(('-', '{')))[:60]}"
    proc = Proc(name, argv, env, logdir)
    try:
        probe.wait_for(lambda: proc.p.poll() is not None, timeout, f"exit of {tool} {args}")
    except AssertionError:
        proc.stop()
        raise AssertionError(f"{tool} {args}: no exit within {timeout} s:\n{proc.tail()}") from None
    rc = proc.stop()
    assert rc == 0, f"{tool} {args} exited {rc}:\n{proc.tail()}"
    return proc.text()


def qv_node(module: str, name: str, params: Path, env: dict, logdir: Path, prefix: str = "") -> Proc:
    """A qv node as its own process in this interpreter, from the work tree, behind a command ``prefix`` (as the
    launch files' ``controller_prefix`` / ``dynamics_prefix``)."""
    env = dict(env, PYTHONPATH=f"{ROOT}:{env.get('PYTHONPATH', '')}", PYTHONUNBUFFERED="1",
               RCUTILS_LOGGING_BUFFERED_STREAM="0")
    return Proc(name, [*prefix.split(), sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}",
                       "--params-file", params], env, logdir)


def write_yaml(path: Path, doc: dict) -> Path:
    """``doc`` as YAML without anchors/aliases (rcl's parameter parser refuses them)."""
    import yaml

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data):
            return True

    path.write_text(yaml.dump(doc, Dumper=Plain))
    return path


def stamp(msg) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


class Recorder:
    """Messages of the given topics ({key: (type, topic, depth)}), each with its arrival time. Kept serialized (a
    1 kHz topic costs the probe no deserialization while the loop runs) and deserialized when read."""

    def __init__(self, node, topics: dict):
        self.msgs = {k: [] for k in topics}
        self.types = {k: mtype for k, (mtype, _, _) in topics.items()}
        for key, (mtype, topic, qos) in topics.items():
            node.create_subscription(mtype, topic, lambda m, k=key: self.msgs[k].append((time.monotonic(), m)), qos,
                                     raw=True)

    def _decode(self, key: str, i: int):
        from rclpy.serialization import deserialize_message

        t, m = self.msgs[key][i]
        if isinstance(m, bytes):
            m = deserialize_message(m, self.types[key])
            self.msgs[key][i] = (t, m)
        return m

    def get(self, key: str, since: float = 0.0) -> list:
        import bisect

        first = bisect.bisect_left(self.msgs[key], since, key=lambda x: x[0])
        return [self._decode(key, i) for i in range(first, len(self.msgs[key]))]

    def timed(self, key: str) -> list:
        """(arrival time, message) pairs."""
        return [(self.msgs[key][i][0], self._decode(key, i)) for i in range(len(self.msgs[key]))]


class Probe:
    """An rclpy context on ``domain_id`` with one node and rclpy's EventsExecutor, spun in this thread only (the
    EventsExecutor holds the GIL while it waits: a spinning thread would starve this one). Every wait spins."""

    def __init__(self, domain_id: int, name: str):
        import rclpy
        from rclpy.context import Context

        from qv_dynamics.ros.runner import make_executor

        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=domain_id, args=[])
        self.node = rclpy.create_node(name, context=self.ctx)
        self.ex = make_executor(self.ctx)
        self.ex.add_node(self.node)

    def wait_for(self, cond, timeout: float, what: str, procs=()):
        """Spin until ``cond()`` returns a true value, which is returned; AssertionError naming ``what`` after
        ``timeout`` s, or at once when one of ``procs`` (:class:`Proc`) has exited (with its output)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            v = cond()
            if v:
                return v
            for p in procs:
                if p.p.poll() is not None:
                    raise AssertionError(f"{p.name} exited ({p.p.returncode}) while waiting for {what}:\n{p.tail()}")
            check = time.monotonic() + 0.02   # cond() is checked every 20 ms; every message in between is taken
            while time.monotonic() < check:
                self.ex.spin_once(timeout_sec=0.005)
        raise AssertionError(f"no {what} within {timeout} s")

    def close(self) -> None:
        import rclpy

        self.ex.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.ctx)


def by_name(msg, field: str, names: list) -> np.ndarray:
    """A JointState field in the order of ``names``."""
    idx = [list(msg.name).index(n) for n in names]
    return np.asarray(getattr(msg, field), float)[idx]
