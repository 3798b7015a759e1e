"""Small dense linear algebra compiled with numba for the simulator's kernels (:mod:`qv_dynamics.kernels.sim`):
matrices of size ≤ ~40, where LAPACK through numpy or numba costs more in calls, copies and workspace queries
than in arithmetic. Each routine is the textbook algorithm LAPACK uses for it (Cholesky, LU with partial
pivoting, substitution), except the SVD: one-sided Jacobi rotations (Hestenes), as accurate as dgesdd.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_EPS = 2.220446049250313e-16  # machine epsilon: Jacobi rotations stop below it


@njit(cache=True)
def finite(x) -> bool:
    for v in x.flat:
        if not math.isfinite(v):
            return False
    return True


@njit(cache=True)
def two_prod(a, b):
    """p = fl(a·b) and the exact error e = a·b − p (Dekker's split, no FMA needed)."""
    p = a * b
    c = 134217729.0 * a  # 2^27 + 1
    ah = c - (c - a)
    al = a - ah
    c = 134217729.0 * b
    bh = c - (c - b)
    bl = b - bh
    return p, al * bl - (((p - ah * bh) - al * bh) - ah * bl)


@njit(cache=True)
def residual(A, x):
    """A x in twice the working precision, rounded once (Ogita–Rump–Oishi Dot2 per row). A q̇ is a sum of
    nearly cancelling terms on the constraint manifold: computed plainly its rounding noise (~1e-16·‖A‖‖q̇‖)
    is what the velocity projection would remove, and near a singular pose of the slider-crank that noise
    pushed the state off the branch by 1e-9 in one second (measured; LAPACK/BLAS with FMA: 1e-12)."""
    m, n = A.shape
    y = np.zeros(m)
    for j in range(m):
        p = s = 0.0
        for k in range(n):
            h, r = two_prod(A[j, k], x[k])
            t = p + h                      # two-sum of p and h: t + q = p + h exactly
            z = t - p
            q = (p - (t - z)) + (h - z)
            p = t
            s += q + r
        y[j] = p + s
    return y


@njit(cache=True)
def mirror_upper(M) -> None:
    """M ← its upper triangle mirrored (CRBA fills the upper triangle only); no change to a symmetric M."""
    for i in range(M.shape[0]):
        for j in range(i):
            M[i, j] = M[j, i]


@njit(cache=True)
def jacobi(B, U) -> None:
    """One-sided Jacobi (Hestenes): rotate pairs of rows of B until all are orthogonal to working precision,
    accumulating the rotations in U, so that B_in = U B_out with U orthogonal."""
    m, n = B.shape
    for _sweep in range(60):
        rotated = False
        for i in range(m - 1):
            for j in range(i + 1, m):
                a = b = g = 0.0
                for k in range(n):
                    a += B[i, k] * B[i, k]
                    b += B[j, k] * B[j, k]
                    g += B[i, k] * B[j, k]
                if g == 0.0 or abs(g) <= _EPS * math.sqrt(a * b):
                    continue
                rotated = True
                zeta = (b - a) / (2.0 * g)
                t = math.copysign(1.0, zeta) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
                c = 1.0 / math.sqrt(1.0 + t * t)
                s = c * t
                for k in range(n):
                    bi, bj = B[i, k], B[j, k]
                    B[i, k] = c * bi - s * bj
                    B[j, k] = s * bi + c * bj
                for k in range(m):
                    ui, uj = U[k, i], U[k, j]
                    U[k, i] = c * ui - s * uj
                    U[k, j] = s * ui + c * uj
        if not rotated:
            return


@njit(cache=True)
def row_svd(A, rtol, atol):
    """Thin SVD A = U diag(σ) Vᵀ by one-sided Jacobi rotations of the rows of A (as accurate as LAPACK's
    dgesdd for these small m × n matrices, without its workspace queries and copies), then the rank rule
    σ > max(rtol·σ₁, atol). Returns (U_r (m×r), σ_r, V₁ (n×r), r), σ in decreasing order."""
    m, n = A.shape
    B = A.copy()
    U = np.zeros((m, m))
    for i in range(m):
        U[i, i] = 1.0
    jacobi(B, U)
    sig = np.empty(m)
    order = np.empty(m, np.int64)
    for i in range(m):
        s2 = 0.0
        for k in range(n):
            s2 += B[i, k] * B[i, k]
        sig[i] = math.sqrt(s2)
        j = i  # insertion into the decreasing order
        while j > 0 and sig[order[j - 1]] < sig[i]:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    tol = max(rtol * sig[order[0]], atol) if m else atol
    r = 0
    while r < m and sig[order[r]] > tol:
        r += 1
    Ur, sr, V1 = np.empty((m, r)), np.empty(r), np.empty((n, r))
    for p in range(r):
        o = order[p]
        sr[p] = sig[o]
        for k in range(m):
            Ur[k, p] = U[k, o]
        for k in range(n):
            V1[k, p] = B[o, k] / sig[o]
    return Ur, sr, V1, r


@njit(cache=True)
def pinv(Ur, sr, V1):
    """A⁺ = V₁ diag(1/σ) U_rᵀ (n × m)."""
    n, r = V1.shape
    m = Ur.shape[0]
    Ap = np.zeros((n, m))
    for p in range(r):
        for i in range(n):
            w = V1[i, p] / sr[p]
            for j in range(m):
                Ap[i, j] += w * Ur[j, p]
    return Ap


@njit(cache=True)
def lu_factor(K, LU, piv) -> bool:
    """K = PLU by partial pivoting into ``LU`` (multipliers below the diagonal) and ``piv`` (the row swapped
    with row j at step j), kept for several right-hand sides (:func:`lu_apply`); the algorithm of LAPACK
    dgetrf. False when a pivot is 0."""
    n = K.shape[0]
    LU[:] = K
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(LU[i, j]) > abs(LU[p, j]):
                p = i
        piv[j] = p
        if LU[p, j] == 0.0:
            return False
        if p != j:
            for t in range(n):
                LU[j, t], LU[p, t] = LU[p, t], LU[j, t]
        for i in range(j + 1, n):
            f = LU[i, j] / LU[j, j]
            LU[i, j] = f
            if f != 0.0:
                for t in range(j + 1, n):
                    LU[i, t] -= f * LU[j, t]
    return True


@njit(cache=True)
def lu_apply(LU, piv, b):
    """K⁻¹b from :func:`lu_factor` (the row swaps in order, forward then back substitution)."""
    x = np.empty(b.shape[0])
    lu_apply_into(LU, piv, b, x)
    return x


@njit(cache=True)
def lu_apply_into(LU, piv, b, x) -> None:
    """x = K⁻¹b from :func:`lu_factor`, in place (``x`` may be ``b``; no allocation)."""
    n = b.shape[0]
    if x is not b:
        x[:] = b
    for j in range(n):
        p = piv[j]
        if p != j:
            x[j], x[p] = x[p], x[j]
    for j in range(n):
        for i in range(j + 1, n):
            f = LU[i, j]
            if f != 0.0:
                x[i] -= f * x[j]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= LU[i, k] * x[k]
        x[i] = s / LU[i, i]


@njit(cache=True)
def lu_solve(K, b, x) -> bool:
    """x = K⁻¹b by LU with partial pivoting (the algorithm of LAPACK dgesv: :func:`lu_factor`, then
    :func:`lu_apply`); False when a pivot is 0."""
    n = K.shape[0]
    LU = np.empty((n, n))
    piv = np.empty(n, np.int64)
    if not lu_factor(K, LU, piv):
        return False
    x[:] = lu_apply(LU, piv, b)
    return True


@njit(cache=True)
def chol_solve(L, b):
    """x = L⁻ᵀL⁻¹b (forward then back substitution)."""
    n = L.shape[0]
    y = np.empty(n)
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * y[k]
        y[i] = s / L[i, i]
    return back_substitute(L, y)


@njit(cache=True)
def upper_solve(U, y):
    """x = U⁻¹y for an upper triangular U (back substitution)."""
    n = U.shape[0]
    x = np.empty(n)
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s -= U[i, k] * x[k]
        x[i] = s / U[i, i]
    return x


@njit(cache=True)
def back_substitute(L, y):
    """x = L⁻ᵀy for a lower triangular L."""
    return upper_solve(L.T, y)
