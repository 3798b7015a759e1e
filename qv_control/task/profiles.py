"""Time profiles of the contact task, in seconds from the first touch-down: the commanded normal force
F_d(t) (steps, optionally smoothed) and the tangential trace on the surface (a circle or task-space
waypoints).

Smooth step s(x) = x²(3 − 2x) on [0, 1] (C¹). Force: F_d = F₀ until the first step; each step
(t_i, F_i) moves F_d from the value before it to F_i over ``step_ramp`` s (0: a true step).

Circle of radius r and period T around c = p₀ − r e_x, entered with a phase ramp of length T_r so the
speed rises from zero without a jerk step: φ(τ) = ωT_r(x³ − x⁴/2), φ̇ = ω(3x² − 2x³), x = τ/T_r (τ < T_r),
then φ = ω(T_r/2 + τ − T_r); p = c + r(cos φ, sin φ).

Waypoints w₀ = p₀, w₁, …, w_N (x, y) joined by minimum-jerk segments of ``segment_time`` s each:
p = w_a + (w_b − w_a)σ(u), σ = 10u³ − 15u⁴ + 6u⁵, u = τ/T_s (zero velocity and acceleration at each
waypoint), then held at w_N.
"""
from __future__ import annotations

import math

import numpy as np

from qv_dynamics.errors import ModelError

#: a time within this of a switching instant counts as at it [s]: a state stamped in integer nanoseconds and a
#: simulator's float time then switch at the same sample
EPS = 1e-9


def smooth(x: float) -> float:
    """s(x) = x²(3 − 2x) clamped to [0, 1]."""
    x = min(max(x, 0.0), 1.0)
    return x * x * (3 - 2 * x)


class ForceProfile:
    """F_d(τ) ≥ 0 from the first touch-down (module doc): ``force`` then ``steps`` [(τ_i, F_i), ...]."""

    def __init__(self, force: float, steps=(), step_ramp: float = 0.0):
        self.force = float(force)
        self.steps = sorted((float(t), float(f)) for t, f in steps)
        self.step_ramp = float(step_ramp)
        for f in [self.force] + [f for _, f in self.steps]:
            if not (math.isfinite(f) and f > 0):
                raise ModelError(f"force profile: every force must be a positive number of N, got {f!r}")

    @property
    def max_force(self) -> float:
        return max([self.force] + [f for _, f in self.steps])

    def max_over(self, a: float, b: float) -> float:
        """max F_d(τ) over τ ∈ [a, b]: F_d is monotonic between the step times and the ends of their ramps,
        so the largest value is at one of them or at an end."""
        times = [a, b] + [t for t_i, _ in self.steps for t in (t_i, t_i + self.step_ramp) if a < t < b]
        return max(self(t) for t in times)

    def __call__(self, tau: float) -> float:
        value = self.force
        for t_i, f_i in self.steps:
            if tau < t_i - EPS:
                break
            x = 1.0 if self.step_ramp <= 0 else smooth((tau - t_i) / self.step_ramp)
            value = value + (f_i - value) * x
        return value


class CircleTrace:
    """The circle of radius ``radius``, period ``period``, entered over ``ramp`` s (module doc)."""

    kind = "circle"

    def __init__(self, p0_xy, radius: float, period: float, ramp: float):
        if not (radius > 0 and period > 0 and ramp > 0):
            raise ModelError(f"circle trace: radius, period and ramp must be positive, got {radius}, {period}, {ramp}")
        self.r, self.w, self.Tr = float(radius), 2 * math.pi / float(period), float(ramp)
        self.center = np.asarray(p0_xy, float)[:2] - np.array([self.r, 0.0])
        self.duration = math.inf

    def points(self) -> np.ndarray:
        """Sample points of the whole path (for reachability checks)."""
        phi = np.linspace(0, 2 * math.pi, 17)
        return self.center + self.r * np.stack([np.cos(phi), np.sin(phi)], axis=1)

    def __call__(self, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        w, Tr, r = self.w, self.Tr, self.r
        if tau <= 0:
            return self.center + np.array([r, 0.0]), np.zeros(2), np.zeros(2)
        if tau < Tr:
            x = tau / Tr
            phi, phid = w * Tr * (x ** 3 - 0.5 * x ** 4), w * (3 * x ** 2 - 2 * x ** 3)
            phidd = w * (6 * x - 6 * x ** 2) / Tr
        else:
            phi, phid, phidd = w * (0.5 * Tr + tau - Tr), w, 0.0
        cs, sn = math.cos(phi), math.sin(phi)
        u, n = np.array([-sn, cs]), np.array([cs, sn])
        return self.center + r * n, r * phid * u, r * phidd * u - r * phid ** 2 * n


class WaypointTrace:
    """Minimum-jerk segments p₀ → w₁ → … → w_N of ``segment_time`` s each (module doc)."""

    kind = "waypoints"

    def __init__(self, p0_xy, waypoints, segment_time: float):
        w = np.asarray(waypoints, float).reshape(-1, 2)
        if not w.size or not np.all(np.isfinite(w)) or not segment_time > 0:
            raise ModelError("waypoint trace: give finite (x, y) waypoints and a positive segment_time")
        self.w = np.vstack([np.asarray(p0_xy, float)[:2], w])
        self.Ts = float(segment_time)
        self.duration = self.Ts * (len(self.w) - 1)

    def points(self) -> np.ndarray:
        return self.w.copy()

    def __call__(self, tau: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if tau <= 0:
            return self.w[0].copy(), np.zeros(2), np.zeros(2)
        k = int(tau // self.Ts)
        if k >= len(self.w) - 1:
            return self.w[-1].copy(), np.zeros(2), np.zeros(2)
        u = tau / self.Ts - k
        d = self.w[k + 1] - self.w[k]
        s = u ** 3 * (10 - 15 * u + 6 * u * u)
        sd = 30 * u * u * (1 - u) ** 2 / self.Ts
        sdd = 60 * u * (1 - 3 * u + 2 * u * u) / self.Ts ** 2
        return self.w[k] + d * s, d * sd, d * sdd


__all__ = ["EPS", "CircleTrace", "ForceProfile", "WaypointTrace", "smooth"]
