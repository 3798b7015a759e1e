"""Constrained simulator (paper `aghili-projection-operator`, section 6; SPEC §4 "Simulator contract").

Each step of ``method="projection"``:

1. q̈ from the projection direct dynamics  M_c q̈ = P(τ − h) + M a⊥,  M_c = M + PM − MP,
   a⊥ = −A⁺Ȧq̇  (eq. 22–25); A⁺ and P = I − A⁺A from one SVD with a rank rule, so redundant
   constraints and singular poses need no special case (eq. 65–70 for the slider-crank).
2. integrate (q, q̇) over dt: semi-implicit Euler, classical RK4, or an adaptive scipy ``solve_ivp``;
   the actuator torque is held over the step (zero-order hold, as a digital controller would).
3. Newton–Raphson position correction  q ← q − A⁺Φ(q)  (eq. 39) until ‖Φ‖ ≤ nr_tol
   (``system.integrate(q, −A⁺Φ)`` on a floating base); ConvergenceError after nr_max_iter.
4. velocity projection onto N(A). Default ``velocity_projection="M"``: the kinetic-metric projection
   q̇ ← q̇ − M⁻¹Aᵀ(AM⁻¹Aᵀ)⁺Aq̇ (= N_c q̇, the impulse map of the floating-base lecture). Of all
   q̇ with Aq̇ = 0 it is the closest to the integrated one in kinetic energy, so the energy change it
   causes is second order in the velocity error (the Euclidean P q̇ of the paper, ``"P"``, is first
   order); it also removes no momentum that the constraints do not remove.

``method="kkt_baumgarte"`` is the classical baseline (Savin lecture eq. 19–20 plus Baumgarte):
[[M, Aᵀ],[A, 0]][q̈; λ] = [τ − h; −Ȧq̇ − 2αAq̇ − β²Φ], integrated with the same integrator, no
position or velocity projection. It fails (singular KKT matrix) or degrades where A loses rank.

Contact switching and whole runs: :mod:`qv_dynamics.sim.simulation`.

Sign convention (SPEC): M q̈ + h = τ − Aᵀλ.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pinocchio as pin

from ..errors import ConvergenceError, DimensionError, NonFiniteError, QVError, as_vector
from ..impact import m_projection, predicted_energy_loss
from ..kernels.loader import load
from ..linalg import ATOL, RTOL
from ..model import ConstrainedSystem
from ..projection import direct_dynamics_rank, pinv_basis

METHODS = ("projection", "kkt_baumgarte")
INTEGRATORS = ("rk4", "semi_implicit_euler", "scipy")
KERNELS = "qv_dynamics.kernels.sim"  # the compiled projection path's kernels (qv_dynamics.kernels.loader.load)


# ============================================================================ one step
@dataclass
class Accel:
    """Result of one dynamics evaluation: q̈, λ (active rows), F = Aᵀλ, rank of A, M and ‖Φ‖."""

    qdd: np.ndarray
    lam: np.ndarray
    F: np.ndarray
    rank: int
    M: np.ndarray
    phi_norm: float


def _norm(x: np.ndarray) -> float:
    """‖x‖₂ of a vector as numpy.linalg.norm computes it (√(x·x)), without its wrapper; 0 when empty."""
    return math.sqrt(float(x.dot(x))) if x.size else 0.0


def length_scale(system: ConstrainedSystem) -> float:
    """A characteristic length of the model (m): the summed joint offsets plus the largest frame offset,
    at least 1. Rounding errors of the forward kinematics, hence of Φ, scale with it."""
    model = system.model
    joints = sum(float(np.linalg.norm(model.jointPlacements[j].translation)) for j in range(1, model.njoints))
    frames = max((float(np.linalg.norm(f.placement.translation)) for f in model.frames), default=0.0)
    return max(1.0, joints + frames)


def baumgarte_gains(baumgarte) -> tuple[float, float]:
    """(α, β) of A q̈ = −Ȧq̇ − 2αAq̇ − β²Φ: two finite numbers ≥ 0 (a negative α makes the constraint error
    grow); QVError otherwise."""
    try:
        alpha, beta = (float(b) for b in baumgarte)
    except (TypeError, ValueError):
        raise QVError(f"baumgarte: expected two numbers (alpha, beta), got {baumgarte!r}") from None
    if not (0.0 <= alpha < math.inf and 0.0 <= beta < math.inf):
        raise QVError(f"baumgarte: alpha and beta must be finite and >= 0, got ({alpha:g}, {beta:g})")
    return alpha, beta


class Stepper:
    """Reusable single-step integrator for a :class:`ConstrainedSystem` (the ROS sim node calls it every tick).

    ``step(q, qdot, tau, dt) -> (q, qdot)`` integrates one step and applies the section-6 correction;
    afterwards ``last`` holds the :class:`Accel` at the start of the step (λ, rank) and ``nr_iters``,
    ``phi_pre`` (‖Φ‖ before the correction), ``phi_norm`` (after), ``velocity_error`` (‖Aq̇‖ after),
    ``kinetic`` (½q̇ᵀMq̇ at the new state) and ``work_increment`` (τᵀ∫q̇dt over the step).
    Small matrices: run the process with one BLAS thread (:func:`qv_dynamics.linalg.limit_blas_threads`,
    called by the entry points), the Stepper itself leaves the process settings alone.

    ``compiled``: the projection method through numba kernels (:mod:`qv_dynamics.kernels.sim_fastpath`, ~3x faster,
    equal to rounding) — None (default) when :func:`qv_dynamics.kernels.loader.load` gives them (numba's disk cache
    holds them: ``scripts/setup.sh`` fills it, a colcon-installed copy needs ``qv warm`` once; else the reason
    is in ``loader.STATUS``), True also compiling them if not, False never. ``self.compiled`` says which
    path is used.
    """

    def __init__(self, system: ConstrainedSystem, method: str = "projection", integrator: str = "rk4",
                 nr_tol: float = 1e-12, nr_max_iter: int = 20, baumgarte: tuple[float, float] = (20.0, 20.0),
                 velocity_projection: str = "M", rtol: float = RTOL, atol: float = ATOL,
                 scipy_method: str = "DOP853", scipy_rtol: float = 1e-10, scipy_atol: float = 1e-12,
                 nr_floor: float | None = None, compiled: bool | None = None):
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {integrator!r}; choose one of {INTEGRATORS}")
        if velocity_projection not in ("M", "P"):
            raise ValueError("velocity_projection must be 'M' (kinetic metric, N_c) or 'P' (Euclidean, I − A⁺A)")
        if integrator == "scipy" and system.nq != system.nv:
            raise DimensionError("integrator='scipy' needs nq == nv (no free-flyer, spherical or continuous "
                                 "joint); use rk4")
        self.system = system
        self.method = method
        self.integrator = integrator
        self.nr_tol = float(nr_tol)
        self.nr_max_iter = int(nr_max_iter)
        # accept ‖Φ‖ ≤ nr_floor when an NR iteration no longer halves it (rounding floor reached); None:
        # nr_tol is strict. ``nr_stalls`` counts the accepted stalls.
        self.nr_floor = None if nr_floor is None else float(nr_floor)
        self.nr_stalls = 0
        self.alpha, self.beta = baumgarte_gains(baumgarte)
        self.velocity_projection = velocity_projection
        self.rtol, self.atol = float(rtol), float(atol)
        self.scipy_method, self.scipy_rtol, self.scipy_atol = scipy_method, scipy_rtol, scipy_atol
        self.n, self.nq = system.nv, system.nq
        # q ⊕ dq follows the joint types, not the root: any free-flyer (root or mid-tree), spherical or
        # continuous joint makes nq > nv and needs pin.integrate
        self._fixed = system.nq == system.nv
        self.last: Accel | None = None
        self.nr_iters = 0
        self.phi_pre = 0.0
        self.phi_norm = 0.0
        self.velocity_error = 0.0
        self.kinetic = 0.0
        self.work_increment = 0.0
        self.M_end: np.ndarray | None = None
        self._phi_first = 0.0
        self._q_out = self._v_out = None  # the state the last step returned (checked: not checked again)
        # the projection method's stages and correction through the compiled kernels (same equations and
        # rank rule; compiled=False keeps the numpy reference path, which the KKT baseline always uses)
        self._fast = None
        if compiled is not False and method == "projection" and load(KERNELS, force=bool(compiled)):
            from ..kernels.sim_fastpath import CompiledProjection  # imports numba: only once its kernels have loaded

            self._fast = CompiledProjection(system, self.rtol, self.atol)
        self.compiled = self._fast is not None  # which path this stepper uses

    # ------------------------------------------------------------------ model terms
    def terms(self, q: np.ndarray, qdot: np.ndarray):
        """(M, h, A, Ȧq̇, Φ) at (q, q̇): CRBA, RNEA with q̈ = 0, and the active constraints."""
        t = self.system.evaluate(q, qdot, coriolis=False)
        return t.M, t.h, t.A, t.Adot_qdot, t.phi

    def rows(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Φ(q), A(q) only (for the Newton–Raphson loop)."""
        return self.system.constraint_rows(q)

    def mass(self, q: np.ndarray) -> np.ndarray:
        return self.system.mass_matrix(q)

    # ------------------------------------------------------------------ dynamics
    def accel(self, q: np.ndarray, qdot: np.ndarray, tau: np.ndarray) -> Accel:
        """q̈ and λ at (q, q̇, τ) by :func:`~qv_dynamics.projection.direct_dynamics_rank`: projection eq. 25,
        or KKT + Baumgarte with A q̈ = −(Ȧq̇ + 2αAq̇ + β²Φ)."""
        if self._fast is not None:  # checked as evaluate() checks them (the compiled RK4 does not come here)
            q, qdot = self.system.check_q(q), as_vector("qdot", qdot, self.n)
            qdd, lam, r, M, pn, A = self._fast.accel(q, qdot, tau)
            return Accel(qdd, lam, A.T.dot(lam), r, M, pn)
        try:
            t = self.system.evaluate(q, qdot, coriolis=False)
        except NonFiniteError:
            raise NonFiniteError("state became non-finite (the integration blew up)") from None
        phi = t.phi
        pn = _norm(phi)
        if self.method == "projection":
            qdd, F, lam, r = direct_dynamics_rank(t, tau, "projection", rtol=self.rtol, atol=self.atol)
        else:
            t.Adot_qdot = t.Adot_qdot + 2.0 * self.alpha * t.A.dot(t.qdot) + self.beta ** 2 * phi
            qdd, F, lam, r = direct_dynamics_rank(t, tau, "kkt", rtol=self.rtol, atol=self.atol)
        return Accel(qdd, lam, F, r, t.M, pn)

    # ------------------------------------------------------------------ integration
    def _plus(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        return q + dq if self._fixed else pin.integrate(self.system.model, q, dq)

    def integrate_step(self, q: np.ndarray, qdot: np.ndarray,
                       tau_fn: Callable[[float, np.ndarray, np.ndarray], np.ndarray], dt: float, t: float = 0.0):
        """One integrator step without correction: returns (q, q̇, Accel at the start, ∫q̇dt in tangent space,
        ∫τᵀq̇dt)."""
        tau0 = tau_fn(t, q, qdot)
        a1 = self.accel(q, qdot, tau0)
        if self.integrator == "semi_implicit_euler":
            v1 = qdot + dt * a1.qdd
            disp = dt * v1
            return self._plus(q, disp), v1, a1, disp, float(tau0 @ disp)
        if self.integrator == "rk4":
            h2 = 0.5 * dt
            k1v, k1a = qdot, a1.qdd
            q2, v2 = self._plus(q, h2 * k1v), qdot + h2 * k1a
            tau2 = tau_fn(t + h2, q2, v2)
            k2a = self.accel(q2, v2, tau2).qdd
            q3, v3 = self._plus(q, h2 * v2), qdot + h2 * k2a
            tau3 = tau_fn(t + h2, q3, v3)
            k3a = self.accel(q3, v3, tau3).qdd
            q4, v4 = self._plus(q, dt * v3), qdot + dt * k3a
            tau4 = tau_fn(t + dt, q4, v4)
            k4a = self.accel(q4, v4, tau4).qdd
            disp = (dt / 6.0) * (k1v + 2.0 * v2 + 2.0 * v3 + v4)
            work = (dt / 6.0) * (tau0 @ k1v + 2.0 * tau2 @ v2 + 2.0 * tau3 @ v3 + tau4 @ v4)
            return self._plus(q, disp), qdot + (dt / 6.0) * (k1a + 2.0 * k2a + 2.0 * k3a + k4a), a1, disp, float(work)
        # adaptive scipy (fixed base): y = [q, q̇, W]
        from scipy.integrate import solve_ivp

        n = self.n

        def rhs(tt, y):
            qq, vv = y[:n], y[n:2 * n]
            tt_tau = tau_fn(tt, qq, vv)
            return np.concatenate([vv, self.accel(qq, vv, tt_tau).qdd, [tt_tau @ vv]])

        sol = solve_ivp(rhs, (t, t + dt), np.concatenate([q, qdot, [0.0]]), method=self.scipy_method,
                        rtol=self.scipy_rtol, atol=self.scipy_atol)
        if not sol.success:
            raise ConvergenceError(f"scipy {self.scipy_method} failed: {sol.message}")
        y = sol.y[:, -1]
        return y[:n], y[n:2 * n], a1, y[:n] - q, float(y[-1])

    # ------------------------------------------------------------------ section-6 correction
    def correct_position(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, float]:
        """Newton–Raphson q ← q − A⁺Φ(q) (eq. 39) until ‖Φ‖ ≤ nr_tol. Returns (q, A(q), iterations, ‖Φ‖)."""
        return self._newton(self.system.check_q(q))

    def _newton(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, float]:
        """:meth:`correct_position` of a checked q."""
        rows = self.rows if self._fast is None else self._fast.rows  # the compiled path: no second check
        phi, A = rows(q)
        nrm = _norm(phi)
        self._phi_first = nrm
        it = 0
        while nrm > self.nr_tol:
            if it >= self.nr_max_iter:
                if self.nr_floor is not None and nrm <= self.nr_floor:
                    self.nr_stalls += 1
                    break
                raise ConvergenceError(
                    f"Newton–Raphson position correction did not converge: ‖Φ‖ = {nrm:.3e} > nr_tol = "
                    f"{self.nr_tol:.1e} after {it} iterations (step too large, or the constraints cannot be met)")
            Apinv, _, r = pinv_basis(A, self.rtol, self.atol)
            if r == 0:
                raise ConvergenceError(f"Newton–Raphson: A has rank 0 at ‖Φ‖ = {nrm:.3e}; cannot correct")
            q = self._plus(q, -Apinv.dot(phi))
            phi, A = rows(q)
            prev, nrm = nrm, _norm(phi)
            if not math.isfinite(nrm):
                raise ConvergenceError("Newton–Raphson position correction diverged (non-finite Φ)")
            it += 1
            if self.nr_floor is not None and self.nr_tol < nrm <= self.nr_floor and nrm > 0.5 * prev:
                self.nr_stalls += 1  # no longer converging quadratically: the rounding floor of this model
                break
        return q, A, it, nrm

    def project_velocity(self, q: np.ndarray, qdot: np.ndarray, A: np.ndarray | None = None,
                         M: np.ndarray | None = None) -> np.ndarray:
        """q̇ onto N(A): kinetic-metric N_c q̇ (default) or Euclidean P q̇ = (I − A⁺A)q̇."""
        if A is None:
            _, A = self.rows(q)
        if A.shape[0] == 0:
            return qdot
        if self.velocity_projection == "P":
            Apinv, _, _ = pinv_basis(A, self.rtol, self.atol)
            return qdot - Apinv.dot(A.dot(qdot))
        M = self.mass(q) if M is None else M
        return m_projection(M, A, qdot, self.rtol, self.atol)[0]

    def correct(self, q: np.ndarray, qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Section 6 step iii: position NR (eq. 39) then velocity projection; fills the diagnostics."""
        return self._correct(self.system.check_q(q), as_vector("qdot", qdot, self.n))

    def _correct(self, q: np.ndarray, qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`correct` of a state already checked (finite, right sizes: the end of a step)."""
        q, A, self.nr_iters, self.phi_norm = self._newton(q)
        self.phi_pre = self._phi_first
        if self._fast is not None and self.velocity_projection == "M":
            qdot, self.velocity_error, self.kinetic, self.M_end = self._fast.project(q, qdot, A, self.phi_norm)
            return q, qdot
        M = self.mass(q)
        qdot = self.project_velocity(q, qdot, A, M)
        self.velocity_error = _norm(A.dot(qdot))
        self.kinetic = 0.5 * float(qdot.dot(M).dot(qdot))
        self.M_end = M
        return q, qdot

    def step(self, q, qdot, tau, dt: float, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """One step: integrate with τ (an array held over the step, or a callable tau(t, q, q̇)), then the
        section-6 correction (projection method) or just diagnostics (KKT + Baumgarte)."""
        if q is not self._q_out or qdot is not self._v_out:  # the state this stepper returned is checked already
            q, qdot = self.system.check_q(q), as_vector("qdot", qdot, self.n)
        if self._fast is not None and self.integrator == "rk4":  # τ checked there
            held, stage_fn = (None, tau) if callable(tau) else (tau, None)
            qn, vn, (qdd, lam, r, M, pn, A), work = self._fast.rk4(q, qdot, held, stage_fn, dt, t)
            a1 = Accel(qdd, lam, A.T.dot(lam), r, M, pn)
            finite = qn is not None
        else:
            if callable(tau):
                fn = tau
            else:
                held = as_vector("tau", tau, self.n)
                fn = lambda _t, _q, _v: held  # noqa: E731
            qn, vn, a1, _, work = self.integrate_step(q, qdot, fn, dt, t)
            finite = np.all(np.isfinite(qn)) and np.all(np.isfinite(vn))
        self.last = a1
        self.work_increment = work
        if not finite:
            raise NonFiniteError(f"state became non-finite at t = {t + dt:.6g} s (integration blew up)")
        if self.method == "projection":
            qn, vn = self._correct(qn, vn)
        else:
            self.diagnose(qn, vn)
        self._q_out, self._v_out = qn, vn
        return qn, vn

    def diagnose(self, q: np.ndarray, qdot: np.ndarray) -> None:
        """The diagnostics of :meth:`correct` without correcting (KKT + Baumgarte): ‖Φ‖, ‖Aq̇‖, kinetic energy."""
        phi, A = self.rows(q)
        self.phi_pre = self.phi_norm = float(np.linalg.norm(phi)) if phi.size else 0.0
        self.nr_iters = 0
        self.velocity_error = float(np.linalg.norm(A @ qdot)) if A.shape[0] else 0.0
        M = self.mass(q)
        self.kinetic = 0.5 * float(qdot @ M @ qdot)
        self.M_end = M

    def switch(self, name: str, active: bool, q: np.ndarray, qdot: np.ndarray, t: float = 0.0,
               impact_tol: float = 1e-12) -> tuple[np.ndarray, np.ndarray, dict]:
        """Switch a constraint on/off (contact made/lost). On activation with approach velocity ‖Aq̇⁻‖ >
        impact_tol, q is corrected (eq. 39, projection method) and the impulse map q̇⁺ = N_c q̇⁻ is applied
        (floating-base lecture, "Contact Dynamics"). Returns (q, q̇, event dict with the energy lost and
        the lecture's prediction ½q̇⁻ᵀAᵀ(AM⁻¹Aᵀ)⁻¹Aq̇⁻)."""
        system = self.system
        entry: dict = {"t": t, "constraint": name, "active": bool(active)}
        if system.constraint(name).active == bool(active):
            entry["changed"] = False
            return q, qdot, entry
        system.set_active(name, bool(active))
        entry["changed"] = True
        if not active:
            return q, qdot, entry
        if self.method == "projection":
            q, A, it, _ = self.correct_position(q)
            entry["nr_iters"] = it
        else:  # the KKT baseline has no position correction
            _, A = self.rows(q)
        M = self.mass(q)
        rd = A @ qdot
        if A.shape[0] == 0 or float(np.linalg.norm(rd)) <= impact_tol:
            entry.update(impact=False, energy_loss=0.0)
            return q, qdot, entry
        vp, impulse, r = m_projection(M, A, qdot, self.rtol, self.atol)
        k_minus = 0.5 * float(qdot @ M @ qdot)
        k_plus = 0.5 * float(vp @ M @ vp)
        entry.update(impact=True, q=q.copy(), qdot_minus=qdot.copy(), qdot_plus=vp.copy(), approach_velocity=rd,
                     impulse=impulse, energy_loss=k_minus - k_plus,
                     energy_loss_predicted=predicted_energy_loss(M, A, qdot), kinetic_before=k_minus,
                     kinetic_after=k_plus, A_qdot_after=float(np.linalg.norm(A @ vp)), rank=r)
        return q, vp, entry

    def potential(self, q: np.ndarray) -> float:
        """Gravitational potential energy (pin.computePotentialEnergy)."""
        return float(pin.computePotentialEnergy(self.system.model, self.system.data, q))


__all__ = ["Stepper", "Accel", "METHODS", "INTEGRATORS"]
