"""The legged MuJoCo scene (qv_dynamics.plants.mujoco_legged) checked open loop before any controller:
its free-flight dynamics equal Pinocchio's, and ANYmal C stands under a joint PD with its feet stuck."""
import numpy as np
import pinocchio as pin
import pytest

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import DimensionError, ModelError
from qv_dynamics.plants.mujoco_legged import ANYMAL_C_STANDING, FloorScene, LeggedMujocoPlant, standing_configuration


@pytest.fixture(scope="module")
def system():
    return ConstrainedSystem.from_urdf("anymal_c", floating_base=True)


def test_free_flight_matches_pinocchio(system):
    """MuJoCo's q̈ (free joint: world linear, body angular) equals Pinocchio's ABA, state conversions exact."""
    import mujoco

    plant = LeggedMujocoPlant(system)
    rng = np.random.default_rng(3)
    q = system.random_configuration(rng)
    q[2] = 5.0                                                   # far above the floor
    v = rng.standard_normal(18)
    tau = 20.0 * rng.standard_normal(12)
    plant.reset(q, v)
    assert np.abs(plant.q - q).max() < 1e-15 and np.abs(plant.qdot - v).max() < 1e-14
    plant.data.ctrl[:] = tau
    mujoco.mj_forward(plant.model, plant.data)
    a = pin.aba(system.model, system.data, q, v, np.concatenate([np.zeros(6), tau]))
    R = plant.base_rotation
    a_lin_world = R @ (a[:3] + np.cross(v[3:6], v[:3]))          # d/dt(R v_B)
    assert np.abs(a_lin_world - plant.data.qacc[:3]).max() < 1e-9
    assert np.abs(a[3:] - plant.data.qacc[3:]).max() < 1e-7      # measured 2e-9


def test_stands_open_loop_under_joint_pd(system):
    plant = LeggedMujocoPlant(system)
    q0 = standing_configuration(system, joints=ANYMAL_C_STANDING)
    plant.reset(q0)
    feet0 = plant.foot_positions()
    for _ in range(2000):
        q, v = plant.q, plant.qdot
        plant.step(300.0 * (q0[7:] - q[7:]) - 8.0 * v[6:], 0.001)
    F = plant.foot_forces()
    weight = sum(system.model.inertias[i].mass for i in range(system.model.njoints)) * 9.81
    assert abs(F[:, 2].sum() - weight) < 1e-3 * weight
    assert np.all(np.linalg.norm(F[:, :2], axis=1) < 0.8 * F[:, 2])   # inside the cones
    slip = np.linalg.norm((plant.foot_positions() - feet0)[:, :2], axis=1)
    assert slip.max() < 2e-4                                          # measured 0.06 mm (noslip on)
    assert plant.in_contact().all()


def test_bad_input(system):
    plant = LeggedMujocoPlant(system)
    with pytest.raises(DimensionError, match="not actuated"):
        plant.step(np.ones(18))
    with pytest.raises(ModelError, match="foot frame"):
        LeggedMujocoPlant(system, FloorScene(feet=("nope",)))
    with pytest.raises(ModelError, match="floating-base"):
        LeggedMujocoPlant(ConstrainedSystem.from_urdf("anymal_c").model)
