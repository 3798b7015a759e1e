"""ROS latency and control rate of the qv nodes (target: 1 kHz, p99 ≤ 1 ms), on the Panda table task: the
controller as its own process with the dynamics node beside it, and the deployed loop.

Measured side by side in one run (2 shared cores: use the medians); ``--parts`` picks them:

``echo``/``inproc``/``process``: a driver node publishes /joint_states at ``--rate`` Hz (states of a library
   closed-loop run of the arm, so the law sees realistic inputs; a late publish is never followed by a
   catch-up burst) and timestamps the answer (matched by the stamp of ``~/command_stamped``; the controller
   keeps only the freshest state, so when it is slower than the stream it skips states instead of queueing).
   Reported: median / p99 / max of publish -> answer received, answered fraction, command rate, in
   ping-pong (next state when the answer is back) and stream modes, for the echo node (bench/echo_node.py,
   the rclpy/DDS floor) and the controller in the driver's process, and for the controller and the echo
   each as its own process (as ``ros2 launch`` starts them, ``qv_dynamics_node`` as a third process on the
   same stream, behind the launch files' ``dynamics_prefix``: a lower CPU priority), alternating for
   ``--rounds`` (same load for both), with each node process's CPU per state and the controller's own
   law-compute time (wall and thread CPU) from its /diagnostics. The echo answers through the controller's
   receive and send paths (serialized bytes both ways): the ratio is the controller's own work.
``bringup``: the in-process bringup's closed-loop rate (lock-step, with and without the dynamics node) and
   the real-time factor of ``--realtime`` mode at dt = 1 ms.
``deployed``: sim + controller + dynamics as three processes, realtime (bench/deployed_loop.py).

    PYTHONPATH=. .venv/bin/python bench/ros_latency.py --parts echo,inproc,process --seconds 5 --rounds 2
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import rclpy  # noqa: E402
from rclpy.context import Context  # noqa: E402

from qv_control.ros.bringup import Bringup, load_params_file, to_parameters  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_dynamics.linalg import limit_blas_threads  # noqa: E402
from qv_dynamics.ros.messages import JointLayout  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402
from qv_dynamics.ros.runner import OBSERVER_PREFIX, make_executor  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "test"))
from deployed_loop import cpu_seconds  # noqa: E402
from echo_node import Echo  # noqa: E402
from latency_driver import Driver, pooled, run_pingpong, run_stream, wait_answering, wait_graph  # noqa: E402
from latency_inputs import Setup, setup, still_states  # noqa: E402
from ros_helpers import stop_processes  # noqa: E402  (the tests' node-process helper)

CONFIG = str(ROOT / "config" / "panda_table.yaml")
SETUP: Setup | None = None  # the controller of CONFIG: its section, inputs, simulator (main)
LAW_STUB = False            # --law-stub: the controller process with a constant-torque law (bench/law_stub_node.py)
OVERRIDES: list[str] = []  # "node:param:=value" for the node processes (--set)
PREFIX = {"qv_dynamics": OBSERVER_PREFIX, "qv_controller": ""}  # as the launch files start them (--*-prefix)


def replayed_states(seconds: float):
    """(system, t, q, q̇) the driver replays: a library closed-loop run where CONFIG has a simulator, else its
    initial pose held still (bench/latency_inputs.py)."""
    return arm_states(seconds) if SETUP.simulator else still_states(SETUP, seconds)


def arm_states(seconds: float):
    """(t, q, q̇) of a library closed-loop run of the robot of ``CONFIG`` (the states the driver replays)."""
    from qv_dynamics.sim import simulate

    with Bringup(CONFIG, domain_id=_domain(5), dynamics=False, record=False) as b:  # build law+ref like the node
        law, ref = b.controller.law, b.controller.reference_at
        system = b.controller.system
        P = b.params
    _, doc = load_model_config(P["qv_sim"]["model_config"])
    tr = simulate(system, np.asarray(doc["initial"]["q"], float), np.zeros(system.nv), law, seconds, 1e-3,
                  reference=ref)
    return system, tr.t, tr.q, tr.qdot


def _domain(k: int) -> int:
    return (int(os.environ.get("ROS_DOMAIN_ID", "41")) + 150 + k) % 230  # far from the tests' offsets


def _both(ex, driver: Driver, rate: float, seconds: float, proc=None, echo: bool = False) -> dict:
    """Ping-pong, then the stream; ``proc``: the answering node's process, whose CPU time per state of the
    stream is reported (µs, all its threads: executor, middleware and the callback)."""
    pp = run_pingpong(ex, driver, seconds)
    for _ in range(20):
        ex.spin_once(timeout_sec=0.01)
    driver.reset()
    d0 = driver.fresh_diag(ex) if proc is not None and not echo else None
    cpu0 = cpu_seconds({"p": proc})["p"] if proc is not None else 0.0
    out = run_stream(ex, driver, rate, seconds)
    cpu = cpu_seconds({"p": proc})["p"] - cpu0 if proc is not None else float("nan")
    out["cpu_us_per_state"] = 1e6 * cpu / out["sent"]
    out["cpu_us_per_command"] = 1e6 * cpu / max(driver.commands, 1)   # (the echo: one per state)
    d1 = driver.fresh_diag(ex) if d0 is not None else None
    out["dynamics_diag"] = [driver.dyn_diag]  # its last report (counts since its start)
    if d1 is not None:  # the node's own law-compute figures over the stream: wall time and thread CPU time
        for key, count in (("compute_ms_mean", "commands"), ("compute_cpu_ms_mean", "compute_cpu_samples")):
            n = d1.get(count, 0.0) - d0.get(count, 0.0)   # (the thread CPU time is sampled: its own count)
            out[key] = (d1[key] * d1[count] - d0[key] * d0[count]) / n if n else float("nan")
    out["commands"] = driver.commands
    out["pingpong"] = pp
    return out


@contextmanager
def driver_session(states, domain_id: int, make_nodes=lambda ctx: ()):
    """A context on ``domain_id`` with the joint-state driver and the nodes ``make_nodes(ctx)`` on one
    executor; yields (executor, driver, nodes) and tears everything down afterwards."""
    system, t, q, qdot = states
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    nodes = list(make_nodes(ctx))
    drv_node = rclpy.create_node("driver", context=ctx)
    driver = Driver(drv_node, JointLayout.from_system(system, floating=bool(SETUP.odom_topic)), t, q, qdot,
                    stamped_topic=f"/{SETUP.section}/command_stamped", inputs=SETUP)
    ex = make_executor(ctx)
    for n in nodes + [drv_node]:
        ex.add_node(n)
    try:
        yield ex, driver, nodes
    finally:
        ex.shutdown()
        for n in nodes + [drv_node]:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


def latency_in_process(states, rate, seconds) -> dict:
    P = load_params_file(CONFIG)[SETUP.section]
    if SETUP.section == "qv_legged_controller":
        from qv_control.ros.legged_controller_node import LeggedControllerNode as Node
    else:
        Node = ControllerNode

    def nodes(ctx):
        return [Node(SETUP.section, context=ctx, parameter_overrides=to_parameters(P))]

    with driver_session(states, _domain(1), nodes) as (ex, driver, (ctrl,)):
        wait_graph(ex, driver)
        out = _both(ex, driver, rate, seconds)
        out["law_compute_ms_mean"] = ctrl.stats["compute_ms_sum"] / max(ctrl.stats["commands"], 1)
        return out


def latency_echo(states, rate, seconds) -> dict:
    """Floor: the echo node (bench/echo_node.py) in the driver's process answers each JointState (no math)."""
    def echo(ctx):
        return [Echo(context=ctx, inputs=SETUP.params, stamped=f"/{SETUP.section}/command_stamped")]

    with driver_session(states, _domain(2), echo) as (ex, driver, _):
        wait_graph(ex, driver)
        return _both(ex, driver, rate, seconds)


def latency_separate_process(states, rate, seconds, dynamics: bool = True, echo: bool = False,
                             dom_k: int = 3, echo_args: tuple = ()) -> dict:
    """The controller node as its own process (as ``ros2 launch`` starts it), with the dynamics node as a
    third process beside it on the same /joint_states stream (``dynamics``); ``echo``: an empty echo node
    as its own process instead of the controller (the floor of the inter-process round trip)."""
    dom = _domain(dom_k)
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(dom))
    def node(name: str, module: str) -> list:
        extra = [a for o in OVERRIDES if o.split(":", 1)[0] == name for a in ("-p", o.split(":", 1)[1])]
        prefix = shlex.split(PREFIX.get(name, PREFIX["qv_controller"]))   # (a legged controller: the controller's)
        run = [str(ROOT / "bench" / "law_stub_node.py"), module] if LAW_STUB and module == SETUP.module \
            else ["-m", module]
        return [*prefix, sys.executable, *run, "--ros-args", "-r", f"__node:={name}", "--params-file", CONFIG, *extra]

    ctrl = node(SETUP.section, SETUP.module)  # the echo starts as the controller does, with the same inputs
    cmds = [[*shlex.split(PREFIX["qv_controller"]), sys.executable, str(ROOT / "bench" / "echo_node.py"),
             "--config", CONFIG, "--section", SETUP.section, "--stamped", f"/{SETUP.section}/command_stamped",
             *echo_args]] if echo else [ctrl]
    dynamics = dynamics and SETUP.dynamics   # (a file without a qv_dynamics section: the controller alone)
    if dynamics:
        cmds.append(node("qv_dynamics", "qv_dynamics.ros.dynamics_node"))
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c in cmds]
    try:
        with driver_session(states, dom) as (ex, driver, _):
            wait_graph(ex, driver, timeout=60.0)
            if dynamics:  # the dynamics node subscribed too
                end = time.monotonic() + 60.0
                while driver.pub.get_subscription_count() < 2 and time.monotonic() < end:
                    ex.spin_once(timeout_sec=0.05)
            wait_answering(ex, driver)
            out = _both(ex, driver, rate, seconds, procs[0], echo)
    finally:
        out_codes = [rc for rc, _, _ in stop_processes(procs, signal.SIGTERM, timeout=10)]
    out["exit_codes"] = out_codes
    return out


def bringup_rate(seconds: float, dynamics: bool, realtime: bool = False, dom: int = 4) -> dict:
    with Bringup(CONFIG, domain_id=_domain(dom), dynamics=dynamics, lockstep=not realtime) as b:
        st = b.run(seconds, wall_timeout=30 * seconds + 30)
        if realtime:
            st["commands"] = b.controller.stats["commands"]
            st["command_rate_hz"] = st["commands"] / st["wall_time_s"]
    return st


PARTS = ("echo", "inproc", "process", "bringup", "deployed")


def _print_rows(rows, rate: float) -> None:
    print("\n/joint_states publish -> stamped answer received (median, p99, max; cmd med/p99: the effort command "
          "itself, paired with its stamped copy by value; gap: the driver's publish interval, late: its publishes "
          "more than half a period late; CPU: the node process's CPU time per state)")
    print(f"{'':58s} {'median ms':>10s} {'p99 ms':>8s} {'max ms':>8s} {'cmd med/p99':>12s} {'cmd Hz':>7s} "
          f"{'answered':>13s} {'gap p99':>8s} {'late':>5s} {'CPU µs':>6s}")
    for name, r in rows:
        for mode, x in (("ping-pong (max rate)", r["pingpong"]), (f"stream {rate:.0f} Hz", r)):
            print(f"{name[:46] + ', ' + mode:58s} {x['median_ms']:10.3f} {x['p99_ms']:8.3f} {x['max_ms']:8.3f} "
                  f"{x['cmd_median_ms']:5.3f}/{x['cmd_p99_ms']:6.3f} "
                  f"{x['command_rate_hz']:7.0f} {x['answered']:>6d}/{x['sent']:<6d} {x['gap_p99_ms']:8.3f}"
                  f" {x['driver_late'] if x is r else '':>5}"
                  + (f" {x['cpu_us_per_state']:6.0f}" if x.get("cpu_us_per_state", np.nan) == x.get("cpu_us_per_state")
                     else ""))


def _print_cpu_ratio(ctrl: dict, echo: dict) -> None:
    """The node's CPU per command against the echo's (the same inputs, one output), whole and without the
    law's compute (its thread CPU time, sampled by the node): what the node itself costs."""
    c, e, law = ctrl["cpu_us_per_command"], echo["cpu_us_per_command"], 1e3 * ctrl["compute_cpu_ms_mean"]
    print(f"process CPU per command ({_inputs_text()}): controller {c:.0f} µs, echo {e:.0f} µs: {c / e:.2f}x; "
          f"without the law's compute ({law:.0f} µs) {c - law:.0f} µs: {(c - law) / e:.2f}x the echo "
          f"(target <= 1.3x)")


def _inputs_text() -> str:
    n = 1 + bool(SETUP.odom_topic) + len(SETUP.wrench_topics)
    return f"{n} input topic{'s' if n > 1 else ''}: /joint_states" + (f", {SETUP.odom_topic}" if SETUP.odom_topic
                                                                        else "") + \
        "".join(f", {t}" for t in SETUP.wrench_topics)


def own_process_rows(states, rate: float, seconds: float, rounds: int, echo_messages: bool = False) -> list:
    """The controller and the echo node, each as its own process with the dynamics node beside it, measured
    in alternating rounds (echo, controller, echo, ...) so that both see the same machine load. The echo
    publishes kept serialized bytes as the controller does; ``echo_messages``: also an echo publishing
    message objects (the floor as it was measured before), in the same rounds."""
    ctrl, echo, echo_msg = [], [], []
    for k in range(rounds):
        echo.append(latency_separate_process(states, rate, seconds, echo=True, dom_k=8))
        ctrl.append(latency_separate_process(states, rate, seconds, dom_k=3))
        if echo_messages:
            echo_msg.append(latency_separate_process(states, rate, seconds, echo=True, dom_k=8,
                                                     echo_args=("--messages",)))
    rows = [("controller, own process (+dynamics)", pooled(ctrl)), ("echo, own process (+dynamics)", pooled(echo))]
    return rows + ([("echo (messages out), own process (+dynamics)", pooled(echo_msg))] if echo_messages else [])


def main(argv=None) -> int:
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each measurement")
    ap.add_argument("--rate", type=float, default=1000.0, help="joint-state publish rate (Hz)")
    ap.add_argument("--parts", default="echo,inproc,process,bringup",
                    help=f"comma-separated subset of {','.join(PARTS)} (deployed: bench/deployed_loop.py)")
    ap.add_argument("--rounds", type=int, default=2, help="alternating echo/controller rounds of 'process'")
    ap.add_argument("--dynamics-prefix", default=OBSERVER_PREFIX,
                    help="command prefix of the dynamics node process (default: the launch files' dynamics_prefix)")
    ap.add_argument("--controller-prefix", default="",
                    help="command prefix of the controller (and echo) process, e.g. 'taskset -c 1'")
    ap.add_argument("--echo-messages", action="store_true",
                    help="'process': also an own-process echo that publishes message objects instead of bytes")
    ap.add_argument("--config", default=CONFIG, help="ROS 2 parameters file (default config/panda_table.yaml)")
    ap.add_argument("--deployed-seconds", type=float, default=60.0, help="length of the three-process run")
    ap.add_argument("--set", action="append", default=[], metavar="NODE:PARAM:=VALUE",
                    help="a parameter for a node process, e.g. qv_controller:raw_joint_states:=false")
    ap.add_argument("--law-stub", action="store_true", help="'process': the controller's law replaced by a constant "
                    "torque (bench/law_stub_node.py): what the node itself costs beside the echo")
    args = ap.parse_args(argv)
    OVERRIDES[:] = args.set
    globals()["LAW_STUB"] = args.law_stub
    PREFIX.update(qv_dynamics=args.dynamics_prefix, qv_controller=args.controller_prefix)
    parts = set(args.parts.split(","))
    if not parts <= set(PARTS):
        ap.error(f"--parts: unknown {sorted(parts - set(PARTS))}")
    globals()["CONFIG"] = str(Path(args.config).resolve())
    globals()["SETUP"] = setup(CONFIG)
    print(f"qv_ros latency bench: law and robot from {Path(CONFIG).name}, "
          f"{args.rate:.0f} Hz for {args.seconds:g} s each; executor: {type(make_executor(Context())).__name__}; "
          f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min), {os.cpu_count()} cores; "
          f"process prefixes: dynamics node {args.dynamics_prefix!r}, controller/echo {args.controller_prefix!r}")
    states = replayed_states(min(4.0 * args.seconds + 5.0, 40.0))  # ping-pong + stream of one node on one timeline
    rows = []
    if "echo" in parts:
        rows.append(("echo (rclpy floor)", latency_echo(states, args.rate, args.seconds)))
    if "inproc" in parts:
        rows.append(("controller, same process", latency_in_process(states, args.rate, args.seconds)))
    if "process" in parts:
        rows += own_process_rows(states, args.rate, args.seconds, args.rounds, args.echo_messages)
    if rows:
        _print_rows(rows, args.rate)
    found = dict(rows)
    lc = found.get("controller, same process")
    if lc is not None:
        ok = lc["p99_ms"] <= 1.0 and lc["command_rate_hz"] >= 0.99 * args.rate
        print(f"law compute alone (mean, in node): {lc['law_compute_ms_mean']:.3f} ms; "
              f"target 1 kHz with p99 <= 1 ms (same process): {'MET' if ok else 'NOT met'}")
    if "process" in parts:
        sp, echo = found["controller, own process (+dynamics)"], found["echo, own process (+dynamics)"]
        frac = sp["answered"] / sp["sent"]
        ok = frac >= 0.999 and sp["p99_ms"] <= 1.0 and sp["p99_ms"] <= 2.0 * echo["p99_ms"]
        print(f"target own process: answered {100 * frac:.2f} % (>= 99.9 %; echo "
              f"{100 * echo['answered'] / echo['sent']:.2f} %), p99 {sp['p99_ms']:.3f} ms (<= 1 ms and <= 2x the "
              f"own-process echo's p99 {echo['p99_ms']:.3f} ms = {sp['p99_ms'] / echo['p99_ms']:.1f}x): "
              f"{'MET' if ok else 'NOT met'}; exit codes on SIGTERM {sp['exit_codes']}")
        print(f"  the effort command itself (paired by value): p99 {sp['cmd_p99_ms']:.3f} ms vs the echo's "
              f"{echo['cmd_p99_ms']:.3f} ms = {sp['cmd_p99_ms'] / echo['cmd_p99_ms']:.1f}x")
        print(f"law compute in the own-process controller (its /diagnostics over the stream): wall "
              f"{sp['compute_ms_mean']:.3f} ms, thread CPU {sp['compute_cpu_ms_mean']:.3f} ms per state "
              f"(the difference: descheduled inside the compute); process CPU per state: controller "
              f"{sp['cpu_us_per_state']:.0f} µs, echo {echo['cpu_us_per_state']:.0f} µs")
        _print_cpu_ratio(sp, echo)
        keys = ("messages", "inputs_lost", "decimation", "process_cpu_share", "missed_deadlines")
        for d in sp["dynamics_diag"] if SETUP.dynamics else []:  # the observer beside it: evaluated, missed
            print("  dynamics node beside it (its last /diagnostics of the round): "
                  + ", ".join(f"{k} {d.get(k, '?')}" for k in keys))
    if "bringup" in parts:
        print("\nin-process bringup (sim + controller [+ dynamics]), lock-step, dt = 1 ms")
        for dyn in (True, False):
            st = bringup_rate(args.seconds, dyn, dom=4 + dyn)
            print(f"  {'with' if dyn else 'without'} dynamics node: {st['control_rate_hz']:7.0f} ticks/s "
                  f"(real-time factor {st['real_time_factor']:.2f})")
        st = bringup_rate(args.seconds, True, realtime=True, dom=6)
        print(f"  realtime mode (wall-clock paced): {st['command_rate_hz']:7.0f} commands/s, "
              f"simulated {st['sim_time_s']:.2f} s in {st['wall_time_s']:.2f} s (rtf {st['real_time_factor']:.2f})")
    if "deployed" in parts:
        from deployed_loop import report

        report(CONFIG, args.deployed_seconds, _domain(7))
    print(f"machine load after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
