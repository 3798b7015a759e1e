"""M(q), g(q) from the composite inertias the Coriolis pass leaves in Pinocchio's Data (qv_dynamics.kernels.crb)
against Pinocchio's own ``crba`` and ``computeGeneralizedGravity``, on fixed-base arms, floating-base legged
robots and a humanoid, and with armature on the joints (which ``crba`` adds to M's diagonal).

Tolerance: the same sums as CRBA's in another order, so agreement to rounding; measured ≤ 5.1e-16 relative
(‖·‖_max over the largest entry) on these models, asserted at 4e-15.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_dynamics import ConstrainedSystem
from qv_dynamics.kernels.crb import composite_inertia_view, mass_gravity, tree_of

TOL = 4e-15


def _rel(a, b) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def _reference(model, q):
    data = model.createData()
    M = pin.crba(model, data, q).copy()
    M = np.triu(M) + np.triu(M, 1).T
    return M, pin.computeGeneralizedGravity(model, data, q).copy()


@pytest.mark.parametrize("robot, floating", [("panda", False), ("ur5", False), ("talos", True), ("anymal_c", True),
                                             ("solo12", True)])
def test_mass_and_gravity_equal_crba_and_rnea(robot, floating):
    system = ConstrainedSystem.from_urdf(robot, floating_base=floating)
    model, data = system.model, system.data
    Y = composite_inertia_view(model, data)
    assert Y is not None and Y.shape == (model.njoints, 10)
    rng = np.random.default_rng(7)
    tree, arm, grav = tree_of(model), np.array(model.armature, float), model.gravity.linear.copy()
    for _ in range(5):
        q = system.random_configuration(rng)
        pin.computeCoriolisMatrix(model, data, q, rng.normal(size=model.nv))
        M, g = np.full((model.nv, model.nv), np.nan), np.full(model.nv, np.nan)
        mass_gravity(Y, data.J, tree, arm, grav, M, g)
        M_ref, g_ref = _reference(model, q)
        assert _rel(M, M_ref) <= TOL and _rel(g, g_ref) <= TOL
        assert np.array_equal(M, M.T)


def test_armature_is_on_the_diagonal():
    system = ConstrainedSystem.from_urdf("panda")
    model = system.model.copy()
    model.armature = np.linspace(0.1, 0.7, model.nv)
    data = model.createData()
    Y = composite_inertia_view(model, data)
    q = pin.neutral(model)
    pin.computeCoriolisMatrix(model, data, q, np.zeros(model.nv))
    M, g = np.zeros((model.nv, model.nv)), np.zeros(model.nv)
    mass_gravity(Y, data.J, tree_of(model), np.array(model.armature, float), model.gravity.linear.copy(), M, g)
    M_ref, g_ref = _reference(model, q)
    assert _rel(M, M_ref) <= TOL and _rel(g, g_ref) <= TOL
    assert np.abs(np.diag(M_ref) - np.diag(_reference(system.model, q)[0]) - model.armature).max() < 1e-12
