"""Minimal coordinates, references, limits and the law factory of qv_control: finite-difference checks
of θ(q), ∂θ/∂q, its time derivative and Ȧ, and the clear errors for bad input."""
import numpy as np
import pytest
from control_helpers import COORDS, Q0, fivebar, panda_pair

from qv_control import (
    GainError,
    MinimalCoordinates,
    Reference,
    ReferenceRangeError,
    SplineReference,
    State,
    TrajectoryReference,
    make_law,
    saturate,
)
from qv_control.saturation import resolve_limits
from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import DimensionError, NonFiniteError, QVError, RankDeficiencyError, UnknownNameError


def _fd_checks(system, coords, q, v, h=1e-6, h2=1e-4):
    """Central differences along q(t) = q ⊕ t q̇ (q̈ = 0): θ̇ = Jq̇, J̇ = dJ/dt, θ̈ = J̇q̇ (second difference of
    θ itself, step h2), Ȧ = dA/dt."""
    kt = coords.evaluate(q, v, constraint_rates=True)
    qp, qm = system.integrate(q, h * v), system.integrate(q, -h * v)
    kp_, km_ = coords.evaluate(qp, v), coords.evaluate(qm, v)
    th_rate = (kp_.theta - km_.theta) / (2 * h)
    J_rate = (kp_.J - km_.J) / (2 * h)
    th2 = [coords.evaluate(system.integrate(q, s * h2 * v), v).theta for s in (-1, 0, 1)]
    th_acc = (th2[0] - 2 * th2[1] + th2[2]) / h2 ** 2
    A_rate = (system.constraint_rows(qp)[1] - system.constraint_rows(qm)[1]) / (2 * h)
    return (np.max(np.abs(th_rate - kt.J @ v)), np.max(np.abs(J_rate - kt.Jdot)),
            np.max(np.abs(th_acc - kt.Jdot_qdot)), np.max(np.abs(A_rate - kt.Adot)))


def test_coordinate_jacobians_against_finite_differences():
    rng = np.random.default_rng(3)
    custom = {"type": "custom", "rows": 1, "name": "c",
              "function": lambda q, qd: (np.array([np.sin(q[0]) * q[1]]),
                                         np.array([[np.cos(q[0]) * q[1], np.sin(q[0]), 0, 0, 0, 0, 0]]),
                                         np.array([-np.sin(q[0]) * q[1] * qd[0] ** 2
                                                   + 2 * np.cos(q[0]) * qd[0] * qd[1]]))}
    cons = [{"type": "weld", "frame": "panda_hand", "axes": ["z", "rx"]},
            {"type": "loop_closure", "frame_a": "panda_link7", "frame_b": "panda_link3", "axes": ["x"]}, custom]
    system = ConstrainedSystem.from_urdf("panda", constraints=cons)
    coords = MinimalCoordinates(system, ["panda_hand.x", "panda_hand.y", "panda_hand.z", "panda_hand.rx",
                                         "panda_hand.ry", "panda_hand.rz", {"joints": ["panda_joint2"]}])
    q = Q0 + 0.2 * rng.normal(size=7)
    coords.anchor(Q0)
    system.anchor(q)
    worst = np.zeros(4)
    for _ in range(3):
        v = rng.normal(size=7)
        worst = np.maximum(worst, _fd_checks(system, coords, q, v))
    print(f"\n[coordinates] FD residuals: theta_dot {worst[0]:.1e}, J_dot {worst[1]:.1e}, J_dot q_dot {worst[2]:.1e}, "
          f"A_dot (weld z/rx, loop closure x, custom) {worst[3]:.1e}")
    assert np.all(worst[[0, 1, 3]] < 1e-7)
    assert worst[2] < 5e-7  # second difference (measured 8e-8): truncation O(h2²), rounding O(ε/h2²)


def test_reduced_jacobian_checks():
    _, model = panda_pair()
    # too few coordinates for n − r: refused when the law is built, not at its first compute
    with pytest.raises(DimensionError, match="n - r >= 7 - 1 = 6"):
        make_law("quasi_tracking", model, coordinates=COORDS[:2], effort_limits=None)
    # hand z is fixed by the plane: with it, D is singular
    bad = make_law("quasi_tracking", model, coordinates=["panda_hand.x", "panda_hand.y", "panda_hand.z",
                                                         "panda_hand.rx", "panda_hand.ry", "panda_hand.rz"])
    with pytest.raises(RankDeficiencyError, match="cond"):
        bad.compute(State(0.0, Q0, np.zeros(7)))
    with pytest.raises(UnknownNameError):
        make_law("pidc", model, coordinates=["panda_hand.q"])
    with pytest.raises(UnknownNameError):
        make_law("pidc", model, coordinates=["no_such_joint"])


def test_bad_references_give_clear_errors():
    _, model = panda_pair()
    law = make_law("quasi_tracking", model, coordinates=COORDS, effort_limits=None)
    law.coords.anchor(Q0)
    th0 = law.coords.evaluate(Q0, np.zeros(7)).theta
    st = State(0.0, Q0, np.zeros(7))
    tau = law.compute(st, Reference(theta=th0, lambda_=[-10.0]))
    assert tau.shape == (7,) and np.all(np.isfinite(tau))
    bad_theta = th0.copy()
    bad_theta[1] = np.nan
    with pytest.raises(NonFiniteError, match="theta"):
        law.compute(st, Reference(theta=bad_theta))
    with pytest.raises(DimensionError, match="expected length 6"):
        law.compute(st, Reference(theta=th0[:5]))
    with pytest.raises(DimensionError, match="lambda"):
        law.compute(st, Reference(theta=th0, lambda_=[1.0, 2.0]))
    out = th0.copy()
    out[5] = 3.5  # panda_joint3 range is ±2.8973
    with pytest.raises(ReferenceRangeError, match="panda_joint3"):
        law.compute(st, Reference(theta=out))
    with pytest.raises(ReferenceRangeError, match="waypoint 1"):
        SplineReference([0, 1], [th0, out], coordinates=law.coords)
    with pytest.raises(DimensionError, match="strictly increasing"):
        SplineReference([0, 0], [th0, th0])
    with pytest.raises(NonFiniteError):
        TrajectoryReference(lambda t: th0 * np.nan, size=6)(0.0)
    with pytest.raises(NonFiniteError, match="lambda_meas"):
        law.compute(State(0.0, Q0, np.zeros(7), lambda_meas=np.array([np.inf])), Reference(theta=th0))
    with pytest.raises(DimensionError, match="qdot"):
        law.compute(State(0.0, Q0, np.zeros(6)), Reference(theta=th0))
    assert issubclass(ReferenceRangeError, QVError)


@pytest.mark.parametrize("kind", ["cubic", "quintic"])
def test_spline_reference_derivatives(kind):
    t = [0.0, 0.4, 1.0, 1.5]
    W = np.array([[0.0, 1.0], [0.2, 0.8], [0.1, 0.5], [0.3, 0.4]])
    ref = SplineReference(t, W, kind=kind, lambda_=lambda tt: [-10.0 - tt])
    h = 1e-5
    errs = []
    for tt in (0.1, 0.7, 1.2):
        r, rp, rm = ref(tt), ref(tt + h), ref(tt - h)
        errs.append(np.max(np.abs((rp.theta - rm.theta) / (2 * h) - r.theta_dot)))
        errs.append(np.max(np.abs((rp.theta_dot - rm.theta_dot) / (2 * h) - r.theta_ddot)))
    for i, ti in enumerate(t):
        assert np.allclose(ref(ti).theta, W[i], atol=1e-12)
    assert np.allclose(ref(2.0).theta, W[-1]) and np.allclose(ref(2.0).theta_dot, 0)
    assert np.allclose(ref(0.0).theta_dot, 0, atol=1e-12)   # clamped start
    assert ref(0.5).lambda_[0] == pytest.approx(-10.5)
    print(f"\n[spline {kind}] derivative FD residual {max(errs):.1e}")
    assert max(errs) < 1e-5


def test_saturation_scales_motion_before_force():
    base = np.array([1.0, -2.0, 0.5])
    force = np.array([0.5, 0.5, 0.0])
    motion = np.array([4.0, -1.0, 3.0])
    L = np.array([3.0, 3.0, 3.0])
    tau, st = saturate(base, force, motion, L)
    assert st.active and 0 < st.motion_scale < 1 and st.force_scale == 1.0
    assert np.all(np.abs(tau) <= L + 1e-12) and np.max(np.abs(tau) / L) == pytest.approx(1.0)
    assert np.allclose(tau, base + force + st.motion_scale * motion)
    # force channel alone infeasible -> scaled, motion dropped
    tau, st = saturate(base, np.array([5.0, 0, 0]), motion, L)
    assert st.motion_scale == 0.0 and st.force_scale == pytest.approx(0.4)
    tau, st = saturate(np.array([4.0, 0, 0]), force, motion, L)
    assert st.clipped and np.all(np.abs(tau) <= L)
    tau, st = saturate(base, force, 0.1 * motion, L)
    assert not st.active
    _, model = panda_pair()
    assert np.allclose(resolve_limits(model, "urdf"), model.effort_limits())
    assert resolve_limits(model, None) is None
    with pytest.raises(DimensionError):
        resolve_limits(model, [1.0, 2.0])


def test_make_law_names_and_parameters():
    _, model = panda_pair()
    for name in ("quasi_tracking", "quasi_setpoint", "pidc", "pidc_force"):
        law = make_law(name, model, coordinates=COORDS)
        law.coords.anchor(Q0)
        tau = law.compute(State(0.0, Q0, np.zeros(7), np.array([-10.0])), None)  # None: hold current θ
        terms = model.evaluate(Q0, np.zeros(7))
        # at rest, on target, λ_d = 0: gravity only (PIDC: its minimum-norm potent part P g; the plane takes the rest)
        P = np.eye(7) - np.linalg.pinv(terms.A) @ terms.A
        assert np.allclose(tau, P @ terms.g if name == "pidc" else terms.g, atol=1e-9), name
    with pytest.raises(UnknownNameError, match="available"):
        make_law("nope", model, coordinates=COORDS)
    with pytest.raises(UnknownNameError, match="unknown parameter"):
        make_law("pidc", model, coordinates=COORDS, gain=3)
    with pytest.raises(GainError):
        make_law("quasi_tracking", model, coordinates=COORDS, kd=-1)
    with pytest.raises(GainError, match="form"):
        make_law("quasi_setpoint", model, coordinates=COORDS, form="other")
    # eq. 50: W = diag(κ⁻² on translational joints, 1 on rotational ones)
    law = make_law("pidc", model, coordinates=COORDS, kappa=0.5, translational=["panda_joint1"])
    assert np.allclose(np.diag(law.W), [4.0, 1, 1, 1, 1, 1, 1])
    sysm, q0 = fivebar()
    law = make_law("passive", sysm, coordinates=["tip_a.x", "tip_a.z"], actuated=["a1_joint", "b2_joint"], q0=q0)
    tau = law.compute(State(0.0, q0, np.zeros(4)))
    assert tau[1] == 0.0 and tau[2] == 0.0


def _left_jacobian_inverse_ld(phi) -> np.ndarray:
    """J_l⁻¹(φ) = I − ½[φ]× + (1/θ² − (1 + cos θ)/(2θ sin θ))[φ]×² in 80-bit long double (the cancellation
    costs ~1e-19/θ² there); for small angles, where Pinocchio's Jlog3 switches to a series (error 6e-11)."""
    phi = np.asarray(phi, np.longdouble)
    th = np.sqrt(phi @ phi)
    P = np.array([[0, -phi[2], phi[1]], [phi[2], 0, -phi[0]], [-phi[1], phi[0], 0]], np.longdouble)
    c = np.longdouble(1) / 12 if th == 0 else 1 / th ** 2 - (1 + np.cos(th)) / (2 * th * np.sin(th))
    return np.eye(3, dtype=np.longdouble) - P / 2 + c * (P @ P)


@pytest.mark.parametrize("angle", [0.0, 1e-3, 0.019, 0.021, 0.3, 2.0])
def test_rotation_rate_closed_form_against_pinocchio_jlog3(angle):
    """G = Jlog₃(E)Eᵀ (Pinocchio; below 0.01 rad the long-double closed form) and Ġ (Richardson-extrapolated
    central differences of that G along Ė = [ω]×E) against ``MinimalCoordinates._rotation`` (series below
    0.02 rad, closed form above: both sides of the switch)."""
    import pinocchio as pin

    system = ConstrainedSystem.from_urdf("panda")
    coords = MinimalCoordinates(system, ["panda_hand.rx", "panda_hand.ry", "panda_hand.rz"])
    rng = np.random.default_rng(5)
    axis = rng.normal(size=3)
    E = pin.exp3(angle * axis / np.linalg.norm(axis))
    coords._rot_ref[system.frame_id("panda_hand")] = np.eye(3)
    J6, dJ6 = rng.normal(size=(6, 7)), rng.normal(size=(6, 7))
    qdot = rng.normal(size=7)
    _, GJ, GJd = coords._rotation(system.frame_id("panda_hand"), E, J6, dJ6, qdot, 0)
    w = J6[3:] @ qdot

    def G(h):
        Eh = pin.exp3(h * w) @ E
        if angle < 0.01:
            return _left_jacobian_inverse_ld(pin.log3(Eh))
        return pin.Jlog3(Eh) @ Eh.T

    d = [(G(h) - G(-h)) / (2 * h) for h in (1e-3, 5e-4)]
    Gd = (4 * d[1] - d[0]) / 3                      # O(h⁴): ≈ 1e-13
    err_G = float(np.abs(GJ - G(0.0) @ J6[3:]).max())
    err_Gd = float(np.abs(GJd - (G(0.0) @ dJ6[3:] + Gd @ J6[3:])).max())
    print(f"\nθ = {angle}: |GJ − reference| {err_G:.1e}, |(GJ)˙ − reference| {err_Gd:.1e}")
    assert err_G < 2e-15
    assert err_Gd < 5e-12
