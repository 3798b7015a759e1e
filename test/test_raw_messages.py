"""The serialized-message fast path of the 1 kHz topics (qv_dynamics/ros/raw.py: joint states, effort
commands, wrenches; qv_dynamics/ros/odometry.py: odometry) against rclpy's own
``serialize_message``/``deserialize_message`` (the reference): every field equal for random messages
(frame_id and name lengths that move every alignment, empty and partial sequences, a name list that
changes between messages), and any truncation or foreign encapsulation refused with a DimensionError.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rclpy")

from builtin_interfaces.msg import Time  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.serialization import deserialize_message, serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension  # noqa: E402

from qv_dynamics.errors import DimensionError  # noqa: E402
from qv_dynamics.ros.raw import (  # noqa: E402
    JointStateDecoder,
    JointStateEncoder,
    WrenchEncoder,
    float64_array,
    wrench_values,
)


def _random_state(rng, k: int) -> JointState:
    js = JointState()
    js.header.frame_id = "f" * int(rng.integers(0, 9))
    js.header.stamp.sec = int(rng.integers(0, 2**31 - 1))
    js.header.stamp.nanosec = int(rng.integers(0, 10**9))
    n = int(rng.integers(0, 9))
    # every third message keeps the Panda's names (the decoder's cached path), the others change them
    js.name = [f"panda_joint{i}" for i in range(n)] if k % 3 == 0 else \
        ["j" * int(rng.integers(1, 7)) + str(i) for i in range(n)]
    js.position = rng.normal(size=n).tolist()
    js.velocity = rng.normal(size=int(rng.choice([0, n]))).tolist()
    js.effort = rng.normal(size=int(rng.choice([0, n, 1]))).tolist()
    return js


def test_joint_state_decoder_equals_deserialize_message():
    rng = np.random.default_rng(11)
    dec = JointStateDecoder()
    for k in range(400):
        data = serialize_message(_random_state(rng, k))
        ref, got = deserialize_message(data, JointState), dec.decode(data)
        assert (got.header.stamp.sec, got.header.stamp.nanosec) == (ref.header.stamp.sec, ref.header.stamp.nanosec)
        assert got.header.frame_id == ref.header.frame_id
        assert list(got.name) == list(ref.name)
        for field in ("position", "velocity", "effort"):
            np.testing.assert_array_equal(getattr(got, field), np.asarray(getattr(ref, field)))


def test_truncated_or_foreign_bytes_are_refused():
    js = JointState(name=[f"panda_joint{i}" for i in range(1, 8)], position=[0.1] * 7, velocity=[0.2] * 7,
                    effort=[0.3] * 7)
    data = serialize_message(js)
    warm = JointStateDecoder()
    warm.decode(data)  # the name list cached: truncations past it are caught by the sequence bounds
    for cut in range(len(data)):
        for dec in (warm, JointStateDecoder()):
            with pytest.raises(DimensionError):
                dec.decode(data[:cut])
    with pytest.raises(DimensionError):  # not XCDR1 little-endian: handed to rclpy, which cannot read it
        JointStateDecoder().decode(b"\x00\x07" + data[2:40])
    # a name that is not NUL-terminated inside the message
    bad = bytearray(data)
    first_name = data.index(b"panda_joint1")
    bad[first_name + len("panda_joint1")] = ord("x")
    with pytest.raises(DimensionError):
        JointStateDecoder().decode(bytes(bad))


def test_float64_array_and_wrench_equal_deserialize_message():
    """Effort commands with and without layout dimensions (the latter through rclpy), and force/torque
    wrenches with frame ids of every length modulo 8: the values equal rclpy's; truncations refused."""
    rng = np.random.default_rng(12)
    for n in range(0, 9):
        msg = Float64MultiArray(data=rng.normal(size=n).tolist())
        if n % 3 == 2:
            msg.layout.dim = [MultiArrayDimension(label="joints", size=n, stride=n)]
        data = serialize_message(msg)
        np.testing.assert_array_equal(float64_array(data).data, np.asarray(deserialize_message(data, type(msg)).data))
        for cut in range(len(data) if n else 16):  # an empty array ends at byte 16 (then CDR padding)
            with pytest.raises(DimensionError):
                float64_array(data[:cut])
    for k in range(16):
        msg = WrenchStamped()
        msg.header.frame_id = "t" * k
        w = rng.normal(size=6)
        (msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z,
         msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z) = w.tolist()
        data = serialize_message(msg)
        np.testing.assert_array_equal(wrench_values(data), w)
        with pytest.raises(DimensionError):
            wrench_values(data[:-1])


def test_joint_state_encoder_equals_serialize_message():
    """States written into the kept bytes read back by rclpy as the message serialize_message would send."""
    rng = np.random.default_rng(13)
    for n in (1, 3, 7):
        names = [f"joint_{'x' * i}{i}" for i in range(n)]
        enc = JointStateEncoder.create(names)
        for _ in range(5):
            stamp = Time(sec=int(rng.integers(0, 2**31 - 1)), nanosec=int(rng.integers(0, 10**9)))
            p, v, e = rng.normal(size=(3, n))
            got = deserialize_message(enc.encode(stamp, p, v, e), JointState)
            ref = JointState(name=names, position=p.tolist(), velocity=v.tolist(), effort=e.tolist())
            ref.header.stamp = stamp
            assert serialize_message(got) == serialize_message(ref)


def test_wrench_encoder_equals_serialize_message():
    rng = np.random.default_rng(14)
    for k in range(9):  # every frame-id length modulo 8
        enc = WrenchEncoder.create("s" * k)
        stamp = Time(sec=int(rng.integers(0, 2**31 - 1)), nanosec=int(rng.integers(0, 10**9)))
        w = rng.normal(size=6)
        ref = WrenchStamped()
        ref.header.stamp, ref.header.frame_id = stamp, "s" * k
        (ref.wrench.force.x, ref.wrench.force.y, ref.wrench.force.z,
         ref.wrench.torque.x, ref.wrench.torque.y, ref.wrench.torque.z) = w.tolist()
        assert enc.encode(stamp, w[:3], w[3:]) == serialize_message(ref)


def test_odometry_reader_equals_deserialize_message():
    """nav_msgs/Odometry with frame ids of every length modulo 8 on both strings: the 13 values and the stamp
    read from the bytes equal rclpy's message (and odometry_to_base of it); every truncation and a foreign
    encapsulation's unreadable bytes refused with a DimensionError."""
    from nav_msgs.msg import Odometry

    from qv_dynamics.ros.odometry import OdometryReader, check_base, odometry_to_base

    rng = np.random.default_rng(15)
    reader = OdometryReader()
    for k in range(64):
        msg = Odometry()
        msg.header.frame_id, msg.child_frame_id = "o" * (k % 8), "b" * (k // 8)
        msg.header.stamp.sec, msg.header.stamp.nanosec = int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 10**9))
        v = rng.normal(size=13)
        v[6] += 3.0                                             # a quaternion far from zero (it is normalised)
        p, o, tw = msg.pose.pose.position, msg.pose.pose.orientation, msg.twist.twist
        p.x, p.y, p.z, o.x, o.y, o.z, o.w = v[:7].tolist()
        tw.linear.x, tw.linear.y, tw.linear.z, tw.angular.x, tw.angular.y, tw.angular.z = v[7:].tolist()
        msg.pose.covariance = rng.normal(size=36).tolist()     # around the values: never read as them
        msg.twist.covariance = rng.normal(size=36).tolist()
        data = serialize_message(msg)
        reader.read(data)
        np.testing.assert_array_equal(reader.base, v)
        assert (reader.sec, reader.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
        check_base(reader.base)
        qb, vb = odometry_to_base(deserialize_message(data, Odometry))
        np.testing.assert_array_equal(np.concatenate([qb, vb]), reader.base)
        if k % 16 == 0:
            for cut in range(len(data)):
                with pytest.raises(DimensionError):
                    OdometryReader().read(data[:cut])
    with pytest.raises(DimensionError):
        OdometryReader().read(b"\x00\x07" + data[2:40])
