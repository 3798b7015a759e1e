"""The contact task as a state machine: approach, touch down, press and trace, release, lift off.

Phases (``ContactTask.phase``)::

    free ──start/touch_down──▶ approach ──f_n > on──▶ contact ──release time / lift_off──▶ release ──▶ done
                                  │                    │  ▲
                      no touch within window     f_n < off for off_time
                                  ▼                    ▼  │ f_n > on
                                 hold               reacquire

- free: hold the start pose p₀ (free motion, the contact constraint inactive).
- approach: descend along the surface normal with the planned profile (:mod:`.approach`); the touch-down
  speed comes from the contact inertia Λ_c and the surface stiffness. No contact within ``window`` s:
  the safe **hold** phase (hold the reached pose in free motion, the reason logged and kept in ``reason``).
- contact: at f_n > ``on`` the constraint is switched on (``system.set_active``; the law is rebuilt for the
  new set by :class:`~qv_control.task.switching.SwitchingLaw`: basis re-seeded, integrals carried), the
  commanded force ramps from the measured force f_n(t_c) to the profile F_d over ``ramp`` s
  (F_d = f_c + (F(τ) − f_c)s((t − t_c)/ramp)), the trace starts ``settle`` s after the first touch.
- reacquire: f_n < ``off`` for ``off_time`` s: the constraint is switched off and the tool descends again
  from where it is, at the touch-down speed; it returns to contact on the next touch.
- force limit: a measured f_n above ``force_limit`` × the profile's force (the force commanded after the
  ramp, ``force`` before the first touch) in any active phase is taken for an impact or a runaway: the safe
  hold at once (``force_limit_trips`` counted, the reason logged). 0: no limit.
- release: at ``release_at`` s after the first touch (or on ``lift_off``) the force ramps to zero over
  ``release_ramp`` s; when f_n < ``off`` (or the ramp ends) the constraint is switched off and the tool
  lifts at ``lift_speed`` for ``lift`` s; then done (the lifted pose held).

The safe hold holds the tool in free motion above where it was measured last (the reference z of a
contact phase is not a position: the descent profile runs on below the surface), retracting by
``retract`` m at ``lift_speed``: a hold entered while pressing lifts off instead of driving the tool into
the surface with the free-motion gains.

The task point ``point(t)`` = {p, v, a (tool position, world), lambda = −F_d (SPEC sign: pressing is
λ < 0), contact, phase} is what :class:`~qv_control.task.laws.TaskLaw` turns into a law's reference. Every phase
change is logged once (``events``) with the rank change of the constraint set.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from qv_dynamics.errors import ModelError

from .approach import ApproachProfile
from .filters import ContactDetector
from .limits import check_config
from .profiles import EPS, CircleTrace, ForceProfile, WaypointTrace, smooth

log = logging.getLogger("qv_task")
PHASES = ("free", "approach", "contact", "reacquire", "release", "hold", "done")
TERMINAL = ("hold", "done")


@dataclass
class ContactTaskConfig:
    """Everything a contact task needs (SI units; times of the timeline in s from the first touch)."""

    contact: str = "contact"            # the switchable surface constraint of the model
    surface_height: float = 0.245       # z of the tool point at touch-down, as the user believes it (m)
    force: float = 10.0                 # commanded normal force (N)
    force_steps: list = field(default_factory=list)   # [(τ, F), ...] after the first touch
    step_ramp: float = 0.0              # s of each force step (0: a true step)
    ramp: float = 0.15                  # s of the force ramp after a touch
    approach_speed: float = 0.01        # m/s cruise speed of the descent
    touch_speed: float | None = None    # m/s planned touch-down speed (None: the cruise speed)
    approach_acc: float = 2.0           # m/s² of the descent's speed changes
    height_uncertainty: float = 0.005   # m the surface may be higher than told
    slow_gap: float = 0.002             # m above the highest possible surface where the touch speed is reached
    approach_window: float = 3.0        # s from the start of the descent without a touch -> safe hold
    hold: float = 0.1                   # s at the start pose before the descent
    contact_on: float = 2.0             # N: free -> contact
    contact_off: float = 0.5            # N: contact -> lost (after contact_off_time s)
    contact_off_time: float = 0.003
    trace: str = "circle"               # circle | waypoints | none
    settle: float = 0.35                # s from the first touch to the start of the trace
    radius: float = 0.04                # circle (m, s)
    period: float = 4.0
    circle_ramp: float = 0.6
    waypoints: list = field(default_factory=list)     # [(x, y), ...] world, on the surface
    segment_time: float = 1.0           # s per waypoint segment
    release_at: float | None = None     # s from the first touch (None: on lift_off / end of a waypoint trace)
    release_ramp: float = 0.15
    lift: float = 0.4                   # s of lifting after the release
    lift_speed: float = 0.01            # m/s
    marks: dict = field(default_factory=dict)         # named times from the first touch, copied into ``plan``
    force_limit: float = 0.0            # f_n above this × the profile's force -> safe hold (0: no limit; the
    #                                     controller node's task.force_limit defaults to 3)
    retract: float = 0.003              # m the safe hold lifts the tool above its last measured height

    def __post_init__(self):
        if self.trace not in ("circle", "waypoints", "none"):
            raise ModelError(f"task trace must be circle, waypoints or none, got {self.trace!r}")
        for name in ("approach_speed", "approach_acc", "approach_window", "ramp", "release_ramp", "lift_speed"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ModelError(f"task {name} must be a positive number, got {v!r}")
        for name in ("force_limit", "retract"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ModelError(f"task {name} must be a number >= 0, got {v!r}")
        if 0 < self.force_limit <= 1:
            raise ModelError(f"task force_limit must be 0 (off) or above 1 (× the commanded force), got "
                             f"{self.force_limit!r}")
        if self.touch_speed is not None and not (math.isfinite(self.touch_speed) and self.touch_speed > 0):
            raise ModelError(f"task touch_speed must be a positive number, got {self.touch_speed!r}")
        if self.trace == "waypoints" and not len(self.waypoints):
            raise ModelError("task trace 'waypoints' needs at least one (x, y) waypoint")
        check_config(self)  # finite, in range, consistent (limits.py)


class ContactTask:
    """The state machine of the module doc. ``update(t, fn, z)`` with the measured normal force f_n ≥ 0
    and tool height z; ``point(t)`` the task reference; commands ``start``, ``touch_down``, ``lift_off``,
    ``hold``. ``on_switch(active)`` is called after every constraint switch."""

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
        self.phase, self.reason = "free", None
        self.events: list[dict] = []
        self.plan: dict[str, float] = {}
        self.t_contact: float | None = None
        self.t_active = 0.0
        self.f_switch = 0.0
        self.timed = True
        self.profile: ApproachProfile | None = None
        self.t_descent = 0.0
        self.z_free0, self.t_free0 = self.p0[2], 0.0
        self.p_hold = self.p0.copy()
        self.t_hold = 0.0
        self.z_meas: float | None = None
        self.force_limit_trips = 0

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

    # -- commands -----------------------------------------------------------------------------------------
    def start(self, t: float, timed: bool = True) -> bool:
        """Begin the descent from the start pose (after ``hold`` s). ``timed=False``: stay in contact until
        :meth:`lift_off` (the release time of the timeline is ignored). False if already started."""
        if self.phase != "free":
            return False
        self.timed = timed
        self.phase = "approach"
        self._descend(t, self.p0[2], self.cfg.hold)
        self._log(t, "approach started", touch_speed=self.cfg.touch_speed)
        return True

    def touch_down(self, t: float) -> bool:
        return self.start(t, timed=False)

    def lift_off(self, t: float) -> bool:
        """Release now (contact: force ramp to zero, then lift; approach: lift at once)."""
        if self.phase == "contact":
            self._set_release(t)
            return True
        if self.phase in ("approach", "reacquire"):
            self.phase, self.z_free0, self.t_free0 = "release", self.point(t)["p"][2], t
            self._set_release(t)
            self._log(t, "lift-off commanded")
            return True
        return False

    def hold(self, t: float, reason: str) -> None:
        """The safe hold (module doc): free motion above the last measured tool height, retracting."""
        if self.phase in TERMINAL:
            return
        self.p_hold = self.point(t)["p"].copy()
        if self.z_meas is not None and self.phase != "free":
            self.p_hold[2] = self.z_meas
        self.t_hold = t
        if self.system.constraint(self.cfg.contact).active:
            self._switch(t, False, "contact switched off for the hold")
        self.phase, self.reason = "hold", reason
        self._log(t, "safe hold", reason=reason)

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

    # -- the state machine ---------------------------------------------------------------------------------
    def update(self, t: float, fn: float, z: float | None = None, fn_start: float | None = None) -> str:
        """One sample of the measured normal force ``fn`` (N, ≥ 0 pressing) and tool height ``z``;
        ``fn_start``: the force the ramp after a touch starts from (default fn: pass the unfiltered
        reading when fn is low-passed). Returns the phase."""
        c, ph = self.cfg, self.phase
        z = self.point(t)["p"][2] if z is None else z
        self.z_meas = z
        if ph not in TERMINAL and ph != "free" and c.force_limit > 0:
            limit = c.force_limit * (c.force if self.t_contact is None else self.force(t - self.t_contact))
            if fn > limit:
                self.force_limit_trips += 1
                self.hold(t, f"normal force {fn:.1f} N above the limit {limit:.1f} N ({c.force_limit:g} × the "
                             f"commanded force)")
                return self.phase
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
            elif ph == "approach" and t - self.t_descent > c.approach_window:
                self.hold(t, f"no touch-down within the approach window of {c.approach_window} s")
        elif ph == "contact":
            t_rel = self.plan.get("t_release")
            releasing = t_rel is not None and t >= t_rel - EPS
            low = self.detector.low(t, fn)
            if releasing and (low or t >= t_rel + c.release_ramp):
                self.phase, self.z_free0, self.t_free0 = "release", z, t
                self._switch(t, False, "contact released", normal_force=round(fn, 3))
            elif low and t - self.detector.off_since >= c.contact_off_time:
                self.phase = "reacquire"
                self._descend(t, z)
                self._switch(t, False, "contact lost", normal_force=round(fn, 3))
        if "t_end" in self.plan and t >= self.plan["t_end"] - EPS and self.phase not in TERMINAL:
            self.p_hold = self.point(t)["p"].copy()     # done: hold the lifted pose
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
        c = self.cfg
        if self.phase == "release":
            s = max(0.0, t - self.t_free0)
            return self.z_free0 + min(s, c.lift) * c.lift_speed, (c.lift_speed if s < c.lift else 0.0), 0.0
        if self.profile is None:
            return self.p0[2], 0.0, 0.0
        return self.profile(t)

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
