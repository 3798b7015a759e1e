"""Compiled (numba) numerics of the control side, one call each instead of tens of numpy calls per sample;
the callers keep the same products in numpy as their reference path (``compiled=False``) and for when the
kernels cannot be loaded (:func:`qv_dynamics.kernels.loader.load`). Loaded from numba's disk cache, warmed by
:func:`qv_dynamics.kernels.loader.warm_all` (scripts/setup.sh).

The minimal coordinates' kernel is :mod:`qv_control.kernels.coordinates`.

:func:`tracking` (:class:`~qv_control.laws.quasi_tracking.QuasiTrackingLaw`, eq. 35–38 with the
normal-motion terms): with N = Q⁻ᵀV₂, D = JN (checked by the caller), e = θ − θ_d, s_d = θ̇_d − K_pe,
ṡ_d = θ̈_d − K_p(θ̇ − θ̇_d)::

    σ = D⁻¹s_d,  ε = v_r − σ [+ Gv_n],  Gv_n = D⁻¹JQ⁻ᵀV₁v_n,  v_n = V₁ᵀv
    Γ_vn v_n = V₂ᵀ(ΓV₁v_n + Q⁻¹(Ȧᵀz − Q̇Λᵀz)),  z = W₁ᵀv_n
    w = Nσ,  y = Q̇ᵀw,  V̇₂σ = −V₁W₁(Ȧw − Λy),  Ḋσ = J̇w + JQ⁻ᵀ(V̇₂σ − y),  σ̇ = D⁻¹(ṡ_d − Ḋσ)
    u_v = σ̇ + Γ_v v_r − k_d ε [+ Γ_vn v_n]
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import alive, borrowed, full_rank, mtv_into, mv_into
from qv_dynamics.kernels.sim_linalg import lu_apply_into, lu_factor

from .conditioning import _reduced, cond_certified, cond_jacobi, reduced_core

_M = "float64[:, :]"   # any layout: the decomposition hands out views of its output blocks
_SIG = f"int64({', '.join([_M] * 10)}, {', '.join(['float64[:]'] * 8)}, float64, float64, int64, float64[:, ::1])"


@kernel(f"float64({_M}, {_M}, int64, {_M}, float64[:, ::1])")
def reduced_jacobian(Qi, V, r, J, D) -> float:
    """:func:`reduced_core` as one compiled entry point (cold-started Jacobi)."""
    return reduced_core(Qi, V, r, J, D, np.eye(D.shape[0]))


@kernel(_SIG)
def tracking(Qi, Qd, V, W1, Lam, G, Gv, J, Jd, Ad, v, vr, th, th_d, thd, thd_d, thdd_d, kp, kd, cond_max,
             normal, out) -> int:
    """:func:`tracking_core` as one compiled entry point (cold-started Jacobi)."""
    return tracking_core(Qi, Qd, V, W1, Lam, G, Gv, J, Jd, Ad, v, vr, th, th_d, thd, thd_d, thdd_d, kp, kd,
                         cond_max, normal, out, np.eye(V.shape[0] - W1.shape[0]), True)


@njit(cache=True)
def _normal_terms(Qi, Qd, V, W1, Lam, G, J, Ad, v, LU, piv, out, wk) -> None:
    """v_n = V₁ᵀv, Gv_n = D⁻¹JQ⁻ᵀV₁v_n into ``out`` rows 4, 3 and Γ_vn v_n = V₂ᵀ(ΓV₁v_n + Q⁻¹(Ȧᵀz − Q̇Λᵀz)),
    z = W₁ᵀv_n, into ``wk[0]`` (first k entries; ``wk``: 5 rows of n scratch)."""
    n = V.shape[0]
    r = W1.shape[0]
    k = n - r
    V1, V2 = V[:, :r], V[:, r:]
    v_n, z = out[4, :r], wk[4, :r]
    mtv_into(V1, v, v_n)
    V1vn, t1, t2 = wk[1], wk[2], wk[3]
    mv_into(V1, v_n, V1vn)
    mtv_into(Qi, V1vn, t1)                      # Q⁻ᵀV₁v_n
    gvn = out[3, :k]
    mv_into(J, t1, gvn)
    lu_apply_into(LU, piv, gvn, gvn)
    mtv_into(W1, v_n, z)
    mtv_into(Lam, z, t1)                        # Λᵀz
    mv_into(Qd, t1, t2)                         # Q̇Λᵀz
    mtv_into(Ad, z, t1)                         # Ȧᵀz
    for i in range(n):
        t1[i] -= t2[i]
    mv_into(Qi, t1, t2)
    mv_into(G, V1vn, t1)
    for i in range(n):
        t1[i] += t2[i]
    mtv_into(V2, t1, wk[0, :k])


@njit(cache=True)
def tracking_core(Qi, Qd, V, W1, Lam, G, Gv, J, Jd, Ad, v, vr, th, th_d, thd, thd_d, thdd_d, kp, kd, cond_max,
                  normal, out, U, exact) -> int:
    """The law's products (module doc) for r = rows of W₁ and the basis V = [V₁ V₂] (n × n), from θ, θ_d, θ̇,
    θ̇_d, θ̈_d, K_p (k-vectors): N = Q⁻ᵀV₂, D = JN and cond(D); 0 (nothing else computed) when cond(D) >
    ``cond_max``: the caller raises. ``out`` rows: u_v, ε, σ, Gv_n, e = θ − θ_d (k entries), v_n (r
    entries), [cond(D)], D (k rows). ``exact`` False: cond(D) only certified below ``cond_max``
    (:func:`cond_certified`; the Jacobi value when the bound does not, NaN in out[6, 0] otherwise); ``Gv`` with
    no rows: Γ_v v_r formed as V₂ᵀΓ(V₂v_r)."""
    n = V.shape[0]
    r = W1.shape[0]
    k = n - r
    N = np.empty((n, k))
    D = out[7:7 + k, :k]
    _reduced(Qi, V, r, J, N, D)
    LU = np.empty((k, k))
    piv = np.empty(k, np.int64)
    if exact or not (lu_factor(D, LU, piv) and cond_certified(D, LU, piv, cond_max)):
        out[6, 0] = cond = cond_jacobi(D, U)
        if not cond <= cond_max:
            return 0
        lu_factor(D, LU, piv)  # (cond(D) finite: no zero pivot)
    else:
        out[6, 0] = np.nan
    owner = np.empty((9, n))   # (borrowed: its views are not reference-counted; alive to the last line)
    wk = borrowed(owner)
    e, u_v, eps, sigma, sd_dot = out[5, :k], out[0, :k], out[1, :k], out[2, :k], wk[5, :k]
    for i in range(k):
        e[i] = th[i] - th_d[i]
        sigma[i] = thd_d[i] - kp[i] * e[i]                     # Dσ
        sd_dot[i] = thdd_d[i] - kp[i] * (thd[i] - thd_d[i])
    lu_apply_into(LU, piv, sigma, sigma)
    for i in range(k):
        eps[i] = vr[i] - sigma[i]
    V1 = V[:, :r]
    V2 = V[:, r:]
    if normal and r:
        _normal_terms(Qi, Qd, V, W1, Lam, G, J, Ad, v, LU, piv, out, wk)
        for i in range(k):
            eps[i] += out[3, i]
            u_v[i] = wk[0, i]
    else:
        out[3, :k] = 0.0
        u_v[:] = 0.0
    w, y, a, b = wk[6], wk[7], wk[8], wk[1]
    mv_into(N, sigma, w)
    mtv_into(Qd, w, y)
    for i in range(n):
        a[i] = -y[i]
    if r:
        c, d = wk[2, :r], wk[3, :r]
        mv_into(Ad, w, c)
        mv_into(Lam, y, d)
        for i in range(r):
            c[i] -= d[i]
        mv_into(W1, c, d)
        mv_into(V1, d, b)
        for i in range(n):
            a[i] -= b[i]
    mtv_into(Qi, a, b)                          # Q⁻ᵀa
    dds, t = wk[2, :k], wk[3, :k]
    mv_into(Jd, w, dds)
    mv_into(J, b, t)
    for i in range(k):
        sd_dot[i] -= dds[i] + t[i]              # ṡ_d − Ḋσ
    lu_apply_into(LU, piv, sd_dot, sd_dot)
    gv = wk[4, :k]
    if Gv.shape[0] == k:
        mv_into(Gv, vr, gv)
    else:
        mv_into(V2, vr, w)
        mv_into(G, w, y)
        mtv_into(V2, y, gv)
    for i in range(k):
        u_v[i] += (sd_dot[i] + gv[i]) - kd * eps[i]
    return alive(owner)


@njit(cache=True)
def householder(At, Qf, R) -> None:
    """Aᵀ = Q_f[:, :m]R with Q_f (n × n) orthogonal (Householder QR, the full factor accumulated)."""
    n, m = At.shape
    X = At.copy()
    for i in range(n):
        for j in range(n):
            Qf[i, j] = 1.0 if i == j else 0.0
    for j in range(m):
        s = 0.0
        for i in range(j, n):
            s += X[i, j] * X[i, j]
        alpha = -math.copysign(math.sqrt(s), X[j, j])
        u = np.zeros(n)
        for i in range(j, n):
            u[i] = X[i, j]
        u[j] -= alpha
        uu = 0.0
        for i in range(j, n):
            uu += u[i] * u[i]
        if uu > 0.0:
            for c in range(j, m):  # X ← (I − 2uuᵀ/uᵀu)X
                d = 0.0
                for i in range(j, n):
                    d += u[i] * X[i, c]
                d *= 2.0 / uu
                for i in range(j, n):
                    X[i, c] -= d * u[i]
            for r in range(n):  # Q_f ← Q_f(I − 2uuᵀ/uᵀu)
                d = 0.0
                for i in range(j, n):
                    d += Qf[r, i] * u[i]
                d *= 2.0 / uu
                for i in range(j, n):
                    Qf[r, i] -= d * u[i]
        for c in range(m):
            R[j, c] = X[j, c] if c >= j else 0.0


@kernel(f"int64({_M}, float64[:], {_M}, float64[:], float64[:], float64, float64, float64[:, ::1], "
      "float64[:, ::1])")
def pidc(A, ad, J, Jdq, acc, rtol, atol, mats, vecs) -> int:
    """:func:`pidc_core` as one compiled entry point (cold-started Jacobi)."""
    return pidc_core(A, ad, J, Jdq, acc, rtol, atol, mats, vecs, np.eye(A.shape[1] - A.shape[0]), True, np.inf)


@njit(cache=True)
def _projectors(Qf, Ri, P, ApT) -> None:
    """P = NNᵀ (N = the last n − m columns of Q_f) and (A⁺)ᵀ = R⁻¹Zᵀ (Z = the first m: A = RᵀZᵀ, A⁺ = ZR⁻ᵀ)."""
    n, m = Qf.shape[0], Ri.shape[0]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for t in range(m, n):
                s += Qf[i, t] * Qf[j, t]
            P[i, j] = s
    for i in range(m):
        for j in range(n):
            s = 0.0
            for t in range(i, m):
                s += Ri[i, t] * Qf[j, t]
            ApT[i, j] = s


@njit(cache=True)
def pidc_core(A, ad, J, Jdq, acc, rtol, atol, mats, vecs, U, exact, cond_max) -> int:
    """PIDC's projection and motion part (paper `aghili-projection-operator` eq. 15–16, 40, 45–46) for A of
    full row rank m (1 = certified by 1/‖R⁻¹‖_F > max(rtol·‖A‖_F, atol) with Aᵀ = ZR; 0: the numpy path
    decides): N = a basis of N(A) (Householder), P = NNᵀ, A⁺ = ZR⁻ᵀ, a⊥ = −A⁺Ȧq̇, D = JN (k × k),
    u_p = a⊥ + N D⁻¹(acc − J̇q̇ − Ja⊥) with acc = θ̈_d + G_D ė + G_P e. Out: ``mats`` rows P (n), A⁺ᵀ (m),
    D (k, first k columns); ``vecs`` rows u_p, a⊥ and cond(D) in vecs[2, 0]. ``exact`` False: cond(D) ≤
    ``cond_max`` only certified (:func:`cond_certified`, NaN in vecs[2, 0]; the Jacobi value when not)."""
    m, n = A.shape
    k = n - m
    Qf = np.empty((n, n))
    R = np.zeros((m, m))
    householder(np.ascontiguousarray(A.T), Qf, R)
    af = 0.0
    for i in range(m):
        for j in range(n):
            af += A[i, j] * A[i, j]
    Ri = np.zeros((m, m))
    if not full_rank(R, Ri, math.sqrt(af), rtol, atol):
        return 0
    _projectors(Qf, Ri, mats[:n], mats[n:n + m])
    ApT = mats[n:n + m]
    a_perp = vecs[1]
    a_perp[:] = 0.0
    for i in range(m):
        for j in range(n):
            a_perp[j] -= ApT[i, j] * ad[i]
    D = mats[n + m:n + m + k, :k]
    b = np.empty(k)
    for i in range(k):
        s = acc[i] - Jdq[i]
        for t in range(n):
            s -= J[i, t] * a_perp[t]
        b[i] = s
        for j in range(k):
            s = 0.0
            for t in range(n):
                s += J[i, t] * Qf[t, m + j]
            D[i, j] = s                          # D = JN
    LU = np.empty((k, k))
    piv = np.empty(k, np.int64)
    if exact or not (lu_factor(D, LU, piv) and cond_certified(D, LU, piv, cond_max)):
        vecs[2, 0] = cond = cond_jacobi(D, U)
        if not cond <= cond_max or not cond < np.inf:  # the caller raises (its message names the coordinates)
            return 1
        lu_factor(D, LU, piv)
    else:
        vecs[2, 0] = np.nan
    lu_apply_into(LU, piv, b, b)
    u_p = vecs[0]
    for i in range(n):
        s = a_perp[i]
        for j in range(k):
            s += Qf[i, m + j] * b[j]
        u_p[i] = s
    return 1


@kernel(f"void(float64[:, ::1], {_M}, float64[:], float64[:], float64[:, ::1])")
def coupled(M, P, x, y, out) -> None:
    """:func:`coupled_core` as one compiled entry point."""
    coupled_core(M, P, x, y, out)


@njit(cache=True)
def coupled_core(M, P, x, y, out) -> None:
    """μx and μy with μ = (I−P)MM_c⁻¹, M_c = M + PM − MP (paper `aghili-projection-operator` eq. 23, 32),
    by one LU factorization of M_c (p.d., not symmetric) and two solves; into ``out`` rows 0 and 1."""
    n = M.shape[0]
    Mc = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            s = M[i, j]
            for t in range(n):
                s += P[i, t] * M[t, j] - M[i, t] * P[t, j]
            Mc[i, j] = s
    LU = np.empty((n, n))
    piv = np.empty(n, np.int64)
    lu_factor(Mc, LU, piv)
    w, v = np.empty(n), np.empty(n)
    for row in range(2):
        lu_apply_into(LU, piv, x if row == 0 else y, v)
        for i in range(n):
            s = 0.0
            for t in range(n):
                s += M[i, t] * v[t]
            w[i] = s
        for i in range(n):
            s = 0.0
            for t in range(n):
                s += P[i, t] * w[t]
            out[row, i] = w[i] - s


def warm() -> None:
    """Run each kernel once (:func:`qv_dynamics.kernels.loader.warm_all` compiles them into numba's disk cache
    first)."""
    coupled(np.eye(2), np.eye(2), np.ones(2), np.ones(2), np.empty((2, 2)))
    reduced_jacobian(np.eye(2), np.eye(2), 1, np.ones((1, 2)), np.empty((1, 1)))
    pidc(np.ones((1, 2)), np.ones(1), np.eye(1, 2), np.ones(1), np.ones(1), 1e-9, 1e-9, np.empty((4, 2)),
         np.empty((3, 2)))
    n, r = 3, 1
    V, E = np.eye(n), np.eye(n)
    z = np.zeros((r, n))
    k = np.ones(n - r)
    tracking(E, E, V, np.ones((r, r)), z, E, np.eye(n - r), np.eye(n - r, n, r), np.zeros((n - r, n)), z,
             np.ones(n), k, k, k, k, k, k, k, 1.0, 1e6, 1, np.empty((7 + n, n)))

