"""The empty echo node of bench/ros_latency.py: the rclpy/DDS floor of a /joint_states -> command round trip.

It answers each sensor_msgs/JointState with the two messages the controller node sends (a
Float64MultiArray on /effort_controller/commands and a JointState with the state's stamp on
/qv_controller/command_stamped, the latter only while someone subscribes), through the controller's own
input and output paths: subscribed as the controller subscribes by default (depth 1, best effort, read from
the serialized bytes: qv_dynamics/ros/raw.py) and publishing kept serialized bytes
(qv_control/ros/outputs.py ``CommandOutput``), with no math — so the ratio to the echo is the node's own
work. Run in-process (``Echo(context=ctx)``) or as its own process: ``python bench/echo_node.py``;
``Echo(raw_outputs=False)`` publishes kept message objects instead (the floor before the byte outputs).
"""
from __future__ import annotations

import sys
from pathlib import Path

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from qv_control.ros.outputs import CommandOutput  # noqa: E402
from qv_dynamics.ros.raw import input_qos, subscribe_joint_states  # noqa: E402


class Echo(Node):
    def __init__(self, raw_outputs: bool = True, **kwargs):
        super().__init__("echo", **kwargs)
        self.pub = self.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self.spub = self.create_publisher(JointState, "/qv_controller/command_stamped", 10)
        self.raw_outputs, self.out = raw_outputs, None
        subscribe_joint_states(self, "/joint_states", self.answer, input_qos(1, True), True, print)

    def answer(self, m) -> None:
        out = self.out
        if out is None or out.joints is not m.name:  # the decoder shares one tuple while the names stay
            out = self.out = CommandOutput(self.pub, self.spub, m.name, self.raw_outputs)
        out.publish(m.position, m.header.stamp)


if __name__ == "__main__":
    from qv_dynamics.ros.runner import run_node

    sys.exit(run_node("echo", lambda: Echo(raw_outputs="--messages" not in sys.argv), []))
