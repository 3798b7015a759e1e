"""Whole-body operational-space law (qv_control.laws.osc_constrained) against the constrained dynamics built from
Pinocchio, and against the projection laws it must equal with an exact model.

Reference: [M Aᵀ; A 0][q̈; λ] = [τ − h; −Ȧq̇] (SPEC convention M q̈ + h = τ − Aᵀλ) with M, h from Pinocchio's CRBA
and RNEA, A from the frames' world-aligned Jacobians and Ȧq̇ by a central difference of A(q)q̇ along q̇; the
least-squares solution when the rows are redundant (λ is then unique in R(A)). With the exact model the law must
give θ̈ = θ̈_d + G_D ė + G_P e and the commanded λ in R(A) (module doc); with every joint actuated and the force PI
off it is the projection hybrid law (``pidc_force``, eq. 54) to rounding, and with a passive joint the passive-joint
law (eq. 56–62): the same q̈ and the same contact force, hence the same torque.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_control.demo.cases import closed_chain_force as crank_row
from qv_control.demo.cases.face import face_pose, face_system
from qv_control.laws.base import GainError
from qv_control.laws.osc_constrained import ConstrainedOperationalSpaceLaw
from qv_control.laws.passive import PassiveJointLaw
from qv_control.laws.pidc_force import PIDCForceLaw
from qv_dynamics.errors import DimensionError, RankDeficiencyError, UnknownNameError
from qv_dynamics.state import Reference, State

GP, GD = 7200.0, 180.0


def _cases():
    """(system, coordinates, nominal q): three face rows of rank 2 on the planar arm, the slider-crank's guide."""
    face = face_system()
    crank = crank_row.system()
    return [(face, ["face_m.x"], face_pose(face, 0.62)), (crank, ["crank_joint"], np.array([0.4, -0.8]))]


def _kkt(sysm, q, qd, tau):
    """q̈ and λ (least squares: unique in R(A)) of the constrained dynamics, from Pinocchio's terms."""
    model, data = sysm.model, sysm.model.createData()
    M = pin.crba(model, data, q)
    M = np.triu(M) + np.triu(M, 1).T
    h = pin.rnea(model, data, q, qd, np.zeros(model.nv))
    A = sysm.constraint_rows(q)[1]
    eps = 1e-6
    drift = (sysm.constraint_rows(q + eps * qd)[1] - sysm.constraint_rows(q - eps * qd)[1]).dot(qd) / (2 * eps)
    m = A.shape[0]
    K = np.block([[M, A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.lstsq(K, np.concatenate([tau - h, -drift]), rcond=1e-12)[0]
    return sol[:-m], sol[-m:], A


def _state_and_reference(rng, q0, m):
    q = q0 + rng.normal(size=q0.size) * 0.02
    qd = rng.normal(size=q0.size) * 0.3
    ref = Reference(theta=None, theta_dot=rng.normal(size=1) * 0.1, theta_ddot=rng.normal(size=1),
                    lambda_=-3.0 - rng.uniform(size=m))
    return q, qd, ref


def test_the_closed_loop_is_the_commanded_task_acceleration_and_contact_force():
    rng = np.random.default_rng(7)
    worst = {"acc": 0.0, "lam": 0.0}
    for sysm, coords, q0 in _cases():
        for _ in range(5):
            q, qd, ref = _state_and_reference(rng, q0, sysm.m)
            law = ConstrainedOperationalSpaceLaw(sysm, coords, kp=GP, kd=GD, effort_limits=None)
            theta_d = law.coords.evaluate(q, qd).theta + 0.01
            ref.theta = theta_d
            tau = law.compute(State(t=0.0, q=q, qdot=qd), ref)
            qdd, lam, A = _kkt(sysm, q, qd, tau)
            kin = law.coords.evaluate(q, qd)
            want = ref.theta_ddot + GD * (ref.theta_dot - kin.theta_dot) + GP * (theta_d - kin.theta)
            got = kin.J.dot(qdd) + kin.Jdot_qdot
            U, s, _ = np.linalg.svd(A)
            U1 = U[:, :int(np.count_nonzero(s > 1e-9 * s[0]))]
            worst["acc"] = max(worst["acc"], float(np.max(np.abs(got - want)) / np.max(np.abs(want))))
            worst["lam"] = max(worst["lam"], float(np.max(np.abs(U1.T.dot(lam - ref.lambda_)))) / 3.0)
    print(f"\nosc_constrained vs the constrained dynamics: θ̈ rel {worst['acc']:.1e}, λ in R(A) rel {worst['lam']:.1e}")
    assert worst["acc"] < 1e-6        # (the central difference of Ȧq̇ is the reference's error, ~1e-9)
    assert worst["lam"] < 1e-6


def test_with_an_exact_model_it_is_the_projection_hybrid_law():
    rng = np.random.default_rng(11)
    for sysm, coords, q0 in _cases():
        for _ in range(5):
            q, qd, ref = _state_and_reference(rng, q0, sysm.m)
            osc = ConstrainedOperationalSpaceLaw(sysm, coords, kp=GP, kd=GD, effort_limits=None)
            qv = PIDCForceLaw(sysm, coords, kp=GP, kd=GD, effort_limits=None)
            t_osc = osc.compute(State(t=0.0, q=q, qdot=qd), ref)
            t_qv = qv.compute(State(t=0.0, q=q, qdot=qd), ref)
            np.testing.assert_allclose(t_osc, t_qv, rtol=1e-8, atol=1e-8 * np.max(np.abs(t_qv)))


def test_a_passive_joint_gets_no_torque_and_the_law_is_the_passive_joint_law():
    """Planar arm, joint3 passive, the face's three rows: τ₃ = 0 exactly; the contact forces the task leaves free
    (the moment about the pivot) take its torque, so the motion and the commanded internal force stay: equal to
    the passive-joint law's torque (eq. 56–62, λ_d projected on the internal forces) to rounding."""
    rng = np.random.default_rng(5)
    sysm, coords, q0 = _cases()[0]
    for _ in range(5):
        q, qd, ref = _state_and_reference(rng, q0, sysm.m)
        ref.theta = np.array([0.62])
        osc = ConstrainedOperationalSpaceLaw(sysm, coords, kp=GP, kd=GD, actuated=["joint1", "joint2"],
                                             effort_limits=None)
        qv = PassiveJointLaw(sysm, coords, actuated=["joint1", "joint2"], kp=GP, kd=GD, effort_limits=None,
                             non_internal="project")
        t_osc = osc.compute(State(t=0.0, q=q, qdot=qd), ref)
        t_qv = qv.compute(State(t=0.0, q=q, qdot=qd), ref)
        assert t_osc[2] == 0.0
        np.testing.assert_allclose(t_osc, t_qv, rtol=1e-8, atol=1e-8 * np.max(np.abs(t_qv)))
        qdd, lam, _ = _kkt(sysm, q, qd, t_osc)
        kin = osc.coords.evaluate(q, qd)
        want = ref.theta_ddot + GD * (ref.theta_dot - kin.theta_dot) + GP * (ref.theta - kin.theta)
        assert np.allclose(kin.J.dot(qdd) + kin.Jdot_qdot, want, rtol=1e-6, atol=1e-6 * np.max(np.abs(want)))


def test_bad_set_ups_are_refused_where_they_enter():
    sysm, coords, q0 = _cases()[0]
    with pytest.raises(GainError, match="rank_atol"):
        ConstrainedOperationalSpaceLaw(sysm, coords, rank_atol=-1.0)
    with pytest.raises(UnknownNameError):
        ConstrainedOperationalSpaceLaw(sysm, coords, actuated=["joint1", "no_such_joint"])
    crank = crank_row.system()
    with pytest.raises(DimensionError):                        # 3 coordinates for n = 2 joints
        ConstrainedOperationalSpaceLaw(crank, ["crank_joint", "slider_pin.x", "slider_pin.z"])
    law = ConstrainedOperationalSpaceLaw(crank, ["slider_pin.z"], effort_limits=None)   # the guide row itself
    with pytest.raises(RankDeficiencyError, match="operational space"):
        law.compute(State(t=0.0, q=np.array([0.4, -0.8]), qdot=np.zeros(2)), Reference(lambda_=np.array([-1.0])))
    law = ConstrainedOperationalSpaceLaw(sysm, coords, effort_limits=None)
    with pytest.raises(DimensionError):                        # λ_d of 2 rows where 3 are active
        law.compute(State(t=0.0, q=q0, qdot=np.zeros(3)), Reference(lambda_=np.array([-1.0, -1.0])))
