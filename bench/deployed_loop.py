"""The deployed loop: qv_sim_node + qv_controller_node + qv_dynamics_node as three
processes, as ``ros2 launch qv_ros bringup.launch.py`` starts them, the simulator in realtime mode at
dt = 1 ms. A monitor node in this process records /joint_states, the effort commands and /diagnostics.

Printed (after a 1 s warm-up): /joint_states published and effort commands received, counted by the
simulator over the wall-clock stamps of its diagnostics, and /joint_states received here; the real-time
factor (simulated per wall second, same source), each node's CPU use, the controller's watchdog episodes,
the simulator's overruns, its pacing thread's mean wake-up latency and whether its stepper is compiled,
the dynamics node's decimation and missed deadlines, and the RMS tracking error of the minimal coordinates
θ against θ_d(t) next to the same figure of a lock-step run (the library's ``simulate``: same model, law,
gains, reference and duration; the controller counts t from its first state, so does this figure).

    PYTHONPATH=. .venv/bin/python bench/deployed_loop.py [--config config/panda_table.yaml] [--seconds 60]

``--schedule`` also records the controller's ~/command_stamped (one more publish per tick for it) and prints
the age of the command the simulator applied at each step and lock-step replays of that schedule without and
with the controller's latency compensation (``bench/command_schedule.py``).
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

from loop_setup import controller_setup, theta_rms  # noqa: E402  (bench/)

NODES = {"qv_controller": "qv_control.ros.controller_node", "qv_dynamics": "qv_dynamics.ros.dynamics_node",
         "qv_sim": "qv_dynamics.ros.sim_node"}


def lockstep_rms(config: str, seconds: float) -> float:
    from qv_dynamics.sim import simulate

    system, law, ref, coords, q0 = controller_setup(config)
    tr = simulate(system, q0, np.zeros(system.nv), law, seconds, 1e-3, reference=ref)
    return theta_rms(system, coords, ref, tr.t, tr.q, skip=1.0)


class Monitor:
    """Records /joint_states (serialized: the monitor must not cost the loop more than any other subscriber,
    deserialized afterwards) and /diagnostics. It does not subscribe to the effort commands: their rate is
    the simulator's count of the commands it received (``commands_received`` in its diagnostics)."""

    def __init__(self, node, schedule: bool = False):
        from diagnostic_msgs.msg import DiagnosticArray
        from sensor_msgs.msg import JointState

        self.js: list[tuple[float, bytes]] = []    # (arrival, serialized message)
        self.cmds: list[bytes] = []                # ~/command_stamped (``schedule``; costs the controller a publish)
        self.diag: dict[str, dict] = {}
        # (arrival, stamp, count[, states_published, simulated t]); the stamp is the node's wall clock when it
        # published, so rates over these do not depend on how late this monitor took the messages
        self.counts: dict[str, list] = {"sim": [], "ctrl": []}
        node.create_subscription(JointState, "/joint_states", self.on_js, 1000, raw=True)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 100)
        if schedule:
            node.create_subscription(JointState, "/qv_controller/command_stamped", self.cmds.append, 1000, raw=True)

    def on_js(self, data: bytes) -> None:
        self.js.append((time.perf_counter(), data))

    def on_diag(self, m) -> None:
        now = time.perf_counter()
        stamp = m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec
        for s in m.status:
            name = s.name.split(":")[0]
            self.diag[name] = {kv.key: kv.value for kv in s.values} | {"_message": s.message}
            d = self.diag[name]
            if name == "qv_sim" and "commands_received" in d:
                self.counts["sim"].append((now, stamp, int(d["commands_received"]), int(d["states_published"]),
                                           float(d["t"])))
            elif name == "qv_controller":
                self.counts["ctrl"].append((now, stamp, int(d["commands"]), np.nan, np.nan))

    def states(self) -> tuple[np.ndarray, np.ndarray, list]:
        """(arrival times, stamps, messages) of the recorded joint states."""
        from rclpy.serialization import deserialize_message
        from sensor_msgs.msg import JointState

        msgs = [deserialize_message(b, JointState) for _, b in self.js]
        return (np.array([a for a, _ in self.js]),
                np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in msgs]), msgs)


#: command prefixes of the node processes (the launch files' ``controller_prefix`` / ``dynamics_prefix``; the
#: dynamics node's default is theirs, a lower priority); ``--prefix NODE=COMMAND`` replaces one
PREFIXES: dict[str, str] = {}


def set_prefixes(parser, items, nodes, table: dict) -> None:
    """``--prefix NODE=COMMAND`` items into ``table`` (node -> command); an unknown node is a usage error."""
    for item in items:
        node, _, command = item.partition("=")
        if node not in nodes:
            parser.error(f"--prefix {item!r}: the node is one of {sorted(nodes)}")
        table[node] = command


def _start(name: str, config: str, env: dict, overrides=()) -> subprocess.Popen:
    """The node as bringup.launch.py starts it (the controller and dynamics nodes on the simulator's /clock,
    behind :data:`PREFIXES`); ``overrides``: "node:param:=value" strings, those of this node are passed as
    ``-p param:=value``."""
    import shlex

    from qv_dynamics.ros.runner import OBSERVER_PREFIX

    sim_time = [] if name == "qv_sim" else ["-p", "use_sim_time:=true"]
    extra = [a for o in overrides if o.split(":", 1)[0] == name for a in ("-p", o.split(":", 1)[1])]
    prefix = shlex.split(PREFIXES.get(name, OBSERVER_PREFIX if name == "qv_dynamics" else ""))
    return subprocess.Popen([*prefix, sys.executable, "-m", NODES[name], "--ros-args", "-r", f"__node:={name}",
                             "--params-file", config, *sim_time, *extra], env=env, stdout=subprocess.PIPE,
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


def run_deployed(config: str, seconds: float, domain_id: int, overrides=(), schedule: bool = False) -> dict:
    import rclpy
    from rclpy.context import Context

    from qv_control.ros.launch_actions import discovery_env
    from qv_dynamics.ros.runner import make_executor

    env = discovery_env(dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain_id), PYTHONUNBUFFERED="1",
                             RCUTILS_LOGGING_BUFFERED_STREAM="0"))   # the nodes as the launch files start them
    procs = {}
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    node = rclpy.create_node("deployed_monitor", context=ctx)
    ex = make_executor(ctx)
    ex.add_node(node)
    system, _, ref, coords, q0 = controller_setup(config)
    from qv_dynamics.sim.stepper import Stepper

    q_start, _ = Stepper(system).correct(q0, np.zeros(system.nv))  # the simulator's first state (section 6)
    mon = Monitor(node, schedule)
    try:
        for name, ready in (("qv_controller", "law '"), ("qv_dynamics", "model '")):
            procs[name] = _start(name, config, env, overrides)
            _wait_line(procs[name], ready)
        procs["qv_sim"] = _start("qv_sim", config, env, overrides)
        _wait_line(procs["qv_sim"], "simulating")
        end = time.monotonic() + 60.0
        while not mon.js and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.01)
        cpu0, wall0, own0 = cpu_seconds(procs), time.perf_counter(), time.process_time()
        t_end = wall0 + seconds
        while time.perf_counter() < t_end:
            ex.spin_once(timeout_sec=0.01)
        cpu = {k: (c - cpu0[k]) / (time.perf_counter() - wall0) for k, c in cpu_seconds(procs).items()}
        cpu["monitor"] = (time.process_time() - own0) / (time.perf_counter() - wall0)
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
    out = summarize(mon, system, coords, ref, codes, q_start)
    out["cpu"] = cpu
    if schedule:
        out["schedule"] = command_ages(mon)
    return out


def command_ages(mon: Monitor) -> tuple[np.ndarray, np.ndarray]:
    """(stamps, age of the command applied over the step ending there) from the recorded states' efforts and
    the controller's stamped commands (``bench/command_schedule.py``); one state per stamp."""
    from command_schedule import applied_ages
    from rclpy.serialization import deserialize_message
    from sensor_msgs.msg import JointState

    _, stamps, msgs = mon.states()
    stamps, first = np.unique(stamps, return_index=True)   # the waiting plant re-sends its first state
    names = list(msgs[0].name)
    eff = np.array([np.asarray(msgs[i].effort)[[list(msgs[i].name).index(n) for n in names]] for i in first])
    cmds = [deserialize_message(b, JointState) for b in mon.cmds]
    ct = np.array([m.header.stamp.sec + 1e-9 * m.header.stamp.nanosec for m in cmds])
    ce = np.array([np.asarray(m.effort)[[list(m.name).index(n) for n in names]] for m in cmds]).reshape(len(cmds), -1)
    return stamps, applied_ages(stamps, eff, ct, ce, 1e-3)


def cpu_seconds(procs: dict) -> dict:
    """CPU time (user + system, all threads) each node process has used so far [s]."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for k, p in procs.items():
        fields = Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()
        out[k] = (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15 of stat)
    return out


def summarize(mon: Monitor, system, coords, ref, codes: dict, q_anchor=None) -> dict:
    from qv_dynamics.ros.messages import JointLayout

    arr, stamps, msgs = mon.states()
    w0 = arr[0] + 1.0  # warm-up: the first second after the first state
    wend = arr[-1]
    sel = arr >= w0
    js_rate = np.count_nonzero(sel) / (wend - w0)
    # the command rate at the plant (its own count); a plant that does not count: the controller's commands sent
    counts = np.array([c for c in mon.counts["sim"] if w0 <= c[0] <= wend]).reshape(-1, 5)
    if len(counts) < 2:
        counts = np.array([c for c in mon.counts["ctrl"] if w0 <= c[0] <= wend]).reshape(-1, 5)
    rate = (counts[-1] - counts[0]) / (counts[-1, 1] - counts[0, 1]) if len(counts) > 1 else np.full(5, np.nan)
    cmd_rate = rate[2]
    # real-time factor: simulated time per wall second from the simulator's own diagnostics; else from the
    # recorded stamps over their arrival (which a starved monitor stretches)
    rtf_monitor = (stamps[sel][-1] - stamps[sel][0]) / (arr[sel][-1] - arr[sel][0])
    rtf = rate[4] if np.isfinite(rate[4]) else rtf_monitor
    layout = JointLayout.from_system(system)
    order = [list(msgs[0].name).index(n) for n in layout.names]
    q = np.array([layout.to_q(np.asarray(m.position)[order]) for m in msgs])
    d = mon.diag
    # θ_d on the controller's timeline: its reference counts from the first state *it* received, which need not
    # be the first this monitor recorded (a 1 ms offset moves θ_d by ~1e-4 m on the table task's trajectory)
    t0 = float(d.get("qv_controller", {}).get("reference_t0_s", "nan"))
    t0 = t0 if math.isfinite(t0) else stamps[0]
    first = np.flatnonzero(np.abs(stamps - t0) < 5e-7)  # the controller's first state, if recorded here
    rms = theta_rms(system, coords, ref, stamps - t0, q, skip=1.0, q_anchor=q[first[0]] if first.size else q_anchor)
    return {"js_hz": js_rate, "cmd_hz": cmd_rate, "rtf": rtf, "theta_rms": rms, "samples": len(msgs),
            "js_published_hz": rate[3], "rtf_monitor": rtf_monitor,
            "watchdog_episodes": int(d.get("qv_controller", {}).get("watchdog_episodes", -1)),
            "sim_overruns": int(d.get("qv_sim", {}).get("overruns", -1)),
            "sim_rtf_last": float(d.get("qv_sim", {}).get("real_time_factor", "nan")),
            "sim_wake_late_ms": float(d.get("qv_sim", {}).get("wake_late_ms", "nan")),
            "sim_compiled": d.get("qv_sim", {}).get("compiled_stepper", "?"),
            "dyn_decimation": d.get("qv_dynamics", {}).get("decimation", "?"),
            "dyn_missed": d.get("qv_dynamics", {}).get("missed_deadlines", "?"),
            "dyn_tick_ms": float(d.get("qv_dynamics", {}).get("tick_time_ms_mean", "nan")),
            "ctrl_compute_ms": float(d.get("qv_controller", {}).get("compute_ms_mean", "nan")),
            "ctrl_delay_ms": float(d.get("qv_controller", {}).get("command_delay_ms", "nan")),
            "exit_codes": codes, "reference_offset_ms": 1e3 * (t0 - stamps[0])}


def report(config: str, seconds: float, domain_id: int, overrides=(), schedule: bool = False) -> dict:
    r = run_deployed(config, seconds, domain_id, overrides, schedule)
    r["lockstep_theta_rms"] = lockstep_rms(config, seconds)
    print(f"\ndeployed loop: sim + controller + dynamics as three processes, realtime, dt = 1 ms, {seconds:g} s "
          f"({Path(config).name})")
    print(f"  /joint_states {r['js_hz']:.1f} Hz received here ({r['js_published_hz']:.1f} Hz published), effort "
          f"commands {r['cmd_hz']:.1f} Hz received by the simulator, real-time factor "
          f"{r['rtf']:.4f} (states as received here: {r['rtf_monitor']:.4f}; simulator's last window "
          f"{r['sim_rtf_last']:.3f}, overruns {r['sim_overruns']}; pacing thread late by "
          f"{r['sim_wake_late_ms']:.3f} ms on average, compiled stepper {r['sim_compiled']})")
    print(f"  controller: watchdog episodes {r['watchdog_episodes']}, law compute {r['ctrl_compute_ms']:.3f} ms mean "
          f"(latency compensation horizon {r['ctrl_delay_ms']:.3f} ms); "
          f"dynamics node: decimation {r['dyn_decimation']}, missed deadlines {r['dyn_missed']}, "
          f"tick {r['dyn_tick_ms']:.3f} ms")
    print("  CPU use (cores): " + ", ".join(f"{k} {v:.2f}" for k, v in r["cpu"].items())
          + f"; machine load {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")
    ratio = r["theta_rms"] / r["lockstep_theta_rms"]
    print(f"  θ tracking RMS {r['theta_rms']:.3e} vs lock-step {r['lockstep_theta_rms']:.3e} ({ratio:.2f}x; θ_d timed "
          f"from the controller's first state, {r['reference_offset_ms']:+.1f} ms from the first recorded here); "
          f"exit codes on SIGTERM {r['exit_codes']}")
    if schedule:
        print_schedule(config, seconds, r)
    ok = (r["js_published_hz"] >= 990 and r["cmd_hz"] >= 990 and r["rtf"] >= 0.99 and r["watchdog_episodes"] == 0
          and ratio <= 2.0)
    print(f"  target (/joint_states published and effort commands received by the simulator >= 990 Hz, "
          f"RTF >= 0.99, no watchdog episode, tracking <= 2x lock-step): "
          f"{'MET' if ok else 'NOT met'}")
    return r


def print_schedule(config: str, seconds: float, r: dict) -> None:
    """The applied commands' ages and the lock-step replays of that schedule (``bench/command_schedule.py``)."""
    from command_schedule import replay, summary

    stamps, ages = r["schedule"]
    print("  " + summary(ages))
    plain = replay(config, seconds, ages, stamps, 1e-3)
    comp = replay(config, seconds, ages, stamps, 1e-3, command_delay=-1.0)
    lock = r["lockstep_theta_rms"]
    print(f"  lock-step replay of this schedule: θ RMS {plain:.3e} ({plain / lock:.2f}x lock-step) without latency "
          f"compensation, {comp:.3e} ({comp / lock:.2f}x) with command_delay = one measured period")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "config" / "panda_table.yaml"))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--set", action="append", default=[], metavar="NODE:PARAM:=VALUE",
                    help="a parameter for one node on top of the config, e.g. qv_sim:publish_wrench:=false")
    ap.add_argument("--schedule", action="store_true",
                    help="record the controller's ~/command_stamped (one more publish per tick) and print the age of "
                         "the command applied at each step, with lock-step replays of that schedule")
    ap.add_argument("--prefix", action="append", default=[], metavar="NODE=COMMAND",
                    help="run a node behind a command, as the launch files' controller_prefix / dynamics_prefix do, "
                         "e.g. 'qv_controller=taskset -c 1' (the dynamics node's default: 'nice -n 10')")
    ap.add_argument("--load", type=int, default=0, metavar="N",
                    help="run N busy processes (one pure-Python spin loop each, default priority) beside the loop: "
                         "a reproducible loaded machine")
    args = ap.parse_args(argv)
    set_prefixes(ap, args.prefix, NODES, PREFIXES)
    if PREFIXES:
        print("node prefixes: " + ", ".join(f"{k} '{v}'" for k, v in PREFIXES.items()))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        if busy:
            print(f"background load: {len(busy)} busy processes on {os.cpu_count()} cores")
        # domain far from the tests' offsets (+3..+67 of the same base), so a bench beside the suite stays apart
        report(args.config, args.seconds, (int(os.environ.get("ROS_DOMAIN_ID", "41")) + 157) % 230, args.set,
               args.schedule)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
