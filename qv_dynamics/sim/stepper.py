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

Contact switching: ``schedule`` entries are ``(t, name, active)`` or ``(guard, name, active)`` with
``guard(t, q, qdot) -> float | bool`` (edge-triggered: fires when the float crosses from > 0 to ≤ 0 —
the crossing is located by regula falsi re-stepping — or when the bool turns True, and only while the
constraint is not yet in the requested state), or a bare callable
``guard(t, q, qdot) -> [(name, active), ...]``. Guards may take a 4th argument, the dict
``{row_label: λ}`` of the last step (e.g. to release a contact that pulls). When a constraint becomes
active with approach velocity Aq̇⁻ ≠ 0 the impulse map q̇⁺ = N_c q̇⁻ is applied and the kinetic
energy lost is recorded next to the lecture's prediction ½q̇⁻ᵀAᵀ(AM⁻¹Aᵀ)⁻¹Aq̇⁻.

Sign convention (SPEC): M q̈ + h = τ − Aᵀλ.
"""
from __future__ import annotations

import inspect
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pinocchio as pin

from ..errors import ConvergenceError, DimensionError, NonFiniteError, QVError, as_vector
from ..impact import m_projection, predicted_energy_loss
from ..jsonutil import jsonable as _jsonable
from ..model import ConstrainedSystem
from ..projection import direct_dynamics_rank, pinv_basis

RTOL = 1e-9
ATOL = 1e-9


_BLAS_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                 "scipy_openblas_set_num_threads64_")


def limit_blas_threads(n: int = 1) -> int:
    """Set the thread count of every OpenBLAS loaded in this process (numpy's and scipy's); returns how many
    libraries were set. The simulator works on matrices of size ≤ ~30, where BLAS threads only add wake-up
    latency; on a loaded 2-core machine they made a 1 kHz step ~10× slower (measured: 0.34 → 4 s per
    simulated second for the Panda point contact). Linux only (reads /proc/self/maps); a no-op elsewhere.
    Setting ``OPENBLAS_NUM_THREADS=1`` in the environment before numpy is imported has the same effect."""
    import ctypes

    done = 0
    try:
        with open("/proc/self/maps") as fh:
            paths = {ln.split()[-1] for ln in fh if "openblas" in ln.lower() and ".so" in ln}
    except OSError:
        return 0
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in _BLAS_SETTERS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn(ctypes.c_int(int(n)))
                done += 1
                break
    return done


METHODS = ("projection", "kkt_baumgarte")
INTEGRATORS = ("rk4", "semi_implicit_euler", "scipy")


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


class Stepper:
    """Reusable single-step integrator for a :class:`ConstrainedSystem` (the ROS sim node calls it every tick).

    ``step(q, qdot, tau, dt) -> (q, qdot)`` integrates one step and applies the section-6 correction;
    afterwards ``last`` holds the :class:`Accel` at the start of the step (λ, rank) and ``nr_iters``,
    ``phi_pre`` (‖Φ‖ before the correction), ``phi_norm`` (after), ``velocity_error`` (‖Aq̇‖ after),
    ``kinetic`` (½q̇ᵀMq̇ at the new state) and ``work_increment`` (τᵀ∫q̇dt over the step).
    ``blas_threads=1`` (default) limits OpenBLAS to one thread process-wide (see :func:`limit_blas_threads`);
    pass None to leave it alone.
    """

    def __init__(self, system: ConstrainedSystem, method: str = "projection", integrator: str = "rk4",
                 nr_tol: float = 1e-12, nr_max_iter: int = 20, baumgarte: tuple[float, float] = (20.0, 20.0),
                 velocity_projection: str = "M", rtol: float = RTOL, atol: float = ATOL,
                 scipy_method: str = "DOP853", scipy_rtol: float = 1e-10, scipy_atol: float = 1e-12,
                 blas_threads: int | None = 1):
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
        if integrator not in INTEGRATORS:
            raise ValueError(f"unknown integrator {integrator!r}; choose one of {INTEGRATORS}")
        if velocity_projection not in ("M", "P"):
            raise ValueError("velocity_projection must be 'M' (kinetic metric, N_c) or 'P' (Euclidean, I − A⁺A)")
        if integrator == "scipy" and system.floating_base:
            raise DimensionError("integrator='scipy' needs a fixed base (nq == nv); use rk4 for a floating base")
        if blas_threads is not None:
            limit_blas_threads(blas_threads)
        self.system = system
        self.method = method
        self.integrator = integrator
        self.nr_tol = float(nr_tol)
        self.nr_max_iter = int(nr_max_iter)
        self.alpha, self.beta = (float(b) for b in baumgarte)
        self.velocity_projection = velocity_projection
        self.rtol, self.atol = float(rtol), float(atol)
        self.scipy_method, self.scipy_rtol, self.scipy_atol = scipy_method, scipy_rtol, scipy_atol
        self.n, self.nq = system.nv, system.nq
        self._fixed = not system.floating_base
        self.last: Accel | None = None
        self.nr_iters = 0
        self.phi_pre = 0.0
        self.phi_norm = 0.0
        self.velocity_error = 0.0
        self.kinetic = 0.0
        self.work_increment = 0.0
        self.M_end: np.ndarray | None = None
        self._phi_first = 0.0

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
        try:
            t = self.system.evaluate(q, qdot, coriolis=False)
        except NonFiniteError:
            raise NonFiniteError("state became non-finite (the integration blew up)") from None
        phi = t.phi
        pn = float(np.linalg.norm(phi)) if phi.size else 0.0
        if self.method == "projection":
            qdd, F, lam, r = direct_dynamics_rank(t, tau, "projection", rtol=self.rtol, atol=self.atol)
        else:
            t.Adot_qdot = t.Adot_qdot + 2.0 * self.alpha * (t.A @ t.qdot) + self.beta ** 2 * phi
            qdd, F, lam, r = direct_dynamics_rank(t, tau, "kkt", rtol=self.rtol, atol=self.atol)
        return Accel(qdd, lam, F, r, t.M, pn)

    # ------------------------------------------------------------------ integration
    def _advance(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        return q + dq if self._fixed else pin.integrate(self.system.model, q, dq)

    def integrate(self, q: np.ndarray, qdot: np.ndarray, tau_fn: Callable[[float, np.ndarray, np.ndarray], np.ndarray],
                  dt: float, t: float = 0.0):
        """One integrator step without correction: returns (q, q̇, Accel at the start, ∫q̇dt in tangent space,
        ∫τᵀq̇dt)."""
        tau0 = tau_fn(t, q, qdot)
        a1 = self.accel(q, qdot, tau0)
        if self.integrator == "semi_implicit_euler":
            v1 = qdot + dt * a1.qdd
            disp = dt * v1
            return self._advance(q, disp), v1, a1, disp, float(tau0 @ disp)
        if self.integrator == "rk4":
            h2 = 0.5 * dt
            k1v, k1a = qdot, a1.qdd
            q2, v2 = self._advance(q, h2 * k1v), qdot + h2 * k1a
            tau2 = tau_fn(t + h2, q2, v2)
            k2a = self.accel(q2, v2, tau2).qdd
            q3, v3 = self._advance(q, h2 * v2), qdot + h2 * k2a
            tau3 = tau_fn(t + h2, q3, v3)
            k3a = self.accel(q3, v3, tau3).qdd
            q4, v4 = self._advance(q, dt * v3), qdot + dt * k3a
            tau4 = tau_fn(t + dt, q4, v4)
            k4a = self.accel(q4, v4, tau4).qdd
            disp = (dt / 6.0) * (k1v + 2.0 * v2 + 2.0 * v3 + v4)
            work = (dt / 6.0) * (tau0 @ k1v + 2.0 * tau2 @ v2 + 2.0 * tau3 @ v3 + tau4 @ v4)
            return self._advance(q, disp), qdot + (dt / 6.0) * (k1a + 2.0 * k2a + 2.0 * k3a + k4a), a1, disp, float(work)
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
        phi, A = self.rows(q)
        nrm = float(np.linalg.norm(phi)) if phi.size else 0.0
        self._phi_first = nrm
        it = 0
        while nrm > self.nr_tol:
            if it >= self.nr_max_iter:
                raise ConvergenceError(
                    f"Newton–Raphson position correction did not converge: ‖Φ‖ = {nrm:.3e} > nr_tol = "
                    f"{self.nr_tol:.1e} after {it} iterations (step too large, or the constraints cannot be met)")
            Apinv, _, r = pinv_basis(A, self.rtol, self.atol)
            if r == 0:
                raise ConvergenceError(f"Newton–Raphson: A has rank 0 at ‖Φ‖ = {nrm:.3e}; cannot correct")
            q = self._advance(q, -(Apinv @ phi))
            phi, A = self.rows(q)
            nrm = float(np.linalg.norm(phi))
            if not math.isfinite(nrm):
                raise ConvergenceError("Newton–Raphson position correction diverged (non-finite Φ)")
            it += 1
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
            return qdot - Apinv @ (A @ qdot)
        M = self.mass(q) if M is None else M
        return m_projection(M, A, qdot, self.rtol, self.atol)[0]

    def correct(self, q: np.ndarray, qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Section 6 step iii: position NR (eq. 39) then velocity projection; fills the diagnostics."""
        q, A, self.nr_iters, self.phi_norm = self.correct_position(q)
        self.phi_pre = self._phi_first
        M = self.mass(q)
        qdot = self.project_velocity(q, qdot, A, M)
        self.velocity_error = float(np.linalg.norm(A @ qdot)) if A.shape[0] else 0.0
        self.kinetic = 0.5 * float(qdot @ M @ qdot)
        self.M_end = M
        return q, qdot

    def step(self, q, qdot, tau, dt: float, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """One step: integrate with τ (an array held over the step, or a callable tau(t, q, q̇)), then the
        section-6 correction (projection method) or just diagnostics (KKT + Baumgarte)."""
        q = np.asarray(q, float)
        qdot = np.asarray(qdot, float)
        if callable(tau):
            fn = tau
        else:
            tau_arr = as_vector("tau", tau, self.n)
            fn = lambda _t, _q, _v: tau_arr  # noqa: E731
        qn, vn, a1, _, work = self.integrate(q, qdot, fn, dt, t)
        self.last = a1
        self.work_increment = work
        if not (np.all(np.isfinite(qn)) and np.all(np.isfinite(vn))):
            raise NonFiniteError(f"state became non-finite at t = {t + dt:.6g} s (integration blew up)")
        if self.method == "projection":
            return self.correct(qn, vn)
        self.diagnose(qn, vn)
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


# ============================================================================ trajectory
@dataclass
class Trajectory:
    """Recorded run. Arrays have one row per recorded sample; ``lam`` has one column per row of every
    constraint of the system (``lam_labels``), NaN while that constraint is inactive."""

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    phi_norm: np.ndarray
    phi_pre: np.ndarray
    velocity_error: np.ndarray
    energy: np.ndarray
    kinetic: np.ndarray
    potential: np.ndarray
    work: np.ndarray
    impact_loss: np.ndarray
    rank: np.ndarray
    nr_iters: np.ndarray
    lam_labels: list
    events: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    ok: bool = True
    error: str | None = None

    ARRAYS = ("t", "q", "qdot", "tau", "lam", "phi_norm", "phi_pre", "velocity_error", "energy", "kinetic",
              "potential", "work", "impact_loss", "rank", "nr_iters")

    def save(self, directory, name: str = "trajectory") -> Path:
        """Write ``<name>.npz`` (arrays, labels, events as JSON) and ``summary.json`` (stats, ok, error)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        arrays = {k: getattr(self, k) for k in self.ARRAYS}
        np.savez_compressed(d / f"{name}.npz", lam_labels=np.array(self.lam_labels, dtype=str),
                            events=np.array(json.dumps(_jsonable(self.events))), **arrays)
        summary = dict(_jsonable(self.stats))
        summary.update(ok=self.ok, error=self.error, events=_jsonable(self.events))
        (d / "summary.json").write_text(json.dumps(summary, indent=2))
        return d


# ============================================================================ schedule
@dataclass
class _Event:
    kind: str                      # "time" | "guard" | "multi"
    name: str | None
    active: bool | None
    t: float = math.inf
    fn: Callable | None = None
    nargs: int = 3
    done: bool = False
    last_value: float | None = None
    armed: bool = False


def _parse_schedule(system: ConstrainedSystem, schedule) -> list[_Event]:
    events: list[_Event] = []
    for i, item in enumerate(schedule or []):
        if callable(item):
            events.append(_Event("multi", None, None, fn=item, nargs=_nargs(item)))
            continue
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise DimensionError(f"schedule[{i}]: expected (t | guard, constraint_name, active) or a callable")
        when, name, active = item
        system.constraint(name)  # UnknownNameError early
        if callable(when):
            events.append(_Event("guard", name, bool(active), fn=when, nargs=_nargs(when)))
        else:
            tt = float(when)
            if not math.isfinite(tt):
                raise NonFiniteError(f"schedule[{i}]: switching time must be finite")
            events.append(_Event("time", name, bool(active), t=tt))
    return events


def _nargs(fn: Callable) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 4
    return 4 if len([p for p in params if p.default is p.empty]) >= 4 else 3


# ============================================================================ simulate
def _torque_source(system: ConstrainedSystem, controller_or_tau, reference):
    """Normalize the input to tau(t, q, q̇, λ_meas) -> raw torque."""
    n = system.nv
    if controller_or_tau is None:
        zero = np.zeros(n)
        return (lambda t, q, v, lam: zero), False
    if hasattr(controller_or_tau, "compute"):
        from ..state import Reference, State

        ctrl = controller_or_tau

        def ref_at(t):
            if reference is None:
                return Reference()
            return reference(t) if callable(reference) else reference

        return (lambda t, q, v, lam: ctrl.compute(State(t, q.copy(), v.copy(), lam), ref_at(t))), True
    if callable(controller_or_tau):
        fn = controller_or_tau
        return (lambda t, q, v, lam: fn(t, q, v)), False
    arr = controller_or_tau  # validated (size, finiteness) inside the run, so a bad array stops it cleanly
    return (lambda t, q, v, lam: arr), False


def simulate(system: ConstrainedSystem, q0, qdot0, controller_or_tau=None, t_final: float = 1.0,
             dt: float = 1e-3, method: str = "projection", integrator: str = "rk4", reference=None,
             schedule: Sequence | None = None, nr_tol: float = 1e-12, nr_max_iter: int = 20,
             baumgarte: tuple[float, float] = (20.0, 20.0), record_every: int = 1, measure_lambda: bool = True,
             velocity_projection: str = "M", hold_torque: bool | None = None,
             impact_tol: float = 1e-12, stepper: Stepper | None = None) -> Trajectory:
    """Simulate a constrained system (section 6 of the projection-operator paper). See the module docstring.

    ``controller_or_tau``: object with ``compute(State, Reference)`` (λ of the previous step is passed as
    ``State.lambda_meas`` when ``measure_lambda``), a callable ``tau(t, q, q̇)``, a fixed array, or None.
    The torque is held over each step (``hold_torque=True``, the default for controllers and arrays); a plain
    callable is evaluated at every integrator stage unless ``hold_torque=True``.
    Energy: E = ½q̇ᵀMq̇ + V(q); ``work`` = ∫τᵀq̇dt and ``impact_loss`` = cumulative kinetic energy removed by
    impulses, so ``energy_drift_rel`` = max|E − E₀ − W + L| / max(|E₀|, max K) measures pure numerical drift
    even for actuated runs with impacts.
    Bad input (NaN torque, a guard that raises, NR not converging, a blow-up) stops the run: the Trajectory
    keeps everything computed so far, ``ok`` is False and ``error`` says what happened.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    dt = float(dt)
    t_final = float(t_final)
    if not (dt > 0 and math.isfinite(dt)) or not (t_final >= 0 and math.isfinite(t_final)):
        raise ValueError(f"need dt > 0 and t_final >= 0 (got dt={dt}, t_final={t_final})")
    record_every = max(1, int(record_every))
    n, nq = system.nv, system.nq
    q = system.check_q(q0).copy()
    qdot = as_vector("qdot0", qdot0, n).copy()
    st = stepper or Stepper(system, method, integrator, nr_tol, nr_max_iter, baumgarte, velocity_projection)
    raw_tau, is_ctrl = _torque_source(system, controller_or_tau, reference)
    hold = (is_ctrl or not callable(controller_or_tau)) if hold_torque is None else bool(hold_torque)
    events = _parse_schedule(system, schedule)
    labels_all = [lab for c in system.constraints for lab in c.row_labels]
    offsets, off = {}, 0
    for c in system.constraints:
        offsets[c.name] = off
        off += c.size
    n_lam = off
    steps = int(round(t_final / dt))
    n_rec = steps // record_every + 1

    rec = {k: np.full((n_rec, w), np.nan) for k, w in
           (("q", nq), ("qdot", n), ("tau", n), ("lam", n_lam))}
    rec1 = {k: np.full(n_rec, np.nan) for k in
            ("t", "phi_norm", "phi_pre", "velocity_error", "energy", "kinetic", "potential", "work", "impact_loss",
             "rank", "nr_iters")}
    log_events: list[dict] = []
    state = {"lam_meas": None, "lam_dict": {}, "work": 0.0, "loss": 0.0, "k": 0}
    ok, error = True, None
    stats_acc = {"max_phi": 0.0, "max_phi_pre": 0.0, "max_verr": 0.0, "max_nr": 0, "rank_min": None,
                 "rank_max": None, "max_drift": 0.0, "max_K": 0.0}

    def active_cols() -> np.ndarray:
        cols = [np.arange(offsets[c.name], offsets[c.name] + c.size) for c in system.constraints if c.active]
        return np.concatenate(cols) if cols else np.zeros(0, int)

    def torque(t, qq, vv):
        try:
            tau = raw_tau(t, qq, vv, state["lam_meas"] if measure_lambda else None)
        except QVError as exc:
            raise type(exc)(f"controller/torque at t = {t:.6g} s: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a user callable failed: report it, keep the data
            raise _UserError(f"controller/torque raised {type(exc).__name__} at t = {t:.6g} s: {exc}") from exc
        try:
            return as_vector("tau", tau, n)
        except QVError as exc:
            raise type(exc)(f"torque at t = {t:.6g} s: {exc}") from None

    def call_guard(ev: _Event, t, qq, vv):
        try:
            args = (t, qq.copy(), vv.copy()) + ((dict(state["lam_dict"]),) if ev.nargs == 4 else ())
            return ev.fn(*args)
        except Exception as exc:  # noqa: BLE001
            who = f"guard for '{ev.name}'" if ev.name else "guard"
            raise _UserError(f"{who} raised {type(exc).__name__} at t = {t:.6g} s: {exc}") from exc

    def guard_value(ev: _Event, t, qq, vv):
        val = call_guard(ev, t, qq, vv)
        if isinstance(val, (bool, np.bool_)):
            return None, bool(val)
        try:
            f = float(val)
        except (TypeError, ValueError):
            raise _UserError(f"guard for '{ev.name}' returned {val!r}; expected a float or a bool") from None
        if not math.isfinite(f):
            raise NonFiniteError(f"guard for '{ev.name}' returned {f} at t = {t:.6g} s")
        return f, f <= 0.0

    def switch(name: str, active: bool, t: float, qq, vv, reason: str):
        """Apply one switch through Stepper.switch (impulse map on activation); log it."""
        qq, vv, entry = st.switch(name, active, qq, vv, t, impact_tol)
        if not entry.pop("changed"):
            return qq, vv
        for ev in events:  # a guard on this constraint must see a fresh crossing before it fires again
            if ev.name == name:
                ev.armed, ev.last_value = False, None
        entry["reason"] = reason
        if entry.get("impact"):
            state["loss"] += entry["energy_loss"]
        log_events.append(entry)
        return qq, vv

    def apply_due(t, qq, vv, eps=1e-12):
        for ev in events:
            if ev.kind == "time" and not ev.done and ev.t <= t + eps * max(1.0, abs(t)):
                ev.done = True
                qq, vv = switch(ev.name, ev.active, t, qq, vv, f"time {ev.t:g}")
        return qq, vv

    def do_step(t, qq, vv, h, tau_hold=None):
        """One step; the held torque of this tick may be passed in so that event re-steps do not call the
        controller again (a controller is called exactly once per tick: its integrators stay right)."""
        if tau_hold is None or not hold:
            tau_hold = torque(t, qq, vv)
        fn = (lambda _t, _q, _v: tau_hold) if hold else torque
        qn, vn = st.step(qq, vv, fn, h, t)
        return qn, vn, tau_hold

    def record(i, t, qq, vv, tau, lam_row, rank):
        if i % record_every:
            return
        j = i // record_every
        rec["q"][j], rec["qdot"][j] = qq, vv
        if tau is not None:
            rec["tau"][j] = tau
        if lam_row is not None:
            rec["lam"][j] = lam_row
        rec1["t"][j] = t
        rec1["rank"][j] = rank
        state["k"] = j + 1

    t0_wall = time.perf_counter()
    t = 0.0
    old_err = np.seterr(over="ignore", invalid="ignore")  # a blow-up is detected and reported explicitly
    try:
        q, qdot = apply_due(0.0, q, qdot)
        # initial consistency: q0 may be approximate (section 6 iii applied once to the initial state)
        if method == "projection":
            q0c = q.copy()
            q, qdot = st.correct(q, qdot)
            init_corr = float(np.linalg.norm(pin.difference(system.model, q0c, q)))
        else:
            st.diagnose(q, qdot)
            init_corr = 0.0
        for ev in events:
            if ev.kind == "guard":
                ev.last_value, hit0 = guard_value(ev, 0.0, q, qdot)
                ev.armed = not hit0  # edge-triggered: a guard already true at t = 0 does not fire
        E0 = st.kinetic + st.potential(q)

        def diag(i, qq):
            V = st.potential(qq)
            E = st.kinetic + V
            drift = E - E0 - state["work"] + state["loss"]
            stats_acc["max_K"] = max(stats_acc["max_K"], st.kinetic)
            stats_acc["max_drift"] = max(stats_acc["max_drift"], abs(drift))
            stats_acc["max_phi"] = max(stats_acc["max_phi"], st.phi_norm)
            stats_acc["max_phi_pre"] = max(stats_acc["max_phi_pre"], st.phi_pre)
            stats_acc["max_verr"] = max(stats_acc["max_verr"], st.velocity_error)
            stats_acc["max_nr"] = max(stats_acc["max_nr"], st.nr_iters)
            if i % record_every == 0:
                j = i // record_every
                rec1["phi_norm"][j], rec1["phi_pre"][j] = st.phi_norm, st.phi_pre
                rec1["velocity_error"][j], rec1["nr_iters"][j] = st.velocity_error, st.nr_iters
                rec1["energy"][j], rec1["kinetic"][j], rec1["potential"][j] = E, st.kinetic, V
                rec1["work"][j], rec1["impact_loss"][j] = state["work"], state["loss"]

        diag(0, q)
        rec["q"][0], rec["qdot"][0], rec1["t"][0] = q, qdot, 0.0
        state["k"] = 1
        for i in range(steps):
            t = i * dt
            q, qdot = apply_due(t, q, qdot)
            q_prev, v_prev = q, qdot
            qn, vn, tau = do_step(t, q, qdot, dt)
            a1 = st.last
            cols = active_cols()
            lam_row = np.full(n_lam, np.nan)
            if cols.size and a1.lam.size == cols.size:
                lam_row[cols] = a1.lam
            # row i: state at t_i with the torque applied over [t_i, t_i+dt] and λ at t_i
            if i % record_every == 0:
                j = i // record_every
                rec["tau"][j], rec["lam"][j], rec1["rank"][j] = tau, lam_row, a1.rank
            r_min, r_max = stats_acc["rank_min"], stats_acc["rank_max"]
            stats_acc["rank_min"] = a1.rank if r_min is None else min(r_min, a1.rank)
            stats_acc["rank_max"] = a1.rank if r_max is None else max(r_max, a1.rank)
            state["lam_meas"] = a1.lam.copy()
            labels = system.row_labels
            state["lam_dict"] = dict(zip(labels, a1.lam.tolist())) if len(labels) == a1.lam.size else {}
            work = st.work_increment
            t_next = (i + 1) * dt
            # guards: located by regula falsi re-stepping from (q_prev, v_prev)
            fired = None
            for ev in events:
                if ev.kind == "guard" and not ev.done and system.constraint(ev.name).active != ev.active:
                    val, hit = guard_value(ev, t_next, qn, vn)
                    if hit and ev.armed and fired is None:
                        fired = (ev, val)
                    elif not hit:
                        ev.last_value, ev.armed = val, True
            if fired is not None:
                ev, val = fired
                s_frac = 1.0
                if val is not None and ev.last_value is not None and ev.last_value > 0:
                    lo, hi, g_lo, g_hi = 0.0, 1.0, ev.last_value, val
                    for _ in range(8):
                        s_frac = lo + (hi - lo) * g_lo / (g_lo - g_hi)
                        qs, vs, _tau = do_step(t, q_prev, v_prev, s_frac * dt, tau)
                        gs, _ = guard_value(ev, t + s_frac * dt, qs, vs)
                        if abs(gs) <= 1e-12 or hi - lo < 1e-9:
                            break
                        if gs > 0:
                            lo, g_lo = s_frac, gs
                        else:
                            hi, g_hi = s_frac, gs
                    work = st.work_increment
                    qn, vn = qs, vs
                te = t + s_frac * dt
                ev.last_value = None
                state["work"] += work
                qn, vn = switch(ev.name, ev.active, te, qn, vn, "guard")
                if s_frac < 1.0 - 1e-12:
                    qn, vn, _ = do_step(te, qn, vn, (1.0 - s_frac) * dt, tau)
                    work = st.work_increment
                else:
                    work = 0.0
                    if method == "projection":
                        qn, vn = st.correct(qn, vn)  # refresh the diagnostics at the switched state
            for ev in events:  # multi-switch guards
                if ev.kind == "multi":
                    out = call_guard(ev, t_next, qn, vn) or []
                    for name, act in out:
                        qn, vn = switch(name, bool(act), t_next, qn, vn, "guard")
            state["work"] += work
            q, qdot = qn, vn
            if (i + 1) % record_every == 0:
                j = (i + 1) // record_every
                rec["q"][j], rec["qdot"][j], rec1["t"][j] = q, qdot, t_next
                state["k"] = j + 1
            diag(i + 1, q)
            t = t_next
        # λ and τ of the final state (so every recorded row is complete)
        if steps % record_every == 0:
            tau_end = torque(t, q, qdot)
            a_end = st.accel(q, qdot, tau_end)
            cols = active_cols()
            lam_row = np.full(n_lam, np.nan)
            if cols.size and a_end.lam.size == cols.size:
                lam_row[cols] = a_end.lam
            j = steps // record_every
            rec["tau"][j], rec["lam"][j], rec1["rank"][j] = tau_end, lam_row, a_end.rank
    except (QVError, _UserError, np.linalg.LinAlgError, FloatingPointError) as exc:
        ok = False
        error = f"stopped at t = {t:.6g} s: {exc}"
    finally:
        np.seterr(**old_err)
    wall = time.perf_counter() - t0_wall
    k = state["k"]
    arrays = {key: v[:k] for key, v in rec.items()}
    arrays.update({key: v[:k] for key, v in rec1.items()})
    sim_time = float(arrays["t"][-1]) if k else 0.0
    E_scale = max(abs(arrays["energy"][0]) if k else 0.0, stats_acc["max_K"], 1e-300)
    stats = {
        "max_constraint_error": stats_acc["max_phi"],
        "max_constraint_error_before_correction": stats_acc["max_phi_pre"],
        "max_velocity_constraint_error": stats_acc["max_verr"],
        "energy_drift_rel": stats_acc["max_drift"] / E_scale,
        "energy_drift_abs": stats_acc["max_drift"],
        "energy_scale": E_scale,
        "wall_time_s": wall,
        "steps": int(round(sim_time / dt)),
        "sim_time_s": sim_time,
        "wall_time_per_sim_s": wall / sim_time if sim_time > 0 else None,
        "real_time_factor": sim_time / wall if wall > 0 else None,
        "max_nr_iterations": stats_acc["max_nr"],
        "rank_min": stats_acc["rank_min"],
        "rank_max": stats_acc["rank_max"],
        "impacts": sum(1 for e in log_events if e.get("impact")),
        "impact_energy_loss": state["loss"],
        "work_by_torque": state["work"],
        "method": method,
        "integrator": integrator,
        "dt": dt,
        "t_final": t_final,
        "velocity_projection": velocity_projection if method == "projection" else None,
        "baumgarte": list(baumgarte) if method == "kkt_baumgarte" else None,
        "nr_tol": nr_tol,
        "ok": ok,
        "error": error,
    }
    if method == "projection" and k:
        stats["initial_correction"] = locals().get("init_corr", 0.0)
    return Trajectory(t=arrays["t"], q=arrays["q"], qdot=arrays["qdot"], tau=arrays["tau"], lam=arrays["lam"],
                      phi_norm=arrays["phi_norm"], phi_pre=arrays["phi_pre"],
                      velocity_error=arrays["velocity_error"], energy=arrays["energy"], kinetic=arrays["kinetic"],
                      potential=arrays["potential"], work=arrays["work"], impact_loss=arrays["impact_loss"],
                      rank=arrays["rank"], nr_iters=arrays["nr_iters"], lam_labels=labels_all,
                      events=log_events, stats=stats, ok=ok, error=error)


class _UserError(QVError):
    """A user callable (controller, torque function, guard) raised: the run stops and keeps its data."""


__all__ = ["simulate", "Stepper", "Trajectory", "Accel", "METHODS", "INTEGRATORS"]
