"""The contact task as a state machine: approach, touch down, press and trace, release, lift off.

Phases (``ContactTask.phase``)::

    free ──start/touch_down──▶ approach ──f_n > on──▶ contact ──release time / lift_off──▶ release ──▶ done
                                  │                    │  ▲
                      no touch within window     f_n < off for off_time
                                  ▼                    ▼  │ f_n > on
                                 hold               reacquire

    any phase but hold ──hold / force limit / failed law──▶ hold;   hold, done ──reset──▶ free

- free: hold the start pose p₀ (free motion, the contact constraint inactive).
- approach: descend along the surface normal with the planned profile (:mod:`.approach`); the touch-down
  speed comes from the contact inertia Λ_c and the surface stiffness, and is the speed at the slow-down
  height whatever ``approach_speed`` says (a gap too short to reach the cruise speed and brake: a triangular
  profile). The profile is read on a :class:`~.approach.ReferenceClock`: it advances at most ``max_step`` s
  (or 3 update periods, for a controller slower than 600 Hz) per update and waits while it leads the
  measured tool height by ``approach_lead`` m, so a late state (a descheduled controller) or a tool that
  does not follow never leaves the reference ahead of the tool (the law would chase it with added speed).
  No contact within ``window`` s of the descent (on its clock: late states do not use it up; at most twice
  that on the states' clock): the safe **hold** phase (the reason logged and kept in ``reason``).
- contact: at f_n > ``on`` the constraint is switched on (``system.set_active``; the law is rebuilt for the
  new set by :class:`~qv_control.task.switching.SwitchingLaw`: basis re-seeded, integrals carried), the
  commanded force ramps from the measured force f_n(t_c) to the profile F_d over ``ramp`` s
  (F_d = f_c + (F(τ) − f_c)s((t − t_c)/ramp)), the trace starts ``settle`` s after the first touch.
- reacquire: f_n < ``off`` for ``off_time`` s: the constraint is switched off and the tool descends again
  from where it is, at the touch-down speed; it returns to contact on the next touch.
- force limit: a measured f_n (the unfiltered reading, ``fn_start``, when given) above ``force_limit`` ×
  F_lim in any active phase is taken for an impact or a runaway: the safe hold at once, in the same update
  (``force_limit_trips`` counted, the reason logged). F_lim is the largest force the profile commanded over
  the last ``limit_window`` s (``force`` before the first touch): a step the user commanded (30 N down to
  5 N) is covered while the force loop follows it. 0: no limit.
- release: at ``release_at`` s after the first touch (or on ``lift_off``) the force ramps to zero over
  ``release_ramp`` s; when f_n < ``off`` (or the ramp ends) the constraint is switched off and the tool
  lifts at ``lift_speed`` for ``lift`` s (on the same governed clock as the descent, leading the measured
  height upwards by at most ``approach_lead``); then done (the lifted pose held).
- reset: a hold or done is cleared back to free: the constraint off, the timeline, profile and detector
  forgotten, the tool brought back from where it is to the start pose p₀ by a minimum-jerk move at
  ``lift_speed`` (not a step of the reference); ``start`` is refused until it is there.

Every command answers whether it acted (``start``, ``touch_down``, ``lift_off``, ``hold``, ``reset`` return
(acted, why)): a second ``lift_off`` while the force already ramps to zero is refused (it would restart the
ramp from the full force), ``start`` outside free is refused.

The safe hold's task point holds the tool in free motion above where it was measured last (the reference
z of a contact phase is not a position: the descent profile runs on below the surface), retracting by
``retract`` m at ``lift_speed``: a hold entered while pressing lifts off instead of driving the tool into
the surface with the free-motion gains. The controller node does not run the law in a hold: it sends the
safe output of :mod:`qv_control.safe_output` (a damped joint-space hold about the pose latched at the
hold, lifted by ``retract``), which does not depend on the law.

The task point ``point(t)`` = {p, v, a (tool position, world), lambda = −F_d (SPEC sign: pressing is
λ < 0), contact, phase} is what :class:`~qv_control.task.laws.TaskLaw` turns into a law's reference. Every phase
change is logged once (``events``) with the rank change of the constraint set.
"""
from __future__ import annotations

import logging
import math
from collections import deque
from typing import Callable

import numpy as np

from .approach import ApproachProfile, LiftProfile, ReferenceClock
from .config import ContactTaskConfig
from .filters import ContactDetector
from .profiles import EPS, CircleTrace, ForceProfile, WaypointTrace, smooth

log = logging.getLogger("qv_task")
PHASES = ("free", "approach", "contact", "reacquire", "release", "hold", "done")
TERMINAL = ("hold", "done")


class ContactTask:
    """The state machine of the module doc. ``update(t, fn, z)`` with the measured normal force f_n ≥ 0
    and tool height z; ``point(t)`` the task reference; commands ``start``, ``touch_down``, ``lift_off``,
    ``hold``, ``reset`` (each returns whether it acted, and leaves why in ``why``). ``on_switch(active)`` is
    called after every constraint switch."""

    def __init__(self, cfg: ContactTaskConfig, system, p0, logger=None, on_switch: Callable | None = None):
        self.cfg, self.system = cfg, system
        system.constraint(cfg.contact)
        self.p0 = np.asarray(p0, float).reshape(3).copy()
        self.logger, self.on_switch = logger, on_switch
        self.force = ForceProfile(cfg.force, cfg.force_steps, cfg.step_ramp)
        self.detector = ContactDetector(cfg.contact_on, cfg.contact_off, cfg.contact_off_time)
        if cfg.trace == "circle":
            self.trace = CircleTrace(self.p0, cfg.radius, cfg.period, cfg.circle_ramp)
        elif cfg.trace == "waypoints":
            self.trace = WaypointTrace(self.p0, cfg.waypoints, cfg.segment_time)
        else:
            self.trace = None
        self.z_slow = cfg.surface_height + cfg.height_uncertainty + cfg.slow_gap
        self.events: list[dict] = []
        self.force_limit_trips = 0
        self._periods: deque = deque(maxlen=15)    # the last update intervals (their median: the period)
        self._t_last: float | None = None
        self.why = ""
        self._clear()

    def _clear(self) -> None:
        """The state of a task not yet started (at construction and at :meth:`reset`)."""
        self.phase, self.reason = "free", None
        self.plan: dict[str, float] = {}
        self.t_contact: float | None = None
        self.t_active = 0.0
        self.f_switch = 0.0
        self.timed = True
        self.profile: ApproachProfile | LiftProfile | None = None   # the vertical reference (descent, lift)
        self.clock: ReferenceClock | None = None
        self.t_descent = 0.0
        self.p_hold = self.p0.copy()
        self.t_hold = 0.0
        self.z_meas: float | None = None
        self.homing: tuple | None = None      # (p_from, t_from, duration): the move back to p₀ after a reset
        self.detector.reset()

    # -- log and switch ---------------------------------------------------------------------------------
    def _log(self, t: float, what: str, **kw) -> None:
        self.events.append({"t": round(t, 6), "event": what, **kw})
        msg = f"[t={t:.3f} s] {what}" + (" (" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")" if kw else "")
        (self.logger or log).info(msg)

    def _switch(self, t: float, active: bool, what: str, **kw) -> None:
        self.system.set_active(self.cfg.contact, active)
        if self.on_switch is not None:
            self.on_switch(active)
        self._log(t, what, rank=f"{0 if active else 1}->{1 if active else 0}", basis="re-seeded", **kw)

    def _descend(self, t: float, z0: float, delay: float = 0.0) -> None:
        c = self.cfg
        self.t_descent = t
        self.profile = ApproachProfile(z0, t + delay, c.approach_speed, c.touch_speed, self.z_slow, c.approach_acc)
        self.clock = ReferenceClock(t, c.max_step, c.approach_lead)

    def _answer(self, acted: bool, why: str) -> bool:
        self.why = why
        return acted

    def _lift(self, t: float, z0: float) -> None:
        c = self.cfg
        self.phase = "release"
        self.profile = LiftProfile(z0, t, c.lift_speed, c.lift)
        self.clock = ReferenceClock(t, c.max_step, c.approach_lead)

    # -- commands -----------------------------------------------------------------------------------------
    def start(self, t: float, timed: bool = True) -> bool:
        """Begin the descent from the start pose (after ``hold`` s). ``timed=False``: stay in contact until
        :meth:`lift_off` (the release time of the timeline is ignored)."""
        if self.phase != "free":
            return self._answer(False, f"the task is not in free motion (phase {self.phase})"
                                + (": reset it first" if self.phase in TERMINAL else ""))
        if self.homing is not None and t < self.homing[1] + self.homing[2]:
            return self._answer(False, "the tool is still moving back to the start pose "
                                f"({self.homing[1] + self.homing[2] - t:.2f} s left)")
        self.homing = None
        self.timed = timed
        self.phase = "approach"
        self._descend(t, self.p0[2], self.cfg.hold)
        self._log(t, "approach started", touch_speed=self.cfg.touch_speed)
        return self._answer(True, "approach started")

    def touch_down(self, t: float) -> bool:
        return self.start(t, timed=False)

    def releasing(self, t: float) -> bool:
        """The force already ramps to zero (the release time has come)."""
        t_rel = self.plan.get("t_release")
        return t_rel is not None and t >= t_rel - EPS

    def lift_off(self, t: float) -> bool:
        """Release now (contact: force ramp to zero, then lift; approach: lift at once)."""
        if self.phase == "contact":
            if self.releasing(t):
                return self._answer(False, "the force already ramps to zero (release under way)")
            self._set_release(t)
            self._log(t, "lift-off commanded")
            return self._answer(True, "releasing: the force ramps to zero, then the tool lifts")
        if self.phase in ("approach", "reacquire"):
            self._lift(t, self.point(t)["p"][2] if self.z_meas is None else self.z_meas)
            self._set_release(t)
            self._log(t, "lift-off commanded")
            return self._answer(True, "lifting")
        return self._answer(False, f"nothing to lift off from (phase {self.phase})")

    def hold(self, t: float, reason: str) -> bool:
        """The safe hold (module doc): free motion above the last measured tool height, retracting."""
        if self.phase == "hold":
            return self._answer(False, "already holding")
        self.p_hold = self.point(t)["p"].copy()
        if self.z_meas is not None and self.phase != "free":
            self.p_hold[2] = self.z_meas
        self.t_hold = t
        if self.system.constraint(self.cfg.contact).active:
            self._switch(t, False, "contact switched off for the hold")
        self.phase, self.reason = "hold", reason
        self._log(t, "safe hold", reason=reason)
        return self._answer(True, "holding")

    def reset(self, t: float, p_now=None) -> bool:
        """Clear a hold or done back to free (module doc); ``p_now``: the tool position now (default: the
        held one), from which the tool is brought back to p₀."""
        if self.phase not in TERMINAL:
            return self._answer(False, f"reset clears a hold or a finished task; the task runs (phase {self.phase})")
        p_from = self.p_hold.copy() if p_now is None else np.asarray(p_now, float).reshape(3).copy()
        if self.system.constraint(self.cfg.contact).active:
            self.system.set_active(self.cfg.contact, False)
        was = self.phase
        self._clear()
        dist = float(np.linalg.norm(self.p0 - p_from))
        # minimum jerk peaks at 1.875 × the mean speed: the move peaks at lift_speed
        self.homing = (p_from, t, 1.875 * dist / self.cfg.lift_speed) if dist > 1e-6 else None
        home = self.homing[2] if self.homing else 0.0
        self._log(t, "task reset", after=was, home_in=round(home, 3))
        return self._answer(True, f"task reset: free motion, at the start pose in {home:.2f} s")

    # -- timeline -----------------------------------------------------------------------------------------
    def _make_plan(self, tc: float) -> None:
        c = self.cfg
        self.plan = {"t_contact": tc, "t_trace": tc + c.settle}
        self.plan.update({k: tc + float(v) for k, v in c.marks.items()})
        rel = c.release_at
        if rel is None and self.trace is not None and math.isfinite(self.trace.duration):
            rel = c.settle + self.trace.duration + c.settle
        if self.timed and rel is not None:
            self._set_release(tc + rel)

    def _set_release(self, t_rel: float) -> None:
        self.plan["t_release"] = t_rel
        self.plan["t_end"] = t_rel + self.cfg.release_ramp + self.cfg.lift

    def force_limit(self, t: float) -> float:
        """The measured normal force that trips the hold at t (module doc; inf: no limit)."""
        c = self.cfg
        if c.force_limit <= 0:
            return math.inf
        if self.t_contact is None:
            return c.force_limit * c.force
        tau = t - self.t_contact
        return c.force_limit * self.force.max_over(tau - c.limit_window, tau)

    # -- the state machine ---------------------------------------------------------------------------------
    def _max_step(self) -> float:
        """Δ_max of the governed clock: ``max_step``, or 3 update periods (the median of the last 15
        intervals: one late state does not move it) for a controller slower than 600 Hz."""
        p = sorted(self._periods)
        return max(self.cfg.max_step, 3.0 * p[len(p) // 2]) if p else self.cfg.max_step

    def _advance_clock(self, t: float, z: float) -> None:
        """The governed clock of the descent / lift (module doc): ℓ the lead of the reference over the
        measured height ``z`` along the motion, the reference kept within ``approach_lead`` of the tool."""
        prof, clock, b = self.profile, self.clock, self.cfg.approach_lead
        if clock is None:
            return
        up = -1.0 if isinstance(prof, LiftProfile) else 1.0
        lead = up * (z - prof(clock.at(t))[0])
        if lead > b and up * (z - prof.z0) > b:     # the tool behind the profile's start: re-planned from it
            if up < 0:
                self.profile = LiftProfile(z, t, self.cfg.lift_speed, max(0.0, prof.t0 + prof.duration - t))
            else:
                self.profile = ApproachProfile(z, t, self.cfg.approach_speed, self.cfg.touch_speed, self.z_slow,
                                               self.cfg.approach_acc)
            self.clock = ReferenceClock(t, self.cfg.max_step, b)
            return
        clock.advance(t, lead, self._max_step())
        if lead > b:           # the reference ahead of the tool by more than b: back to b ahead
            clock.clamp(high=prof.time_at(z - up * b))
        elif lead < -b and up > 0:      # the tool ahead: the reference on to b behind it
            clock.clamp(low=prof.time_at(z + b))
        elif lead < 0 and up < 0:       # a lift: to the tool (held there past the lift's end), never pulling
            if z > prof(math.inf)[0]:   # it back down towards the surface
                self.profile = LiftProfile(z, t, self.cfg.lift_speed, 0.0)
            clock.clamp(low=self.profile.time_at(z))

    def update(self, t: float, fn: float, z: float | None = None, fn_start: float | None = None) -> str:
        """One sample of the measured normal force ``fn`` (N, ≥ 0 pressing) and tool height ``z``;
        ``fn_start``: the unfiltered reading when fn is low-passed (the ramp after a touch starts from it
        and the force limit acts on it: a filter must not delay the limit). Returns the phase."""
        c, ph = self.cfg, self.phase
        if self._t_last is not None and t > self._t_last:
            self._periods.append(t - self._t_last)
        self._t_last = t
        z = self.point(t)["p"][2] if z is None else z
        self.z_meas = z
        if ph not in TERMINAL and ph != "free":
            f_lim = fn if fn_start is None else max(fn, fn_start)
            limit = self.force_limit(t)
            if f_lim > limit:
                self.force_limit_trips += 1
                self.hold(t, f"normal force {f_lim:.1f} N above the limit {limit:.1f} N ({c.force_limit:g} × "
                             f"the commanded force)")
                return self.phase
        if ph in ("approach", "reacquire", "release"):
            self._advance_clock(t, z)
        if ph in ("approach", "reacquire"):
            if self.detector.made(fn):
                first = self.t_contact is None
                if first:
                    self.t_contact = t
                    self._make_plan(t)
                self.t_active = t
                start = fn if fn_start is None else max(0.0, fn_start)
                self.f_switch = min(start, self.force(t - self.t_contact))
                self.phase = "contact"
                self.detector.reset()
                self._switch(t, True, "contact made" if first else "contact regained", normal_force=round(fn, 3))
            elif ph == "approach" and (self.clock.tau - self.t_descent > c.approach_window
                                       or t - self.t_descent > 2 * c.approach_window):
                self.hold(t, f"no touch-down within the approach window of {c.approach_window} s")
        elif ph == "contact":
            releasing = self.releasing(t)
            low = self.detector.low(t, fn)
            if releasing and (low or t >= self.plan["t_release"] + c.release_ramp):
                self._lift(t, z)
                self._switch(t, False, "contact released", normal_force=round(fn, 3))
            elif low and t - self.detector.off_since >= c.contact_off_time:
                self.phase = "reacquire"
                self._descend(t, z)
                self._switch(t, False, "contact lost", normal_force=round(fn, 3))
        if "t_end" in self.plan and t >= self.plan["t_end"] - EPS and self.phase not in TERMINAL:
            self.p_hold = self.point(t)["p"].copy()     # done: hold the lifted pose, where the tool is
            self.p_hold[2] = z
            self.phase = "done"
            self._log(t, "task done")
        return self.phase

    # -- references -------------------------------------------------------------------------------------------
    def commanded_force(self, t: float) -> float:
        """F_d ≥ 0 (the law gets λ_d = −F_d)."""
        if self.t_contact is None:
            return 0.0
        target = self.force(t - self.t_contact)
        t_rel = self.plan.get("t_release")
        if t_rel is not None and t >= t_rel - EPS:
            return self.force(t_rel - self.t_contact) * (1.0 - smooth((t - t_rel) / self.cfg.release_ramp))
        if self.phase == "contact":
            s = smooth((t - self.t_active) / self.cfg.ramp)
            return self.f_switch + (target - self.f_switch) * s if s < 1 else target
        return target

    def _xy(self, t: float):
        if self.trace is None or "t_trace" not in self.plan:
            return self.p0[:2].copy(), np.zeros(2), np.zeros(2)
        return self.trace(t - self.plan["t_trace"])

    def _z(self, t: float) -> tuple[float, float, float]:
        if self.clock is None:
            return self.p0[2], 0.0, 0.0
        g = self.clock.g
        z, vz, az = self.profile(self.clock.at(t))
        return z, g * vz, g * g * az

    def _home(self, t: float) -> dict:
        """The minimum-jerk move from where a reset found the tool back to p₀ (module doc)."""
        p_from, t0, T = self.homing
        u = min(max((t - t0) / T, 0.0), 1.0)
        d = self.p0 - p_from
        s, sd = u ** 3 * (10 - 15 * u + 6 * u * u), 30 * u * u * (1 - u) ** 2 / T
        sdd = 60 * u * (1 - 3 * u + 2 * u * u) / T ** 2
        return {"p": p_from + d * s, "v": d * sd, "a": d * sdd, "lambda": 0.0, "contact": False, "phase": "free"}

    def point(self, t: float) -> dict:
        """The task point at t: {p, v, a, lambda, contact} (module doc)."""
        contact = self.system.constraint(self.cfg.contact).active
        if self.phase in TERMINAL:
            p, v = self.p_hold.copy(), np.zeros(3)
            if self.phase == "hold" and self.cfg.retract > 0:
                s = min(max(0.0, t - self.t_hold), self.cfg.retract / self.cfg.lift_speed)
                p[2] += s * self.cfg.lift_speed
                v[2] = self.cfg.lift_speed if s * self.cfg.lift_speed < self.cfg.retract else 0.0
            return {"p": p, "v": v, "a": np.zeros(3), "lambda": 0.0, "contact": False, "phase": self.phase}
        if self.phase == "free" and self.homing is not None:
            return self._home(t)
        p, v, a = self._xy(t)
        z, vz, az = self._z(t)
        return {"p": np.array([p[0], p[1], z]), "v": np.array([v[0], v[1], vz]),
                "a": np.array([a[0], a[1], 0.0 if contact else az]), "lambda": -self.commanded_force(t),
                "contact": contact, "phase": self.phase}

    def targets(self) -> np.ndarray:
        """The task-space points the tool is asked to reach on the surface (start and trace)."""
        xy = [self.p0[:2]] + ([] if self.trace is None else list(self.trace.points()))
        return np.array([[x, y, self.cfg.surface_height] for x, y in xy])


__all__ = ["PHASES", "TERMINAL", "ContactTask", "ContactTaskConfig"]
