"""The aligned bases of the steady-state decomposition in compiled (numba) code, for :mod:`.quasi`: Λᵀ = ZR
(Gram–Schmidt twice, the full-rank certificate), V₁ = Z·polar(ZᵀV₁_prev), V₂ = polar((I − ZZᵀ)V₂_prev) by
Newton–Schulz, and for one row the closed form. The numpy twin is :func:`qv_dynamics.quasi_basis.aligned_basis`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .quasi_linalg import dot, full_rank, mm, mmt

NS_START, NS_MAX_ITER = 0.5, 8  # as qv_dynamics.quasi_basis.near_polar
SERIES_E = 1e-4                  # below it the polar factor's series to third order is exact to rounding
SERIES2_E = 5e-6                 # below it the second order is: remainder 5/16‖E‖³ < 4e-17


@njit(cache=True)
def _newton_schulz(X) -> bool:
    """X ← polar(X) = X(I + E)^-½, E = XᵀX − I, in place (False: ‖E‖_F ≥ NS_START or no convergence): once
    ‖E‖_F < SERIES_E, in one step X(I − ½E + ⅜E² − 5/16E³) (the binomial series' remainder ≤ 0.28‖E‖⁴/(1 − ‖E‖)
    < 3e-17), below SERIES2_E without its last term (remainder < 4e-17: one k³ product less), else first
    Newton–Schulz steps X ← X − ½XE (quadratic). At a 1 kHz sample rate ‖E‖ ~ 1e-6 (2e-6 measured on Talos),
    so the one step serves."""
    k = X.shape[1]
    E = np.empty((k, k))
    for _ in range(NS_MAX_ITER):
        mmt(True, False, 1.0, X, X, 0.0, E)                 # XᵀX
        e2 = 0.0
        for i in range(k):
            E[i, i] -= 1.0
            for j in range(k):
                e2 += E[i, j] * E[i, j]
        e = math.sqrt(e2)
        if not e < NS_START:
            return False
        if e == 0.0:
            return True
        if e < SERIES_E:  # −½E + ⅜E² − 5/16E³ = E(−½I + E(⅜I − 5/16E)) (Horner)
            if e < SERIES2_E:
                P = 0.375 * E
            else:
                T = -0.3125 * E
                for i in range(k):
                    T[i, i] += 0.375
                P = mm(E, T)
            for i in range(k):
                P[i, i] -= 0.5
            X += mm(X, mm(E, P))
            return True
        X -= 0.5 * mm(X, E)
    return False


@njit(cache=True)
def _row_space(Lam, Zt, R, Ri, rtol, atol) -> bool:
    """Λᵀ = ZR (classical Gram–Schmidt on the rows of Λ, each orthogonalised twice — "twice is enough": as
    orthogonal as modified Gram–Schmidt twice, and a row's i dot products are independent, so the CPU overlaps
    them; Zt = Zᵀ), R⁻¹, the certificate."""
    m, n = Lam.shape
    lf = 0.0
    for i in range(m):
        for j in range(n):
            Zt[i, j] = Lam[i, j]
            lf += Lam[i, j] * Lam[i, j]
    s = np.empty(m)
    for i in range(m):
        zi = Zt[i]
        for _ in range(2):
            for p in range(i):
                s[p] = dot(Zt[p], zi)
            for p in range(i):
                R[p, i] += s[p]
                zp, c = Zt[p], s[p]
                for j in range(n):
                    zi[j] -= c * zp[j]
        d = math.sqrt(dot(zi, zi))
        if not d > 0.0:
            return False
        R[i, i] = d
        for j in range(n):
            zi[j] /= d
    return full_rank(R, Ri, math.sqrt(lf), rtol, atol)


@njit(cache=True)
def _one_row(Lam, Vp, atol, R, V, W1):
    """:func:`_basis` for one row in closed form (:func:`qv_dynamics.quasi_basis._aligned_one_row`): σ = ‖Λ‖,
    z = Λᵀ/σ, V₁ = ±z, W₁ = ±1/σ, V₂ = Y + (γ/β²)(Yb)bᵀ with b = V₂_prevᵀz, Y = V₂_prev − zbᵀ, β² = bᵀb,
    γ = (1 − β²)^-½ − 1 (the polar factor of Y, as Newton–Schulz converges to)."""
    n = Lam.shape[1]
    k = n - 1
    lam = Lam[0]
    sig = math.sqrt(dot(lam, lam))
    Y = np.empty((n, k))
    if not sig > atol:
        return False, Y
    z = lam / sig
    x = 0.0
    for i in range(n):
        x += z[i] * Vp[i, 0]
    if not abs(x) > 1.0 - NS_START:
        return False, Y
    sgn = 1.0 if x > 0.0 else -1.0
    b = np.zeros(k)
    for i in range(n):
        zi = z[i]
        for j in range(k):
            b[j] += zi * Vp[i, 1 + j]
    b2 = dot(b, b)
    if not b2 < NS_START:
        return False, Y
    ratio = math.expm1(-0.5 * math.log1p(-b2)) / b2 if b2 > 0.0 else 0.5
    for i in range(n):
        V[i, 0] = sgn * z[i]
        yb = 0.0
        for j in range(k):
            Y[i, j] = Vp[i, 1 + j] - z[i] * b[j]
            yb += Y[i, j] * b[j]
        yb *= ratio
        for j in range(k):
            Y[i, j] += yb * b[j]
            V[i, 1 + j] = Y[i, j]
    R[0, 0] = sig
    W1[0, 0] = sgn / sig
    return True, Y


@njit(cache=True)
def _basis(Lam, Vp, rtol, atol, R, V, W1):
    """V = [V₁ V₂] aligned to Vp (module doc), W₁ = (R⁻¹P₁)ᵀ, Λᵀ = ZR. Returns (ok, V₂ as a contiguous copy);
    not ok when the numpy path decides."""
    m, n = Lam.shape
    if m == 1 and n > 1:
        return _one_row(Lam, Vp, atol, R, V, W1)
    Y = np.ascontiguousarray(Vp[:, m:])
    if m:
        Zt = np.empty((m, n))
        Ri = np.zeros((m, m))
        if not _row_space(Lam, Zt, R, Ri, rtol, atol):
            return False, Y
        P1 = np.empty((m, m))
        mmt(False, False, 1.0, Zt, Vp[:, :m], 0.0, P1)    # ZᵀV₁_prev
        if not _newton_schulz(P1):
            return False, Y
        mmt(True, False, 1.0, Zt, P1, 0.0, V[:, :m])      # V₁ = Z·polar(ZᵀV₁_prev)
        W1[:] = mm(Ri, P1).T
        if m < n:
            B = np.empty((m, n - m))
            mmt(False, False, 1.0, Zt, Y, 0.0, B)
            mmt(True, False, -1.0, Zt, B, 1.0, Y)           # (I − ZZᵀ)V₂_prev
    if m < n:
        if not _newton_schulz(Y):
            return False, Y
        V[:, m:] = Y
    return True, Y
