"""The empty echo node of bench/ros_latency.py: the rclpy/DDS floor of a /joint_states -> command round trip.

It answers each sensor_msgs/JointState with the two messages the controller node sends (a
Float64MultiArray on /effort_controller/commands and a JointState with the state's stamp on
/qv_controller/command_stamped), subscribed as the controller subscribes by default (depth 1, best effort,
read from the serialized bytes: qv_dynamics/ros/raw.py), with kept message objects, and no math. Run
in-process (``Echo(context=ctx)``) or as its own process: ``python bench/echo_node.py``.
"""
from __future__ import annotations

import array
import sys
from pathlib import Path

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from qv_dynamics.ros.raw import input_qos, subscribe_joint_states  # noqa: E402


class Echo(Node):
    def __init__(self, **kwargs):
        super().__init__("echo", **kwargs)
        self.pub = self.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self.spub = self.create_publisher(JointState, "/qv_controller/command_stamped", 10)
        self.out, self.stamped, self._names = Float64MultiArray(), JointState(), None
        subscribe_joint_states(self, "/joint_states", self.answer, input_qos(1, True), True, print)

    def answer(self, m) -> None:
        data = array.array("d", m.position.tobytes())
        self.out.data = data
        self.pub.publish(self.out)
        if self.spub.get_subscription_count():  # as the controller: only while someone listens
            st = self.stamped
            if m.name is not self._names:  # the decoder shares one tuple while the names stay the same
                self._names, st.name = m.name, list(m.name)
            st.header.stamp, st.effort = m.header.stamp, data
            self.spub.publish(st)


if __name__ == "__main__":
    from qv_dynamics.ros.runner import run_node

    sys.exit(run_node("echo", Echo, []))
