"""The MuJoCo plant against Pinocchio: an independent engine on the same URDF-derived model.

References: MuJoCo's own mass matrix (mj_fullM), bias forces (qfrc_bias), forward dynamics (qacc) and
contact solver (mj_contactForce), compared with Pinocchio's CRBA / RNEA and the static balance
F = J⁺ᵀ(g − τ) of a robot pressing on the table.
"""
import numpy as np
import pinocchio as pin
import pytest

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import DimensionError, ModelError, NonFiniteError
from qv_dynamics.plants.mujoco_plant import MujocoPlant
from qv_dynamics.plants.mujoco_scene import SceneConfig, mjcf_from_pinocchio

Q_HOME = np.array([0.0, -0.3, 0.0, -2.2, 0.0, 2.0, 0.785])


@pytest.fixture(scope="module")
def system():
    return ConstrainedSystem.from_urdf("panda")


@pytest.fixture(scope="module")
def plant(system):
    return MujocoPlant(system)


def _configs(system, k=6):
    rng = np.random.default_rng(3)
    lo, hi = system.model.lowerPositionLimit, system.model.upperPositionLimit
    for _ in range(k):  # keep away from the joint limits (MuJoCo limit constraints would act)
        yield (lo + (hi - lo) * (0.15 + 0.7 * rng.random(7)), rng.normal(size=7),
               system.effort_limits() * rng.uniform(-0.8, 0.8, 7))  # inside ctrlrange


def test_mass_matrix_and_bias_agree_with_pinocchio(system, plant):
    """M(q) and C(q,q̇)q̇ + g(q) agree to 1e-9 relative (both exact rigid-body algorithms)."""
    for q, qd, _ in _configs(system):
        t = system.evaluate(q, qd)
        M = plant.mass_matrix(q)
        b = plant.bias_forces(q, qd)
        assert np.abs(M - t.M).max() <= 1e-9 * np.abs(t.M).max()
        assert np.abs(b - t.h).max() <= 1e-9 * np.abs(t.h).max()
        assert np.abs(b - pin.rnea(system.model, system.data, q, qd, np.zeros(7))).max() < 1e-8


def test_free_acceleration_agrees_with_aba(system, plant):
    for q, qd, tau in _configs(system):
        qdd_pin = pin.aba(system.model, system.data, q, qd, tau)
        qdd_mj = plant.free_acceleration(q, qd, tau)
        assert np.abs(qdd_mj - qdd_pin).max() <= 1e-7 * max(1.0, np.abs(qdd_pin).max())


def test_tool_frame_matches_pinocchio(system, plant):
    for q, _, _ in _configs(system, 3):
        plant.reset(q)
        oMf = system.frame_placement(q, "panda_hand_tcp")
        assert np.allclose(plant.tool_position, oMf.translation, atol=1e-12)
        assert np.allclose(plant.tool_rotation(), oMf.rotation, atol=1e-12)


def test_free_fall_trajectory_matches_pinocchio_integration(system, plant):
    """0.2 s of torque-free motion (table out of reach): MuJoCo (semi-implicit Euler, 0.5 ms) vs Pinocchio
    ABA integrated with the same scheme; the paths agree to 1e-9 rad."""
    q = Q_HOME.copy()
    qd = np.zeros(7)
    plant.reset(q)
    plant.set_table_height(-10.0)
    dt = plant.model.opt.timestep
    tau = np.array([1.0, -2.0, 0.5, 1.0, 0.2, -0.1, 0.05])
    for _ in range(400):
        qd = qd + dt * pin.aba(system.model, system.data, q, qd, tau)
        q = q + dt * qd
        plant.step(tau)
    assert np.abs(plant.q - q).max() < 1e-9
    assert np.abs(plant.qdot - qd).max() < 1e-8


def test_contact_force_balances_pressing_torque(system, plant):
    """Static press: gravity compensation + Jᵀ(0,0,−F) with F = 10 N. At rest MuJoCo's contact force
    (mj_contactForce) and its F/T sensor both read +10 N on the tool, within 1 %; frictionless so no
    tangential force; penetration below 1 mm (stiff contact)."""
    plant.reset(Q_HOME)
    plant.set_table_height(plant.tool_position[2] - plant.scene.tip_radius - 1e-4)
    fid = system.frame_id("panda_hand_tcp")
    for _ in range(3000):
        q, qd = plant.q, plant.qdot
        t = system.evaluate(q, qd)
        J = pin.getFrameJacobian(system.model, system.data, fid, pin.LOCAL_WORLD_ALIGNED)
        plant.step(t.g - 3.0 * qd + J[:3].T @ np.array([0.0, 0.0, -10.0]), 0.001)
    f = plant.contact_force_world()
    assert plant.in_contact()
    assert abs(f[2] - 10.0) < 0.1
    assert np.abs(f[:2]).max() < 1e-6
    w = plant.tool_wrench_world()
    assert np.allclose(w[:3], f, atol=0.1)
    assert abs(plant.lambda_z() + f[2]) < 1e-12
    pen = plant.table_height + plant.scene.tip_radius - plant.tool_position[2]
    assert 0.0 < pen < 1e-3


def test_table_lowering_breaks_contact(system, plant):
    plant.reset(Q_HOME)
    z = plant.tool_position[2] - plant.scene.tip_radius
    plant.set_table_height(z + 1e-4)
    plant.step(np.zeros(7))
    assert plant.in_contact() and plant.normal_force() > 0
    plant.set_table_height(z - 0.005)
    plant.step(np.zeros(7))
    assert not plant.in_contact() and plant.normal_force() == 0.0
    assert abs(plant.table_height - (z - 0.005)) < 1e-12


def test_torque_limits_and_bad_input(system, plant):
    plant.reset(Q_HOME)
    assert np.allclose(plant.effort_limits, system.effort_limits())
    plant.step(np.full(7, 1e4))
    assert np.allclose(plant.data.ctrl, np.full(7, 1e4))
    assert np.allclose(plant.last_tau, system.effort_limits())
    with pytest.raises(DimensionError):
        plant.step(np.zeros(6))
    with pytest.raises(NonFiniteError):
        plant.step(np.array([np.nan] + [0.0] * 6))
    with pytest.raises(ModelError):
        mjcf_from_pinocchio(system.model, SceneConfig(tool_frame="no_such_frame"))
