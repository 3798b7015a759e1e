"""Contact plans for a legged robot: base-pose reference, per-foot phases with load ramps, swing paths.

A plan is a function of time only (so the controller node, the demo and a test replay it identically):

* ``base(t)`` → (θ, θ̇, θ̈) of the 6 base coordinates (position offsets x y z in world axes, then the
  rotation vector rx ry rz of R·R₀ᵀ), relative to the initial base pose;
* ``phase(foot, t)`` → ``("stance", w)`` with the load factor w ∈ [0, 1] (1 = free share of the load; w < 1
  caps the normal force at w·``f_nominal``: the ramp out before lift-off and in after touchdown) or
  ``("swing", s)`` with the swing progress s ∈ [0, 1];
* ``swing(foot, t, p_lift)`` → (p, ṗ, p̈) of the swing foot, from its lift-off position: a quintic
  smooth step along ``step`` over the first 80 % of the swing (``LANDING``), a height bump h·64s³(1 − s)³
  over all of it (zero velocity and acceleration at both ends), and in the last 20 % a smooth descent to
  ``press`` (1 mm) below the lift-off height so the foot meets the floor moving down, not sideways (measured on
  the LF step: 0 mm press gives 0.2 mm of landing slip ideally but 2.1 mm with noise and delay; 1 mm gives
  0.8 / 1.4 mm).

:func:`smoothstep5` is the quintic 10s³ − 15s⁴ + 6s⁵ with its first two derivatives.

A plan is checked when it is built (ModelError naming the step and the value, before anything moves): every
time, vector and height finite and bounded (steps, shifts and sways of at most :data:`MAX_MOVE` m or rad,
swing heights up to :data:`MAX_HEIGHT` m, sway frequencies up to :data:`MAX_SWAY_HZ` Hz, times within
[0, :data:`MAX_PLAN_TIME`] s), at most :data:`MAX_STEPS` steps, and **one foot at a time**: the load-change
windows [t_unload, t_loaded] of two steps never overlap (two feet swinging at once, or a foot's steps
overlapping, leave a statically stable crawl without its support; the robot falls).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from qv_dynamics.errors import ModelError, QVError

#: fraction of the swing after which the foot only descends (the horizontal step is done: no scuffing)
LANDING = 0.8
MAX_MOVE = 1.0         # m (steps, shifts, advances) or m / rad (sway amplitudes)
MAX_HEIGHT = 0.5       # m of swing height
MAX_PRESS = 0.05       # m of landing press
MAX_SWAY_HZ = 5.0      # Hz
MAX_PLAN_TIME = 3600.0  # s
MAX_STEPS = 1000


def _number(name: str, v, low: float, high: float, low_open: bool = False) -> float:
    """``v`` as a float when it is a finite number in [low, high] (``low_open``: (low, high]), else ModelError."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v) \
            or not low <= v <= high or (low_open and v == low):
        raise ModelError(f"{name} must be a finite number in {'(' if low_open else '['}{low:g}, {high:g}], got {v!r}")
    return float(v)


def _vector(name: str, v, n: int, bound: float) -> np.ndarray:
    """``v`` as n finite numbers of magnitude at most ``bound``, else ModelError."""
    try:
        a = np.asarray(v, float).reshape(n)
    except (TypeError, ValueError):
        raise ModelError(f"{name} must be {n} numbers, got {v!r}") from None
    if not np.all(np.isfinite(a)) or np.any(np.abs(a) > bound):
        raise ModelError(f"{name} must be {n} finite numbers of magnitude at most {bound:g}, got {v!r}")
    return a


def smoothstep5(t: float, t0: float, t1: float) -> tuple[float, float, float]:
    """(σ, σ̇, σ̈) of the quintic smooth step from 0 at t0 to 1 at t1."""
    if t <= t0:
        return 0.0, 0.0, 0.0
    if t >= t1:
        return 1.0, 0.0, 0.0
    T = t1 - t0
    s = (t - t0) / T
    return (10 * s**3 - 15 * s**4 + 6 * s**5, (30 * s**2 - 60 * s**3 + 30 * s**4) / T,
            (60 * s - 180 * s**2 + 120 * s**3) / T**2)


@dataclass
class FootStep:
    """One step of one foot: load ramped out over [t_unload, t_lift], swing over [t_lift, t_touch]
    (moving by ``step``, world axes, ``height`` above the lift-off height), load ramped in over
    [t_touch, t_loaded]. ``shift`` (world x y z, m) moves the base over the other feet before the step:
    ramped in over [t_unload − shift_time, t_unload], held, then ramped over [t_loaded, t_loaded + shift_time]
    to ``advance`` (0: back where it was; a walk leaves the base where its new support is centred)."""

    foot: str
    t_unload: float
    t_lift: float
    t_touch: float
    t_loaded: float
    step: Sequence[float] = (0.1, 0.0, 0.0)
    height: float = 0.06
    shift: Sequence[float] = (0.0, 0.0, 0.0)
    shift_time: float = 0.8
    press: float = 0.001
    advance: Sequence[float] = (0.0, 0.0, 0.0)

    def __post_init__(self):
        where = f"FootStep {self.foot}"
        for name in ("t_unload", "t_lift", "t_touch", "t_loaded"):
            _number(f"{where}: {name}", getattr(self, name), 0.0, MAX_PLAN_TIME)
        _number(f"{where}: shift_time", self.shift_time, 0.0, MAX_PLAN_TIME, low_open=True)
        _number(f"{where}: height", self.height, 0.0, MAX_HEIGHT)
        _number(f"{where}: press", self.press, 0.0, MAX_PRESS)
        for name in ("step", "shift", "advance"):
            _vector(f"{where}: {name}", getattr(self, name), 3, MAX_MOVE)
        times = (self.t_unload - self.shift_time, self.t_unload, self.t_lift, self.t_touch, self.t_loaded)
        if times[0] < 0:
            raise ModelError(f"{where}: the base shift would start before t = 0 (t_unload {self.t_unload:g} - "
                             f"shift_time {self.shift_time:g})")
        if not all(a < b for a, b in zip(times, times[1:])):
            raise QVError(f"FootStep {self.foot}: need t_unload - shift_time < t_unload < t_lift < t_touch < "
                          f"t_loaded, got {times}")


class GaitPlan:
    """Base-pose reference plus foot steps (module doc). ``sway(t)`` → (θ, θ̇, θ̈) (6 each) is added to the
    base reference (e.g. a sinusoidal body pose); ``feet``: every foot of the robot, stance by default."""

    def __init__(self, feet: Sequence[str], steps: Sequence[FootStep] = (),
                 sway: Callable[[float], tuple] | None = None):
        self.feet = list(feet)
        self.steps = list(steps)
        if len(self.steps) > MAX_STEPS:
            raise ModelError(f"GaitPlan: {len(self.steps)} steps, at most {MAX_STEPS}")
        for s in self.steps:
            if s.foot not in self.feet:
                raise QVError(f"GaitPlan: step of unknown foot '{s.foot}' (feet: {self.feet})")
        order = sorted(self.steps, key=lambda s: s.t_unload)
        for a, b in zip(order, order[1:]):  # one foot at a time (module doc)
            if b.t_unload < a.t_loaded:
                what = "the same foot's steps overlap" if a.foot == b.foot else "two feet would be unloaded at once"
                raise ModelError(f"GaitPlan: the step of {b.foot} unloading at {b.t_unload:g} s starts before the "
                                 f"step of {a.foot} is loaded again at {a.t_loaded:g} s ({what})")
        self.sway = sway
        self.t_end = max([s.t_loaded + s.shift_time for s in self.steps], default=0.0)

    def base(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        th, thd, thdd = np.zeros(6), np.zeros(6), np.zeros(6)
        for s in self.steps:
            a = smoothstep5(t, s.t_unload - s.shift_time, s.t_unload)
            b = smoothstep5(t, s.t_loaded, s.t_loaded + s.shift_time)
            d, e = np.asarray(s.shift, float), np.asarray(s.advance, float) - np.asarray(s.shift, float)
            th[:3] += d * a[0] + e * b[0]
            thd[:3] += d * a[1] + e * b[1]
            thdd[:3] += d * a[2] + e * b[2]
        if self.sway is not None:
            sw = self.sway(t)
            th, thd, thdd = th + sw[0], thd + sw[1], thdd + sw[2]
        return th, thd, thdd

    def _step(self, foot: str, t: float) -> FootStep | None:
        for s in self.steps:
            if s.foot == foot and s.t_unload <= t < s.t_loaded:
                return s
        return None

    def phase(self, foot: str, t: float) -> tuple[str, float]:
        s = self._step(foot, t)
        if s is None:
            return "stance", 1.0
        if t < s.t_lift:
            return "stance", max(0.0, 1.0 - smoothstep5(t, s.t_unload, s.t_lift)[0])
        if t < s.t_touch:
            return "swing", (t - s.t_lift) / (s.t_touch - s.t_lift)
        return "stance", smoothstep5(t, s.t_touch, s.t_loaded)[0]

    def swing(self, foot: str, t: float, p_lift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = self._step(foot, t)
        if s is None:
            return p_lift.copy(), np.zeros(3), np.zeros(3)
        d = np.asarray(s.step, float)
        T = s.t_touch - s.t_lift
        t_over = s.t_lift + LANDING * T                  # the step is over: only the descent remains
        a = np.array(smoothstep5(t, s.t_lift, t_over))
        pr = -s.press * np.array(smoothstep5(t, t_over, s.t_touch))   # press down after the step, not during
        u = min(max((t - s.t_lift) / T, 0.0), 1.0)
        bump = s.height * np.array([64 * u**3 * (1 - u)**3,
                                    64 * (3 * u**2 * (1 - u)**3 - 3 * u**3 * (1 - u)**2) / T,
                                    64 * (6 * u * (1 - u)**3 - 18 * u**2 * (1 - u)**2 + 6 * u**3 * (1 - u)) / T**2])
        ez = np.array([0.0, 0.0, 1.0])
        return tuple(p + a[i] * d + (bump[i] + pr[i]) * ez for i, p in enumerate((p_lift, np.zeros(3), np.zeros(3))))


def sinusoidal_sway(amplitude: Sequence[float], frequency: Sequence[float], t0: float = 0.0,
                    ramp: float = 0.5) -> Callable[[float], tuple]:
    """θ_i(t) = a_i·σ(t)·sin(2πf_i(t − t0)) for the 6 base coordinates, faded in by a smooth step σ over
    ``ramp`` seconds (so θ̇, θ̈ start at zero). Amplitudes up to MAX_MOVE (m, rad), frequencies in
    [0, MAX_SWAY_HZ] Hz, t0 and ramp finite (ModelError)."""
    a = _vector("sway amplitude", amplitude, 6, MAX_MOVE)
    f = _vector("sway frequency", frequency, 6, MAX_SWAY_HZ)
    if np.any(f < 0):
        raise ModelError(f"sway frequency must be >= 0 Hz, got {frequency!r}")
    w = 2 * np.pi * f
    t0 = _number("sway t0", t0, 0.0, MAX_PLAN_TIME)
    ramp = _number("sway ramp", ramp, 0.0, MAX_PLAN_TIME, low_open=True)

    def sway(t: float):
        tau = t - t0
        if tau <= 0:
            return np.zeros(6), np.zeros(6), np.zeros(6)
        g, gd, gdd = smoothstep5(t, t0, t0 + ramp)
        s, c = np.sin(w * tau), np.cos(w * tau)
        return (a * g * s, a * (gd * s + g * w * c), a * (gdd * s + 2 * gd * w * c - g * w**2 * s))

    return sway


def crawl_steps(feet_xy: dict, order: Sequence[str], step: Sequence[float] = (0.1, 0.0, 0.0), t0: float = 0.5,
                shift_time: float = 0.8, unload: float = 0.3, swing: float = 0.5, load: float = 0.3,
                kappa: float = 0.8, height: float = 0.06) -> list[FootStep]:
    """A statically stable crawl: for each foot of ``order`` in turn, shift the base a fraction ``kappa`` of
    the way from the centre of the four feet to the centre of the other three (the support triangle), step
    the foot by ``step``, and leave the base centred over the new four feet (``advance``). ``feet_xy``: the
    feet's initial horizontal positions (world)."""
    pos = {f: np.asarray(p, float)[:2].copy() for f, p in feet_xy.items()}
    c_init = np.mean(list(pos.values()), axis=0)
    base = np.zeros(2)                  # base reference offset reached by the previous steps
    steps, t = [], t0
    for foot in order:
        c4 = np.mean(list(pos.values()), axis=0)
        c3 = np.mean([p for f, p in pos.items() if f != foot], axis=0)
        shift = (c4 - c_init) + kappa * (c3 - c4) - base
        pos[foot] = pos[foot] + np.asarray(step, float)[:2]
        advance = (np.mean(list(pos.values()), axis=0) - c_init) - base
        t_unload = t + shift_time
        steps.append(FootStep(foot, t_unload, t_unload + unload, t_unload + unload + swing,
                              t_unload + unload + swing + load, step=tuple(step), height=height,
                              shift=(*shift, 0.0), shift_time=shift_time, advance=(*advance, 0.0)))
        base = base + advance
        t = steps[-1].t_loaded
    return steps


def plan_from_spec(feet: Sequence[str], spec: dict | None) -> GaitPlan:
    """A plan from a mapping (YAML ``plan:`` / ROS parameters):

    ``{kind: stance}`` (hold the initial pose), ``{kind: sway, amplitude: [6], frequency: [6], t0, ramp}``
    or ``{kind: step, steps: [{foot, t_unload, t_lift, t_touch, t_loaded, step, height, shift, ...}]}``."""
    spec = dict(spec or {"kind": "stance"})
    kind = spec.pop("kind", "stance")
    keys = {"stance": set(), "sway": {"amplitude", "frequency", "t0", "ramp"}, "step": {"steps"}}.get(kind)
    if keys is not None and set(spec) - keys:
        raise ModelError(f"plan: unknown keys {sorted(map(str, set(spec) - keys))} for kind {kind} "
                         f"(allowed: {sorted(keys)})")
    if kind == "stance":
        return GaitPlan(feet)
    if kind == "sway":
        if "amplitude" not in spec or "frequency" not in spec:
            raise ModelError("plan: kind sway needs amplitude and frequency (6 values each)")
        return GaitPlan(feet, sway=sinusoidal_sway(spec.pop("amplitude"), spec.pop("frequency"),
                                                   spec.pop("t0", 0.0), spec.pop("ramp", 0.5)))
    if kind == "step":
        steps_spec = spec.pop("steps", None)
        if not isinstance(steps_spec, list) or len(steps_spec) > MAX_STEPS:
            raise ModelError(f"plan: steps must be a list of at most {MAX_STEPS} steps, got {type(steps_spec).__name__}"
                             + (f" of {len(steps_spec)}" if isinstance(steps_spec, list) else ""))
        try:
            steps = [FootStep(**dict(st)) for st in steps_spec]
        except (TypeError, KeyError, ValueError) as exc:
            if isinstance(exc, QVError):
                raise
            raise QVError(f"plan: bad step list ({exc}); each step needs foot, t_unload, t_lift, t_touch, "
                          "t_loaded") from None
        return GaitPlan(feet, steps)
    raise QVError(f"plan: kind must be stance, sway or step, got {kind!r} (with extra keys {sorted(spec)})")


__all__ = ["FootStep", "GaitPlan", "crawl_steps", "plan_from_spec", "sinusoidal_sway", "smoothstep5"]
