"""The tool-frame operational-space law's whole tick in one compiled (numba) call after Pinocchio's one Coriolis
pass (``computeCoriolisMatrix`` + the frame placements): M, h, the frame's J, J̇q̇ and placement read from its
``Data`` through views (:mod:`qv_dynamics.kernels.crb`, :func:`.osc_frames.frame_jacobian`), then the law, its force
PI, its carried integral torque and the limiter (:mod:`.osc_parts`), the law's state in one packed array ``S``
(:mod:`.osc_layout`). The numpy reference path is :class:`~qv_control.laws.osc.OperationalSpaceLaw` with
``compiled=False``; every quantity is the same equation (rounding differences only: M, h and J̇q̇ from another
Pinocchio pass, Λ_x by Cholesky in place of LU).

Return codes (:mod:`.osc_layout`): OK; FALLBACK (M or JM⁻¹Jᵀ not positive definite, or an input of another size:
the numpy path decides and raises); NON_FINITE (a non-finite state or reference: the numpy path raises naming
it). Both leave the state as it was.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import cholesky, mtv_into

from . import osc_layout as L
from .coordinates import log3
from .osc_frames import frame_jacobian
from .osc_parts import (
    carry_switch,
    carry_tick,
    channels,
    dynamics,
    finite,
    force_pi,
    limit,
    pi_reset,
    task_inertia,
)

_M = "float64[:, :]"


@njit(cache=True)
def _tool_task(S, R, p, J6, qd, pd, vd, ad, dt, contact, out) -> None:
    """e = (p_d − p, log₃(R_d Rᵀ)), a = K_P e + K_D(ẋ_d − ẋ) + ẍ_d [+ K_I z], a* = Ωa (``out`` rows ERR, ASTAR),
    the motion integral z advanced unless the limiter scaled the motion channel (S rows Z, A_INT)."""
    P, V = S[L.PAR], S[L.VAR]
    n = qd.shape[0]
    e, a = out[L.ERR], out[L.ASTAR]
    Rd = S[L.GRAV, 3:12]
    E = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            E[i, j] = Rd[3 * i] * R[j, 0] + Rd[3 * i + 1] * R[j, 1] + Rd[3 * i + 2] * R[j, 2]
    phi = np.empty(3)
    log3(E, phi)
    ax = S[L.AXES]
    kx = int(P[L.N_AXES])
    xdot = np.zeros(6)
    for r in range(kx):
        i = int(ax[r])
        s = 0.0
        for j in range(n):
            s += J6[i, j] * qd[j]
        xdot[i] = s
    omega = np.ones(6)
    if contact:
        for r in range(int(P[L.N_FORCE])):
            omega[int(ax[6 + r])] = 0.0
    for i in range(6):
        e[i] = pd[i] - p[i] if i < 3 else phi[i - 3]
        ev = -xdot[i] + (vd[i] if i < 3 else 0.0)
        a[i] = P[L.KP_X] * e[i] + P[L.KD_X] * ev
        if i < 3:
            a[i] += ad[i]
    ki = P[L.KI_X]
    if ki > 0:
        z, a_int = S[L.Z], S[L.A_INT]
        frozen = V[L.SAT_ACTIVE] != 0.0 and V[L.SAT_MOTION] < 1.0
        lim = P[L.I_LIMIT] / ki
        for i in range(6):
            if not frozen and 0.0 < dt <= 0.1:
                z[i] += dt * e[i] * omega[i]
            z[i] = min(max(z[i], -lim), lim)
            a[i] += ki * z[i]
            a_int[i] = omega[i] * ki * z[i]
    for i in range(6):
        a[i] = omega[i] * a[i]


@njit(cache=True)
def _tool_force(S, J6, t, lam_d, meas, has_meas, out) -> None:
    """In contact: f = λ_d + PI, force = J_fᵀf, τ_I += J_fᵀk_i∫e (``out`` rows LAM_D, F_CMD, FORCE, TAUI)."""
    P, V = S[L.PAR], S[L.VAR]
    n = J6.shape[1]
    k = int(P[L.N_FORCE])
    ax = S[L.AXES, 6:6 + k]
    f = out[L.F_CMD, :k]
    out[L.LAM_D, :k] = lam_d
    corr = np.zeros(k)
    frozen = V[L.SAT_ACTIVE] != 0.0 and V[L.SAT_FORCE] < 1.0
    fb = has_meas and force_pi(S, t, lam_d, meas, frozen, corr)
    for r in range(k):
        f[r] = lam_d[r] + corr[r] if fb else lam_d[r]
    force, ti = out[L.FORCE], out[L.TAUI]
    zi = V[L.PI_Z_OK] != 0.0
    for j in range(n):
        s = w = 0.0
        for r in range(k):
            s += J6[int(ax[r]), j] * f[r]
            if zi:
                w += J6[int(ax[r]), j] * (P[L.KI_F] * S[L.PI_Z, r])
        force[j] = s
        if zi:
            ti[j] += w
    V[L.FORCE_SEEN] = 1.0


@njit(cache=True)
def _tool_rows(S, J6, acc, Jx, Jd) -> None:
    """J and J̇q̇ of the task rows (``axes``)."""
    for r in range(Jx.shape[0]):
        i = int(S[L.AXES, r])
        Jx[r] = J6[i]
        Jd[r] = acc[i]


@njit(cache=True)
def _tool_int(S, Jx, Lam, ti) -> None:
    """τ_I = JᵀΛ_x(ΩK_I z) of the task rows (zero without the motion integral)."""
    kx, n = Jx.shape
    ti[:] = 0.0
    if S[L.PAR, L.KI_X] > 0:
        f3 = np.zeros(kx)
        for r in range(kx):
            for c in range(kx):
                f3[r] += Lam[r, c] * S[L.A_INT, int(S[L.AXES, c])]
        mtv_into(Jx, f3, ti)


@njit(cache=True)
def _tool_frame(Y, Ct, Jw, dJw, oMf, G, qd, S, M, h, R, J6, acc) -> None:
    """M, h, the tool's rotation R, its J (6 × n, world-aligned) and J̇q̇ from the Coriolis pass's Data."""
    P = S[L.PAR]
    n = qd.shape[0]
    nj = int(P[L.NJOINTS])
    dynamics(Y, G[:nj, :3], S[L.ARMATURE, :n], S[L.GRAV, :3], Ct, Jw, qd, M, h)
    fid = int(P[L.FRAME])
    for i in range(3):
        for j in range(3):
            R[i, j] = oMf[fid, i + 3 * j]
    frame_jacobian(Jw, dJw, oMf[fid, 9:12], G[nj, :n], qd, J6, acc)


@njit(cache=True)
def _first(S, q, R, flags) -> None:
    """The first sample (``flags`` 8, 16): q_n = q, R_d = the tool's orientation."""
    if flags & 8:
        S[L.Q_NULL, :q.shape[0]] = q
    if flags & 16:
        for i in range(3):
            for j in range(3):
                S[L.GRAV, 3 + 3 * i + j] = R[i, j]


@njit(cache=True)
def _tool_switch(S, contact, n) -> None:
    """The contact state of this sample; at a switch, the bumpless transfer (IntegralCarry.switch) and the motion
    integral restarts."""
    V = S[L.VAR]
    was = V[L.WAS_CONTACT]
    if was >= 0.0 and contact != (was == 1.0):
        carry_switch(S, n)
        if S[L.PAR, L.KI_X] > 0:
            S[L.Z, :6] = 0.0
    V[L.WAS_CONTACT] = 1.0 if contact else 0.0


@njit(cache=True)
def _checked(q, qd, pd, vd, ad, lam_d, meas, nq, k) -> int:
    """OK, FALLBACK (an input of another size) or NON_FINITE (a state or a rate of θ_d that is not finite)."""
    if q.shape[0] != nq or pd.shape[0] != 3 or vd.shape[0] != 3 or ad.shape[0] != 3 or lam_d.shape[0] < k \
            or meas.shape[0] < k:
        return L.FALLBACK
    return L.OK if finite(q) and finite(qd) and finite(vd) and finite(ad) else L.NON_FINITE


@njit(cache=True)
def _tool(Y, Ct, Jw, dJw, oMf, G, q, qd, pd, vd, ad, lam_d, meas, t, flags, S, out) -> int:
    P, V = S[L.PAR], S[L.VAR]
    n = qd.shape[0]
    contact, k = (flags & 1) != 0, int(P[L.N_FORCE])
    code = _checked(q, qd, pd, vd, ad, lam_d, meas, P[L.NQ], k)
    if code != L.OK:
        return code
    M, h, R = np.empty((n, n)), np.empty(n), np.empty((3, 3))
    J6, acc = np.empty((6, n)), np.empty(6)
    _tool_frame(Y, Ct, Jw, dJw, oMf, G, qd, S, M, h, R, J6, acc)
    kx = int(P[L.N_AXES])
    Jx, Jd = np.empty((kx, n)), np.empty(kx)
    _tool_rows(S, J6, acc, Jx, Jd)
    Lc, W = np.empty((n, n)), np.empty((n, kx))
    Lam = out[L.LAMBDA_X:L.LAMBDA_X + kx, :kx]
    if not (cholesky(M, Lc) and task_inertia(Lc, Jx, P[L.DAMPING], W, np.empty((kx, kx)), Lam)):
        return L.FALLBACK                        # (before any state changed: the numpy path redoes the tick)
    p = oMf[int(P[L.FRAME]), 9:12]
    pdv = np.empty(3)
    for i in range(3):
        pdv[i] = p[i] if flags & 4 else pd[i]    # (4: no θ_d, the tool's position)
    _first(S, q, R, flags)
    dt = t - V[L.T_PREV] if V[L.T_PREV_OK] != 0.0 else 0.0
    V[L.T_PREV_OK], V[L.T_PREV] = 1.0, t
    _tool_switch(S, contact, n)
    carry_tick(S, t)
    _tool_task(S, R, p, J6, qd, pdv, vd, ad, dt, contact, out)
    ax, w = np.empty(kx), np.empty(n)
    for r in range(kx):
        ax[r] = out[L.ASTAR, int(S[L.AXES, r])]
    for i in range(n):
        w[i] = P[L.KP_NULL] * (S[L.Q_NULL, i] - q[i]) - P[L.KD_X] * qd[i]
    base, force, motion, ti = out[L.BASE, :n], out[L.FORCE, :n], out[L.MOTION, :n], out[L.TAUI, :n]
    channels(M, Lc, h, Jx, Jd, W, Lam, ax, w, motion, base)
    _tool_int(S, Jx, Lam, ti)
    if V[L.BIAS_OK] != 0.0:
        for j in range(n):
            base[j] += S[L.BIAS, j]
    force[:] = 0.0
    if contact:
        _tool_force(S, J6, t, lam_d[:k], meas[:k], (flags & 2) != 0, out)
    else:
        pi_reset(S)
    S[L.TAU_INT, :n] = ti
    V[L.TAU_INT_OK] = 1.0
    limit(S, base, force, contact, motion, out[L.TAU, :n])
    return L.OK


_TOOL_SIG = (f"int64({_M}, {_M}, {_M}, {_M}, {_M}, int64[:, ::1], float64[::1], float64[::1], float64[::1], "
             "float64[::1], float64[::1], float64[::1], float64[::1], float64, int64, float64[:, ::1], "
             "float64[:, ::1])")


@kernel(_TOOL_SIG)
def tool_tick(Y, Ct, Jw, dJw, oMf, G, q, qd, pd, vd, ad, lam_d, meas, t, flags, S, out) -> int:
    """The tool-frame law's tick (:class:`~qv_control.laws.osc.OperationalSpaceLaw`, module doc there) after the
    Coriolis pass: M, h, the frame's J, J̇q̇ and placement from ``Data`` (views Y, Cᵀ, J_w, J̇_w, oMf; ``G`` the joint
    tree then the frame's supporting columns), e and a* with the motion integral, Λ_x of the task rows, the three
    channels, the force PI in contact (``flags``: 1 contact, 2 a measured force, 4 no θ_d: hold the tool's
    position, 8 q_n = q, 16 R_d = the tool's orientation), the carried bias and τ_I, the limiter: τ in
    ``out[TAU]``. Returns OK, FALLBACK (also for inputs of other sizes) or NON_FINITE (module doc)."""
    return _tool(Y, Ct, Jw, dJw, oMf, G, q, qd, pd, vd, ad, lam_d, meas, t, flags, S, out)


def warm() -> None:
    """Run the kernel once (:func:`qv_dynamics.kernels.loader.warm_all` compiles it into numba's disk cache first): a
    two-joint chain, the task of its first two rows."""
    from .osc_layout import state_shape

    n = 2
    S = np.zeros(state_shape(n))
    S[L.PAR, [L.NJOINTS, L.NQ, L.N_AXES, L.N_FORCE, L.FRAME]] = 3, n, 2, 1, 0
    S[L.ARMATURE, :n] = 1.0
    S[L.AXES, :2] = 0, 1
    S[L.VAR, L.WAS_CONTACT] = -1.0
    G = np.array([[0, 0, 0], [0, 1, 0], [1, 1, 1], [1, 1, 0]], np.int64)
    Jw = np.zeros((6, n))
    Jw[0, 0] = Jw[1, 1] = 1.0
    oMf = np.zeros((1, 12))
    oMf[0, [0, 4, 8]] = 1.0
    v = np.zeros(n)
    x = np.zeros(3)
    tool_tick(np.zeros((3, 10)), np.zeros((n, n)), Jw, np.zeros((6, n)), oMf, G, v, v, x, x, x, np.zeros(1),
              np.zeros(1), 0.0, 3, S, np.zeros((L.LAMBDA_X + 6, S.shape[1])))
