"""Frame Jacobians and constraint rows in compiled (numba) code, from what Pinocchio's kinematic pass leaves in
its ``Data`` (read through persistent numpy views, no per-sample getter calls): the world joint Jacobians
J_w = [J_v; J_ω] (``data.J``, the body's velocity at the world origin) and their time variation J̇_w
(``data.dJ``), over the columns that support the frame (the others are zero), with p the frame origin and
ṗ = J_p q̇ (LOCAL_WORLD_ALIGNED, as ``pin.getFrameJacobian`` and ``pin.getFrameJacobianTimeVariation`` give
them)::

    J_p = J_v − [p]×J_ω,   J̇_p = J̇_v − [p]×J̇_ω − [ṗ]×J_ω,   angular rows J_ω, J̇_ω

A row of a frame constraint (SPEC §3: point contact, weld, loop closure) is row ``a`` of the 6-row frame
Jacobian of frame A, minus that of frame B for a loop closure: A = J_A − J_B, Ȧq̇ = (J̇_A − J̇_B)q̇ (the "dJ" drift
of :mod:`qv_dynamics.constraints.base`). Used by the coordinates' kernel (``qv_control.kernels.coordinates``) and the
sampler's (:func:`qv_dynamics.kernels.quasi.sample`).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def frame_rates(Jw, dJw, p, sup, qdot, J6, dJ6) -> None:
    """J6 = J_p, J_ω and dJ6 = J̇_p, J̇_ω of one frame (module doc), world-aligned at its origin p."""
    n = qdot.shape[0]
    for j in range(n):
        if sup[j]:
            wx, wy, wz = Jw[3, j], Jw[4, j], Jw[5, j]
            J6[0, j] = Jw[0, j] - (p[1] * wz - p[2] * wy)
            J6[1, j] = Jw[1, j] - (p[2] * wx - p[0] * wz)
            J6[2, j] = Jw[2, j] - (p[0] * wy - p[1] * wx)
            J6[3, j], J6[4, j], J6[5, j] = wx, wy, wz
        else:
            for i in range(6):
                J6[i, j] = 0.0
    d0 = d1 = d2 = 0.0   # ṗ = J_p q̇
    for j in range(n):
        d0 += J6[0, j] * qdot[j]
        d1 += J6[1, j] * qdot[j]
        d2 += J6[2, j] * qdot[j]
    for j in range(n):
        if sup[j]:
            wx, wy, wz = Jw[3, j], Jw[4, j], Jw[5, j]
            ax, ay, az = dJw[3, j], dJw[4, j], dJw[5, j]
            dJ6[0, j] = dJw[0, j] - (p[1] * az - p[2] * ay) - (d1 * wz - d2 * wy)
            dJ6[1, j] = dJw[1, j] - (p[2] * ax - p[0] * az) - (d2 * wx - d0 * wz)
            dJ6[2, j] = dJw[2, j] - (p[0] * ay - p[1] * ax) - (d0 * wy - d1 * wx)
            dJ6[3, j], dJ6[4, j], dJ6[5, j] = ax, ay, az
        else:
            for i in range(6):
                dJ6[i, j] = 0.0


@njit(cache=True)
def constraint_rows(Jw, dJw, oMf, fids, sup, rplan, qdot, A, ad) -> None:
    """A and Ȧq̇ of frame-constraint rows (module doc). ``oMf``: every frame placement, one row of 12 per frame
    (rotation column-major, then the origin); ``fids``: the frames used (slots); ``sup``: their supporting
    columns; ``rplan`` (m × 3): slot of frame A, slot of frame B or −1, row of the 6-vector."""
    n = qdot.shape[0]
    ns = fids.shape[0]
    F = np.empty((ns, 12, n))
    for s in range(ns):
        frame_rates(Jw, dJw, oMf[fids[s], 9:12], sup[s], qdot, F[s, :6], F[s, 6:])
    rows_from_slots(F, rplan, qdot, A, ad)


@njit(cache=True)
def rows_from_slots(F, rplan, qdot, A, ad) -> None:
    """A and Ȧq̇ of frame-constraint rows from each slot's J6 and J̇6 (``F[s, :6]``, ``F[s, 6:]``, by
    :func:`frame_rates`); ``rplan`` as :func:`constraint_rows`."""
    n = qdot.shape[0]
    for i in range(rplan.shape[0]):
        sa, sb, a = rplan[i, 0], rplan[i, 1], rplan[i, 2]
        d = 0.0
        for j in range(n):
            x, dx = F[sa, a, j], F[sa, 6 + a, j]
            if sb >= 0:
                x -= F[sb, a, j]
                dx -= F[sb, 6 + a, j]
            A[i, j] = x
            d += dx * qdot[j]
        ad[i] = d


@njit(cache=True)
def placements(oMi, fjoint, fplace, X) -> None:
    """Frame placements X[s] = oMi[fjoint[s]]·fplace[s] (rotation column-major, then the origin, as ``oMf``):
    R = R_iR_f, p = R_ip_f + p_i, what ``updateFramePlacements`` computes for these frames from the joint
    placements the Coriolis pass left in ``data.oMi``."""
    for s in range(fjoint.shape[0]):
        Ji, Fp, Xs = oMi[fjoint[s]], fplace[s], X[s]
        for j in range(3):
            for i in range(3):
                Xs[3 * j + i] = Ji[i] * Fp[3 * j] + Ji[3 + i] * Fp[3 * j + 1] + Ji[6 + i] * Fp[3 * j + 2]
        for i in range(3):
            Xs[9 + i] = (Ji[i] * Fp[9] + Ji[3 + i] * Fp[10] + Ji[6 + i] * Fp[11]) + Ji[9 + i]
