"""Hybrid force/motion control in quasi-velocities and quasi-forces (paper `aghili-quasi-velocities`
section 3, with the SPEC §2 signs: v̇_r = −Γ_v v_r + u_v, ξ = u_ξ + Γ_ξ v_r).

Both laws output τ = g + Q(V₁u_ξ + V₂u_v) (SPEC §2) and use one ``system.evaluate`` and one
``quasi_decompose`` per call (the previous QuasiState is passed as ``prev`` so V₁, V₂ stay continuous).

Force channel (eq. 42; eq. 47 when ``compensate_velocity=False``)::

    u_ξ = ξ_d − (Γ_ξ v_r) [+ V₁ᵀΛᵀ(k_f e_λ + k_i ∫e_λ)],   ξ_d = V₁ᵀΛᵀλ_d,   e_λ = λ_d − λ_meas

so that ξ = ξ_d exactly with an exact model. Sign: the core's ``Gamma_xi_vr`` is the term with
ξ = u_ξ + Γ_ξv_r (SPEC §2, paper eq. 20, checked numerically against KKT dynamics), so it must be
*subtracted* to compensate it. The paper's eq. 42 (and the SPEC's copy "u_ξ = ξ_d + Γ_ξ v_r") would give
ξ = ξ_d + 2Γ_ξv_r — a sign slip; the law follows the intent "compensate the velocity term". The optional PI acts
on the measured multiplier
(``State.lambda_meas``: a force sensor or an estimate) and absorbs model error. ``force=False`` sets
u_ξ = 0: the minimum-‖u‖ (kinetic metric, eq. 43) torque for the commanded motion.

Compliant contacts: with ``normal_motion=True`` (default) the tracking law also accounts for a measured
normal quasi-velocity v_n = V₁ᵀv ≠ 0 (a soft table: the tool sinks by µm when the force changes), which
the rigid model (Aq̇ = 0) ignores: v̇_r = −Γ_v v_r − Γ_vn v_n + u_v (:func:`normal_coupling`) and
θ̇ = Dv_r + D₁v_n. With Aq̇ = 0 the law is exactly eq. 35–38 (see :class:`QuasiTrackingLaw`).
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.kernels.loader import load
from qv_dynamics.quasi import compiled_kernel, quasi_decompose

from ..coordinates import check_reduced_jacobian
from ..kernels.layout import quasi_tick_rows as quasi_rows
from ..saturation import SaturationStatus, saturate
from .base import ControlLaw, LazyKernel
from .projection_base import _no_limits

_NONE = np.zeros(0)


def normal_coupling(qs, Adot: np.ndarray, v_n: np.ndarray) -> np.ndarray:
    """Γ_vn v_n: the term a normal quasi-velocity v_n = V₁ᵀv adds to the tangential dynamics,
    v̇_r = −Γ_v v_r − Γ_vn v_n + u_v (V₂ in the parallel-transport gauge; Γ_vn = 0·v_n is what eq. 17/18a
    assume with Aq̇ = 0).

    Γ_vn = V₂ᵀΓV₁ − V̇₂ᵀV₁, and differentiating ΛV₂ = 0 (eq. 12) gives V₁ᵀV̇₂ = −W₁Λ̇V₂ with W₁ = V₁ᵀΛ⁺,
    Λ̇ = (Ȧ − ΛQ̇ᵀ)Q⁻ᵀ, so Γ_vn v_n = V₂ᵀ(ΓV₁v_n + Λ̇ᵀW₁ᵀv_n), Λ̇ᵀz = Q⁻¹(Ȧᵀz − Q̇Λᵀz).
    ``qs``: a QuasiState (SPEC §2), ``Adot``: Ȧ (m×n) at the same state."""
    if not qs.rank:
        return np.zeros(qs.V2.shape[1])
    z = v_n.dot(qs.W1)                                                   # W₁ᵀv_n (m)
    lam_dot_t = qs.Qinv.dot(z.dot(Adot) - qs.Qdot.dot(z.dot(qs.Lambda)))     # Λ̇ᵀW₁ᵀv_n
    return (qs.Gamma.dot(qs.V1.dot(v_n)) + lam_dot_t).dot(qs.V2)


class QuasiLawBase(ControlLaw):
    """Shared by the quasi-velocity laws: decomposition, force channel (eq. 42/47), τ = g + Q(V₁u_ξ + V₂u_v)."""

    uses_terms = True

    normal_motion = False  # the tracking law's normal-motion terms (QuasiTrackingLaw sets its own)
    _reduced = LazyKernel("reduced_jacobian")

    def __init__(self, system, coordinates, kp=10.0, kd=10.0, kf=0.0, ki=0.0, force: bool = True,
                 compensate_velocity: bool = True, effort_limits="urdf", cond_max: float = 1e6,
                 compiled: bool = True):
        super().__init__(system, coordinates, kp=kp, kd=kd, kf=kf, ki=ki, effort_limits=effort_limits,
                         cond_max=cond_max, compiled=compiled)
        self.force = bool(force)
        self.compensate_velocity = bool(compensate_velocity)
        # evaluate + quasi_decompose of a sample: Pinocchio's passes + one compiled call (the base's
        # QuasiSampler), or the reference path (SVD gauge, numpy products) when compiled=False
        self._ref_prev = None
        # the tick after the decomposition in one call (qv_control.kernels.quasi_tick)
        self._qtick = load("qv_control.kernels.quasi_tick", "quasi_tick") \
            if self.compiled and self.coords._fast is not None else None
        if self.compiled:  # else the reference path: SVD gauge, numpy products
            compiled_kernel()  # load the compiled decomposition now (~0.3 s from its cache), not at sample 2

    @property
    def _prev(self):
        """The previous sample's QuasiState (V₁, V₂ are kept continuous from it)."""
        return self._sampler.prev if self._sampler is not None else self._ref_prev

    def reset(self) -> None:
        super().reset()
        if self._sampler is not None:
            self._sampler.reset()
        self._ref_prev = None

    def _decompose(self, q, qdot):
        """(terms, qs) of this sample; q, q̇ validated by _read_state. With the sampler both live in its
        buffers until its next sample (the law uses them within the tick; a carried τ_I reads the last one)."""
        if self._sampler is not None:
            terms, qs = self._sampler.sample(q, qdot)
        else:
            terms = self.system.evaluate(q, qdot, checked=True)
            qs = self._ref_prev = quasi_decompose(terms, prev=self._ref_prev, gauge="svd")
        if qs.rank_changed:
            self.force_pi.reset()
        return terms, qs

    def _compiled_tick(self, t, q, qdot, lam_meas, terms, qs, reference, mode: int, rate=(0, _NONE, 0.0, _NONE),
                       bias=None):
        """(out, ref) of :func:`qv_control.kernels.quasi_tick.quasi_tick` for this sample (``mode``: 0 tracking,
        1/2 setpoint; ``rate``: (rate_mode, Gv_n,prev, dt, rate_prev)), or None: the numpy path serves it
        (θ not of size n − r; more frames than the kernel
        serves; a singular D or an orientation beyond its chart, where the numpy path raises). Sets the
        limiter's status and ``last["force_feedback"]``."""
        if self._qtick is None:
            return None
        n, r, k = qdot.shape[0], qs.rank, self.k
        prep = self.coords._fast.prepare(self.system.data, mode == 0 and r > 0) if k == n - r else None
        if prep is None:
            return None
        plan, sup, vw, Rref = prep
        ref = self._read_reference(reference, t, self._held_theta(q, qdot), terms.m)
        force_on = self.force and r > 0
        corr = self._force_correction(t, ref.lambda_, lam_meas) if force_on else None
        if force_on:
            self.last["force_feedback"] = corr is not None
        V = qs._V if qs._V is not None else qs._Vt.T
        lim = self.limits
        out = np.empty((quasi_rows(n, k, plan.shape[0]), n))
        if self._qtick(vw[0], vw[1], vw[2], vw[3], vw[4], vw[5], Rref, plan, sup, k, q, qdot, qs.Q, qs.Qinv,
                       qs.Qdot, V, qs.W1, qs.Lambda, qs.Gamma, qs.Gamma_v, qs.v, qs.v_r, qs.Gamma_xi_vr,
                       terms.g if bias is None else terms.g + bias, ref.theta, ref.theta_dot, ref.theta_ddot,
                       ref.lambda_, _NONE if corr is None else corr, self.kp, self.kd, self.cond_max, mode,
                       int(self.normal_motion and r > 0), int(force_on),
                       int(self.compensate_velocity), rate[0], rate[1], rate[2], rate[3],
                       _no_limits(n) if lim is None else lim, out, self._cond_rotation()) != 1:
            self._cond_U = None
            return None
        if lim is None:
            status = SaturationStatus()
        elif out[13, 1] <= 1.0:
            status = SaturationStatus(peak_ratio=float(out[13, 1]))
        else:
            tau, status = saturate(out[1], out[2] if r else None, out[3], lim)
            out[0] = tau
        self.saturation = status
        self.last["saturation"] = status
        return out, ref

    def _reduced_jacobian(self, qs, J: np.ndarray) -> tuple[np.ndarray, float]:
        """D = JQ⁻ᵀV₂ (eq. 34) and cond(D), checked (:func:`~qv_control.coordinates.check_reduced_jacobian`);
        compiled when available (:func:`qv_control.kernels.laws.reduced_jacobian`)."""
        n, r = qs.Q.shape[0], qs.rank
        k = n - r
        if self._reduced is not None and J.shape[0] == k > 0:
            D = np.empty((k, k))
            cond = self._reduced(qs.Qinv, qs._V if qs._V is not None else qs._Vt.T, r, J, D)
            if cond <= self.cond_max:
                return D, cond
        else:
            D = J.dot(qs.Qinv.T.dot(qs.V2))
        return D, check_reduced_jacobian(D, self.coords.labels, n, r, self.cond_max)

    def _force_channel(self, t, qs, lam_d, lam_meas) -> tuple[np.ndarray, np.ndarray]:
        """u_ξ (eq. 42/47 + PI) and ξ_d."""
        r = qs.rank
        if not self.force or r == 0:
            return np.zeros(r), np.zeros(r)
        xi_d = qs.xi_from_lambda(lam_d)
        u_xi = xi_d - qs.Gamma_xi_vr if self.compensate_velocity else xi_d.copy()
        corr = self._force_correction(t, lam_d, lam_meas)
        if corr is not None:
            u_xi = u_xi + qs.xi_from_lambda(corr)
        self.last["force_feedback"] = corr is not None
        return u_xi, xi_d

    def _torque(self, terms, qs, u_v, u_xi, bias: np.ndarray | None = None) -> np.ndarray:
        """τ = g [+ b] + Q(V₁u_ξ + V₂u_v); a carried bias b joins g (never scaled by the limiter)."""
        Q = qs.Q
        force = Q.dot(qs.V1.dot(u_xi)) if qs.rank else None
        return self._finish(terms.g if bias is None else terms.g + bias, force, Q.dot(qs.V2.dot(u_v)))
