"""The deployed loop (issue 11 target): qv_sim_node + qv_controller_node + qv_dynamics_node as three
processes, as ``ros2 launch qv_ros bringup.launch.py`` starts them, the simulator in realtime mode at
dt = 1 ms. A monitor node in this process records /joint_states, the effort commands and /diagnostics.

Printed: /joint_states and effort-command rates (Hz, after a 1 s warm-up), the real-time factor (simulated
time of the stamps / wall time), the controller's watchdog episodes, the simulator's overruns, the
dynamics node's decimation and missed deadlines, and the RMS tracking error of the minimal coordinates θ
against θ_d(t) next to the same figure of a lock-step run (the library's ``simulate``: same model, law,
gains, reference and duration; the controller counts t from its first state, so does this figure).

    PYTHONPATH=. .venv/bin/python bench/deployed_loop.py [--config config/panda_table.yaml] [--seconds 60]
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
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

NODES = {"qv_controller": "qv_control.ros.controller_node", "qv_dynamics": "qv_dynamics.ros.dynamics_node",
         "qv_sim": "qv_dynamics.ros.sim_node"}


def controller_setup(config: str):
    """(system, law, reference, coordinates spec, q0) as the controller node builds them from ``config``."""
    from qv_control.laws import make_law
    from qv_control.references import SplineReference
    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.ros.params import load_model_config

    P = load_params_file(config)
    c = P["qv_controller"]
    system, doc = load_model_config(c["model_config"])
    lp = {k[len("law_params."):]: v for k, v in c.items() if k.startswith("law_params.")}
    lp = {k: (np.asarray(v, float) if isinstance(v, list) and v and not isinstance(v[0], str) else v)
          for k, v in lp.items()}
    law = make_law(c["law"], system, **lp)
    times = c["reference.times"]
    W = np.asarray(c["reference.waypoints"], float).reshape(len(times), -1)
    ref = SplineReference(times, W, kind=c.get("reference.kind", "quintic"),
                          lambda_=np.asarray(c.get("lambda_desired") or [], float) if c.get("lambda_desired") else None)
    return system, law, ref, lp["coordinates"], np.asarray(doc["initial"]["q"], float)


def theta_rms(system, coords, ref, t, q, skip: float = 0.0) -> float:
    """RMS over samples of ‖θ(q) − θ_d(t)‖ with θ's orientation reference taken at the first sample."""
    from qv_control.coordinates import MinimalCoordinates

    mc = MinimalCoordinates(system, coords)
    zero = np.zeros(system.nv)
    err = []
    from qv_dynamics.errors import QVError

    for ti, qi in zip(t, q):
        try:
            th = mc.evaluate(qi, zero).theta
        except QVError:  # the loop lost the task (orientation beyond the coordinates' chart)
            return float("inf")
        if ti >= skip:
            err.append(float(np.sum((th - ref(ti).theta) ** 2)))
    return float(np.sqrt(np.mean(err))) if err else float("nan")


def lockstep_rms(config: str, seconds: float) -> float:
    from qv_dynamics.sim import simulate

    system, law, ref, coords, q0 = controller_setup(config)
    tr = simulate(system, q0, np.zeros(system.nv), law, seconds, 1e-3, reference=ref)
    return theta_rms(system, coords, ref, tr.t, tr.q, skip=1.0)


class Monitor:
    def __init__(self, node, names: list[str]):
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self.names = names
        self.js: list[tuple[float, float, list]] = []    # (arrival, stamp, positions)
        self.cmd: list[float] = []
        self.diag: dict[str, dict] = {}
        node.create_subscription(JointState, "/joint_states", self.on_js, 100)
        node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                 lambda m: self.cmd.append(time.perf_counter()), 100)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 100)

    def on_js(self, m) -> None:
        self.js.append((time.perf_counter(), m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec, list(m.position),
                        list(m.name)))

    def on_diag(self, m) -> None:
        for s in m.status:
            self.diag[s.name.split(":")[0]] = {kv.key: kv.value for kv in s.values} | {"_message": s.message}


def _start(name: str, config: str, env: dict) -> subprocess.Popen:
    """The node as bringup.launch.py starts it (the controller and dynamics nodes on the simulator's /clock)."""
    sim_time = [] if name == "qv_sim" else ["-p", "use_sim_time:=true"]
    return subprocess.Popen([sys.executable, "-m", NODES[name], "--ros-args", "-r", f"__node:={name}",
                             "--params-file", config, *sim_time], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_line(proc: subprocess.Popen, text: str, timeout: float = 60.0) -> None:
    """Read the node's output until ``text``, then keep draining it in a thread (a full pipe would block
    the node); the lines are kept in ``proc.lines``."""
    import threading

    proc.lines = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"node exited before printing {text!r}")
        proc.lines.append(line)
        if text in line:
            threading.Thread(target=lambda: proc.lines.extend(proc.stdout), daemon=True).start()
            return
    raise TimeoutError(text)


def run_deployed(config: str, seconds: float, domain_id: int) -> dict:
    import rclpy
    from rclpy.context import Context

    from qv_dynamics.ros.runner import make_executor

    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain_id), PYTHONUNBUFFERED="1",
               RCUTILS_LOGGING_BUFFERED_STREAM="0")
    procs = {}
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    node = rclpy.create_node("deployed_monitor", context=ctx)
    ex = make_executor(ctx)
    ex.add_node(node)
    system, _, ref, coords, _ = controller_setup(config)
    mon = Monitor(node, [])
    try:
        for name, ready in (("qv_controller", "law '"), ("qv_dynamics", "model '")):
            procs[name] = _start(name, config, env)
            _wait_line(procs[name], ready)
        procs["qv_sim"] = _start("qv_sim", config, env)
        _wait_line(procs["qv_sim"], "simulating")
        end = time.monotonic() + 60.0
        while not mon.js and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            ex.spin_once(timeout_sec=0.01)
        for _ in range(150):  # the last diagnostics (1 s period)
            ex.spin_once(timeout_sec=0.01)
    finally:
        for p in procs.values():
            p.terminate()
        codes = {k: p.wait(timeout=10) for k, p in procs.items()}
        log_dir = os.environ.get("QV_BENCH_LOGS")
        for k, p in procs.items():
            lines = getattr(p, "lines", [])
            if log_dir:
                Path(log_dir, f"{k}.log").write_text("".join(lines))
            warn = [ln.strip() for ln in lines if "WARN" in ln or "ERROR" in ln]
            if warn:
                print(f"  {k}: {len(warn)} warning/error lines, first: {warn[0][:200]}")
        node.destroy_node()
        ex.shutdown()
        rclpy.try_shutdown(context=ctx)
    return summarize(mon, system, coords, ref, codes)


def summarize(mon: Monitor, system, coords, ref, codes: dict) -> dict:
    from qv_dynamics.ros.messages import JointLayout

    arr = np.array([j[0] for j in mon.js])
    stamps = np.array([j[1] for j in mon.js])
    w0 = arr[0] + 1.0  # warm-up: the first second after the first state
    wend = arr[-1]
    js_rate = np.count_nonzero(arr >= w0) / (wend - w0)
    cmd = np.array(mon.cmd)
    cmd_rate = np.count_nonzero((cmd >= w0) & (cmd <= wend)) / (wend - w0)
    sel = arr >= w0
    rtf = (stamps[sel][-1] - stamps[sel][0]) / (arr[sel][-1] - arr[sel][0])
    layout = JointLayout.from_system(system)
    order = [mon.js[0][3].index(n) for n in layout.names]
    q = np.array([layout.to_q(np.asarray(j[2])[order]) for j in mon.js])
    rms = theta_rms(system, coords, ref, stamps - stamps[0], q, skip=1.0)
    d = mon.diag
    return {"js_hz": js_rate, "cmd_hz": cmd_rate, "rtf": rtf, "theta_rms": rms, "samples": len(mon.js),
            "watchdog_episodes": int(d.get("qv_controller", {}).get("watchdog_episodes", -1)),
            "sim_overruns": int(d.get("qv_sim", {}).get("overruns", -1)),
            "sim_rtf_last": float(d.get("qv_sim", {}).get("real_time_factor", "nan")),
            "dyn_decimation": d.get("qv_dynamics", {}).get("decimation", "?"),
            "dyn_missed": d.get("qv_dynamics", {}).get("missed_deadlines", "?"),
            "dyn_tick_ms": float(d.get("qv_dynamics", {}).get("tick_time_ms_mean", "nan")),
            "ctrl_compute_ms": float(d.get("qv_controller", {}).get("compute_ms_mean", "nan")),
            "exit_codes": codes}


def report(config: str, seconds: float, domain_id: int) -> dict:
    r = run_deployed(config, seconds, domain_id)
    r["lockstep_theta_rms"] = lockstep_rms(config, seconds)
    print(f"\ndeployed loop: sim + controller + dynamics as three processes, realtime, dt = 1 ms, {seconds:g} s "
          f"({Path(config).name})")
    print(f"  /joint_states {r['js_hz']:.1f} Hz, effort commands {r['cmd_hz']:.1f} Hz, real-time factor "
          f"{r['rtf']:.4f} (sim diagnostics: last window {r['sim_rtf_last']:.3f}, overruns {r['sim_overruns']})")
    print(f"  controller: watchdog episodes {r['watchdog_episodes']}, law compute {r['ctrl_compute_ms']:.3f} ms mean; "
          f"dynamics node: decimation {r['dyn_decimation']}, missed deadlines {r['dyn_missed']}, "
          f"tick {r['dyn_tick_ms']:.3f} ms")
    ratio = r["theta_rms"] / r["lockstep_theta_rms"]
    print(f"  θ tracking RMS {r['theta_rms']:.3e} vs lock-step {r['lockstep_theta_rms']:.3e} ({ratio:.2f}x); "
          f"exit codes on SIGTERM {r['exit_codes']}")
    ok = (r["js_hz"] >= 990 and r["cmd_hz"] >= 990 and r["rtf"] >= 0.99 and r["watchdog_episodes"] == 0
          and ratio <= 2.0)
    print(f"  target (>= 990 Hz both, RTF >= 0.99, no watchdog episode, tracking <= 2x lock-step): "
          f"{'MET' if ok else 'NOT met'}")
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "config" / "panda_table.yaml"))
    ap.add_argument("--seconds", type=float, default=60.0)
    args = ap.parse_args(argv)
    report(args.config, args.seconds, (int(os.environ.get("ROS_DOMAIN_ID", "41")) + 7) % 200)
    return 0


if __name__ == "__main__":
    sys.exit(main())
