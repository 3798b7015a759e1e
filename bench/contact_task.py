"""The contact task deployed: launch/mujoco.launch.py's three nodes (MuJoCo plant in realtime, dynamics,
controller running the task of its ``task.*`` parameters) as separate processes, judged from outside on the
plant's F/T topic and /joint_states, beside the lock-step run of the same parameters in one process.

Judged (the deployed targets): contact made and held (from the first sample above ``contact_on``
to the last, ≥ 99 % of the samples above ``contact_off``, until the planned release, no safe hold);
touch-down peak (first 0.5 s) ≤ 1.5 × the steady force (the median after it); ≥ 80 % of the samples after
the first 0.5 s in contact within ±5 % of it; tool travel ≥ 2 cm while in contact; no watchdog episode in
the controller's /diagnostics; every process alive at the end.
Printed beside the lock-step run: force RMS error against the commanded profile (÷ force; the 50 ms after
each commanded step left out: a step's transient, not regulation), path RMS error
against the planned trace, touch-down peak (÷ force); deployed within 2× of lock-step.

The commanded profile and the planned trace are timed from the controller's own first-touch instant (its
/diagnostics ``task_t_contact_s``, the stamp of the state at which it detected the touch), as the task times
them; the first F/T sample above ``contact_on`` only bounds the contact segment. Timing the trace from that
sample instead charges the judge's own offset to the controller (the circle runs at r ω = 6.3 cm/s: 1 ms of
offset is 63 µm of path error).

The normal force is f_n = −(R f)_z with f the sensor's wrench (robot on environment, tool axes) and R the tool
orientation from the model's kinematics at the joint state of the same stamp; the tool position likewise.

    PYTHONPATH=. .venv/bin/python bench/contact_task.py [--config config/demo_mujoco.yaml] [--seconds 30]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

from deployed_loop import _wait_line, cpu_seconds, set_prefixes  # noqa: E402

NODES = {"qv_controller": "qv_control.ros.controller_node", "qv_dynamics": "qv_dynamics.ros.dynamics_node",
         "qv_mujoco": "qv_dynamics.ros.mujoco_node"}
WRENCH = "/qv_mujoco/tool_ft/wrench"


class Watch:
    """Records /joint_states (stamp, q), the F/T wrench (stamp, f) and the controller's /diagnostics values."""

    def __init__(self, node):
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        self.js, self.ft, self.diag = [], [], {}
        node.create_subscription(JointState, "/joint_states", self.on_js, 100)
        node.create_subscription(WrenchStamped, WRENCH, self.on_ft, qos_profile_sensor_data)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 10)

    @staticmethod
    def _t(msg) -> float:
        return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec

    def on_js(self, msg) -> None:
        self.js.append((self._t(msg), list(msg.name), np.asarray(msg.position, float)))

    def on_ft(self, msg) -> None:
        f = msg.wrench.force
        self.ft.append((self._t(msg), np.array([f.x, f.y, f.z])))

    def on_diag(self, msg) -> None:
        for s in msg.status:
            if "controller" in s.name:
                self.diag.update({kv.key: kv.value for kv in s.values})


def setup(config: str):
    """(params of the controller, system, task of the parameters) as the controller node reads them."""
    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.ros.params import load_model_config

    P = load_params_file(config)
    c = P["qv_controller"]
    system, _ = load_model_config(c["model_config"])
    return P, c, system


def figures(watch: Watch, c: dict, system) -> dict:
    """The judged figures (module doc) from the recorded topics; ``c``: the controller's parameters."""
    from qv_control.task import CircleTrace, ForceProfile, WaypointTrace

    frame = c["task.frame"]
    names = list(system.velocity_names)
    js = {}
    for t, nm, pos in watch.js:
        js[round(t, 6)] = pos[[nm.index(n) for n in names]]
    rows = []
    for t, f in watch.ft:
        q = js.get(round(t, 6))
        if q is None:
            continue
        oMf = system.frame_placement(q, frame)
        rows.append((t, -float((oMf.rotation @ f)[2]), *oMf.translation))
    if not rows:
        return {"contact": False, "reason": "no F/T samples with a matching joint state"}
    a = np.array(sorted(rows))
    t, fn, p = a[:, 0], a[:, 1], a[:, 2:4]
    on = np.nonzero(fn > c.get("task.contact_on", 2.0))[0]
    if not on.size:
        return {"contact": False, "reason": f"no contact (max f_n {fn.max():.2f} N)"}
    tc, te = t[on[0]], t[on[-1]]
    seg = (t >= tc) & (t <= te)
    t_task = float(watch.diag.get("task_t_contact_s", "nan"))     # the task's timeline (module doc)
    t0 = t_task if np.isfinite(t_task) else tc
    steady = seg & (t >= tc + 0.5)
    Fs = float(np.median(fn[steady])) if steady.any() else float("nan")
    force = float(c.get("task.force", 10.0))
    steps = c.get("task.force_steps") or []
    prof = ForceProfile(force, list(zip(steps[::2], steps[1::2])))
    rel = c.get("task.release_at", -1.0)
    w = steady & (t < t0 + rel) if rel and rel > 0 else steady
    for tau_i in steps[::2]:          # the 50 ms after each commanded step are its transient, not regulation
        w &= ~((t >= t0 + tau_i) & (t < t0 + tau_i + 0.05))
    fd = np.array([prof(x - t0) for x in t[w]])
    q0 = np.asarray(c["task.start_q"], float)
    p0 = system.frame_placement(q0, frame).translation
    settle = c.get("task.settle", 0.35)
    if c.get("task.trace", "circle") == "circle":
        tr = CircleTrace(p0, c.get("task.radius", 0.04), c.get("task.period", 4.0), c.get("task.circle_ramp", 0.6))
    else:
        wp = c["task.waypoints"]
        tr = WaypointTrace(p0, list(zip(wp[::2], wp[1::2])), c.get("task.segment_time", 1.0))
    pw = w & (t >= t0 + settle + 0.5)
    perr = np.array([np.linalg.norm(p[i] - tr(t[i] - t0 - settle)[0]) for i in np.nonzero(pw)[0]])
    return {"contact": True, "t_contact": float(tc), "contact_s": float(te - tc),
            "touch_detect_ms": 1e3 * float(t0 - tc),
            "held": float(np.mean(fn[seg] > c.get("task.contact_off", 0.5))),
            "peak_ratio": float(fn[seg & (t < tc + 0.5)].max() / Fs), "peak_over_force": float(fn[seg].max() / force),
            "steady_force": Fs, "in_band": float(np.mean(np.abs(fn[steady] - Fs) <= 0.05 * Fs)),
            "travel_m": float(np.sum(np.linalg.norm(np.diff(p[seg], axis=0), axis=1))),
            "force_rms_rel": float(np.sqrt(np.mean((fn[w] - fd) ** 2)) / force),
            "path_rms_m": float(np.sqrt(np.mean(perr ** 2))) if perr.size else float("nan"),
            "watchdog_episodes": int(watch.diag.get("watchdog_episodes", "0")),
            "ft_stale_episodes": int(watch.diag.get("ft_stale_episodes", "0")),
            "phase": watch.diag.get("task_phase", "?")}


def run_lockstep(config: str, seconds: float, domain_id: int) -> dict:
    """The same parameters in one process, the plant in lock-step (one period per command)."""
    import rclpy
    from rclpy.context import Context

    from qv_control.ros.bringup import to_parameters
    from qv_control.ros.controller_node import ControllerNode
    from qv_dynamics.ros.mujoco_node import MujocoNode
    from qv_dynamics.ros.runner import make_executor

    P, c, system = setup(config)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    nodes = []
    try:
        plant = MujocoNode("qv_mujoco", context=ctx, parameter_overrides=to_parameters(
            dict(P["qv_mujoco"], mode="lockstep", lockstep_resend=0.05)))
        nodes.append(plant)
        nodes.append(ControllerNode("qv_controller", context=ctx, parameter_overrides=to_parameters(
            # lock-step: each command acts from the state it answers (no latency to compensate)
            dict(c, use_sim_time=True, watchdog_timeout=5.0, command_delay=0.0, **{"task.ft_timeout": 5.0}))))
        mon = rclpy.create_node("contact_task_watch", context=ctx)
        nodes.append(mon)
        watch = Watch(mon)
        ex = make_executor(ctx)
        for n in nodes:
            ex.add_node(n)
        end = time.monotonic() + 5.0
        while time.monotonic() < end and plant.pub_wrench.get_subscription_count() < 1:
            ex.spin_once(timeout_sec=0.01)
        plant.publish_state()
        end = time.monotonic() + 40 * seconds
        while plant.plant.time < seconds and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
        for _ in range(50):
            ex.spin_once(timeout_sec=0.01)
        watch.diag.update({k: str(v) for k, v in nodes[1].task_layer.diagnostics().items()})
        watch.diag["watchdog_episodes"] = str(nodes[1].stats["watchdog_episodes"])
        ex.shutdown()
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)
    return figures(watch, c, system)


#: command prefixes of the node processes, as mujoco.launch.py's ``controller_prefix`` / ``dynamics_prefix``
#: (the dynamics node's default is the launch file's: a lower priority); ``--prefix NODE=COMMAND`` replaces one
PREFIXES: dict[str, str] = {}


def _start(name: str, config: str, env: dict) -> subprocess.Popen:
    import shlex

    from qv_dynamics.ros.runner import OBSERVER_PREFIX

    sim_time = [] if name == "qv_mujoco" else ["-p", "use_sim_time:=true"]
    prefix = shlex.split(PREFIXES.get(name, OBSERVER_PREFIX if name == "qv_dynamics" else ""))
    return subprocess.Popen([*prefix, sys.executable, "-m", NODES[name], "--ros-args", "-r", f"__node:={name}",
                             "--params-file", config, *sim_time], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run_deployed(config: str, seconds: float, domain_id: int) -> dict:
    """The three nodes as processes, the plant in realtime, ``seconds`` of wall time (module doc)."""
    import rclpy
    from rclpy.context import Context

    from qv_dynamics.ros.runner import make_executor

    _, c, system = setup(config)
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain_id), PYTHONUNBUFFERED="1",
               RCUTILS_LOGGING_BUFFERED_STREAM="0")
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    node = rclpy.create_node("contact_task_watch", context=ctx)
    ex = make_executor(ctx)
    ex.add_node(node)
    watch = Watch(node)
    procs = {}
    try:
        for name, ready in (("qv_controller", "law '"), ("qv_dynamics", "model '"), ("qv_mujoco", "MuJoCo plant")):
            procs[name] = _start(name, config, env)
            _wait_line(procs[name], ready)
        cpu0, wall0 = cpu_seconds(procs), time.perf_counter()
        while time.perf_counter() < wall0 + seconds:
            ex.spin_once(timeout_sec=0.01)
        cpu = {k: (v - cpu0[k]) / (time.perf_counter() - wall0) for k, v in cpu_seconds(procs).items()}
        for _ in range(150):
            ex.spin_once(timeout_sec=0.01)
        alive = {k: p.poll() is None for k, p in procs.items()}
    finally:
        for p in procs.values():
            p.terminate()
        codes = {k: p.wait(timeout=10) for k, p in procs.items()}
        node.destroy_node()
        ex.shutdown()
        rclpy.try_shutdown(context=ctx)
    out = figures(watch, c, system)
    events = [ln.strip().split("] ", 2)[-1] for ln in getattr(procs.get("qv_controller"), "lines", []) if "[t=" in ln]
    out.update(alive=alive, exit_codes=codes, cpu=cpu, events=events, diag=dict(watch.diag),
               sim_seconds=(watch.js[-1][0] - watch.js[0][0]) if watch.js else 0.0)
    return out


def judge(d: dict, lock: dict, release_at: float) -> dict:
    """The targets of the module doc: name -> passed (held: until the planned release, no safe hold)."""
    held = d.get("contact", False) and d.get("held", 0) >= 0.99 and not any("safe hold" in e for e in d["events"])
    if release_at > 0:
        held = held and d.get("contact_s", 0) >= release_at - 0.2
    ok = {"contact made and held": held,
          "touch-down peak <= 1.5x steady": d.get("peak_ratio", np.inf) <= 1.5,
          ">= 80 % within +-5 %": d.get("in_band", 0) >= 0.8,
          "travel in contact >= 2 cm": d.get("travel_m", 0) >= 0.02,
          "no watchdog episode": d.get("watchdog_episodes", 1) == 0,
          "every process alive": all(d.get("alive", {}).values()) and bool(d.get("alive"))}
    for k in ("force_rms_rel", "path_rms_m"):
        ok[f"{k} within 2x lock-step"] = d.get(k, np.inf) <= 2 * lock.get(k, 0)
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "demo_mujoco.yaml"))
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    ap.add_argument("--prefix", action="append", default=[], metavar="NODE=COMMAND",
                    help="run a node behind a command, as mujoco.launch.py's controller_prefix / dynamics_prefix do, "
                         "e.g. 'qv_controller=taskset -c 1' (the dynamics node's default: 'nice -n 10')")
    args = ap.parse_args(argv)
    set_prefixes(ap, args.prefix, NODES, PREFIXES)
    lock = run_lockstep(args.config, min(args.seconds, 14.0), args.domain)
    dep = run_deployed(args.config, args.seconds, args.domain)
    print(f"{'':28s}{'deployed':>12s}{'lock-step':>12s}")
    for k, scale, unit in (("touch_detect_ms", 1, "ms"), ("force_rms_rel", 100, "%"), ("path_rms_m", 1e3, "mm"),
                           ("peak_over_force", 1, "x F"),
                           ("peak_ratio", 1, "x steady"), ("in_band", 100, "%"), ("travel_m", 100, "cm")):
        print(f"{k + ' [' + unit + ']':28s}{scale * dep.get(k, np.nan):12.4g}{scale * lock.get(k, np.nan):12.4g}")
    print(f"simulated {dep.get('sim_seconds', 0):.1f} s in {args.seconds:.0f} s wall; cpu {dep.get('cpu')}; "
          f"exit codes {dep.get('exit_codes')}; phase at the end {dep.get('phase')}")
    for ev in dep.get("events", []):
        print(f"  controller: {ev}")
    print("  controller diagnostics: " + ", ".join(f"{k} {dep.get('diag', {}).get(k, '?')}" for k in (
        "command_delay_ms", "commands_acted_at_once", "latency_prediction_stopped", "commands", "duplicate_states")))
    verdict = judge(dep, lock, setup(args.config)[1].get("task.release_at", -1.0))
    for k, v in verdict.items():
        print(f"  {'PASS' if v else 'FAIL'}  {k}")
    return 0 if all(verdict.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
