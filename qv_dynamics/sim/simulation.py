"""``simulate``: run a :class:`~qv_dynamics.sim.stepper.Stepper` over a time span with a controller and a
contact schedule (paper `aghili-projection-operator`, section 6; SPEC §4 "Simulator contract").

Contact switching (:mod:`qv_dynamics.sim.events`): timed switches fire at the first step at or after their
time; a float guard's crossing is located by regula falsi re-stepping inside the step. When a constraint
becomes active with approach velocity Aq̇⁻ ≠ 0 the impulse map q̇⁺ = N_c q̇⁻ is applied and the kinetic energy
lost is recorded next to the lecture's prediction ½q̇⁻ᵀAᵀ(AM⁻¹Aᵀ)⁻¹Aq̇⁻.

Energy: E = ½q̇ᵀMq̇ + V(q); ``work`` = ∫τᵀq̇dt and ``impact_loss`` = cumulative kinetic energy removed by
impulses, so ``energy_drift_rel`` = max ‖E − E₀ − W + L‖ / max(‖E₀‖, max K) measures pure numerical drift
even for actuated runs with impacts. Sign convention (SPEC): M q̈ + h = τ − Aᵀλ.
"""
from __future__ import annotations

import math
import time
from typing import Sequence

import numpy as np
import pinocchio as pin

from ..errors import QVError, as_vector
from ..model import ConstrainedSystem
from ..state import Reference, State
from .events import SwitchEvent, UserCallableError, parse_schedule
from .stepper import METHODS, Stepper
from .trajectory import Trajectory, TrajectoryRecorder


def torque_source(system: ConstrainedSystem, controller_or_tau, reference):
    """(tau(t, q, q̇, λ_meas) -> raw torque, is_controller) for a controller, a callable, an array or None."""
    if controller_or_tau is None:
        zero = np.zeros(system.nv)
        return (lambda t, q, v, lam: zero), False
    if hasattr(controller_or_tau, "compute"):
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


class RunStats:
    """Running maxima of the section-6 diagnostics and the energy balance E − E₀ − W + L."""

    def __init__(self):
        self.max_phi = self.max_phi_pre = self.max_verr = self.max_drift = self.max_K = 0.0
        self.max_nr = 0
        self.rank_min: int | None = None
        self.rank_max: int | None = None
        self.work = 0.0   # ∫τᵀq̇dt so far
        self.loss = 0.0   # kinetic energy removed by impulses so far

    def rank(self, r: int) -> None:
        self.rank_min = r if self.rank_min is None else min(self.rank_min, r)
        self.rank_max = r if self.rank_max is None else max(self.rank_max, r)

    def after_step(self, st: Stepper, drift: float) -> None:
        # comparisons instead of max() (every step); as with max(running, x), a NaN x leaves the maximum
        if st.kinetic > self.max_K:
            self.max_K = st.kinetic
        if abs(drift) > self.max_drift:
            self.max_drift = abs(drift)
        if st.phi_norm > self.max_phi:
            self.max_phi = st.phi_norm
        if st.phi_pre > self.max_phi_pre:
            self.max_phi_pre = st.phi_pre
        if st.velocity_error > self.max_verr:
            self.max_verr = st.velocity_error
        if st.nr_iters > self.max_nr:
            self.max_nr = st.nr_iters


class Simulation:
    """One run of :func:`simulate`: the stepper, the torque source, the schedule and the recorder."""

    def __init__(self, system: ConstrainedSystem, q0, qdot0, controller_or_tau, t_final: float, dt: float,
                 reference, schedule, record_every: int, measure_lambda: bool, hold_torque: bool | None,
                 impact_tol: float, stepper: Stepper):
        self.system, self.st = system, stepper
        self.dt, self.t_final = dt, t_final
        self.method = stepper.method
        self.q = system.check_q(q0).copy()
        self.qdot = as_vector("qdot0", qdot0, system.nv).copy()
        self.raw_tau, is_ctrl = torque_source(system, controller_or_tau, reference)
        self.hold = (is_ctrl or not callable(controller_or_tau)) if hold_torque is None else bool(hold_torque)
        self.measure_lambda, self.impact_tol = measure_lambda, impact_tol
        self.events: list[SwitchEvent] = parse_schedule(system, schedule)
        self.labels_all = [lab for c in system.constraints for lab in c.row_labels]
        self.offsets, off = {}, 0
        for c in system.constraints:
            self.offsets[c.name] = off
            off += c.size
        self.n_lam = off
        self.steps = int(round(t_final / dt))
        self.rec = TrajectoryRecorder(self.steps, record_every,
                                      {"q": system.nq, "qdot": system.nv, "tau": system.nv, "lam": off})
        self.log_events: list[dict] = []
        self.lam_meas: np.ndarray | None = None
        self.lam_dict: dict = {}
        self.stats = RunStats()
        self.E0 = 0.0
        self.init_corr = 0.0
        self._cols_plan, self._cols = None, np.zeros(0, int)

    # ------------------------------------------------------------------ inputs
    def torque(self, t: float, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The controller's torque at (t, q, q̇); errors are re-raised with the time they happened at."""
        try:
            tau = self.raw_tau(t, q, v, self.lam_meas if self.measure_lambda else None)
        except QVError as exc:
            raise type(exc)(f"controller/torque at t = {t:.6g} s: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - a user callable failed: report it, keep the data
            raise UserCallableError(f"controller/torque raised {type(exc).__name__} at t = {t:.6g} s: {exc}") from exc
        try:
            return as_vector("tau", tau, self.system.nv)
        except QVError as exc:
            raise type(exc)(f"torque at t = {t:.6g} s: {exc}") from None

    def do_step(self, t: float, q, v, h: float, tau_hold=None):
        """One step; the held torque of this tick may be passed in so that event re-steps do not call the
        controller again (a controller is called exactly once per tick: its integrators stay right)."""
        if tau_hold is None or not self.hold:
            tau_hold = self.torque(t, q, v)
        qn, vn = self.st.step(q, v, tau_hold if self.hold else self.torque, h, t)
        return qn, vn, tau_hold

    def lam_row(self, lam: np.ndarray) -> np.ndarray:
        """λ of the active rows spread over the columns of every constraint (NaN for inactive ones)."""
        plan = self.system.constraint_plan()
        if plan is not self._cols_plan:  # the columns change only with the active set
            cols = [np.arange(self.offsets[c.name], self.offsets[c.name] + c.size)
                    for c in self.system.constraints if c.active]
            self._cols = np.concatenate(cols) if cols else np.zeros(0, int)
            self._cols_plan = plan
        cols = self._cols
        if cols.size == self.n_lam and lam.size == cols.size:  # every constraint active: cols = 0 … n−1
            return lam
        row = np.full(self.n_lam, np.nan)
        if cols.size and lam.size == cols.size:
            row[cols] = lam
        return row

    # ------------------------------------------------------------------ switching
    def switch(self, name: str, active: bool, t: float, q, v, reason: str):
        """Apply one switch through Stepper.switch (impulse map on activation); log it."""
        q, v, entry = self.st.switch(name, active, q, v, t, self.impact_tol)
        if not entry.pop("changed"):
            return q, v
        for ev in self.events:  # a guard on this constraint must see a fresh crossing before it fires again
            if ev.name == name:
                ev.armed, ev.last_value = False, None
        entry["reason"] = reason
        if entry.get("impact"):
            self.stats.loss += entry["energy_loss"]
        self.log_events.append(entry)
        return q, v

    def apply_due(self, t: float, q, v, eps: float = 1e-12):
        if not self.events:
            return q, v
        for ev in self.events:
            if ev.kind == "time" and not ev.done and ev.t <= t + eps * max(1.0, abs(t)):
                ev.done = True
                q, v = self.switch(ev.name, ev.active, t, q, v, f"time {ev.t:g}")
        return q, v

    def fired_guard(self, t_next: float, qn, vn):
        """(event, value) of the first armed guard hit at the end of the step, None if none; re-arms the rest."""
        fired = None
        for ev in self.events:
            if ev.kind == "guard" and not ev.done and self.system.constraint(ev.name).active != ev.active:
                val, hit = ev.value(t_next, qn, vn, self.lam_dict)
                if hit and ev.armed and fired is None:
                    fired = (ev, val)
                elif not hit:
                    ev.last_value, ev.armed = val, True
        return fired

    def locate(self, ev: SwitchEvent, val, t: float, q_prev, v_prev, tau):
        """Regula falsi on the step fraction s where the guard crosses zero: (s, q, q̇, work) at t + s dt."""
        s_frac, qs, vs, work = 1.0, None, None, None
        if val is not None and ev.last_value is not None and ev.last_value > 0:
            lo, hi, g_lo, g_hi = 0.0, 1.0, ev.last_value, val
            for _ in range(8):
                s_frac = lo + (hi - lo) * g_lo / (g_lo - g_hi)
                qs, vs, _tau = self.do_step(t, q_prev, v_prev, s_frac * self.dt, tau)
                gs, _ = ev.value(t + s_frac * self.dt, qs, vs, self.lam_dict)
                if abs(gs) <= 1e-12 or hi - lo < 1e-9:
                    break
                if gs > 0:
                    lo, g_lo = s_frac, gs
                else:
                    hi, g_hi = s_frac, gs
            work = self.st.work_increment
        return s_frac, qs, vs, work

    def switch_at_guard(self, fired, t: float, q_prev, v_prev, qn, vn, tau, work):
        """Locate the crossing, switch there, and finish the step; returns (q, q̇, work of the rest)."""
        ev, val = fired
        s_frac, qs, vs, w = self.locate(ev, val, t, q_prev, v_prev, tau)
        if qs is not None:
            qn, vn, work = qs, vs, w
        te = t + s_frac * self.dt
        ev.last_value = None
        self.stats.work += work
        qn, vn = self.switch(ev.name, ev.active, te, qn, vn, "guard")
        if s_frac < 1.0 - 1e-12:
            qn, vn, _ = self.do_step(te, qn, vn, (1.0 - s_frac) * self.dt, tau)
            return qn, vn, self.st.work_increment
        if self.method == "projection":
            qn, vn = self.st.correct(qn, vn)  # refresh the diagnostics at the switched state
        return qn, vn, 0.0

    # ------------------------------------------------------------------ the run
    def start(self) -> None:
        """Due switches at t = 0, the initial consistency correction, guard arming, E₀."""
        st = self.st
        q, qdot = self.apply_due(0.0, self.q, self.qdot)
        if self.method == "projection":  # q0 may be approximate: section 6 iii applied once to it
            q0c = q.copy()
            q, qdot = st.correct(q, qdot)
            self.init_corr = float(np.linalg.norm(pin.difference(self.system.model, q0c, q)))
        else:
            st.diagnose(q, qdot)
        for ev in self.events:
            if ev.kind == "guard":
                ev.last_value, hit0 = ev.value(0.0, q, qdot, self.lam_dict)
                ev.armed = not hit0  # edge-triggered: a guard already true at t = 0 does not fire
        self.E0 = st.kinetic + st.potential(q)
        self.q, self.qdot = q, qdot
        self.diagnose(0, q)
        self.rec.state(0, 0.0, q, qdot)

    def diagnose(self, i: int, q: np.ndarray) -> None:
        st, s = self.st, self.stats
        V = st.potential(q)
        E = st.kinetic + V
        s.after_step(st, E - self.E0 - s.work + s.loss)
        self.rec.scalars_at(i, phi_norm=st.phi_norm, phi_pre=st.phi_pre, velocity_error=st.velocity_error,
                            nr_iters=st.nr_iters, energy=E, kinetic=st.kinetic, potential=V, work=s.work,
                            impact_loss=s.loss)

    def tick(self, i: int) -> float:
        """Step i: [t_i, t_i + dt] with the torque held, guards located, switches applied; returns t_{i+1}."""
        t, t_next = i * self.dt, (i + 1) * self.dt
        q, qdot = self.apply_due(t, self.q, self.qdot)
        qn, vn, tau = self.do_step(t, q, qdot, self.dt)
        a1 = self.st.last
        # row i: state at t_i with the torque applied over [t_i, t_i+dt] and λ at t_i
        self.rec.inputs(i, tau, self.lam_row(a1.lam), a1.rank)
        self.stats.rank(a1.rank)
        self.lam_meas = a1.lam.copy()
        work = self.st.work_increment
        if self.events:  # guards read λ by row label
            qn, vn, work = self.guards(t, t_next, q, qdot, qn, vn, tau, work)
        self.stats.work += work
        self.q, self.qdot = qn, vn
        self.rec.state(i + 1, t_next, qn, vn)
        self.diagnose(i + 1, qn)
        return t_next

    def guards(self, t: float, t_next: float, q, qdot, qn, vn, tau, work: float):
        """Float guards (located inside the step) and multi-switch guards at the end of step [t, t_next]."""
        labels = self.system.row_labels
        lam = self.st.last.lam
        self.lam_dict = dict(zip(labels, lam.tolist())) if len(labels) == lam.size else {}
        fired = self.fired_guard(t_next, qn, vn)
        if fired is not None:
            qn, vn, work = self.switch_at_guard(fired, t, q, qdot, qn, vn, tau, work)
        for ev in self.events:  # multi-switch guards
            if ev.kind == "multi":
                for name, act in ev.call(t_next, qn, vn, self.lam_dict) or []:
                    qn, vn = self.switch(name, bool(act), t_next, qn, vn, "guard")
        return qn, vn, work

    def finish(self, t: float) -> None:
        """λ and τ of the final state (so every recorded row is complete)."""
        if self.steps % self.rec.every == 0:
            tau_end = self.torque(t, self.q, self.qdot)
            a_end = self.st.accel(self.q, self.qdot, tau_end)
            self.rec.inputs(self.steps, tau_end, self.lam_row(a_end.lam), a_end.rank)

    def run(self) -> Trajectory:
        ok, error, t = True, None, 0.0
        t0_wall = time.perf_counter()
        old_err = np.seterr(over="ignore", invalid="ignore")  # a blow-up is detected and reported explicitly
        try:
            self.start()
            for i in range(self.steps):
                t = self.tick(i)
            self.finish(t)
        except (QVError, np.linalg.LinAlgError, FloatingPointError) as exc:
            ok, error = False, f"stopped at t = {t:.6g} s: {exc}"
        finally:
            np.seterr(**old_err)
        arrays = self.rec.arrays()
        stats = self.summary(arrays, time.perf_counter() - t0_wall, ok, error)
        return Trajectory(**arrays, lam_labels=self.labels_all, events=self.log_events, stats=stats, ok=ok,
                          error=error)

    def summary(self, arrays: dict, wall: float, ok: bool, error: str | None) -> dict:
        s, st, k = self.stats, self.st, self.rec.k
        sim_time = float(arrays["t"][-1]) if k else 0.0
        E_scale = max(abs(arrays["energy"][0]) if k else 0.0, s.max_K, 1e-300)
        stats = {
            "max_constraint_error": s.max_phi, "max_constraint_error_before_correction": s.max_phi_pre,
            "max_velocity_constraint_error": s.max_verr, "energy_drift_rel": s.max_drift / E_scale,
            "energy_drift_abs": s.max_drift, "energy_scale": E_scale, "wall_time_s": wall,
            "steps": int(round(sim_time / self.dt)), "sim_time_s": sim_time,
            "wall_time_per_sim_s": wall / sim_time if sim_time > 0 else None,
            "real_time_factor": sim_time / wall if wall > 0 else None,
            "max_nr_iterations": s.max_nr, "rank_min": s.rank_min, "rank_max": s.rank_max,
            "impacts": sum(1 for e in self.log_events if e.get("impact")), "impact_energy_loss": s.loss,
            "work_by_torque": s.work, "method": self.method, "integrator": st.integrator, "dt": self.dt,
            "t_final": self.t_final,
            "velocity_projection": st.velocity_projection if self.method == "projection" else None,
            "baumgarte": [st.alpha, st.beta] if self.method == "kkt_baumgarte" else None,
            "nr_tol": st.nr_tol, "ok": ok, "error": error,
        }
        if self.method == "projection" and k:
            stats["initial_correction"] = self.init_corr
        return stats


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
    Bad input (NaN torque, a guard that raises, NR not converging, a blow-up) stops the run: the Trajectory
    keeps everything computed so far, ``ok`` is False and ``error`` says what happened.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}")
    dt = float(dt)
    t_final = float(t_final)
    if not (dt > 0 and math.isfinite(dt)) or not (t_final >= 0 and math.isfinite(t_final)):
        raise QVError(f"need dt > 0 and t_final >= 0 (got dt={dt}, t_final={t_final})")
    if t_final > 0 and round(t_final / dt) < 1:
        raise QVError(f"dt = {dt:g} s is longer than t_final = {t_final:g} s: the run would take no step")
    st = stepper or Stepper(system, method, integrator, nr_tol, nr_max_iter, baumgarte, velocity_projection)
    run = Simulation(system, q0, qdot0, controller_or_tau, t_final, dt, reference, schedule,
                     max(1, int(record_every)), measure_lambda, hold_torque, impact_tol, st)
    return run.run()
