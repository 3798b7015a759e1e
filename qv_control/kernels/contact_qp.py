"""The foot-force QP of :class:`qv_control.laws.contact_qp.ContactForceQP` in compiled (numba) code: its rows and cost
from the internal-force basis, and a dual active-set solver of Goldfarb and Idnani (the method of ``quadprog``,
the numpy path's solver): the active constraints' normals kept in a QR factorization J = L⁻ᵀQ, R updated by Givens
rotations when a constraint enters or leaves, so no system is ever formed from normal equations (whose condition
squares: on the slack fallback, cond ~1e12, they were not robust). A strictly convex QP has one minimiser, which
both solvers reach to rounding; an inconsistent set is detected as quadprog does (no step in the primal nor the
dual space) and the slack QP of the numpy path is solved then.

:func:`gi_solve`: min ½xᵀGx − aᵀx subject to Cx ≥ b (the arguments of ``quadprog.solve_qp(G, a, C.T, b)``);
:func:`contact_qp`: the QP of the legged law's tick (rows, slack fallback, feasibility).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import cholesky

from . import layout as L

#: quadprog's vsmall: the smallest power-of-two multiple of 1e-60 with 1 + 0.1·vsmall > 1 (its qpgen2 loop)
VSMALL = 1.4272476927059598e-15


@njit(cache=True)
def _givens(a, b):
    """(gc, gs, temp) of qpgen2's rotation (gc gs; gs −gc) that turns (a, b) into (temp, 0)."""
    gc, gs = max(abs(a), abs(b)), min(abs(a), abs(b))
    temp = math.copysign(gc * math.sqrt(1.0 + (gs / gc) * (gs / gc)), a)
    return a / temp, b / temp, temp


@njit(cache=True)
def _rotate_columns(J, i, j, gc, gs) -> None:
    """Columns i, j of J by the rotation (gc gs; gs −gc) (gc = 0: swapped)."""
    if gc == 0.0:
        for r in range(J.shape[0]):
            J[r, i], J[r, j] = J[r, j], J[r, i]
        return
    nu = gs / (1.0 + gc)
    for r in range(J.shape[0]):
        temp = gc * J[r, i] + gs * J[r, j]
        J[r, j] = nu * (J[r, i] + temp) - J[r, j]
        J[r, i] = temp


@njit(cache=True)
def _add(R, J, d, nact) -> int:
    """Constraint nact + 1 joins (qpgen2 after a full step): column nact of R from d, the Givens rotations of d's
    tail (and of J's columns) into its diagonal; returns nact + 1."""
    n = J.shape[0]
    for i in range(nact):
        R[i, nact] = d[i]
    for i in range(n - 1, nact, -1):
        if d[i] == 0.0:
            continue
        gc, gs, temp = _givens(d[i - 1], d[i])
        if gc == 1.0:
            continue
        d[i - 1] = gs * temp if gc == 0.0 else temp
        _rotate_columns(J, i - 1, i, gc, gs)
    R[nact, nact] = d[nact]
    return nact + 1


@njit(cache=True)
def _drop(R, J, iact, u, nact, it1) -> int:
    """Drop the active constraint at position ``it1`` (qpgen2's label 700: R's triangle restored by Givens
    rotations of its rows and J's columns, u and iact shifted); returns nact − 1."""
    while it1 < nact - 1:
        k = it1
        if R[k + 1, k + 1] != 0.0:
            gc, gs, temp = _givens(R[k, k + 1], R[k + 1, k + 1])
            if gc != 1.0:
                if gc == 0.0:
                    for c in range(k + 1, nact):
                        R[k, c], R[k + 1, c] = R[k + 1, c], R[k, c]
                else:
                    nu = gs / (1.0 + gc)
                    for c in range(k + 1, nact):
                        temp = gc * R[k, c] + gs * R[k + 1, c]
                        R[k + 1, c] = nu * (R[k, c] + temp) - R[k + 1, c]
                        R[k, c] = temp
                _rotate_columns(J, k, k + 1, gc, gs)
        for i in range(k + 1):
            R[i, k] = R[i, k + 1]
        u[k], iact[k] = u[k + 1], iact[k + 1]
        it1 += 1
    u[nact - 1], u[nact] = u[nact], 0.0
    iact[nact - 1] = -1
    for i in range(nact):
        R[i, nact - 1] = 0.0
    return nact - 1


@njit(cache=True)
def _start(G, a, x, J) -> bool:
    """qpgen2's start: G = RᵀR (Cholesky), x = G⁻¹a by two triangular solves, J = R⁻¹; False when G is not
    positive definite."""
    n = G.shape[0]
    Lc = np.zeros((n, n))
    if not cholesky(G, Lc):
        return False
    y = np.empty(n)
    for i in range(n):                     # Rᵀy = a (R = Lᵀ)
        s = a[i]
        for k in range(i):
            s -= Lc[i, k] * y[k]
        y[i] = s / Lc[i, i]
    for i in range(n - 1, -1, -1):         # Rx = y
        s = y[i]
        for k in range(i + 1, n):
            s -= Lc[k, i] * x[k]
        x[i] = s / Lc[i, i]
    for j in range(n):                     # J = R⁻¹ (upper), column by column
        for i in range(n):
            J[i, j] = 0.0
        for i in range(j, -1, -1):
            s = 1.0 if i == j else 0.0
            for k in range(i + 1, j + 1):
                s -= Lc[k, i] * J[k, j]
            J[i, j] = s / Lc[i, i]
    return True


@njit(cache=True)
def _violated(C, b, x, iact, nact, norms, s) -> int:
    """The constraints' values s = Cx − b (below VSMALL in size: 0; the active ones 0), and the one most violated
    relative to its row's norm, or −1 (qpgen2's choice)."""
    for i in range(C.shape[0]):
        v = -b[i]
        for j in range(C.shape[1]):
            v += C[i, j] * x[j]
        s[i] = 0.0 if abs(v) < VSMALL else v
    for i in range(nact):
        s[iact[i]] = 0.0
    nvl, temp = -1, 0.0
    for i in range(C.shape[0]):
        if s[i] < temp * norms[i]:
            nvl, temp = i, s[i] / norms[i]
    return nvl


@njit(cache=True)
def _directions(J, R, nact, nc, d, z, r):
    """d = Jᵀn, z = J[:, nact:]d[nact:], r = R⁻¹d[:nact]; returns (t₁ finite, the position of t₁'s minimum)."""
    n = J.shape[0]
    for i in range(n):
        s = 0.0
        for j in range(n):
            s += J[j, i] * nc[j]
        d[i] = s
    for i in range(n):
        s = 0.0
        for j in range(nact, n):
            s += J[i, j] * d[j]
        z[i] = s
    t1inf, it1 = True, -1
    for i in range(nact - 1, -1, -1):
        s = d[i]
        for j in range(i + 1, nact):
            s -= R[i, j] * r[j]
        s /= R[i, i]
        r[i] = s
        if s > 0.0:
            t1inf, it1 = False, i
    return t1inf, it1


@njit(cache=True)
def _t1(u, r, nact, it1):
    """The partial step t₁ = min u/r over r > 0 and its position (qpgen2's order of comparison)."""
    t1 = u[it1] / r[it1]
    for i in range(nact):
        if r[i] > 0.0:
            temp = u[i] / r[i]
            if temp < t1:
                t1, it1 = temp, i
    return t1, it1


@njit(cache=True)
def _toward(C, b, x, s, nvl, J, R, iact, u, nact, work):
    """Steps from x until constraint ``nvl`` is active (qpgen2's labels 55–700); returns (False when the
    constraints are inconsistent, nact)."""
    n = x.shape[0]
    d, z, r = work[0], work[1], work[2]
    nc = C[nvl]
    u[nact] = 0.0
    while True:
        t1inf, it1 = _directions(J, R, nact, nc, d, z, r)
        t1 = 0.0
        if not t1inf:
            t1, it1 = _t1(u, r, nact, it1)
        zz = zn = 0.0
        for i in range(n):
            zz += z[i] * z[i]
            zn += z[i] * nc[i]
        if abs(zz) <= VSMALL:                         # no primal step: a dual one, or none at all
            if t1inf:
                return False, nact
            for i in range(nact):
                u[i] -= t1 * r[i]
            u[nact] += t1
            nact = _drop(R, J, iact, u, nact, it1)
            continue
        tt = -s[nvl] / zn
        t2min = t1inf or not t1 < tt
        if not t2min:
            tt = t1
        for i in range(n):
            x[i] += tt * z[i]
        for i in range(nact):
            u[i] -= tt * r[i]
        u[nact] += tt
        if t2min:                                     # full step: nvl joins the active set
            iact[nact] = nvl
            return True, _add(R, J, d, nact)
        nact = _drop(R, J, iact, u, nact, it1)        # partial step: drop it1, the violation changed
        v = -b[nvl]
        for j in range(n):
            v += x[j] * C[nvl, j]
        s[nvl] = v


@njit(cache=True)
def gi_solve(G, a, C, b, x) -> bool:
    """min ½xᵀGx − aᵀx subject to Cx ≥ b (module doc) into ``x``; False when the constraints are inconsistent
    (or G is not positive definite). The iteration of quadprog's qpgen2 (Goldfarb–Idnani, Turlach's
    implementation) step by step: the same choices, the same rotations."""
    n, q = G.shape[0], C.shape[0]
    J, R = np.zeros((n, n)), np.zeros((n, n))
    if not _start(G, a, x, J):
        return False
    norms, s = np.empty(q), np.empty(q)
    for i in range(q):
        norms[i] = math.sqrt(np.sum(C[i] * C[i]))
    u, work = np.zeros(n + 1), np.zeros((3, n + 1))
    iact = np.full(n + 1, -1, np.int64)
    nact = 0
    for _ in range(100 * (q + n)):
        nvl = _violated(C, b, x, iact, nact, norms, s)
        if nvl < 0:
            return True
        ok, nact = _toward(C, b, x, s, nvl, J, R, iact, u, nact, work)
        if not ok:
            return False
    return True


@njit(cache=True)
def qp_rows(lam0, E, qp, f_hi, f_min, eps, C, b, G, a) -> int:
    """The QP's rows Cz ≥ b (per foot its five faces, and −n·f ≥ −f_max when capped) and cost ½zᵀGz − aᵀz
    (:meth:`qv_control.laws.contact_qp.ContactForceQP._rows`); ``qp`` rows: per foot the six face normals (18)
    then W (9). Returns the number of rows."""
    m, s = E.shape
    feet = m // 3
    rows = 0
    for i in range(s):
        for j in range(s):
            G[i, j] = eps if i == j else 0.0
        a[i] = 0.0
    for f in range(feet):
        Ek, l0 = E[3 * f:3 * f + 3], lam0[3 * f:3 * f + 3]
        capped = f_hi[f] < np.inf
        lo0 = 0.0 if f_hi[f] < f_min else f_min
        for face in range(6 if capped else 5):
            g = qp[f, 3 * face:3 * face + 3]
            lo = lo0 if face == 0 else -f_hi[f] if face == 5 else 0.0
            for j in range(s):
                C[rows, j] = -(g[0] * Ek[0, j] + g[1] * Ek[1, j] + g[2] * Ek[2, j])
            b[rows] = lo + (g[0] * l0[0] + g[1] * l0[1] + g[2] * l0[2])
            rows += 1
        W = qp[f, 18:27]
        for i in range(3):
            for j in range(s):
                we = W[3 * i] * Ek[0, j] + W[3 * i + 1] * Ek[1, j] + W[3 * i + 2] * Ek[2, j]
                a[j] -= we * l0[i]
                for t in range(s):
                    G[t, j] += Ek[i, t] * we
    return rows


@njit(cache=True)
def contact_qp(lam0, E, qp, f_hi, par, z):
    """z of the legged law's QP (:meth:`qv_control.laws.contact_qp.ContactForceQP.solve`), the slack QP when the
    constraints are inconsistent; returns (feasible, slack in N)."""
    m, s = E.shape
    if s == 0:
        return True, 0.0
    feet = m // 3
    C, b = np.empty((6 * feet, s)), np.empty(6 * feet)
    G, a = np.empty((s, s)), np.empty(s)
    rows = qp_rows(lam0, E, qp, f_hi, par[L.P_QP_FMIN], par[L.P_QP_EPS], C, b, G, a)
    slack = 0.0
    if not gi_solve(G, a, C[:rows], b[:rows], z):
        G2, a2 = np.zeros((s + 1, s + 1)), np.zeros(s + 1)
        C2, b2 = np.zeros((rows + 1, s + 1)), np.zeros(rows + 1)
        G2[:s, :s], G2[s, s], a2[:s] = G, par[L.P_QP_SLACK], a
        C2[:rows, :s], C2[:rows, s], C2[rows, s], b2[:rows] = C[:rows], 1.0, 1.0, b[:rows]
        x = np.empty(s + 1)
        gi_solve(G2, a2, C2, b2, x)
        z[:] = x[:s]
        slack = x[s]
    big = 1.0
    for i in range(m):
        v = lam0[i]
        for j in range(s):
            v += E[i, j] * z[j]
        big = max(big, abs(v))
    return slack <= 1e-6 * big, slack


@kernel("boolean(float64[:, ::1], float64[::1], float64[:, ::1], float64[::1], float64[::1])")
def solve_qp(G, a, C, b, x) -> bool:
    """:func:`gi_solve` as one compiled entry point (the tests hold it against quadprog)."""
    return gi_solve(G, a, C, b, x)


@kernel("UniTuple(float64, 2)(float64[::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], "
        "float64[::1])")
def foot_forces(lam0, E, qp, f_hi, par, z):
    """:func:`contact_qp` as one compiled entry point: (feasible as 1.0 / 0.0, slack)."""
    feasible, slack = contact_qp(lam0, E, qp, f_hi, par, z)
    return 1.0 if feasible else 0.0, slack


def warm() -> None:
    """Run the solver once on a feasible and an inconsistent problem, and the foot-force QP on one foot."""
    x = np.empty(2)
    solve_qp(np.eye(2), np.ones(2), np.eye(2), np.zeros(2), x)
    solve_qp(np.eye(2), np.ones(2), np.array([[1.0, 0.0], [-1.0, 0.0]]), np.array([1.0, 0.0]), x)
    par = np.zeros(L.NPAR)
    par[L.P_QP_FMIN], par[L.P_QP_EPS], par[L.P_QP_SLACK] = 1.0, 1e-6, 1e6
    qp = np.zeros((1, 27))
    qp[0, 2], qp[0, 18], qp[0, 22], qp[0, 26] = 1.0, 1.0, 1.0, 1.0
    foot_forces(np.array([0.0, 0.0, -10.0]), np.eye(3), qp, np.array([np.inf]), par, np.empty(3))
