"""The minimal coordinates θ(q) in one compiled (numba) call: θ, J = ∂θ/∂q, J̇, J̇q̇, θ̇ and the rows of
Ȧ of frame constraints, from what Pinocchio's kinematic pass leaves in its ``Data`` (read through persistent
numpy views: no per-tick getter calls). The numpy reference path is
:meth:`qv_control.coordinates.MinimalCoordinates.evaluate` with ``compiled=False``.

Frame quantities J_p, J_ω, J̇_p, J̇_ω: :func:`qv_dynamics.kernels.frame.frame_rates`.

Rotation rows: φ = log₃(E), E = R·R_refᵀ, θ = atan2(½‖a‖, ½(tr E − 1)) with a = (E₃₂ − E₂₃, E₁₃ − E₃₁,
E₂₁ − E₁₂) (accurate at every angle below π, unlike acos), φ = θa/‖a‖ (a/2 at θ = 0); G = J_l⁻¹(φ) and Ġ as in
:meth:`~qv_control.coordinates.MinimalCoordinates._rotation`: rows GJ_ω and GJ̇_ω + ĠJ_ω.

``plan`` (int64, one row per θ row then one per Ȧ row): (0, -, q index, v index) a joint, (1, slot, axis, -)
a frame position, (2, slot, axis, -) a frame orientation, (3, slot, row of the 6-vector, -) a row of Ȧ.
Up to two frame slots; ``sup`` marks the supporting velocity columns of each slot.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.frame import frame_rates as _frame_rates
from qv_dynamics.kernels.loader import kernel
from qv_dynamics.kernels.quasi_linalg import alive, borrowed

from ..coordinates import MAX_ROTATION_ANGLE, _left_jacobian_coefficients

_M = "float64[:, :]"


@njit(cache=True)
def log3(E, phi) -> float:
    """φ = log₃(E) of a rotation matrix into ``phi`` (θ = atan2(½‖a‖, ½(tr E − 1)), a = the skew part: every angle
    below π); returns θ = ‖φ‖."""
    a0, a1, a2 = E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]
    s2 = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    th = math.atan2(0.5 * s2, 0.5 * (E[0, 0] + E[1, 1] + E[2, 2] - 1.0))
    f = th / s2 if s2 > 0.0 else 0.5
    phi[0], phi[1], phi[2] = f * a0, f * a1, f * a2
    return th


_coefficients = njit(cache=True)(_left_jacobian_coefficients)  # c(θ), c′(θ)/θ of G = J_l⁻¹(φ), from θ²


@njit(cache=True)
def skew(x, P) -> None:
    """P = [x]×."""
    P[0, 0], P[0, 1], P[0, 2] = 0.0, -x[2], x[1]
    P[1, 0], P[1, 1], P[1, 2] = x[2], 0.0, -x[0]
    P[2, 0], P[2, 1], P[2, 2] = -x[1], x[0], 0.0


@njit(cache=True)
def _mm3(A, B, C) -> None:
    """C = AB (3 × 3, written out: numba's dot would call BLAS for these)."""
    for i in range(3):
        for j in range(3):
            C[i, j] = A[i, 0] * B[0, j] + A[i, 1] * B[1, j] + A[i, 2] * B[2, j]


@njit(cache=True)
def _rotation(X, Rref, J6, dJ6, qdot, phi, GJ, GJd, W) -> bool:
    """φ, GJ_ω, GJ̇_ω + ĠJ_ω of one frame (3 rows each) whose placement ``X`` holds R column-major and ``Rref`` its
    reference row-major (9 entries); False beyond
    MAX_ROTATION_ANGLE (the caller raises). ``W``: scratch (7 × 3 × 3)."""
    n = qdot.shape[0]
    E, P, P2, G, Pd, S, Gd = W[0], W[1], W[2], W[3], W[4], W[5], W[6]
    for i in range(3):
        for j in range(3):
            E[i, j] = X[i] * Rref[3 * j] + X[3 + i] * Rref[3 * j + 1] + X[6 + i] * Rref[3 * j + 2]
    th = log3(E, phi)
    if not th <= MAX_ROTATION_ANGLE:
        return False
    c, k = _coefficients(phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2])
    skew(phi, P)
    _mm3(P, P, P2)
    w0 = w1 = w2 = 0.0
    for j in range(n):
        w0 += J6[3, j] * qdot[j]
        w1 += J6[4, j] * qdot[j]
        w2 += J6[5, j] * qdot[j]
    pd = np.empty(3)
    for i in range(3):
        for j in range(3):
            G[i, j] = c * P2[i, j] - 0.5 * P[i, j]
        G[i, i] += 1.0
        pd[i] = G[i, 0] * w0 + G[i, 1] * w1 + G[i, 2] * w2     # φ̇ = Gω
    skew(pd, Pd)
    _mm3(Pd, P, S)
    kk = k * (phi[0] * pd[0] + phi[1] * pd[1] + phi[2] * pd[2])
    for i in range(3):
        for j in range(3):
            Gd[i, j] = c * (S[i, j] + S[j, i]) - 0.5 * Pd[i, j] + kk * P2[i, j]
    for i in range(3):
        for j in range(n):
            a = b = 0.0
            for t in range(3):
                a += G[i, t] * J6[3 + t, j]
                b += G[i, t] * dJ6[3 + t, j] + Gd[i, t] * J6[3 + t, j]
            GJ[i, j] = a
            GJd[i, j] = b
    return True


@njit(cache=True)
def evaluate_into(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, out) -> int:
    """θ, J, J̇, J̇q̇, θ̇ and Ȧ rows (module doc) into ``out``: rows 0..k−1 J, k..2k−1 J̇, 2k..2k+m−1 Ȧ (m = rows
    of ``plan`` after the first k), then θ, θ̇, J̇q̇ (first k columns). Returns 0, or 1 + the slot of a frame
    whose orientation is beyond MAX_ROTATION_ANGLE from its reference (nothing else meaningful then)."""
    n = qdot.shape[0]
    nslot = sup.shape[0]
    F = np.empty((nslot, 12, n))
    X = np.empty((nslot, 12))
    for s in range(nslot):
        R, p = (R0, p0) if s == 0 else (R1, p1)
        for j in range(3):
            for i in range(3):
                X[s, 3 * j + i] = R[i, j]
            X[s, 9 + j] = p[j]
        _frame_rates(Jw, dJw, X[s, 9:12], sup[s], qdot, F[s, :6], F[s, 6:])
    return coordinates_core(F, X, np.ascontiguousarray(Rref).reshape((Rref.shape[0], 9)), plan, k, q, qdot, out)


@njit(cache=True)
def coordinates_core(F, X, Rref, plan, k, q, qdot, out) -> int:
    """:func:`evaluate_into` from each frame slot's J6, J̇6 (``F[s, :6]``, ``F[s, 6:]``,
    :func:`qv_dynamics.kernels.frame.frame_rates`), placement ``X[s]`` (rotation column-major, origin) and
    orientation reference ``Rref[s]`` (row-major, 9 entries)."""
    n = qdot.shape[0]
    nslot = F.shape[0]
    owner = np.empty((nslot, 9, n))   # φ (column 0 of row 0..2), GJ_ω, GJ̇_ω + ĠJ_ω
    owner_w = np.empty((7, 3, 3))
    rot, W = borrowed(owner), borrowed(owner_w)   # (no reference counts on their views; alive to the last line)
    phi = np.empty(3)
    done = np.zeros(nslot, np.bool_)
    m = plan.shape[0] - k
    base = 2 * k + m
    for i in range(k + m):
        kind, s, a, vi = plan[i, 0], plan[i, 1], plan[i, 2], plan[i, 3]
        if kind == 2 and not done[s]:
            if not _rotation(X[s], Rref[s], F[s, :6], F[s, 6:], qdot, phi, rot[s, 3:6], rot[s, 6:9], W):
                return 1 + s
            for t in range(3):
                rot[s, t, 0] = phi[t]
            done[s] = True
        if i >= k:                                   # a row of Ȧ
            for j in range(n):
                out[k + i, j] = F[s, 6 + a, j]
            continue
        for j in range(n):
            out[i, j] = 0.0
            out[k + i, j] = 0.0
        if kind == 0:
            out[base, i] = q[a]
            out[i, vi] = 1.0
        elif kind == 1:
            out[base, i] = X[s, 9 + a]
            for j in range(n):
                out[i, j] = F[s, a, j]
                out[k + i, j] = F[s, 6 + a, j]
        else:
            out[base, i] = rot[s, a, 0]
            for j in range(n):
                out[i, j] = rot[s, 3 + a, j]
                out[k + i, j] = rot[s, 6 + a, j]
    for i in range(k):
        a = b = 0.0
        for j in range(n):
            a += out[i, j] * qdot[j]
            b += out[k + i, j] * qdot[j]
        out[base + 1, i] = a
        out[base + 2, i] = b
    return 1 - alive(owner) * alive(owner_w)


_SIG = (f"int64({_M}, {_M}, {_M}, float64[:], {_M}, float64[:], float64[:, :, ::1], int64[:, ::1], "
        f"int64[:, ::1], int64, float64[::1], float64[::1], float64[:, ::1])")


@kernel(_SIG)
def coordinates(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, out) -> int:
    """:func:`evaluate_into` as one compiled entry point."""
    return evaluate_into(Jw, dJw, R0, p0, R1, p1, Rref, plan, sup, k, q, qdot, out)


def warm() -> None:
    """Run the kernel once (:func:`qv_dynamics.kernels.loader.warm_all` compiles it into numba's disk cache first)."""
    n = 2
    E = np.eye(3)
    coordinates(np.ones((6, n)), np.ones((6, n)), E, np.zeros(3), E, np.zeros(3), np.zeros((2, 3, 3)) + E,
                np.array([[1, 0, 0, 0], [2, 0, 2, 0]]), np.ones((2, n), np.int64), 2, np.ones(n), np.ones(n),
                np.empty((7, n)))

