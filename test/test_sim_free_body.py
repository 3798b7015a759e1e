"""The simulator's q ⊕ dq follows the joint types: a free-flyer in the middle of the tree
(``floating`` URDF joint below a fixed-base arm's world) is integrated on SE(3), not as q + dq.

Reference: the closed form of a torque-free body spinning about a principal axis while it falls,
p(t) = p₀ + v₀t + ½gt², R(t) = R₀ exp(ω_b t)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
from models import _inertial, _joint

from qv_dynamics import ConstrainedSystem
from qv_dynamics.sim import Stepper, simulate
from qv_dynamics.sim.bimanual import bimanual_system, nominal_q


def _pendulum_and_free_box() -> str:
    return ('<robot name="pendulum_box"><link name="world"/>'
            f'<link name="rod">{_inertial(1.0, com=(0, 0, -0.3), ixx=0.01, iyy=0.01, izz=0.01)}</link>'
            f'<link name="box">{_inertial(2.0, ixx=0.02, iyy=0.03, izz=0.04)}</link>'
            + _joint("swing", "revolute", "world", "rod", xyz=(0, 0, 1), axis=(0, 1, 0))
            + '<joint name="box_joint" type="floating"><parent link="world"/><child link="box"/>'
              '<origin xyz="0 0 0" rpy="0 0 0"/></joint></robot>')


def test_mid_tree_free_flyer_matches_closed_form():
    system = ConstrainedSystem.from_urdf(_pendulum_and_free_box())
    model = system.model
    assert (system.nq, system.nv, system.floating_base) == (8, 7, False)
    jb = model.getJointId("box_joint")
    iq, iv = model.joints[jb].idx_q, model.joints[jb].idx_v
    q0 = pin.neutral(model)
    R0 = pin.rpy.rpyToMatrix(0.3, -0.2, 0.5)
    p0 = np.array([0.5, -0.2, 2.0])
    q0[iq:iq + 7] = pin.SE3ToXYZQUAT(pin.SE3(R0, p0))
    v_w, w_b = np.array([0.4, 0.1, 1.5]), np.array([0.0, 0.0, 3.0])   # spin about the principal z axis
    qdot0 = np.zeros(system.nv)
    qdot0[iv:iv + 3] = R0.T @ v_w                                      # Pinocchio: body-frame twist
    qdot0[iv + 3:iv + 6] = w_b
    tr = simulate(system, q0, qdot0, None, t_final=1.0, dt=1e-3)
    assert tr.ok, tr.error
    t = 1.0
    M = pin.XYZQUATToSE3(tr.q[-1, iq:iq + 7])
    g = model.gravity.linear
    # measured 1.1e-6 m: RK4 averages body-frame twists taken at different poses, which is second order
    # (not fourth) in dt for a spinning body's translation (4.4e-6 at dt = 2 ms, 2.7e-7 at 0.5 ms)
    assert np.abs(M.translation - (p0 + v_w * t + 0.5 * g * t * t)).max() < 3e-6
    assert np.abs(pin.log3(M.rotation.T @ (R0 @ pin.exp3(w_b * t)))).max() < 1e-13


def test_stepper_runs_the_two_arm_box_system():
    system = bimanual_system()
    st = Stepper(system)
    q, qdot = nominal_q(system), np.zeros(system.nv)
    tau = pin.computeGeneralizedGravity(system.model, system.data, q) * (np.arange(system.nv) >= 6)
    for _ in range(5):
        q, qdot = st.step(q, qdot, tau, 1e-3)
    iq = system.model.joints[system.model.getJointId("box_joint")].idx_q
    assert q.shape == (21,) and st.phi_norm <= 1e-12
    assert abs(np.linalg.norm(q[iq + 3:iq + 7]) - 1.0) < 1e-12      # the box quaternion stays a unit one
