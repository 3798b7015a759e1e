"""Small dense linear algebra compiled with numba for the quasi-velocity kernel (:mod:`qv_dynamics.quasi_kernel`),
sized for n ≤ ~40: loops where a BLAS call through numba (~0.3 µs) would cost more than the arithmetic, BLAS
(numba's ``np.dot``) for the larger products, and Cholesky with the triangular inverse in 2 × 2 blocks above
BLOCKED_N, so that the n³ work runs in BLAS and the loops stay short. Same algorithms as LAPACK's (dpotf2,
forward substitution, one-sided Jacobi for singular values): results equal LAPACK's to rounding.

numba keys the kernel's disk cache on :mod:`qv_dynamics.quasi_kernel`'s source only; the loader
(:func:`qv_dynamics.compiled.kernel_sources`) also watches this file, so after editing it the laws take the numpy
path until ``qv warm`` recompiles.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

#: products with fewer multiply-adds than this run in loops (a BLAS call through numba costs ~0.3 µs)
SMALL_PRODUCT = 4096


@njit(cache=True)
def mm(A, B):
    """A·B: loops for a small product, BLAS (numba's ``np.dot``) otherwise."""
    p, r = A.shape
    c = B.shape[1]
    if p * r * c >= SMALL_PRODUCT:
        return np.dot(np.ascontiguousarray(A), np.ascontiguousarray(B))
    out = np.zeros((p, c))
    for i in range(p):
        for k in range(r):
            a = A[i, k]
            for j in range(c):
                out[i, j] += a * B[k, j]
    return out


@njit(cache=True)
def mv(A, x):
    """A·x in loops (rows of A; Aᵀ·x as ``mv(A.T, x)``)."""
    p, r = A.shape
    y = np.zeros(p)
    for i in range(p):
        s = 0.0
        for k in range(r):
            s += A[i, k] * x[k]
        y[i] = s
    return y


#: below this size Cholesky and the triangular inverse run in plain loops; above, in 2 × 2 blocks
BLOCKED_N = 24


@njit(cache=True)
def cholesky(M, Q) -> bool:
    """Q lower with M = QQᵀ from the upper triangle of M (row-oriented dpotf2: each entry's sums in LAPACK's
    order); False when not positive definite. The one compiled Cholesky (the simulator's stages use it too)."""
    n = M.shape[0]
    for i in range(n):
        qi = Q[i]
        for j in range(i + 1):
            qj = Q[j]
            s = M[j, i]
            for k in range(j):
                s -= qi[k] * qj[k]
            if i == j:
                if not s > 0.0:
                    return False
                qi[i] = math.sqrt(s)
            else:
                qi[j] = s / qj[j]
        for j in range(i + 1, n):
            qi[j] = 0.0
    return True


@njit(cache=True)
def _inv_loops(Q, Qi) -> None:
    """Qi = Q⁻¹ of a lower-triangular Q (forward substitution, row by row)."""
    n = Q.shape[0]
    for i in range(n):
        for j in range(i + 1, n):
            Qi[i, j] = 0.0
        d = Q[i, i]
        Qi[i, i] = 1.0 / d
        for j in range(i):
            s = 0.0
            for k in range(j, i):
                s += Q[i, k] * Qi[k, j]
            Qi[i, j] = -s / d


@njit(cache=True)
def cholesky_inverse(M, Q, Qi) -> bool:
    """Q lower with M = QQᵀ (read from the upper triangle of M) and Qi = Q⁻¹; False when M is not positive
    definite. Above BLOCKED_N in 2 × 2 blocks, recursively: Q₁₁ = chol(M₁₁), Q₂₁ = M₂₁Q₁₁⁻ᵀ,
    Q₂₂ = chol(M₂₂ − Q₂₁Q₂₁ᵀ), (Q⁻¹)₂₁ = −Q₂₂⁻¹Q₂₁Q₁₁⁻¹ (the products in BLAS)."""
    n = M.shape[0]
    if n < BLOCKED_N:
        if not cholesky(M, Q):
            return False
        _inv_loops(Q, Qi)
        return True
    h = n // 2
    Q11, I11 = np.empty((h, h)), np.empty((h, h))
    if not cholesky_inverse(np.ascontiguousarray(M[:h, :h]), Q11, I11):
        return False
    Q21 = mm(M[:h, h:].T, I11.T)
    S = mm(Q21, Q21.T)
    for i in range(n - h):
        for j in range(i, n - h):
            S[i, j] = M[h + i, h + j] - S[i, j]
    Q22, I22 = np.empty((n - h, n - h)), np.empty((n - h, n - h))
    if not cholesky_inverse(S, Q22, I22):
        return False
    Q[:h, :h] = Q11
    Q[:h, h:] = 0.0
    Q[h:, :h] = Q21
    Q[h:, h:] = Q22
    Qi[:h, :h] = I11
    Qi[:h, h:] = 0.0
    Qi[h:, h:] = I22
    Qi[h:, :h] = -mm(mm(I22, Q21), I11)
    return True


@njit(cache=True)
def full_rank(R, Ri, frob, rtol, atol) -> bool:
    """R⁻¹ of an upper-triangular m × m R into Ri (back substitution) and the full-rank certificate of the
    matrix whose R it is: σ_min ≥ 1/‖R⁻¹‖_F > max(rtol·‖·‖_F, atol) ≥ max(rtol·σ₁, atol), ``frob`` = ‖·‖_F."""
    m = R.shape[0]
    rf = 0.0
    for j in range(m - 1, -1, -1):
        if R[j, j] == 0.0:
            return False
        Ri[j, j] = 1.0 / R[j, j]
        for i in range(j - 1, -1, -1):
            s = 0.0
            for k in range(i + 1, j + 1):
                s += R[i, k] * Ri[k, j]
            Ri[i, j] = -s / R[i, i]
        for i in range(j + 1):
            rf += Ri[i, j] * Ri[i, j]
    return 1.0 > math.sqrt(rf) * max(rtol * frob, atol)


@njit(cache=True)
def singular_values(R, U, S) -> None:
    """Singular values of a square R into S, descending: one-sided Jacobi (Hestenes) rotations of the rows of
    B = UᵀR until they are orthogonal to working precision (as accurate as LAPACK's dgesdd), then their norms.
    U (orthogonal) is updated in place so that B = UᵀR still holds: started from the previous sample's U,
    B's rows are nearly orthogonal already (cosines ~1e-3 at 1 kHz) and three sweeps suffice instead of ~6.
    Convergence is quadratic: a sweep whose largest cosine is below 1e-8 leaves them below ~1e-16, so it is
    the last (no sweep only to confirm)."""
    m = R.shape[0]
    B = mm(U.T, R)
    Ut = np.ascontiguousarray(U.T)  # rows of Uᵀ rotate like rows of B (contiguous)
    nrm = np.empty(m)
    for _ in range(60):
        for i in range(m):  # squared row norms, exact at each sweep's start, then updated per rotation
            s = 0.0
            for k in range(m):
                s += B[i, k] * B[i, k]
            nrm[i] = s
        rotated = False
        worst = 0.0
        for i in range(m - 1):
            bi, ui = B[i], Ut[i]
            for j in range(i + 1, m):
                bj, uj = B[j], Ut[j]
                c = 0.0
                for k in range(m):
                    c += bi[k] * bj[k]
                a, b = nrm[i], nrm[j]
                ab = math.sqrt(a * b)
                if c == 0.0 or abs(c) <= 2.220446049250313e-16 * ab:
                    continue
                rotated = True
                worst = max(worst, abs(c) / ab)
                zeta = (b - a) / (2.0 * c)
                t = math.copysign(1.0, zeta) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                cs = 1.0 / math.sqrt(1.0 + t * t)
                sn = cs * t
                nrm[i], nrm[j] = a - t * c, b + t * c  # the rotated rows' squared norms
                for k in range(m):
                    x, y = bi[k], bj[k]
                    bi[k] = cs * x - sn * y
                    bj[k] = sn * x + cs * y
                    x, y = ui[k], uj[k]
                    ui[k] = cs * x - sn * y
                    uj[k] = sn * x + cs * y
        if not rotated or worst < 1e-8:
            break
    U[:] = Ut.T
    for i in range(m):
        s = 0.0
        for k in range(m):
            s += B[i, k] * B[i, k]
        S[i] = math.sqrt(s)
    S.sort()
    S[:] = S[::-1].copy()
