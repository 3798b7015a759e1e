"""The empty echo node of bench/ros_latency.py: the rclpy/DDS floor of a /joint_states -> command round trip.

It answers each sensor_msgs/JointState with the two messages the controller node sends (a
Float64MultiArray on /effort_controller/commands and a JointState with the state's stamp on
/qv_controller/command_stamped, the latter only while someone subscribes), through the controller's own
input and output paths: subscribed as the controller subscribes by default (depth 1, best effort, read from
the serialized bytes: qv_dynamics/ros/raw.py) and publishing kept serialized bytes
(qv_control/ros/outputs.py ``CommandOutput``), with no math — so the ratio to the echo is the node's own
work. ``inputs``: the controller's other inputs of a parameters file (``odom_topic``, ``wrench_topics``),
subscribed as it subscribes them and read from their bytes into preallocated arrays with its readers, but
never answered (the controller answers joint states): a bare node with the same topics and one output.

Run in-process (``Echo(context=ctx)``) or as its own process::

    python bench/echo_node.py [--messages] [--commands TOPIC] [--stamped TOPIC] [--config FILE [--section NAME]]

``--messages`` (``Echo(raw_outputs=False)``) publishes kept message objects instead (the floor before the
byte outputs); ``--config``: the inputs of the controller section (default ``qv_controller``, or the one
present) of that parameters file.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from qv_control.ros.outputs import CommandOutput  # noqa: E402
from qv_dynamics.ros.odometry import subscribe_odometry  # noqa: E402
from qv_dynamics.ros.raw import input_qos, subscribe_joint_states, subscribe_wrench  # noqa: E402


class Echo(Node):
    def __init__(self, raw_outputs: bool = True, commands: str = "/effort_controller/commands",
                 inputs: dict | None = None, stamped: str = "/qv_controller/command_stamped", **kwargs):
        super().__init__("echo", **kwargs)
        self.pub = self.create_publisher(Float64MultiArray, commands, 10)
        self.spub = self.create_publisher(JointState, stamped, 10)
        self.raw_outputs, self.out = raw_outputs, None
        qos = input_qos(1, True)
        subscribe_joint_states(self, "/joint_states", self.answer, qos, True, print)
        self.kept = np.zeros(6)     # the latest wrench's values (the odometry's: in its reader): read, not answered
        inputs = inputs or {}
        if inputs.get("odom_topic"):
            subscribe_odometry(self, inputs["odom_topic"], self.keep_odometry, qos, True, print)
        for topic in inputs.get("wrench_topics") or []:
            subscribe_wrench(self, topic, self.keep_wrench, True, print, depth=1)

    def keep_odometry(self, reader) -> None:
        """(the reader holds the message's 13 values)"""

    def keep_wrench(self, values) -> None:
        self.kept[:] = values

    def answer(self, m) -> None:
        out = self.out
        if out is None or out.joints is not m.name:  # the decoder shares one tuple while the names stay
            first = out is None
            out = self.out = CommandOutput(self.pub, self.spub, m.name, self.raw_outputs)
            if first:     # the line bench/first_command.py times (as the controller's "activated")
                print("echo: first answer", flush=True)
        out.publish(m.position, m.sec, m.nanosec)


def _options(argv: list[str]) -> dict:
    """Keyword arguments of :class:`Echo` from the command line of the module doc."""
    def value(flag: str, default=None):
        return argv[argv.index(flag) + 1] if flag in argv else default

    kwargs = {"raw_outputs": "--messages" not in argv, "commands": value("--commands", "/effort_controller/commands"),
              "stamped": value("--stamped", "/qv_controller/command_stamped")}
    config = value("--config")
    if config:
        import yaml

        doc = yaml.safe_load(Path(config).read_text())
        section = value("--section") or next(k for k in ("qv_controller", "qv_legged_controller") if k in doc)
        kwargs["inputs"] = doc[section]["ros__parameters"]
    return kwargs


if __name__ == "__main__":
    from qv_dynamics.ros.runner import run_node

    options = _options(sys.argv[1:])
    sys.exit(run_node("echo", lambda: Echo(**options), []))
