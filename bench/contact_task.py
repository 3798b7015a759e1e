"""The contact task deployed N times: launch/mujoco.launch.py's processes as it starts them (all at once: the
MuJoCo plant in realtime, the dynamics node behind ``nice``, the controller node ``managed`` and its
``qv_spawner``), with ``--busy K`` busy processes beside them, judged from outside on the plant's F/T topic,
/joint_states and /diagnostics (``bench/contact_judge.py``: what is judged and how).

Per run: the MuJoCo-measured peak normal force against the force limit (must never be exceeded), how the
run ended (done; or a hold with the tool lifted and its drift), the task criteria (touch-down ≤ 1.5× steady,
≥ 80 % within ±5 %, travel ≥ 2 cm, no watchdog episode, force RMS ≤ 0.05 % of the force) and the start-up
(the dynamics node up before/after the plant's real time starts, the longest gap between effort commands in
the first 2 s of real time, the plant's command-timeout holds, the controller's steady-loop instant); in
total: how many runs are safe and how many meet the criteria, and the machine's load. ``--lockstep`` also
runs the same parameters once in one process with the plant in lock-step (the near-exact reference).

    PYTHONPATH=. .venv/bin/python bench/contact_task.py [--config config/ur5_mujoco.yaml] [--runs 20] [--busy 1]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

from contact_judge import Watch, figures, judge, safety, samples  # noqa: E402
from deployed_loop import set_prefixes  # noqa: E402

NODES = {"qv_mujoco": "qv_dynamics.ros.mujoco_node", "qv_dynamics": "qv_dynamics.ros.dynamics_node",
         "qv_controller": "qv_control.ros.controller_node"}
WRENCH = "/qv_mujoco/tool_ft/wrench"
#: command prefixes of the node processes, as mujoco.launch.py's ``controller_prefix`` / ``dynamics_prefix``
#: (the dynamics node's default is the launch file's: a lower priority); ``--prefix NODE=COMMAND`` replaces one
PREFIXES: dict[str, str] = {}
RECORDER_FIRST = False   # --recorder-first: the plant first, the others once this recorder reads its states
EVENT = re.compile(r"\[t=([0-9.]+) s\] (.*)")
SAVE = ""    # --save DIR: each run's samples (npz) and process logs (json) there


def setup(config: str):
    """(all sections' parameters, the controller's, its system) as the controller node reads them."""
    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.ros.params import load_model_config

    P = load_params_file(config)
    c = P["qv_controller"]
    system, _ = load_model_config(c["model_config"])
    return P, c, system


def _start(cmd: list, env: dict, t0: float) -> subprocess.Popen:
    """A process whose output lines are kept with their wall time since ``t0`` (``proc.lines``)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    proc.lines = []
    threading.Thread(target=lambda: [proc.lines.append((time.monotonic() - t0, ln.rstrip())) for ln in proc.stdout],
                     daemon=True).start()
    return proc


def _node_cmd(name: str, config: str) -> list:
    """The node as mujoco.launch.py starts it (the controller managed, both others on the plant's /clock)."""
    import shlex

    from qv_dynamics.ros.runner import OBSERVER_PREFIX

    extra = {"qv_mujoco": [], "qv_dynamics": ["-p", "use_sim_time:=true"],
             "qv_controller": ["-p", "use_sim_time:=true", "-p", "managed:=true"]}[name]
    prefix = shlex.split(PREFIXES.get(name, OBSERVER_PREFIX if name == "qv_dynamics" else ""))
    return [*prefix, sys.executable, "-m", NODES[name], "--ros-args", "-r", f"__node:={name}", "--params-file",
            config, *extra]


def _first(proc, text: str) -> float:
    return next((t for t, ln in getattr(proc, "lines", []) if text in ln), float("nan"))


def run_deployed(config: str, seconds: float, domain_id: int) -> dict:
    """One run of the module doc: the launch's processes, until the task is done or held (+1.5 s) or
    ``seconds`` of wall time after the first state."""
    import rclpy
    from rclpy.context import Context

    from qv_dynamics.ros.runner import make_executor

    _, c, system = setup(config)
    from qv_control.ros.launch_actions import discovery_env

    env = discovery_env(dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain_id), PYTHONUNBUFFERED="1",
                             RCUTILS_LOGGING_BUFFERED_STREAM="0"))   # the nodes as the launch file starts them
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    node = rclpy.create_node("contact_task_watch", context=ctx)
    ex = make_executor(ctx)
    ex.add_node(node)
    watch = Watch(node, WRENCH)
    procs, t0 = {}, time.monotonic()
    try:
        for name in NODES:                      # as ros2 launch: all at once
            procs[name] = _start(_node_cmd(name, config), env, t0)
            while RECORDER_FIRST and name == "qv_mujoco" and not watch.js and time.monotonic() < t0 + 120.0:
                ex.spin_once(timeout_sec=0.01)  # (the recorder's DDS discovery of the plant done first)
        procs["qv_spawner"] = _start([sys.executable, "-m", "qv_control.ros.spawner", "qv_controller"], env, t0)
        end, t_end = t0 + seconds + 120.0, None
        while time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
            if watch.js and end > time.monotonic() + seconds + 1:
                end = time.monotonic() + seconds        # the wall-time budget counts from the first state
            if t_end is None and watch.phase in ("done", "hold"):
                t_end = time.monotonic() + 1.5
            if t_end is not None and time.monotonic() > t_end:
                break
        for _ in range(150):                    # the last diagnostics (once a second)
            ex.spin_once(timeout_sec=0.01)
        alive = {k: p.poll() is None for k, p in procs.items() if k != "qv_spawner"}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        codes = {k: p.wait(timeout=20) for k, p in procs.items()}
        node.destroy_node()
        ex.shutdown()
        rclpy.try_shutdown(context=ctx)
    return _summary(watch, c, system, procs, alive, codes, t0)


def _summary(watch, c, system, procs, alive, codes, t0) -> dict:
    """Figures, safety and start-up of a run (module doc)."""
    events = [(float(m.group(1)), m.group(2)) for _, ln in procs["qv_controller"].lines
              if (m := EVENT.search(ln))]
    hold_t = next((t for t, e in events if e.startswith("safe hold")), None)
    a = samples(watch, c["task.frame"], system)
    if SAVE:                                   # the run's samples and logs, for a closer look
        import json

        k = len(list(Path(SAVE).glob("run*.npz"))) + 1
        np.savez(Path(SAVE) / f"run{k:02d}.npz", samples=np.zeros((0, 5)) if a is None else a,
                 commands=np.array(watch.cmd_wall) - t0)
        (Path(SAVE) / f"run{k:02d}.json").write_text(json.dumps(
            {name: p.lines for name, p in procs.items()} | {"diag": watch.diag, "plant": watch.plant}, indent=0))
    out = figures(a, c, system, watch.diag)
    t0_task = out.get("t0", float("nan"))
    out.update(safety(a, c, t0_task, float(watch.plant.get("contact_force_peak_n", "0") or 0), hold_t))
    real_time = _first(procs["qv_mujoco"], "first effort command")
    cmd = np.array(watch.cmd_wall) - t0
    early = cmd[(cmd >= real_time) & (cmd <= real_time + 2.0)]
    out.update(phase=watch.phase, events=[e for _, e in events], alive=alive, exit_codes=codes,
               watchdog_episodes=watch.diag.get("watchdog_episodes", "?"),
               hold_episodes=watch.plant.get("command_timeout_episodes", "?"),
               spawner=_first(procs["qv_spawner"], "is active"),
               dynamics_after_real_time=_first(procs["qv_dynamics"], "model '") - real_time,
               early_gap_ms=1e3 * float(np.diff(early).max()) if early.size > 1 else float("nan"),
               steady_after_s=float(watch.diag.get("steady_at_s", "nan")))   # plant time: 0 at its first command
    return out


def lockstep_nodes(ctx, P: dict, plant_cls=None, command_delay: float = 0.0, **plant_params) -> tuple:
    """(plant, controller, executor) of the parameters ``P`` in one process, the plant in lock-step (one period
    per command; ``plant_params`` over its parameters), each command acting from the state it answers
    (``command_delay`` 0: no latency compensation); the plant's first state is out once the controller reads
    its F/T topic."""
    from qv_control.ros.bringup import to_parameters
    from qv_control.ros.controller_node import ControllerNode
    from qv_dynamics.ros.mujoco_node import MujocoNode
    from qv_dynamics.ros.runner import make_executor

    plant = (plant_cls or MujocoNode)("qv_mujoco", context=ctx, parameter_overrides=to_parameters(
        dict(P["qv_mujoco"], mode="lockstep", lockstep_resend=0.05, **plant_params)))
    ctrl = ControllerNode("qv_controller", context=ctx, parameter_overrides=to_parameters(
        dict(P["qv_controller"], use_sim_time=True, watchdog_timeout=5.0, command_delay=command_delay,
             **{"task.ft_timeout": 5.0})))
    ex = make_executor(ctx)
    for n in (plant, ctrl):
        ex.add_node(n)
    return plant, ctrl, ex


def kick(ex, plant) -> None:
    """The lock-step plant's first state, once the controller reads its F/T topic (a handshake, 5 s at most)."""
    end = time.monotonic() + 5.0
    while time.monotonic() < end and plant.pub_wrench.get_subscription_count() < 1:
        ex.spin_once(timeout_sec=0.01)
    plant.publish_state()


def run_lockstep(config: str, seconds: float, domain_id: int) -> dict:
    """The same parameters in one process, the plant in lock-step (one period per command)."""
    import rclpy
    from rclpy.context import Context

    P, c, system = setup(config)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    nodes = []
    try:
        plant, ctrl, ex = lockstep_nodes(ctx, P)
        nodes += [plant, ctrl]
        mon = rclpy.create_node("contact_task_watch", context=ctx)
        nodes.append(mon)
        watch = Watch(mon, WRENCH)
        ex.add_node(mon)
        kick(ex, plant)
        end = time.monotonic() + 40 * seconds
        while plant.plant.time < seconds and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
        for _ in range(50):
            ex.spin_once(timeout_sec=0.01)
        diag = {k: str(v) for k, v in ctrl.task_layer.diagnostics().items()}
        ex.shutdown()
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return figures(samples(watch, c["task.frame"], system), c, system, diag)


def _line(k: int, d: dict, safe: dict, task: dict) -> str:
    f = lambda key, s=1.0, fmt=".3g": format(s * d.get(key, np.nan), fmt)  # noqa: E731
    return (f"{k:3d} {'SAFE' if all(safe.values()) else 'UNSAFE'} peak {f('peak_n', fmt='.1f')} N "
            f"({f('peak_over_limit', 100, '.0f')} % of limit; plant {f('plant_peak_n', fmt='.1f')} N, samples "
            f"{f('sample_peak_n', fmt='.1f')} N at t={f('sample_peak_t', fmt='.3f')} s) end {d.get('phase')}"
            f"{'' if d.get('phase') != 'hold' else ' drift ' + f('drift_m', 1e3, '.1f') + ' mm'} | task "
            f"{sum(task.values())}/{len(task)}: touch {f('peak_ratio')}x in-band {f('in_band', 100, '.0f')} % "
            f"travel {f('travel_m', 100, '.1f')} cm rms {f('force_rms_rel', 100, '.3f')} % wd "
            f"{d.get('watchdog_episodes')} | start: dynamics {f('dynamics_after_real_time', fmt='+.1f')} s, gap "
            f"{f('early_gap_ms', fmt='.0f')} ms, steady +{f('steady_after_s', fmt='.2f')} s, holds "
            f"{d.get('hold_episodes')}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "demo_mujoco.yaml"))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--busy", type=int, default=0, help="busy processes ('while True: pass') beside the run")
    ap.add_argument("--seconds", type=float, default=40.0, help="wall-time budget of a run after its first state")
    ap.add_argument("--lockstep", action="store_true", help="also run the lock-step reference once")
    ap.add_argument("--save", default="", metavar="DIR", help="keep each run's samples and process logs in DIR")
    ap.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    ap.add_argument("--prefix", action="append", default=[], metavar="NODE=COMMAND",
                    help="run a node behind a command, as mujoco.launch.py's controller_prefix / dynamics_prefix do, "
                         "e.g. 'qv_controller=taskset -c 1' (the dynamics node's default: 'nice -n 10')")
    ap.add_argument("--recorder-first", action="store_true",
                    help="start the plant first and the other nodes once this recorder reads its states (no DDS "
                         "participant discovered while the task runs)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.busy < 0:
        ap.error("--runs >= 1 and --busy >= 0")
    set_prefixes(ap, args.prefix, NODES, PREFIXES)
    global RECORDER_FIRST
    RECORDER_FIRST = args.recorder_first
    if args.save:
        global SAVE
        SAVE = args.save
        Path(SAVE).mkdir(parents=True, exist_ok=True)
    release = setup(args.config)[1].get("task.release_at", -1.0)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    rows, loads = [], []
    try:
        print(f"{args.config}: {args.runs} run(s), {args.busy} busy process(es), {os.cpu_count()} cores")
        for k in range(1, args.runs + 1):
            loads.append(os.getloadavg()[0])
            d = run_deployed(args.config, args.seconds, args.domain)
            safe, task = judge(d, release)
            rows.append((d, safe, task))
            print(_line(k, d, safe, task), flush=True)
            if not all(task.values()):
                print("      missed: " + ", ".join(n for n, v in task.items() if not v) + "; controller: "
                      + "; ".join(d.get("events", [])[-4:]), flush=True)
        lock = run_lockstep(args.config, 14.0, args.domain) if args.lockstep else None
    finally:
        for b in busy:
            b.kill()
            b.wait()
    n_safe = sum(all(s.values()) for _, s, _ in rows)
    n_task = sum(all(t.values()) for _, _, t in rows)
    rms = [d.get("force_rms_rel", np.nan) for d, _, _ in rows]
    print(f"total: {n_safe}/{len(rows)} safe (peak within the limit, ended done or held lifted), {n_task}/{len(rows)} "
          f"meet every task criterion; largest peak {max(d.get('peak_over_limit', np.nan) for d, _, _ in rows):.0%} "
          f"of the limit; force RMS median {100 * np.nanmedian(rms):.3f} %; load (1 min) at the runs' starts "
          f"{min(loads):.1f}-{max(loads):.1f} with {args.busy} busy process(es)")
    for name in rows[0][2]:
        print(f"  {sum(t[name] for _, _, t in rows):3d}/{len(rows)}  {name}")
    if lock is not None:
        print("lock-step reference: " + ", ".join(f"{k} {lock.get(k, np.nan):.4g}" for k in (
            "peak_ratio", "in_band", "travel_m", "force_rms_rel", "path_rms_m")))
    return 0 if n_safe == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
