"""The plants' drive hold (qv_dynamics.plants.drive_hold, qv_dynamics.ros.plant_node): a realtime MuJoCo plant
node holds the arm before its first command and after ``command_timeout`` s without one, measured on the
plant (MuJoCo's own state at every control period), reported in /diagnostics and ended by the next command.
Real rclpy publishers; timing by the plant's own step count (handshakes), bounded in wall time.

Reference: the closed form of a critically damped joint, x(t) = v₀ t e^{−ωt}, whose largest excursion is
v₀/(ω e): a joint moving at v₀ when the hold engages stops within it (here with 50 % for what the closed form
leaves out: the Coriolis terms, M changing along the way, the 1 ms zero-order hold of each hold torque).
"""
from __future__ import annotations

import math
import os

import numpy as np
import pinocchio as pin
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from qv_control.ros.bringup import to_parameters  # noqa: E402
from qv_dynamics.plants.drive_hold import DriveHold  # noqa: E402
from qv_dynamics.ros.mujoco_node import MujocoNode  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 13) % 200
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
OMEGA = 40.0


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_test_hold_probe") as s:
        yield s


def plant(ctx, name: str, **extra) -> tuple[MujocoNode, list]:
    """The Panda on the table (demo_model.yaml, initial.q), realtime; every control period's (step, q, q̇)."""
    p = {"model_config": "demo_model.yaml", "joints": JOINTS, "controller_name": f"{name}_effort",
         "joint_states_topic": f"/{name}/joint_states", "mode": "realtime", "command_timeout": 0.05,
         "hold_bandwidth": OMEGA, "publish_clock": False}
    p.update(extra)
    trace: list = []
    node = MujocoNode(name, context=ctx, parameter_overrides=to_parameters(p),
                      on_step=lambda n: trace.append((n.steps, n.plant.q, n.plant.qdot)))
    return node, trace


def test_hold_after_a_command_timeout_stops_the_arm_and_ends_at_the_next_command(ros):
    """One command (g(q₀) + 2 N m on joint 1, turning the arm about the vertical) and then none: the arm turns
    under the held command for exactly command_timeout (50 steps), then the drives hold: joint 1 stops within
    the critically damped bound of its speed at that instant, every joint stays within it, the velocities
    decay; one episode, in /diagnostics (WARN, holding); the next command ends the hold."""
    ctx, ex, probe = ros
    node, trace = plant(ctx, "qv_hold_to")
    ex.add_node(node)
    diags = []
    sub = probe.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diags.extend(
        (s.level, {kv.key: kv.value for kv in s.values}) for s in m.status if s.name == "qv_hold_to: plant"), 10)
    pub = probe.create_publisher(Float64MultiArray, "/qv_hold_to_effort/commands", 10)
    try:
        system, _ = load_model_config("demo_model.yaml")
        q0 = node.plant.q
        tau = pin.computeGeneralizedGravity(system.model, system.model.createData(), q0)
        tau[0] += 2.0
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1)
        pub.publish(Float64MultiArray(data=[float(x) for x in tau]))
        assert spin_until(ex, lambda: node.hold_episodes == 1 and len(trace) >= 450, 30.0)
        steps = np.array([s for s, _, _ in trace])
        q = np.array([x for _, x, _ in trace])
        v = np.array([x for _, _, x in trace])
        k = int(np.searchsorted(steps, 50))       # the state after step 50: the last under the held command
        assert node._cmd_step == 0 and steps[k] == 50
        v0 = v[k, 0]
        assert v0 > 0.05                           # the held command did turn the arm
        bound = 1.5 * v0 / (OMEGA * math.e)
        assert np.max(q[k:, 0] - q[k, 0]) <= bound
        assert np.max(np.abs(q[k:] - q[k])) <= bound
        assert np.max(np.abs(v[-50:])) < 0.05 * v0          # stopped
        assert node.holding and node.hold_episodes == 1
        assert spin_until(ex, lambda: any(d.get("command_timeout_episodes") == "1" and d.get("holding") == "1"
                                          and level == DiagnosticStatus.WARN for level, d in diags), 5.0)
        n = len(trace)
        pub.publish(Float64MultiArray(data=[float(x) for x in tau - np.r_[2.0, np.zeros(6)]]))
        assert spin_until(ex, lambda: not node.holding and len(trace) > n, 10.0)
        assert node.hold_episodes == 1
    finally:
        probe.destroy_subscription(sub)
        retire(ex, node)


def test_hold_before_the_first_command_keeps_the_arm_where_it_starts(ros):
    """wait_for_command false (time runs from the start): no command, the drives hold from the first step;
    after 0.4 s of plant time the arm has not moved (the gravity of the Panda at q₀ is tens of N m: without the
    hold it falls), and this is no timeout episode."""
    ctx, ex, _ = ros
    node, trace = plant(ctx, "qv_hold_first", wait_for_command=False)
    ex.add_node(node)
    try:
        system, _ = load_model_config("demo_model.yaml")
        q0 = node.plant.q
        g = pin.computeGeneralizedGravity(system.model, system.model.createData(), q0)
        assert np.abs(g).max() > 10.0
        assert spin_until(ex, lambda: len(trace) >= 400, 30.0)
        q = np.array([x for _, x, _ in trace])
        assert np.max(np.abs(q - q0)) < 2e-3
        assert node.holding and node.hold_episodes == 0 and node.hold_steps >= 400
        # the hold at rest is the gravity torque (the PD terms vanish at the held pose)
        hold = DriveHold(system, np.arange(7), OMEGA)
        np.testing.assert_allclose(hold.torque(q0, np.zeros(7)), g, rtol=1e-12, atol=1e-12)
    finally:
        retire(ex, node)
