"""A projection law's tick after Pinocchio's passes in one compiled (numba) call: the minimal
coordinates (:func:`qv_control.kernels.coordinates.evaluate_into`), the PIDC projection and motion part
(:func:`qv_control.kernels.laws.pidc_core`, paper `aghili-projection-operator` eq. 15–16, 40, 45–46), the torque
channels of the law and the limiter's peak ratio. The numpy reference path is the same law with
``compiled=False``; every quantity is the same equation in the same order (rounding differences only).

With e = θ_d − θ, ė = θ̇_d − θ̇, acc = θ̈_d + G_D ė + G_P e and u_p, a⊥, P from :func:`pidc_core`:

- ``mode`` 0 (PIDC, eq. 45, f = f∥): base = Ph, motion = PMu_p, no force channel;
- ``mode`` 1 (hybrid, eq. 54): u_F = (I−P)f_F for f_F = Aᵀλ_d + PI (from the caller), base = h + μMa⊥,
  motion = PMu_p + μPMu_p, μ = (I−P)MM_c⁻¹ (:func:`qv_control.kernels.laws.coupled_core`);
- ``mode`` 2 (passive joints, every joint actuated: I + H = I, eq. 62): base = Ph, motion = PMu_p and
  λ_m = A⁺ᵀ(base + motion − h − Mu_p) (the multiplier the motion command produces); ``mode`` 3 adds the
  internal-force channel without PI (:func:`_internal`; ``f_F`` = its check tolerances (rtol, atol)).

τ = base [+ force] + motion and peak = max |τ_i|/L_i over the finite limits (NaN: inf), as
:func:`qv_control.saturation.saturate` computes them; the caller scales the channels when peak > 1.

``out`` rows (n columns): τ, base, force, motion, u_p, a⊥, λ_m (m entries), θ, e, [cond D, peak, dim 𝓔],
z and z_d of the internal-force channel (m entries), then
P (n rows), A⁺ᵀ (m rows), D (k rows, k columns) and the coordinates' workspace (2k + 3 rows). ``U``: the
Jacobi rotation of cond(D) kept between ticks (:func:`qv_control.kernels.laws._cond`).
Returns 1, or 0 (A not certified of full row rank: the numpy path decides), 2 (cond D > cond_max: the
numpy path raises), 3 (an orientation coordinate beyond its chart: the numpy path raises), 4 (λ_d not
internal: the numpy path raises).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import mv

from .coordinates import evaluate_into
from .laws import coupled_core, pidc_core
from .layout import TICK_ROWS as ROWS
from .layout import tick_rows as rows
from .limiter import peak_ratio

_M = "float64[:, :]"


@njit(cache=True)
def _pmv(P, M, x, y) -> None:
    """y = P(Mx)."""
    y[:] = mv(P, mv(M, x))


@njit(cache=True)
def _channels(mode, M, h, P, ApT, u_p, a_perp, f_F, out) -> None:
    """base, force, motion (and λ_m in mode 2) into ``out`` rows 1, 2, 3 (6) (module doc)."""
    n = h.shape[0]
    base, force, motion = out[1], out[2], out[3]
    _pmv(P, M, u_p, motion)                          # PMu_p
    if mode == 1:
        for i in range(n):
            s = 0.0
            for t in range(n):
                s += P[i, t] * f_F[t]
            force[i] = f_F[i] - s                    # (I−P)f_F
        Ma = np.zeros(n)
        for i in range(n):
            for t in range(n):
                Ma[i] += M[i, t] * a_perp[t]
        mu = np.empty((2, n))
        coupled_core(np.ascontiguousarray(M), np.ascontiguousarray(P), Ma, motion.copy(), mu)  # μMa⊥, μPMu_p
        for i in range(n):
            base[i] = h[i] + mu[0, i]
            motion[i] = motion[i] + mu[1, i]
        return
    force[:] = 0.0
    for i in range(n):
        s = 0.0
        for t in range(n):
            s += P[i, t] * h[t]
        base[i] = s                                  # Ph
    if mode >= 2:
        m = ApT.shape[0]
        r = np.empty(n)
        for i in range(n):
            s = 0.0
            for t in range(n):
                s += M[i, t] * u_p[t]
            r[i] = base[i] + motion[i] - h[i] - s
        for j in range(m):
            s = 0.0
            for i in range(n):
                s += ApT[j, i] * r[i]
            out[6, j] = s                            # λ_m = A⁺ᵀ(f − h − Mu_p)


@njit(cache=True)
def _internal(A, lam_d, check, rtol, atol, out) -> bool:
    """The internal-force channel with every joint actuated (qv_control.laws.internal_force, no PI): E = U₁ of
    A = U₁S₁V₁ᵀ (the same LAPACK dgesdd as its numpy path), z_m = Eᵀλ_m, z_d = Eᵀλ_d after the check
    ‖λ_d − EEᵀλ_d‖ ≤ check[1] + check[0]·‖λ_d‖ (False: the numpy path raises), τ_F = AᵀE(z_d − z_m) into row 2,
    z_d into rows 10 and 11, dim 𝓔 into out[9, 2]."""
    m, n = A.shape
    if m == 0:
        out[9, 2] = 0
        out[2] = 0.0
        return True
    U, sv, _ = np.linalg.svd(np.ascontiguousarray(A))
    tol = max(rtol * sv[0], atol)
    r = 0
    for i in range(sv.shape[0]):
        r += sv[i] > tol
    out[9, 2] = r
    zz = np.empty(r)
    off = lam_d.copy()
    total = 0.0
    for j in range(r):
        a = b = 0.0
        for i in range(m):
            a += U[i, j] * lam_d[i]
            b += U[i, j] * out[6, i]
        out[10, j] = out[11, j] = a
        zz[j] = a - b
        for i in range(m):
            off[i] -= U[i, j] * a
    size = 0.0
    for i in range(m):
        size += off[i] * off[i]
        total += lam_d[i] * lam_d[i]
    if math.sqrt(size) > check[1] + check[0] * math.sqrt(total):
        return False
    out[2] = mv(A.T, mv(U[:, :r], zz))          # AᵀE(z_d − z_m)
    return True


_SIG = (f"int64({_M}, {_M}, {_M}, float64[:], {_M}, float64[:], float64[:, :, ::1], int64[:, ::1], "
        f"int64[:, ::1], int64, float64[::1], float64[::1], {_M}, float64[:], {_M}, float64[:], float64[:], "
        "float64[:], float64[:], float64[:], float64[:], float64, float64, float64, float64, int64, float64[:], "
        "float64[:], float64[:, ::1], float64[:, ::1])")


@kernel(_SIG)
def projection_tick(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, M, h, A, ad, th_d, thd_d, thdd_d,
                    lam_d, kp, kd, rtol, atol, cond_max, mode, f_F, limits, out, U) -> int:
    """The tick of a projection law (module doc)."""
    m, n = A.shape
    W = out[ROWS + n + m + k:]                       # the coordinates' rows
    if evaluate_into(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, W):
        return 3
    b = 2 * k + plan.shape[0] - k
    theta, thd, Jdq = W[b, :k], W[b + 1, :k], W[b + 2, :k]
    acc = np.empty(k)
    for i in range(k):
        e = th_d[i] - theta[i]
        out[7, i] = theta[i]
        out[8, i] = e
        acc[i] = thdd_d[i] + kd * (thd_d[i] - thd[i]) + kp[i] * e
    mats = out[ROWS:ROWS + n + m + k]
    vecs = np.empty((3, n))
    if not pidc_core(A, ad, W[:k], Jdq, acc, rtol, atol, mats, vecs, U):
        return 0
    cond = vecs[2, 0]
    out[9, 0] = cond
    if not cond <= cond_max:
        return 2
    out[4] = vecs[0]
    out[5] = vecs[1]
    _channels(mode, M, h, mats[:n], mats[n:n + m], out[4], out[5], f_F, out)
    if mode == 3 and not _internal(A, lam_d, f_F, rtol, atol, out):
        return 4
    tau = out[0]
    for i in range(n):
        tau[i] = (out[1, i] + out[2, i]) + out[3, i] if mode == 1 or mode == 3 else out[1, i] + out[3, i]
    out[9, 1] = peak_ratio(tau, limits)
    return 1




def warm() -> None:
    """Run the kernel once (:func:`qv_dynamics.kernels.loader.warm_all` compiles it into numba's disk cache first)."""
    n, k = 2, 1
    E, z3 = np.eye(3), np.zeros(3)
    plan = np.array([[0, 0, 0, 0]])
    out = np.zeros((rows(n, 1, k, 1), n))
    projection_tick(np.ones((6, n)), np.ones((6, n)), E, z3, E, z3, np.zeros((2, 3, 3)), plan,
                    np.ones((2, n), np.int64), k, np.ones(n), np.ones(n), np.eye(n), np.ones(n), np.eye(1, n, 1),
                    np.zeros(1), np.zeros(k), np.zeros(k), np.zeros(k), np.ones(1), np.ones(k), 1.0, 1e-9, 1e-9,
                    1e6, 1, np.ones(n), np.full(n, math.inf), out, np.eye(k))
    out[:] = 0.0
    projection_tick(np.ones((6, n)), np.ones((6, n)), E, z3, E, z3, np.zeros((2, 3, 3)), plan,
                    np.ones((2, n), np.int64), k, np.ones(n), np.ones(n), np.eye(n), np.ones(n), np.eye(1, n, 1),
                    np.zeros(1), np.zeros(k), np.zeros(k), np.zeros(k), np.ones(1), np.ones(k), 1.0, 1e-9, 1e-9,
                    1e6, 3, np.array([1e-6, 1e-6]), np.full(n, math.inf), out, np.eye(k))
