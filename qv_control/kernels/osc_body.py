"""The whole-body operational-space law's tick in one compiled (numba) call after Pinocchio's one Coriolis pass
(:class:`~qv_control.laws.osc_constrained.ConstrainedOperationalSpaceLaw`, the same equations in the same order as
its numpy path, ``compiled=False``): M, h and the constraint rows A, Ȧq̇ read from ``Data``
(:mod:`qv_dynamics.kernels.crb`, :func:`.osc_frames.constraint_rows`), θ, J_θ, J̇_θq̇
(:func:`.osc_frames.coordinates`), each frame's Jacobian once, then:

- A's row space by one-sided Jacobi, A = U B with B's rows σ_i v_iᵀ: r rows above the floor σ > max(RTOL·σ₁,
  ``rank_atol``) give the task's contact rows U₁ᵀA = B_r and U₁ᵀȦq̇; the rank by the default rule (ATOL) decides
  whether rows are below the floor, the carried tangent then continues (T = orth(V₂V₂ᵀT_last), the rest N of N(Ā)
  with the damping acceleration −G_D Nᵀq̇), all from Jacobi row norms (the SVDs of the numpy path, to rounding);
- Λ_x = (JM⁻¹Jᵀ)⁻¹ with cond(JM⁻¹Jᵀ) ≤ cond_max² (bounded by ‖X‖_F‖X⁻¹‖_F, else by Jacobi), or the damped inverse;
- the channels (:func:`.osc_parts.channels`), the commanded forces in 𝓔 (Π = U₁U₁ᵀ minus the part the passive
  columns fix), the force PI on Πλ_d and Πλ_meas, f = λ_d + PI, Aᵀf, the actuation-consistent channels
  c ← c − Aᵀ(A_pᵀ)⁺c_p, c_p ← 0, and the limiter.

``G`` (int64) packs the static plans: row 0 the counts (joints, k, frames, m, coordinate frame slots), then the joint
tree, the coordinates' plan, the frame of each coordinate slot, the frames' ids, their supporting columns and the
rows' plan (frame A, frame B or −1, row), every frame once (:func:`qv_control.laws.osc_tick.body_plan`).
Return codes (:mod:`.osc_layout`): OK, FALLBACK (M or JM⁻¹Jᵀ not positive definite, an input of another size: the
numpy path decides), NON_FINITE, CHART (an orientation beyond its chart), SINGULAR (cond(JM⁻¹Jᵀ) > cond_max²), RANGE
(θ_d outside a joint's range); the numpy path then raises naming it. All leave the state as it was.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import cholesky, mtv_into

from . import osc_layout as L
from .osc_frames import constraint_rows, coordinates, frames
from .osc_parts import (
    channels,
    complement,
    count,
    dynamics,
    finite,
    force_pi,
    limit,
    orth_rows,
    row_directions,
    rows_svd,
    task_inertia,
)

_M = "float64[:, :]"


@njit(cache=True)
def _tangent(S, V2, n):
    """The rows below the floor: (N, T) with T = orth(V₂V₂ᵀ·last) (``last`` the carried basis, S rows LAST; the
    caller stores T when the tick is served) and N the rest of N(Ā) (columns); both empty when there is no carried
    basis or the tangent is lost (smallest singular value < 0.5: the posture acts there)."""
    V = S[L.VAR]
    kind, c = int(V[L.LAST_KIND]), int(V[L.LAST_COLS])
    none = np.empty((n, 0))
    if kind == 0:
        return none, none
    last = np.ascontiguousarray(S[L.LAST:L.LAST + n, :c])
    if kind == 1:
        last = complement(last)
    if last.shape[1] == 0:
        return none, none
    T, lo = orth_rows(V2.dot(V2.T.dot(last)), -1.0)
    if lo < 0.5:
        return none, none
    return orth_rows(V2 - T.dot(T.T.dot(V2)), 0.5)[0], T


@njit(cache=True)
def _kinematics(Y, Ct, Jw, dJw, oMf, G, Rref, q, qd, S, M, h, A, ad, cout) -> int:
    """M, h, the frames' Jacobians and drifts (each frame once), A, Ȧq̇ and the coordinates (``cout``: J_θ, then θ,
    θ̇, J̇_θq̇: :mod:`.osc_frames`) from Data; 1 + slot of a frame beyond its orientation chart, else 0."""
    n = qd.shape[0]
    nj, k, nf, m, nc = G[0, 0], G[0, 1], G[0, 2], G[0, 3], G[0, 4]
    dynamics(Y, G[1:1 + nj, :3], S[L.ARMATURE, :n], S[L.GRAV, :3], Ct, Jw, qd, M, h)
    o = 1 + nj
    plan = G[o:o + k, :4]
    o += k
    cmap, fids = G[o, :nc], G[o + 1, :nf]
    J6, acc = np.empty((nf, 6, n)), np.empty((nf, 6))
    frames(Jw, dJw, oMf, fids, G[o + 2:o + 2 + nf, :n], qd, J6, acc)
    constraint_rows(J6, acc, G[o + 2 + nf:o + 2 + nf + m, :3], A, ad)
    return coordinates(oMf, fids, cmap, Rref, plan, J6, acc, q, qd, cout)


@njit(cache=True)
def _checked(q, qd, th, thd, thdd, lam, meas, S, nq, k, m, flags) -> int:
    """OK, FALLBACK (an input of another size), NON_FINITE or RANGE (θ_d outside a joint's range)."""
    if q.shape[0] != nq or th.shape[0] != k or thd.shape[0] != k or thdd.shape[0] != k or lam.shape[0] != m \
            or meas.shape[0] != m:
        return L.FALLBACK
    if not (finite(q) and finite(qd) and finite(th) and finite(thd) and finite(thdd) and finite(lam)
            and finite(meas)):
        return L.NON_FINITE
    if not flags & 4:                            # (4: θ_d is the held θ, not checked)
        for i in range(k):
            if th[i] < S[L.LO, i] or th[i] > S[L.HI, i]:
                return L.RANGE
    return L.OK


@njit(cache=True)
def _task_rows(S, A, ad, cout, th, thd, thdd, qd, k, out):
    """(J, J̇q̇, a, r, r_default, U, B, σ², order, T) of the operational space: θ's rows, the r contact rows above the
    floor and, while rows are below it, the carried tangent's rest N (T: the tangent to carry, not yet stored)."""
    P = S[L.PAR]
    m, n = A.shape
    kd = P[L.KD_C]
    B, U, s2, order = rows_svd(A)
    s1 = math.sqrt(s2[order[0]]) if m else 0.0
    r = count(s2, order, max(P[L.RTOL] * s1, P[L.RANK_ATOL]))
    rd = count(s2, order, max(P[L.RTOL] * s1, P[L.ATOL]))
    Nb = T = np.empty((n, 0))
    if r != rd and k < n - r:                    # rows below the floor: the carried tangent
        Nb, T = _tangent(S, complement(row_directions(B, s2, order, r, n)), n)
    nb = Nb.shape[1]
    dim = k + r + nb
    J, Jd, a = np.empty((dim, n)), np.zeros(dim), np.zeros(dim)
    e, th_now = out[L.C_E, :k], cout[k, :k]
    for i in range(k):
        e[i] = th_now[i] - th[i]                 # θ − θ_d (``last["e_theta"]``)
        a[i] = thdd[i] + kd * (thd[i] - cout[k + 1, i]) + S[L.KP, i] * (th[i] - th_now[i])
        Jd[i] = cout[k + 2, i]
        J[i] = cout[i]
    for p in range(r):
        o = order[p]
        J[k + p] = B[o]                           # U₁ᵀA: σ_p v_pᵀ
        d = 0.0
        for i in range(m):
            d += U[i, o] * ad[i]
        Jd[k + p] = d
    for p in range(nb):
        d = 0.0
        for j in range(n):
            J[k + r + p, j] = Nb[j, p]
            d += Nb[j, p] * qd[j]
        a[k + r + p] = -kd * d
    return J, Jd, a, r, rd, U, B, s2, order, T


@njit(cache=True)
def _well_posed(S, Sx, Lam) -> bool:
    """cond(JM⁻¹Jᵀ) ≤ cond_max² (as the numpy path's SVD test): bounded by ‖X‖_F‖X⁻¹‖_F, else from Jacobi."""
    k = Sx.shape[0]
    a = b = 0.0
    for i in range(k):
        for j in range(k):
            a += Sx[i, j] * Sx[i, j]
            b += Lam[i, j] * Lam[i, j]
    c2 = S[L.PAR, L.COND_MAX] ** 2
    if math.sqrt(a * b) <= c2:
        return True
    _, _, s2, order = rows_svd(Sx)
    return s2[order[k - 1]] > 0.0 and math.sqrt(s2[order[0]] / s2[order[k - 1]]) <= c2


@njit(cache=True)
def _commandable(S, A, U, s2, order, rd):
    """Π (m × m): the projector onto 𝓔 = R(A) ∩ N(A_pᵀ) (R(A) when every joint is actuated; default rank rule):
    U₁U₁ᵀ less (U₁V_k)(U₁V_k)ᵀ, V_k the directions of K = A_pᵀU₁ above the rule (Jacobi on K's rows)."""
    m, n = A.shape
    U1 = np.empty((m, rd))
    for p in range(rd):
        U1[:, p] = U[:, order[p]]
    Pi = np.empty((m, m))
    for i in range(m):                           # (loops: numba's dot would call BLAS for these few entries)
        for j in range(m):
            t = 0.0
            for p in range(rd):
                t += U1[i, p] * U1[j, p]
            Pi[i, j] = t
    npas = int(S[L.PAR, L.N_PASSIVE])
    if npas == 0 or rd == 0:
        return Pi
    K = np.empty((npas, rd))
    c = 0
    for j in range(n):
        if S[L.MASK, j] == 0.0:
            for p in range(rd):
                t = 0.0
                for i in range(m):
                    t += A[i, j] * U1[i, p]
                K[c, p] = t
            c += 1
    Bk, _, sk, ok = rows_svd(K)
    tol = max(S[L.PAR, L.RTOL] * math.sqrt(s2[order[0]]), S[L.PAR, L.ATOL])
    for p in range(count(sk, ok, tol)):
        o = ok[p]
        sv = math.sqrt(sk[o])
        x = U1.dot(Bk[o] / sv)
        for i in range(m):
            for j in range(m):
                Pi[i, j] -= x[i] * x[j]
    return Pi


@njit(cache=True)
def _passive_pinv(S, A):
    """(passive columns, B, U, σ², order, r) of A_pᵀ = U B (Jacobi; default rank rule relative to σ₁(A_pᵀ))."""
    m, n = A.shape
    npas = int(S[L.PAR, L.N_PASSIVE])
    pas = np.empty(npas, np.int64)
    c = 0
    for j in range(n):
        if S[L.MASK, j] == 0.0:
            pas[c] = j
            c += 1
    Apt = np.empty((npas, m))
    for a in range(npas):
        for i in range(m):
            Apt[a, i] = A[i, pas[a]]
    B, U, s2, order = rows_svd(Apt)
    r = 0
    if npas and m:
        r = count(s2, order, max(S[L.PAR, L.RTOL] * math.sqrt(s2[order[0]]), S[L.PAR, L.ATOL]))
    return pas, B, U, s2, order, r


@njit(cache=True)
def _consistent(A, x, pas, B, U, s2, order, r) -> float:
    """x ← x + Aᵀδ, δ = −(A_pᵀ)⁺x_p = −Σ B_iᵀ(u_iᵀx_p)/σ_i², then x_p ← 0; returns the largest |x_p| before."""
    m, n = A.shape
    d = np.zeros(m)
    for p in range(r):
        o = order[p]
        w = 0.0
        for a in range(pas.shape[0]):
            w += U[a, o] * x[pas[a]]
        w /= s2[o]
        for i in range(m):
            d[i] -= B[o, i] * w
    for j in range(n):
        t = 0.0
        for i in range(m):
            t += A[i, j] * d[i]
        x[j] += t
    resid = 0.0
    for a in range(pas.shape[0]):
        resid = max(resid, abs(x[pas[a]]))
        x[pas[a]] = 0.0
    return resid


@njit(cache=True)
def _store_basis(S, V1, T, full) -> None:
    """The carried basis after a served tick: the tangent T while rows are below the floor (when one was carried),
    N(A) of a tick with every row (kept as V₁: its complement is taken when needed), else unchanged."""
    V = S[L.VAR]
    n = V1.shape[0]
    if T.shape[1]:
        S[L.LAST:L.LAST + n, :T.shape[1]] = T
        V[L.LAST_KIND], V[L.LAST_COLS] = 2.0, T.shape[1]
    elif full:
        S[L.LAST:L.LAST + n, :V1.shape[1]] = V1
        V[L.LAST_KIND], V[L.LAST_COLS] = 1.0, V1.shape[1]


@njit(cache=True)
def _force(S, A, U, s2, order, rd, lam, meas, t, has_meas, out) -> None:
    """f = λ_d + PI(Πλ_d, Πλ_meas) and the force channel Aᵀf (``out`` rows F_CMD, FORCE)."""
    m, n = A.shape
    Pi = _commandable(S, A, U, s2, order, rd)
    corr = np.zeros(m)
    V = S[L.VAR]
    frozen = V[L.SAT_ACTIVE] != 0.0 and V[L.SAT_FORCE] < 1.0
    fb = False
    if has_meas:
        d, x = np.empty(m), np.empty(m)
        for i in range(m):
            a = b = 0.0
            for j in range(m):
                a += Pi[i, j] * lam[j]
                b += Pi[i, j] * meas[j]
            d[i], x[i] = a, b
        fb = force_pi(S, t, d, x, frozen, corr)
    V[L.FEEDBACK] = 1.0 if fb else 0.0
    f = out[L.F_CMD, :m]
    for i in range(m):
        f[i] = lam[i] + corr[i] if fb else lam[i]
    mtv_into(A, f, out[L.FORCE, :n])


@njit(cache=True)
def _body(Y, Ct, Jw, dJw, oMf, G, Rref, q, qd, th, thd, thdd, lam, meas, t, flags, S, out) -> int:
    P, V = S[L.PAR], S[L.VAR]
    n, k, m = qd.shape[0], G[0, 1], G[0, 3]
    code = _checked(q, qd, th, thd, thdd, lam, meas, S, P[L.NQ], k, m, flags)
    if code != L.OK:
        return code
    MM, hw = np.empty((2, n, n)), np.empty((2, n))
    M, Lc, h, w = MM[0], MM[1], hw[0], hw[1]
    A, ad = np.empty((m, n)), np.empty(m)
    cout = np.empty((k + 3, n))
    if _kinematics(Y, Ct, Jw, dJw, oMf, G, Rref, q, qd, S, M, h, A, ad, cout) != 0:
        return L.CHART
    J, Jd, a, r, rd, U, B, s2, order, T = _task_rows(S, A, ad, cout, th, thd, thdd, qd, k, out)
    dim = J.shape[0]
    if dim > n:                                  # more task rows than velocities: JM⁻¹Jᵀ is singular
        return L.SINGULAR
    W, Sx = np.empty((n, dim)), np.empty((dim, dim))
    Lam = out[L.LAMBDA_X:L.LAMBDA_X + dim, :dim]
    if not (cholesky(M, Lc) and task_inertia(Lc, J, P[L.DAMPING], W, Sx, Lam)):
        return L.FALLBACK
    if P[L.DAMPING] == 0.0 and not _well_posed(S, Sx, Lam):
        return L.SINGULAR
    _store_basis(S, row_directions(B, s2, order, r, n), T, r == rd)   # served: from here on the state changes
    V[L.RANK], V[L.LAMBDA_DIM], V[L.T_PREV] = r, dim, t
    out[L.C_THETA, :k] = cout[k, :k]
    out[L.THETA_D, :k] = th
    out[L.LAM_D, :m] = lam
    for i in range(n):
        w[i] = P[L.KP_NULL] * (S[L.Q_NULL, i] - q[i]) - P[L.KD_C] * qd[i]
    base, force, motion = out[L.BASE, :n], out[L.FORCE, :n], out[L.MOTION, :n]
    channels(M, Lc, h, J, Jd, W, Lam, a, w, motion, base)
    force[:] = 0.0
    if m:
        _force(S, A, U, s2, order, rd, lam, meas, t, (flags & 2) != 0, out)
    if P[L.N_PASSIVE] > 0:                      # the actuation selection (module doc)
        pas, Bp, Up, sp, op, rp = _passive_pinv(S, A)
        resid = _consistent(A, base, pas, Bp, Up, sp, op, rp)
        if m:
            resid = max(resid, _consistent(A, force, pas, Bp, Up, sp, op, rp))
        V[L.RESIDUAL] = max(resid, _consistent(A, motion, pas, Bp, Up, sp, op, rp))
    limit(S, base, force, m > 0, motion, out[L.TAU, :n])
    return L.OK


_BODY_SIG = (f"int64({_M}, {_M}, {_M}, {_M}, {_M}, int64[:, ::1], float64[:, :, ::1], float64[::1], float64[::1], "
             "float64[::1], float64[::1], float64[::1], float64[::1], float64[::1], float64, int64, float64[:, ::1], "
             "float64[:, ::1])")


@kernel(_BODY_SIG)
def body_tick(Y, Ct, Jw, dJw, oMf, G, Rref, q, qd, th, thd, thdd, lam, meas, t, flags, S, out) -> int:
    """The whole-body law's tick (module doc) after the Coriolis pass: views Y, Cᵀ, J_w, J̇_w, oMf of ``Data``, the
    plans ``G``, the coordinates' orientation references ``Rref``, the state, θ_d, θ̇_d, θ̈_d, λ_d (m), λ_meas (m;
    ``flags`` 2 when measured, 4 when θ_d is the held θ), the packed state ``S``: τ in ``out[TAU]``."""
    return _body(Y, Ct, Jw, dJw, oMf, G, Rref, q, qd, th, thd, thdd, lam, meas, t, flags, S, out)


def warm() -> None:
    """Run the kernel once (:func:`qv_dynamics.kernels.loader.warm_all` compiles it into numba's disk cache first): a
    two-joint chain, θ = the first joint, no constraint row."""
    n = 2
    S = np.zeros(L.body_state_shape(n, 1))
    S[L.PAR, [L.NQ, L.COND_MAX, L.RTOL, L.ATOL]] = n, 1e6, 1e-9, 1e-9
    S[L.ARMATURE, :n] = 1.0
    S[L.LO, :2], S[L.HI, :2] = -np.inf, np.inf
    G = np.zeros((9, 5), np.int64)
    G[0] = 3, 2, 1, 0, 0                         # joints, k, frames, m, coordinate slots
    G[1:4, :3] = [[0, 0, 0], [0, 1, 0], [1, 1, 1]]
    G[4:6, :4] = [[0, 0, 0, 0], [0, 0, 1, 1]]     # θ = the two joints; rows 6, 7: slots, frame 0; row 8: its columns
    oMf = np.zeros((1, 12))
    oMf[0, [0, 4, 8]] = 1.0
    v, z = np.zeros(n), np.zeros(0)
    body_tick(np.zeros((3, 10)), np.zeros((n, n)), np.zeros((6, n)), np.zeros((6, n)), oMf, G, np.zeros((1, 3, 3)),
              v, v, v, v, v, z, z, 0.0, 0, S, np.zeros((L.LAMBDA_X + n, S.shape[1])))
