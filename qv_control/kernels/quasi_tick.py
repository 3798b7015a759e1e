"""A quasi-velocity law's tick after the decomposition in one compiled (numba) call: the minimal
coordinates with Ȧ (:func:`qv_control.kernels.coordinates.evaluate_into`), the motion law, the force channel, the
torque channels and the limiter's peak ratio. The numpy reference path is the same law with ``compiled=False``;
every quantity is the same equation (rounding differences only).

Motion (``mode``): 0 tracking, eq. 35–38 with the normal-motion terms (:func:`qv_control.kernels.laws.tracking_core`)
and, with ``rate_mode`` 1, the backward difference (Gv_n)˙ = (Gv_n − Gv_n,prev)/dt subtracted from u_v (2: the
rate ``rate_prev`` of the previous sample at a repeated stamp); 1 setpoint, u_v = −k_d v_r − DᵀK_p(θ − θ_d)
(eq. 44 with the SPEC's Dᵀ); 2 setpoint as printed, u_v = −k_d v_r − K_p(θ − θ_d).

Force channel (``force_on``, eq. 42/47): ξ_d = V₁ᵀΛᵀλ_d, u_ξ = ξ_d − Γ_ξv_r (``compensate``; else ξ_d)
[+ V₁ᵀΛᵀc for the force PI's correction c, when ``corr`` has m entries]. Torque: τ = base + QV₁u_ξ + QV₂u_v
with base = g (+ the carried bias), peak = max |τ_i|/L_i (:func:`qv_control.kernels.tick.peak_ratio`).

``out`` rows (n columns): τ, base, force, motion, u_v, ε, e = θ − θ_d, θ, u_ξ, ξ_d, Gv_n, (Gv_n)˙, v_n,
[cond D, peak, V = ½‖v_r‖² + ½eᵀK_pe], the tracking kernel's rows (7 + k), the coordinates' rows. ``U``: the
Jacobi rotation of cond(D) kept between ticks (:func:`qv_control.kernels.laws._cond`). Returns 1,
2 (cond D > cond_max: the numpy path raises) or 3 (an orientation beyond its chart: the numpy path raises).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel

from .coordinates import evaluate_into
from .laws import reduced_core, tracking_core
from .layout import QUASI_TICK_ROWS as ROWS
from .layout import quasi_tick_rows as rows
from .tick import peak_ratio

_M = "float64[:, :]"
_V = "float64[:]"


@njit(cache=True)
def _force(Lam, V, r, gxi, lam_d, corr, force_on, compensate, out) -> None:
    """u_ξ and ξ_d into ``out`` rows 8, 9 (module doc); zeros without a force channel."""
    m, n = Lam.shape
    if not force_on:
        out[8, :r] = 0.0
        out[9, :r] = 0.0
        return
    w = np.zeros(n)
    c = np.zeros(n)
    fb = corr.shape[0] == m
    for ln in range(m):
        for i in range(n):
            w[i] += Lam[ln, i] * lam_d[ln]           # Λᵀλ_d
            if fb:
                c[i] += Lam[ln, i] * corr[ln]
    for j in range(r):
        s = t = 0.0
        for i in range(n):
            s += w[i] * V[i, j]
            t += c[i] * V[i, j]
        out[9, j] = s
        u = s - gxi[j] if compensate else s
        out[8, j] = u + t if fb else u


@njit(cache=True)
def _torque(Q, V, r, k, base, out) -> None:
    """base, force = QV₁u_ξ, motion = QV₂u_v and τ into ``out`` rows 1, 2, 3, 0."""
    n = base.shape[0]
    a = np.zeros(n)
    f = np.zeros(n)
    for i in range(n):
        for j in range(r):
            a[i] += V[i, j] * out[8, j]
        for j in range(k):
            f[i] += V[i, r + j] * out[4, j]
    for i in range(n):
        s = t = 0.0
        for j in range(n):
            s += Q[i, j] * a[j]
            t += Q[i, j] * f[j]
        out[1, i] = base[i]
        out[2, i] = s
        out[3, i] = t
        out[0, i] = (base[i] + s) + t if r else base[i] + t


_SIG = (f"int64({_M}, {_M}, {_M}, {_V}, {_M}, {_V}, float64[:, :, ::1], int64[:, ::1], int64[:, ::1], int64, "
        f"float64[::1], float64[::1], {', '.join([_M] * 8)}, {_V}, {_V}, {_V}, {_V}, {_V}, {_V}, {_V}, {_V}, {_V}, "
        f"{_V}, float64, float64, int64, int64, int64, int64, int64, {_V}, float64, {_V}, {_V}, float64[:, ::1], "
        "float64[:, ::1])")


@kernel(_SIG)
def quasi_tick(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, Q, Qi, Qd, V, W1, Lam, G, Gv, v, vr, gxi,
               base, th_d, thd_d, thdd_d, lam_d, corr, kp, kd, cond_max, mode, normal, force_on, compensate,
               rate_mode, gvn_prev, dt, rate_prev, limits, out, U) -> int:
    """The tick of a quasi-velocity law (module doc)."""
    r = W1.shape[0]
    T = out[ROWS:ROWS + 7 + k]
    W = out[ROWS + 7 + k:]
    if evaluate_into(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, W):
        return 3
    mc = plan.shape[0] - k
    b = 2 * k + mc
    theta = W[b, :k]
    u_v = out[4, :k]
    if mode == 0:
        if not tracking_core(Qi, Qd, V, W1, Lam, G, Gv, W[:k], W[k:2 * k], W[2 * k:b], v, vr, theta, th_d,
                             W[b + 1, :k], thd_d, thdd_d, kp, kd, cond_max, normal, T, U):
            return 2
        out[13, 0] = T[6, 0]
        for i in range(k):
            u_v[i] = T[0, i]
            out[5, i] = T[1, i]
            out[6, i] = T[5, i]
            out[10, i] = T[3, i]
            if rate_mode == 1:
                out[11, i] = (T[3, i] - gvn_prev[i]) / dt
            elif rate_mode == 2:
                out[11, i] = rate_prev[i]
            if rate_mode:
                u_v[i] -= out[11, i]
        for i in range(r):
            out[12, i] = T[4, i]
    else:
        D = T[7:7 + k, :k]
        cond = reduced_core(Qi, V, r, W[:k], D, U)
        out[13, 0] = cond
        if not cond <= cond_max:
            return 2
        Vl = 0.0
        for i in range(k):
            out[6, i] = e = theta[i] - th_d[i]
            Vl += e * (kp[i] * e)
        vv = 0.0
        for i in range(k):
            vv += vr[i] * vr[i]
            if mode == 1:
                s = 0.0
                for j in range(k):
                    s += kp[j] * out[6, j] * D[j, i]
                u_v[i] = -kd * vr[i] - s
            else:
                u_v[i] = -kd * vr[i] - kp[i] * out[6, i]
        out[13, 2] = 0.5 * vv + 0.5 * Vl
    for i in range(k):
        out[7, i] = theta[i]
    _force(Lam, V, r, gxi, lam_d, corr, force_on, compensate, out)
    _torque(Q, V, r, k, base, out)
    out[13, 1] = peak_ratio(out[0], limits)
    return 1




def warm() -> None:
    """Run the kernel once (:func:`qv_dynamics.kernels.loader.warm_all` compiles it into numba's disk cache first)."""
    n, k = 3, 2
    E, z3, z = np.eye(3), np.zeros(3), np.zeros(k)
    plan = np.array([[0, 0, 0, 0], [0, 0, 1, 1], [3, 0, 2, 0]])
    for mode in (0, 1, 2):
        quasi_tick(np.ones((6, n)), np.ones((6, n)), E, z3, E, z3, np.zeros((2, 3, 3)), plan,
                   np.ones((2, n), np.int64), k, np.ones(n), np.ones(n), E, E, E, E, np.ones((1, 1)),
                   np.ones((1, n)), E, np.eye(k), np.ones(n), np.ones(k), np.ones(1), np.ones(n), z, z, z,
                   np.ones(1), np.ones(1), np.ones(k), 1.0, 1e6, mode, 1, 1, 1, 1, z, 1e-3, z,
                   np.full(n, math.inf), np.zeros((rows(n, k, 3), n)), np.eye(k))
