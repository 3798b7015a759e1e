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

A tick is Pinocchio's Coriolis pass and one compiled call (:mod:`qv_control.kernels.impedance`, its
:class:`ImpedanceTick`), the numpy path (``compiled=False``, and any tick the kernel declines) the reference. The
law's state (the force integral, its last stamp, the latched q_null and R_d) lives in the tick's packed arrays,
read and written through the law's attributes by either path; assigning a gain repacks the parameters.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import DimensionError, as_vector
from qv_dynamics.kernels.loader import load
from qv_dynamics.kernels.views import support_mask, tree_of
from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED, svd_thin
from qv_dynamics.state import Reference, State

from ..kernels import layout as L
from .base import scalar_gain, tool_and_contact
from .packed import EPOCH, CompiledTick, Packer, Setting, data_views

MAX_DT = 0.1  # s: longest step of the force integral (gaps and bad stamps)
RCOND = 1e-4  # singular values of J at or below RCOND·σ₁ are dropped from its pseudo-inverse (numpy.linalg.pinv)


class ImpedanceForceBaseline:
    """Operational-space impedance (position + orientation) with Jacobian-transpose force along z."""

    theta_names = ["x", "y", "z"]
    kp_pos, kd_pos, kp_rot, kd_rot = Setting(), Setting(), Setting(), Setting()
    kp_null, kd_null, force_ki = Setting(), Setting(), Setting()
    _ct = None   # the compiled tick (ImpedanceTick), or None: the numpy path every tick

    def __init__(self, system, frame: str = "panda_hand_tcp", contact: str | None = "contact",
                 kp_pos: float = 3000.0, kd_pos: float = 150.0, kp_rot: float = 150.0, kd_rot: float = 12.0,
                 kp_null: float = 20.0, kd_null: float = 4.0, force_ki: float = 0.0,
                 q_null=None, rotation=None, compiled: bool = True):
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
        # the state (IS_* entries; q_null, R_d row-major): views of the compiled tick's arrays once it is packed
        self._s = np.array([0.0, np.nan, 0.0, 0.0])
        self._qn, self._Rd = np.zeros(system.nq), np.zeros((3, 3))
        self.q_null, self.R_d = q_null, rotation
        self.compiled = bool(compiled)
        kernel = load("qv_control.kernels.impedance", "impedance_tick") if self.compiled else None
        views = data_views(system) if kernel is not None else None
        if views is not None:
            self._ct = ImpedanceTick(self, kernel, views)

    # ------------------------------------------------------------------ the state, shared by both paths
    @property
    def q_null(self) -> np.ndarray | None:
        """The posture of the null-space term (latched at the first tick when None)."""
        return self._qn if self._s[L.IS_Q_NULL] else None

    @q_null.setter
    def q_null(self, value) -> None:
        if value is not None:
            self._qn[:] = as_vector("q_null", value, self.system.nq)
        self._s[L.IS_Q_NULL] = value is not None

    @property
    def R_d(self) -> np.ndarray | None:
        """The tool's desired orientation (latched at the first tick when None)."""
        return self._Rd if self._s[L.IS_R_D] else None

    @R_d.setter
    def R_d(self, value) -> None:
        if value is not None:
            self._Rd[:] = np.asarray(value, float).reshape(3, 3)
        self._s[L.IS_R_D] = value is not None

    @property
    def _int(self) -> float:
        return float(self._s[L.IS_INT])

    @_int.setter
    def _int(self, value: float) -> None:
        self._s[L.IS_INT] = value

    @property
    def _t_prev(self) -> float | None:
        t = float(self._s[L.IS_T_PREV])
        return None if t != t else t

    @_t_prev.setter
    def _t_prev(self, value: float | None) -> None:
        self._s[L.IS_T_PREV] = np.nan if value is None else value

    def reset(self) -> None:
        """Forget the force integral and its last stamp (q_null and R_d stay)."""
        self._int, self._t_prev = 0.0, None

    def _in_contact(self) -> bool:
        return self.contact is not None and self.system.constraint(self.contact).active

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ for ``state``; ``reference`` None (as for the other laws): hold the tool where it is, λ_d = 0."""
        ct = self._ct
        if ct is None or (reference is not None and type(reference) is not Reference):
            return self._compute(state, reference)
        tau = ct.run(state, reference)
        return tau if tau is not None else ct.numpy_tick(self._compute, state, reference)

    def _compute(self, state: State, reference: Reference | None) -> np.ndarray:
        """The numpy path of :meth:`compute` (the reference of the compiled tick)."""
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


class ImpedanceTick(CompiledTick):
    """The impedance baseline's compiled tick: its packed arguments (the tool frame's slot, the gains, the state:
    :mod:`qv_control.kernels.layout`'s IP_*, IS_* entries, q_null in F_HOLD, R_d in F_RREF) and its rare events
    (the first tick, a contact switched on or off, a gain assigned: repacked after a numpy-path tick). The law's
    state attributes read the packed arrays, so the two paths hand nothing over."""

    in_contact = None

    def pack(self) -> bool:
        law, model, fid = self.law, self.model, self.law.fid
        self.epoch, self.in_contact = EPOCH[0], law._in_contact()
        p = Packer()
        p.ints(L.I_SIZES, [model.nv, model.nq, 0, 3, 1, 0, model.njoints, 0])
        p.ints(L.I_TREE, tree_of(model))
        p.ints(L.I_SUP, support_mask(model, [fid]))
        p.ints(L.I_FJOINT, [model.frames[fid].parentJoint])
        p.ints(L.I_FID, [fid])
        p.ints(L.I_QUAT, np.array([(lo, hi) for _, lo, hi in self.system.unit_norm_parts()], np.int64).reshape(-1, 2))
        placement = model.frames[fid].placement
        p.floats(L.F_FPLACE, np.r_[placement.rotation.ravel(order="F"), placement.translation])
        p.floats(L.F_GRAV, model.gravity.linear.copy())
        par = np.zeros(L.NIMP_PAR)
        par[[L.IP_KP_POS, L.IP_KD_POS, L.IP_KP_ROT, L.IP_KD_ROT, L.IP_KP_NULL, L.IP_KD_NULL, L.IP_FORCE_KI]] = \
            law.kp_pos, law.kd_pos, law.kp_rot, law.kd_rot, law.kp_null, law.kd_null, law.force_ki
        par[[L.IP_CONTACT, L.IP_MAX_DT, L.IP_RCOND]] = self.in_contact, MAX_DT, RCOND
        p.floats(L.F_PAR, par)
        p.floats(L.F_ST, law._s)
        p.floats(L.F_HOLD, law._qn)
        p.floats(L.F_RREF, law._Rd.ravel())
        self.I, self.F = p.build()
        law._s, law._qn, law._Rd = self.vector(L.F_ST), self.vector(L.F_HOLD), self.vector(L.F_RREF).reshape(3, 3)
        self.live = True
        return True

    def stale(self) -> bool:
        return EPOCH[0] != self.epoch or self.law._in_contact() is not self.in_contact

    def hand_over(self) -> None:
        """Nothing to hand over: the law's state attributes read the packed arrays."""

    def take_back(self) -> None:
        if self.I is None or self.stale():
            self.pack()
