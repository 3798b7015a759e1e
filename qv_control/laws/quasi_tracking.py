"""Trajectory tracking in quasi-velocities (paper `aghili-quasi-velocities` eq. 35–38, SPEC signs) with the
force channel of :mod:`qv_control.laws.quasi_base` (eq. 42, + PI on the measured λ)."""
from __future__ import annotations

import math

import numpy as np

from qv_dynamics.linalg import inv
from qv_dynamics.state import Reference, State

from ..coordinates import check_reduced_jacobian
from ..kernels import layout as L
from .base import scalar_gain
from .carry import IntegralCarry
from .integral import BoundedIntegral
from .lazy_kernel import LazyKernel
from .packed import Setting
from .quasi_base import QuasiLawBase, normal_coupling


class QuasiTrackingLaw(QuasiLawBase):
    """Tracking in quasi-velocities (eq. 35–38, SPEC signs) + force law (eq. 42, u_ξ = ξ_d − Γ_ξv_r).

    ε = (v_r − v_rd) + D⁻¹K_p(θ − θ_d),  v_rd = D⁻¹θ̇_d,  σ = v_rd − D⁻¹K_p(θ − θ_d) = v_r − ε,
    u_v = σ̇ + Γ_v v_r − k_d ε   ⇒   ε̇ = −k_d ε (eq. 37), and θ − θ_d → 0 (eq. 39–41).

    σ̇ = D⁻¹(θ̈_d − K_p(θ̇ − θ̇_d) − Ḋσ) with Ḋ computed analytically: D = J N, N = Q⁻ᵀV₂ and, in the
    parallel-transport gauge of V₂ that the core's Γ_v assumes (V₂ᵀV̇₂ = 0),
    Ṅσ = Q⁻ᵀ(V̇₂σ − Q̇ᵀw), V̇₂σ = −Λ⁺(Ȧw − ΛQ̇ᵀw), w = Nσ; Ḋσ = J̇w + JṄσ.
    ‖ε‖ does not depend on the basis chosen for V₂ (ε → Rᵀε), so it is a well-defined measured figure.

    Normal motion (``normal_motion=True``, default). The law above assumes Aq̇ = 0. A real contact is
    compliant (a MuJoCo or real table lets the tool sink by µm when the force changes), so the measured
    velocity has a normal part v_n = V₁ᵀv and v = V₂v_r + V₁v_n. Two exact consequences (SPEC §2 notation,
    V₂ in the parallel-transport gauge, W₁ = V₁ᵀΛ⁺, Λ̇ = (Ȧ − ΛQ̇ᵀ)Q⁻ᵀ):

    1. the tangential dynamics pick up a coupling term: from v̇ = −Γv + u − Λᵀλ (eq. 7a) and
       v̇_r = V₂ᵀv̇ + V̇₂ᵀv, with V₁ᵀV̇₂ = −W₁Λ̇V₂ (derivative of ΛV₂ = 0, eq. 12)::

           v̇_r = −Γ_v v_r − Γ_vn v_n + u_v,    Γ_vn = V₂ᵀΓV₁ − V̇₂ᵀV₁ = V₂ᵀ(ΓV₁ + Λ̇ᵀW₁ᵀ);
    2. the minimal coordinates move with it: θ̇ = Jq̇ = Dv_r + D₁v_n, D₁ = JQ⁻ᵀV₁ (≠ 0 on the Panda: a
       normal push along M⁻¹Aᵀ also moves the tool sideways).

    The law then uses the composite error of the *measured* θ̇, ε = D⁻¹(θ̇ − θ̇_d + K_p(θ − θ_d))
    = v_r + Gv_n − σ with G = D⁻¹D₁, and::

        u_v = σ̇ + Γ_v v_r + Γ_vn v_n − (Gv_n)˙ − k_d ε      ⇒   ε̇ = −k_d ε

    again. (Gv_n)˙ contains the normal acceleration, which the rigid model cannot predict (it is 0
    there); it is estimated by the backward difference of the measured Gv_n over the control period
    (``normal_rate=False`` drops it, keeping the two exact terms; with a noisy velocity measurement filter
    q̇ first or drop it, since a backward difference amplifies noise). With Aq̇ = 0 (an exact constraint)
    v_n = 0 and the law is the one above, so the ideal closed loop is unchanged; with a compliant
    contact a step of the commanded force no longer drags θ through the sinking of the tool.

    Integral action (``ki_motion`` = k_I > 0, 1/s²): u_v −= k_I z, ż = ε, in the reduced velocity space, so
    ε̇ = −k_d ε − k_I z + d and a constant disturbance d (model error, unmodelled friction) leaves ε → 0, hence
    θ → θ_d; with Dε = ė + K_p e the error obeys (s + k_p)(s² + k_d s + k_I) = 0 per axis (k_I = k_d²/4:
    a double pole at −k_d/2). The integrand takes ė from the positions, not from the measured velocity:
    ż = D⁻¹(Δe/Δt + K_p e) with Δe the change of the measured θ − θ_d since the previous sample, so that
    Σ D⁻¹Δe ≈ D⁻¹e (exact up to the O(‖e‖‖Ḋ‖) drift of D⁻¹ over a step) and z is a function of the measured
    positions, as the operational-space law's K_I∫e is. Integrating the measured θ̇ instead would add the
    random walk ∫(θ̇_meas − θ̇) of the velocity noise at gain k_I/s (above k_p + k_d below k_I/(k_p + k_d)
    = 20 rad/s, where an observer's or filter's residual noise lives): q̇ noise σ = 0.01 rad/s through
    the 5 Hz observer, path RMS 32 µm against 26 µm for OSC (34 / 34 µm for both without the integral).
    Anti-windup: z is frozen while the limiter scales the motion channel and
    clamped to ‖k_I z‖ ≤ ``integral_limit``; it is reset when the contact rank changes (V₂ re-seeded).
    Bumpless transfer: what the integrals (motion k_I z and the force PI's k_i∫e) were applying at the last
    sample before a rank change, τ_I = Q(−V₂k_I z + V₁V₁ᵀΛᵀk_i∫e), is kept as a generalised-force bias b
    added to g from then on, and the restarted integrals only estimate what is left. A constant disturbance
    (model error: +10 % link masses lift the tool by 6 N) is thus not dropped at touch-down, where the force
    PI alone would take ~0.1 s to relearn it and a stiff contact is lost first. :meth:`carry` hands the
    bias to a law rebuilt at a switch; :attr:`integral_torque` is b + τ_I of the last sample. Only a phase
    that lasted ``carry_min_time`` (default 0.05 s, a few time constants of the integral's poles) hands its
    τ_I on: after a bounce of a few ms the integrals hold a transient, not an estimate, and are dropped
    (a MuJoCo friction scene chattering at 1 kHz otherwise random-walks b: 175 % -> 329 % force error).

    Parameters: ``coordinates`` (θ spec, k = n − r entries), ``kp`` (scalar or k-vector, 1/s), ``kd`` (1/s),
    ``kf`` < 1 and ``ki`` (force PI on λ_meas), ``force`` (False: u_ξ = 0, min ‖u‖),
    ``compensate_velocity`` (False: eq. 47 u_ξ = ξ_d), ``normal_motion`` / ``normal_rate`` (above),
    ``ki_motion`` / ``integral_limit`` (integral action, above),
    ``effort_limits`` ("urdf", number, n-vector, None), ``cond_max`` (largest accepted cond(D)).
    """

    name = "quasi_tracking"
    _kernel = LazyKernel("tracking")  # the numpy path's motion products (its rare ticks)
    normal_motion = Setting()
    normal_rate = Setting()
    ki_motion = Setting()
    integral_limit = Setting()
    rate_max_dt = Setting()

    def __init__(self, system, coordinates, kp=10.0, kd=10.0, normal_motion: bool = True,
                 normal_rate: bool = True, ki_motion: float = 0.0, integral_limit: float = 50.0,
                 carry_min_time: float = 0.05, **kw):
        super().__init__(system, coordinates, kp=kp, kd=kd, **kw)
        self.ki_motion = scalar_gain("ki_motion", ki_motion, positive=False)
        self.integral_limit = scalar_gain("integral_limit", integral_limit)
        self._integral = BoundedIntegral(self.ki_motion, self.integral_limit)   # k_I z, ż = ε
        self._carry = IntegralCarry(system.nv, scalar_gain("carry_min_time", carry_min_time, positive=False))
        self.normal_motion = bool(normal_motion)
        self.normal_rate = bool(normal_rate)
        self.rate_max_dt = 0.1  # s: longer gaps between samples restart the backward difference
        self._gvn_prev: tuple[float, np.ndarray] | None = None
        self._gvn_rate: np.ndarray | None = None
        self._tau_int_pending: tuple | None = None  # τ_I's ingredients of the last sample (see _tau_int)
        self._e_prev: tuple[float, np.ndarray] | None = None   # (t, θ − θ_d) of the integrand's Δe

    def reset(self) -> None:
        super().reset()  # (the compiled tick's state handed over first)
        self._gvn_prev = None
        self._gvn_rate = None
        self._integral.reset()
        self._e_prev = None
        self._carry.reset()
        self._tau_int_pending = None

    @property
    def integral_torque(self) -> np.ndarray:
        """b + τ_I: the generalised force the integral actions applied at the last sample (class docstring)."""
        if self._ct is not None:
            self._ct.sync()
        self._tau_int()
        return self._carry.total

    def carry(self, bias: np.ndarray) -> None:
        """Start from the bias b (n-vector) carried over from a law of the previous contact phase."""
        self._own_state()
        self._carry.carry(bias)

    def _tau_int(self) -> None:
        """Hand τ_I of the last sample to the carry. It is read only at a contact switch and by
        :attr:`integral_torque`, so a sample keeps just its ingredients and τ_I is formed when asked."""
        if self._tau_int_pending is not None:
            self._carry.tau_int = self._integral_terms(*self._tau_int_pending)
            self._tau_int_pending = None

    def _integral_terms(self, qs, z_motion: np.ndarray | None, zf: np.ndarray | None) -> np.ndarray:
        """τ_I = Q(−V₂k_I z + V₁V₁ᵀΛᵀk_i∫e) of a sample (``zf``: the force PI's ∫e then)."""
        u = np.zeros(self.system.nv)
        if z_motion is not None:
            u = u - qs.V2 @ z_motion
        if qs.rank and self.force and zf is not None and zf.shape == (qs.rank,):
            u = u + qs.V1 @ qs.xi_from_lambda(self.force_pi.ki * zf)
        return qs.Q @ u

    def _motion_integral(self, t: float, qs, D, e: np.ndarray, eps: np.ndarray) -> np.ndarray:
        """k_I z with ż = D⁻¹(Δe/Δt + K_p e) (class docstring; ε of the measured θ̇ only where there is no
        previous sample): reset on a rank change, frozen while the motion channel is scaled by the limiter,
        clamped to ‖k_I z‖ ≤ integral_limit."""
        if qs.rank_changed:
            self._integral.reset()
            self._e_prev = None
        prev = self._e_prev
        if prev is not None and prev[1].shape == e.shape and 0.0 < t - prev[0] <= self._integral.max_dt:
            eps = inv(D).dot((e - prev[1]) / (t - prev[0]) + self.kp * e)
        if prev is None or t > prev[0]:
            self._e_prev = (t, e.copy())
        return self._integral.step(t, eps, freeze=self.saturation.motion_frozen)

    def _normal_terms(self, t, qs, kin, Dinv) -> tuple[np.ndarray, np.ndarray]:
        """(Gv_n, Γ_vn v_n − (Gv_n)˙) of the normal-motion extension (class docstring, items 1-2)."""
        v_n = qs.v.dot(qs.V1)
        self.last["v_n"] = v_n
        gvn = Dinv.dot(kin.J.dot(qs.Qinv.T.dot(qs.V1.dot(v_n))))                  # G v_n = D⁻¹D₁v_n
        comp = normal_coupling(qs, kin.Adot, v_n)                              # Γ_vn v_n
        rate = self._normal_rate(t, qs, gvn)
        return gvn, comp if rate is None else comp - rate

    def _normal_rate(self, t: float, qs, gvn: np.ndarray) -> np.ndarray | None:
        """(Gv_n)˙ by the backward difference of the measured Gv_n (None: not available or not wanted)."""
        mode, prev = self._rate_plan(t, qs, gvn.shape[0])
        rate = (gvn - prev[1]) / (t - prev[0]) if mode == 1 else self._gvn_rate if mode == 2 else None
        self._rate_store(t, mode, prev, gvn, rate)
        return rate

    def _rate_plan(self, t: float, qs, k: int):
        """(mode, previous (t, Gv_n)) of this sample's (Gv_n)˙: −1 not wanted, 0 none, 1 the backward difference
        from the previous sample, 2 the previous sample's rate (a repeated stamp)."""
        if qs.rank_changed:
            self._gvn_prev = self._gvn_rate = None
        if not self.normal_rate:
            return -1, None
        prev = self._gvn_prev
        if prev is not None and prev[1].shape == (k,) and 0.0 < t - prev[0] <= self.rate_max_dt:
            return 1, prev
        if prev is None or t != prev[0]:
            return 0, prev
        return (2 if self._gvn_rate is not None else 0), prev

    def _rate_store(self, t: float, mode: int, prev, gvn: np.ndarray, rate) -> None:
        """Keep this sample's Gv_n and rate (the stamps followed both ways: one bad stamp cannot freeze them)."""
        if mode < 0:
            return
        if mode == 1:
            self._gvn_rate = rate
        elif prev is None or t != prev[0]:
            self._gvn_rate = None
        if prev is None or t != prev[0]:
            self._gvn_prev = (t, gvn)

    # ------------------------------------------------------------------ the compiled tick's state
    def _pack(self, packer, plan) -> None:
        super()._pack(packer, plan)
        par = packer._floats[L.F_PAR][0]
        par[[L.P_NORMAL_RATE, L.P_RATE_DT, L.P_KI_MOTION, L.P_INT_LIMIT, L.P_INT_DT]] = \
            self.normal_rate, self.rate_max_dt, self._integral.gain if self.ki_motion > 0 else 0.0, \
            self._integral.limit, self._integral.max_dt

    def _export_state(self, ct) -> None:
        super()._export_state(ct)
        st, nan = ct.state, math.isnan
        self._integral.z = ct.vector(L.F_IZ).copy() if st[L.S_INT_Z] else None
        self._integral.t_prev = None if nan(st[L.S_INT_T]) or not st[L.S_INT_Z] else float(st[L.S_INT_T])
        self._e_prev = None if nan(st[L.S_E_T]) else (float(st[L.S_E_T]), ct.vector(L.F_EP).copy())
        self._gvn_prev = None if nan(st[L.S_GVN_T]) else (float(st[L.S_GVN_T]), ct.vector(L.F_GVN).copy())
        self._gvn_rate = ct.vector(L.F_GRATE).copy() if st[L.S_GRATE] else None
        c = self._carry
        c._phase = None if nan(st[L.S_PHASE0]) else [float(st[L.S_PHASE0]), float(st[L.S_PHASE1])]
        if st[L.S_TAUI]:
            self._tau_int_pending, c.tau_int = None, ct.vector(L.F_TAUI).copy()

    def _import_state(self, ct) -> bool:
        if not super()._import_state(ct):
            return False
        st, k = ct.state, self.k
        z, tp = self._integral.z, self._integral.t_prev
        st[L.S_INT_Z] = z is not None and z.shape == (k,)
        if st[L.S_INT_Z]:
            ct.vector(L.F_IZ)[:] = z
        st[L.S_INT_T] = np.nan if tp is None else tp
        for prev, h, s_t in ((self._e_prev, L.F_EP, L.S_E_T), (self._gvn_prev, L.F_GVN, L.S_GVN_T)):
            ok = prev is not None and prev[1].shape == (k,)
            st[s_t] = prev[0] if ok else np.nan
            if ok:
                ct.vector(h)[:] = prev[1]
        st[L.S_GRATE] = self._gvn_rate is not None and self._gvn_rate.shape == (k,)
        if st[L.S_GRATE]:
            ct.vector(L.F_GRATE)[:] = self._gvn_rate
        c = self._carry
        st[L.S_BIAS] = c.bias is not None
        if c.bias is not None:
            ct.vector(L.F_BIAS)[:] = c.bias
        st[L.S_PHASE0], st[L.S_PHASE1] = c._phase if c._phase else (np.nan, np.nan)
        st[L.S_TAUI] = 0.0
        return True

    def _diagnostics(self, ct) -> dict:
        d = super()._diagnostics(ct)
        D, k, r = ct.block(L.F_DIAG), ct.k, ct.m
        d["eps"] = D[L.D_EPS, :k].copy()
        if self.normal_motion and r:
            d["v_n"] = D[L.D_VN, :r].copy()
        return d

    def _motion(self, t, qs, kin, ref) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]:
        """(u_v, ε, e = θ − θ_d, cond D, D) before the integral action: eq. 35–38 with the normal-motion terms
        (class docstring), by the compiled kernel (:mod:`qv_control.kernels.laws`) or, as the reference, in numpy
        (:meth:`_motion_numpy`)."""
        kernel = self._kernel
        n, r = qs.Q.shape[0], qs.rank
        k = n - r
        if kernel is None or kin.J.shape[0] != k:
            return self._motion_numpy(t, qs, kin, ref)
        normal = self.normal_motion and r > 0
        out = np.empty((7 + k, n))
        V = qs._V if qs._V is not None else qs._Vt.T
        Adot = kin.Adot if r else np.zeros((0, n))
        if not kernel(qs.Qinv, qs.Qdot, V, qs.W1, qs.Lambda, qs.Gamma, qs.Gamma_v, kin.J, kin.Jdot, Adot, qs.v,
                      qs.v_r, kin.theta, ref.theta, kin.theta_dot, ref.theta_dot, ref.theta_ddot, self.kp, self.kd,
                      self.cond_max, int(normal), out):
            check_reduced_jacobian(out[7:, :k], self.coords.labels, n, r, self.cond_max)  # raises
            return self._motion_numpy(t, qs, kin, ref)  # (rounding let the SVD's cond pass)
        u_v, eps = out[0, :k], out[1, :k]
        if normal:
            self.last["v_n"] = out[4, :r]
            rate = self._normal_rate(t, qs, out[3, :k])
            if rate is not None:
                u_v -= rate
        return u_v, eps, out[5, :k], float(out[6, 0]), out[7:, :k]

    def _motion_numpy(self, t, qs, kin, ref) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray]:
        """:meth:`_motion` in numpy (the reference path)."""
        N = qs.Qinv.T.dot(qs.V2)
        D = kin.J.dot(N)
        cond = check_reduced_jacobian(D, self.coords.labels, qs.Q.shape[0], qs.rank, self.cond_max)
        e = kin.theta - ref.theta
        s_d = ref.theta_dot - self.kp * e                      # Dσ
        sd_dot = ref.theta_ddot - self.kp * (kin.theta_dot - ref.theta_dot)
        lu = inv(D)
        sigma = lu.dot(s_d)
        eps = qs.v_r - sigma
        normal = None
        if self.normal_motion and qs.rank:
            gvn, normal = self._normal_terms(t, qs, kin, lu)
            eps = eps + gvn                                    # = D⁻¹(θ̇ − θ̇_d + K_p e), θ̇ measured
        w = N.dot(sigma)
        y = w.dot(qs.Qdot)
        if qs.rank:
            V2dot_sigma = -qs.V1.dot(qs.W1.dot(kin.Adot.dot(w) - qs.Lambda.dot(y)))
        else:
            V2dot_sigma = 0.0
        Ddot_sigma = kin.Jdot.dot(w) + kin.J.dot((V2dot_sigma - y).dot(qs.Qinv))
        sigma_dot = lu.dot(sd_dot - Ddot_sigma)
        u_v = sigma_dot + qs.Gamma_v.dot(qs.v_r) - self.kd * eps
        if normal is not None:
            u_v = u_v + normal
        return u_v, eps, e, cond, D

    def _compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """The numpy path of :meth:`compute` (the reference with ``compiled=False``; the rare ticks otherwise)."""
        t, q, qdot, lam_meas = self._read_state(state)
        terms, qs = self._decompose(q, qdot)
        if qs.rank_changed:                                   # bumpless transfer (class docstring)
            self._tau_int()
            self._carry.switch()
        self._carry.tick(t)
        # system.data still holds evaluate's J, J̇ and frame placements at (q, q̇): no second kinematic pass
        kin = self.coords.evaluate(q, qdot, constraint_rates=qs.rank > 0, data=self.system.data)
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        u_v, eps, e, cond, D = self._motion(t, qs, kin, ref)
        z_motion = None
        if self.ki_motion > 0:
            z_motion = self._motion_integral(t, qs, D, e, eps)
            u_v = u_v - z_motion
        u_xi, xi_d = self._force_channel(t, qs, ref.lambda_, lam_meas)
        # the force PI replaces its z (never updates it in place): keeping the reference keeps this sample's
        self._tau_int_pending = (qs, z_motion, self.force_pi.z)
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=e, eps=eps, cond_D=cond, u_v=u_v,
                         u_xi=u_xi, xi_d=xi_d, v_r=qs.v_r, lambda_d=ref.lambda_)
        return self._torque(terms, qs, u_v, u_xi, self._carry.bias)
