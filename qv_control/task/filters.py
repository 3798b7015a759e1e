"""Measurement conditioning for the contact task: a first-order low-pass (the F/T force) and the contact
detector with hysteresis.

Low-pass: y_k = y_{k−1} + α(x_k − y_{k−1}), α = 1 − exp(−2π f_c Δt) (f_c = 0: pass-through).

Contact detection from the normal force f_n ≥ 0 (pressing): contact is declared when f_n > ``on``; it is
declared lost when f_n < ``off`` (< ``on``) has held for ``off_time`` s. The gap between the thresholds
and the time filter keep one bounce or a noisy sample from toggling the constraint set.
"""
from __future__ import annotations

import math

import numpy as np

from qv_dynamics.errors import ModelError


class LowPass:
    """First-order low-pass of ``cutoff_hz`` at sample period ``dt`` (module doc)."""

    def __init__(self, cutoff_hz: float, dt: float):
        if not (math.isfinite(cutoff_hz) and cutoff_hz >= 0 and math.isfinite(dt) and dt > 0):
            raise ModelError(f"LowPass: cutoff_hz must be >= 0 and dt > 0, got {cutoff_hz!r}, {dt!r}")
        self.alpha = 1.0 if cutoff_hz <= 0 else 1.0 - math.exp(-2 * math.pi * cutoff_hz * dt)
        self.y: np.ndarray | None = None

    def __call__(self, x) -> np.ndarray:
        x = np.asarray(x, float)
        self.y = x.copy() if self.y is None else self.y + self.alpha * (x - self.y)
        return self.y.copy()

    def reset(self) -> None:
        self.y = None


class ContactDetector:
    """Hysteresis on the normal force (module doc): ``made(fn)`` on the rising side, ``lost(t, fn)`` on
    the falling side (True once f_n < ``off`` has lasted ``off_time``)."""

    def __init__(self, on: float = 2.0, off: float = 0.5, off_time: float = 0.003):
        if not (0 <= off < on and math.isfinite(on) and off_time >= 0):
            raise ModelError(f"contact thresholds need 0 <= off < on and off_time >= 0, got on={on!r}, "
                             f"off={off!r}, off_time={off_time!r}")
        self.on, self.off, self.off_time = float(on), float(off), float(off_time)
        self.off_since: float | None = None

    def made(self, fn: float) -> bool:
        return fn > self.on

    def low(self, t: float, fn: float) -> bool:
        """f_n below ``off`` now (starts or continues the off timer)."""
        if fn < self.off:
            self.off_since = t if self.off_since is None else self.off_since
            return True
        self.off_since = None
        return False

    def lost(self, t: float, fn: float) -> bool:
        return self.low(t, fn) and t - self.off_since >= self.off_time

    def reset(self) -> None:
        self.off_since = None


__all__ = ["ContactDetector", "LowPass"]
