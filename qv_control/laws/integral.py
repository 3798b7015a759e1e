"""Pieces of the sampled loops' integral actions: a bounded integral (shared by the motion integral of the
quasi-velocity law and the internal-force PI of the passive-joint law) and the error of a force loop whose
reading is one sample old (shared by :class:`qv_control.laws.base.ForcePI` and the internal-force PI)."""
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


class PreviousTarget:
    """The error of a force loop whose reading is one sample old: e_k = d_{k−1} − measured_k.

    A force sensor (or the plant's multiplier) reports the force produced under the previous command, whose
    target was d_{k−1}; comparing it with the new target d_k would feed a step of the target through the PI
    (k_f·Δ + k_i·dt·Δ on top of the feedforward that already delivers the step). :meth:`error` therefore uses
    the target of the previous sample (d_k at the first sample, after a reset, or when the size changes).
    Samples are told apart by their time stamps: repeated calls at the same t are idempotent, and a stamp that
    does not advance keeps the history."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._hist: tuple[float, np.ndarray, np.ndarray | None] | None = None  # (t, d_t, d_previous)

    def error(self, t: float, desired, measured) -> np.ndarray:
        desired = np.asarray(desired, float)
        h = self._hist
        if h is None or h[1].shape != desired.shape:
            self._hist = (t, desired.copy(), None)
        elif t > h[0]:
            self._hist = (t, desired.copy(), h[1])
        prev = self._hist[2]
        return (desired if prev is None else prev) - measured


def export_pi(pi, ct) -> None:
    """The compiled tick's force-PI state (:mod:`qv_control.kernels.quasi_tick`) into ``pi``."""
    from ..kernels import layout as L

    st = ct.state
    pi.z = ct.vector(L.F_PIZ).copy() if st[L.S_PI_Z] else None
    pi.t_prev = None if math.isnan(st[L.S_PI_T]) else float(st[L.S_PI_T])
    pi.period = float(st[L.S_PI_PERIOD])
    ht = st[L.S_HIST_T]
    pi._target._hist = None if math.isnan(ht) else (
        float(ht), ct.vector(L.F_PID).copy(), ct.vector(L.F_PIDP).copy() if st[L.S_HIST_PREV] else None)


def import_pi(pi, ct) -> None:
    """``pi``'s state into the compiled tick (the target history and ∫e only when they have the size of its block)."""
    from ..kernels import layout as L

    st, m = ct.state, ct.vector(L.F_PIZ).shape[0]
    ok = pi.z is not None and pi.z.shape == (m,)
    st[L.S_PI_Z] = ok
    if ok:
        ct.vector(L.F_PIZ)[:] = pi.z
    st[L.S_PI_T] = np.nan if pi.t_prev is None or not ok else pi.t_prev
    st[L.S_PI_PERIOD] = pi.period
    h = pi._target._hist
    if h is None or h[1].shape != (m,):
        st[L.S_HIST_T], st[L.S_HIST_PREV] = np.nan, 0.0
        return
    st[L.S_HIST_T] = h[0]
    ct.vector(L.F_PID)[:] = h[1]
    st[L.S_HIST_PREV] = h[2] is not None
    if h[2] is not None:
        ct.vector(L.F_PIDP)[:] = h[2]


__all__ = ["BoundedIntegral", "PreviousTarget", "export_pi", "import_pi"]
