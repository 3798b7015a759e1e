"""The empty echo node of bench/ros_latency.py: the rclpy/DDS floor of a /joint_states -> command round trip.

It answers each sensor_msgs/JointState with the two messages the controller node sends (a
Float64MultiArray on /effort_controller/commands and a JointState with the state's stamp on
/qv_controller/command_stamped), with the controller's subscription depth and kept message objects, and no
math. Run in-process (``Echo(context=ctx)``) or as its own process: ``python bench/echo_node.py``.
"""
from __future__ import annotations

import sys
from pathlib import Path

from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray


class Echo(Node):
    def __init__(self, **kwargs):
        super().__init__("echo", **kwargs)
        self.pub = self.create_publisher(Float64MultiArray, "/effort_controller/commands", 10)
        self.spub = self.create_publisher(JointState, "/qv_controller/command_stamped", 10)
        self.out, self.stamped = Float64MultiArray(), JointState()
        self.create_subscription(JointState, "/joint_states", self.answer, 1)

    def answer(self, m: JointState) -> None:
        self.out.data = m.position
        self.pub.publish(self.out)
        if self.spub.get_subscription_count():  # as the controller: only while someone listens
            st = self.stamped
            st.header, st.name, st.effort = m.header, m.name, m.position
            self.spub.publish(st)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from qv_dynamics.ros.runner import run_node

    sys.exit(run_node("echo", Echo, []))
