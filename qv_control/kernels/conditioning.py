"""The reduced Jacobian D = JQ⁻ᵀV₂ (eq. 34; or JN) and its conditioning in compiled (numba) code, for the laws'
kernels: cond(D) by one-sided
Jacobi from a kept rotation (:func:`cond_jacobi`, the value the numpy path's SVD gives, to rounding) and a cheaper
certificate that cond(D) stays below a bound (:func:`cond_certified`, from the LU factors the laws solve with
anyway). The numpy twin is :func:`qv_control.coordinates.check_reduced_jacobian`.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.sim_linalg import jacobi, lu_factor


@njit(cache=True)
def cond_jacobi(D, U) -> float:
    """σ₁/σ_k of a square D, inf when D is singular: the row norms of D rotated by one-sided Jacobi
    (:func:`~qv_dynamics.kernels.sim_linalg.jacobi`) until its rows are orthogonal, started from UᵀD with the
    orthogonal U (k × k) of the previous call (the identity: a cold start) and updated in place (D = U·rows), so
    that a D that moved little since needs about one sweep. The caller resets U to the identity now and then
    (its orthogonality drifts by rounding)."""
    k = D.shape[0]
    B = np.empty((k, D.shape[1]))
    for i in range(k):
        for j in range(D.shape[1]):
            s = 0.0
            for t in range(k):
                s += U[t, i] * D[t, j]
            B[i, j] = s
    jacobi(B, U)
    hi, lo = 0.0, np.inf
    for i in range(k):
        s = 0.0
        for t in range(B.shape[1]):
            s += B[i, t] * B[i, t]
        hi, lo = max(hi, s), min(lo, s)
    return math.sqrt(hi / lo) if lo > 0.0 else np.inf


@njit(cache=True)
def _triangular_inverse_norm(LU, unit) -> float:
    """‖T⁻¹‖_F² of the triangle of an LU factor: the unit lower one (``unit``) or the upper one."""
    k = LU.shape[0]
    x = np.empty(k)
    w = 0.0
    for j in range(k):            # column j of T⁻¹ by substitution (k³/6 multiply-adds in all)
        if unit:
            for i in range(j, k):
                s = 1.0 if i == j else 0.0
                for t in range(j, i):
                    s -= LU[i, t] * x[t]
                x[i] = s
                w += s * s
        else:
            for i in range(j, -1, -1):
                s = 1.0 if i == j else 0.0
                for t in range(i + 1, j + 1):
                    s -= LU[i, t] * x[t]
                x[i] = s / LU[i, i]
                w += x[i] * x[i]
    return w


@njit(cache=True)
def cond_certified(D, LU, piv, cond_max) -> bool:
    """Whether cond₂(D) ≤ ``cond_max`` is certified by ‖D‖_F‖L⁻¹‖_F‖U⁻¹‖_F ≥ ‖D‖₂‖D⁻¹‖₂ (D = PLU: ‖D⁻¹‖ ≤
    ‖U⁻¹‖‖L⁻¹‖), the triangles' inverses by substitution (k³/3 multiply-adds, k divisions) instead of the
    sweeps of a Jacobi SVD; when the bound exceeds ``cond_max`` the caller forms cond(D) itself."""
    k = D.shape[0]
    d = 0.0
    for i in range(k):
        for j in range(k):
            d += D[i, j] * D[i, j]
    return d * _triangular_inverse_norm(LU, True) * _triangular_inverse_norm(LU, False) <= cond_max * cond_max


@njit(cache=True)
def _reduced(Qi, V, r, J, N, D) -> None:
    """N = Q⁻ᵀV₂ and D = JN (eq. 34), V₂ = the columns of V from r on, Q⁻¹ lower triangular."""
    n, k = N.shape
    for i in range(n):
        for j in range(k):
            s = 0.0
            for t in range(i, n):  # (Q⁻ᵀ)_it = Q⁻¹_ti, zero for t < i
                s += Qi[t, i] * V[t, r + j]
            N[i, j] = s
    for i in range(D.shape[0]):
        for j in range(k):
            s = 0.0
            for t in range(n):
                s += J[i, t] * N[t, j]
            D[i, j] = s


@njit(cache=True)
def reduced_checked(Qi, V, r, J, D, U, cond_max) -> float:
    """D = JQ⁻ᵀV₂ into ``D`` and NaN when cond(D) ≤ ``cond_max`` is certified (:func:`cond_certified`), else
    cond(D) by Jacobi (:func:`.conditioning.cond_jacobi`; the caller compares it with ``cond_max``)."""
    n = V.shape[0]
    k = D.shape[0]
    _reduced(Qi, V, r, J, np.empty((n, n - r)), D)
    LU = np.empty((k, k))
    piv = np.empty(k, np.int64)
    if lu_factor(D, LU, piv) and cond_certified(D, LU, piv, cond_max):
        return np.nan
    return cond_jacobi(D, U)


@njit(cache=True)
def reduced_core(Qi, V, r, J, D, U) -> float:
    """D = JQ⁻ᵀV₂ (k × k, eq. 34) into ``D`` and cond(D) (Jacobi from the rotation U,
    :func:`.conditioning.cond_jacobi`)."""
    n = V.shape[0]
    _reduced(Qi, V, r, J, np.empty((n, n - r)), D)
    return cond_jacobi(D, U)
