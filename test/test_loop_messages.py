"""What the 1 kHz path sends: every message costs each subscriber a wake-up and tens of µs, so the
nodes send what a reader needs and no more. /clock every ``clock_period`` of simulated time (the state
stamps stay exact), the simulator counts the states it published and the commands it received (the loop
rates in /diagnostics), the controller's ``~/command_stamped`` and the dynamics node's outputs go out only
while someone subscribes. Real rclpy publishers and subscribers, one context, bounded in time.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from qv_control.ros.bringup import load_params_file, to_parameters  # noqa: E402
from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.ros.messages import stamp_to_sec  # noqa: E402
from qv_dynamics.ros.sim_node import SimNode  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 14) % 200


def _params(node: str, **extra) -> list:
    p = load_params_file(str(ROOT / "config" / "planar_3link.yaml"))[node]
    p.update(extra)
    return to_parameters(p)


def test_clock_every_clock_period_states_every_step_counted():
    """Lock-step, dt = 1 ms, clock_period = 5 ms, 12 commands: /joint_states at every step (stamps k·dt),
    /clock at t = 0, 5, 10 ms only; the diagnostics count 12 commands received and 13 states published
    (the initial one too)."""
    with ros_session(DOMAIN, "clock_probe") as (ctx, ex, probe):
        sim = SimNode(context=ctx, parameter_overrides=_params(
            "qv_sim", mode="lockstep", lockstep_resend=0.0, clock_period=0.005, diagnostics_period=0.0),
            automatically_declare_parameters_from_overrides=False)
        ex.add_node(sim)
        box = {"js": [], "clock": [], "diag": []}
        probe.create_subscription(JointState, "/joint_states", box["js"].append, 100)
        probe.create_subscription(Clock, "/clock", box["clock"].append, 100)
        probe.create_subscription(DiagnosticArray, "/diagnostics", box["diag"].append, 10)
        cmd = probe.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        assert spin_until(ex, lambda: cmd.get_subscription_count() >= 1 and sim.pub_js.get_subscription_count() >= 1
                          and sim.pub_clock.get_subscription_count() >= 1)
        sim.publish_state()
        assert spin_until(ex, lambda: len(box["js"]) == 1)
        for k in range(12):
            cmd.publish(Float64MultiArray(data=[0.0, 0.0, 0.0]))
            assert spin_until(ex, lambda: len(box["js"]) == k + 2)
        assert spin_until(ex, lambda: len(box["clock"]) >= 3)
        js_t = [stamp_to_sec(m.header.stamp) for m in box["js"]]
        np.testing.assert_allclose(js_t, 1e-3 * np.arange(13), rtol=0, atol=1e-9)
        clock_t = [stamp_to_sec(m.clock) for m in box["clock"]]
        np.testing.assert_allclose(clock_t, [0.0, 0.005, 0.010], rtol=0, atol=1e-9)
        sim.publish_diagnostics()
        assert spin_until(ex, lambda: box["diag"])
        values = {kv.key: kv.value for kv in box["diag"][-1].status[0].values}
        assert (values["commands_received"], values["states_published"]) == ("12", "13")
        retire(ex, sim)


def test_outputs_only_while_subscribed():
    """A dynamics node without subscribers still evaluates every state (counted) but sends nothing; once a
    subscriber to ~/v is matched, ~/v arrives with the state's stamp, and only ~/v."""
    with ros_session(DOMAIN, "quiet_probe") as (ctx, ex, probe):
        dyn = DynamicsNode(context=ctx, parameter_overrides=_params("qv_dynamics", decimation=1,
                                                                     diagnostics_period=0.0),
                           automatically_declare_parameters_from_overrides=False)
        ex.add_node(dyn)
        pub = probe.create_publisher(JointState, "/joint_states", 10)
        names = dyn.layout.names

        def send(t: float) -> None:
            msg = JointState(name=names, position=[1.0, -1.0, -1.0], velocity=[0.1, 0.0, 0.0])
            msg.header.stamp.sec, msg.header.stamp.nanosec = int(t), int(round((t % 1) * 1e9))
            pub.publish(msg)

        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1)
        send(1.0)
        assert spin_until(ex, lambda: dyn.stats["messages"] == 1)
        assert dyn._msgs == {}  # no output message was even built
        got = []
        probe.create_subscription(JointState, "/qv_dynamics/v", got.append, 10)
        assert spin_until(ex, lambda: dyn.pubs["v"].get_subscription_count() >= 1)
        send(1.5)
        assert spin_until(ex, lambda: got)
        assert stamp_to_sec(got[0].header.stamp) == 1.5
        assert set(dyn._msgs) == {"v"}
        retire(ex, dyn)


def test_inputs_best_effort_outputs_reliable():
    """The 1 kHz inputs are read best-effort (keep-last) and every output stays reliable, so a reliable
    ros2_control subscriber (forward_command_controller) still matches the controller's commands: a
    reliable subscription here receives one."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from qv_control.ros.controller_node import ControllerNode

    with ros_session(DOMAIN, "qos_probe") as (ctx, ex, probe):
        ctrl = ControllerNode(context=ctx, parameter_overrides=_params("qv_controller"))
        ex.add_node(ctrl)
        js_sub = next(s for s in ctrl.subscriptions if s.topic_name == "/joint_states")
        assert js_sub.qos_profile.reliability == ReliabilityPolicy.BEST_EFFORT
        assert js_sub.qos_profile.depth == 1
        assert ctrl.pub_cmd.qos_profile.reliability == ReliabilityPolicy.RELIABLE
        got = []
        probe.create_subscription(Float64MultiArray, ctrl.pub_cmd.topic_name, got.append,
                                  QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        pub = probe.create_publisher(JointState, "/joint_states", 10)  # reliable, as joint_state_broadcaster
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1 and ctrl.pub_cmd.get_subscription_count() >= 1)
        msg = JointState(name=ctrl.layout.names, position=[1.0, -1.0, -1.0], velocity=[0.0, 0.0, 0.0])
        msg.header.stamp.sec = 1
        pub.publish(msg)
        assert spin_until(ex, lambda: got)
        assert len(got[0].data) == 3
        retire(ex, ctrl)


def test_sim_wrench_written_into_bytes_is_the_contact_force():
    """Panda tool on the table, lock-step, one zero-effort command (the arm rests on the table): the
    WrenchStamped read by rclpy
    from the simulator's kept bytes, rotated back to world axes with the tool frame's orientation, is
    (0, 0, λ_z) with λ the simulator's multiplier (a point contact with one row: no tangential force)."""
    from geometry_msgs.msg import WrenchStamped

    p = load_params_file(str(ROOT / "config" / "panda_table.yaml"))["qv_sim"]
    p.update(mode="lockstep", lockstep_resend=0.0, diagnostics_period=0.0, publish_clock=False)
    with ros_session(DOMAIN, "wrench_probe") as (ctx, ex, probe):
        sim = SimNode(context=ctx, parameter_overrides=to_parameters(p),
                      automatically_declare_parameters_from_overrides=False)
        ex.add_node(sim)
        got = []
        pub_w = sim.pub_wrench["contact"]
        probe.create_subscription(WrenchStamped, pub_w.topic_name, got.append, 10)
        cmd = probe.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        assert spin_until(ex, lambda: cmd.get_subscription_count() >= 1 and pub_w.get_subscription_count() >= 1)
        cmd.publish(Float64MultiArray(data=[0.0] * 7))
        assert spin_until(ex, lambda: got)
        w = got[-1].wrench
        frame = next(c for c in sim.system.constraints if c.name == "contact").frame_id
        f_world = sim.system.data.oMf[frame].rotation @ [w.force.x, w.force.y, w.force.z]
        np.testing.assert_allclose(f_world, [0.0, 0.0, sim.stepper.lam[0]], rtol=0, atol=1e-9)
        assert abs(sim.stepper.lam[0]) > 1.0  # the arm rests on the table: a real force, not zero
        retire(ex, sim)
