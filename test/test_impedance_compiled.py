"""The impedance baseline's compiled tick (qv_control.kernels.impedance: Pinocchio's Coriolis pass and one compiled
call) against its numpy path (``compiled=False``: four Pinocchio calls, ``pin.log3``, the SVD null-space projection)
on the closed-loop states of the Panda table task (bench/law_tick.py), on random walks and random states with resets
on the Panda and on the xArm7, across J's rank cut-off and near an orientation error of π, with gains, contact and
state assigned between ticks: the torques and the force integral agree to rounding, sample by sample, and the
compiled tick serves every sample but the rare events."""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from qv_control.laws import make_law
from qv_dynamics.kernels.loader import STATUS, load
from qv_dynamics.state import Reference, State

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import law_tick as lt  # noqa: E402  (the benchmark's scene, gains and closed-loop states)
from control_helpers import numpy_ticks  # noqa: E402

GAINS = dict(lt.TOOL_PARAMS["impedance"], force_ki=30.0)


@pytest.fixture(scope="module")
def closed_loop():
    return lt.closed_loop_states(0.6, 4)


def _pair(system, frame: str, q0, **kw):
    """The compiled law and its numpy reference, posture q0, tool orientation held at q0's."""
    pin.framesForwardKinematics(system.model, system.data, q0)
    R0 = system.data.oMf[system.frame_id(frame)].rotation.copy()
    gains = dict(GAINS, frame=frame, **kw)
    fast = make_law("impedance", system, q_null=q0, rotation=R0, **gains)
    slow = make_law("impedance", system, q_null=q0, rotation=R0, compiled=False, **gains)
    assert fast._ct is not None and slow._ct is None, STATUS
    return fast, slow


def _gap(a, b) -> float:
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def test_compiled_impedance_equals_reference_on_closed_loop_states(closed_loop):
    """The table task's states in contact (λ readings 2 N off λ_d: the force integral grows): τ and ∫ within 1e-12
    (measured ~1e-15), every sample but the first through the compiled tick."""
    assert load("qv_control.kernels.impedance", "impedance_tick") is not None, STATUS
    system, states, ref = closed_loop
    fast, slow = _pair(system, lt.TOOL, states[0].q)
    slow_ticks = numpy_ticks(fast)
    worst = 0.0
    for s in states:
        r = lt.tool_reference(system, ref(s.t))
        r.lambda_ = r.lambda_ - 2.0       # 2 N more than the plant's reading: the integral grows
        worst = max(worst, _gap(fast.compute(s, r), slow.compute(s, r)))
        assert abs(fast._int - slow._int) <= 1e-12 * max(1.0, abs(slow._int))
    assert abs(slow._int) > 1e-3          # the integral took part
    assert worst < 1e-12, worst
    assert slow_ticks[0] == 1, slow_ticks


def _walk_and_jumps(system, q0, rng):
    """A random walk (0.3 rad/s, noisy λ readings), then random states 0.05 rad around it whose stamps jump ahead,
    repeat or go back now and then."""
    q, walk = q0.copy(), []
    for k in range(80):
        qdot = 0.3 * rng.standard_normal(system.nv)
        q = q + 1e-3 * qdot
        walk.append(State(t=1e-3 * k, q=q.copy(), qdot=qdot, lambda_meas=np.array([-10.0 + rng.standard_normal()])))
    jumps = []
    for k in range(60):
        s = walk[k % len(walk)]
        t = s.t + (0.0 if k % 11 == 3 else -0.002 if k % 13 == 5 else 0.1 + 1e-3 * k)
        jumps.append(State(t=t, q=s.q + 0.05 * rng.standard_normal(system.nv), qdot=s.qdot,
                           lambda_meas=s.lambda_meas))
    return walk + jumps


def _xarm():
    from qv_dynamics import ConstrainedSystem
    from qv_dynamics.robots import example_robot_data_dir

    system = ConstrainedSystem.from_urdf(str(example_robot_data_dir() / lt.XARM), constraints=[
        {"type": "point_contact", "frame": "link_eef", "axes": ["z"], "name": "contact"}])
    return system, "link_eef", np.array([0.0, 0.3, 0.0, 0.9, 0.0, 0.6, 0.0])


@pytest.mark.parametrize("robot", ["panda", "xarm7"])
def test_compiled_impedance_equals_reference_on_random_walks_and_random_states_with_resets(closed_loop, robot):
    """Random walk and random states with a reset every 7 samples, the contact switched off for a stretch and on
    again, references with and without θ, θ̇, λ_d: τ within 1e-9 (measured ≤ 1e-14), the numpy path only at the
    first tick and at the two switches."""
    if robot == "panda":
        system, frame, q0 = closed_loop[0], lt.TOOL, closed_loop[1][0].q
    else:
        system, frame, q0 = _xarm()
    fast, slow = _pair(system, frame, q0)
    slow_ticks = numpy_ticks(fast)
    rng = np.random.default_rng(4)
    p0 = system.frame_placement(q0, frame).translation
    refs = [None, Reference(theta=p0 + 0.01, lambda_=np.array([-10.0])),
            Reference(theta=p0 - 0.02, theta_dot=np.array([0.01, 0.0, -0.02]), lambda_=np.array([-5.0, 1.0])),
            Reference(theta=p0)]
    worst = 0.0
    try:
        for k, s in enumerate(_walk_and_jumps(system, q0, rng)):
            if k >= 80 and k % 7 == 0:
                fast.reset()
                slow.reset()
            if k in (40, 60):
                system.set_active("contact", k == 60, reanchor=False)
            r = refs[k % len(refs)]
            worst = max(worst, _gap(fast.compute(s, r), slow.compute(s, r)))
            assert abs(fast._int - slow._int) <= 1e-9 * max(1.0, abs(slow._int))
    finally:
        system.set_active("contact", True, reanchor=False)
    print(f"\n{robot}: worst {worst:.1e}, numpy ticks {slow_ticks[0]} of 140")
    assert worst < 1e-9
    assert slow_ticks[0] == 3


def test_state_and_gains_assigned_between_ticks_reach_the_compiled_tick(closed_loop):
    """What callers assign between ticks (a new R_d each tick as the rank-change case does, the integral and its
    stamp cleared, a new posture q_null as the benchmark does, a gain) reaches the compiled tick: τ equals the
    reference law's with the same assignments; only the gain change costs a numpy-path tick."""
    system, states, ref = closed_loop
    fast, slow = _pair(system, lt.TOOL, states[0].q)
    slow_ticks = numpy_ticks(fast)
    R0 = fast.R_d.copy()
    worst = 0.0
    for k, s in enumerate(states[:50]):
        for law in (fast, slow):
            law.R_d = R0 @ pin.exp3(np.array([0.0, 0.002 * k, 0.0]))
            if k == 10:
                law._int, law._t_prev = 0.0, None
            if k == 20:
                law.q_null = s.q
            if k == 30:
                law.kd_pos = 120.0
        r = lt.tool_reference(system, ref(s.t))
        worst = max(worst, _gap(fast.compute(s, r), slow.compute(s, r)))
    assert worst < 1e-12, worst
    assert slow_ticks[0] == 2, slow_ticks      # the first tick and the one after the gain change


def test_rank_cut_off_and_orientation_near_pi_equal_the_reference(closed_loop):
    """The elbow straightened towards q₄ = 0 (σ_min/σ₁ of J from 2e-2 to 0, across pinv's cut-off 1e-4: where the
    QR's certificate fails the numpy path's SVD decides), then orientation errors of π − 1e-3 … π − 1e-7 (beyond
    π − 1e-5 the numpy path's pin.log3): τ within 1e-9 throughout, both branches taken."""
    system = closed_loop[0]
    q0 = np.zeros(7)
    fast, slow = _pair(system, lt.TOOL, q0, contact=None)
    slow_ticks = numpy_ticks(fast)
    fid = system.frame_id(lt.TOOL)
    worst, ratios = 0.0, []
    for k, q4 in enumerate(np.r_[-np.geomspace(0.07, 1e-7, 40), 0.0]):
        q = q0.copy()
        q[3] = q4
        pin.computeJointJacobians(system.model, system.data, q)
        sv = np.linalg.svd(pin.getFrameJacobian(system.model, system.data, fid, pin.LOCAL_WORLD_ALIGNED),
                           compute_uv=False)
        ratios.append(sv[-1] / sv[0])
        s = State(t=1e-3 * k, q=q, qdot=0.1 * np.cos(np.arange(7.0) + k))
        worst = max(worst, _gap(fast.compute(s, None), slow.compute(s, None)))
    assert min(ratios) < 1e-4 < 1e-2 < max(ratios)
    declined = slow_ticks[0]
    print(f"\nrank cut-off: {declined} of 41 ticks on the numpy path")
    assert 1 < declined < 41, declined          # some ticks declined (rank), most served
    q = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])
    R = system.frame_placement(q, lt.TOOL).rotation
    for k, gap in enumerate((1e-3, 1e-4, 1e-6, 1e-7)):
        for law in (fast, slow):
            law.R_d = pin.exp3(np.array([0.0, 0.0, math.pi - gap])) @ R
        s = State(t=0.1 + 1e-3 * k, q=q, qdot=np.zeros(7))
        worst = max(worst, _gap(fast.compute(s, None), slow.compute(s, None)))
    assert slow_ticks[0] == declined + 2          # π − 1e-6 and π − 1e-7: the numpy path
    assert worst < 1e-9, worst


def test_bad_input_takes_the_numpy_path_and_is_refused_as_there(closed_loop):
    """A NaN joint position, a tool position of the wrong size, a non-finite θ̇_d and an empty λ_d in contact: the
    compiled tick declines them and the numpy path raises what it raises without the compiled tick."""
    system, states, _ = closed_loop
    fast, slow = _pair(system, lt.TOOL, states[0].q)
    s = states[1]
    p = system.frame_placement(s.q, lt.TOOL).translation
    bad = [(State(s.t, np.r_[np.nan, s.q[1:]], s.qdot), None), (s, Reference(theta=np.zeros(2))),
           (s, Reference(theta=p, theta_dot=np.array([0.0, np.inf, 0.0]))), (s, Reference(theta=p, lambda_=[]))]
    for state, r in bad:
        with pytest.raises(Exception) as slow_err:
            slow.compute(state, r)
        with pytest.raises(type(slow_err.value)):
            fast.compute(state, r)
    np.testing.assert_allclose(fast.compute(s, None), slow.compute(s, None), rtol=1e-12, atol=1e-12)
