"""The simulator's realtime pacing: one step and one /joint_states message per dt, paced by its
own thread at absolute wall-clock deadlines, every stamp exactly dt after the previous one, and a node that
stops its thread when destroyed.

References: the wall clock as the pacing thread reads it at each wake-up (steps taken plus the real time
the node reports as dropped account for it at the end of every wake-up; never ahead of it: a load that
starves the thread shows up as dropped time, as it must, not as a failure; in this one test process the probe
deserializes every 1 kHz state on the executor thread beside the plant. The rate a deployed plant holds is a
bench figure: bench/deployed_loop.py) and the step counter (stamp k = k·dt, exact in integer nanoseconds).
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from ros_helpers import ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from qv_control.ros.bringup import load_params_file, to_parameters  # noqa: E402
from qv_dynamics.ros.sim_node import SimNode  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 37) % 200
SECONDS = 2.0


def _params(**extra) -> list:
    p = load_params_file(str(ROOT / "config" / "planar_3link.yaml"))["qv_sim"]
    p.update(mode="realtime", dt=0.001, mass_scale=1.0, publish_clock=False, diagnostics_period=0.0)
    p.update(extra)
    return to_parameters(p)


def _ns(msg: JointState) -> int:
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def test_realtime_publishes_one_state_per_step_at_the_rate():
    """After the first command, over 2 s: at the end of every wake-up of the pacing thread, the steps taken
    plus the real time reported dropped account for the wall clock since the start (never a period silently
    skipped, never ahead of the wall clock): checked tick by tick on the thread's own clock readings, so a
    starved thread (a loaded machine) is accounted, not a failure. One message per step (count = steps taken
    in the window), stamps advancing by exactly dt = 1 ms; the destroyed node's pacing thread is gone at once."""
    with ros_session(DOMAIN, "rt_probe") as (ctx, ex, probe):
        sim = SimNode(context=ctx, parameter_overrides=_params(),
                      automatically_declare_parameters_from_overrides=False)
        ex.add_node(sim)
        states = []
        probe.create_subscription(JointState, "/joint_states", states.append, 1000)
        pub = probe.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1 and len(states) >= 1)
        pub.publish(Float64MultiArray(data=[0.0, 0.0, 0.0]))
        assert spin_until(ex, lambda: sim.steps >= 100)
        loop, ticks = sim._rt_loop, []
        tick = loop.tick

        def recorded() -> None:  # the pacing thread's own wake-ups: (clock before, steps, dropped, clock after)
            t_in = time.monotonic()
            tick()
            ticks.append((t_in, sim.steps, sim.dropped_time, time.monotonic()))

        period = sim.dt / sim.rtf
        base = None  # the deadline base at the first command (wall0 moves by what is dropped): two equal reads
        while base is None or base != sim.wall0 - sim.dropped_time:
            base = sim.wall0 - sim.dropped_time
        k0, p0, w0 = sim.steps, sim.states_published, time.monotonic()
        loop.tick = recorded
        while time.monotonic() - w0 < SECONDS:
            ex.spin_once(timeout_sec=0.01)
            if time.monotonic() - w0 < SECONDS - 0.2:
                pub.publish(Float64MultiArray(data=[0.0, 0.0, 0.0]))  # a controller's commands, held in between
        w1 = time.monotonic()
        assert spin_until(ex, lambda: ticks and ticks[-1][0] >= w1)  # the handshake: a wake-up after the window
        loop.tick = tick
        k1, p1 = sim.steps, sim.states_published
        assert spin_until(ex, lambda: states and _ns(states[-1]) >= round(k1 * sim.dt * 1e9))  # window delivered
        for t_in, steps, dropped, t_out in ticks:
            accounted = steps + dropped / period
            assert (t_in - base) / period - 1 - 1e-3 <= accounted <= (t_out - base) / period + 1e-3, \
                (t_in - base, steps, dropped, t_out - base)
        assert ticks[-1][1] + ticks[-1][2] / period >= (w1 - base) / period - 1  # every period up to w1 accounted
        assert k1 - k0 >= 1 and abs((p1 - p0) - (k1 - k0)) <= 1  # stepping; one message per step
        window = [m for m in states if k0 * 1_000_000 < _ns(m) <= k1 * 1_000_000]
        gaps = [_ns(b) - _ns(a) for a, b in zip(window, window[1:])]
        # stamps k·dt exactly; the transport may lose a message under load (reliable, history 10), not more
        assert all(g > 0 and g % 1_000_000 == 0 for g in gaps), sorted(set(gaps))[:5]
        assert gaps.count(1_000_000) >= 0.99 * len(gaps) and len(window) >= 0.99 * (k1 - k0)
        assert loop.running
        ex.remove_node(sim)
        t0 = time.monotonic()
        sim.destroy_node()
        assert not loop.running and time.monotonic() - t0 < 0.5
        assert not any(t.name.endswith("_realtime") for t in threading.enumerate())


def test_bringup_realtime_holds_the_plant_between_runs():
    """In-process bringup with the realtime simulator: each run takes its steps at the wall clock, and
    between runs (nothing spinning) the pacing thread takes none and records none."""
    from qv_control.ros.bringup import Bringup

    b = Bringup(str(ROOT / "config" / "planar_3link.yaml"), domain_id=DOMAIN, lockstep=False, dynamics=False)
    try:
        r1 = b.run(0.3)
        k, n = b.sim.steps, len(b.rec["t"])
        time.sleep(0.2)
        assert b.sim.steps == k and len(b.rec["t"]) == n and b.sim._rt_loop.running
        r2 = b.run(0.3)
        assert r1["completed"] and r2["completed"] and r2["real_time_factor"] <= 1.02
        assert len({len(v) for v in b.rec.values()}) == 1
    finally:
        b.shutdown()
    assert not b.sim._rt_loop.running


def test_warm_step_leaves_the_state_alone():
    """The realtime simulator's warm-up step (kernels loaded before real time starts) changes neither the
    state nor the step count: the next step equals that of a stepper that was never warmed, bit for bit."""
    import numpy as np

    from qv_dynamics.ros.params import load_model_config
    from qv_dynamics.ros.sim_node import StepperState

    system, doc = load_model_config(str(ROOT / "config" / "panda_table_model.yaml"), "", floating=True)
    q0 = doc["initial"]["q"]
    warmed, plain = (StepperState(system, q0, np.zeros(system.nv), 0.001) for _ in range(2))
    q, qdot = warmed.q.copy(), warmed.qdot.copy()
    warmed.warm()
    assert warmed.k == 0 and warmed.stepper.nr_stalls == 0
    assert np.array_equal(warmed.q, q) and np.array_equal(warmed.qdot, qdot)
    tau = np.full(system.nv, 0.5)
    warmed.step(tau)
    plain.step(tau)
    assert np.array_equal(warmed.q, plain.q) and np.array_equal(warmed.qdot, plain.qdot)
