"""Compiled (numba) numerics of the simulator's projection method: the equations, rank rule and kinds of
factorization of the reference path (:func:`qv_dynamics.projection.direct_dynamics_rank`,
:func:`qv_dynamics.impact.m_projection`), one call each instead of ~30 numpy/LAPACK calls, so an RK4 stage
costs Pinocchio's kinematics plus ~2 µs (the small dense algebra: :mod:`qv_dynamics.kernels.sim_linalg`).

- :func:`projection_accel`: M_c q̈ = P(τ − h) + M a⊥, M_c = M + PM − MP, a⊥ = −A⁺Ȧq̇ (eq. 22–25);
  P = I − V₁V₁ᵀ from a thin SVD of A with the rank rule σᵢ > max(rtol·σ₁, atol) (eq. 15), one row
  without an SVD (σ = ‖A‖); λ = A⁺ᵀF, F = V₁V₁ᵀ(τ − h − Mq̈) (minimum-norm multiplier, Remark 4).
- :func:`m_project`: q̇⁺ = q̇ − L⁻ᵀΛ⁺Aq̇, Λ = AL⁻ᵀ, M = LLᵀ (kinetic-metric projection N_c q̇), plus
  ‖Aq̇⁺‖ and ½q̇⁺ᵀMq̇⁺; Aq̇ in twice the working precision.
- :func:`rk4_stage`: one RK4 stage, :func:`projection_accel` plus the stage bookkeeping in a workspace.

Kernels return a status instead of raising (OK, NONFINITE, NOT_PD, SINGULAR); the caller raises the
package's error. Compiled once, cached on disk (``cache=True``); :func:`warm` fills the cache at install
(:func:`qv_dynamics.kernels.loader.warm_all`, scripts/setup.sh), so a process's first step loads it (~0.2 s) instead
of compiling (~10 s); the stepper takes them through :func:`qv_dynamics.kernels.loader.load`, else its numpy path.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .loader import kernel
from .quasi_linalg import cholesky, mv
from .sim_linalg import (
    back_substitute,
    chol_solve,
    finite,
    lu_solve,
    mirror_upper,
    pinv,
    residual,
    row_svd,
)

OK, NONFINITE, NOT_PD, SINGULAR = 0, 1, 2, 3


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


@kernel()
def projection_accel(M, h, tau, A, ad, rtol, atol, qdd, lam):
    """q̈ (into ``qdd``) and λ (into ``lam``, length m) of the projection direct dynamics (eq. 25) at M, h, τ,
    A, Ȧq̇; returns (status, rank). M is made symmetric in place from its upper triangle."""
    n, m = M.shape[0], A.shape[0]
    mirror_upper(M)
    if not (finite(M) and finite(h) and finite(tau) and finite(A) and finite(ad)):
        return NONFINITE, 0
    L = np.empty((n, n))
    if not cholesky(M, L):
        return NOT_PD, 0
    f_h = tau - h
    if m == 0:
        qdd[:] = chol_solve(L, f_h)
        return OK, 0
    Ur, sr, V1, r = row_svd(A, rtol, atol)
    Ap = pinv(Ur, sr, V1)
    a_perp = np.zeros(n)                              # eq. 16: a⊥ = −A⁺Ȧq̇
    for i in range(n):
        for j in range(m):
            a_perp[i] -= Ap[i, j] * ad[j]
    Mc, rhs = _projected_system(M, f_h, V1, a_perp)    # eq. 23, 25
    if not lu_solve(Mc, rhs, qdd):
        return SINGULAR, r
    e = f_h.copy()                                    # F = (I − P)(f − h − Mq̈) = Aᵀλ
    for i in range(n):
        for k in range(n):
            e[i] -= M[i, k] * qdd[k]
    F = mv(V1, mv(V1.T, e))
    for j in range(m):                                # λ = A⁺ᵀF
        s = 0.0
        for i in range(n):
            s += Ap[i, j] * F[i]
        lam[j] = s
    return OK, r


@kernel()
def m_project(M, A, v, rtol, atol, out):
    """N_c q̇ into ``out`` (impact.m_projection); returns (status, ‖A q̇⁺‖, ½q̇⁺ᵀMq̇⁺). M is made symmetric in
    place from its upper triangle."""
    n, m = M.shape[0], A.shape[0]
    mirror_upper(M)
    if not (finite(M) and finite(A) and finite(v)):
        return NONFINITE, math.nan, math.nan
    L = np.empty((n, n))
    if not cholesky(M, L):
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
        Ur, sr, V1, r = row_svd(Lam, rtol, atol)
        c = mv(Ur.T, residual(A, v)) / sr         # Λ⁺Aq̇ = V₁ diag(1/σ) U_rᵀ Aq̇
        out -= back_substitute(L, mv(V1, c))       # q̇ − L⁻ᵀΛ⁺Aq̇
    Ao = residual(A, out)
    return OK, math.sqrt(np.sum(Ao * Ao)), 0.5 * np.sum(out * mv(M, out))


# rows of the RK4 workspace W (width nq; velocity-sized rows use the first nv entries)
Q0, V0, ACC_V, ACC_A, DQ, QN, VN, QDD = range(8)


@kernel()
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
        if not (finite(W[DQ, :n]) and finite(W[VN, :n])):
            return NONFINITE, r, w * work
    if prm[3] != 0.0:
        for k in range(n):
            W[QN, k] = W[Q0, k] + W[DQ, k]
    return OK, r, w * work


def warm() -> None:
    """Compile (or load from the disk cache) every kernel for the argument types the simulator uses
    (:func:`qv_dynamics.kernels.loader.warm_all`)."""
    M = np.eye(3)
    v = np.ones(3)
    for m in (0, 1, 2):
        A = np.ones((m, 3))
        A[:, 0] = np.arange(m)
        projection_accel(M, v, v, A, np.ones(m), 1e-9, 1e-9, np.empty(3), np.empty(m))
        m_project(M, A, v, 1e-9, 1e-9, np.empty(3))
        rk4_stage(0, np.eye(3), v, v, A, np.ones(m), np.zeros((8, 3)), np.empty(m), np.array([1e-9, 1e-9, 1e-3, 1.0]))
