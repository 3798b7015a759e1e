"""The compiled law path (the whole ticks qv_control.kernels.quasi_tick and qv_control.kernels.tick, with the
pieces they share: qv_control.kernels.laws, qv_control.kernels.conditioning (D and cond(D)), the coordinates'
qv_control.kernels.coordinates, the force PI and
integrals of qv_control.kernels.integrals, the limiter of qv_control.kernels.limiter) against the reference path of
the same law (``compiled=False``: SVD gauge / SVD projection, numpy products) on the closed-loop states of
the Panda table task (bench/law_tick.py), on random walks and on random states with resets: the torques and
diagnostics agree to rounding, sample by sample."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from qv_control.laws import make_law
from qv_dynamics.kernels.loader import STATUS, load

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import law_tick as lt  # noqa: E402  (the benchmark's scene, gains and closed-loop states)
from control_helpers import numpy_ticks  # noqa: E402


@pytest.fixture(scope="module")
def closed_loop():
    return lt.closed_loop_states(0.6, 4)


@pytest.mark.parametrize("name", [*lt.PARAMS, "quasi_tracking+ki_motion"])
def test_compiled_law_equals_reference_law(closed_loop, name):
    assert load("qv_control.kernels.laws", "tracking") is not None, STATUS
    system, states, ref = closed_loop
    name, _, extra = name.partition("+")
    gains = dict(lt.PARAMS[name], **({"ki_motion": 400.0} if extra else {}))
    fast = make_law(name, system, coordinates=lt.COORDS, **gains)
    slow = make_law(name, system, coordinates=lt.COORDS, compiled=False, **gains)
    slow_ticks = numpy_ticks(fast)
    assert fast.compiled and not slow.compiled
    if not name.startswith("quasi"):
        assert fast._kernel is not None and slow._kernel is None
    # (the internal-force coordinates z are in each path's basis of the internal forces: compared as E z)
    worst = dict.fromkeys(["tau", "u_v", "u_xi", "eps", "u_p", "internal_force", "lambda_motion", "cond_D"], 0.0)
    for s in states:
        r = ref(s.t)
        a, b = fast.compute(s, r), slow.compute(s, r)
        worst["tau"] = max(worst["tau"], float(np.abs(a - b).max() / np.abs(b).max()))
        for f in ("u_v", "u_xi", "eps", "u_p", "internal_force", "lambda_motion", "cond_D"):
            if f in slow.last:
                x, y = fast.last[f], slow.last[f]
                worst[f] = max(worst[f], float(np.abs(x - y).max() / max(1.0, np.abs(y).max())))
    # every sample but the first (which latches the hold target and seeds the basis) through the whole tick
    assert slow_ticks[0] == 1, slow_ticks
    # measured: τ ≤ 1e-14, u_v ≤ 4.4e-13 (the fused tick's θ differs by ≤ 1.3e-16 from Pinocchio's log₃; the gains
    # amplify it through D⁻¹)
    assert max(worst.values()) < 1e-12, worst


def test_compiled_rotation_rows_equal_numpy():
    """θ, J, J̇ of frame orientation coordinates (qv_control.kernels.coordinates vs the numpy products),
    from the identity (series branch of c, c′) to 2.5 rad."""
    from qv_control.coordinates import MinimalCoordinates
    from qv_dynamics import ConstrainedSystem

    system = ConstrainedSystem.from_urdf("panda")
    spec = ["panda_hand.rx", "panda_hand.ry", "panda_hand.rz", "panda_hand.x"]
    fast, slow = MinimalCoordinates(system, spec), MinimalCoordinates(system, spec, compiled=False)
    assert fast._kernel is not None and slow._kernel is None
    rng = np.random.default_rng(5)
    q0 = system.random_configuration(rng)
    fast.anchor(q0)
    slow.anchor(q0)
    for scale in (0.0, 1e-4, 0.01, 0.3, 1.0):
        q, qdot = q0 + scale * rng.normal(size=7), rng.normal(size=7)
        a, b = fast.evaluate(q, qdot), slow.evaluate(q, qdot)
        for f in ("theta", "J", "Jdot", "Jdot_qdot", "theta_dot"):
            x, y = getattr(a, f), getattr(b, f)
            assert np.abs(x - y).max() <= 1e-14 * max(1.0, np.abs(y).max()), (scale, f)


def test_compiled_coordinates_equal_numpy_two_frames_and_constraint_rates():
    """The coordinates kernel (qv_control.kernels.coordinates: frame Jacobians from Pinocchio's joint Jacobians, log₃,
    G, Ġ, Ȧ rows) against the numpy path: two frames, a joint, Ȧ of a two-axis point contact, in the private
    Data and in the system's; then an orientation beyond the chart raises the same error on both paths."""
    from qv_control.coordinates import MinimalCoordinates
    from qv_dynamics import ConstrainedSystem
    from qv_dynamics.errors import RankDeficiencyError

    system = ConstrainedSystem.from_urdf(
        "panda", constraints=[{"type": "point_contact", "frame": "panda_hand", "axes": ["x", "z"]}])
    spec = ["panda_hand.rx", "panda_hand.ry", "panda_hand.x", "panda_hand.rz", "panda_joint3", "panda_link5.y"]
    fast, slow = MinimalCoordinates(system, spec), MinimalCoordinates(system, spec, compiled=False)
    assert fast._fast is not None and slow._kernel is None
    rng = np.random.default_rng(5)
    q0 = system.random_configuration(rng)
    worst = 0.0
    for scale in (0.0, 1e-6, 1e-4, 0.01, 0.3, 1.0):
        q, qdot = q0 + scale * rng.normal(size=7), rng.normal(size=7)
        system.evaluate(q, qdot)
        for data in (None, system.data):
            a = fast.evaluate(q, qdot, constraint_rates=True, data=data)
            b = slow.evaluate(q, qdot, constraint_rates=True, data=data)
            for f in ("theta", "J", "Jdot", "Jdot_qdot", "theta_dot", "Adot"):
                x, y = getattr(a, f), getattr(b, f)
                worst = max(worst, float(np.abs(x - y).max() / max(1.0, np.abs(y).max())))
    assert worst <= 1e-14, worst  # measured 6e-16
    q = q0.copy()
    q[6] += 3.0  # the hand turned by 3 rad about its axis: beyond MAX_ROTATION_ANGLE
    msgs = []
    for c in (fast, slow):
        with pytest.raises(RankDeficiencyError) as err:
            c.evaluate(q, np.zeros(7))
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("name", ["pidc", "pidc_force", "passive", "quasi_tracking"])
def test_compiled_law_equals_reference_with_three_contact_rows(name):
    """A 3-D point contact (m = 3: the kernels' QR, A⁺ = ZR⁻ᵀ and aligned bases with several rows) and four
    coordinates, along a smooth admissible motion of the Panda."""
    from test_quasi_fast import _motion

    from qv_dynamics import ConstrainedSystem
    from qv_dynamics.state import Reference, State

    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    at, rng = _motion(system, seed=7)
    gains = dict(lt.PARAMS[name], coordinates=["panda_hand.rx", "panda_hand.ry", "panda_hand.rz", "panda_joint3"],
                 effort_limits=None)
    fast, slow = make_law(name, system, **gains), make_law(name, system, compiled=False, **gains)
    lam_d = np.array([0.0, 0.0, -10.0]) if name != "passive" else None
    worst = 0.0
    for k in range(30):
        q, qdot = at(1e-3 * k)
        s = State(t=1e-3 * k, q=q, qdot=qdot, lambda_meas=np.array([0.1, 0.2, -9.0]))
        r = Reference(theta=0.01 * np.ones(4), theta_dot=np.zeros(4), theta_ddot=np.ones(4), lambda_=lam_d)
        a, b = fast.compute(s, r), slow.compute(s, r)
        worst = max(worst, float(np.abs(a - b).max() / np.abs(b).max()))
    assert worst < 1e-12, worst  # measured ≤ 9e-15


@pytest.mark.parametrize("name", ["quasi_tracking", "quasi_setpoint", "pidc"])
def test_compiled_law_refuses_singular_coordinates_as_the_reference(closed_loop, name):
    """θ containing the constrained z of the table contact: D = JN has a zero row; both paths raise the same
    RankDeficiencyError naming the coordinates."""
    from qv_dynamics.errors import RankDeficiencyError

    system, states, ref = closed_loop
    coords = ["panda_hand_tcp.x", "panda_hand_tcp.y", "panda_hand_tcp.z", "panda_hand_tcp.rx", "panda_hand_tcp.ry",
              "panda_hand_tcp.rz"]
    msgs = []
    for compiled in (True, False):
        law = make_law(name, system, **dict(lt.PARAMS[name], coordinates=coords, compiled=compiled))
        with pytest.raises(RankDeficiencyError) as err:
            for s in states[:3]:
                law.compute(s, None)
        msgs.append(str(err.value).split(": cond(D)")[0])
    assert msgs[0] == msgs[1] and "panda_hand_tcp.z" in msgs[0]


@pytest.mark.parametrize("limits", ["tight", "zero"])
@pytest.mark.parametrize("name", ["quasi_tracking", "pidc_force", "passive"])
def test_compiled_tick_limiter_equals_reference(closed_loop, name, limits):
    """The fused ticks' limiter (the kernel's τ and peak ratio, saturate() beyond a limit) against the numpy path:
    limits the command exceeds (the motion channel scaled) and one zero limit (peak ratio inf, clipped)."""
    system, states, ref = closed_loop
    L = np.full(system.nv, 5.0) if limits == "tight" else np.r_[87.0, 87.0, 0.0, 87.0, 12.0, 12.0, 12.0]
    fast = make_law(name, system, coordinates=lt.COORDS, effort_limits=L, **lt.PARAMS[name])
    slow = make_law(name, system, coordinates=lt.COORDS, effort_limits=L, compiled=False, **lt.PARAMS[name])
    active = 0
    for s in states[:12]:
        r = ref(s.t)
        a, b = fast.compute(s, r), slow.compute(s, r)
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max()
        sa, sb = fast.saturation, slow.saturation
        assert (sa.active, sa.clipped) == (sb.active, sb.clipped)
        assert abs(sa.motion_scale - sb.motion_scale) <= 1e-12 and abs(sa.force_scale - sb.force_scale) <= 1e-12
        assert sa.peak_ratio == pytest.approx(sb.peak_ratio, rel=1e-12)
        active += sa.active
    assert active >= 11


def _walk(system, q0, rng, steps: int, scale: float):
    """States of a random walk from q0 (velocities and λ readings random too), one per ms."""
    from qv_dynamics.state import State

    q = q0.copy()
    out = []
    for k in range(steps):
        qdot = scale * rng.standard_normal(system.nv)
        q = q + 1e-3 * qdot
        out.append(State(t=1e-3 * k, q=q.copy(), qdot=qdot, lambda_meas=np.array([-10.0 + rng.standard_normal()])))
    return out


@pytest.mark.parametrize("name", [*lt.PARAMS, "quasi_tracking+ki_motion"])
def test_compiled_law_equals_reference_on_random_walks_and_random_states_with_resets(closed_loop, name):
    """A random walk (joint velocities 0.3 rad/s, λ readings with noise), then random states 0.05 rad around it with
    a reset every 7 samples and a stamp that repeats or goes back now and then: τ within 1e-9 of the reference
    path, and most samples through the whole compiled tick."""
    system, states, ref = closed_loop
    name, _, extra = name.partition("+")
    gains = dict(lt.PARAMS[name], **({"ki_motion": 400.0} if extra else {}))
    fast = make_law(name, system, coordinates=lt.COORDS, **gains)
    slow = make_law(name, system, coordinates=lt.COORDS, compiled=False, **gains)
    slow_ticks = numpy_ticks(fast)
    rng = np.random.default_rng(4)
    walk = _walk(system, states[0].q, rng, 80, 0.3)
    jumps = []
    for k in range(60):
        s = walk[k % len(walk)]
        t = s.t + (0.0 if k % 11 == 3 else -0.002 if k % 13 == 5 else 0.1 + 1e-3 * k)
        jumps.append(type(s)(t=t, q=s.q + 0.05 * rng.standard_normal(system.nv), qdot=s.qdot,
                             lambda_meas=s.lambda_meas))
    worst = 0.0
    for k, s in enumerate(walk + jumps):
        if k >= len(walk) and k % 7 == 0:
            fast.reset()
            slow.reset()
        r = ref(min(s.t, 3.0))
        a, b = fast.compute(s, r), slow.compute(s, r)
        worst = max(worst, float(np.abs(a - b).max() / np.abs(b).max()))
    n = len(walk) + len(jumps)
    print(f"\n{name}{'+' + extra if extra else ''}: worst {worst:.1e}, compiled ticks {n - slow_ticks[0]} of {n}")
    assert worst < 1e-9
    assert slow_ticks[0] <= 20   # the first, one after each reset (9), the repeated or backward stamps after one


@pytest.mark.parametrize("name", ["quasi_tracking", "pidc_force"])
def test_gain_change_and_contact_switch_reach_the_compiled_tick(closed_loop, name):
    """Assigning a gain repacks the compiled tick (the next torque is the reference law's with the new gain), and a
    contact switched off and on again (the constraint plan changes twice) takes the numpy path for those ticks and
    the compiled one after: τ within 1e-9 of the reference path throughout."""
    system, states, ref = closed_loop
    fast = make_law(name, system, coordinates=lt.COORDS, **lt.PARAMS[name])
    slow = make_law(name, system, coordinates=lt.COORDS, compiled=False, **lt.PARAMS[name])
    slow_ticks = numpy_ticks(fast)
    worst = 0.0
    for k, s in enumerate(states[:60]):
        if k == 20:
            fast.kd = slow.kd = 80.0
        r = ref(s.t)
        a, b = fast.compute(s, r), slow.compute(s, r)
        worst = max(worst, float(np.abs(a - b).max() / np.abs(b).max()))
    assert worst < 1e-9
    assert slow_ticks[0] == 2      # the first tick and the one after the gain change
    # the contact off, then on again: the plan key changes
    c = system.constraints[0].name
    system.set_active(c, False)
    system.set_active(c, True)
    for s in states[60:80]:
        r = ref(s.t)
        a, b = fast.compute(s, r), slow.compute(s, r)
        assert np.abs(a - b).max() <= 1e-9 * np.abs(b).max()
    assert slow_ticks[0] == 3      # one numpy tick at the switch, compiled after it
