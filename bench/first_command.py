"""Start-up: from the controller's interpreter start to its first effort command (target ≤ 1 s).

The plant of a parameters file (``qv_sim``, ``qv_mujoco``, ``qv_legged_mujoco`` or ``qv_loop_plant``, realtime,
holding the robot until a first command) runs as its own process and streams its states; then, ``--runs``
times, alternating so both see the same load:

- the controller node of the file is started as ``ros2 run`` starts it (``python -m <module> --ros-args
  --params-file``; ``--managed``: ``managed:=true`` and ``qv_spawner`` started at the same instant, as the
  launch files do), its ``command_topic`` moved to a bench topic (the plant keeps holding: every run
  starts from the same state), and the time from just before its ``Popen`` (the interpreter starts) to
  the first command received here is recorded, with the time its "configured" log line arrived;
- the echo node (``bench/echo_node.py``: Python, rclpy and a node answering each joint state, no model,
  no law) is started the same way: the floor of any rclpy node's first answer on this machine.

Printed: min / median / max of each, the controller's over the echo's (median), and the load before and
after. The children run with their bytecode cached (``PYTHONPYCACHEPREFIX``, written by one start of each that
is not counted), as an installed package has it; ``--source`` keeps this environment's setting (with
``PYTHONDONTWRITEBYTECODE=1`` the project's modules are compiled from source at every start, ~0.2 s here).

    PYTHONPATH=. .venv/bin/python bench/first_command.py [--config config/panda_table.yaml] [--runs 5]
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

PLANTS = {"qv_sim": "qv_dynamics.ros.sim_node", "qv_mujoco": "qv_dynamics.ros.mujoco_node",
          "qv_legged_mujoco": "qv_dynamics.ros.legged_mujoco_node", "qv_loop_plant": "qv_dynamics.ros.loop_plant_node"}
CONTROLLERS = {"qv_controller": "qv_control.ros.controller_node",
               "qv_legged_controller": "qv_control.ros.legged_controller_node"}
BENCH_TOPIC = "/first_command/commands"
ECHO_TOPIC = "/first_command/echo"
CONTROLLER_MARK = "first command sent"   # the controller's log line at its first command (controller_node.py)
ECHO_MARK = "echo: first answer"
SETTLE = 1.5   # [s] spun between two starts: a start right after an exit was seen 2-3 s late by this process's DDS


def sections(config: Path) -> tuple[str, str]:
    """(plant node name, controller node name) of a parameters file."""
    doc = yaml.safe_load(config.read_text())
    plant = next((k for k in doc if k in PLANTS), None)
    ctrl = next((k for k in doc if k in CONTROLLERS), None)
    if plant is None or ctrl is None:
        raise SystemExit(f"{config}: needs one plant section ({', '.join(PLANTS)}) and one controller section")
    return plant, ctrl


def _drain(proc: subprocess.Popen, marks: dict, t0: float) -> None:
    """Keep reading the child's output (a full pipe would block it); the arrival of the first line with each
    mark in ``marks`` (text -> None) is recorded in it, relative to ``t0``."""
    proc.lines = []
    for line in proc.stdout:
        proc.lines.append(line)
        for text, at in marks.items():
            if at is None and text in line:
                marks[text] = time.monotonic() - t0


class Listener:
    """Arrival of the first message on each bench topic (serialized: nothing is built)."""

    def __init__(self, node):
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self.node = node
        self.first: dict[str, float | None] = {BENCH_TOPIC: None, ECHO_TOPIC: None}
        self.states = 0
        for topic in self.first:
            node.create_subscription(Float64MultiArray, topic, lambda _b, t=topic: self._on(t), 10, raw=True)
        node.create_subscription(JointState, "/joint_states", self._on_state, 10, raw=True)

    def _on(self, topic: str) -> None:
        if self.first[topic] is None:
            self.first[topic] = time.monotonic()

    def _on_state(self, _data) -> None:
        self.states += 1


def one_start(ex, listener: Listener, cmds: list[list[str]], topic: str, env: dict, timeout: float,
              sent_mark: str) -> dict:
    """Start ``cmds`` (the first one is the node; the others start with it) and wait for the first message on
    ``topic``; the times from just before the first ``Popen``: ``first_s`` (received here), ``sent_s`` (the
    node's log line ``sent_mark``, written in the callback that sends its first command), ``configured_s``
    (the controller's "configured" line), ``seen_s`` (its publisher in this process's graph)."""
    listener.first[topic] = None
    marks = {"configured (inactive)": None, sent_mark: None}
    t0 = time.monotonic()
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c in cmds]
    threading.Thread(target=_drain, args=(procs[0], marks, t0), daemon=True).start()
    for p in procs[1:]:
        threading.Thread(target=_drain, args=(p, {}, t0), daemon=True).start()
    end, seen = t0 + timeout, None
    while listener.first[topic] is None and time.monotonic() < end and procs[0].poll() is None:
        ex.spin_once(timeout_sec=0.002)
        if seen is None and listener.node.count_publishers(topic):
            seen = time.monotonic() - t0
    first = listener.first[topic]
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    settle = time.monotonic() + SETTLE      # the exited node's last messages and its departure, before the next
    while time.monotonic() < settle:
        ex.spin_once(timeout_sec=0.01)
    if first is None:
        tail = "".join(getattr(procs[0], "lines", [])[-5:])
        raise RuntimeError(f"no message on {topic} within {timeout} s (exit {procs[0].returncode}):\n{tail}")
    return {"first_s": first - t0, "configured_s": marks["configured (inactive)"], "seen_s": seen,
            "sent_s": marks[sent_mark]}


def _s(x: float | None) -> str:
    return "   -   " if x is None else f"{x:.3f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "panda_table.yaml"), help="ROS 2 parameters file")
    ap.add_argument("--runs", type=int, default=5, help="starts of each node (alternating)")
    ap.add_argument("--managed", action="store_true", help="managed:=true with qv_spawner (the launch files)")
    ap.add_argument("--timeout", type=float, default=60.0, help="longest wait for a first command [s]")
    ap.add_argument("--source", action="store_true", help="the bytecode as this environment has it (default: cached, "
                    "as an installed package has it)")
    args = ap.parse_args(argv)
    import rclpy
    from rclpy.context import Context

    from qv_control.ros.launch_actions import discovery_env
    from qv_dynamics.ros.runner import make_executor

    config = Path(args.config).resolve()
    plant, ctrl = sections(config)
    domain = (int(os.environ.get("ROS_DOMAIN_ID", "41")) + 170) % 230
    env = discovery_env(dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain), PYTHONUNBUFFERED="1",
                             RCUTILS_LOGGING_BUFFERED_STREAM="0", MUJOCO_GL=os.environ.get("MUJOCO_GL", "disable")))
    py = sys.executable
    params = ["--ros-args", "--params-file", str(config)]
    plant_cmd = [py, "-m", PLANTS[plant], *params, "-r", f"__node:={plant}", "-p", "mode:=realtime"]
    ctrl_cmd = [py, "-m", CONTROLLERS[ctrl], *params, "-r", f"__node:={ctrl}", "-p", f"command_topic:={BENCH_TOPIC}"]
    cmds = [ctrl_cmd]
    if args.managed:
        cmds = [ctrl_cmd + ["-p", "managed:=true"], [py, "-m", "qv_control.ros.spawner", ctrl]]
    echo_cmd = [[py, str(ROOT / "bench" / "echo_node.py"), "--commands", ECHO_TOPIC]]
    if args.source:
        bytecode = "as this environment has it" + (" (PYTHONDONTWRITEBYTECODE: the project's modules compiled from "
                                                   "source at each start)" if os.environ.get("PYTHONDONTWRITEBYTECODE")
                                                   else "")
    else:   # as an installed package has it: the bytecode of every module written once (a start not counted)
        cache = tempfile.mkdtemp(prefix="qv_first_command_pyc_")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = cache
        bytecode = f"cached (PYTHONPYCACHEPREFIX={cache}, written by one start before the runs)"
    load0 = os.getloadavg()
    print(f"first command after the interpreter starts: {config.name}, {ctrl} "
          f"({'managed, with qv_spawner' if args.managed else 'unmanaged'}) beside {plant} (realtime); "
          f"{args.runs} runs; {os.cpu_count()} cores; load {' '.join(f'{x:.2f}' for x in load0)} (1/5/15 min); "
          f"bytecode of the project: {bytecode}")
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain, args=[])
    node = rclpy.create_node("first_command_bench", context=ctx)
    ex = make_executor(ctx)
    ex.add_node(node)
    listener = Listener(node)
    plant_proc = subprocess.Popen(plant_cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    threading.Thread(target=_drain, args=(plant_proc, {}, 0.0), daemon=True).start()
    rows: dict[str, list[dict]] = {"controller": [], "echo": []}
    try:
        end = time.monotonic() + args.timeout
        while listener.states < 500 and time.monotonic() < end:   # the plant streams (0.5 s of states)
            ex.spin_once(timeout_sec=0.01)
        if listener.states < 500:
            raise RuntimeError(f"{plant} did not stream joint states:\n{''.join(plant_proc.lines[-5:])}")
        if not args.source:   # one start of each writes the bytecode (PYTHONPYCACHEPREFIX): not counted
            one_start(ex, listener, echo_cmd, ECHO_TOPIC, env, args.timeout, ECHO_MARK)
            one_start(ex, listener, cmds, BENCH_TOPIC, env, args.timeout, CONTROLLER_MARK)
        for k in range(args.runs):
            rows["echo"].append(one_start(ex, listener, echo_cmd, ECHO_TOPIC, env, args.timeout, ECHO_MARK))
            rows["controller"].append(one_start(ex, listener, cmds, BENCH_TOPIC, env, args.timeout, CONTROLLER_MARK))
            c, e = rows["controller"][-1], rows["echo"][-1]
            print(f"  run {k + 1}: controller sent {_s(c['sent_s'])} (configured {_s(c['configured_s'])}), received "
                  f"{_s(c['first_s'])} (its publisher seen here {_s(c['seen_s'])}); echo sent {_s(e['sent_s'])}, "
                  f"received {_s(e['first_s'])} (seen {_s(e['seen_s'])})")
    finally:
        if not args.source:
            shutil.rmtree(env["PYTHONPYCACHEPREFIX"], ignore_errors=True)
        plant_proc.send_signal(signal.SIGTERM)
        plant_proc.wait(timeout=10)
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    def col(who: str, key: str) -> np.ndarray:
        return np.array([np.nan if r[key] is None else r[key] for r in rows[who]])

    print("min / median / max over the runs [s] from the interpreter start (just before Popen):")
    for who, key, what in (("controller", "configured_s", "configured (log line)"),
                           ("controller", "sent_s", "first command sent (log line)"),
                           ("controller", "first_s", "first command received here"),
                           ("echo", "sent_s", "first answer sent (log line)"),
                           ("echo", "first_s", "first answer received here")):
        x = col(who, key)
        print(f"  {who:10s} {what:32s} {np.nanmin(x):6.3f} / {np.nanmedian(x):6.3f} / {np.nanmax(x):6.3f}")
    c, e = np.nanmedian(col("controller", "sent_s")), np.nanmedian(col("echo", "sent_s"))
    print(f"controller / echo, first sent (medians): {c / e:.2f}; target first command <= 1 s after the interpreter "
          f"starts: {'MET' if c <= 1.0 else 'NOT met'} here (median sent; received adds the DDS discovery of this "
          "process, seen here 0-3 s late at random)")
    print(f"load before {' '.join(f'{x:.2f}' for x in load0)}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
