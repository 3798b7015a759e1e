"""The controller's outputs as kept serialized bytes (qv_control/ros/outputs.py), read back with rclpy's own
``deserialize_message`` (the reference), for several joint counts and name lengths (string padding)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")

from rclpy.serialization import deserialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from qv_control.ros.outputs import CommandBytes  # noqa: E402


@pytest.mark.parametrize("n", [1, 2, 7, 12])
def test_command_bytes_read_back_by_rclpy(n):
    joints = [f"joint_{'x' * (i % 5)}{i}" for i in range(n)]
    enc = CommandBytes.create(joints)
    assert enc is not None  # the PyPI rmw serializes XCDR1 little-endian
    rng = np.random.default_rng(n)
    for k in range(3):  # the kept bytes are rewritten each time
        tau = rng.standard_normal(n) * 10.0 ** k
        cmd = deserialize_message(enc.command(tau), Float64MultiArray)
        assert list(cmd.data) == list(tau) and not cmd.layout.dim and cmd.layout.data_offset == 0
        st = deserialize_message(enc.stamped(1700000000 + k, 123456789, tau), JointState)
        assert (st.header.stamp.sec, st.header.stamp.nanosec) == (1700000000 + k, 123456789)
        assert st.header.frame_id == "" and st.name == joints
        assert list(st.effort) == list(tau) and len(st.position) == 0 and len(st.velocity) == 0
