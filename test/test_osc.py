"""Operational-space hybrid law (qv_control.laws.osc) against closed forms built from Pinocchio.

Reference: the constrained dynamics [M Aᵀ; A 0][q̈; λ] = [τ − h; −Ȧq̇] solved with Pinocchio's CRBA, RNEA
and frame Jacobians (A = the z row of the tool's world-aligned Jacobian, SPEC convention
M q̈ + h = τ − Aᵀλ), and Pinocchio's ABA for free motion. With the exact model the law must yield the
commanded task acceleration on the motion axes, zero normal acceleration and λ = λ_d (module doc).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_control.laws.osc import OperationalSpaceLaw
from qv_dynamics import ConstrainedSystem
from qv_dynamics.state import Reference, State

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
FRAME = "panda_hand_tcp"


def _system():
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": FRAME, "axes": ["z"], "name": "contact", "active": False}])


def _task(model, data, fid, q, qd, qdd):
    """Tool classical acceleration ẍ = J q̈ + J̇q̇ (6, world-aligned) and p, ṗ, R."""
    pin.forwardKinematics(model, data, q, qd, qdd)
    pin.updateFramePlacements(model, data)
    acc = pin.getFrameClassicalAcceleration(model, data, fid, LWA).vector.copy()
    vel = pin.getFrameVelocity(model, data, fid, LWA).vector.copy()
    oMf = data.oMf[fid]
    return acc, vel, oMf.translation.copy(), oMf.rotation.copy()


@pytest.mark.parametrize("contact", [False, True])
def test_osc_yields_commanded_task_acceleration_and_force(contact):
    rng = np.random.default_rng(3 + contact)
    sysm = _system()
    model = sysm.model
    data = model.createData()
    fid = model.getFrameId(FRAME)
    worst = {"acc": 0.0, "lam": 0.0}
    for _ in range(10):
        q = sysm.random_configuration(rng) * 0.6
        qd = rng.normal(size=model.nv) * 0.5
        _, vel, p, R = _task(model, data, fid, q, qd, np.zeros(model.nv))
        law = OperationalSpaceLaw(sysm, frame=FRAME, kp=60.0, kd=120.0, rotation=R,
                                  q_null=q + rng.normal(size=model.nv) * 0.3, effort_limits=None)
        sysm.set_active("contact", contact)
        a_d = rng.normal(size=3)
        lam_d = -10.0
        ref = Reference(theta=p, theta_dot=vel[:3], theta_ddot=a_d, lambda_=np.array([lam_d]))
        tau = law.compute(State(t=0.0, q=q, qdot=qd), ref)
        # the law's a* with p = p_d, ṗ = ṗ_d, R = R_d: [a_d; −K_D ω]
        a_star = np.concatenate([a_d, -(60.0 + 120.0) * vel[3:]])
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        h = pin.rnea(model, data, q, qd, np.zeros(model.nv))
        if contact:
            pin.computeJointJacobians(model, data, q)
            pin.updateFramePlacements(model, data)
            A = pin.getFrameJacobian(model, data, fid, LWA)[2:3]
            drift, *_ = _task(model, data, fid, q, qd, np.zeros(model.nv))
            K = np.block([[M, A.T], [A, np.zeros((1, 1))]])
            sol = np.linalg.solve(K, np.concatenate([tau - h, -drift[2:3]]))
            qdd, lam = sol[:-1], sol[-1]
            a_star[2] = 0.0
            worst["lam"] = max(worst["lam"], abs(lam - lam_d) / abs(lam_d))
        else:
            qdd = pin.aba(model, data, q, qd, tau)
        acc, *_ = _task(model, data, fid, q, qd, qdd)
        worst["acc"] = max(worst["acc"], np.linalg.norm(acc - a_star) / np.linalg.norm(a_star))
    print(f"\nOSC vs constrained dynamics (contact={contact}): task acc rel {worst['acc']:.2e}, "
          f"λ rel {worst['lam']:.2e}")
    # measured 8.7e-11 (free) / 5.8e-9 and 1.3e-8 (contact; random poses, cond(Λ_x) up to ~1e5)
    assert worst["acc"] < 5e-8
    assert worst["lam"] < 5e-8


def test_osc_null_space_is_dynamically_consistent():
    """The posture torque Nᵀτ₀ produces no task acceleration: J M⁻¹Nᵀ = 0 (Khatib 1987)."""
    rng = np.random.default_rng(7)
    sysm = _system()
    model = sysm.model
    data = model.createData()
    fid = model.getFrameId(FRAME)
    q = sysm.random_configuration(rng) * 0.6
    qd = rng.normal(size=model.nv) * 0.3
    _, vel, p, R = _task(model, data, fid, q, qd, np.zeros(model.nv))
    ref = Reference(theta=p, theta_dot=vel[:3], theta_ddot=np.zeros(3))
    accs = []
    for offset in (0.0, 0.5):
        law = OperationalSpaceLaw(sysm, frame=FRAME, rotation=R, q_null=q + offset, effort_limits=None)
        tau = law.compute(State(t=0.0, q=q, qdot=qd), ref)
        qdd = pin.aba(model, data, q, qd, tau)
        accs.append((_task(model, data, fid, q, qd, qdd)[0], qdd))
    assert np.linalg.norm(accs[0][0] - accs[1][0]) < 1e-9       # same task acceleration
    assert np.linalg.norm(accs[0][1] - accs[1][1]) > 1e-2       # but a different joint motion


@pytest.mark.parametrize("name", ["osc", "impedance"])
def test_baselines_are_in_the_law_registry(name):
    """make_law builds the task-space baselines by name, with node-style parameters (lists), and the torque
    equals the class built directly; a misspelled parameter is refused naming the accepted ones."""
    from qv_control.laws.impedance import ImpedanceForceBaseline
    from qv_control.laws.registry import make_law
    from qv_dynamics.errors import UnknownNameError

    rng = np.random.default_rng(11)
    sysm = _system()
    q0 = sysm.random_configuration(rng) * 0.5
    R = sysm.frame_placement(q0, FRAME).rotation
    params = dict(frame=FRAME, q_null=q0.tolist(), rotation=R.ravel().tolist())
    params.update(dict(kp=60.0, kd=120.0, kf=0.5, ki=30.0, ki_motion=3600.0) if name == "osc" else
                  dict(kp_pos=3000.0, kd_pos=150.0, force_ki=5.0))
    cls = OperationalSpaceLaw if name == "osc" else ImpedanceForceBaseline
    law, direct = make_law(name, sysm, **params), cls(sysm, **{k: np.asarray(v) if isinstance(v, list) else v
                                                               for k, v in params.items()})
    assert type(law) is cls
    p = sysm.frame_placement(q0, FRAME).translation
    for contact in (False, True):
        sysm.set_active("contact", contact)
        for k in range(3):
            st = State(t=0.001 * k, q=q0, qdot=rng.normal(size=sysm.nv) * 0.1, lambda_meas=np.array([-9.0]))
            ref = Reference(theta=p + 0.01, theta_dot=np.zeros(3), lambda_=np.array([-10.0]))
            np.testing.assert_array_equal(law.compute(st, ref), direct.compute(st, ref))
    sysm.set_active("contact", False)
    with pytest.raises(UnknownNameError, match="accepted"):
        make_law(name, sysm, frame=FRAME, kpp=1.0)


def test_impedance_null_projection_equals_pinv_form():
    """The impedance baseline's null-space torque (I − JᵀJ⁺ᵀ)x from the thin SVD equals the numpy.linalg.pinv
    form it replaces (rcond 1e-4), for a full-rank J and one with a singular value below the cut-off."""
    from qv_control.laws.impedance import _null_projection

    rng = np.random.default_rng(3)
    for scale in (1.0, 1e-6):
        U, _ = np.linalg.qr(rng.normal(size=(6, 6)))
        V, _ = np.linalg.qr(rng.normal(size=(7, 7)))
        s = np.array([2.0, 1.5, 1.0, 0.7, 0.5, 0.3 * scale])
        J = (U * s) @ V[:6]
        x = rng.normal(size=7)
        want = (np.eye(7) - J.T @ np.linalg.pinv(J, rcond=1e-4).T) @ x
        assert np.abs(_null_projection(J, x) - want).max() <= 1e-14 * np.abs(want).max()  # measured ~1e-16
