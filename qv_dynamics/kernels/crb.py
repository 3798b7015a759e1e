"""M(q) and g(q) from what Pinocchio's Coriolis pass leaves in its ``Data``, so that a sample needs one dynamics
pass (``computeCoriolisMatrix``) instead of three (``crba``, ``computeGeneralizedGravity`` and it).

``computeCoriolisMatrix`` computes, besides C, the world joint Jacobians J_w (``data.J``) and the composite
rigid-body inertias of every subtree in the world frame, Y_i (``data.oYcrb``: mass m, centre of mass c,
rotational inertia I_c about c, world-aligned). From them, as CRBA does (Featherstone, RBDA §6.2, in the world
frame)::

    M[S_k, S_j] = J_kᵀ Y_j J_j      for every joint k on the path from the root to j (k ⪯ j), mirrored,
    g[S_j]      = J_jᵀ Y_j a_g,     a_g = (−g⃗, 0) (gravity as an upward acceleration of the base),

where S_j are the velocity columns of joint j and a spatial inertia acts on a twist (v, ω) at the world origin
as f = m(v − c × ω), τ = I_c ω + c × f. Plus the joints' armature on M's diagonal (as ``crba``).

:func:`composite_inertia_view` gives ``data.oYcrb`` as one (joints × 10) array over Pinocchio's memory (m, c,
then I_c's six entries xx, xy, yy, xz, yz, zz), its layout and the Coriolis pass's contract checked on a scratch
``Data`` at construction (M and g against ``crba`` and ``computeGeneralizedGravity``), or None: the caller then
keeps the three passes.
"""
from __future__ import annotations

import ctypes

import numpy as np
import pinocchio as pin
from numba import njit

from .views import tree_of

#: Inertia entries per joint in the view: m, c (3), I_c (xx, xy, yy, xz, yz, zz)
WIDTH = 10
_STRIDE = 8 * WIDTH  # bytes between consecutive pinocchio::Inertia objects (checked)


@njit(cache=True)
def _force(Y, k, vx, vy, vz, wx, wy, wz):
    """f = Y_k (v, ω) (module doc): the spatial force of the composite inertia k moving with twist (v, ω)."""
    m, cx, cy, cz = Y[k, 0], Y[k, 1], Y[k, 2], Y[k, 3]
    fx = m * (vx - (cy * wz - cz * wy))
    fy = m * (vy - (cz * wx - cx * wz))
    fz = m * (vz - (cx * wy - cy * wx))
    ixx, ixy, iyy, ixz, iyz, izz = Y[k, 4], Y[k, 5], Y[k, 6], Y[k, 7], Y[k, 8], Y[k, 9]
    tx = ixx * wx + ixy * wy + ixz * wz + (cy * fz - cz * fy)
    ty = ixy * wx + iyy * wy + iyz * wz + (cz * fx - cx * fz)
    tz = ixz * wx + iyz * wy + izz * wz + (cx * fy - cy * fx)
    return fx, fy, fz, tx, ty, tz


@njit(cache=True)
def gravity(Y, Jw, tree, grav, g) -> None:
    """g alone (module doc), for a law that needs no M: g[S_j] = J_jᵀY_j a_g (``tree``, ``grav``, ``Jw`` as
    :func:`mass_gravity`)."""
    for j in range(1, tree.shape[0]):
        gf = _force(Y, j, -grav[0], -grav[1], -grav[2], 0.0, 0.0, 0.0)
        for col in range(tree[j, 0], tree[j, 0] + tree[j, 1]):
            t = 0.0
            for i in range(6):
                t += Jw[i, col] * gf[i]
            g[col] = t


@njit(cache=True)
def mass_gravity(Y, Jw, tree, armature, grav, M, g) -> None:
    """M (full, symmetric) and g (module doc). ``tree`` (joints × 3): first velocity column, velocity size and
    parent of each joint (row 0 the universe); ``grav`` the model's gravity g⃗; ``Jw`` the 6 × n world
    Jacobians."""
    M[:] = 0.0   # entries of joints on different branches stay zero
    F = np.empty(6)
    for j in range(1, tree.shape[0]):
        s, d = tree[j, 0], tree[j, 1]
        ax, ay, az = -grav[0], -grav[1], -grav[2]
        gf = _force(Y, j, ax, ay, az, 0.0, 0.0, 0.0)
        for col in range(s, s + d):
            F[0], F[1], F[2], F[3], F[4], F[5] = _force(Y, j, Jw[0, col], Jw[1, col], Jw[2, col],
                                                        Jw[3, col], Jw[4, col], Jw[5, col])
            t = 0.0
            for i in range(6):
                t += Jw[i, col] * gf[i]
            g[col] = t
            k = j
            while k > 0:
                r0 = tree[k, 0]
                r1 = col + 1 if k == j else r0 + tree[k, 1]   # within joint j: the upper triangle
                for r in range(r0, r1):
                    t = 0.0
                    for i in range(6):
                        t += Jw[i, r] * F[i]
                    M[r, col] = t
                    M[col, r] = t
                k = tree[k, 2]
    for i in range(M.shape[0]):
        M[i, i] += armature[i]


def _view_at(vec, n_items: int) -> np.ndarray | None:
    """(n × 10) view over a StdVec_Inertia's memory, or None when its entries are not one contiguous block of
    (m, c, I_c) records (checked address by address)."""
    base = vec[0].lever.__array_interface__["data"][0] - 8
    for k in range(n_items):
        if vec[k].lever.__array_interface__["data"][0] != base + _STRIDE * k + 8:
            return None
    return np.ctypeslib.as_array((ctypes.c_double * (WIDTH * n_items)).from_address(base)).reshape(n_items, WIDTH)


def _matches(view: np.ndarray, vec) -> bool:
    """Every record of ``view`` equals the Inertia object's own mass, lever and inertia entries."""
    for k, Y in enumerate(vec):
        I = Y.inertia
        sym = [I[0, 0], I[0, 1], I[1, 1], I[0, 2], I[1, 2], I[2, 2]]
        if not (view[k, 0] == Y.mass and np.array_equal(view[k, 1:4], Y.lever) and np.array_equal(view[k, 4:], sym)):
            return False
    return True


def composite_inertia_view(model: pin.Model, data: pin.Data, rtol: float = 1e-12) -> np.ndarray | None:
    """``data.oYcrb`` as a (joints × 10) view (module doc), valid while ``data`` lives, or None when its memory
    is not laid out so or the Coriolis pass does not leave the composite inertias there (both checked on a
    scratch ``Data`` at a random configuration: the record layout value by value, and M, g from
    :func:`mass_gravity` against ``crba`` and ``computeGeneralizedGravity`` to ``rtol``)."""
    nj = model.njoints
    scratch = model.createData()
    rng = np.random.default_rng(0)
    q = pin.randomConfiguration(model, -np.ones(model.nq), np.ones(model.nq)) if model.nq else np.zeros(0)
    v = rng.normal(size=model.nv)
    pin.computeCoriolisMatrix(model, scratch, q, v)
    sview = _view_at(scratch.oYcrb, nj)
    if sview is None or not _matches(sview, scratch.oYcrb):
        return None
    M, g = np.zeros((model.nv, model.nv)), np.zeros(model.nv)
    mass_gravity(sview, scratch.J, tree_of(model), np.asarray(model.armature, float), model.gravity.linear.copy(),
                 M, g)
    M_ref = pin.crba(model, scratch, q).copy()
    M_ref = np.triu(M_ref) + np.triu(M_ref, 1).T
    g_ref = pin.computeGeneralizedGravity(model, scratch, q).copy()
    if not (np.allclose(M, M_ref, rtol=0.0, atol=rtol * max(1.0, np.abs(M_ref).max()))
            and np.allclose(g, g_ref, rtol=0.0, atol=rtol * max(1.0, np.abs(g_ref).max()))):
        return None
    return _view_at(data.oYcrb, nj)
