"""The laws' shortcuts against the formulations they replace, on the states of the Panda table task
(bench/law_tick.py): equal to rounding or bit for bit."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from law_tick import COORDS, JOINTS, closed_loop_states  # noqa: E402

from qv_control.laws import make_law  # noqa: E402
from qv_control.laws.passive import passive_projector  # noqa: E402
from qv_dynamics.projection import projection  # noqa: E402


def test_tracking_law_forms_the_integral_torque_when_asked_as_it_did_every_sample():
    """QuasiTrackingLaw keeps τ_I's ingredients of the last sample and forms τ_I = Q(−V₂k_I z + V₁V₁ᵀΛᵀk_i∫e)
    only when the carry needs it; a twin law that forms it after every sample (the previous formulation)
    gives the same torques and the same integral_torque, bit for bit."""
    system, states, ref = closed_loop_states(0.2, 2)
    gains = dict(coordinates=COORDS, kp=60.0, kd=120.0, kf=0.3, ki=30.0, ki_motion=400.0)
    lazy, eager = make_law("quasi_tracking", system, **gains), make_law("quasi_tracking", system, **gains)
    for s in states:
        tau_l, tau_e = lazy.compute(s, ref(s.t)), eager.compute(s, ref(s.t))
        eager._tau_int()
        assert np.array_equal(tau_l, tau_e)
    assert lazy._carry.tau_int is None and eager._carry.tau_int is not None
    assert np.array_equal(lazy.integral_torque, eager.integral_torque)
    assert np.abs(lazy.integral_torque).max() > 1e-3  # the integrals did act


def test_passive_law_with_every_joint_actuated_skips_the_identity_projector():
    """All joints actuated: I + H = I (eq. 61 with I − B = 0), so the law's channels are Ph and PMu_p; they
    equal (I + H)Ph and (I + H)PMu_p with I + H from passive_projector, bit for bit."""
    system, states, ref = closed_loop_states(0.1, 10)
    # the numpy projection (compiled=False), so that projection(terms).P below is the law's own P
    law = make_law("passive", system, coordinates=COORDS, kp=400.0, kd=40.0, actuated=JOINTS, compiled=False)
    for s in states:
        t, terms, base, motion, u_p = law.channels(s, ref(s.t))
        P = projection(terms).P                       # what the law computed from the same terms
        IH, _, resid = passive_projector(terms.A, law.mask, law.tol, P=P)
        assert resid == 0.0 and np.array_equal(IH, np.eye(system.nv))
        assert np.array_equal(base, IH.dot(P.dot(terms.h)))
        assert np.array_equal(motion, IH.dot(P.dot(terms.M.dot(u_p))))


def test_spline_output_is_checked_once_and_still_range_checked():
    """SplineReference output (CheckedReference) skips the finiteness checks it passed where it was made,
    yields the same values as a plain Reference, and still gets the joint-range check and size checks."""
    from qv_control.coordinates import MinimalCoordinates
    from qv_control.references import CheckedReference, ReferenceRangeError, SplineReference, validate_reference
    from qv_dynamics import ConstrainedSystem
    from qv_dynamics.errors import DimensionError
    from qv_dynamics.state import Reference

    system = ConstrainedSystem.from_urdf("panda")
    coords = MinimalCoordinates(system, ["panda_joint2", "panda_joint4"])
    ok = SplineReference([0, 1, 2], [[0, -2], [1.7, -2], [0, -2]], lambda_=[1.0, 2.0])
    r = ok(0.7)
    assert type(r) is CheckedReference
    fast = validate_reference(r, 2, 2, coords)
    slow = validate_reference(Reference(*(np.array(x) for x in (r.theta, r.theta_dot, r.theta_ddot, r.lambda_))),
                              2, 2, coords)
    for f in ("theta", "theta_dot", "theta_ddot", "lambda_"):
        assert np.array_equal(getattr(fast, f), getattr(slow, f))
    with pytest.raises(DimensionError):
        validate_reference(r, 3, 2, coords)   # wrong k: the full checks run and name the field
    with pytest.raises(DimensionError):
        validate_reference(r, 2, 1, coords)   # wrong m
    over = SplineReference([0, 1], [[1.9, -2], [1.0, -2]], kind="cubic")  # joint 2 beyond its 1.7628 rad
    with pytest.raises(ReferenceRangeError):
        validate_reference(over(0.0), 2, 0, coords)


def test_state_read_in_one_test_gives_the_same_torques_and_the_same_errors():
    """A state of float64 vectors is checked with one finiteness test (q·q + q̇·q̇ + λ·λ); lists take the
    per-vector path: the same torques bit for bit, and a non-finite, badly sized or overflowing entry still
    raises naming the bad vector."""
    from qv_dynamics.errors import DimensionError, NonFiniteError
    from qv_dynamics.state import State

    system, states, ref = closed_loop_states(0.1, 20)
    gains = dict(coordinates=COORDS, kp=60.0, kd=120.0, kf=0.3, ki=30.0)
    fast, slow = make_law("quasi_tracking", system, **gains), make_law("quasi_tracking", system, **gains)
    for s in states:
        listed = State(t=s.t, q=s.q.tolist(), qdot=s.qdot.tolist(), lambda_meas=s.lambda_meas.tolist())
        assert fast._read_arrays(s) is not None and slow._read_arrays(listed) is None
        assert np.array_equal(fast.compute(s, ref(s.t)), slow.compute(listed, ref(s.t)))
    s = states[-1]
    for field, bad, err in [("qdot", np.nan, "state.qdot"), ("lambda_meas", np.inf, "state.lambda_meas"),
                            ("q", 1e200, "state.q: entries too large")]:
        arr = getattr(s, field).copy()
        arr[0] = bad
        st = State(t=s.t, **{**dict(q=s.q, qdot=s.qdot, lambda_meas=s.lambda_meas), field: arr})
        assert fast._read_arrays(st) is None  # (q·q overflows: finite entries the dynamics would turn into NaN)
        with pytest.raises(NonFiniteError, match=err):
            fast.compute(st, ref(s.t))
    with pytest.raises(DimensionError, match="state.lambda_meas"):
        fast.compute(State(t=s.t, q=s.q, qdot=s.qdot, lambda_meas=np.zeros(3)), ref(s.t))
