"""What every whole-tick kernel does before its law: read the packed blocks (:mod:`.layout`), check the state
and the reference, and form the terms from Pinocchio's Coriolis pass (support of the tick kernels: each piece
equals a numpy reference of its own, held by the tick's test).

- :func:`ready` (:func:`inputs_ok`, the tick live, a hold target, D square) and :func:`targets` (θ_d, λ_d):
  the prologue of every whole tick;
- :func:`inputs_ok`: the checks of :meth:`qv_control.laws.base.ControlLaw._read_state` and
  :func:`qv_control.references.validate_reference` (sizes, finite entries and sums of squares, unit-norm parts of
  q within 2e-6 in the squared norm, the joint range of θ_d); False: the numpy path reads them and raises (or
  decides) as it does for any caller.
- :func:`terms`: M, g (:func:`qv_dynamics.kernels.crb.mass_gravity`), h = Cq̇ + g, the frame slots' placements
  (:func:`qv_dynamics.kernels.frame.placements`, written back into ``data.oMf``), their J6, J̇6
  (:func:`qv_dynamics.kernels.frame.frame_rates`), A, Ȧq̇ and Ȧ of the constraint rows.
"""
from __future__ import annotations

import math

from numba import njit

from qv_dynamics.kernels.crb import mass_gravity
from qv_dynamics.kernels.frame import frame_rates, placements, rows_from_slots
from qv_dynamics.kernels.quasi_linalg import alive, borrowed

from .layout import (
    F_ARM,
    F_FPLACE,
    F_GRAV,
    F_HI,
    F_HOLD,
    F_LO,
    F_ST,
    I_FID,
    I_FJOINT,
    I_QUAT,
    I_RPLAN,
    I_SIZES,
    I_SUP,
    I_TREE,
    S_HOLD,
    S_LIVE,
    SZ_K,
    SZ_M,
    SZ_N,
    SZ_NQ,
    SZ_SLOTS,
)


@njit(cache=True, inline="always")
def take(w, o, r, c):
    """Rows × columns of the scratch vector ``w`` from entry ``o`` (a C-contiguous view) and the next free entry."""
    return w[o:o + r * c].reshape((r, c)), o + r * c


@njit(cache=True)
def fm(I, F, h):
    """Float block ``h`` as its (rows × columns) rows of F (a view, no reshape)."""
    o, r, c = I[0, 3 * h], I[0, 3 * h + 1], I[0, 3 * h + 2]
    return F[o:o + r, :c]


@njit(cache=True)
def fv(I, F, h):
    """Float block ``h`` of one row as a vector view of that row."""
    return F[I[0, 3 * h], :I[0, 3 * h + 2]]


@njit(cache=True)
def im(I, h):
    """Int block ``h`` as its (rows × columns) rows of I."""
    o, r, c = I[0, 3 * h], I[0, 3 * h + 1], I[0, 3 * h + 2]
    return I[o:o + r, :c]


@njit(cache=True)
def iv(I, h):
    """Int block ``h`` of one row as a vector view."""
    return I[I[0, 3 * h], :I[0, 3 * h + 2]]


@njit(cache=True)
def _sumsq(x) -> float:
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return s


@njit(cache=True)
def _vector_ok(x, size) -> bool:
    """None, or ``size`` finite entries whose squares sum to a finite number."""
    if x is None:
        return True
    return x.shape[0] == size and math.isfinite(_sumsq(x))


@njit(cache=True)
def state_ok(I, q, qdot, t) -> bool:
    """t finite, q and q̇ of their sizes with finite entries and sums of squares, the unit-norm parts of q within
    2e-6 in the squared norm."""
    sz = iv(I, I_SIZES)
    if not math.isfinite(t) or q.shape[0] != sz[SZ_NQ] or qdot.shape[0] != sz[SZ_N]:
        return False
    if not math.isfinite(_sumsq(q) + _sumsq(qdot)):
        return False
    quat = im(I, I_QUAT)
    for p in range(quat.shape[0]):
        s = 0.0
        for i in range(quat[p, 0], quat[p, 1]):
            s += q[i] * q[i]
        if abs(s - 1.0) > 2e-6:
            return False
    return True


@njit(cache=True)
def inputs_ok(I, F, q, qdot, lam, th, thd, thdd, lamd, t) -> bool:
    """The checks of the module doc (λ_meas, θ_d, θ̇_d, θ̈_d, λ_d may be None)."""
    sz = iv(I, I_SIZES)
    m, k = sz[SZ_M], sz[SZ_K]
    if not state_ok(I, q, qdot, t) or not _vector_ok(lam, m):
        return False
    if not (_vector_ok(th, k) and _vector_ok(thd, k) and _vector_ok(thdd, k) and _vector_ok(lamd, m)):
        return False
    if th is not None:
        lo, hi = fv(I, F, F_LO), fv(I, F, F_HI)
        for i in range(k):
            if th[i] < lo[i] or th[i] > hi[i]:
                return False
    return True


@njit(cache=True, inline="always")
def ready(I, F, q, qdot, lam, th, thd, thdd, lamd, t) -> bool:
    """What a whole tick checks first: :func:`inputs_ok`, the tick live (its state packed), a hold target when the
    reference has no θ_d, and k = n − m (D square)."""
    if not inputs_ok(I, F, q, qdot, lam, th, thd, thdd, lamd, t):
        return False
    sz, st = iv(I, I_SIZES), fv(I, F, F_ST)
    return not (st[S_LIVE] == 0.0 or (th is None and st[S_HOLD] == 0.0) or sz[SZ_K] != sz[SZ_N] - sz[SZ_M])


@njit(cache=True, inline="always")
def targets(I, F, th, lamd, zero):
    """θ_d (the latched hold target when the reference has none) and λ_d (``zero``, m zeros, when none)."""
    th_d = th if th is not None else fv(I, F, F_HOLD)
    lam_d = lamd if lamd is not None else zero
    return th_d, lam_d


@njit(cache=True, inline="always")
def or_zeros(x, zero):
    """``x``, or ``zero`` (zeros of its size) when it is None (θ̇_d, θ̈_d of a reference without them)."""
    return x if x is not None else zero


@njit(cache=True)
def terms(Y, Ct, Jw, dJw, oMi, oMf, I, F, qdot, M, g, h, X, Fr, A, ad, Adot) -> None:
    """M, g, h, the slots' placements X and rates Fr, and A, Ȧq̇, Ȧ of the constraint rows (module doc)."""
    n = qdot.shape[0]
    mass_gravity(Y, Jw, im(I, I_TREE), fv(I, F, F_ARM), fv(I, F, F_GRAV), M, g)
    for i in range(n):
        s = g[i]
        for j in range(n):
            s += Ct[j, i] * qdot[j]
        h[i] = s
    fid = iv(I, I_FID)
    placements(oMi, iv(I, I_FJOINT), fm(I, F, F_FPLACE), X)
    sup = im(I, I_SUP)
    for s in range(fid.shape[0]):
        oMf[fid[s]] = X[s]
        frame_rates(Jw, dJw, X[s, 9:12], sup[s], qdot, Fr[s, :6], Fr[s, 6:])
    rplan = im(I, I_RPLAN)
    rows_from_slots(Fr, rplan, qdot, A, ad)
    for i in range(rplan.shape[0]):
        sa, sb, a = rplan[i, 0], rplan[i, 1], rplan[i, 2]
        for j in range(n):
            Adot[i, j] = Fr[sa, 6 + a, j] - Fr[sb, 6 + a, j] if sb >= 0 else Fr[sa, 6 + a, j]


@njit(cache=True, inline="always")
def scratch_terms(Y, Ct, Jw, dJw, oMi, oMf, I, F, qdot, w):
    """:func:`terms` into blocks of the scratch ``w`` from its start: (M, g, h, X, Fr, A, Ȧq̇, Ȧ, the next free
    entry)."""
    sz = iv(I, I_SIZES)
    n, m, ns = sz[SZ_N], sz[SZ_M], sz[SZ_SLOTS]
    M, o = take(w, 0, n, n)
    X, o = take(w, o, ns, 12)
    A, o = take(w, o, m, n)
    Adot, o = take(w, o, m, n)
    Fr, o = w[o:o + ns * 12 * n].reshape((ns, 12, n)), o + ns * 12 * n
    g, h, ad, o = w[o:o + n], w[o + n:o + 2 * n], w[o + 2 * n:o + 2 * n + m], o + 2 * n + m
    terms(Y, Ct, Jw, dJw, oMi, oMf, I, F, qdot, M, g, h, X, Fr, A, ad, Adot)
    return M, g, h, X, Fr, A, ad, Adot, o


__all__ = ["alive", "borrowed", "fm", "fv", "im", "iv", "inputs_ok", "or_zeros", "ready", "state_ok", "scratch_terms",
           "take", "targets", "terms"]
