"""Khatib's operational-space hybrid force/motion control (the strong baseline of the real-conditions matrix).

Task x = (p, φ) of the tool frame, J its 6×n world-aligned Jacobian, J̇q̇ the classical drift, and

    Λ_x = (J M⁻¹ Jᵀ)⁻¹,   J̄ = M⁻¹ Jᵀ Λ_x,   Nᵀ = I − Jᵀ J̄ᵀ   (dynamically consistent null space)
    τ = h + Jᵀ(Λ_x(Ω a* − J̇q̇) + e_f f) + Nᵀ M(−K_p(q − q_n) − K_d q̇)

Ω selects the motion axes (all six in free motion; every axis but the contact normal ``force_axis`` in
contact) and e_f is the unit vector of the force axis. With the constraint row A = e_fᵀJ and the SPEC
convention M q̈ + h = τ − Aᵀλ, the closed loop is ẍ = Ω a* + Λ_x⁻¹e_f(f − λ); the rigid constraint
e_fᵀẍ = 0 then gives λ = f exactly and ẍ = Ω a* (tested against Pinocchio's constrained dynamics).

Motion: a* = ẍ_d + K_D(ẋ_d − ẋ) + K_P(x_d − x) [+ K_I∫(x_d − x)], orientation error log₃(R_d Rᵀ). The gains
give the same closed-loop poles as the quasi-velocity law with bandwidths (kp, kd): that law imposes
ε̇ = −k_d ε with ε = ė + k_p e, i.e. ë + (k_p + k_d)ė + k_p k_d e = 0, so K_D = k_p + k_d, K_P = k_p k_d
(and the same for the null-space posture); with its integral action k_I (``ki_motion``, 1/s²) the poles are
those of (s + k_p)(s² + k_d s + k_I), so K_P = k_p k_d + k_I and K_I = k_p k_I.
Force: f = λ_d + k_f e_λ + k_i∫e_λ with the same :class:`ForcePI`
as the quasi-velocity law (λ is the force the robot applies along the axis; pressing down is λ < 0).

The motion integral (``ki_motion``, 1/s³ on x) is frozen while the limiter scales the motion channel and
reset when the contact switches (anti-windup); what the integrals (motion and the force PI's) applied at the
last sample before the switch, τ_I = Jᵀ(Λ_x Ω K_I z + e_f k_i∫e), is kept as a bias b added to h (bumpless
transfer, as in the quasi-velocity law: a model error is not dropped at touch-down; only after a phase of
``carry_min_time`` or longer, a bounce's transient is dropped). Torque limits: the
motion channel is scaled first (:func:`qv_control.saturation.saturate`); Ωa* has no component along e_f,
so scaling it leaves λ = f.

``axes`` keeps a subset of the six task rows, by name (x y z rx ry rz) or index 0–5 (a planar mechanism: (x, z)
of its pin; J, ẋ, a* and Λ_x are then of those rows only; ``force_axis`` and ``moment_axes`` take names too).
``damping`` δ₀ > 0 replaces Λ_x near a singularity by the damped pseudo-inverse V diag(σ/(σ² + δ²))Uᵀ of
J M⁻¹ Jᵀ, what ROS 2 OSC / Cartesian impedance implementations do so that Λ_x stays bounded where J loses rank
(:func:`damped_inverse`: δ grows from 0 as σ_min falls below 0.1σ₁); both run on the numpy path. ``moment_axes``
(rows among 3–5) add moment rows to the force task (a flat face pressed with a commanded moment): λ_d, λ_meas
and the force PI then have the entries ``(force_axis, *moment_axes)``, each the wrench component the robot
applies.

The tick is one Pinocchio pass (``computeCoriolisMatrix`` and the frame placements) and one compiled call
(:func:`qv_control.kernels.osc.tool_tick`: M, h and the frame's J, J̇q̇ read from that pass, a*, Λ_x or its damped
form, the channels, the force PI, the carried integral torque and the limiter, the state packed in one array:
:mod:`qv_control.laws.osc_tick`); ``compiled=False`` keeps the numpy path below (the reference, and the fallback
of a sample the kernel declines: equal to rounding, test_osc_tick.py).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
from scipy.linalg.lapack import dpotrf, dpotrs

from qv_dynamics.errors import DimensionError, NotPositiveDefiniteError, as_vector
from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED as LWA
from qv_dynamics.linalg import inv
from qv_dynamics.state import Reference, State

from ..kernels import osc_layout as L
from ..saturation import SaturationStatus, resolve_limits, saturate
from .base import ForcePI, scalar_gain, tool_and_contact
from .carry import IntegralCarry
from .osc_tick import (
    EPOCH,
    PackedState,
    carry_from_objects,
    carry_to_objects,
    kernel_inputs,
    pack_tool,
    pack_tool_gains,
)
from .packed import Setting


class OperationalSpaceLaw(PackedState):
    """Operational-space hybrid force/motion law of the tool frame (module doc).

    ``compute(state, reference)``: ``reference.theta`` = desired tool position (3,), ``theta_dot``,
    ``theta_ddot`` its derivatives, ``lambda_`` = λ_d of the contact row (ignored in free motion).
    The contact is the active state of ``system.constraint(contact)``; its row must be ``force_axis`` of
    the tool point (the demo's ``point_contact`` with ``axes: [z]``)."""

    name = "osc"
    theta_names = ["x", "y", "z"]
    # parameters the compiled tick reads from its packed state: an assignment packs them again at the next tick
    KP = Setting()
    KD = Setting()
    KI = Setting()
    KP_null = Setting()
    integral_limit = Setting()
    damping = Setting()
    limits = Setting()

    def __init__(self, system, frame: str = "panda_hand_tcp", contact: str | None = "contact",
                 force_axis: int | str = 2, kp: float = 60.0, kd: float = 120.0, kf: float = 0.0, ki: float = 0.0,
                 ki_motion: float = 0.0, integral_limit: float = 5.0, q_null=None, rotation=None,
                 effort_limits="urdf", carry_min_time: float = 0.05, compiled: bool = True,
                 axes=(0, 1, 2, 3, 4, 5), damping: float = 0.0, moment_axes=()):
        self.system, self.frame, self.contact = system, frame, contact
        n = system.nv
        self._init_packed(*L.state_shape(n), L.LAMBDA_X + 6)
        axes, force_axis, moment_axes = _axis_ids(axes), _axis_ids([force_axis])[0], _axis_ids(moment_axes)
        self.axes = axes
        if not self.axes or len(set(self.axes)) != len(self.axes) or not set(self.axes) <= set(range(6)):
            raise DimensionError(f"osc axes: distinct task rows among 0..5 (x y z rx ry rz), got {axes!r}")
        self.damping = scalar_gain("damping", damping, positive=False)
        self.fid = tool_and_contact(system, frame, contact)
        self._constraint = None if contact is None else system.constraint(contact)
        if force_axis not in (0, 1, 2) or force_axis not in self.axes:
            raise DimensionError(f"force_axis must be 0, 1 or 2 (x, y, z) and a task row, got {force_axis!r}")
        self.force_axis = int(force_axis)
        if not set(moment_axes) <= {3, 4, 5} or not set(moment_axes) <= set(self.axes):
            raise DimensionError(f"moment_axes must be task rows among 3, 4, 5 (rx ry rz), got {moment_axes!r}")
        self.force_axes = (self.force_axis,) + tuple(int(a) for a in moment_axes)
        kp, kd = scalar_gain("kp", kp), scalar_gain("kd", kd)
        k_i = scalar_gain("ki_motion", ki_motion, positive=False)
        # (s + k_p)(s² + k_d s + k_I) = s³ + (k_p + k_d)s² + (k_p k_d + k_I)s + k_p k_I: the qv law's poles
        self.KP, self.KD, self.KI = kp * kd + k_i, kp + kd, kp * k_i
        self.KP_null = kp * kd
        self.integral_limit = scalar_gain("integral_limit", integral_limit)  # m/s² (rad/s²) of a* at most
        self.force_pi = ForcePI(kf, ki)
        self.limits = resolve_limits(system, effort_limits)
        self.q_null = None if q_null is None else as_vector("q_null", q_null, system.nq)
        self.R_d = None if rotation is None else np.asarray(rotation, float).reshape(3, 3)
        self.saturation = SaturationStatus()
        self.last = {}
        self._z = np.zeros(6)
        self._t_prev: float | None = None
        self._was_contact: bool | None = None
        self._a_int = np.zeros(6)                # Ω K_I z of the last sample
        self._carry = IntegralCarry(n, scalar_gain("carry_min_time", carry_min_time, positive=False))
        self._zero = np.zeros(n)
        self._zero.flags.writeable = False
        # the tick after one Pinocchio pass in one compiled call (qv_control.kernels.osc.tool_tick); compiled=False,
        # or no kernel in the cache: the numpy path below (the reference, the same equations)
        self._fast = kernel_inputs(system, "osc", "tool_tick") if compiled else None
        pack_tool(self)

    @property
    def R_d(self):
        """The tool's desired orientation (None: the first state's)."""
        return self._R_d

    @R_d.setter
    def R_d(self, value) -> None:
        self._R_d = value
        if value is not None:
            self._S[L.GRAV, 3:12] = np.asarray(value, float).reshape(9)

    @property
    def peak_ratio(self) -> float:
        return float(self.saturation.peak_ratio)

    def reset(self) -> None:
        self._to_objects()
        self._z = np.zeros(6)
        self._t_prev = None
        self.force_pi.reset()
        self._carry.reset()

    @property
    def integral_torque(self) -> np.ndarray:
        """b + τ_I: the generalised force the integral actions applied at the last sample (module doc)."""
        self._to_objects()
        return self._carry.total

    def drop_learned(self) -> None:
        """At a contact loss: what the integrals learned in the lost phase is not carried on (IntegralCarry.drop)."""
        self._to_objects()
        self._carry.drop()

    def _law_to_objects(self) -> None:
        S, V = self._S, self._S[L.VAR]
        self._z, self._a_int = S[L.Z, :6].copy(), S[L.A_INT, :6].copy()
        self._t_prev = float(V[L.T_PREV]) if V[L.T_PREV_OK] else None
        self._was_contact = None if V[L.WAS_CONTACT] < 0 else bool(V[L.WAS_CONTACT])
        carry_to_objects(S, self._carry, self.system.nv)

    def _law_from_objects(self) -> None:
        S, V = self._S, self._S[L.VAR]
        S[L.Z, :6], S[L.A_INT, :6] = self._z, self._a_int
        V[L.T_PREV_OK], V[L.T_PREV] = self._t_prev is not None, self._t_prev or 0.0
        V[L.WAS_CONTACT] = -1.0 if self._was_contact is None else float(self._was_contact)
        carry_from_objects(S, self._carry, self.system.nv)

    def _diagnostics(self) -> dict:
        out, V = self._out, self._S[L.VAR]
        k, kx = len(self.force_axes), len(self.axes)
        d = dict(e=out[L.ERR, :6].copy(), t=float(V[L.T_PREV]), a_star=out[L.ASTAR, :6].copy(),
                 Lambda_x=out[L.LAMBDA_X:L.LAMBDA_X + kx, :kx].copy())
        if V[L.FORCE_SEEN]:
            d.update(lambda_d=out[L.LAM_D, :k].copy(), f=out[L.F_CMD, :k].copy())
        return d

    def _in_contact(self) -> bool:
        return self.contact is not None and self.system.constraint(self.contact).active

    def _kinematics(self, q, qd):
        """M, h, J (6×n, world-aligned), J̇q̇ (classical) and the tool placement at (q, q̇)."""
        model, data = self.system.model, self.system.data
        zero = self._zero
        pin.forwardKinematics(model, data, q, qd, zero)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        J = pin.getFrameJacobian(model, data, self.fid, LWA)
        Jdqd = pin.getFrameClassicalAcceleration(model, data, self.fid, LWA).vector.copy()
        if len(self.axes) < 6:
            J, Jdqd = J[list(self.axes)], Jdqd[list(self.axes)]
        oMf = data.oMf[self.fid].copy()
        M = self.system.mass_matrix(q)
        h = pin.rnea(model, data, q, qd, zero).copy()
        return M, h, J, Jdqd, oMf

    def _channels(self, M, h, J, Jdqd, q, qd, a_star):
        """(motion, base without the carried bias, τ_I, Λ_x) in numpy (raises when M is not positive definite)."""
        if len(self.axes) < 6:
            a_star = a_star[list(self.axes)]
        return _channels_numpy(self, M, h, J, Jdqd, q, qd, a_star)

    def _xdot(self, J, qd) -> np.ndarray:
        """ẋ of the six task rows (zero on the rows not in ``axes``)."""
        if len(self.axes) == 6:
            return J @ qd
        x = np.zeros(6)
        x[list(self.axes)] = J @ qd
        return x

    def _task_acceleration(self, dt, contact, oMf, xdot, ref: Reference) -> np.ndarray:
        """a* of the motion axes (zero along the force axis in contact), with the anti-windup integral."""
        p_d = np.asarray(ref.theta if ref.theta is not None else oMf.translation, float)
        if p_d.shape != (3,):
            raise DimensionError(f"osc reference.theta must be the tool position (3,), got {p_d.shape}")
        v_d = np.zeros(3) if ref.theta_dot is None else as_vector("theta_dot", ref.theta_dot, 3)
        a_d = np.zeros(3) if ref.theta_ddot is None else as_vector("theta_ddot", ref.theta_ddot, 3)
        e = np.empty(6)
        e[:3] = p_d - oMf.translation
        e[3:] = pin.log3(self.R_d.dot(oMf.rotation.T))
        ev = -xdot                                                   # ẋ_d − ẋ, ẋ_d = (v_d, 0)
        ev[:3] += v_d
        a = self.KP * e + self.KD * ev
        a[:3] += a_d
        omega = np.ones(6)
        if contact:
            omega[list(self.force_axes)] = 0.0
        if self.KI > 0:
            if self._was_contact is not None and contact != self._was_contact:
                self._z[:] = 0.0                                     # reset on contact switches
            frozen = self.saturation.motion_frozen
            if not frozen and 0.0 < dt <= 0.1:
                self._z += dt * e * omega
            lim = self.integral_limit / self.KI
            self._z = np.clip(self._z, -lim, lim)                    # anti-windup clamp
            a += self.KI * self._z
            self._a_int = omega * self.KI * self._z
        self._was_contact = contact
        self.last.update(e=e)
        return omega * a

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ for the measured state and the reference (class doc): one Pinocchio pass and the compiled tick, or the
        numpy path for a sample the kernel declines (an input that is not a float64 vector of its size or not
        finite, M or JM⁻¹Jᵀ not positive definite: the numpy path then raises naming it) and with
        ``compiled=False``."""
        fast = self._fast
        if fast is None:
            return self._compute_numpy(state, reference)
        if EPOCH[0] != self._epoch:
            pack_tool_gains(self)                   # (a parameter was assigned)
        ref = reference if reference is not None else _NO_REFERENCE
        pd, vd, ad, lam, meas, flags = ref.theta, ref.theta_dot, ref.theta_ddot, self._zk, self._zk, 0
        if pd is None:
            pd, flags = self._zero3, 4
        if vd is None:
            vd = self._zero3
        if ad is None:
            ad = self._zero3
        c = self._constraint
        if c is not None and c.active:
            flags |= 1
            if ref.lambda_ is not None:
                lam = ref.lambda_
            if state.lambda_meas is not None:
                meas, flags = state.lambda_meas, flags | 2
        if self._q_null is None or self._R_d is None or not self._packed:
            flags |= self._first_sample()
        q, qd = state.q, state.qdot
        model, data = self.system.model, self.system.data
        try:
            pin.computeCoriolisMatrix(model, data, q, qd)
            pin.updateFramePlacements(model, data)
            done = fast[0](*fast[1], q, qd, pd, vd, ad, lam, meas, float(state.t), flags, self._S, self._out) == L.OK
        except (TypeError, ValueError, RuntimeError):   # another type or size: the numpy path says which
            done = False
        if not done:
            self._to_objects()                      # (the next compiled sample continues from the objects)
            return self._compute_numpy(state, reference)
        self._stale = True
        if flags & 24:
            self._first_served(flags)
        return self._tau.copy()

    def _first_sample(self) -> int:
        """Flags of the kernel's first sample (8: q_n = q, 16: R_d = the tool's orientation); the objects packed."""
        if not self._packed:
            self._from_objects()
        return (8 if self._q_null is None else 0) | (16 if self._R_d is None else 0)

    def _first_served(self, flags: int) -> None:
        self._q_null = self._S[L.Q_NULL, :self.system.nv].copy() if flags & 8 else self._q_null
        self._R_d = self._S[L.GRAV, 3:12].reshape(3, 3).copy() if flags & 16 else self._R_d

    def _compute_numpy(self, state: State, reference: Reference | None = None) -> np.ndarray:
        sysm = self.system
        q = sysm.check_q(state.q)
        qd = as_vector("qdot", state.qdot, sysm.nv)
        if self.q_null is None:
            self.q_null = q.copy()
        M, h, J, Jdqd, oMf = self._kinematics(q, qd)
        if self.R_d is None:
            self.R_d = oMf.rotation.copy()
        t = float(state.t)
        dt = 0.0 if self._t_prev is None else t - self._t_prev
        self._t_prev = t
        ref = reference if reference is not None else Reference()
        contact = self._in_contact()
        if self._was_contact is not None and contact != self._was_contact:
            self._carry.switch()                                    # bumpless transfer (module doc)
        self._carry.tick(t)
        a_star = self._task_acceleration(dt, contact, oMf, self._xdot(J, qd), ref)
        motion, base, tau_int, Lam = self._channels(M, h, J, Jdqd, q, qd, a_star)
        if self._carry.bias is not None:
            base += self._carry.bias
        force = None
        if contact:
            k = len(self.force_axes)
            lam_d = np.zeros(k) if ref.lambda_ is None else np.ravel(ref.lambda_)[:k].astype(float)
            meas = None if state.lambda_meas is None else np.ravel(state.lambda_meas)[:k].astype(float)
            corr = self.force_pi.correction(t, lam_d, meas, self.saturation)
            f = lam_d + (0.0 if corr is None else corr)
            Jf = J[[self.axes.index(a) for a in self.force_axes]]
            force = Jf.T.dot(f)                                     # Jᵀ e_f f
            self.last.update(lambda_d=lam_d, f=f)
            if self.force_pi.z is not None:
                tau_int = tau_int + Jf.T.dot(self.force_pi.ki * self.force_pi.z)
        else:
            self.force_pi.reset()
        self._carry.tau_int = tau_int
        tau, self.saturation = saturate(base, force, motion, self.limits)
        self.last.update(t=t, a_star=a_star, Lambda_x=Lam, saturation=self.saturation)
        return tau


_NO_REFERENCE = Reference()

#: the task rows by name (``axes``, ``force_axis`` and ``moment_axes`` take names or indices)
AXIS_NAMES = ("x", "y", "z", "rx", "ry", "rz")


def _axis_ids(axes) -> tuple:
    """Task-row indices of ``axes`` (names among AXIS_NAMES or integers; an unknown name is left for the checks)."""
    return tuple((AXIS_NAMES.index(a) if a in AXIS_NAMES else a) if isinstance(a, str) else int(a) for a in axes)


def _channels_numpy(law: OperationalSpaceLaw, M, h, J, Jdqd, q, qd, a_star):
    """(motion, base without the carried bias, τ_I, Λ_x) of the module doc, in numpy (the reference path)."""
    MinvJt = _cho_solve(M, J.T)                                 # M⁻¹Jᵀ
    Lam = inv(J.dot(MinvJt)) if law.damping == 0 else damped_inverse(J.dot(MinvJt), law.damping)
    Jbar = MinvJt.dot(Lam)                                      # J̄ = M⁻¹ Jᵀ Λ_x
    tau0 = M.dot(law.KP_null * (law.q_null - q) - law.KD * qd)  # posture, same poles
    Jt = J.T
    motion = Jt.dot(Lam.dot(a_star) - Jbar.T.dot(tau0))          # Jᵀ Λ_x a* + Nᵀτ₀, Nᵀ = I − Jᵀ J̄ᵀ
    motion += tau0
    base = h - Jt.dot(Lam.dot(Jdqd))
    a_int = law._a_int if len(law.axes) == 6 else law._a_int[list(law.axes)]
    tau_int = Jt.dot(Lam.dot(a_int)) if law.KI > 0 else np.zeros(J.shape[1])
    return motion, base, tau_int, Lam


def damped_inverse(X: np.ndarray, damping: float, band: float = 0.1) -> np.ndarray:
    """Singularity-robust inverse of X = U diag(σ) Vᵀ: V diag(σ/(σ² + δ²)) Uᵀ with a variable damping
    δ² = (δ₀σ₁)²(1 − (σ_min/(εσ₁))²) while σ_min < εσ₁ (ε = ``band``), else δ = 0 (the plain inverse).

    The damped pseudo-inverse is what the ROS 2 OSC / Cartesian impedance examples use (franka_ros2's
    ``pseudoInverse(…, damped=true)``, δ₀ = 0.2); applied, as in the singularity-robust literature
    (Chiaverini 1997), only within a band near the singularity and relative to σ₁, so that a well-conditioned
    task pays nothing for it (a constant δ = 0.2 on J M⁻¹ Jᵀ, whose σ are 1/kg and 1/(kg m²) apart, costs a
    level face 23 % of its force-moment error and 6.8 mm of path)."""
    U, s, Vt = np.linalg.svd(X)
    lo = band * s[0]
    d2 = 0.0 if s[-1] >= lo else (damping * s[0]) ** 2 * (1.0 - (s[-1] / lo) ** 2)
    return (Vt.T * (s / (s * s + d2))).dot(U.T)


def _cho_solve(M: np.ndarray, B: np.ndarray) -> np.ndarray:
    """M⁻¹B by Cholesky, LAPACK dpotrf + dpotrs called directly (what scipy's cho_factor / cho_solve call, without
    their wrappers' checks and copies: ~15 µs of a law tick)."""
    c, info = dpotrf(M, lower=0, clean=0)
    if info != 0:
        raise NotPositiveDefiniteError(f"osc: the mass matrix is not positive definite (dpotrf info {info})")
    x, info = dpotrs(c, B, lower=0)
    return x


__all__ = ["OperationalSpaceLaw", "damped_inverse"]
