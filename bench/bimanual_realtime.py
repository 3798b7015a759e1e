"""The two-arm node set of ``launch/bimanual.launch.py`` as separate processes in realtime: qv_loop_plant_node
(MuJoCo weld plant, ``mode:=realtime`` at dt = 1 ms) + qv_controller_node, both from ``config/bimanual_ros.yaml``.
A monitor node in this process counts the effort commands and /joint_states, reads the box odometry and the
controller's /diagnostics.

Printed after a warm-up (default 2 s): effort commands per wall second (received here), the real-time factor
(simulated time of /joint_states stamps per wall second), the controller's watchdog episodes, safe (dropped)
commands, law failures and λ_d projections, the plant's clipping lines and dropped-time warnings (its log), the
box's largest position error against the configured spline and its largest rotation, whether it is held
(error < 1 cm at the end), and the load average (``os.getloadavg``) before and after.

    PYTHONPATH=. .venv/bin/python bench/bimanual_realtime.py [--seconds 25] [--mode realtime|lockstep]
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
CONFIG = ROOT / "config" / "bimanual_ros.yaml"


def _start(module: str, name: str, env: dict, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, "--ros-args", "-r", f"__node:={name}", "--params-file",
                             str(CONFIG), *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


class Monitor:
    def __init__(self, node):
        from diagnostic_msgs.msg import DiagnosticArray
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        from qv_dynamics.ros.messages import stamp_to_sec

        self.stamp = stamp_to_sec
        self.cmd_wall: list[float] = []
        self.js: list[tuple[float, float]] = []        # (wall, stamp)
        self.odom: list[tuple] = []
        self.diag: dict = {}
        node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                 lambda m: self.cmd_wall.append(time.monotonic()), 100)
        node.create_subscription(JointState, "/joint_states",
                                 lambda m: self.js.append((time.monotonic(), stamp_to_sec(m.header.stamp))), 100)
        node.create_subscription(Odometry, "/box/odom", self.on_odom, 100)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 100)

    def on_odom(self, m) -> None:
        p, o = m.pose.pose.position, m.pose.pose.orientation
        self.odom.append((self.stamp(m.header.stamp), p.x, p.y, p.z, o.x, o.y, o.z, o.w))

    def on_diag(self, m) -> None:
        for s in m.status:
            self.diag[s.name] = {kv.key: kv.value for kv in s.values}


def run(seconds: float, warmup: float, mode: str, domain: int, overrides=()) -> dict:
    import rclpy
    import yaml
    from rclpy.context import Context

    from qv_control.references import SplineReference
    from qv_dynamics.ros.runner import make_executor

    cfg = yaml.safe_load(CONFIG.read_text())["qv_controller"]["ros__parameters"]
    spline = SplineReference(cfg["reference"]["times"], np.reshape(cfg["reference"]["waypoints"],
                                                                   (len(cfg["reference"]["times"]), -1)))
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain))
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain, args=[])
    ex = make_executor(ctx)
    node = rclpy.create_node("bimanual_monitor", context=ctx)
    ex.add_node(node)
    mon = Monitor(node)
    load0 = os.getloadavg()
    procs = [_start("qv_dynamics.ros.loop_plant_node", "qv_loop_plant", env, "-p", f"mode:={mode}"),
             _start("qv_control.ros.controller_node", "qv_controller", env, *overrides)]
    try:
        end = time.monotonic() + 120.0
        while not mon.cmd_wall and time.monotonic() < end:      # start-up: the first command
            ex.spin_once(timeout_sec=0.01)
        t0 = time.monotonic()
        while time.monotonic() < t0 + warmup + seconds:
            ex.spin_once(timeout_sec=0.01)
        t_end = time.monotonic()
        for _ in range(150):                                       # the last diagnostics (1 s period)
            ex.spin_once(timeout_sec=0.01)
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        logs = []
        for p in procs:
            try:
                logs.append(p.communicate(timeout=30)[0])
            except subprocess.TimeoutExpired:
                p.kill()
                logs.append(p.communicate()[0])
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    w0 = t0 + warmup
    cmds = np.array(mon.cmd_wall)
    js = np.array(mon.js)
    win = js[(js[:, 0] >= w0) & (js[:, 0] <= t_end)]
    od = np.array(mon.odom)
    ref = np.array([spline(t - od[0, 0]).theta[:3] for t in od[:, 0]])   # the controller's spline counts from
    err = np.linalg.norm(od[:, 1:4] - ref, axis=1)                        # its first state (≈ the first odom)
    ang = 2 * np.arccos(np.clip(np.abs(od[:, 7]), 0, 1))
    ctrl = next((v for k, v in mon.diag.items() if "controller" in k), {})
    plant_log, ctrl_log = logs
    return {"mode": mode, "seconds": t_end - w0, "load_before": load0, "load_after": os.getloadavg(),
            "commands_per_s": float(np.count_nonzero((cmds >= w0) & (cmds <= t_end)) / (t_end - w0)),
            "rtf": float((win[-1, 1] - win[0, 1]) / (win[-1, 0] - win[0, 0])) if len(win) > 1 else float("nan"),
            "watchdog_episodes": ctrl.get("watchdog_episodes"), "safe_commands": ctrl.get("safe_commands"),
            "law_failures": ctrl.get("law_failures"), "compute_ms_mean": ctrl.get("compute_ms_mean"),
            "projected": {k: v for k, v in ctrl.items() if "project" in k},
            "clip_lines": plant_log.count("beyond the URDF limits"),
            "dropped_time_lines": plant_log.count("dropped so far"),
            "box_err_max_m": float(err.max()), "box_err_end_m": float(err[-1]), "box_turn_max_rad": float(ang.max()),
            "box_held": bool(err[-1] < 0.01), "sim_time_s": float(od[-1, 0] - od[0, 0]),
            "log_tail": (plant_log[-600:], ctrl_log[-600:])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--mode", choices=("realtime", "lockstep"), default="realtime")
    ap.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    ap.add_argument("-p", action="append", default=[], help="controller parameter override name:=value")
    args = ap.parse_args(argv)
    r = run(args.seconds, args.warmup, args.mode, args.domain, [x for p in args.p for x in ("-p", p)])
    for k, v in r.items():
        if k != "log_tail":
            print(f"{k:20s} {v}")
    if not r["box_held"] or r["law_failures"]:
        print("--- plant log tail ---\n" + r["log_tail"][0] + "\n--- controller log tail ---\n" + r["log_tail"][1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
