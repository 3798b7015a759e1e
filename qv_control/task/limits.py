"""The static bounds of a contact task (:class:`~qv_control.task.ContactTaskConfig`, the node's ``task.*``
parameters): every number finite, in a physical range, and consistent with the others, checked before
anything moves (one ModelError naming the parameter as ``task.<name>``).

Ranges (SI units): forces in (0, :data:`MAX_FORCE`]; speeds of the tool normal to the surface (approach,
lift) at most :data:`MAX_APPROACH_SPEED` (a guarded approach; the plan brakes to the touch-down speed
within the gap); the trace's peak speed (circle 2πr/T, minimum-jerk segment 1.875·d/T_s) at most
:data:`MAX_TRACE_SPEED`; every duration, period and timeout bounded (:data:`TIMES`); lengths (radius,
retract, height uncertainty, surface height) bounded; at most :data:`MAX_WAYPOINTS` waypoints.

Consistency: ``contact_off`` < ``contact_on`` < ``force`` (contact is declared below the commanded force,
and lost below where it is declared); the planned touch-down peak below the force limit
(``peak_ratio`` < ``force_limit``); every force step stays within the limit of the force before it (the
limit acts on ``force_limit`` × the profile's force: a step down by the factor ``force_limit`` or more
would trip it on the user's own command), and no two steps at the same time.
"""
from __future__ import annotations

import math

from qv_dynamics.errors import ModelError

MAX_FORCE = 1e4                  # N
MAX_APPROACH_SPEED = 1.0         # m/s, approach and lift (the arm's Cartesian speed scale; the plan brakes)
MAX_TRACE_SPEED = 0.5            # m/s, peak tangential speed of the trace
MAX_WAYPOINTS = 1000
MAX_TASK_TIME = 3600.0           # s: release_at, settle, steps' times, a circle's period, a segment
MAX_RAMP = 60.0                  # s: force ramps, holds, lifts
MIN_MINJERK_PEAK = 1.875         # peak speed of a minimum-jerk segment / (d / T)
MAX_FORCE_LIMIT = 100.0          # × the commanded force
MAX_PEAK_RATIO = 10.0
MAX_STIFFNESS = 1e9              # N/m of the surface
MAX_GAIN = 1e4                   # 1/s: a bandwidth far above a 1 kHz loop's is not one

# name: (low, high, low_open) of the numeric fields, in the units of the module doc
RANGES = {
    "surface_height": (-10.0, 10.0, False),
    "force": (0.0, MAX_FORCE, True),
    "step_ramp": (0.0, MAX_RAMP, False),
    "ramp": (0.0, MAX_RAMP, True),
    "approach_speed": (0.0, MAX_APPROACH_SPEED, True),
    "height_uncertainty": (0.0, 0.1, False),
    "approach_window": (0.0, 60.0, True),
    "hold": (0.0, MAX_RAMP, False),
    "contact_on": (0.0, MAX_FORCE, True),
    "contact_off": (0.0, MAX_FORCE, False),
    "contact_off_time": (0.0, 1.0, False),
    "settle": (0.0, MAX_TASK_TIME, False),
    "radius": (0.0, 1.0, True),
    "period": (0.0, MAX_TASK_TIME, True),
    "circle_ramp": (0.0, MAX_RAMP, True),
    "segment_time": (0.0, MAX_TASK_TIME, True),
    "release_ramp": (0.0, MAX_RAMP, True),
    "lift": (0.0, MAX_RAMP, False),
    "lift_speed": (0.0, MAX_APPROACH_SPEED, True),
    "retract": (0.0, 0.1, False),
}
# the node's task.* parameters of the plan and the law (not fields of the config)
LAW_RANGES = {
    "stiffness": (0.0, MAX_STIFFNESS, False),
    "damping_factor": (0.0, 10.0, True),
    "peak_ratio": (1.0, MAX_PEAK_RATIO, True),
    "kp": (0.0, MAX_GAIN, True),
    "kd": (0.0, MAX_GAIN, True),
    "ki": (0.0, MAX_GAIN, False),
    "ki_motion": (0.0, MAX_GAIN ** 2, False),
    "friction_mu": (0.0, 2.0, False),
    "ft_filter_hz": (0.0, 500.0, False),
    "ft_timeout": (0.0, 10.0, True),     # as the watchdog_timeout (lock-step runs wait on the machine)
}
UNITS = {"surface_height": "m", "force": "N", "approach_speed": "m/s", "height_uncertainty": "m", "contact_on": "N",
         "contact_off": "N", "radius": "m", "lift_speed": "m/s", "retract": "m", "stiffness": "N/m",
         "damping_factor": "", "peak_ratio": "(× force)", "kp": "1/s", "kd": "1/s", "ki": "1/s", "ki_motion": "1/s²",
         "friction_mu": "", "ft_filter_hz": "Hz"}


def in_range(name: str, v, low: float, high: float, low_open: bool = False, unit: str = "s") -> None:
    """ModelError unless ``v`` is a finite number in [low, high] (``low_open``: (low, high])."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > high or v < low \
            or (low_open and v == low):
        raise ModelError(f"{name} must be a number in {'(' if low_open else '['}{low:g}, {high:g}] {unit}, got {v!r}")


def check_force_limit(v) -> None:
    """``force_limit``: 0 (off) or a finite factor in (1, MAX_FORCE_LIMIT]."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v == 0 or 1 < v <= MAX_FORCE_LIMIT):
        raise ModelError(f"task.force_limit must be 0 (no limit) or a number in (1, {MAX_FORCE_LIMIT:g}] "
                         f"(× the commanded force), got {v!r}")


def check_release_at(v) -> None:
    """``release_at``: a finite time after the first touch, or < 0 (none); NaN would never release."""
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > MAX_TASK_TIME:
        raise ModelError(f"task.release_at must be a finite number of s up to {MAX_TASK_TIME:g} (< 0: on lift_off "
                         f"or at the end of a waypoint trace), got {v!r}")


def _check_steps(force: float, steps, limit: float, contact_off: float) -> None:
    times = [t for t, _ in steps]
    for t, f in steps:
        in_range("task.force_steps time", t, 0.0, MAX_TASK_TIME)
        in_range("task.force_steps force", f, 0.0, MAX_FORCE, low_open=True, unit="N")
    if len(set(times)) != len(times):
        raise ModelError(f"task.force_steps: two steps at the same time {sorted(times)}")
    prev = force
    for t, f in sorted(steps):
        if f <= contact_off:
            raise ModelError(f"task.force_steps: the step to {f:g} N at {t:g} s is at or below task.contact_off "
                             f"{contact_off:g} N (contact would count as lost while pressing)")
        if limit > 0 and prev >= limit * f:
            raise ModelError(f"task.force_steps: the step to {f:g} N at {t:g} s is beyond the force limit: "
                             f"task.force_limit {limit:g} × {f:g} N is below the {prev:g} N pressed before it "
                             "(step down in smaller steps, or raise task.force_limit)")
        prev = f


def _check_trace(cfg) -> None:
    if cfg.trace == "circle":
        v = 2 * math.pi * cfg.radius / cfg.period
        if v > MAX_TRACE_SPEED:
            raise ModelError(f"task.radius {cfg.radius:g} m with task.period {cfg.period:g} s traces at "
                             f"{v:.3g} m/s (2πr/T), above {MAX_TRACE_SPEED:g} m/s")
    if len(cfg.waypoints) > MAX_WAYPOINTS:
        raise ModelError(f"task.waypoints: {len(cfg.waypoints)} waypoints, at most {MAX_WAYPOINTS}")
    for k, (x, y) in enumerate(cfg.waypoints):
        for c in (x, y):
            in_range(f"task.waypoints[{k}]", c, -10.0, 10.0, unit="m")
    if cfg.trace == "waypoints" and len(cfg.waypoints) > 1:
        d = max(math.dist(a, b) for a, b in zip(cfg.waypoints, cfg.waypoints[1:]))
        v = MIN_MINJERK_PEAK * d / cfg.segment_time
        if v > MAX_TRACE_SPEED:
            raise ModelError(f"task.waypoints {d:.3g} m apart in task.segment_time {cfg.segment_time:g} s peak at "
                             f"{v:.3g} m/s (1.875 d/T), above {MAX_TRACE_SPEED:g} m/s")


def check_config(cfg) -> None:
    """The bounds and consistency of the module doc on a :class:`~qv_control.task.ContactTaskConfig`."""
    for name, (low, high, low_open) in RANGES.items():
        in_range(f"task.{name}", getattr(cfg, name), low, high, low_open, UNITS.get(name, "s"))
    check_force_limit(cfg.force_limit)
    check_release_at(cfg.release_at)
    if not cfg.contact_off < cfg.contact_on < cfg.force:
        raise ModelError(f"task.contact_off ({cfg.contact_off:g} N) < task.contact_on ({cfg.contact_on:g} N) < "
                         f"task.force ({cfg.force:g} N) is required: contact is declared below the commanded force "
                         "and lost below where it is declared")
    _check_steps(cfg.force, cfg.force_steps, cfg.force_limit, cfg.contact_off)
    _check_trace(cfg)


def check_peak_ratio(peak_ratio: float, force_limit: float) -> None:
    """The planned touch-down peak (× force) below the force limit."""
    if force_limit > 0 and peak_ratio >= force_limit:
        raise ModelError(f"task.peak_ratio {peak_ratio:g} must be below task.force_limit {force_limit:g}: the "
                         "planned touch-down peak would trip the limit")


__all__ = ["LAW_RANGES", "MAX_APPROACH_SPEED", "MAX_FORCE", "MAX_TRACE_SPEED", "MAX_WAYPOINTS", "RANGES",
           "check_config", "check_force_limit", "check_peak_ratio", "check_release_at", "in_range"]
