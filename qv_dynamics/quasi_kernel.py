"""The quasi-velocity decomposition (:func:`qv_dynamics.quasi.quasi_decompose`) in one compiled (numba) call
for the steady state: the previous basis has full row rank m and the new one is aligned to it
(:func:`qv_dynamics.quasi_basis.aligned_basis`, same equations), so a 1 kHz sample costs one call instead of
~40 numpy/LAPACK calls. Matrices of a robot arm (n ≲ 12): the loops below beat LAPACK's call overhead.

    M = QQᵀ (Cholesky), v = Qᵀq̇, Λ = AQ⁻ᵀ, Λᵀ = ZR (Gram–Schmidt, twice), V₁ = Z·polar(ZᵀV₁_prev),
    V₂ = polar((I − ZZᵀ)V₂_prev), W₁ = V₁ᵀΛ⁺ = (R⁻¹P₁)ᵀ, X = Q⁻¹CQ⁻ᵀ, L = Φ(X + Xᵀ), Q̇ = QL,
    Γ = X − Lᵀ, Γ_v = V₂ᵀΓV₂, Γ_ξv_r = W₁(Ȧq̇ − ΛLᵀv) − V₁ᵀΓv

(polar factors by the Newton–Schulz iteration, as ``near_polar``; V₁ = Z·polar(ZᵀV₁_prev) does not depend
on which orthonormal Z spans the row space, so Gram–Schmidt gives the QR path's basis to rounding).

The kernel returns a status instead of raising: OK, or FALLBACK when the numpy path must decide (M not
positive definite, full rank not certified by σ_min(R) ≥ 1/‖R⁻¹‖_F > max(rtol·‖Λ‖_F, atol), or the bases
moved too far for Newton–Schulz); the caller then runs the reference path, which raises or re-seeds.

Compiled for its one signature into numba's disk cache at install (:func:`qv_dynamics.compiled.warm_all`);
:mod:`qv_dynamics.quasi` loads it through :func:`qv_dynamics.compiled.load` and keeps the numpy path when numba
is missing, its cache unusable or not warmed.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .compiled import kernel
from .sim.kernel_linalg import cholesky

OK, FALLBACK = 0, 1
NS_START, NS_DONE, NS_MAX_ITER = 0.5, 1e-8, 8  # as qv_dynamics.quasi_basis.near_polar

_SIG = ("int64(float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], float64[:, ::1], "
        "int64, float64, float64, float64[:, ::1], float64[::1])")


@njit(cache=True)
def _newton_schulz(X) -> bool:
    """X ← polar(X) in place by X ← X − ½X(XᵀX − I) (False: ‖XᵀX − I‖_F ≥ NS_START or no convergence)."""
    p, k = X.shape
    E = np.empty((k, k))
    for _ in range(NS_MAX_ITER):
        e2 = 0.0
        for i in range(k):
            for j in range(k):
                s = 0.0
                for t in range(p):
                    s += X[t, i] * X[t, j]
                if i == j:
                    s -= 1.0
                E[i, j] = s
                e2 += s * s
        e = math.sqrt(e2)
        if not e < NS_START:
            return False
        if e == 0.0:
            return True
        for t in range(p):
            row = X[t].copy()
            for j in range(k):
                s = 0.0
                for i in range(k):
                    s += row[i] * E[i, j]
                X[t, j] = row[j] - 0.5 * s
        if e < NS_DONE:
            return True
    return False


@njit(cache=True)
def _lower_inverse(Q, Qi) -> None:
    """Qi = Q⁻¹ of a lower-triangular Q (forward substitution, column by column)."""
    n = Q.shape[0]
    for j in range(n):
        Qi[j, j] = 1.0 / Q[j, j]
        for i in range(j + 1, n):
            s = 0.0
            for k in range(j, i):
                s += Q[i, k] * Qi[k, j]
            Qi[i, j] = -s / Q[i, i]


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
def _row_space(Lam, Z, R, Ri, rtol, atol) -> bool:
    """Λᵀ = ZR (Gram–Schmidt, each column orthogonalised twice), R⁻¹, and the full-rank certificate."""
    m, n = Lam.shape
    lf = 0.0
    for i in range(m):
        for j in range(n):
            Z[j, i] = Lam[i, j]
            lf += Lam[i, j] * Lam[i, j]
    for i in range(m):
        for _ in range(2):
            for p in range(i):
                s = 0.0
                for j in range(n):
                    s += Z[j, p] * Z[j, i]
                R[p, i] += s
                for j in range(n):
                    Z[j, i] -= s * Z[j, p]
        s = 0.0
        for j in range(n):
            s += Z[j, i] * Z[j, i]
        d = math.sqrt(s)
        if not d > 0.0:
            return False
        R[i, i] = d
        for j in range(n):
            Z[j, i] /= d
    return full_rank(R, Ri, math.sqrt(lf), rtol, atol)


@njit(cache=True)
def _gamma_xi(Lam, W1, V, ad, Ltv, Gv, out) -> None:
    """Γ_ξv_r = W₁(Ȧq̇ − ΛLᵀv) − V₁ᵀΓv into ``out`` (m)."""
    m, n = Lam.shape
    drift = np.empty(m)
    for i in range(m):  # Ȧq̇ − ΛQ̇ᵀq̇
        s = ad[i]
        for j in range(n):
            s -= Lam[i, j] * Ltv[j]
        drift[i] = s
    for a in range(m):
        s = 0.0
        for i in range(m):
            s += W1[a, i] * drift[i]
        for i in range(n):
            s -= V[i, a] * Gv[i]
        out[a] = s


@njit(cache=True)
def _basis(Lam, Vp, rtol, atol, Z, R, V, W1) -> bool:
    """V = [V₁ V₂] aligned to Vp (module doc), W₁ = (R⁻¹P₁)ᵀ, Λᵀ = ZR; False when the numpy path decides."""
    m, n = Lam.shape
    Ri = np.zeros((m, m))
    if m:
        if not _row_space(Lam, Z, R, Ri, rtol, atol):
            return False
        P1 = Z.T.dot(np.ascontiguousarray(Vp[:, :m]))
        if not _newton_schulz(P1):
            return False
        V[:, :m] = Z.dot(P1)
        W1[:] = Ri.dot(P1).T
    if m < n:
        Y = np.ascontiguousarray(Vp[:, m:])
        if m:
            Y -= Z.dot(Z.T.dot(Y))
        if not _newton_schulz(Y):
            return False
        V[:, m:] = Y
    return True


@kernel(_SIG)
def decompose(M, C, A, ad, qdot, Vp, m, rtol, atol, out, vec) -> int:
    """One steady-state sample. In: M, C (n × n), A (m × n), Ȧq̇, q̇, Vp = [V₁ V₂]_prev (n × n, rank m).
    Out, by rows of ``out`` ((6n + 3m) × n): Q, Q⁻¹, Q̇, Γ, V = [V₁ V₂], Γ_v (top-left (n − m)²), Λ (m rows),
    W₁ and R (m rows each, first m columns); ``vec`` (2n): v, v_r (n − m), Γ_ξv_r (m)."""
    n = M.shape[0]
    Q, Qi, Qd, G = out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:4 * n]
    V, Gv_, Lam = out[4 * n:5 * n], out[5 * n:6 * n], out[6 * n:6 * n + m]
    W1, R = out[6 * n + m:6 * n + 2 * m, :m], out[6 * n + 2 * m:6 * n + 3 * m, :m]
    Q[:] = 0.0
    Qi[:] = 0.0
    R[:] = 0.0
    if not cholesky(M, Q):
        return FALLBACK
    _lower_inverse(Q, Qi)
    v = vec[:n]
    for j in range(n):  # v = Qᵀq̇
        s = 0.0
        for i in range(j, n):
            s += Q[i, j] * qdot[i]
        v[j] = s
    for i in range(m):  # Λ = AQ⁻ᵀ
        for j in range(n):
            s = 0.0
            for k in range(j + 1):
                s += A[i, k] * Qi[j, k]
            Lam[i, j] = s
    Z = np.empty((n, m))
    if not _basis(Lam, Vp, rtol, atol, Z, R, V, W1):
        return FALLBACK
    X = Qi.dot(C).dot(Qi.T)
    G[:] = X  # Γ = X − Lᵀ, L = Φ(X + Xᵀ)
    L = np.zeros((n, n))
    for i in range(n):
        for j in range(i):
            L[i, j] = X[i, j] + X[j, i]
        L[i, i] = X[i, i]
    for i in range(n):
        for j in range(i + 1):
            G[j, i] -= L[i, j]
    Qd[:] = Q.dot(L)
    V2 = np.ascontiguousarray(V[:, m:])
    Gv_[:n - m, :n - m] = V2.T.dot(G.dot(V2))
    vec[n:2 * n - m] = V2.T.dot(v)
    if m:
        _gamma_xi(Lam, W1, V, ad, L.T.dot(v), G.dot(v), vec[2 * n - m:2 * n])
    return OK


def warm() -> None:
    """Run the kernel for each row count the laws meet (:func:`qv_dynamics.compiled.warm_all` compiles it into
    numba's disk cache first)."""
    n = 4
    for m in (0, 1, 2):
        A = np.zeros((m, n))
        for i in range(m):
            A[i, i] = 1.0
        V = np.eye(n)
        decompose(2.0 * np.eye(n), np.zeros((n, n)), A, np.zeros(m), np.ones(n), V, m, 1e-9, 1e-9,
                  np.empty((6 * n + 3 * m, n)), np.empty(2 * n))

