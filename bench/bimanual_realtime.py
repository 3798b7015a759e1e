"""The two-arm node set of ``launch/bimanual.launch.py`` as separate processes in realtime: qv_loop_plant_node
(MuJoCo weld plant, ``mode:=realtime`` at dt = 1 ms) + qv_controller_node, both from ``config/bimanual_ros.yaml``.
A monitor node in this process (``realtime_run.py``) counts the effort commands and /joint_states, reads the box
odometry and the controller's /diagnostics.

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
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
CONFIG = ROOT / "config" / "bimanual_ros.yaml"

from realtime_run import rate_figures, run_nodes, start_node  # noqa: E402


def run(seconds: float, warmup: float, mode: str, domain: int, overrides=()) -> dict:
    import yaml

    from qv_control.references import SplineReference

    cfg = yaml.safe_load(CONFIG.read_text())["qv_controller"]["ros__parameters"]
    spline = SplineReference(cfg["reference"]["times"], np.reshape(cfg["reference"]["waypoints"],
                                                                   (len(cfg["reference"]["times"]), -1)))
    r = run_nodes(lambda env: {
        "plant": start_node("qv_dynamics.ros.loop_plant_node", "qv_loop_plant", CONFIG, env, "-p", f"mode:={mode}"),
        "controller": start_node("qv_control.ros.controller_node", "qv_controller", CONFIG, env, *overrides)},
        seconds, warmup, domain, "bimanual_monitor", "/box/odom")
    od = np.array(r.mon.odom)
    ref = np.array([spline(t - od[0, 0]).theta[:3] for t in od[:, 0]])   # the controller's spline counts from
    err = np.linalg.norm(od[:, 1:4] - ref, axis=1)                        # its first state (≈ the first odom)
    ang = 2 * np.arccos(np.clip(np.abs(od[:, 7]), 0, 1))
    ctrl = r.mon.status("controller")
    plant_log, ctrl_log = r.logs["plant"], r.logs["controller"]
    return {"mode": mode, **rate_figures(r),
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
