"""The Drake plant (qv_dynamics.plants.drake_plant) against Pinocchio and against statics.

M(q) and g(q) of the MultibodyPlant built from the Pinocchio model must equal Pinocchio's CRBA and
gravity (same inertias, same joint frames); a static press with τ = g − J_zᵀF must read F from Drake's
contact solver and from the F/T sensor (the weld's reaction), and with a tool of mass m below a flange
sensor the sensor must read F − m g (what the conditions' tool compensation undoes).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

pytest.importorskip("pydrake", reason="pydrake not installed (pip install -r requirements.txt)")

from qv_dynamics import ConstrainedSystem  # noqa: E402
from qv_dynamics.plants.drake_plant import DrakePlant, DrakeSceneConfig  # noqa: E402

Q0 = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])
TCP = "panda_hand_tcp"


@pytest.fixture(scope="module")
def panda():
    return ConstrainedSystem.from_urdf("panda")


def test_mass_matrix_and_gravity_match_pinocchio(panda):
    plant = DrakePlant(panda, DrakeSceneConfig())
    rng = np.random.default_rng(0)
    eM = eg = 0.0
    for _ in range(20):
        q = panda.random_configuration(rng)
        M = panda.mass_matrix(q)
        g = pin.computeGeneralizedGravity(panda.model, panda.data, q)
        eM = max(eM, np.abs(plant.mass_matrix(q) - M).max() / np.abs(M).max())
        eg = max(eg, np.abs(plant.gravity_torque(q) - g).max() / np.abs(g).max())
    print(f"\nDrake vs Pinocchio, 20 random poses: M rel {eM:.1e}, g rel {eg:.1e}")
    assert eM < 1e-13 and eg < 1e-13          # measured 6.7e-16 / 5.4e-16


@pytest.mark.parametrize("tool_mass", [0.0, 0.5])
def test_static_press_reads_the_commanded_force(panda, tool_mass):
    z_tcp = panda.frame_placement(Q0, TCP).translation[2]
    scene = DrakeSceneConfig(table_height=z_tcp - 0.01, friction=0.5, tool_mass=tool_mass,
                             sensor_frame="panda_link8" if tool_mass else None, timestep=0.001)
    plant = DrakePlant(panda, scene)
    plant.reset(Q0)
    model, data = panda.model.copy(), None
    if tool_mass:  # the true model with the tool (same documented parameters as the plant's tool body)
        from qv_control.demo.conditions import tool_inertia

        j, Y = tool_inertia(panda, tool_mass)
        model.inertias[j] = model.inertias[j] + Y
    data = model.createData()
    F = 10.0
    for _ in range(400):          # hold with a little joint damping until the press is static
        q, qd = plant.q, plant.qdot
        J = pin.computeFrameJacobian(model, data, q, model.getFrameId(TCP), pin.LOCAL_WORLD_ALIGNED)
        tau = pin.computeGeneralizedGravity(model, data, q) - J[2] * F - 2.0 * qd
        plant.step(tau, 0.001)
    fc = plant.contact_force_world()
    fs = plant.tool_wrench_world()[:3]
    print(f"\nstatic press (tool {tool_mass} kg): contact {fc[2]:.6f} N, sensor {fs[2]:.6f} N")
    # measured 1.0e-5 N off (the press still settling after 0.4 s) for both
    assert abs(fc[2] - F) < 1e-4
    assert abs(fs[2] - (F - tool_mass * 9.81)) < 1e-4
