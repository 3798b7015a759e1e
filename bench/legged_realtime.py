"""ANYmal C as ``launch/anymal.launch.py`` deploys it, each node its own process, from ``config/anymal.yaml``:
qv_legged_mujoco_node (MuJoCo floor plant, ``mode:=realtime`` at dt = 1 ms), qv_legged_controller_node
(``use_sim_time:=true``, ``managed:=true``) and its qv_spawner (configure, then activate on the first state),
all started at once, beside ``--busy K`` busy processes; ``--controller-prefix`` / ``--plant-prefix`` as the
launch arguments of those names. A monitor node in this process (``realtime_run.py``) waits for the first
command, reads /odom (one in five) and the /diagnostics.

Per run, after the first command and a warm-up (default 2 s), over ``--seconds``: the effort commands the plant
received per wall second and per simulated second and the real-time factor (the plant's /diagnostics totals),
the controller's watchdog episodes, safe commands and law failures (totals, start-up included; the watchdog
episodes also from the last /diagnostics before the window), the plant's command-timeout holds, and the load
average before and after; the log lines of the activation, the first command, watchdog episodes and drive holds
when a run misses a criterion.

Standing: over the whole run (from the plant's first /odom to the end of the measured window, the plan's
body shift and step of the left front foot included) the base height (/odom z above the floor) stays above
70 % of its first value, and the base tilt (the angle between the base's z axis and the vertical,
arccos(1 - 2(qx² + qy²)) of the /odom quaternion) stays below 0.3 rad. Printed beside: the largest horizontal
distance of the base from its first position (the plan's body shift: it ran).

The verdict of a run: ≥ 990 commands/s, RTF ≥ 0.99, no watchdog episode (in the whole run), standing. The
script prints one ``legged_run`` line per run (key=value) and a summary; it exits 0 whatever the verdict, 2 on
bad arguments.

    PYTHONPATH=. .venv/bin/python bench/legged_realtime.py [--seconds 30] [--runs 3] [--busy K] [--mode realtime]
        [--controller-prefix 'chrt -f 30' --plant-prefix 'chrt -f 20']
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
CONFIG = ROOT / "config" / "anymal.yaml"
PLANT, CONTROLLER = "qv_legged_mujoco", "qv_legged_controller"
HEIGHT_MIN, TILT_MAX = 0.7, 0.3              # standing: z > 70 % of the first z, tilt < 0.3 rad
RATE_MIN, RTF_MIN = 990.0, 0.99

from realtime_run import busy, rate_figures, run_nodes, start, start_node  # noqa: E402


def _start_procs(mode: str, controller_prefix: str = "", plant_prefix: str = ""):
    """The launch file's three processes, all at once (as ``ros2 launch``); the controller behind
    ``controller_prefix`` (e.g. ``chrt -f 30``), the plant behind ``plant_prefix``."""
    def go(env: dict) -> dict:
        ctrl = start_node("qv_control.ros.legged_controller_node", CONTROLLER, CONFIG, env, "-p",
                          "use_sim_time:=true", "-p", "managed:=true", prefix=controller_prefix.split())
        return {"plant": start_node("qv_dynamics.ros.legged_mujoco_node", PLANT, CONFIG, env, "-p", f"mode:={mode}",
                                    prefix=plant_prefix.split()),
                "controller": ctrl,
                "spawner": start([sys.executable, "-m", "qv_control.ros.spawner", CONTROLLER], env)}
    return go


def standing(odom: np.ndarray, t_end: float) -> dict:
    """Base height and tilt over the run up to ``t_end`` (wall: the odometry received by then), judged as the
    module doc says; the largest horizontal distance of the base from its first position (the plan's body
    shift)."""
    if len(odom) == 0:
        return {"standing": False, **dict.fromkeys(("z0_m", "z_min_m", "tilt_max_rad", "shift_max_m"), float("nan"))}
    od = odom[odom[:, 8] <= t_end]
    z = od[:, 3]
    tilt = np.arccos(np.clip(1.0 - 2.0 * (od[:, 4] ** 2 + od[:, 5] ** 2), -1.0, 1.0))
    z0 = float(odom[0, 3])
    ok = bool(z.min() > HEIGHT_MIN * z0 and tilt.max() < TILT_MAX)
    shift = np.linalg.norm(od[:, 1:3] - odom[0, 1:3], axis=1)     # the plan's body shift: it ran
    return {"standing": ok, "z0_m": z0, "z_min_m": float(z.min()), "tilt_max_rad": float(tilt.max()),
            "shift_max_m": float(shift.max()), "sim_time_s": float(od[-1, 0] - od[0, 0])}


def watchdog_in_window(diag_log: list, w0: float) -> int | None:
    """Watchdog episodes since the controller's last /diagnostics received before ``w0`` (so from at most 1 s
    before the measured window): the count without the start-up's."""
    ctrl = [(wall, int(float(v["watchdog_episodes"]))) for wall, name, v in diag_log
            if name.endswith(": controller") and "watchdog_episodes" in v]
    if not ctrl:
        return None
    before = [n for wall, n in ctrl if wall <= w0]
    return ctrl[-1][1] - (before[-1] if before else 0)


def events(logs: dict) -> list:
    """The log lines of the activation, the first command, watchdog episodes, resumptions and drive holds."""
    keys = ("activated", "first command sent", "watchdog:", "resumed", "hold", "first effort command", "refused")
    return [f"{name}: {ln.strip()}" for name, text in logs.items() for ln in text.splitlines()
            if any(k in ln for k in keys)]


def run(seconds: float, warmup: float, mode: str, domain: int, controller_prefix: str = "",
        plant_prefix: str = "") -> dict:
    r = run_nodes(_start_procs(mode, controller_prefix, plant_prefix), seconds, warmup, domain, "legged_monitor",
                  "/odom")
    out = {"mode": mode, "controller_prefix": controller_prefix, "plant_prefix": plant_prefix,
           "first_command": r.first_command, **rate_figures(r),
           "watchdog_in_window": watchdog_in_window(r.mon.diag_log, r.w0)}
    out.update(standing(np.array(r.mon.odom).reshape(-1, 9), r.t_end))
    plant = r.mon.status("plant")
    spawn = r.logs["spawner"].strip().splitlines()
    out.update(holds=plant.get("command_timeout_episodes"), dropped_real_time_s=plant.get("dropped_real_time_s"),
               clipped_commands=plant.get("clipped_commands"), spawner=spawn[-1] if spawn else "",
               logs=r.logs)
    return out


def verdict(d: dict) -> dict:
    """The criteria of the module doc, each True or False."""
    return {"rate": d["commands_per_s"] >= RATE_MIN, "rtf": bool(d["rtf"] >= RTF_MIN),
            "watchdog": d["watchdog_episodes"] is not None and int(float(d["watchdog_episodes"])) == 0,
            "standing": d["standing"]}


def line(k: int, d: dict, ok: dict) -> str:
    """The greppable line of a run."""
    return (f"legged_run run={k} mode={d['mode']} commands_per_s={d['commands_per_s']:.1f} rtf={d['rtf']:.4f} "
            f"watchdog_episodes={d['watchdog_episodes']} watchdog_in_window={d['watchdog_in_window']} "
            f"safe_commands={d['safe_commands']} "
            f"law_failures={d['law_failures']} standing={'yes' if d['standing'] else 'no'} "
            f"z0_m={d['z0_m']:.3f} z_min_m={d['z_min_m']:.3f} tilt_max_rad={d['tilt_max_rad']:.3f} "
            f"shift_max_m={d['shift_max_m']:.3f} "
            f"holds={d['holds']} load_before={d['load_before'][0]:.2f} load_after={d['load_after'][0]:.2f} "
            f"verdict={'pass' if all(ok.values()) else 'fail'}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measured wall seconds after the warm-up")
    ap.add_argument("--warmup", type=float, default=2.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--busy", type=int, default=0, help="busy processes ('while True: pass') beside the runs")
    ap.add_argument("--mode", choices=("realtime", "lockstep"), default="realtime")
    ap.add_argument("--controller-prefix", default="", help="command before the controller's (as the launch "
                    "argument controller_prefix), e.g. 'chrt -f 30' for a realtime process (root or CAP_SYS_NICE)")
    ap.add_argument("--plant-prefix", default="", help="command before the plant's, e.g. 'chrt -f 20'")
    ap.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    args = ap.parse_args(argv)
    if not (args.seconds > 0 and args.warmup >= 0 and args.runs >= 1 and args.busy >= 0):
        ap.error("--seconds > 0, --warmup >= 0, --runs >= 1 and --busy >= 0")
    print(f"{CONFIG.name}: {args.runs} run(s) of {args.seconds:g} s ({args.mode}), {args.busy} busy process(es), "
          f"{os.cpu_count()} cores", flush=True)
    passed = []
    with busy(args.busy):
        for k in range(1, args.runs + 1):
            d = run(args.seconds, args.warmup, args.mode, args.domain, args.controller_prefix, args.plant_prefix)
            ok = verdict(d)
            passed.append(all(ok.values()))
            for key, v in d.items():
                if key != "logs":
                    print(f"  {key:20s} {v}")
            if not d["first_command"] or not d["standing"] or d["law_failures"] not in (None, "0"):
                for name, log in d["logs"].items():
                    print(f"--- {name} log tail ---\n{log[-800:]}")
            elif not all(ok.values()):
                print("\n".join(["  events:", *events(d["logs"])[:20]]))
            print(line(k, d, ok), flush=True)
    print(f"summary: {sum(passed)}/{len(passed)} runs: >= {RATE_MIN:.0f} commands/s, RTF >= {RTF_MIN}, "
          "no watchdog episode, standing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
