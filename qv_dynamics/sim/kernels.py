"""Compiled (numba) numerics of the simulator's projection method: the same equations and the same
LAPACK factorizations as the reference path (:func:`qv_dynamics.projection.direct_dynamics_rank`,
:func:`qv_dynamics.impact.m_projection`, :func:`qv_dynamics.projection.pinv_basis`), one call each instead
of ~30 numpy calls, so an RK4 stage costs Pinocchio's kinematics plus a few microseconds.

- :func:`projection_accel`: M_c q̈ = P(τ − h) + M a⊥, M_c = M + PM − MP, a⊥ = −A⁺Ȧq̇ (eq. 22–25);
  P = I − V₁V₁ᵀ from a thin SVD of A with the rank rule σᵢ > max(rtol·σ₁, atol) (eq. 15), one row
  without an SVD (σ = ‖A‖); λ = A⁺ᵀF, F = V₁V₁ᵀ(τ − h − Mq̈) (minimum-norm multiplier, Remark 4).
- :func:`m_project`: q̇⁺ = q̇ − L⁻ᵀΛ⁺Aq̇, Λ = AL⁻ᵀ, M = LLᵀ (kinetic-metric projection N_c q̇), plus
  ‖Aq̇⁺‖ and ½q̇⁺ᵀMq̇⁺.

Kernels return a status instead of raising (OK, NONFINITE, NOT_PD, SINGULAR); the caller raises the
package's error. Compiled once, cached on disk (``cache=True``; ``python -m qv_dynamics.sim.kernels`` warms
the cache at install, see scripts/setup.sh).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

OK, NONFINITE, NOT_PD, SINGULAR = 0, 1, 2, 3
_EPS = 2.220446049250313e-16  # machine epsilon: Jacobi rotations stop below it


@njit(cache=True)
def _finite(x) -> bool:
    for v in x.flat:
        if not math.isfinite(v):
            return False
    return True


@njit(cache=True)
def _two_prod(a, b):
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
def _residual(A, x):
    """A x in twice the working precision, rounded once (Ogita–Rump–Oishi Dot2 per row). A q̇ is a sum of
    nearly cancelling terms on the constraint manifold: computed plainly its rounding noise (~1e-16·‖A‖‖q̇‖)
    is what the velocity projection would remove, and near a singular pose of the slider-crank that noise
    pushed the state off the branch by 1e-9 in one second (measured; LAPACK/BLAS with FMA: 1e-12)."""
    m, n = A.shape
    y = np.zeros(m)
    for j in range(m):
        p = s = 0.0
        for k in range(n):
            h, r = _two_prod(A[j, k], x[k])
            t = p + h                      # two-sum of p and h: t + q = p + h exactly
            z = t - p
            q = (p - (t - z)) + (h - z)
            p = t
            s += q + r
        y[j] = p + s
    return y


@njit(cache=True)
def _mirror_upper(M) -> None:
    """M ← its upper triangle mirrored (CRBA fills the upper triangle only); no change to a symmetric M."""
    for i in range(M.shape[0]):
        for j in range(i):
            M[i, j] = M[j, i]


@njit(cache=True)
def _cholesky(M, L) -> bool:
    """Lower Cholesky factor of M into L (M = LLᵀ, as LAPACK dpotf2); False when M is not positive definite."""
    n = M.shape[0]
    L[:] = 0.0
    for j in range(n):
        d = M[j, j]
        for k in range(j):
            d -= L[j, k] * L[j, k]
        if not d > 0.0:
            return False
        ljj = math.sqrt(d)
        L[j, j] = ljj
        for i in range(j + 1, n):
            s = M[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            L[i, j] = s / ljj
    return True


@njit(cache=True)
def _jacobi(B, U) -> None:
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
def _row_svd(A, rtol, atol):
    """Thin SVD A = U diag(σ) Vᵀ by one-sided Jacobi rotations of the rows of A (as accurate as LAPACK's
    dgesdd for these small m × n matrices, without its workspace queries and copies), then the rank rule
    σ > max(rtol·σ₁, atol). Returns (U_r (m×r), σ_r, V₁ (n×r), r), σ in decreasing order."""
    m, n = A.shape
    B = A.copy()
    U = np.zeros((m, m))
    for i in range(m):
        U[i, i] = 1.0
    _jacobi(B, U)
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
def _pinv(Ur, sr, V1):
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
def _lu_solve(K, b, x) -> bool:
    """x = K⁻¹b by LU with partial pivoting (the algorithm of LAPACK dgesv); False when a pivot is 0."""
    n = K.shape[0]
    LU = K.copy()
    x[:] = b
    for j in range(n):
        p = j
        for i in range(j + 1, n):
            if abs(LU[i, j]) > abs(LU[p, j]):
                p = i
        if LU[p, j] == 0.0:
            return False
        if p != j:
            for k in range(n):
                LU[j, k], LU[p, k] = LU[p, k], LU[j, k]
            x[j], x[p] = x[p], x[j]
        for i in range(j + 1, n):
            f = LU[i, j] / LU[j, j]
            if f != 0.0:
                for k in range(j + 1, n):
                    LU[i, k] -= f * LU[j, k]
                x[i] -= f * x[j]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= LU[i, k] * x[k]
        x[i] = s / LU[i, i]
    return True


@njit(cache=True)
def _chol_solve(L, b):
    """x = L⁻ᵀL⁻¹b (forward then back substitution)."""
    n = L.shape[0]
    y = np.empty(n)
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * y[k]
        y[i] = s / L[i, i]
    return _back(L, y)


@njit(cache=True)
def _back(L, y):
    """x = L⁻ᵀy (back substitution with the transpose of a lower factor)."""
    n = L.shape[0]
    x = np.empty(n)
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]
    return x


@njit(cache=True)
def _mv(X, x):
    """X x."""
    y = np.zeros(X.shape[0])
    for i in range(X.shape[0]):
        for k in range(X.shape[1]):
            y[i] += X[i, k] * x[k]
    return y


@njit(cache=True)
def _mtv(X, x):
    """Xᵀ x."""
    y = np.zeros(X.shape[1])
    for k in range(X.shape[0]):
        for i in range(X.shape[1]):
            y[i] += X[k, i] * x[k]
    return y


@njit(cache=True)
def _projected_system(M, f_h, V1, a_perp):
    """M_c = M + PM − MP (eq. 23) and the right-hand side P(f − h) + M a⊥ (eq. 25), P = I − V₁V₁ᵀ, written
    with V₁ᵀM and V₁ᵀ(f − h) (PM = M − V₁V₁ᵀM) instead of forming P."""
    n, r = V1.shape
    W = np.zeros((r, n))
    y = np.zeros(r)
    for p in range(r):
        for i in range(n):
            vip = V1[i, p]
            y[p] += vip * f_h[i]
            for k in range(n):
                W[p, k] += vip * M[i, k]
    Mc = M.copy()
    rhs = f_h.copy()
    for i in range(n):
        d_rhs = 0.0
        for p in range(r):
            d_rhs += V1[i, p] * y[p]
        m_a = 0.0
        for k in range(n):
            m_a += M[i, k] * a_perp[k]
            d = 0.0
            for p in range(r):
                d += V1[k, p] * W[p, i] - V1[i, p] * W[p, k]
            Mc[i, k] += d
        rhs[i] = (rhs[i] - d_rhs) + m_a
    return Mc, rhs


@njit(cache=True)
def projection_accel(M, h, tau, A, ad, rtol, atol, qdd, lam):
    """q̈ (into ``qdd``) and λ (into ``lam``, length m) of the projection direct dynamics (eq. 25) at M, h, τ,
    A, Ȧq̇; returns (status, rank). M is made symmetric in place from its upper triangle."""
    n, m = M.shape[0], A.shape[0]
    _mirror_upper(M)
    if not (_finite(M) and _finite(h) and _finite(tau) and _finite(A) and _finite(ad)):
        return NONFINITE, 0
    L = np.empty((n, n))
    if not _cholesky(M, L):
        return NOT_PD, 0
    f_h = tau - h
    if m == 0:
        qdd[:] = _chol_solve(L, f_h)
        return OK, 0
    Ur, sr, V1, r = _row_svd(A, rtol, atol)
    Ap = _pinv(Ur, sr, V1)
    a_perp = np.zeros(n)                              # eq. 16: a⊥ = −A⁺Ȧq̇
    for i in range(n):
        for j in range(m):
            a_perp[i] -= Ap[i, j] * ad[j]
    Mc, rhs = _projected_system(M, f_h, V1, a_perp)    # eq. 23, 25
    if not _lu_solve(Mc, rhs, qdd):
        return SINGULAR, r
    e = f_h.copy()                                    # F = (I − P)(f − h − Mq̈) = Aᵀλ
    for i in range(n):
        for k in range(n):
            e[i] -= M[i, k] * qdd[k]
    F = _mv(V1, _mtv(V1, e))
    for j in range(m):                                # λ = A⁺ᵀF
        s = 0.0
        for i in range(n):
            s += Ap[i, j] * F[i]
        lam[j] = s
    return OK, r


@njit(cache=True)
def m_project(M, A, v, rtol, atol, out):
    """N_c q̇ into ``out`` (impact.m_projection); returns (status, ‖A q̇⁺‖, ½q̇⁺ᵀMq̇⁺). M is made symmetric in
    place from its upper triangle."""
    n, m = M.shape[0], A.shape[0]
    _mirror_upper(M)
    if not (_finite(M) and _finite(A) and _finite(v)):
        return NONFINITE, math.nan, math.nan
    L = np.empty((n, n))
    if not _cholesky(M, L):
        return NOT_PD, math.nan, math.nan
    out[:] = v
    if m > 0:
        Lam = np.empty((m, n))                         # Λ = A L⁻ᵀ: row j solves L x = aⱼ
        for j in range(m):
            for i in range(n):
                s = A[j, i]
                for k in range(i):
                    s -= L[i, k] * Lam[j, k]
                Lam[j, i] = s / L[i, i]
        Ur, sr, V1, r = _row_svd(Lam, rtol, atol)
        c = _mtv(Ur, _residual(A, v)) / sr            # Λ⁺Aq̇ = V₁ diag(1/σ) U_rᵀ Aq̇
        out -= _back(L, _mv(V1, c))                    # q̇ − L⁻ᵀΛ⁺Aq̇
    Ao = _residual(A, out)
    return OK, math.sqrt(np.sum(Ao * Ao)), 0.5 * np.sum(out * _mv(M, out))


# rows of the RK4 workspace W (width nq; velocity-sized rows use the first nv entries)
Q0, V0, ACC_V, ACC_A, DQ, QN, VN, QDD = range(8)


@njit(cache=True)
def rk4_stage(i, M, h, tau, A, ad, W, lam, prm):
    """Stage i = 0…3 of classical RK4 on (q, q̇): q̈ᵢ by eq. 25 at the stage state (M, h, A, Ȧq̇ evaluated
    there, τᵢ), then the bookkeeping in the reference's order of operations: Σwᵢq̇ᵢ, Σwᵢq̈ᵢ (w = 1, 2, 2, 1);
    the next stage's tangent displacement dq = c·q̇ᵢ and q̇ = q̇₀ + c·q̈ᵢ (c = dt/2, dt/2, dt); after stage 3
    dq = dt/6·Σwᵢq̇ᵢ, q̇ = q̇₀ + dt/6·Σwᵢq̈ᵢ. The stage velocity q̇ᵢ is W[V0] (i = 0) or W[VN]; q̇ and, when
    nq = nv, q = q₀ + dq go to W[VN], W[QN] (else the caller applies q₀ ⊕ dq). prm = (rtol, atol, dt, nq = nv).
    Returns (status, rank, wᵢτᵢᵀq̇ᵢ); λ of the stage into ``lam``."""
    n = M.shape[0]
    qdd = W[QDD, :n]
    status, r = projection_accel(M, h, tau, A, ad, prm[0], prm[1], qdd, lam)
    if status != OK:
        return status, r, 0.0
    dt = prm[2]
    w = 1.0 if i == 0 or i == 3 else 2.0
    vi = W[V0] if i == 0 else W[VN]
    work = 0.0
    c = dt / 6.0 if i == 3 else (dt if i == 2 else 0.5 * dt)
    for k in range(n):
        vk = vi[k]
        work += tau[k] * vk
        if i == 0:
            W[ACC_V, k] = vk
            W[ACC_A, k] = qdd[k]
        else:
            W[ACC_V, k] += w * vk
            W[ACC_A, k] += w * qdd[k]
        if i < 3:
            W[DQ, k] = c * vk
            W[VN, k] = W[V0, k] + c * qdd[k]
    if i == 3:
        for k in range(n):
            W[DQ, k] = c * W[ACC_V, k]
            W[VN, k] = W[V0, k] + c * W[ACC_A, k]
        if not (_finite(W[DQ, :n]) and _finite(W[VN, :n])):
            return NONFINITE, r, w * work
    if prm[3] != 0.0:
        for k in range(n):
            W[QN, k] = W[Q0, k] + W[DQ, k]
    return OK, r, w * work


def warm() -> None:
    """Compile (or load from the disk cache) every kernel for the argument types the simulator uses."""
    M = np.eye(3)
    v = np.ones(3)
    for m in (0, 1, 2):
        A = np.ones((m, 3))
        A[:, 0] = np.arange(m)
        projection_accel(M, v, v, A, np.ones(m), 1e-9, 1e-9, np.empty(3), np.empty(m))
        m_project(M, A, v, 1e-9, 1e-9, np.empty(3))
        rk4_stage(0, np.eye(3), v, v, A, np.ones(m), np.zeros((8, 3)), np.empty(m), np.array([1e-9, 1e-9, 1e-3, 1.0]))


if __name__ == "__main__":
    warm()
