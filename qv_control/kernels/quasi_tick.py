"""A quasi-velocity law's whole tick in one compiled (numba) call after Pinocchio's Coriolis pass: the state and
reference checks and the terms (:mod:`.blocks`), the steady-state decomposition
(:func:`qv_dynamics.kernels.quasi.decompose_core`, V₁, V₂ aligned to the previous tick's basis kept in ``F``), the
minimal coordinates (:func:`.coordinates.coordinates_core`), the motion law, the force channel with its PI, the
motion integral, the normal-motion rate, the carried bias and the limiter (:func:`.limiter.saturate`). The numpy
reference path is the same law with ``compiled=False``; every quantity is the same equation (rounding only).

Motion (``mode``): 0 tracking, eq. 35–38 with the normal-motion terms (:func:`qv_control.kernels.laws.tracking_core`),
the backward difference (Gv_n)˙ = (Gv_n − Gv_n,prev)/dt subtracted from u_v (the previous rate at a repeated stamp;
none after a gap), the motion integral u_v −= k_I z, ż = D⁻¹(Δe/Δt + K_pe) (ε at its first sample), clamped to
‖k_I z‖ ≤ limit and frozen while the last tick scaled the motion channel; 1 setpoint, u_v = −k_d v_r − DᵀK_p(θ − θ_d)
(eq. 44 with the SPEC's Dᵀ); 2 setpoint as printed, u_v = −k_d v_r − K_p(θ − θ_d).

Force channel (eq. 42/47): ξ_d = V₁ᵀΛᵀλ_d, u_ξ = ξ_d − Γ_ξv_r (or ξ_d) + V₁ᵀΛᵀ(k_f e + k_i∫e), e = λ_d,prev − λ_meas
(:class:`qv_control.laws.base.ForcePI`: the previous stamp's target, the integral's step clip(Δt, 0, max_dt), frozen
while the last tick scaled the force channel). τ = g + b + QV₁u_ξ + QV₂u_v through the limiter; τ_I =
Q(−V₂k_I z + V₁V₁ᵀΛᵀk_i∫e) kept for the carry.

Returns OK (1) and commits the state (the blocks of :mod:`.layout`), or 0 without touching it: the numpy path
then serves the tick (bad input, a basis that moved too far or lost rank, cond D > cond_max, an orientation
beyond its chart, no hold target yet).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi import OK as DECOMPOSED
from qv_dynamics.kernels.quasi import decompose_core
from qv_dynamics.kernels.sim_linalg import lu_solve

from . import layout as L
from .blocks import alive, borrowed, fm, fv, im, iv, or_zeros, ready, scratch_terms, take, targets
from .conditioning import reduced_checked
from .coordinates import coordinates_core
from .integrals import bounded_step, pi_commit, pi_step
from .laws import tracking_core
from .limiter import saturate

_NO_TAU = np.zeros(0)
_NO_GV = np.zeros((0, 0))
_OPT = "optional(float64[:])"
_SIG = (f"int64(float64[:, ::1], float64[:, ::1], float64[::1, :], float64[::1, :], float64[:, ::1], "
        f"float64[:, ::1], int64[:, ::1], float64[:, ::1], float64[:], float64[:], {_OPT}, {_OPT}, {_OPT}, {_OPT}, "
        f"{_OPT}, float64, float64[::1])")


@njit(cache=True, inline="always")
def cond_rotation(st, U) -> None:
    """The Jacobi rotation of cond(D) back to the identity every 1024 ticks (its orthogonality drifts by rounding;
    :meth:`qv_control.laws.base.ControlLaw._cond_rotation`)."""
    if not (int(st[L.S_COND_CALLS]) + 1) & 1023:
        U[:] = 0.0
        for i in range(U.shape[0]):
            U[i, i] = 1.0


@njit(cache=True, inline="always")
def _force(Lam, V, r, gxi, lam_d, corr, fb, compensate, u_xi, xi_d, w, c) -> None:
    """ξ_d = V₁ᵀΛᵀλ_d and u_ξ = ξ_d − Γ_ξv_r (or ξ_d) [+ V₁ᵀΛᵀ corr] (``w``, ``c``: n scratch each)."""
    m, n = Lam.shape
    w[:] = 0.0
    c[:] = 0.0
    for ln in range(m):
        for i in range(n):
            w[i] += Lam[ln, i] * lam_d[ln]
            if fb:
                c[i] += Lam[ln, i] * corr[ln]
    for j in range(r):
        s = tt = 0.0
        for i in range(n):
            s += w[i] * V[i, j]
            tt += c[i] * V[i, j]
        xi_d[j] = s
        u = s - gxi[j] if compensate else s
        u_xi[j] = u + tt if fb else u


@njit(cache=True, inline="always")
def _channels(Q, V, r, k, u_xi, u_v, force, motion, a, f) -> None:
    """QV₁u_ξ and QV₂u_v (``a``, ``f``: n scratch each)."""
    n = Q.shape[0]
    for i in range(n):
        a[i] = f[i] = 0.0
    for i in range(n):
        for j in range(r):
            a[i] += V[i, j] * u_xi[j]
        for j in range(k):
            f[i] += V[i, r + j] * u_v[j]
    for i in range(n):
        s = tt = 0.0
        for j in range(n):
            s += Q[i, j] * a[j]
            tt += Q[i, j] * f[j]
        force[i] = s
        motion[i] = tt


@njit(cache=True, inline="always")
def _rate_mode(st, par, t, normal) -> int:
    """(Gv_n)˙ of this tick: −1 not wanted, 0 none, 1 the backward difference, 2 the previous rate (a repeated
    stamp) (:meth:`qv_control.laws.quasi_tracking.QuasiTrackingLaw._rate_plan`)."""
    if not normal or par[L.P_NORMAL_RATE] == 0.0:
        return -1
    pt = st[L.S_GVN_T]
    if pt == pt and 0.0 < t - pt <= par[L.P_RATE_DT]:
        return 1
    if pt != pt or t != pt:
        return 0
    return 2 if st[L.S_GRATE] != 0.0 else 0


@njit(cache=True, inline="always")
def _integral(I, F, st, par, t, D, e, eps, kp):
    """k_I z of the motion integral (module doc) and the state it leaves: (k_I z, z, integral t, e stamp)."""
    k = e.shape[0]
    e_prev = fv(I, F, L.F_EP)
    et = st[L.S_E_T]
    eps_i = eps.copy()
    if et == et and 0.0 < t - et <= par[L.P_INT_DT]:
        b = np.empty(k)
        for i in range(k):
            b[i] = (e[i] - e_prev[i]) / (t - et) + kp[i] * e[i]
        lu_solve(np.ascontiguousarray(D), b, eps_i)
    et_new = t if (et != et or t > et) else et
    z = np.empty(k)
    it_new = bounded_step(fv(I, F, L.F_IZ), st[L.S_INT_Z] != 0.0, st[L.S_INT_T], t, eps_i, par[L.P_KI_MOTION],
                          par[L.P_INT_LIMIT], par[L.P_INT_DT], st[L.S_MOTION_FROZEN] != 0.0, z)
    return par[L.P_KI_MOTION] * z, z, it_new, et_new


@njit(cache=True, inline="always")
def _tau_int(Q, V, Lam, r, k, zm, zf, has_zf, ki, force_on, out, u, w) -> None:
    """τ_I = Q(−V₂z_m + V₁V₁ᵀΛᵀ(k_i z_f)) (:meth:`qv_control.laws.quasi_tracking.QuasiTrackingLaw._integral_terms`;
    ``u``, ``w``: n scratch each)."""
    n = Q.shape[0]
    u[:] = 0.0
    if zm is not None:
        for i in range(n):
            s = 0.0
            for j in range(k):
                s += V[i, r + j] * zm[j]
            u[i] = u[i] - s
    if r and force_on and has_zf:
        w[:] = 0.0
        for ln in range(Lam.shape[0]):
            for i in range(n):
                w[i] += Lam[ln, i] * (ki * zf[ln])
        for i in range(n):
            s = 0.0
            for j in range(r):
                x = 0.0
                for p in range(n):
                    x += w[p] * V[p, j]
                s += V[i, j] * x
            u[i] = u[i] + s
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += Q[i, j] * u[j]
        out[i] = s


@njit(cache=True, inline="always")
def _sample(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, n, m, k, w):
    """The terms, the steady-state decomposition and the coordinates of this state, in blocks of the scratch ``w``:
    (ok, g, out, vec, Wc, Ȧ, the scratch's next free entry), ``out``/``vec`` as
    :func:`qv_dynamics.kernels.quasi.decompose_core` lays them out, Wc as :func:`.coordinates.coordinates_core`."""
    par = fv(I, F, L.F_PAR)
    M, g, h, X, Fr, A, ad, Adot, o = scratch_terms(Y, Ct, Jw, dJw, oMi, oMf, I, F, qdot, w)
    out, o = take(w, o, 6 * n + 4 * m, n)
    vec, o = w[o:o + 6 * n + 2 * m], o + 6 * n + 2 * m
    Wc, o = take(w, o, 2 * k + 3, n)
    ok = decompose_core(M, Ct.T, A, ad, qdot, fm(I, F, L.F_VP), fm(I, F, L.F_UP), g, _NO_TAU, m, par[L.P_RTOL],
                        par[L.P_ATOL], out, vec, False) == DECOMPOSED
    ok = ok and not coordinates_core(Fr, X, fm(I, F, L.F_RREF), im(I, L.I_PLAN), k, q, qdot, Wc)
    return ok, g, out, vec, Wc, Adot, o


@njit(cache=True, inline="always")
def _work_size(n, m, k, ns):
    """Entries of a tick's scratch (:func:`quasi_law_tick`: one allocation per tick, its arrays views of it)."""
    return n * n + 12 * ns + 2 * m * n + 12 * ns * n + 2 * n + m + (6 * n + 4 * m) * n + 6 * n + 2 * m \
        + (2 * k + 3) * n + k * k + 6 * max(k, m) + (7 + k) * n + 3 * m + 2 * k + 9 * n


@njit(cache=True, inline="always")
def _tracking(I, F, t, out, vec, Wc, Adot, th_d, thd_d, thdd_d, res, Dm, T):
    """Mode 0 (module doc): u_v, ε, e, Gv_n, (Gv_n)˙, v_n into ``res`` rows 0–5 (``T``: (7 + k) × n scratch);
    returns (ok, cond, rate mode, k_I z or None, the integral's new z, stamp and e stamp)."""
    st, par = fv(I, F, L.F_ST), fv(I, F, L.F_PAR)
    n, k = Wc.shape[1], Wc.shape[0] // 2 - 1
    r = n - k
    kp = fv(I, F, L.F_KP)
    normal = par[L.P_NORMAL] != 0.0 and r > 0
    if not tracking_core(out[n:2 * n], out[2 * n:3 * n], out[4 * n:5 * n], out[6 * n + r:6 * n + 2 * r, :r],
                         out[6 * n:6 * n + r], out[3 * n:4 * n], _NO_GV, Wc[:k], Wc[k:2 * k], Adot, vec[:n],
                         vec[n:2 * n - r], Wc[2 * k, :k], th_d, Wc[2 * k + 1, :k], thd_d, thdd_d, kp, par[L.P_KD],
                         par[L.P_COND_MAX], normal, T, fm(I, F, L.F_UC), False):
        return False, 0.0, -1, None, T[0, :k], 0.0, 0.0
    Dm[:] = T[7:7 + k, :k]
    res[0, :k], res[1, :k], res[2, :k], res[3, :k], res[5, :r] = T[0, :k], T[1, :k], T[5, :k], T[3, :k], T[4, :r]
    u_v, rate = res[0, :k], res[4, :k]
    rmode = _rate_mode(st, par, t, normal)
    rate[:] = 0.0
    if rmode == 1:
        gp = fv(I, F, L.F_GVN)
        for i in range(k):
            rate[i] = (res[3, i] - gp[i]) / (t - st[L.S_GVN_T])
    elif rmode == 2:
        rate[:] = fv(I, F, L.F_GRATE)
    if rmode > 0:
        for i in range(k):
            u_v[i] -= rate[i]
    if par[L.P_KI_MOTION] > 0.0:
        zm, zi, it_new, et_new = _integral(I, F, st, par, t, Dm, res[2, :k], res[1, :k], kp)
        for i in range(k):
            u_v[i] = u_v[i] - zm[i]
        return True, T[6, 0], rmode, zm, zi, it_new, et_new
    return True, T[6, 0], rmode, None, T[0, :k], 0.0, 0.0


@njit(cache=True, inline="always")
def _setpoint(I, F, mode, out, vec, Wc, th_d, res, Dm):
    """Modes 1, 2 (module doc): u_v and e into ``res`` rows 0, 2; returns (ok, cond, V)."""
    par = fv(I, F, L.F_PAR)
    n, k = Wc.shape[1], Wc.shape[0] // 2 - 1
    r = n - k
    kp, kd, vr = fv(I, F, L.F_KP), par[L.P_KD], vec[n:2 * n - r]
    cond = reduced_checked(out[n:2 * n], out[4 * n:5 * n], r, Wc[:k], Dm, fm(I, F, L.F_UC), par[L.P_COND_MAX])
    if cond > par[L.P_COND_MAX]:
        return False, cond, 0.0
    u_v, e = res[0, :k], res[2, :k]
    Vl = vv = 0.0
    for i in range(k):
        e[i] = Wc[2 * k, i] - th_d[i]
        Vl += e[i] * (kp[i] * e[i])
    for i in range(k):
        vv += vr[i] * vr[i]
        if mode == 1:
            s = 0.0
            for j in range(k):
                s += kp[j] * e[j] * Dm[j, i]
            u_v[i] = -kd * vr[i] - s
        else:
            u_v[i] = -kd * vr[i] - kp[i] * e[i]
    return True, cond, 0.5 * vv + 0.5 * Vl


@njit(cache=True, inline="always")
def _commit_tracking(I, F, t, rmode, res, zm, zi, it_new, et_new) -> None:
    """The tracking law's state after a served tick: the motion integral, the rate's history, the carry's phase."""
    st = fv(I, F, L.F_ST)
    k = fv(I, F, L.F_KP).shape[0]
    if zm is not None:
        fv(I, F, L.F_IZ)[:] = zi
        st[L.S_INT_T], st[L.S_INT_Z] = it_new, 1.0
        if et_new != st[L.S_E_T] or st[L.S_E_T] != st[L.S_E_T]:
            fv(I, F, L.F_EP)[:] = res[2, :k]
        st[L.S_E_T] = et_new
    if rmode >= 0:
        pt = st[L.S_GVN_T]
        if rmode == 1:
            fv(I, F, L.F_GRATE)[:] = res[4, :k]
            st[L.S_GRATE] = 1.0
        elif pt != pt or t != pt:
            st[L.S_GRATE] = 0.0
        if pt != pt or t != pt:
            fv(I, F, L.F_GVN)[:] = res[3, :k]
            st[L.S_GVN_T] = t
    if st[L.S_PHASE0] != st[L.S_PHASE0]:
        st[L.S_PHASE0] = t
    st[L.S_PHASE1] = t


@njit(cache=True, inline="always")
def _commit(I, F, t, cond, Vl, fb, out, vec, Wc, res, u_xi, xi_d, base, force, motion, th_d, lam_d, Dm) -> None:
    """The state every mode keeps (the limiter's freezes, the basis, D) and the diagnostics block."""
    st = fv(I, F, L.F_ST)
    n, k = Wc.shape[1], Wc.shape[0] // 2 - 1
    r = n - k
    D_ = fm(I, F, L.F_DIAG)
    sc = D_[L.D_SCALARS]
    active = sc[L.DS_ACTIVE] != 0.0
    st[L.S_FORCE_FROZEN] = 1.0 if active and sc[L.DS_FORCE_SCALE] < 1.0 else 0.0
    st[L.S_MOTION_FROZEN] = 1.0 if active and sc[L.DS_MOTION_SCALE] < 1.0 else 0.0
    st[L.S_COND_CALLS] += 1.0
    st[L.S_TICKS] += 1.0
    fm(I, F, L.F_VP)[:] = out[4 * n:5 * n]
    fm(I, F, L.F_DMAT)[:] = Dm
    sc[L.DS_COND], sc[L.DS_V], sc[L.DS_FEEDBACK], sc[L.DS_T] = cond, Vl, 1.0 if fb else 0.0, t
    D_[L.D_BASE, :n], D_[L.D_FORCE, :n], D_[L.D_MOTION, :n] = base, force, motion
    D_[L.D_UV, :k], D_[L.D_EPS, :k], D_[L.D_E, :k], D_[L.D_THETA, :k] = res[0, :k], res[1, :k], res[2, :k], \
        Wc[2 * k, :k]
    D_[L.D_UXI, :r], D_[L.D_XID, :r], D_[L.D_GVN, :k], D_[L.D_RATE, :k] = u_xi, xi_d, res[3, :k], res[4, :k]
    D_[L.D_VN, :r], D_[L.D_VR, :k] = res[5, :r], vec[n:2 * n - r]
    D_[L.D_THETA_D, :k], D_[L.D_LAMBDA_D, :r] = th_d, lam_d


@kernel(_SIG)
def quasi_law_tick(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, lam, th, thd, thdd, lamd, t, tau) -> int:
    """The whole tick of a quasi-velocity law (module doc)."""
    Y, Ct, Jw, dJw, oMi, oMf = borrowed(Y), borrowed(Ct), borrowed(Jw), borrowed(dJw), borrowed(oMi), borrowed(oMf)
    I, F, q, qdot = borrowed(I), borrowed(F), borrowed(q), borrowed(qdot)
    if not ready(I, F, q, qdot, lam, th, thd, thdd, lamd, t):
        return 0
    sz = iv(I, L.I_SIZES)
    n, m, k, mode = sz[L.SZ_N], sz[L.SZ_M], sz[L.SZ_K], sz[L.SZ_MODE]
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    owner = np.empty(_work_size(n, m, k, sz[L.SZ_SLOTS]))   # the tick's scratch, alive to the last line
    w = borrowed(owner)
    ok, g, out, vec, Wc, Adot, o = _sample(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, n, m, k, w)
    if not ok:
        return 0
    Dm, o = take(w, o, k, k)
    res, o = take(w, o, 6, max(k, m))
    T, o = take(w, o, 7 + k, n)
    sm, o = take(w, o, 3, m)             # λ_d (when none is given), u_ξ, ξ_d
    sk, o = take(w, o, 2, k)             # θ̇_d, θ̈_d (when none are given)
    sn, o = take(w, o, 9, n)             # n-vectors: the force channel's, the channels', τ_I's
    res[:] = 0.0
    sm[:] = 0.0
    sk[:] = 0.0
    th_d, lam_d = targets(I, F, th, lamd, sm[0])
    cond_rotation(st, fm(I, F, L.F_UC))
    Vl, zm, zi, it_new, et_new, rmode = 0.0, None, res[0, :k], 0.0, 0.0, -1
    if mode == 0:
        ok, cond, rmode, zm, zi, it_new, et_new = _tracking(I, F, t, out, vec, Wc, Adot, th_d, or_zeros(thd, sk[0]),
                                                             or_zeros(thdd, sk[1]), res, Dm, T)
    else:
        ok, cond, Vl = _setpoint(I, F, mode, out, vec, Wc, th_d, res, Dm)
    if not ok:
        return 0
    r = m
    force_on = par[L.P_FORCE] != 0.0 and r > 0
    u_xi, xi_d, corr, zf = sm[1, :r], sm[2, :r], sn[0, :m], sn[1, :m]
    corr[:] = 0.0
    fb, measured = False, force_on and lam is not None
    case, pt, zv = 0, 0.0, 0.0
    if measured:
        case, pt, zv = pi_step(st, par, fv(I, F, L.F_PIZ), fv(I, F, L.F_PID), fv(I, F, L.F_PIDP), t, lam_d, lam,
                               corr, zf)
        fb = par[L.P_PI_ON] != 0.0
    V, Lam = out[4 * n:5 * n], out[6 * n:6 * n + m]
    if force_on:
        _force(Lam, V, r, vec[2 * n - m:2 * n], lam_d, corr, fb, par[L.P_COMPENSATE] != 0.0, u_xi, xi_d, sn[2],
               sn[3])
    base, force, motion = sn[4], sn[5], sn[6]
    base[:] = g
    if st[L.S_BIAS] != 0.0:
        base += fv(I, F, L.F_BIAS)
    _channels(out[:n], V, r, k, u_xi, res[0, :k], force, motion, sn[7], sn[8])
    sc = fm(I, F, L.F_DIAG)[L.D_SCALARS]
    saturate(base, force, r > 0, motion, fv(I, F, L.F_LIM), par[L.P_HAS_LIMITS] != 0.0, tau,
             sc[L.DS_ACTIVE:L.DS_PEAK + 1])
    # ---- the tick is served: commit the state
    if measured:
        pi_commit(st, fv(I, F, L.F_PIZ), fv(I, F, L.F_PID), fv(I, F, L.F_PIDP), case, zf, pt, zv, lam_d, t,
                  par[L.P_PI_ON] != 0.0)
    if mode == 0:
        _tau_int(out[:n], V, Lam, r, k, zm, fv(I, F, L.F_PIZ), st[L.S_PI_Z] != 0.0, par[L.P_KI],
                 par[L.P_FORCE] != 0.0, fv(I, F, L.F_TAUI), sn[2], sn[3])
        st[L.S_TAUI] = 1.0
        _commit_tracking(I, F, t, rmode, res, zm, zi, it_new, et_new)
    _commit(I, F, t, cond, Vl, fb, out, vec, Wc, res, u_xi, xi_d, base, force, motion, th_d, lam_d, Dm)
    return alive(owner)


def warm() -> None:
    """Nothing beyond compiling: the kernel runs in the laws' tests (:func:`qv_dynamics.kernels.loader.warm_all`
    compiles it into numba's disk cache for its one signature)."""
