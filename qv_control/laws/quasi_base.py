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

from dataclasses import fields

import numpy as np

from qv_dynamics.quasi import QuasiState, compiled_kernel, quasi_decompose

from ..coordinates import check_reduced_jacobian
from ..kernels import layout as L
from .base import ControlLaw
from .integral import export_pi, import_pi
from .lazy_kernel import LazyKernel
from .packed import Setting

_NONE = np.zeros(0)
_STATE_FIELDS = [f.name for f in fields(QuasiState) if not f.name.startswith("_")]


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
    """Shared by the quasi-velocity laws: decomposition, force channel (eq. 42/47), τ = g + Q(V₁u_ξ + V₂u_v).

    With ``compiled=True`` a tick is Pinocchio's Coriolis pass and one kernel call
    (:mod:`qv_control.kernels.quasi_tick`, state in :class:`~qv_control.laws.packed.CompiledTick`); the first tick,
    a change of the constraints or of the rank, and anything the kernel declines take the numpy path below."""

    uses_terms = True
    tick_kernel = "qv_control.kernels.quasi_tick.quasi_law_tick"
    force = Setting()
    compensate_velocity = Setting()

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
        if self.compiled:  # else the reference path: SVD gauge, numpy products
            compiled_kernel()  # load the compiled decomposition now (~0.3 s from its cache), not at sample 2
        self._start_compiled_tick()

    #: τ of this state and reference: the compiled tick, or the numpy path (:meth:`_compute`) (one call, no wrapper)
    compute = ControlLaw._compiled_compute

    @property
    def _prev(self):
        """The previous sample's QuasiState (V₁, V₂ are kept continuous from it)."""
        if self._ct is not None and self._ct.live:
            self._ct.hand_over()
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

    # ------------------------------------------------------------------ the compiled tick's state
    def _export_state(self, ct) -> None:
        st = ct.state
        if st[L.S_HOLD]:
            self._theta_hold = ct.vector(L.F_HOLD).copy()
        export_pi(self.force_pi, ct)
        m = ct.m
        V = ct.block(L.F_VP).copy()
        prev = QuasiState(**dict(dict.fromkeys(_STATE_FIELDS), V1=V[:, :m], V2=V[:, m:], rank=m, rank_changed=False),
                          _V=V, _UR=ct.block(L.F_UP).copy(), _Vt=V.T)
        self._sampler.prev = prev

    def _import_state(self, ct) -> bool:
        prev, m, n = self._sampler.prev, ct.m, self.system.nv
        if prev is None or prev.rank != m or prev.V2.shape[0] != n or self.k != n - m:
            return False
        st = ct.state
        ct.block(L.F_VP)[:] = prev._V if prev._V is not None else np.hstack((prev.V1, prev.V2))
        ct.block(L.F_UP)[:] = prev._UR if prev._UR is not None else np.eye(m)
        ct.block(L.F_UC)[:] = np.eye(self.k)
        st[L.S_COND_CALLS] = 0.0
        st[L.S_HOLD] = self._theta_hold is not None
        if self._theta_hold is not None:
            ct.vector(L.F_HOLD)[:] = self._theta_hold
        import_pi(self.force_pi, ct)
        sat = self.saturation
        st[L.S_FORCE_FROZEN], st[L.S_MOTION_FROZEN] = sat.force_frozen, sat.motion_frozen
        return True

    def _pack(self, packer, plan) -> None:
        par = packer._floats[L.F_PAR][0]
        par[[L.P_FORCE, L.P_COMPENSATE, L.P_NORMAL]] = self.force, self.compensate_velocity, self.normal_motion

    def _diagnostics(self, ct) -> dict:
        D = ct.block(L.F_DIAG)
        sc, k, r = D[L.D_SCALARS], ct.k, ct.m
        d = dict(t=float(sc[L.DS_T]), theta=D[L.D_THETA, :k].copy(), theta_d=D[L.D_THETA_D, :k].copy(),
                 e_theta=D[L.D_E, :k].copy(), cond_D=ct.cond(), u_v=D[L.D_UV, :k].copy(),
                 u_xi=D[L.D_UXI, :r].copy(), xi_d=D[L.D_XID, :r].copy(), v_r=D[L.D_VR, :k].copy(),
                 lambda_d=D[L.D_LAMBDA_D, :r].copy(), saturation=self.saturation)
        if self.force and r:
            d["force_feedback"] = bool(sc[L.DS_FEEDBACK])
        return d

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
