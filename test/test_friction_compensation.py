"""FrictionCompensation (qv_control/laws/friction.py): τ = τ_law − J_pᵀf̂_t with f̂_t = −μ̂|λ|v̂_t.

Checked against the closed form built from Pinocchio's frame Jacobian: the torque it adds, the μ̂ it
estimates from a measured Coulomb force, and that it adds nothing while the tool sticks or is free.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from qv_control.laws.friction import FrictionCompensation
from qv_dynamics import ConstrainedSystem
from qv_dynamics.state import Reference, State

TCP = "panda_hand_tcp"
Q0 = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])


class _Zero:
    def compute(self, state, reference=None):
        return np.zeros(7)


def _setup():
    sysm = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": TCP, "axes": ["z"], "name": "contact", "active": True}])
    J = pin.computeFrameJacobian(sysm.model, sysm.model.createData(), Q0, sysm.frame_id(TCP),
                                 pin.LOCAL_WORLD_ALIGNED)[:3]
    qd = np.linalg.pinv(J) @ np.array([0.05, 0.02, 0.0])      # the tool slides at (5, 2, 0) cm/s
    return sysm, J, qd


def test_model_mode_adds_the_coulomb_torque():
    sysm, J, qd = _setup()
    fc = FrictionCompensation(_Zero(), sysm, TCP, mode="model", mu=0.4)
    tau = fc.compute(State(t=0.0, q=Q0, qdot=qd, lambda_meas=np.array([-10.0])))
    v = (J @ qd)[:2]
    f_t = np.zeros(3)
    f_t[:2] = -0.4 * 10.0 * v / np.linalg.norm(v)
    assert np.allclose(tau, -J.T @ f_t, atol=1e-12)


def test_measured_mode_estimates_mu_and_stays_off_when_sticking_or_free():
    sysm, J, qd = _setup()
    fc = FrictionCompensation(_Zero(), sysm, TCP, mode="measured", filter_hz=2.0)
    v = (J @ qd)[:2]
    f_meas = np.array([*(-0.7 * 10.0 * v / np.linalg.norm(v)), 10.0])   # Coulomb μ = 0.7 on the tool
    for k in range(2000):
        fc.measure(f_meas + np.array([0.05 * np.sin(k), 0.0, 0.0]))
        tau = fc.compute(State(t=k * 1e-3, q=Q0, qdot=qd, lambda_meas=np.array([-10.0])))
    print(f"\nμ̂ after 2 s = {fc.mu:.6f} (true 0.7)")
    assert abs(fc.mu - 0.7) < 5e-5            # measured 7e-6 (the 0.05 N ripple on f_x)
    assert np.allclose(tau, -J.T @ fc.last_f_t, atol=1e-12)
    assert np.linalg.norm(tau) > 1.0
    stuck = fc.compute(State(t=3.0, q=Q0, qdot=np.zeros(7), lambda_meas=np.array([-10.0])))
    assert np.all(stuck == 0.0)
    sysm.set_active("contact", False)
    free = fc.compute(State(t=3.001, q=Q0, qdot=qd, lambda_meas=None))
    assert np.all(free == 0.0)


def test_direction_filter_removes_velocity_noise_from_the_compensation():
    """Joint-velocity noise σ = 0.01 rad/s: the raw sliding direction turns the compensated 4 N by the noise;
    low-passed at 5 Hz the compensated force is 7x closer to the closed form −μ|λ|v/|v|."""
    sysm, J, qd = _setup()
    v = (J @ qd)[:2]
    f_true = np.zeros(3)
    f_true[:2] = -0.4 * 10.0 * v / np.linalg.norm(v)
    rng = np.random.default_rng(0)
    errs = {}
    for hz in (0.0, 5.0):
        fc = FrictionCompensation(_Zero(), sysm, TCP, mode="model", mu=0.4, direction_hz=hz)
        e = []
        for k in range(1500):
            noisy = qd + rng.normal(0.0, 0.01, 7)
            fc.compute(State(t=k * 1e-3, q=Q0, qdot=noisy, lambda_meas=np.array([-10.0])))
            if k >= 500:      # after the filter has settled (5 time constants of 32 ms)
                e.append(np.linalg.norm(fc.last_f_t - f_true))
        errs[hz] = float(np.sqrt(np.mean(np.square(e))))
    print(f"\ncompensated friction force error RMS: raw {errs[0.0]:.3f} N, 5 Hz {errs[5.0]:.4f} N")
    assert errs[0.0] > 0.3                       # measured 0.61 N: the noise reaches the torque
    assert errs[5.0] < 0.2                       # measured 0.084 N


def test_reference_direction_compensates_from_the_prior_while_the_tool_sticks():
    """direction="reference": while the tool sticks (q̇ = 0) and the reference moves, f̂_t = −μ_prior|λ|v̂_d
    along the desired direction (closed form); once the tool slides the measured μ replaces the prior."""
    sysm, J, qd = _setup()
    fc = FrictionCompensation(_Zero(), sysm, TCP, mode="measured", mu=0.5, direction="reference")
    v_d = np.array([0.03, -0.04])
    ref = Reference(theta=np.zeros(6), theta_dot=np.array([*v_d, 0.0, 0.0, 0.0, 0.0]))
    tau = fc.compute(State(t=0.0, q=Q0, qdot=np.zeros(7), lambda_meas=np.array([-10.0])), ref)
    f_t = np.zeros(3)
    f_t[:2] = -0.5 * 10.0 * v_d / np.linalg.norm(v_d)
    assert np.allclose(tau, -J.T @ f_t, atol=1e-12)
    v = (J @ qd)[:2]
    fc.measure(np.array([*(-0.7 * 10.0 * v / np.linalg.norm(v)), 10.0]))     # sliding at μ = 0.7
    fc.compute(State(t=0.001, q=Q0, qdot=qd, lambda_meas=np.array([-10.0])), ref)
    assert abs(fc.mu - 0.7) < 1e-12 and np.allclose(fc.last_f_t[:2], -7.0 * v_d / np.linalg.norm(v_d))
    still = fc.compute(State(t=0.002, q=Q0, qdot=qd, lambda_meas=np.array([-10.0])),
                       Reference(theta=np.zeros(6), theta_dot=np.zeros(6)))
    assert np.all(still == 0.0)                  # the reference holds: nothing to compensate
