"""Shared by the realtime node benchmarks (``bimanual_realtime.py``, ``legged_realtime.py``): a launch file's
nodes started as separate processes from one parameters file, watched from a monitor node in this process.

:func:`run_nodes` starts the processes, waits for the first effort command (at most ``FIRST_COMMAND_S``),
lets ``warmup`` s pass, measures ``seconds`` s, spins 1.5 s more for the last /diagnostics (once a second),
then ends every process with SIGINT (SIGKILL after 30 s) and keeps its output (a file, not a pipe: a node
that logs much never blocks on a full pipe). :func:`rate_figures` gives, over the measured window [w0, t_end]:

* effort commands per wall second, as received by the monitor;
* the real-time factor: the /joint_states stamps' span (simulated time) over their wall span;
* the controller's /diagnostics (status ``<node>: controller``): watchdog episodes, safe (dropped) commands,
  law failures, mean compute time;
* the load average (``os.getloadavg``: 1, 5, 15 min) before the start and after the end.

:func:`busy` starts ``K`` busy processes (``while True: pass``) and kills them on leaving, also on errors.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = "/effort_controller/commands"
FIRST_COMMAND_S = 120.0     # longest wait for the first effort command (configure + activation)
TAIL_S = 1.5                # spun after the window: the last /diagnostics
ODOM_EVERY = 5              # the odometry decoded every this many messages (the rest only counted)


def node_env(domain: int) -> dict:
    """The environment of the node processes: this worktree first, the ROS domain, MuJoCo without rendering, the
    launch files' discovery profile."""
    from qv_control.ros.launch_actions import discovery_env

    env = discovery_env(dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain), PYTHONUNBUFFERED="1"))
    env.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    env.setdefault("MUJOCO_GL", "disable")
    return env


def start(cmd: list, env: dict) -> subprocess.Popen:
    """A process whose output (stdout and stderr) goes to a temporary file, read by :func:`stop`."""
    out = tempfile.TemporaryFile("w+")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)
    proc.out = out
    return proc


def start_node(module: str, name: str, config, env: dict, *extra: str, prefix=()) -> subprocess.Popen:
    """``[prefix...] python -m module --ros-args -r __node:=name --params-file config extra...``."""
    return start([*prefix, sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}", "--params-file",
                  str(config), *extra], env)


def stop(procs: dict) -> dict:
    """SIGINT to every process still running, then each one's output ({name: text})."""
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
    logs = {}
    for name, p in procs.items():
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.out.seek(0)
        logs[name] = p.out.read()
        p.out.close()
    return logs


class Monitor:
    """Waits for the first effort command (then stops listening to them), keeps ``odom_topic``'s poses (stamp, x,
    y, z, qx, qy, qz, qw, wall time of arrival; one in ODOM_EVERY), the last /diagnostics values of each status
    name and every status with its wall time. The rates come from the plant's own /diagnostics totals
    (:func:`rate_figures`): a monitor decoding the 1 kHz streams in Python would take a quarter of a core from the
    processes it measures on two cores."""

    def __init__(self, node, odom_topic: str):
        from diagnostic_msgs.msg import DiagnosticArray
        from nav_msgs.msg import Odometry
        from std_msgs.msg import Float64MultiArray

        from qv_dynamics.ros.messages import stamp_to_sec

        self.node, self.stamp = node, stamp_to_sec
        self.first_command: float | None = None
        self.odom: list[tuple] = []
        self.diag: dict = {}
        self.diag_log: list[tuple] = []                # (wall, status name, values) of every status
        self._odom_type, self._odoms = Odometry, 0
        self._cmd_sub = node.create_subscription(Float64MultiArray, COMMANDS, self.on_command, 10, raw=True)
        node.create_subscription(Odometry, odom_topic, self.on_odom_bytes, 100, raw=True)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 100)

    def on_command(self, data: bytes) -> None:
        if self.first_command is None:
            self.first_command = time.monotonic()

    def stop_counting_commands(self) -> None:
        if self._cmd_sub is not None:
            self.node.destroy_subscription(self._cmd_sub)
            self._cmd_sub = None

    def on_odom_bytes(self, data: bytes) -> None:
        from rclpy.serialization import deserialize_message

        self._odoms += 1
        if self._odoms % ODOM_EVERY == 1:
            self.on_odom(deserialize_message(data, self._odom_type))

    def on_odom(self, m) -> None:
        p, o = m.pose.pose.position, m.pose.pose.orientation
        self.odom.append((self.stamp(m.header.stamp), p.x, p.y, p.z, o.x, o.y, o.z, o.w, time.monotonic()))

    def on_diag(self, m) -> None:
        for s in m.status:
            self.diag[s.name] = {kv.key: kv.value for kv in s.values}
            self.diag_log.append((time.monotonic(), s.name, self.diag[s.name]))

    def status(self, kind: str) -> dict:
        """The last values of the status ``<node>: kind`` (``controller``, ``plant``), or {}."""
        return next((v for k, v in self.diag.items() if k.endswith(f": {kind}")), {})


@dataclass
class Run:
    """One run: the monitor's records, the window's wall instants, the processes' outputs, the load."""
    mon: Monitor
    t0: float                    # first command (or the end of the wait for it)
    w0: float                    # start of the measured window (t0 + warm-up)
    t_end: float
    first_command: bool
    load_before: tuple
    load_after: tuple = ()
    logs: dict = field(default_factory=dict)


def run_nodes(start_procs, seconds: float, warmup: float, domain: int, monitor: str, odom_topic: str) -> Run:
    """The run of the module doc; ``start_procs(env)`` starts the processes ({name: Popen}, see :func:`start`)."""
    import rclpy
    from rclpy.context import Context

    from qv_dynamics.ros.runner import make_executor

    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain, args=[])
    ex = make_executor(ctx)
    node = rclpy.create_node(monitor, context=ctx)
    ex.add_node(node)
    mon = Monitor(node, odom_topic)
    load0 = os.getloadavg()
    procs: dict = {}
    try:
        procs.update(start_procs(node_env(domain)))
        end = time.monotonic() + FIRST_COMMAND_S
        while mon.first_command is None and time.monotonic() < end:      # start-up: the first command
            ex.spin_once(timeout_sec=0.01)
        mon.stop_counting_commands()
        t0 = time.monotonic()
        while mon.first_command is not None and time.monotonic() < t0 + warmup + seconds:
            ex.spin_once(timeout_sec=0.01)
        t_end = time.monotonic()
        while time.monotonic() < t_end + TAIL_S:                   # the last diagnostics (1 s period)
            ex.spin_once(timeout_sec=0.01)
    finally:
        logs = stop(procs)
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return Run(mon, t0, t0 + warmup, t_end, mon.first_command is not None, load0, os.getloadavg(), logs)


def plant_totals(diag_log: list, w0: float, t_end: float) -> np.ndarray:
    """(wall of arrival, t, commands_received) of the plant's /diagnostics received in [w0, t_end + TAIL_S]."""
    rows = [(wall, float(v["t"]), float(v["commands_received"])) for wall, name, v in diag_log
            if name.endswith(": plant") and w0 <= wall <= t_end + TAIL_S and "commands_received" in v]
    return np.array(rows).reshape(-1, 3)


def rate_figures(run: Run) -> dict:
    """Seconds measured, load, the controller's counts, and from the plant's /diagnostics totals over the window:
    effort commands received per wall second, per simulated second, and the real-time factor (simulated per wall
    second; the wall instants are the arrivals of the plant's 1 Hz diagnostics)."""
    w0, t_end = run.w0, run.t_end
    p = plant_totals(run.mon.diag_log, w0, t_end)
    ok = len(p) >= 2 and p[-1, 0] > p[0, 0] and p[-1, 1] > p[0, 1]
    d = p[-1] - p[0] if ok else np.full(3, np.nan)
    ctrl = run.mon.status("controller")
    return {"seconds": t_end - w0, "load_before": run.load_before, "load_after": run.load_after,
            "commands_per_s": float(d[2] / d[0]) if ok else float("nan"),
            "commands_per_sim_s": float(d[2] / d[1]) if ok else float("nan"),
            "rtf": float(d[1] / d[0]) if ok else float("nan"),
            "watchdog_episodes": ctrl.get("watchdog_episodes"), "safe_commands": ctrl.get("safe_commands"),
            "law_failures": ctrl.get("law_failures"), "compute_ms_mean": ctrl.get("compute_ms_mean")}


@contextlib.contextmanager
def busy(k: int):
    """``k`` busy processes (``while True: pass``) for the duration of the block; killed on leaving."""
    procs = []
    try:
        for _ in range(k):
            procs.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        yield procs
    finally:
        for p in procs:
            p.kill()
            p.wait()
