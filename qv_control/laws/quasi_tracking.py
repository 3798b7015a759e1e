"""Hybrid force/motion control in quasi-velocities and quasi-forces (paper `aghili-quasi-velocities`
section 3, with the SPEC §2 signs: v̇_r = −Γ_v v_r + u_v, ξ = u_ξ + Γ_ξ v_r).

Both laws output τ = g + Q(V₁u_ξ + V₂u_v) (SPEC §2) and use one ``system.evaluate`` and one
``quasi_decompose`` per call (the previous QuasiState is passed as ``prev`` so V₁, V₂ stay continuous).

Force channel (eq. 42; eq. 47 when ``compensate_velocity=False``)::

    u_ξ = ξ_d − (Γ_ξ v_r) [+ V₁ᵀΛᵀ(k_f e_λ + k_i ∫e_λ)],   ξ_d = V₁ᵀΛᵀλ_d,   e_λ = λ_d − λ_meas

so that ξ = ξ_d exactly with an exact model. Sign: the core's ``Gamma_xi_vr`` is the term with
ξ = u_ξ + Γ_ξv_r (SPEC §2, paper eq. 20, checked numerically against KKT dynamics), so it must be
*subtracted* to compensate it. The paper's eq. 42 (and the SPEC's copy "u_ξ = ξ_d + Γ_ξ v_r") would give
ξ = ξ_d + 2Γ_ξv_r — a sign slip; the law follows the intent "compensate the velocity term". the optional PI acts on the measured multiplier
(``State.lambda_meas``: a force sensor or an estimate) and absorbs model error. ``force=False`` sets
u_ξ = 0: the minimum-‖u‖ (kinetic metric, eq. 43) torque for the commanded motion.

Compliant contacts: with ``normal_motion=True`` (default) the tracking law also accounts for a measured
normal quasi-velocity v_n = V₁ᵀv ≠ 0 (a soft table: the tool sinks by µm when the force changes), which
the rigid model (Aq̇ = 0) ignores: v̇_r = −Γ_v v_r − Γ_vn v_n + u_v (:func:`normal_coupling`) and
θ̇ = Dv_r + D₁v_n. With Aq̇ = 0 the law is exactly eq. 35–38 (see :class:`QuasiTrackingLaw`).
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.quasi import quasi_decompose

from ..coordinates import check_reduced_jacobian
from .base import ControlLaw, GainError
from qv_dynamics.state import Reference, State


def normal_coupling(qs, Adot: np.ndarray, v_n: np.ndarray) -> np.ndarray:
    """Γ_vn v_n: the term a normal quasi-velocity v_n = V₁ᵀv adds to the tangential dynamics,
    v̇_r = −Γ_v v_r − Γ_vn v_n + u_v (V₂ in the parallel-transport gauge; Γ_vn = 0·v_n is what eq. 17/18a
    assume with Aq̇ = 0).

    Γ_vn = V₂ᵀΓV₁ − V̇₂ᵀV₁, and differentiating ΛV₂ = 0 (eq. 12) gives V₁ᵀV̇₂ = −W₁Λ̇V₂ with W₁ = V₁ᵀΛ⁺,
    Λ̇ = (Ȧ − ΛQ̇ᵀ)Q⁻ᵀ, so Γ_vn v_n = V₂ᵀ(ΓV₁v_n + Λ̇ᵀW₁ᵀv_n), Λ̇ᵀz = Q⁻¹(Ȧᵀz − Q̇Λᵀz).
    ``qs``: a QuasiState (SPEC §2), ``Adot``: Ȧ (m×n) at the same state."""
    if not qs.rank:
        return np.zeros(qs.V2.shape[1])
    z = qs.W1.T @ v_n                                                    # W₁ᵀv_n (m)
    lam_dot_t = qs.Qinv @ (Adot.T @ z - qs.Qdot @ (qs.Lambda.T @ z))     # Λ̇ᵀW₁ᵀv_n
    return qs.V2.T @ (qs.Gamma @ (qs.V1 @ v_n) + lam_dot_t)


class _QuasiLaw(ControlLaw):
    def __init__(self, system, coordinates, kp=10.0, kd=10.0, kf=0.0, ki=0.0, force: bool = True,
                 compensate_velocity: bool = True, effort_limits="urdf", cond_max: float = 1e6):
        super().__init__(system, coordinates, kp=kp, kd=kd, kf=kf, ki=ki, effort_limits=effort_limits,
                         cond_max=cond_max)
        self.force = bool(force)
        self.compensate_velocity = bool(compensate_velocity)
        self._prev = None

    def reset(self) -> None:
        super().reset()
        self._prev = None

    def _decompose(self, q, qdot):
        terms = self.system.evaluate(q, qdot)
        qs = quasi_decompose(terms, prev=self._prev)
        if qs.rank_changed:
            self.force_pi.reset()
        self._prev = qs
        return terms, qs

    def _force_channel(self, t, qs, lam_d, lam_meas) -> tuple[np.ndarray, np.ndarray]:
        """u_ξ (eq. 42/47 + PI) and ξ_d."""
        r = qs.rank
        if not self.force or r == 0:
            return np.zeros(r), np.zeros(r)
        xi_d = qs.xi_from_lambda(lam_d)
        u_xi = xi_d - qs.Gamma_xi_vr if self.compensate_velocity else xi_d.copy()
        corr = self._force_correction(t, None if lam_meas is None else lam_d - lam_meas)
        if corr is not None:
            u_xi = u_xi + qs.xi_from_lambda(corr)
        self.last["force_feedback"] = corr is not None
        return u_xi, xi_d

    def _torque(self, terms, qs, u_v, u_xi) -> np.ndarray:
        Q = qs.Q
        force = Q @ (qs.V1 @ u_xi) if qs.rank else None
        return self._finish(terms.g, force, Q @ (qs.V2 @ u_v))


class QuasiTrackingLaw(_QuasiLaw):
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
       v̇_r = V₂ᵀv̇ + V̇₂ᵀv, with V₁ᵀV̇₂ = −W₁Λ̇V₂ (derivative of ΛV₂ = 0, eq. 12),
           v̇_r = −Γ_v v_r − Γ_vn v_n + u_v,    Γ_vn = V₂ᵀΓV₁ − V̇₂ᵀV₁ = V₂ᵀ(ΓV₁ + Λ̇ᵀW₁ᵀ);
    2. the minimal coordinates move with it: θ̇ = Jq̇ = Dv_r + D₁v_n, D₁ = JQ⁻ᵀV₁ (≠ 0 on the Panda: a
       normal push along M⁻¹Aᵀ also moves the tool sideways).

    The law then uses the composite error of the *measured* θ̇, ε = D⁻¹(θ̇ − θ̇_d + K_p(θ − θ_d))
    = v_r + Gv_n − σ with G = D⁻¹D₁, and
        u_v = σ̇ + Γ_v v_r + Γ_vn v_n − (Gv_n)˙ − k_d ε      ⇒   ε̇ = −k_d ε
    again. (Gv_n)˙ contains the normal acceleration, which the rigid model cannot predict (it is 0
    there); it is estimated by the backward difference of the measured Gv_n over the control period
    (``normal_rate=False`` drops it, keeping the two exact terms; with a noisy velocity measurement filter
    q̇ first or drop it, since a backward difference amplifies noise). With Aq̇ = 0 (an exact constraint)
    v_n = 0 and the law is the one above, so the ideal closed loop is unchanged; with a compliant
    contact a step of the commanded force no longer drags θ through the sinking of the tool.

    Parameters: ``coordinates`` (θ spec, k = n − r entries), ``kp`` (scalar or k-vector, 1/s), ``kd`` (1/s),
    ``kf`` < 1 and ``ki`` (force PI on λ_meas), ``force`` (False: u_ξ = 0, min ‖u‖),
    ``compensate_velocity`` (False: eq. 47 u_ξ = ξ_d), ``normal_motion`` / ``normal_rate`` (above),
    ``effort_limits`` ("urdf", number, n-vector, None), ``cond_max`` (largest accepted cond(D)).
    """

    name = "quasi_tracking"

    def __init__(self, system, coordinates, kp=10.0, kd=10.0, normal_motion: bool = True,
                 normal_rate: bool = True, **kw):
        super().__init__(system, coordinates, kp=kp, kd=kd, **kw)
        self.normal_motion = bool(normal_motion)
        self.normal_rate = bool(normal_rate)
        self.rate_max_dt = 0.1  # s: longer gaps between samples restart the backward difference
        self._gvn_prev: tuple[float, np.ndarray] | None = None
        self._gvn_rate: np.ndarray | None = None

    def reset(self) -> None:
        super().reset()
        self._gvn_prev = None
        self._gvn_rate = None

    def _normal_terms(self, t, qs, kin, Dinv) -> tuple[np.ndarray, np.ndarray]:
        """(Gv_n, Γ_vn v_n − (Gv_n)˙) of the normal-motion extension (class docstring, items 1-2)."""
        if qs.rank_changed:
            self._gvn_prev = self._gvn_rate = None
        v_n = qs.V1.T @ qs.v
        self.last["v_n"] = v_n
        gvn = Dinv @ (kin.J @ (qs.Qinv.T @ (qs.V1 @ v_n)))                    # G v_n = D⁻¹D₁v_n
        comp = normal_coupling(qs, kin.Adot, v_n)                              # Γ_vn v_n
        if self.normal_rate:
            prev = self._gvn_prev
            if prev is not None and prev[1].shape == gvn.shape and 0.0 < t - prev[0] <= self.rate_max_dt:
                self._gvn_rate = (gvn - prev[1]) / (t - prev[0])
            elif prev is None or t != prev[0]:
                self._gvn_rate = None
            if prev is None or t > prev[0]:
                self._gvn_prev = (t, gvn)
            if self._gvn_rate is not None:
                comp = comp - self._gvn_rate
        return gvn, comp

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        t, q, qdot, lam_meas = self._read_state(state)
        terms, qs = self._decompose(q, qdot)
        # system.data still holds evaluate's J, J̇ and frame placements at (q, q̇): no second kinematic pass
        kin = self.coords.evaluate(q, qdot, constraint_rates=qs.rank > 0, data=self.system.data)
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        N = qs.Qinv.T @ qs.V2
        D = kin.J @ N
        cond = check_reduced_jacobian(D, self.coords.labels, terms.n, qs.rank, self.cond_max)
        e = kin.theta - ref.theta
        s_d = ref.theta_dot - self.kp * e                      # Dσ
        sd_dot = ref.theta_ddot - self.kp * (kin.theta_dot - ref.theta_dot)
        lu = np.linalg.inv(D)
        sigma = lu @ s_d
        eps = qs.v_r - sigma
        normal = None
        if self.normal_motion and qs.rank:
            gvn, normal = self._normal_terms(t, qs, kin, lu)
            eps = eps + gvn                                    # = D⁻¹(θ̇ − θ̇_d + K_p e), θ̇ measured
        w = N @ sigma
        y = qs.Qdot.T @ w
        if qs.rank:
            V2dot_sigma = -(qs.V1 @ (qs.W1 @ (kin.Adot @ w - qs.Lambda @ y)))
        else:
            V2dot_sigma = 0.0
        Ddot_sigma = kin.Jdot @ w + kin.J @ (qs.Qinv.T @ (V2dot_sigma - y))
        sigma_dot = lu @ (sd_dot - Ddot_sigma)
        u_v = sigma_dot + qs.Gamma_v @ qs.v_r - self.kd * eps
        if normal is not None:
            u_v = u_v + normal
        u_xi, xi_d = self._force_channel(t, qs, ref.lambda_, lam_meas)
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=e, eps=eps, cond_D=cond, u_v=u_v,
                         u_xi=u_xi, xi_d=xi_d, v_r=qs.v_r, lambda_d=ref.lambda_)
        return self._torque(terms, qs, u_v, u_xi)


class QuasiSetpointLaw(_QuasiLaw):
    """Setpoint regulation in quasi-velocities (eq. 44 with the SPEC's Dᵀ) + force law (eq. 42/47).

    ``form="lyapunov"`` (default): u_v = −k_d v_r − DᵀK_p(θ − θ_d); with V = ½‖v_r‖² + ½(θ−θ_d)ᵀK_p(θ−θ_d)
    (eq. 46), V̇ = −k_d‖v_r‖² ≤ 0 because v_rᵀΓ_v v_r = 0 and θ̇ = Dv_r.
    ``form="paper"``: u_v = −k_d v_r − K_p(θ − θ_d) as printed in eq. 44; the Lyapunov argument then
    fails unless D = I (and the law depends on the arbitrary basis of V₂); kept for comparison.
    θ̇_d and θ̈_d of the reference are ignored (regulation). ``last["V"]`` is the Lyapunov function.
    """

    name = "quasi_setpoint"

    def __init__(self, system, coordinates, kp=10.0, kd=10.0, form: str = "lyapunov", **kw):
        super().__init__(system, coordinates, kp=kp, kd=kd, **kw)
        if form not in ("lyapunov", "paper"):
            raise GainError(f"form must be 'lyapunov' (u_v = -kd v_r - D^T Kp e) or 'paper' (-kd v_r - Kp e), "
                            f"got {form!r}")
        self.form = form

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        t, q, qdot, lam_meas = self._read_state(state)
        terms, qs = self._decompose(q, qdot)
        kin = self.coords.evaluate(q, qdot, data=self.system.data)  # reuse evaluate's kinematics
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        D = kin.J @ (qs.Qinv.T @ qs.V2)
        cond = check_reduced_jacobian(D, self.coords.labels, terms.n, qs.rank, self.cond_max)
        e = kin.theta - ref.theta
        Kpe = self.kp * e
        u_v = -self.kd * qs.v_r - (D.T @ Kpe if self.form == "lyapunov" else Kpe)
        u_xi, xi_d = self._force_channel(t, qs, ref.lambda_, lam_meas)
        V = 0.5 * float(qs.v_r @ qs.v_r) + 0.5 * float(e @ Kpe)
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=e, cond_D=cond, u_v=u_v, u_xi=u_xi,
                         xi_d=xi_d, v_r=qs.v_r, V=V, lambda_d=ref.lambda_)
        return self._torque(terms, qs, u_v, u_xi)


__all__ = ["QuasiTrackingLaw", "QuasiSetpointLaw", "normal_coupling"]
