"""The configuration of a contact task (:class:`ContactTaskConfig`): its geometry, force profile, timeline,
approach and safety settings, checked where they enter (:class:`~qv_dynamics.errors.ModelError` naming the
field). What each field does: :mod:`.contact_task`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from qv_dynamics.errors import ModelError

from .limits import MAX_APPROACH_SPEED, check_config

MAX_SPEED = MAX_APPROACH_SPEED  # m/s: the largest approach or lift speed a task accepts
MAX_ACC = 20.0      # m/s²: the largest speed change of the descent


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
    limit_window: float = 0.3           # s: the force limit follows the largest force commanded this long ago
    approach_lead: float = 0.002        # m the descent / lift reference may lead the measured tool height
    max_step: float = 0.005             # s the descent / lift reference advances at most per update

    def __post_init__(self):
        if self.trace not in ("circle", "waypoints", "none"):
            raise ModelError(f"task trace must be circle, waypoints or none, got {self.trace!r}")
        for name in ("approach_speed", "approach_acc", "approach_window", "ramp", "release_ramp", "lift_speed",
                     "approach_lead", "max_step"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ModelError(f"task {name} must be a positive number, got {v!r}")
        for name, top, unit in (("approach_speed", MAX_SPEED, "m/s"), ("lift_speed", MAX_SPEED, "m/s"),
                                ("approach_acc", MAX_ACC, "m/s²")):
            if getattr(self, name) > top:
                raise ModelError(f"task {name} must be at most {top:g} {unit}, got {getattr(self, name)!r}")
        for name in ("force_limit", "retract", "limit_window"):
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


__all__ = ["MAX_ACC", "MAX_SPEED", "ContactTaskConfig"]
