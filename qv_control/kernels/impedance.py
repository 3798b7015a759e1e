"""The impedance baseline's whole tick (:class:`qv_control.laws.impedance.ImpedanceForceBaseline`) in one compiled
(numba) call after Pinocchio's Coriolis pass; its numpy path (``compiled=False``) is the reference, every quantity
the same equation (rounding only)::

    τ = h + Jᵀw + (I − JᵀJ⁺ᵀ)(k_n(q_n − q) − d_n q̇),   h = Cq̇ + g
    w = [K_p(p_d − p) + K_d(ṗ_d − ṗ) (z: λ_d + k_i∫(λ_d − λ_meas) in contact);  K_r log₃(R_d Rᵀ) − D_r ω]

- g from the composite inertias (:func:`qv_dynamics.kernels.crb.gravity`), Cq̇ from Pinocchio's C; the tool's
  placement from its joint's (:func:`qv_dynamics.kernels.frame.placements`, written back into ``data.oMf``) and its
  world-aligned 6 × n Jacobian J (:func:`qv_dynamics.kernels.frame.frame_rates`);
- log₃ by the coordinates' kernel (:func:`.coordinates.log3`, equal to ``pin.log3`` to 3e-11 up to π − 1e-5:
  beyond it the numpy path serves);
- the null-space term without an SVD: (I − JᵀJ⁺ᵀ) with J⁺ = pinv(J, rcond) is the projector onto the complement
  of J's numerical row space; when every singular value is certified above rcond·σ₁ (a Householder QR of Jᵀ,
  Jᵀ = Q[R; 0], and σ_min(R) ≥ 1/‖R⁻¹‖_F > rcond·‖J‖_F ≥ rcond·σ₁: :func:`qv_dynamics.kernels.quasi_linalg.full_rank`)
  that row space is range(Q₁) and the term is Q₂Q₂ᵀx (zero when n ≤ 6 and J has full column rank); otherwise the
  numpy path serves the tick (its SVD decides the rank);
- the force integral's step dt = clip(t − t_prev, 0, max_dt), reset out of contact.

Returns 1 and commits the state (∫, t_prev) or 0 without touching it (bad input, nq ≠ n, q_null or R_d not
latched yet, a λ_d with no entry in contact, an orientation error near π, a rank not certified).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.crb import gravity
from qv_dynamics.kernels.frame import frame_rates, placements
from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import full_rank

from . import layout as L
from .blocks import borrowed, fm, fv, im, iv, state_ok
from .coordinates import log3
from .laws import householder

_OPT = "optional(float64[:])"
_SIG = (f"int64(float64[:, ::1], float64[:, ::1], float64[::1, :], float64[::1, :], float64[:, ::1], "
        f"float64[:, ::1], int64[:, ::1], float64[:, ::1], float64[:], float64[:], {_OPT}, {_OPT}, {_OPT}, {_OPT}, "
        f"{_OPT}, float64, float64[::1])")
#: beyond this angle of R_d Rᵀ the numpy path serves (pin.log3 takes another formula near π)
MAX_ANGLE = math.pi - 1e-5


@njit(cache=True)
def _finite_or_none(x, size) -> bool:
    """None, or finite entries (``size`` of them unless size < 0)."""
    if x is None:
        return True
    if size >= 0 and x.shape[0] != size:
        return False
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * x[i]
    return math.isfinite(s)


@njit(cache=True)
def null_term(J, x, rcond, out) -> bool:
    """(I − JᵀJ⁺ᵀ)x into ``out`` when J's rank is certified full (module doc); False: not certified."""
    n = J.shape[1]
    frob = 0.0
    for i in range(6):
        for j in range(n):
            frob += J[i, j] * J[i, j]
    frob = math.sqrt(frob)
    r = min(n, 6)
    R, Ri = np.zeros((r, r)), np.zeros((r, r))
    if n > 6:
        Qf = np.empty((n, n))
        householder(np.ascontiguousarray(J.T), Qf, R)
    else:
        Qf = np.empty((6, 6))
        householder(J.copy(), Qf, R)
    if not full_rank(R, Ri, frob, rcond, 0.0):
        return False
    out[:] = 0.0
    for c in range(r, n):       # Q₂Q₂ᵀx (no column when n ≤ 6: J's row space is all of Rⁿ)
        s = 0.0
        for i in range(n):
            s += Qf[i, c] * x[i]
        for i in range(n):
            out[i] += Qf[i, c] * s
    return True


@njit(cache=True)
def _wrench(par, st, X, J, qdot, th, thd, Rd, lam, lamd, t, w):
    """w of the module doc into ``w``; returns (ok, ∫ after this tick)."""
    n = qdot.shape[0]
    xd = np.zeros(6)
    for a in range(6):
        s = 0.0
        for j in range(n):
            s += J[a, j] * qdot[j]
        xd[a] = s
    E = np.empty((3, 3))        # R_d Rᵀ, R column-major in X
    for i in range(3):
        for j in range(3):
            E[i, j] = Rd[i, 0] * X[j] + Rd[i, 1] * X[3 + j] + Rd[i, 2] * X[6 + j]
    phi = np.empty(3)
    if log3(E, phi) > MAX_ANGLE:
        return False, 0.0
    for a in range(3):
        pd = th[a] if th is not None else X[9 + a]
        vd = thd[a] if thd is not None else 0.0
        w[a] = par[L.IP_KP_POS] * (pd - X[9 + a]) + par[L.IP_KD_POS] * (vd - xd[a])
        w[3 + a] = par[L.IP_KP_ROT] * phi[a] - par[L.IP_KD_ROT] * xd[3 + a]
    integ = 0.0
    if par[L.IP_CONTACT] != 0.0:
        if lamd is not None and lamd.shape[0] == 0:
            return False, 0.0
        lam_d = lamd[0] if lamd is not None else 0.0
        integ = st[L.IS_INT]
        tp = st[L.IS_T_PREV]
        dt = 0.0 if tp != tp else min(max(0.0, t - tp), par[L.IP_MAX_DT])
        if par[L.IP_FORCE_KI] != 0.0 and lam is not None and lam.shape[0] > 0:
            integ += par[L.IP_FORCE_KI] * (lam_d - lam[0]) * dt
        w[2] = lam_d + integ
    return True, integ


@kernel(_SIG)
def impedance_tick(Y, Ct, Jw, dJw, oMi, oMf, I, F, q, qdot, lam, th, thd, thdd, lamd, t, tau) -> int:
    """The impedance baseline's whole tick (module doc); θ_d = the tool position p_d, θ̇_d its velocity (θ̈_d
    unused, as on the numpy path)."""
    Y, Ct, Jw, dJw, oMi, oMf = borrowed(Y), borrowed(Ct), borrowed(Jw), borrowed(dJw), borrowed(oMi), borrowed(oMf)
    I, F, q, qdot = borrowed(I), borrowed(F), borrowed(q), borrowed(qdot)
    sz = iv(I, L.I_SIZES)
    n = sz[L.SZ_N]
    if not state_ok(I, q, qdot, t) or sz[L.SZ_NQ] != n:
        return 0
    if not (_finite_or_none(lam, -1) and _finite_or_none(lamd, -1) and _finite_or_none(th, 3)
            and _finite_or_none(thd, 3)):
        return 0
    par, st = fv(I, F, L.F_PAR), fv(I, F, L.F_ST)
    if st[L.IS_Q_NULL] == 0.0 or st[L.IS_R_D] == 0.0:
        return 0
    X, Fr = np.empty((1, 12)), np.empty((12, n))
    placements(oMi, iv(I, L.I_FJOINT), fm(I, F, L.F_FPLACE), X)
    J = Fr[:6]
    frame_rates(Jw, dJw, X[0, 9:12], im(I, L.I_SUP)[0], qdot, J, Fr[6:])
    w = np.empty(6)
    ok, integ = _wrench(par, st, X[0], J, qdot, th, thd, fv(I, F, L.F_RREF).reshape(3, 3), lam, lamd, t, w)
    if not ok:
        return 0
    qn, x, null = fv(I, F, L.F_HOLD), np.empty(n), np.empty(n)
    for i in range(n):
        x[i] = par[L.IP_KP_NULL] * (qn[i] - q[i]) - par[L.IP_KD_NULL] * qdot[i]
    if not null_term(J, x, par[L.IP_RCOND], null):
        return 0
    gravity(Y, Jw, im(I, L.I_TREE), fv(I, F, L.F_GRAV), tau)
    for i in range(n):
        s = tau[i]
        for j in range(n):
            s += Ct[j, i] * qdot[j]
        for a in range(6):
            s += J[a, i] * w[a]
        tau[i] = s + null[i]
    oMf[iv(I, L.I_FID)[0]] = X[0]
    st[L.IS_INT], st[L.IS_T_PREV] = integ, t
    return 1


def warm() -> None:
    """Nothing beyond compiling: the kernel runs in the law's tests (:func:`qv_dynamics.kernels.loader.warm_all`
    compiles it into numba's disk cache for its one signature)."""
