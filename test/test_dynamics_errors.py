"""Bad input gets a clear error from qv_dynamics.errors (SPEC §6): the error class and the message."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from models import massless_link_arm

from qv_dynamics import (
    ConstrainedSystem,
    DimensionError,
    ModelError,
    NonFiniteError,
    NotPositiveDefiniteError,
    QVError,
    UnknownNameError,
    direct_dynamics,
    quasi_decompose,
    torque_from_quasi_forces,
)
from qv_dynamics.errors import as_vector


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_state_and_torque(panda, bad):
    q = panda.neutral()
    q_bad = q.copy()
    q_bad[3] = bad
    with pytest.raises(NonFiniteError, match=r"q: non-finite entries at indices \[3\]"):
        panda.evaluate(q_bad, np.zeros(7))
    with pytest.raises(NonFiniteError, match="qdot"):
        panda.evaluate(q, np.array([0, 0, bad, 0, 0, 0, 0.0]))
    terms = panda.evaluate(q, np.zeros(7))
    tau = np.zeros(7)
    tau[6] = bad
    with pytest.raises(NonFiniteError, match=r"tau: non-finite entries at indices \[6\]"):
        direct_dynamics(terms, tau=tau)
    with pytest.raises(NonFiniteError, match="tau"):
        quasi_decompose(terms, tau=tau)
    with pytest.raises(NonFiniteError):
        panda.constraint_rows(q_bad)


def test_huge_finite_values_are_not_called_non_finite():
    x = np.array([1e200, -1e200, 3.0])          # x·x overflows, the entries are finite
    with np.errstate(over="ignore"):
        assert np.array_equal(as_vector("x", x, 3), x)


def test_wrong_sizes(panda):
    q = panda.neutral()
    with pytest.raises(DimensionError, match="q: expected length 7, got 9"):
        panda.evaluate(np.zeros(9), np.zeros(7))
    with pytest.raises(DimensionError, match="qdot: expected length 7, got 6"):
        panda.evaluate(q, np.zeros(6))
    with pytest.raises(DimensionError, match="expected a vector"):
        panda.evaluate(np.zeros((7, 1)), np.zeros(7))
    with pytest.raises(DimensionError, match="cannot be read"):
        panda.evaluate(["a"] * 7, np.zeros(7))
    terms = panda.evaluate(q, np.zeros(7))
    with pytest.raises(DimensionError, match="tau: expected length 7, got 3"):
        direct_dynamics(terms, tau=np.zeros(3))
    with pytest.raises(DimensionError, match="tau"):
        quasi_decompose(terms, tau=np.zeros(8))
    with pytest.raises(DimensionError, match="qdot"):
        quasi_decompose(terms, qdot=np.zeros(2))
    qs = quasi_decompose(terms)
    with pytest.raises(DimensionError, match="u_v: expected length 4"):
        torque_from_quasi_forces(terms, qs, np.zeros(7))
    with pytest.raises(DimensionError, match="u_xi: expected length 3"):
        torque_from_quasi_forces(terms, qs, np.zeros(4), np.zeros(2))


def test_floating_base_quaternion_must_be_unit():
    solo = ConstrainedSystem.from_urdf("solo12", floating_base=True)
    q = solo.neutral()
    q[3:7] = [0.0, 0.0, 0.0, 2.0]
    with pytest.raises(DimensionError, match="quaternion"):
        solo.evaluate(q, np.zeros(solo.nv))


def test_unknown_names(panda):
    with pytest.raises(UnknownNameError, match="unknown frame 'panda_hnd'.*panda_hand"):
        ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hnd"}])
    with pytest.raises(UnknownNameError, match="frame_b|unknown frame 'nowhere'"):
        ConstrainedSystem.from_urdf("panda", constraints=[
            {"type": "loop_closure", "frame_a": "panda_hand", "frame_b": "nowhere"}])
    with pytest.raises(UnknownNameError, match="unknown joint 'elbow'"):
        panda.joint_v_index("elbow")
    with pytest.raises(UnknownNameError, match="unknown constraint 'floor'"):
        panda.set_active("floor", False)
    with pytest.raises(UnknownNameError, match="locked joint 'finger'"):
        ConstrainedSystem.from_urdf("panda_hand", locked_joints=["finger"])


def test_mass_matrix_not_positive_definite():
    """A link with zero mass and inertia at the end of the chain makes M singular: from_urdf refuses it; a
    system built around the Pinocchio model directly meets the same error in every solver."""
    with pytest.raises(ModelError, match="not positive definite"):
        ConstrainedSystem.from_urdf(massless_link_arm())
    for cons in ([], [{"type": "point_contact", "frame": "b", "axes": ["y"]}]):
        system = ConstrainedSystem(pin.buildModelFromXML(massless_link_arm()), constraints=cons)
        terms = system.evaluate(np.array([0.1, 0.2]), np.zeros(2))
        assert np.linalg.eigvalsh(terms.M)[0] < 1e-12      # really singular
        with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
            quasi_decompose(terms)
        for method in ("projection", "kkt"):
            with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
                direct_dynamics(terms, tau=np.ones(2), method=method)


@pytest.mark.parametrize("src, msg", [
    ("<robot name='x'><link name='a'>", "could not be parsed"),
    ("<notarobot/>", "could not be parsed"),
    ("<robot name='x'><link name='a'/><link name='b'/><joint name='j' type='revolute'><parent link='a'/>"
     "<child link='b'/></joint></robot>", "could not be parsed"),   # revolute joint without limits
    ("<robot name='x'><link name='a'/></robot>", "no movable joint"),
    ("/no/such/robot.urdf", "not found"),
])
def test_malformed_urdf(src, msg):
    with pytest.raises(ModelError, match=msg):
        ConstrainedSystem.from_urdf(src)


@pytest.mark.parametrize("spec, msg", [
    ({"type": "glue", "frame": "panda_hand"}, "type must be one of"),
    ({"type": "point_contact"}, "'frame' is required"),
    ({"type": "point_contact", "frame": "panda_hand", "axes": ["rx"]}, "translations only"),
    ({"type": "weld", "frame": "panda_hand", "axes": ["x", "w"]}, "unknown axis"),
    ({"type": "weld", "frame": "panda_hand", "axes": ["x", "x"]}, "repeated axis"),
    ({"type": "loop_closure", "frame_a": "panda_hand"}, "'frame_a' and 'frame_b' are required"),
    ({"type": "custom", "rows": 1}, "'function' must be callable"),
    ({"type": "custom", "function": lambda q, qd: None, "rows": 0}, "'rows' must be a positive integer"),
    ({"type": "point_contact", "frame": "panda_hand", "stiffness": 3}, "unknown keys"),
    ("panda_hand", "expected a mapping"),
])
def test_malformed_constraint_specs(spec, msg):
    with pytest.raises(ModelError, match=msg):
        ConstrainedSystem.from_urdf("panda", constraints=[spec])


def test_custom_constraint_with_wrong_shapes():
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "custom", "rows": 2, "function": lambda q, qd: (np.zeros(2), np.zeros((2, 6)), np.zeros(2))}])
    with pytest.raises(DimensionError, match="custom constraint"):
        system.evaluate(system.neutral(), np.zeros(7))


def test_unknown_method_and_all_errors_are_qverrors(panda):
    terms = panda.evaluate(panda.neutral(), np.zeros(7))
    with pytest.raises(ValueError, match="unknown method"):
        direct_dynamics(terms, method="lagrange")
    for cls in (NonFiniteError, DimensionError, UnknownNameError, ModelError, NotPositiveDefiniteError):
        assert issubclass(cls, QVError) and issubclass(cls, ValueError)


def test_qdot_other_than_the_evaluated_one_is_refused(panda):
    """C(q, q̇) and Ȧq̇ in the terms belong to one q̇: another q̇ would give silently wrong results."""
    from qv_dynamics.errors import StateMismatchError

    rng = np.random.default_rng(0)
    q, qd, tau = panda.neutral(), rng.normal(size=7), rng.normal(size=7)
    terms = panda.evaluate(q, qd)
    ref_qs, ref_dd = quasi_decompose(terms, tau=tau), direct_dynamics(terms, tau=tau)
    same = list(qd)                                         # equal values, another object: accepted
    assert np.array_equal(quasi_decompose(terms, same, tau).lambda_, ref_qs.lambda_)
    assert np.array_equal(direct_dynamics(terms, same, tau)[0], ref_dd[0])
    with pytest.raises(StateMismatchError, match="evaluate"):
        quasi_decompose(terms, qd + 1e-3, tau)
    with pytest.raises(StateMismatchError, match="evaluate"):
        direct_dynamics(terms, qd + 1e-3, tau)
    assert issubclass(StateMismatchError, QVError)


def test_terms_without_coriolis_are_refused_by_quasi_decompose(panda):
    """``evaluate(..., coriolis=False)`` leaves C and g out (Γ and u need them): a clear error, not a crash."""
    from qv_dynamics.errors import StateMismatchError

    rng = np.random.default_rng(1)
    q, qd = panda.neutral(), rng.normal(size=7)
    fast = panda.evaluate(q, qd, coriolis=False)
    with pytest.raises(StateMismatchError, match="coriolis=False"):
        quasi_decompose(fast, tau=np.zeros(7))
    qs = quasi_decompose(panda.evaluate(q, qd))
    with pytest.raises(StateMismatchError, match="coriolis=False"):
        torque_from_quasi_forces(fast, qs, np.zeros(qs.V2.shape[1]))
