"""A projection law's whole tick in one compiled (numba) call after Pinocchio's Coriolis pass: the checks and the
terms (:mod:`.blocks`), the minimal coordinates (:func:`.coordinates.coordinates_core`), the PIDC projection and
motion part (:func:`.laws.pidc_core`, paper `aghili-projection-operator` eq. 15–16, 40, 45–46, A's rank certified
by its QR), the law's channels and the limiter (:func:`.limiter.saturate`). The numpy reference path is the same
law with ``compiled=False``; every quantity is the same equation (rounding only; the internal-force coordinates z in
their own basis, :mod:`.internal`).

With e = θ_d − θ, ė = θ̇_d − θ̇, acc = θ̈_d + G_D ė + G_P e and u_p, a⊥, P, A⁺ from :func:`pidc_core`, ``mode``:

- 0 PIDC (eq. 45): base = Ph, motion = PMu_p;
- 1 hybrid (eq. 54): f_F = Aᵀλ_d + k_f e + k_i∫e (e = Aᵀ(λ_d,prev − λ_meas), :func:`.integrals.pi_step`),
  force = (I − P)f_F, base = h + μMa⊥, motion = PMu_p + μPMu_p, μ = (I−P)MM_c⁻¹ (:func:`.laws.coupled_core`);
- 2 passive joints (eq. 56–62): base, motion = (I + H)Ph, (I + H)PMu_p, zero on the passive joints
  (:func:`.internal.passive_apply`), λ_m = A⁺ᵀ(base + motion − h − Mu_p), and the internal-force channel
  τ_F = AᵀE(z − Eᵀλ_m) (:func:`.internal.internal_basis`) with z = Eᵀλ_d (its non-internal part checked: above
  the tolerance the numpy path raises, or with ``non_internal="project"`` it is projected and counted) + EᵀPI
  (e = EEᵀ(EEᵀλ_d,prev − λ_meas), the integral a :func:`.integrals.bounded_step`);
- 3 legged: mode 2 with the base integral's k_i z added to θ̈_d of the six base coordinates, z from the
  friction-cone QP of the foot forces (:func:`.contact_qp.contact_qp`), the joint friction model added to the
  base channel, and after the limiter the base integral's step on e of the base coordinates.

Returns OK (1) and commits the state, or 0 without touching it: the numpy path serves the tick (bad input, A or
Y or A_p not certified of full rank, cond D > cond_max, an orientation beyond its chart, a λ_d to refuse).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import mtv_into, mv, mv_into
from qv_dynamics.linalg import ATOL, RTOL

from . import layout as L
from .blocks import alive, borrowed, fm, fv, im, iv, or_zeros, ready, scratch_terms, take, targets
from .contact_qp import contact_qp
from .coordinates import coordinates_core
from .integrals import bounded_step, pi_commit, pi_step, target_commit, target_error
from .internal import internal_basis, passive_apply
from .laws import coupled_core, pidc_core
from .limiter import saturate

_OPT = "optional(float64[:])"
_SIG = (f"int64(float64[:, ::1], float64[:, ::1], float64[::1, :], float64[::1, :], float64[:, ::1], "
        f"float64[:, ::1], int64[:, ::1], float64[:, ::1], float64[:], float64[:], {_OPT}, {_OPT}, {_OPT}, {_OPT}, "
        f"{_OPT}, float64, float64[::1])")


@njit(cache=True, inline="always")
def _motion(I, F, Wc, A, ad, th_d, thd_d, thdd_d, mats, vecs, e):
    """acc and PIDC's projection and u_p (:func:`pidc_core`) into ``mats``, ``vecs``; e = θ_d − θ into ``e``;
    returns (ok, cond D or NaN when certified)."""
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    k = e.shape[0]
    kp, kd, kiz = fv(I, F, L.F_KP), par[L.P_KD], fv(I, F, L.F_EP)
    legged = iv(I, L.I_SIZES)[L.SZ_MODE] == 3
    acc = np.empty(k)
    for i in range(k):
        e[i] = th_d[i] - Wc[2 * k, i]
        thdd = thdd_d[i] + kiz[i] if legged and i < 6 else thdd_d[i]
        acc[i] = (thdd + kd * (thd_d[i] - Wc[2 * k + 1, i])) + kp[i] * e[i]
    U = fm(I, F, L.F_UC)
    if not (int(st[L.S_COND_CALLS]) + 1) & 1023:
        U[:] = np.eye(k)
    if not pidc_core(A, ad, Wc[:k], Wc[2 * k + 2, :k], acc, par[L.P_RTOL], par[L.P_ATOL], mats, vecs, U, False,
                     par[L.P_COND_MAX]):
        return False, 0.0
    cond = vecs[2, 0]
    return not cond > par[L.P_COND_MAX], cond


@njit(cache=True)
def _internal(I, F, t, A, lam_m, lam_d, lam, E, zf, res) -> int:
    """The internal-force channel (module doc, modes 2 and 3 without the QP): z into ``res[0]``, z_d into
    ``res[1]`` (first s entries), the PI's new ∫e into ``zf``; returns the target case of the PI's history (−1: no
    PI this tick, −2: λ_d refused)."""
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    m, s = E.shape
    z, z_d = res[0, :s], res[1, :s]
    off = lam_d.copy()
    tot = 0.0
    for j in range(s):
        a = 0.0
        for i in range(m):
            a += E[i, j] * lam_d[i]
        z_d[j] = z[j] = a
        for i in range(m):
            off[i] -= E[i, j] * a
    size = 0.0
    for i in range(m):
        size += off[i] * off[i]
        tot += lam_d[i] * lam_d[i]
    size, tot = math.sqrt(size), math.sqrt(tot)
    if size > par[L.P_ICHECK_ATOL] + par[L.P_ICHECK_RTOL] * tot:
        if par[L.P_NONINT] == 0.0:
            return -2
        res[3, 0], res[3, 1] = 1.0, size              # counted when the tick commits
    if lam is None or not (par[L.P_IKF] > 0.0 or par[L.P_IKI] > 0.0):
        return -1
    Ezd, e, w = np.empty(m), np.empty(m), np.empty(s)
    for i in range(m):
        a = 0.0
        for j in range(s):
            a += E[i, j] * z_d[j]
        Ezd[i] = a
    case = target_error(st[L.S_HIST_T], st[L.S_HIST_PREV] != 0.0, fv(I, F, L.F_PID), fv(I, F, L.F_PIDP), t, Ezd,
                        lam, e)
    _project(E, e, w)                                 # e ← EEᵀe
    res[2, 0] = bounded_step(fv(I, F, L.F_PIZ), st[L.S_PI_Z] != 0.0, st[L.S_PI_T], t, e, par[L.P_IKI],
                             par[L.P_IMAX], par[L.P_IDT], st[L.S_FORCE_FROZEN] != 0.0, zf)
    for i in range(m):
        e[i] = par[L.P_IKF] * e[i] + par[L.P_IKI] * zf[i]     # the correction (λ-space)
    for j in range(s):
        a = 0.0
        for i in range(m):
            a += E[i, j] * e[i]
        z[j] = z[j] + a
    res[4, :m] = Ezd
    return case


@njit(cache=True)
def _project(E, x, w) -> None:
    """x ← EEᵀx (``w``: s scratch)."""
    mtv_into(E, x, w[:E.shape[1]])
    mv_into(E, w[:E.shape[1]], x)


@njit(cache=True)
def _force_torque(A, E, pas, z, z_m, out) -> None:
    """AᵀE(z − z_m) into ``out``, zero on the passive joints (:meth:`InternalForceBasis.torque`)."""
    m, s = E.shape
    lam = np.zeros(m)
    for i in range(m):
        for j in range(s):
            lam[i] += E[i, j] * (z[j] - z_m[j])
    for c in range(A.shape[1]):
        a = 0.0
        for i in range(m):
            a += A[i, c] * lam[i]
        out[c] = a
    for a in range(pas.shape[0]):
        out[pas[a]] = 0.0


@njit(cache=True, inline="always")
def _hybrid(I, F, t, A, M, h, mats, vecs, lam, lam_d, base, force, motion, zf, hw):
    """Mode 1's channels (module doc; ``hw``: 7 × n scratch); returns (PI target case, ∫e stamp, ∫e exists, feedback)
    for the commit."""
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    m, n = A.shape
    P = mats[:n]
    Fd, corr, lm, Ma, mu = hw[0], hw[1], hw[2], hw[3], hw[5:7]
    Fd[:] = 0.0
    corr[:] = 0.0
    for i in range(m):
        for j in range(n):
            Fd[j] += lam_d[i] * A[i, j]
    case, pt, zv, fb = 0, st[L.S_PI_T], st[L.S_PI_Z], False
    if lam is not None:
        lm[:] = 0.0
        for i in range(m):
            for j in range(n):
                lm[j] += lam[i] * A[i, j]
        case, pt, zv = pi_step(st, par, fv(I, F, L.F_PIZ), fv(I, F, L.F_PID), fv(I, F, L.F_PIDP), t, Fd, lm, corr,
                               zf)
        fb = par[L.P_PI_ON] != 0.0
    if fb:
        for i in range(n):
            corr[i] = Fd[i] + corr[i]
    fF = corr if fb else Fd
    mv_into(M, vecs[1], Ma)
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += P[i, j] * fF[j]
        force[i] = fF[i] - s
    hw[4] = motion
    coupled_core(M, P, Ma, hw[4], mu)
    for i in range(n):
        base[i] = h[i] + mu[0, i]
        motion[i] = motion[i] + mu[1, i]
    fm(I, F, L.F_DIAG)[L.D_AUX, :n] = Fd
    return case, pt, zv, fb


@njit(cache=True)
def _passive(I, F, t, A, M, h, mats, vecs, lam, lam_d, base, motion, force, res, zf):
    """Modes 2, 3 (module doc): the channels, λ_m into ``res[5]`` and the internal-force torque into ``force``;
    returns (ok, PI case, s = dim 𝓔, QP feasible, QP slack)."""
    par = fv(I, F, L.F_PAR)
    m, n = A.shape
    pas = iv(I, L.I_PAS)
    if not passive_apply(mats[:n], pas, RTOL, ATOL, base, motion):
        return False, 0, 0, True, 0.0
    u_p, ApT = vecs[0], mats[n:n + m]
    r = base + motion - h - mv(M, u_p)
    lam_m = res[5, :m]
    for j in range(m):
        a = 0.0
        for i in range(n):
            a += ApT[j, i] * r[i]
        lam_m[j] = a                                  # λ_m = A⁺ᵀ(f − h − Mu_p)
    ok, E = internal_basis(A, pas, par[L.P_IRTOL], par[L.P_IATOL])
    if not ok:
        return False, 0, 0, True, 0.0
    s = E.shape[1]
    z_m = np.zeros(s)
    for j in range(s):
        for i in range(m):
            z_m[j] += E[i, j] * lam_m[i]
    case, feasible, slack = -1, True, 0.0
    if iv(I, L.I_SIZES)[L.SZ_MODE] == 3:
        lam0 = lam_m - E.dot(z_m) if s * m >= 4096 else lam_m - mv(E, z_m)
        feasible, slack = contact_qp(lam0, E, fm(I, F, L.F_QP), fv(I, F, L.F_FMAX), par, res[0, :s])
        res[1, :s] = res[0, :s]
    else:
        case = _internal(I, F, t, A, lam_m, lam_d, lam, E, zf, res)
        if case == -2:
            return False, 0, 0, True, 0.0
    _force_torque(A, E, pas, res[0, :s], z_m, force)
    for i in range(m):                                # E z and the commanded λ = λ_m − EEᵀλ_m + Ez
        a = b = 0.0
        for j in range(s):
            a += E[i, j] * res[0, j]
            b += E[i, j] * z_m[j]
        res[6, i] = a
        res[7, i] = lam_m[i] - b + a
    return True, case, s, feasible, slack


@njit(cache=True, inline="always")
def _sample(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, n, m, k, w):
    """The terms and the coordinates in blocks of the scratch ``w``: (ok, M, g, h, A, ȦQ̇, Wc, the scratch's next
    free entry)."""
    M, g, h, X, Fr, A, ad, Adot, o = scratch_terms(Y, Ct, Jw, dJw, oMi, oMf, I, F, qdot, w)
    Wc, o = take(w, o, 2 * k + 3, n)
    ok = not coordinates_core(Fr, X, fm(I, F, L.F_RREF), im(I, L.I_PLAN), k, q, qdot, Wc)
    return ok, M, g, h, A, ad, Wc, o


@njit(cache=True, inline="always")
def _work_size(n, m, k, ns):
    """Entries of a tick's scratch (:func:`projection_law_tick`: one allocation per tick, its arrays views of it)."""
    w = max(n, m)
    return n * n + 12 * ns + 2 * m * n + 12 * ns * n + 2 * n + m + (2 * k + 3) * n + (n + m + k) * n + 3 * n + k \
        + 8 * w + w + 11 * n + 2 * max(k, m)


@njit(cache=True)
def _legged_base(I, F, qdot, base) -> None:
    """The joint friction model added to the base channel (mode 3): d·q̇ + f_c·tanh(q̇/v_s)."""
    par = fv(I, F, L.F_PAR)
    if par[L.P_HAS_FRICTION] == 0.0:
        return
    fr = fm(I, F, L.F_FRICTION)
    for i in range(base.shape[0]):
        base[i] = base[i] + (fr[0, i] * qdot[i] + fr[1, i] * math.tanh(qdot[i] / par[L.P_FRICTION_V]))


@njit(cache=True, inline="always")
def _commit(I, F, t, mode, cond, e, vecs, th_d, lam_d, Wc, base, force, motion, res, s, case, pt, zv, fb, zf,
            feasible, slack) -> None:
    """The state after a served tick and the diagnostics block."""
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    n, k, m = base.shape[0], e.shape[0], lam_d.shape[0]
    D_ = fm(I, F, L.F_DIAG)
    sc = D_[L.D_SCALARS]
    if mode == 1 and case >= 0:
        pi_commit(st, fv(I, F, L.F_PIZ), fv(I, F, L.F_PID), fv(I, F, L.F_PIDP), case, zf, pt, zv, D_[L.D_AUX, :n],
                  t, par[L.P_PI_ON] != 0.0)
    elif mode == 2 and case >= 0:
        target_commit(case, fv(I, F, L.F_PID), fv(I, F, L.F_PIDP), res[4, :m])
        if case:
            st[L.S_HIST_T], st[L.S_HIST_PREV] = t, 1.0 if case == 2 else 0.0
        fv(I, F, L.F_PIZ)[:] = zf
        st[L.S_PI_T], st[L.S_PI_Z] = res[2, 0], 1.0
    if res[3, 0] != 0.0:
        st[L.S_PROJECTED] += 1.0
        st[L.S_OFF_MAX] = max(st[L.S_OFF_MAX], res[3, 1])
    if mode == 3:
        st[L.S_QP_SOLVES] += 1.0 if s else 0.0
        st[L.S_QP_INFEASIBLE] += 0.0 if feasible else 1.0
    active = sc[L.DS_ACTIVE] != 0.0
    st[L.S_FORCE_FROZEN] = 1.0 if active and sc[L.DS_FORCE_SCALE] < 1.0 else 0.0
    st[L.S_MOTION_FROZEN] = 1.0 if active and sc[L.DS_MOTION_SCALE] < 1.0 else 0.0
    st[L.S_COND_CALLS] += 1.0
    st[L.S_TICKS] += 1.0
    st[L.S_TAUI] = 1.0
    sc[L.DS_COND], sc[L.DS_FEEDBACK], sc[L.DS_T], sc[L.DS_DIM] = cond, 1.0 if fb else 0.0, t, s
    sc[L.DS_FEASIBLE], sc[L.DS_SLACK] = 1.0 if feasible else 0.0, slack
    D_[L.D_BASE, :n], D_[L.D_FORCE, :n], D_[L.D_MOTION, :n], D_[L.D_UP, :n] = base, force, motion, vecs[0]
    D_[L.D_E, :k], D_[L.D_THETA, :k], D_[L.D_THETA_D, :k], D_[L.D_LAMBDA_D, :m] = e, Wc[2 * k, :k], th_d, lam_d
    D_[L.D_LAMBDA_M, :m], D_[L.D_Z, :s], D_[L.D_Z_D, :s] = res[5, :m], res[0, :s], res[1, :s]
    D_[L.D_INTERNAL, :m], D_[L.D_LAMBDA_CMD, :m] = res[6, :m], res[7, :m]


@njit(cache=True)
def _legged_integral(I, F, t, e) -> None:
    """After the limiter (mode 3): the base integral's step on e of the six base coordinates (held while this tick
    scaled the motion channel) and k_i z for the next tick's θ̈_d."""
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    ki = fv(I, F, L.F_KI6)
    on = False
    for i in range(6):
        on = on or ki[i] != 0.0
    if not on:
        return
    z = np.empty(6)
    st[L.S_INT_T] = bounded_step(fv(I, F, L.F_IZ), st[L.S_INT_Z] != 0.0, st[L.S_INT_T], t, e[:6], 1.0,
                                 par[L.P_KI_LIMIT], par[L.P_INT_DT], st[L.S_MOTION_FROZEN] != 0.0, z)
    fv(I, F, L.F_IZ)[:] = z
    st[L.S_INT_Z] = 1.0
    kiz = fv(I, F, L.F_EP)
    for i in range(6):
        kiz[i] = ki[i] * z[i]
    fm(I, F, L.F_DIAG)[L.D_KIZ, :6] = kiz[:6]


@kernel(_SIG)
def projection_law_tick(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, lam, th, thd, thdd, lamd, t, tau) -> int:
    """The whole tick of a projection law (module doc)."""
    Y, Ct, Jw, dJw, oMi, oMf = borrowed(Y), borrowed(Ct), borrowed(Jw), borrowed(dJw), borrowed(oMi), borrowed(oMf)
    I, F, q, qdot = borrowed(I), borrowed(F), borrowed(q), borrowed(qdot)
    if not ready(I, F, q, qdot, lam, th, thd, thdd, lamd, t):
        return 0
    sz = iv(I, L.I_SIZES)
    n, m, k, mode = sz[L.SZ_N], sz[L.SZ_M], sz[L.SZ_K], sz[L.SZ_MODE]
    par = fv(I, F, L.F_PAR)
    owner = np.empty(_work_size(n, m, k, sz[L.SZ_SLOTS]))   # the tick's scratch, alive to the last line
    ok, M, g, h, A, ad, Wc, o = _sample(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, n, m, k, borrowed(owner))
    if not ok:
        return 0
    w = borrowed(owner)
    mats, o = take(w, o, n + m + k, n)
    vecs, o = take(w, o, 3, n)
    ch, o = take(w, o, 11, n)                # base, force, motion, scratch, mode 1's scratch
    res, o = take(w, o, 9, max(n, m))        # the diagnostics' rows, then the PI's ∫e
    zero, o = take(w, o, 2, max(k, m))       # λ_d, θ̇_d, θ̈_d when the reference has none
    e = w[o:o + k]
    zero[:] = 0.0
    th_d, lam_d = targets(I, F, th, lamd, zero[0, :m])
    ok, cond = _motion(I, F, Wc, A, ad, th_d, or_zeros(thd, zero[0, :k]), or_zeros(thdd, zero[1, :k]), mats, vecs, e)
    if not ok:
        return 0
    P = mats[:n]
    base, force, motion = ch[0], ch[1], ch[2]
    mv_into(P, h, base)
    mv_into(M, vecs[0], ch[3])
    mv_into(P, ch[3], motion)
    force[:] = 0.0
    res[:] = 0.0
    zf = res[8, :n] if mode == 1 else res[8, :m]
    case, pt, zv, fb, s, feasible, slack = -1, 0.0, 0.0, False, 0, True, 0.0
    if mode == 1:
        case, pt, zv, fb = _hybrid(I, F, t, A, M, h, mats, vecs, lam, lam_d, base, force, motion, zf, ch[4:])
    elif mode >= 2:
        ok, case, s, feasible, slack = _passive(I, F, t, A, M, h, mats, vecs, lam, lam_d, base, motion, force, res,
                                                zf)
        if not ok:
            return 0
        if mode == 3:
            _legged_base(I, F, qdot, base)
    sc = fm(I, F, L.F_DIAG)[L.D_SCALARS]
    saturate(base, force, mode != 0, motion, fv(I, F, L.F_LIM), par[L.P_HAS_LIMITS] != 0.0, tau,
             sc[L.DS_ACTIVE:L.DS_PEAK + 1])
    _commit(I, F, t, mode, cond, e, vecs, th_d, lam_d, Wc, base, force, motion, res, s, case, pt, zv, fb, zf,
            feasible, slack)
    fm(I, F, L.F_AFULL)[:] = A
    fm(I, F, L.F_DMAT)[:] = mats[n + m:n + m + k, :k]
    if mode == 3:
        _legged_integral(I, F, t, e)
    return alive(owner)


def warm() -> None:
    """Nothing beyond compiling: the kernel runs in the laws' tests (:func:`qv_dynamics.kernels.loader.warm_all`
    compiles it into numba's disk cache for its one signature)."""
