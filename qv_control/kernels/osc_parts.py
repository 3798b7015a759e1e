"""The pieces both operational-space ticks are made of (:mod:`.osc`, the tool frame; :mod:`.osc_body`, the whole
body), each the compiled twin of a numpy piece of the laws: :func:`dynamics` (M and h = Cq̇ + g from the Coriolis
pass's ``Data``, as :func:`qv_dynamics.kernels.quasi._fill_terms`), :func:`force_pi`
(:class:`qv_control.laws.base.ForcePI` with its previous-target error,
:class:`~qv_control.laws.integral.PreviousTarget`, and bounded steps), :func:`limit` (the room's limiter,
:func:`qv_control.saturation.saturate`, on the law's packed status), :func:`task_inertia` (Λ_x = (JM⁻¹Jᵀ)⁻¹ by
Cholesky, or the damped inverse of :func:`qv_control.laws.osc.damped_inverse` from a Jacobi SVD),
:func:`channels` (motion Jᵀ(Λ_x a − J̄ᵀτ₀) + τ₀, base h − JᵀΛ_x J̇q̇) and the carried integral torque
(:class:`qv_control.laws.carry.IntegralCarry`: :func:`carry_tick`, :func:`carry_switch`), and the SVDs of small
matrices by one-sided Jacobi rotations (:func:`rows_svd`, :func:`orth_rows`, :func:`complement`: the numpy path's
LAPACK SVDs to rounding). State lives in the law's packed array ``S`` (:mod:`.osc_layout`).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.crb import mass_gravity
from qv_dynamics.kernels.quasi_linalg import cholesky
from qv_dynamics.kernels.sim_linalg import jacobi

from . import osc_layout as L
from .limiter import saturate

_M = "float64[:, :]"


@njit(cache=True)
def finite(x) -> bool:
    s = 0.0
    for v in x:
        s += v * v
    return math.isfinite(s)


@njit(cache=True)
def dynamics(Y, tree, armature, grav, Ct, Jw, qd, M, h) -> None:
    """M and h = Cq̇ + g from the Coriolis pass's Data (as :func:`qv_dynamics.kernels.quasi._fill_terms`)."""
    mass_gravity(Y, Jw, tree, armature, grav, M, h)
    n = qd.shape[0]
    for i in range(n):
        s = h[i]
        for j in range(n):
            s += Ct[j, i] * qd[j]
        h[i] = s


@njit(cache=True)
def pi_reset(S) -> None:
    """ForcePI.reset: no integral, no previous sample, no target history."""
    V = S[L.VAR]
    V[L.PI_Z_OK] = V[L.PI_T_OK] = V[L.PI_H_OK] = V[L.PI_H_PREV] = 0.0
    V[L.PI_PERIOD] = np.inf


@njit(cache=True)
def force_pi(S, t, desired, measured, frozen, corr) -> bool:
    """The force PI's correction k_f·e + k_i·∫e into ``corr`` (False: none, as ``ForcePI.correction`` returns
    None): e = d_{k−1} − measured (the target of the previous sample,
    :class:`~qv_control.laws.integral.PreviousTarget`), the integral advanced by dt = clip(t − t_prev, 0,
    min(max_dt, GAP·T)) unless ``frozen``."""
    V, P = S[L.VAR], S[L.PAR]
    k = desired.shape[0]
    d, dp = S[L.PI_D], S[L.PI_DPREV]
    if V[L.PI_H_OK] == 0.0 or V[L.PI_SIZE] != k:
        V[L.PI_H_OK], V[L.PI_H_T], V[L.PI_H_PREV], V[L.PI_SIZE] = 1.0, t, 0.0, k
        d[:k] = desired
    elif t > V[L.PI_H_T]:
        dp[:k] = d[:k]
        d[:k] = desired
        V[L.PI_H_T], V[L.PI_H_PREV] = t, 1.0
    if P[L.PI_ON] == 0.0:
        return False
    e = np.empty(k)
    for i in range(k):
        e[i] = (dp[i] if V[L.PI_H_PREV] != 0.0 else desired[i]) - measured[i]
    z = S[L.PI_Z]
    if V[L.PI_Z_OK] == 0.0 or V[L.PI_ZSIZE] != k:
        z[:k] = 0.0
        V[L.PI_Z_OK], V[L.PI_ZSIZE], V[L.PI_T_OK] = 1.0, k, 0.0
    if V[L.PI_T_OK] != 0.0 and not frozen:
        step = t - V[L.PI_T]
        if 0.0 < step < V[L.PI_PERIOD]:
            V[L.PI_PERIOD] = step
        dt = min(max(step, 0.0), P[L.MAX_DT], P[L.GAP] * V[L.PI_PERIOD])
        if dt > 0.0:
            for i in range(k):
                z[i] = z[i] + dt * e[i]
    V[L.PI_T_OK], V[L.PI_T] = 1.0, t
    for i in range(k):
        corr[i] = P[L.KF] * e[i] + P[L.KI_F] * z[i]
    return True


@njit(cache=True)
def limit(S, base, force, has_force, motion, tau) -> None:
    """τ and the limiter's status (:func:`.limiter.saturate`, :func:`qv_control.saturation.saturate`: the motion
    channel scaled first, then the force channel, else base clipped) into ``tau`` and S's status columns."""
    n = tau.shape[0]
    saturate(base, force, has_force, motion, S[L.LIMITS, :n], S[L.PAR, L.HAS_LIMITS] != 0.0, tau,
             S[L.VAR, L.SAT_ACTIVE:L.SAT_PEAK + 1])


@njit(cache=True)
def _damped(X, damping, band, Lam) -> None:
    """Λ = V diag(σ/(σ² + δ²))Uᵀ of X = U diag(σ) Vᵀ (:func:`qv_control.laws.osc.damped_inverse`), the SVD by
    one-sided Jacobi (X = U_j B, B's rows σ_i v_iᵀ: Λ = Σ B_iᵀ U_j,iᵀ/(σ_i² + δ²))."""
    k = X.shape[0]
    B = X.copy()
    U = np.eye(k)
    jacobi(B, U)
    s2 = np.empty(k)
    hi, lo = 0.0, np.inf
    for i in range(k):
        t = 0.0
        for j in range(k):
            t += B[i, j] * B[i, j]
        s2[i] = t
        hi, lo = max(hi, t), min(lo, t)
    s0, sl = math.sqrt(hi), math.sqrt(lo)
    cut = band * s0
    d2 = 0.0 if sl >= cut else (damping * s0) ** 2 * (1.0 - (sl / cut) ** 2)
    for a in range(k):
        for b in range(k):
            t = 0.0
            for i in range(k):
                t += B[i, a] * U[b, i] / (s2[i] + d2)
            Lam[a, b] = t


@njit(cache=True)
def _spd_inverse(Sx, Lam) -> bool:
    """Λ = Sx⁻¹ = Ls⁻ᵀLs⁻¹ (Sx = LsLsᵀ, the triangular inverse row by row); False when Sx is not positive
    definite."""
    k = Sx.shape[0]
    F = np.zeros((2, k, k))
    Ls, Li = F[0], F[1]
    if not cholesky(Sx, Ls):
        return False
    for i in range(k):
        d = 1.0 / Ls[i, i]
        Li[i, i] = d
        for t in range(i):
            f = Ls[i, t] * d
            for c in range(t + 1):
                Li[i, c] -= f * Li[t, c]
    for a in range(k):
        for b in range(a + 1):
            s = 0.0
            for t in range(a, k):
                s += Li[t, a] * Li[t, b]
            Lam[a, b] = Lam[b, a] = s
    return True


@njit(cache=True)
def task_inertia(Lc, J, damping, W, Sx, Lam) -> bool:
    """W = L⁻¹Jᵀ (M = LLᵀ, ``Lc`` = L), Sx = JM⁻¹Jᵀ = WᵀW and Λ_x = Sx⁻¹ by Cholesky (rows at a time: no chain of
    divisions), or its damped inverse (δ₀ = ``damping`` > 0, band 0.1); False when WᵀW is not positive definite
    (undamped)."""
    n = Lc.shape[0]
    k = J.shape[0]
    for i in range(n):                          # forward substitution, all k columns at once
        d = 1.0 / Lc[i, i]
        for c in range(k):
            W[i, c] = J[c, i]
        for t in range(i):
            f = Lc[i, t]
            for c in range(k):
                W[i, c] -= f * W[t, c]
        for c in range(k):
            W[i, c] *= d
    for a in range(k):
        for b in range(a + 1):
            s = 0.0
            for i in range(n):
                s += W[i, a] * W[i, b]
            Sx[a, b] = Sx[b, a] = s
    if damping > 0.0:
        _damped(Sx, damping, 0.1, Lam)
        return True
    return _spd_inverse(Sx, Lam)


@njit(cache=True)
def channels(M, Lc, h, J, Jdqd, W, Lam, a, w, motion, base) -> None:
    """motion = Jᵀ(Λ_x a − J̄ᵀτ₀) + τ₀ with τ₀ = Mw, J̄ = M⁻¹JᵀΛ_x (the dynamically consistent null space carries
    τ₀; J̄ᵀτ₀ = Λ_x JM⁻¹Mw = Λ_x Wᵀ(Lᵀw) with W = L⁻¹Jᵀ); base = h − JᵀΛ_x J̇q̇."""
    n = M.shape[0]
    k = J.shape[0]
    T = np.empty((5, max(n, k)))                 # (one allocation: τ₀, Lᵀw, y, Λy, ΛJ̇q̇)
    tau0, u, y, f1, f2 = T[0], T[1], T[2], T[3], T[4]
    for i in range(n):
        s = t = 0.0
        for j in range(n):
            s += M[i, j] * w[j]
        for j in range(i, n):
            t += Lc[j, i] * w[j]
        tau0[i], u[i] = s, t
    for r in range(k):
        s = 0.0
        for i in range(n):
            s += W[i, r] * u[i]
        y[r] = a[r] - s
    for r in range(k):
        s1 = s2 = 0.0
        for c in range(k):
            s1 += Lam[r, c] * y[c]
            s2 += Lam[r, c] * Jdqd[c]
        f1[r], f2[r] = s1, s2
    for i in range(n):
        s1 = s2 = 0.0
        for r in range(k):
            s1 += J[r, i] * f1[r]
            s2 += J[r, i] * f2[r]
        motion[i] = s1 + tau0[i]
        base[i] = h[i] - s2


@njit(cache=True)
def carry_tick(S, t) -> None:
    """IntegralCarry.tick: the current phase runs from its first sample to ``t``."""
    V = S[L.VAR]
    if V[L.PHASE_OK] == 0.0:
        V[L.PHASE_OK], V[L.PHASE_START] = 1.0, t
    V[L.PHASE_LAST] = t


@njit(cache=True)
def carry_switch(S, n) -> None:
    """IntegralCarry.switch at a contact switch: b ← b + τ_I (τ_I only after a phase of ``min_time``), a new
    phase."""
    V = S[L.VAR]
    if V[L.TAU_INT_OK] != 0.0:
        if V[L.BIAS_OK] == 0.0:
            S[L.BIAS, :n] = 0.0
        if V[L.PHASE_OK] != 0.0 and V[L.PHASE_LAST] - V[L.PHASE_START] >= S[L.PAR, L.CARRY_MIN]:
            for j in range(n):
                S[L.BIAS, j] = S[L.BIAS, j] + S[L.TAU_INT, j]
        V[L.BIAS_OK], V[L.TAU_INT_OK] = 1.0, 0.0
    V[L.PHASE_OK] = 0.0


@njit(cache=True)
def rows_svd(A):
    """A = U B by one-sided Jacobi: (B, U, σ², order of σ descending)."""
    m = A.shape[0]
    B = A.copy()
    U = np.eye(m)
    jacobi(B, U)
    s2 = np.empty(m)
    order = np.empty(m, np.int64)
    for i in range(m):
        t = 0.0
        for j in range(B.shape[1]):
            t += B[i, j] * B[i, j]
        s2[i] = t
        j = i
        while j > 0 and s2[order[j - 1]] < t:
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    return B, U, s2, order


@njit(cache=True)
def count(s2, order, tol) -> int:
    r = 0
    while r < order.shape[0] and math.sqrt(s2[order[r]]) > tol:
        r += 1
    return r


@njit(cache=True)
def orth_rows(Z, cut):
    """The orthonormal directions of the columns of Z (n × c) with singular value > ``cut`` (Jacobi on Zᵀ's rows:
    Z = BᵀUᵀ, the left singular vectors are B's rows normalized), as columns, and the smallest singular value."""
    B = np.ascontiguousarray(Z.T)
    c, n = B.shape
    U = np.eye(c)
    jacobi(B, U)
    keep = np.empty(c, np.int64)
    nk = 0
    lo = np.inf
    for i in range(c):
        t = 0.0
        for j in range(n):
            t += B[i, j] * B[i, j]
        s = math.sqrt(t)
        lo = min(lo, s)
        if s > cut:
            keep[nk] = i
            nk += 1
    Q = np.empty((n, nk))
    for p in range(nk):
        i = keep[p]
        t = 0.0
        for j in range(n):
            t += B[i, j] * B[i, j]
        s = math.sqrt(t)
        for j in range(n):
            Q[j, p] = B[i, j] / s
    return Q, lo


@njit(cache=True)
def complement(V):
    """An orthonormal basis of the orthogonal complement of the orthonormal columns of V (n × r)."""
    n = V.shape[0]
    P = np.eye(n) - V.dot(V.T)
    return orth_rows(P, 0.5)[0]


@njit(cache=True)
def row_directions(B, s2, order, r, n):
    """V₁ (n × r): the first r right singular vectors of A (B's rows normalized)."""
    V1 = np.empty((n, r))
    for p in range(r):
        sv = math.sqrt(s2[order[p]])
        for j in range(n):
            V1[j, p] = B[order[p], j] / sv
    return V1
