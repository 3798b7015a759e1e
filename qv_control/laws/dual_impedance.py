"""Baseline for closed chains: independent operational-space impedance controllers, one per arm.

What a careful user builds with two arms holding one object: each arm follows its own
grasp frame of the planned object trajectory, knows nothing of the other arm or of the closed chain,
and compensates its own gravity/Coriolis terms plus a feed-forward wrench (its share of the object's
weight, the desired squeeze):

    τ_i = h_i + J_iᵀ(Λ_i(a_d + K_D ė + K_P e − J̇_iq̇_i) + w_ff,i) + N_i M_i(k_n(q_n − q_i) − d_n q̇_i)

with J_i the 6×7 world-aligned TCP Jacobian of arm i, Λ_i = (J_iM_i⁻¹J_iᵀ)⁻¹ its task inertia,
e = [p_d − p; log₃(R_dRᵀ)], N_i = I − J_iᵀJ̄_iᵀ (J̄_i = M_i⁻¹J_iᵀΛ_i, dynamically consistent) and a joint
posture PD in the null space. K_P, K_D are the same bandwidths (1/s², 1/s) as the projection law's
G_P, G_D, so both close the same second-order error dynamics on an exact model of a free arm. What this
controller cannot do is see the other arm: the object's inertia and any mismatch between the two grasp
targets become internal forces, held only by the two impedances.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import DimensionError, as_vector
from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED as LWA


@dataclass
class ArmTarget:
    """Desired TCP pose, twist [v; ω] and classical acceleration (world axes), and the feed-forward
    wrench [f; n] the hand should apply to the object (at the TCP, world axes)."""

    pose: pin.SE3
    twist: np.ndarray
    accel: np.ndarray
    wrench: np.ndarray


class DualArmImpedance:
    """Independent operational-space impedance per arm (module doc). ``arms``: [(joint names, TCP frame)]."""

    name = "dual_impedance"

    def __init__(self, system, arms: Sequence[tuple[Sequence[str], str]], kp: float = 400.0, kd: float = 40.0,
                 kp_null: float = 100.0, kd_null: float = 20.0, q_null=None):
        self.system = system
        self.model = system.model
        self.data = self.model.createData()
        self.arms = []
        for joints, tcp in arms:
            iv = np.array([system.joint_v_index(j) for j in joints])
            iq = np.array([system.joint_q_index(j) for j in joints])
            self.arms.append((iv, iq, system.frame_id(tcp)))
        self.kp, self.kd, self.kp_null, self.kd_null = float(kp), float(kd), float(kp_null), float(kd_null)
        self.q_null = None if q_null is None else as_vector("q_null", q_null, system.nq)
        self.last: dict = {}

    def compute(self, q, qdot, targets: Sequence[ArmTarget]) -> np.ndarray:
        """Torques (nv-vector, zero on the object's joints) for the arms' targets."""
        m, d = self.model, self.data
        q = as_vector("q", q, m.nq)
        qdot = as_vector("qdot", qdot, m.nv)
        if len(targets) != len(self.arms):
            raise DimensionError(f"expected {len(self.arms)} arm targets, got {len(targets)}")
        if self.q_null is None:
            self.q_null = q.copy()
        pin.forwardKinematics(m, d, q, qdot, np.zeros(m.nv))
        pin.computeJointJacobians(m, d, q)
        pin.updateFramePlacements(m, d)
        M = pin.crba(m, d, q)
        M = np.triu(M) + np.triu(M, 1).T
        h = pin.nonLinearEffects(m, d, q, qdot)
        tau = np.zeros(m.nv)
        errors = []
        for (iv, iq, fid), tg in zip(self.arms, targets):
            J = pin.getFrameJacobian(m, d, fid, LWA)[:, iv]
            Jdqd = pin.getFrameClassicalAcceleration(m, d, fid, LWA).vector
            oMf = d.oMf[fid]
            e = np.concatenate([tg.pose.translation - oMf.translation, pin.log3(tg.pose.rotation @ oMf.rotation.T)])
            a = tg.accel + self.kd * (tg.twist - J @ qdot[iv]) + self.kp * e - Jdqd
            Ma = M[np.ix_(iv, iv)]
            Mi = np.linalg.inv(Ma)
            Lam = np.linalg.inv(J @ Mi @ J.T)
            N = np.eye(iv.size) - J.T @ (Mi @ J.T @ Lam).T
            posture = Ma @ (self.kp_null * (self.q_null[iq] - q[iq]) - self.kd_null * qdot[iv])
            tau[iv] = h[iv] + J.T @ (Lam @ a + tg.wrench) + N @ posture
            errors.append(e)
        self.last = {"errors": errors}
        return tau


__all__ = ["ArmTarget", "DualArmImpedance"]
