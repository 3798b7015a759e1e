"""qv_mujoco_node over real rclpy publishers/subscribers (SPEC §5, §6), bounded in time.

References: MuJoCo stepped directly with the same torques (the node must add nothing but the topic
plumbing: joint order, zero-order hold over dt, stamps), Pinocchio's static balance for the wrench
(gravity compensation + Jᵀ(0, 0, −10 N) must read λ_z = −10 N on the sensor topic).
"""
from __future__ import annotations

import os

import numpy as np
import pinocchio as pin
import pytest

rclpy = pytest.importorskip("rclpy")
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import qos_profile_sensor_data  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64, Float64MultiArray  # noqa: E402

from qv_control.ros.bringup import to_parameters  # noqa: E402
from qv_dynamics import ConstrainedSystem  # noqa: E402
from qv_dynamics.errors import ModelError  # noqa: E402
from qv_dynamics.plants.mujoco_plant import MujocoPlant  # noqa: E402
from qv_dynamics.plants.mujoco_scene import SceneConfig  # noqa: E402
from qv_dynamics.ros.messages import stamp_to_sec, wrench_to_array  # noqa: E402
from qv_dynamics.ros.mujoco_node import MujocoNode  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 7) % 200
Q0 = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])
SHUFFLED = ["panda_joint7", "panda_joint3", "panda_joint1", "panda_joint5", "panda_joint2", "panda_joint6",
            "panda_joint4"]


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_mujoco_probe") as (ctx, ex, probe):
        box = {"js": [], "wrench": [], "clock": []}
        probe.create_subscription(JointState, "/joint_states", box["js"].append, 10)
        probe.create_subscription(WrenchStamped, "/qv_mujoco/tool_ft/wrench", box["wrench"].append,
                                  qos_profile_sensor_data)
        probe.create_subscription(Clock, "/clock", box["clock"].append, 10)
        cmd = probe.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        table = probe.create_publisher(Float64, "/qv_mujoco/table_height", 10)
        yield ctx, ex, probe, box, cmd, table


@pytest.fixture
def node(ros):
    ctx, ex, probe, box, cmd, table = ros
    system = ConstrainedSystem.from_urdf("panda")
    n = MujocoNode("qv_mujoco", context=ctx, system=system, q0=Q0, parameter_overrides=to_parameters(
        {"mode": "lockstep", "dt": 0.001, "lockstep_resend": 0.0, "joints": SHUFFLED,
         "scene.table_height": 0.0}))
    ex.add_node(n)
    assert spin_until(ex, lambda: n.pub_js.get_subscription_count() >= 1 and cmd.get_subscription_count() >= 1
                      and table.get_subscription_count() >= 1)
    for v in box.values():
        v.clear()
    yield n
    retire(ex, n)


def send(ex, cmd, box, tau_msg_order, count_before):
    msg = Float64MultiArray()
    msg.data = [float(x) for x in tau_msg_order]
    cmd.publish(msg)
    assert spin_until(ex, lambda: len(box["js"]) > count_before)


def test_lockstep_matches_mujoco_stepped_directly(ros, node):
    """Ten commands in a shuffled joint order: /joint_states (name-mapped) equals a MuJoCo plant stepped
    directly with the same τ (joint order, ZOH over dt = 2 physics steps, stamps = simulated time)."""
    ctx, ex, probe, box, cmd, table = ros
    ref = MujocoPlant(ConstrainedSystem.from_urdf("panda"), SceneConfig(table_height=0.0))
    ref.reset(Q0)
    rng = np.random.default_rng(1)
    order = [node.layout.names.index(j) for j in SHUFFLED]
    for k in range(10):
        tau = rng.uniform(-5, 5, 7)
        send(ex, cmd, box, tau[order], len(box["js"]))
        ref.step(tau, 0.001)
    js = box["js"][-1]
    idx = [js.name.index(j) for j in node.layout.names]
    assert np.allclose(np.array(js.position)[idx], ref.q, atol=1e-12)
    assert np.allclose(np.array(js.velocity)[idx], ref.qdot, atol=1e-10)
    assert abs(stamp_to_sec(js.header.stamp) - 0.010) < 1e-9
    assert abs(stamp_to_sec(box["clock"][-1].clock) - 0.010) < 1e-9
    assert np.allclose(np.array(js.effort)[idx], ref.last_tau)


def test_wrench_topic_is_lambda_of_the_surface_contact(ros, node):
    """Table under the tool; gravity compensation + Jᵀ(0,0,−10): the WrenchStamped (tool axes) rotated to
    world reads (0, 0, −10) N = λ (robot on environment), the contact force mj_contactForce +10 N."""
    ctx, ex, probe, box, cmd, table = ros
    system = node.system
    plant = node.plant
    z_table = plant.tool_position[2] - plant.scene.tip_radius - 2e-4
    table.publish(Float64(data=float(z_table)))
    assert spin_until(ex, lambda: abs(plant.table_height - z_table) < 1e-12)
    fid = system.frame_id("panda_hand_tcp")
    order = [node.layout.names.index(j) for j in SHUFFLED]
    for _ in range(1500):
        q, qd = plant.q, plant.qdot
        J = pin.computeFrameJacobian(system.model, system.data, q, fid, pin.LOCAL_WORLD_ALIGNED)
        tau = pin.computeGeneralizedGravity(system.model, system.data, q) - 3.0 * qd + J[:3].T @ [0, 0, -10.0]
        send(ex, cmd, box, tau[order], len(box["js"]))
    assert spin_until(ex, lambda: len(box["wrench"]) > 0)
    w = box["wrench"][-1]
    assert w.header.frame_id == "panda_hand_tcp"
    R = plant.tool_rotation()
    f_world = R @ wrench_to_array(w)[:3]
    assert np.allclose(f_world, [0.0, 0.0, -10.0], atol=0.1)
    assert abs(plant.normal_force() - 10.0) < 0.1


def test_bad_commands_are_dropped_and_counted(ros, node):
    ctx, ex, probe, box, cmd, table = ros
    q_before = node.plant.q
    for data in ([1.0] * 6, [float("nan")] * 7):
        msg = Float64MultiArray()
        msg.data = data
        cmd.publish(msg)
    assert spin_until(ex, lambda: node.rejects.total >= 2)
    assert node.rejects.counts == {"size": 1, "nonfinite": 1}
    assert np.array_equal(node.plant.q, q_before) and node.steps == 0
    send(ex, cmd, box, np.zeros(7), len(box["js"]))  # still alive
    assert node.steps == 1


def test_bad_parameters_refused(ros):
    ctx = ros[0]
    system = ConstrainedSystem.from_urdf("panda")
    with pytest.raises(ModelError):
        MujocoNode("qv_mujoco_bad", context=ctx, system=system, parameter_overrides=to_parameters({"mode": "fast"}))
    with pytest.raises(ModelError):
        MujocoNode("qv_mujoco_bad2", context=ctx, system=system, parameter_overrides=to_parameters(
            {"scene.tool_frame": "no_such_frame"}))
