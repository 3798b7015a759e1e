"""A bounded integral action of a sampled loop, shared by the motion integral of the quasi-velocity law and
the internal-force PI of the passive-joint law."""
from __future__ import annotations

import math

import numpy as np


class BoundedIntegral:
    """z ≈ ∫e dt, advanced by z ← z + dt·e with dt = t − t_prev from the samples' time stamps, and made safe
    for a real loop:

    - a step only for 0 < dt ≤ ``max_dt`` (a repeated or backward stamp, or a gap, integrates nothing);
      t_prev follows the stamps forward only;
    - no step while ``freeze`` is set (anti-windup: the limiter scaled this channel);
    - ‖gain·z‖ ≤ ``limit`` (z scaled back along its direction after each step);
    - restarted (z = 0, no t_prev) by :meth:`reset` or when e changes size.

    :meth:`step` returns gain·z."""

    def __init__(self, gain: float, limit: float = math.inf, max_dt: float = 0.1):
        self.gain, self.limit, self.max_dt = float(gain), float(limit), float(max_dt)
        self.reset()

    def reset(self) -> None:
        self.z: np.ndarray | None = None
        self.t_prev: float | None = None

    def step(self, t: float, e: np.ndarray, freeze: bool = False) -> np.ndarray:
        if self.z is None or self.z.shape != e.shape:
            self.z, self.t_prev = np.zeros_like(e), None
        if self.t_prev is not None and not freeze:
            dt = t - self.t_prev
            if 0.0 < dt <= self.max_dt:
                self.z = self.z + dt * e
                nrm = self.gain * float(np.linalg.norm(self.z))
                if nrm > self.limit:
                    self.z *= self.limit / nrm
        if self.t_prev is None or t > self.t_prev:
            self.t_prev = t
        return self.gain * self.z


__all__ = ["BoundedIntegral"]
