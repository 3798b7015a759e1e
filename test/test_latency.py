"""Latency compensation (qv_control.latency) against independent references.

- the predicted state at t + L under a held torque against Pinocchio's constrained dynamics
  (pin.constraintDynamics, the Panda's tool on a 3-D point contact and in free motion via ABA) integrated by
  RK4 in 200 substeps: errors at the size of the Taylor remainder (½L²‖q⃛‖ for q̇, ⅙L³‖q⃛‖ for q) and with
  its order (halving L divides them by 4 and 8);
- the measured update period from stamps with skipped states and jitter; the horizon's checks.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from models import PinReference, null_space_qdot

from qv_control.latency import AUTO, StampPeriod, StatePredictor
from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import QVError

FRAME = "panda_hand_tcp"


def _panda():
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": FRAME, "axes": ["x", "y", "z"], "name": "contact", "active": True}])


def _rk4(model, accel, q, v, L, n=200):
    """(q, q̇) at t + L of q̈ = accel(q, q̇) by RK4 with n substeps (q on the manifold via pin.integrate)."""
    h = L / n
    for _ in range(n):
        k1v, k1a = v, accel(q, v)
        q2, v2 = pin.integrate(model, q, 0.5 * h * k1v), v + 0.5 * h * k1a
        k2v, k2a = v2, accel(q2, v2)
        q3, v3 = pin.integrate(model, q, 0.5 * h * k2v), v + 0.5 * h * k2a
        k3v, k3a = v3, accel(q3, v3)
        q4, v4 = pin.integrate(model, q, h * k3v), v + h * k3a
        k4v, k4a = v4, accel(q4, v4)
        q = pin.integrate(model, q, h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v))
        v = v + h / 6 * (k1a + 2 * k2a + 2 * k3a + k4a)
    return q, v


def _errors(sysm, accel, q, v, tau, L):
    """(‖Δq‖, ‖Δq̇‖) of the prediction over L against the reference, each over its Taylor remainder
    ⅙L³‖q⃛‖, ½L²‖q⃛‖ (q⃛ at t by a central difference of the reference's q̈ over ±10 µs)."""
    t, qh, vh = StatePredictor(sysm, L).predict(0.0, q, v, tau)
    assert t == L
    qr, vr = _rk4(sysm.model, accel, q, v, L)
    (qp, vp), (qm, vm) = _rk4(sysm.model, accel, q, v, 1e-5, 10), _rk4(sysm.model, accel, q, v, -1e-5, 10)
    jerk = float(np.linalg.norm(accel(qp, vp) - accel(qm, vm))) / 2e-5
    dq, dv = float(np.linalg.norm(pin.difference(sysm.model, qr, qh))), float(np.linalg.norm(vh - vr))
    return dq, dv, dq / (L ** 3 / 6 * jerk), dv / (L ** 2 / 2 * jerk)


@pytest.mark.parametrize("contact", [True, False])
def test_prediction_matches_pinocchio_integrated(contact):
    rng = np.random.default_rng(11)
    sysm = _panda()
    sysm.set_active("contact", contact)
    model = sysm.model
    if contact:
        ref = PinReference(sysm, [("3d", FRAME)])
        accel = lambda q, v: ref(q, v, tau)[0]  # noqa: E731
    else:
        data = model.createData()
        accel = lambda q, v: pin.aba(model, data, q, v, tau)  # noqa: E731
    worst = []
    for _ in range(3):
        q = sysm.random_configuration(rng) * 0.6
        # a consistent state in contact: q̇ in the null space of A
        v = null_space_qdot(sysm, q, rng, 0.5) if contact else rng.normal(size=sysm.nv) * 0.5
        tau = pin.computeGeneralizedGravity(model, model.createData(), q) + rng.normal(size=sysm.nv) * 2.0
        e1 = _errors(sysm, accel, q, v, tau, 1e-3)
        e2 = _errors(sysm, accel, q, v, tau, 0.5e-3)
        worst.append((e1[0], e1[1], e1[2], e1[3], e1[0] / e2[0], e1[1] / e2[1]))
    w = np.array(worst)
    print(f"\nprediction over 1 ms vs Pinocchio + RK4 ({'3-D contact' if contact else 'free'}): ‖Δq‖ "
          f"{w[:, 0].min():.1e}–{w[:, 0].max():.1e} = {w[:, 2].min():.2f}–{w[:, 2].max():.2f}x ⅙L³‖q⃛‖, ‖Δq̇‖ "
          f"{w[:, 1].min():.1e}–{w[:, 1].max():.1e} = {w[:, 3].min():.2f}–{w[:, 3].max():.2f}x ½L²‖q⃛‖; halving L "
          f"divides them by {w[:, 4].min():.2f}–{w[:, 4].max():.2f} / {w[:, 5].min():.2f}–{w[:, 5].max():.2f}")
    # the Taylor remainders themselves: measured 0.98–1.05x (L = 1 ms); the orders 3 and 2: 7.94–8.15, 3.96–4.10
    assert np.all((w[:, 2] > 0.85) & (w[:, 2] < 1.15)) and np.all((w[:, 3] > 0.85) & (w[:, 3] < 1.15))
    assert np.all((w[:, 4] > 7.5) & (w[:, 4] < 8.5)) and np.all((w[:, 5] > 3.75) & (w[:, 5] < 4.25))


def test_zero_horizon_and_unknown_held_torque_return_the_state():
    sysm = _panda()
    q, v = sysm.neutral(), np.full(sysm.nv, 0.1)
    for pred, tau in ((StatePredictor(sysm, 0.0), np.zeros(sysm.nv)), (StatePredictor(sysm, 1e-3), None)):
        t, qh, vh = pred.predict(2.0, q, v, tau)
        assert t == 2.0 and qh is q and vh is v


@pytest.mark.parametrize("skipped", [0.2, 0.7])
def test_period_from_stamps_ignores_skips_and_jitter(skipped):
    """A node answering the freshest state only sees 2, 3, ... periods where it skipped (under load, most)."""
    rng = np.random.default_rng(3)
    est = StampPeriod()
    t, seen = 10.0, []
    for k in range(300):
        t += 1e-3 * (1 + rng.geometric(1 - skipped) - 1)     # each state skipped with probability ``skipped``
        seen.append(est.update(t + rng.normal(0.0, 2e-6)))   # stamp jitter of 2 µs
    assert seen[6] == 0.0                                     # not known before 8 spacings
    assert abs(seen[-1] - 1e-3) < 1e-5
    pred = StatePredictor(_panda(), AUTO)
    for k in range(9):
        pred.lead(0.002 * k)
    assert abs(pred.lead_now - 0.002) < 1e-12


@pytest.mark.parametrize("bad", [-0.5, float("nan"), float("inf"), 0.2, 1e9])
def test_bad_horizon_refused(bad):
    with pytest.raises(QVError, match="horizon"):
        StatePredictor(_panda(), bad)


@pytest.mark.parametrize("contact", [True, False])
def test_compiled_prediction_equals_the_numpy_path(contact):
    """The compiled path (QuasiSampler terms + the simulator's eq. 25 kernel) against ``compiled=False``
    (``system.evaluate`` + :func:`direct_dynamics`): the same prediction to rounding (measured ≤ 3e-17 in q̂̇)."""
    from qv_dynamics.kernels.loader import load

    if load("qv_dynamics.kernels.sim") is None:
        pytest.skip("compiled kernels not cached (run qv warm)")
    rng = np.random.default_rng(5)
    sysm = _panda()
    sysm.set_active("contact", contact)
    fast, ref = StatePredictor(sysm, 1e-3), StatePredictor(sysm, 1e-3, compiled=False)
    assert fast._sampler is not None and ref._fast is None
    for _ in range(5):
        q = sysm.random_configuration(rng) * 0.6
        v = null_space_qdot(sysm, q, rng, 0.5) if contact else rng.normal(size=sysm.nv) * 0.5
        tau = rng.normal(size=sysm.nv) * 5.0
        (_, qa, va), (_, qb, vb) = fast.predict(0.0, q, v, tau), ref.predict(0.0, q, v, tau)
        assert np.abs(qa - qb).max() <= 1e-15 and np.abs(va - vb).max() <= 1e-12 * (1.0 + np.abs(vb).max())
    with pytest.raises(QVError):
        fast.predict(0.0, q, v, np.full(sysm.nv, np.nan))
