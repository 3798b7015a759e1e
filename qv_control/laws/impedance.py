"""Baseline for the demo: Cartesian impedance + Jacobian-transpose force control (what users build today).

    τ = g(q) + C(q,q̇)q̇ + Jᵀ w + (I − Jᵀ J⁺ᵀ)(k_n(q_n − q) − d_n q̇)
    w = [ S(K_p(p_d − p) + K_d(ṗ_d − ṗ)) + (I − S) f_d ;  K_r φ(R_d Rᵀ) − D_r ω ]

J is the 6×n Jacobian of the tool frame (world-aligned), φ the rotation vector of the orientation
error, S selects the motion-controlled axes: all three in free motion, x/y when the surface contact
constraint (``contact``, axes [z]) is active, in which case z is force-controlled with the Jacobian
transpose: f_d = λ_d (+ optional integral k_i∫(λ_d − λ_meas)). With the SPEC convention
M q̈ + h = τ − Aᵀλ, λ is the force the robot applies to the surface along z, so pressing down is λ < 0.

It is not model-based in the constraint space (no Λ-weighted decoupling, no feedforward of the desired
acceleration) — the difference the quasi-velocity law is compared against in ``qv demo``.

``compute(state, reference)``: ``reference.theta`` = desired tool position (3,), ``theta_dot`` its
velocity, ``lambda_`` = λ_d of the active constraint rows (ignored in free motion).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import DimensionError, as_vector
from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED, svd_thin
from qv_dynamics.state import Reference, State

from .base import scalar_gain, tool_and_contact

MAX_DT = 0.1  # s: longest step of the force integral (gaps and bad stamps)


class ImpedanceForceBaseline:
    """Operational-space impedance (position + orientation) with Jacobian-transpose force along z."""

    theta_names = ["x", "y", "z"]

    def __init__(self, system, frame: str = "panda_hand_tcp", contact: str | None = "contact",
                 kp_pos: float = 3000.0, kd_pos: float = 150.0, kp_rot: float = 150.0, kd_rot: float = 12.0,
                 kp_null: float = 20.0, kd_null: float = 4.0, force_ki: float = 0.0,
                 q_null=None, rotation=None):
        self.system, self.frame, self.contact = system, frame, contact
        self.fid = tool_and_contact(system, frame, contact)
        # GainError (naming the gain) for NaN, ±inf, text or a negative value; the rotation gains (a tool whose
        # orientation is left free), the null-space gains and the force integral may be 0 (off)
        self.kp_pos, self.kd_pos = scalar_gain("kp_pos", kp_pos), scalar_gain("kd_pos", kd_pos)
        self.kp_rot = scalar_gain("kp_rot", kp_rot, positive=False)
        self.kd_rot = scalar_gain("kd_rot", kd_rot, positive=False)
        self.kp_null = scalar_gain("kp_null", kp_null, positive=False)
        self.kd_null = scalar_gain("kd_null", kd_null, positive=False)
        self.force_ki = scalar_gain("force_ki", force_ki, positive=False)
        self.q_null = None if q_null is None else as_vector("q_null", q_null, system.nq)
        self.R_d = None if rotation is None else np.asarray(rotation, float).reshape(3, 3)
        self._int = 0.0
        self._t_prev: float | None = None

    def _in_contact(self) -> bool:
        return self.contact is not None and self.system.constraint(self.contact).active

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ for ``state``; ``reference`` None (as for the other laws): hold the tool where it is, λ_d = 0."""
        if reference is None:
            reference = Reference()
        sysm = self.system
        model, data = sysm.model, sysm.data
        q = sysm.check_q(state.q)
        qd = as_vector("qdot", state.qdot, sysm.nv)
        if self.q_null is None:
            self.q_null = q.copy()
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        oMf = data.oMf[self.fid]
        if self.R_d is None:
            self.R_d = oMf.rotation.copy()
        J = pin.getFrameJacobian(model, data, self.fid, LOCAL_WORLD_ALIGNED)
        g = pin.computeGeneralizedGravity(model, data, q).copy()
        Cqd = pin.nonLinearEffects(model, data, q, qd) - g
        xdot = J @ qd
        p_d = np.asarray(reference.theta if reference.theta is not None else oMf.translation, float)
        if p_d.shape != (3,):
            raise DimensionError(f"baseline reference.theta must be the tool position (3,), got {p_d.shape}")
        v_d = np.zeros(3) if reference.theta_dot is None else as_vector("theta_dot", reference.theta_dot, 3)
        w = np.zeros(6)
        w[:3] = self.kp_pos * (p_d - oMf.translation) + self.kd_pos * (v_d - xdot[:3])
        w[3:] = self.kp_rot * pin.log3(self.R_d @ oMf.rotation.T) - self.kd_rot * xdot[3:]
        # bounded, non-negative step (as ForcePI): a stamp far ahead adds at most MAX_DT of integral
        dt = 0.0 if self._t_prev is None else min(max(0.0, state.t - self._t_prev), MAX_DT)
        self._t_prev = state.t
        if self._in_contact():
            lam_d = 0.0 if reference.lambda_ is None else float(np.ravel(reference.lambda_)[0])
            if self.force_ki and state.lambda_meas is not None and len(state.lambda_meas):
                self._int += self.force_ki * (lam_d - float(state.lambda_meas[0])) * dt
            w[2] = lam_d + self._int
        else:
            self._int = 0.0
        return g + Cqd + J.T @ w + _null_projection(J, self.kp_null * (self.q_null - q) - self.kd_null * qd)


def _null_projection(J: np.ndarray, x: np.ndarray, rcond: float = 1e-4) -> np.ndarray:
    """(I − JᵀJ⁺ᵀ)x with J⁺ = numpy.linalg.pinv(J, rcond) (singular values ≤ rcond·σ₁ dropped), from the thin SVD
    J = USVᵀ (LAPACK dgesdd called directly): J⁺ᵀx = US⁺Vᵀx, without forming J⁺ or the n × n projector."""
    U, s, Vt = svd_thin(J)
    s_inv = np.zeros_like(s)
    large = s > rcond * s[0]
    s_inv[large] = 1.0 / s[large]
    return x - J.T.dot(U.dot(s_inv * Vt.dot(x)))
