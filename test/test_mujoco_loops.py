"""MuJoCo twin with weld grasps (qv_dynamics.plants.mujoco_loops) of the two-Panda + free box model.

References: Pinocchio's own state conventions (round trip), the closed form of a free-falling spinning
box (welds off), and the static multiplier of our model (welds on: the generalized constraint force that
MuJoCo's welds produce under the model's holding torque is the model's Aᵀλ)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_dynamics.sim.bimanual import arm_joints, bimanual_system, nominal_q

pytest.importorskip("mujoco")
from qv_dynamics.plants.mujoco_loops import MujocoLoopPlant  # noqa: E402


@pytest.fixture(scope="module")
def system():
    return bimanual_system()


def _box_slices(system):
    j = system.model.joints[system.model.getJointId("box_joint")]
    return j.idx_q, j.idx_v


def test_state_round_trip(system):
    plant = MujocoLoopPlant(system)
    rng = np.random.default_rng(3)
    q = system.integrate(nominal_q(system), 0.2 * rng.standard_normal(system.nv))
    qdot = rng.standard_normal(system.nv)
    plant.reset(q, qdot)
    iq, _ = _box_slices(system)
    q_back = plant.q
    if q_back[iq + 6] * q[iq + 6] < 0:                   # a quaternion and its negative are the same pose
        q_back[iq + 3:iq + 7] *= -1
    assert np.abs(q_back - q).max() < 1e-12 and np.abs(plant.qdot - qdot).max() < 1e-12


def test_free_box_falls_as_closed_form(system):
    plant = MujocoLoopPlant(system)
    for c in system.constraints:
        plant.set_weld(c.name, False)
    iq, iv = _box_slices(system)
    q = nominal_q(system)
    qdot = np.zeros(system.nv)
    qdot[iv + 5] = 2.0                                     # spin about the box's principal z axis
    qdot[iv:iv + 3] = [0.3, 0.0, 1.0]
    plant.reset(q, qdot)
    plant.step(np.zeros(system.nv), 0.5)
    M = pin.XYZQUATToSE3(plant.q[iq:iq + 7])
    p0 = q[iq:iq + 3]
    expected = p0 + np.array([0.3, 0.0, 1.0]) * 0.5 + 0.5 * system.model.gravity.linear * 0.25
    # MuJoCo's semi-implicit Euler at dt = 0.5 ms falls ½·g·t·dt = 1.226 mm further than the closed form
    err = M.translation - expected
    assert np.abs(err[:2]).max() < 1e-12 and abs(err[2] + 0.5 * 9.81 * 0.5 * 0.0005) < 1e-9
    assert np.abs(pin.log3(M.rotation.T @ pin.exp3(np.array([0, 0, 1.0])))).max() < 1e-9


def test_welds_carry_the_models_static_multiplier(system):
    plant = MujocoLoopPlant(system)
    q = nominal_q(system)
    plant.reset(q)
    mask = np.zeros(system.nv, bool)
    for nm in arm_joints():
        mask[system.joint_v_index(nm)] = True
    g = pin.computeGeneralizedGravity(system.model, system.model.createData(), q)
    _, A = system.constraint_rows(q)
    lam = np.linalg.lstsq(A[:, ~mask].T, -g[~mask], rcond=None)[0]   # passive rows: A_pᵀλ = −g_p
    tau = g + A.T @ lam                                                 # holds everything still
    assert np.abs(tau[~mask]).max() < 1e-12
    plant.step(tau, 0.1)
    # measured after 0.1 s: λ within 1.9e-4 N (of 9.8 N), q within 1.3e-6 (the soft welds' settling)
    assert np.abs(plant.lambda_meas(A) - lam).max() < 1e-3
    assert np.abs(plant.q - q).max() < 1e-5
