"""A frame's Jacobian and its drift, and the minimal coordinates θ, J_θ, θ̇, J̇_θq̇, as the operational-space ticks
need them (:mod:`.osc`, :mod:`.osc_body`): the drift as a vector, never the matrix J̇. From what Pinocchio's Coriolis
pass leaves in ``Data`` (the world joint Jacobians J_w = [J_v; J_ω] and J̇_w over the frame's supporting columns, the
frame origin p), with ṗ = J_p q̇, ω = J_ω q̇, a_v = J̇_v q̇ and α = J̇_ω q̇::

    J_p = J_v − [p]×J_ω,   J̇_p q̇ = a_v − p × α − ṗ × ω,   J̇_ω q̇ = α

(the rows of :func:`qv_dynamics.kernels.frame.frame_rates` applied to q̇). A rotation row of θ is φ = log₃(R R_refᵀ)
with G = J_l⁻¹(φ) = I − ½[φ]× + c[φ]×², φ̇ = Gω and Ġ = c(S + Sᵀ) − ½[φ̇]× + k(φ·φ̇)[φ]×², S = [φ̇]×[φ]×, as
:meth:`qv_control.coordinates.MinimalCoordinates._rotation`: rows GJ_ω and J̇q̇ = Gα + Ġω. The numpy reference is
that method (and ``pin.getFrameClassicalAcceleration``); the same equations, applied to q̇ before the products
(rounding differences only).

``plan`` rows (as :class:`qv_control.coord_plan.CompiledCoordinates` builds them): (0, -, q index, v index) a
joint, (1, slot, axis, -) a frame position, (2, slot, axis, -) a frame orientation.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..coordinates import MAX_ROTATION_ANGLE, _left_jacobian_coefficients
from .coordinates import log3, skew

_coefficients = njit(cache=True)(_left_jacobian_coefficients)  # c(θ), c′(θ)/θ of G = J_l⁻¹(φ), from θ²


@njit(cache=True)
def frame_jacobian(Jw, dJw, p, sup, qd, J6, acc) -> None:
    """J6 = [J_p; J_ω] (6 × n, world-aligned at p) and ``acc`` = [J̇_p q̇; J̇_ω q̇] (module doc)."""
    n = qd.shape[0]
    v0 = v1 = v2 = w0 = w1 = w2 = a0 = a1 = a2 = b0 = b1 = b2 = 0.0
    for j in range(n):
        if sup[j]:
            wx, wy, wz = Jw[3, j], Jw[4, j], Jw[5, j]
            x0 = Jw[0, j] - (p[1] * wz - p[2] * wy)
            x1 = Jw[1, j] - (p[2] * wx - p[0] * wz)
            x2 = Jw[2, j] - (p[0] * wy - p[1] * wx)
            J6[0, j], J6[1, j], J6[2, j], J6[3, j], J6[4, j], J6[5, j] = x0, x1, x2, wx, wy, wz
            qj = qd[j]
            v0, v1, v2 = v0 + x0 * qj, v1 + x1 * qj, v2 + x2 * qj
            w0, w1, w2 = w0 + wx * qj, w1 + wy * qj, w2 + wz * qj
            a0, a1, a2 = a0 + dJw[0, j] * qj, a1 + dJw[1, j] * qj, a2 + dJw[2, j] * qj
            b0, b1, b2 = b0 + dJw[3, j] * qj, b1 + dJw[4, j] * qj, b2 + dJw[5, j] * qj
        else:
            for i in range(6):
                J6[i, j] = 0.0
    acc[0] = a0 - (p[1] * b2 - p[2] * b1) - (v1 * w2 - v2 * w1)
    acc[1] = a1 - (p[2] * b0 - p[0] * b2) - (v2 * w0 - v0 * w2)
    acc[2] = a2 - (p[0] * b1 - p[1] * b0) - (v0 * w1 - v1 * w0)
    acc[3], acc[4], acc[5] = b0, b1, b2


@njit(cache=True)
def rotation_rows(R, Rref, J6, acc, qd, rows) -> bool:
    """The three rotation rows of θ into ``rows`` (3 × (n + 3)): GJ_ω in the first n columns, then φ, φ̇ = Gω and
    Gα + Ġω (module doc); False beyond MAX_ROTATION_ANGLE (the numpy path raises)."""
    n = qd.shape[0]
    W = np.empty((9, 3, 3))                      # (one allocation: E, [φ]×, [φ]×², G, [φ̇]×, S; φ, ω, φ̇)
    E, P, P2, G, Pd, S, V = W[0], W[1], W[2], W[3], W[4], W[5], W[6]
    phi, w, pd = V[0], V[1], V[2]
    for i in range(3):
        for j in range(3):
            E[i, j] = R[i, 0] * Rref[j, 0] + R[i, 1] * Rref[j, 1] + R[i, 2] * Rref[j, 2]
    if not log3(E, phi) <= MAX_ROTATION_ANGLE:
        return False
    c, k = _coefficients(phi[0] * phi[0] + phi[1] * phi[1] + phi[2] * phi[2])
    skew(phi, P)
    for i in range(3):
        for j in range(3):
            P2[i, j] = P[i, 0] * P[0, j] + P[i, 1] * P[1, j] + P[i, 2] * P[2, j]
            G[i, j] = c * P2[i, j] - 0.5 * P[i, j] + (1.0 if i == j else 0.0)
    w[:] = 0.0
    for j in range(n):
        w[0] += J6[3, j] * qd[j]
        w[1] += J6[4, j] * qd[j]
        w[2] += J6[5, j] * qd[j]
    for i in range(3):
        pd[i] = G[i, 0] * w[0] + G[i, 1] * w[1] + G[i, 2] * w[2]      # φ̇ = Gω
    skew(pd, Pd)
    for i in range(3):
        for j in range(3):
            S[i, j] = Pd[i, 0] * P[0, j] + Pd[i, 1] * P[1, j] + Pd[i, 2] * P[2, j]
    kk = k * (phi[0] * pd[0] + phi[1] * pd[1] + phi[2] * pd[2])
    for i in range(3):
        d = 0.0
        for t in range(3):
            gd = c * (S[i, t] + S[t, i]) - 0.5 * Pd[i, t] + kk * P2[i, t]
            d += G[i, t] * acc[3 + t] + gd * w[t]
        for j in range(n):
            rows[i, j] = G[i, 0] * J6[3, j] + G[i, 1] * J6[4, j] + G[i, 2] * J6[5, j]
        rows[i, n], rows[i, n + 1], rows[i, n + 2] = phi[i], pd[i], d
    return True


@njit(cache=True)
def frames(Jw, dJw, oMf, fids, sup, qd, J6, acc) -> None:
    """J6[s] = [J_p; J_ω] and acc[s] = [J̇_p q̇; J̇_ω q̇] of each frame ``fids[s]`` (:func:`frame_jacobian`; ``oMf``: every
    frame placement, one row of 12 per frame, the origin last; ``sup[s]``: the frame's supporting columns)."""
    for s in range(fids.shape[0]):
        frame_jacobian(Jw, dJw, oMf[fids[s], 9:12], sup[s], qd, J6[s], acc[s])


@njit(cache=True)
def constraint_rows(J6, acc, rplan, A, ad) -> None:
    """A and Ȧq̇ of frame-constraint rows (as :func:`qv_dynamics.kernels.frame.constraint_rows`): row ``a`` of frame
    A's, minus frame B's for a loop closure (``rplan`` rows: frame A, frame B or −1, row of the 6-vector)."""
    n = J6.shape[2]
    for i in range(rplan.shape[0]):
        sa, sb, a = rplan[i, 0], rplan[i, 1], rplan[i, 2]
        for j in range(n):
            A[i, j] = J6[sa, a, j] - J6[sb, a, j] if sb >= 0 else J6[sa, a, j]
        ad[i] = acc[sa, a] - acc[sb, a] if sb >= 0 else acc[sa, a]


@njit(cache=True)
def coordinates(oMf, fids, cmap, Rref, plan, J6, acc, q, qd, cout) -> int:
    """θ, J_θ, θ̇, J̇_θq̇ into ``cout`` ((k + 3) × n: J rows, then θ, θ̇, J̇q̇ in the first k columns) from the frames'
    J6 and acc (:func:`frames`): the plan's frame slot s is frame ``cmap[s]`` there, with orientation reference
    ``Rref[s]``; returns 0, or 1 + the slot of a frame beyond its orientation chart."""
    n = qd.shape[0]
    k = plan.shape[0]
    ns = cmap.shape[0]
    rot = np.empty((ns, 3, n + 3))
    done = np.zeros(ns, np.int64)
    R = np.empty((3, 3))
    th, thd, jd = cout[k], cout[k + 1], cout[k + 2]
    for i in range(k):
        kind, s, a, vi = plan[i, 0], plan[i, 1], plan[i, 2], plan[i, 3]
        row = cout[i]
        if kind == 0:
            row[:] = 0.0
            row[vi] = 1.0
            th[i], thd[i], jd[i] = q[a], qd[vi], 0.0
            continue
        f = cmap[s]
        if kind == 1:
            t = 0.0
            for j in range(n):
                row[j] = J6[f, a, j]
                t += J6[f, a, j] * qd[j]
            th[i], thd[i], jd[i] = oMf[fids[f], 9 + a], t, acc[f, a]
            continue
        if done[s] == 0:
            for r in range(3):
                for c in range(3):
                    R[r, c] = oMf[fids[f], r + 3 * c]
            if not rotation_rows(R, Rref[s], J6[f], acc[f], qd, rot[s]):
                return 1 + s
            done[s] = 1
        row[:] = rot[s, a, :n]
        th[i], thd[i], jd[i] = rot[s, a, n], rot[s, a, n + 1], rot[s, a, n + 2]
    return 0
