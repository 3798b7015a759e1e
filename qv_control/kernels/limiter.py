"""The effort limiter of :func:`qv_control.saturation.saturate` in compiled (numba) code, for the whole-tick
kernels: the same channels, the same order of scaling (motion first, then force, then a clip of the base) and
the same floating-point operations, so that the compiled ticks equal the numpy path to rounding.

τ(α, β) = base + β·force + α·motion; with peak = max |τ_i|/L_i over the finite limits (:func:`peak_ratio`) above 1,
α = the largest s ∈ [0, 1] with |base + force + s·motion| ≤ L (:func:`max_scale`), else β for
|base + s·force| ≤ L with α = 0, else base clipped to ±L. ``stat`` receives (active, α, β, clipped, peak), the
fields of :class:`~qv_control.saturation.SaturationStatus`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_BIG = np.finfo(np.float64).max   # a limit of inf in the scaling (saturate's np.where(isinf(L), max, L))


@njit(cache=True)
def peak_ratio(tau, limits) -> float:
    """max |τ_i|/L_i over the finite L_i, inf at a NaN or a zero limit (as :func:`~qv_control.saturation.saturate`
    computes the peak ratio)."""
    peak = 0.0
    for i in range(tau.shape[0]):
        li = limits[i]
        if li == 0.0:
            return np.inf
        if li < np.inf:
            x = abs(tau[i]) / li
            if not x <= peak:
                peak = x if x == x else np.inf
                if peak == np.inf:
                    break
    return peak


@njit(cache=True)
def max_scale(c, d, limits) -> float:
    """Largest s ∈ [0, 1] with |c + s·d| ≤ L component-wise (L = inf read as the largest float), or −1 if none
    (:func:`qv_control.saturation._max_scale`)."""
    lo, hi = 0.0, 1.0
    for i in range(c.shape[0]):
        ci, di, li = c[i], d[i], limits[i]
        if li == np.inf:
            li = _BIG
        if di > 0:
            lo = max(lo, (-li - ci) / di)
            hi = min(hi, (li - ci) / di)
        elif di < 0:
            lo = max(lo, (li - ci) / di)
            hi = min(hi, (-li - ci) / di)
        elif abs(ci) > li:
            return -1.0
    return hi if lo <= hi + 1e-15 else -1.0


@njit(cache=True)
def saturate(base, force, has_force, motion, limits, has_limits, tau, stat) -> None:
    """τ (into ``tau``) and the status (into ``stat``: active, α, β, clipped, peak) of the module doc;
    ``has_force`` False: no force channel (zero); ``has_limits`` False: τ unscaled, peak 0."""
    n = base.shape[0]
    for i in range(n):
        tau[i] = (base[i] + force[i]) + motion[i] if has_force else base[i] + motion[i]
    stat[0], stat[1], stat[2], stat[3], stat[4] = 0.0, 1.0, 1.0, 0.0, 0.0
    if not has_limits:
        return
    peak = peak_ratio(tau, limits)
    stat[4] = peak
    if peak <= 1.0:
        return
    stat[0] = 1.0
    c = np.empty(n)
    for i in range(n):
        c[i] = base[i] + force[i] if has_force else base[i] + 0.0
    alpha = max_scale(c, motion, limits)
    if alpha >= 0.0:
        for i in range(n):
            tau[i] = c[i] + alpha * motion[i]
        stat[1] = alpha
        return
    stat[1] = 0.0
    beta = max_scale(base, force, limits) if has_force else max_scale(base, np.zeros(n), limits)
    if beta >= 0.0:
        for i in range(n):
            tau[i] = base[i] + beta * force[i] if has_force else base[i] + 0.0
        stat[2] = beta
        return
    stat[2], stat[3] = 0.0, 1.0
    for i in range(n):
        li = _BIG if limits[i] == np.inf else limits[i]
        tau[i] = min(max(base[i], -li), li)
