"""The sampled loops' integral actions in compiled (numba) code, for the whole-tick kernels, each the same
arithmetic as its numpy twin in :mod:`qv_control.laws.integral` and :class:`qv_control.laws.base.ForcePI`, with the
state in the tick's blocks (stamps NaN for "none") and written only when the tick is served:

- :func:`target_error`: e = d_{k−1} − measured (:class:`~qv_control.laws.integral.PreviousTarget`: the target of
  the previous stamp; d_k at the first one; a stamp that does not advance keeps the history);
- :func:`clipped_step`: ForcePI's integral, z ← z + clip(t − t_prev, 0, min(max_dt, GAP_PERIODS·T))·e unless
  frozen (T the smallest positive step seen: the sample period), t_prev ← t;
- :func:`bounded_step`: :class:`~qv_control.laws.integral.BoundedIntegral`, a step only for 0 < t − t_prev ≤
  max_dt unless frozen, ‖gain·z‖ ≤ limit, t_prev follows the stamps forward only;
- :func:`pi_step`, :func:`pi_commit`: the whole ForcePI with its state in a tick's blocks (:mod:`.layout`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import layout as L


@njit(cache=True)
def target_error(t_hist, has_prev, d_t, d_p, t, desired, measured, e) -> int:
    """e = (target of the previous stamp or ``desired``) − ``measured`` into ``e``; returns how the history moves
    (0 kept, 1 started, 2 advanced), for :func:`target_commit`."""
    case = 1 if t_hist != t_hist else 2 if t > t_hist else 0
    for i in range(e.shape[0]):
        if case == 2:
            e[i] = d_t[i] - measured[i]
        elif case == 0 and has_prev:
            e[i] = d_p[i] - measured[i]
        else:
            e[i] = desired[i] - measured[i]
    return case


@njit(cache=True)
def target_commit(case, d_t, d_p, desired) -> None:
    """The history after :func:`target_error` (the caller sets its stamp to t and its has-previous flag to
    case == 2 when case ≠ 0)."""
    if case == 2:
        d_p[:] = d_t
    if case:
        d_t[:] = desired


@njit(cache=True)
def clipped_step(z, valid, t_prev, t, e, max_dt, frozen, out, period):
    """ForcePI's ∫e into ``out`` from (z if ``valid``, its stamp ``t_prev``) with the sample period ``period``
    seen so far; returns the new stamp (t) and period."""
    if valid:
        out[:] = z
    else:
        out[:] = 0.0
        t_prev = np.nan
    if t_prev == t_prev and not frozen:
        step = t - t_prev
        if 0.0 < step < period:
            period = step
        dt = min(max(step, 0.0), max_dt, L.GAP_PERIODS * period)
        if dt > 0.0:
            for i in range(out.shape[0]):
                out[i] = out[i] + dt * e[i]
    return t, period


@njit(cache=True)
def bounded_step(z, valid, t_prev, t, e, gain, limit, max_dt, frozen, out) -> float:
    """BoundedIntegral's z into ``out`` from (z if ``valid``, its stamp ``t_prev``); returns the new stamp."""
    if valid:
        out[:] = z
    else:
        out[:] = 0.0
        t_prev = np.nan
    if t_prev == t_prev and not frozen:
        dt = t - t_prev
        if 0.0 < dt <= max_dt:
            s = 0.0
            for i in range(out.shape[0]):
                out[i] = out[i] + dt * e[i]
                s += out[i] * out[i]
            nrm = gain * math.sqrt(s)
            if nrm > limit:
                for i in range(out.shape[0]):
                    out[i] *= limit / nrm
    return t if (t_prev != t_prev or t > t_prev) else t_prev


@njit(cache=True)
def pi_step(st, par, z, d_t, d_p, t, desired, measured, out, zn):
    """The force PI of :class:`qv_control.laws.base.ForcePI` (its PreviousTarget, then its update) with the state
    in ``st``, ``z``, ``d_t``, ``d_p`` left unchanged: the new ∫e into ``zn``, k_f e + k_i∫e into ``out`` (PI on);
    returns (target case, ∫e stamp, ∫e exists) for :func:`pi_commit`."""
    e = np.empty(desired.shape[0])
    case = target_error(st[L.S_HIST_T], st[L.S_HIST_PREV] != 0.0, d_t, d_p, t, desired, measured, e)
    pt, zv = st[L.S_PI_T], st[L.S_PI_Z]
    st[L.S_PI_PERIOD_NEXT] = st[L.S_PI_PERIOD]   # a scratch slot: the period is committed with the tick
    if par[L.P_PI_ON] != 0.0:
        pt, st[L.S_PI_PERIOD_NEXT] = clipped_step(z, zv != 0.0, pt, t, e, par[L.P_PI_DT],
                                                  st[L.S_FORCE_FROZEN] != 0.0, zn, st[L.S_PI_PERIOD])
        zv = 1.0
        for i in range(e.shape[0]):
            out[i] = par[L.P_KF] * e[i] + par[L.P_KI] * zn[i]
    return case, pt, zv


@njit(cache=True)
def pi_commit(st, z, d_t, d_p, case, zn, pt, zv, desired, t, pi_on) -> None:
    """Write what :func:`pi_step` returned into the state."""
    target_commit(case, d_t, d_p, desired)
    if case:
        st[L.S_HIST_T], st[L.S_HIST_PREV] = t, 1.0 if case == 2 else 0.0
    if pi_on:
        z[:] = zn
        st[L.S_PI_PERIOD] = st[L.S_PI_PERIOD_NEXT]
    st[L.S_PI_T], st[L.S_PI_Z] = pt, zv
