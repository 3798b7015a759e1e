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
