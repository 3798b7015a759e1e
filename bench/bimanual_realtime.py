"""The two-arm node set of ``launch/bimanual.launch.py`` as separate processes in realtime, started as the launch
file starts them: qv_loop_plant_node (MuJoCo weld plant, ``mode:=realtime`` at dt = 1 ms), qv_controller_node
(``managed:=true``) and its ``qv_spawner``, from ``config/bimanual_ros.yaml``; ``--controller-prefix`` and
``--plant-prefix`` as the launch arguments of those names (e.g. ``chrt -f 30`` / ``chrt -f 20``).
A monitor node in this process (``realtime_run.py``) waits for the first command, reads the box odometry (one in
five) and the /diagnostics.

Printed after a warm-up (default 2 s): the effort commands the plant received per wall second and per simulated
second and the real-time factor (the plant's /diagnostics totals), the controller's watchdog episodes, safe (dropped)
commands, law failures and λ_d projections, the plant's clipping lines and dropped-time warnings (its log), the
box's largest position error against the configured spline and its largest rotation, whether it is held
(error < 1 cm at the end), and the load average (``os.getloadavg``) before and after; per run one greppable
``bimanual_run`` line with the verdict (≥ 990 commands/s, RTF ≥ 0.99, no watchdog episode, box held), then a
summary over ``--runs`` runs, with ``--busy K`` busy processes beside them.

    PYTHONPATH=. .venv/bin/python bench/bimanual_realtime.py [--seconds 25] [--runs 3] [--busy 1]
        [--mode realtime|lockstep] [--controller-prefix 'chrt -f 30' --plant-prefix 'chrt -f 20']
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

from realtime_run import busy, rate_figures, run_nodes, start, start_node  # noqa: E402

RATE_MIN, RTF_MIN = 990.0, 0.99


def run(seconds: float, warmup: float, mode: str, domain: int, overrides=(), controller_prefix: str = "",
        plant_prefix: str = "") -> dict:
    import yaml

    from qv_control.references import SplineReference

    cfg = yaml.safe_load(CONFIG.read_text())["qv_controller"]["ros__parameters"]
    spline = SplineReference(cfg["reference"]["times"], np.reshape(cfg["reference"]["waypoints"],
                                                                   (len(cfg["reference"]["times"]), -1)))
    r = run_nodes(lambda env: {
        "plant": start_node("qv_dynamics.ros.loop_plant_node", "qv_loop_plant", CONFIG, env, "-p", f"mode:={mode}",
                            prefix=plant_prefix.split()),
        "controller": start_node("qv_control.ros.controller_node", "qv_controller", CONFIG, env, "-p",
                                 "managed:=true", *overrides, prefix=controller_prefix.split()),
        "spawner": start([sys.executable, "-m", "qv_control.ros.spawner", "qv_controller"], env)},
        seconds, warmup, domain, "bimanual_monitor", "/box/odom")
    od = np.array(r.mon.odom)
    ref = np.array([spline(t - od[0, 0]).theta[:3] for t in od[:, 0]])   # the controller's spline counts from
    err = np.linalg.norm(od[:, 1:4] - ref, axis=1)                        # its first state (≈ the first odom)
    ang = 2 * np.arccos(np.clip(np.abs(od[:, 7]), 0, 1))
    ctrl = r.mon.status("controller")
    plant_log, ctrl_log = r.logs["plant"], r.logs["controller"]
    return {"mode": mode, "controller_prefix": controller_prefix, "plant_prefix": plant_prefix, **rate_figures(r),
            "projected": {k: v for k, v in ctrl.items() if "project" in k},
            "clip_lines": plant_log.count("beyond the URDF limits"),
            "dropped_time_lines": plant_log.count("dropped so far"),
            "box_err_max_m": float(err.max()), "box_err_end_m": float(err[-1]), "box_turn_max_rad": float(ang.max()),
            "box_held": bool(err[-1] < 0.01), "sim_time_s": float(od[-1, 0] - od[0, 0]),
            "log_tail": (plant_log[-600:], ctrl_log[-600:])}


def verdict(d: dict) -> bool:
    """≥ RATE_MIN commands per wall second, RTF ≥ RTF_MIN, no watchdog episode, the box held."""
    return (d["commands_per_s"] >= RATE_MIN and d["rtf"] >= RTF_MIN and d["box_held"]
            and d["watchdog_episodes"] is not None and int(float(d["watchdog_episodes"])) == 0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--busy", type=int, default=0, help="busy processes ('while True: pass') beside the runs")
    ap.add_argument("--mode", choices=("realtime", "lockstep"), default="realtime")
    ap.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    ap.add_argument("--controller-prefix", default="", help="command before the controller's, e.g. 'chrt -f 30'")
    ap.add_argument("--plant-prefix", default="", help="command before the plant's, e.g. 'chrt -f 20'")
    ap.add_argument("-p", action="append", default=[], help="controller parameter override name:=value")
    args = ap.parse_args(argv)
    if not (args.seconds > 0 and args.warmup >= 0 and args.runs >= 1 and args.busy >= 0):
        ap.error("--seconds > 0, --warmup >= 0, --runs >= 1 and --busy >= 0")
    passed = []
    with busy(args.busy):
        for k in range(1, args.runs + 1):
            r = run(args.seconds, args.warmup, args.mode, args.domain, [x for p in args.p for x in ("-p", p)],
                    args.controller_prefix, args.plant_prefix)
            for key, v in r.items():
                if key != "log_tail":
                    print(f"{key:20s} {v}")
            if not r["box_held"] or r["law_failures"] not in (None, "0"):
                print("--- plant log tail ---\n" + r["log_tail"][0] + "\n--- controller log tail ---\n"
                      + r["log_tail"][1])
            passed.append(verdict(r))
            print(f"bimanual_run run={k} mode={r['mode']} busy={args.busy} commands_per_s={r['commands_per_s']:.1f} "
                  f"rtf={r['rtf']:.4f} watchdog_episodes={r['watchdog_episodes']} box_held={r['box_held']} "
                  f"box_err_max_m={r['box_err_max_m']:.4f} load_before={r['load_before'][0]:.2f} "
                  f"load_after={r['load_after'][0]:.2f} verdict={'pass' if passed[-1] else 'fail'}", flush=True)
    print(f"summary: {sum(passed)}/{len(passed)} runs: >= {RATE_MIN:.0f} commands/s, RTF >= {RTF_MIN}, "
          f"no watchdog episode, box held ({args.busy} busy process(es))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
