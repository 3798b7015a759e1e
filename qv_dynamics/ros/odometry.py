"""The floating base in the ROS contract (SPEC §1): nav_msgs/Odometry as REP 105 state estimators publish it.

``pose`` is the base frame (``child_frame_id``) in the world frame (``header.frame_id``, e.g. ``odom``);
``twist`` is the base twist **in the base frame**. That is exactly Pinocchio's free-flyer convention
(q_base = position, quaternion x y z w; v_base = linear and angular velocity in the base frame), so the
conversion is a copy in both directions.

At 1 kHz the message is read from its serialized bytes (:class:`OdometryReader`): rclpy builds an Odometry
with five nested messages and two 36-double covariances per sample (measured ~190 µs of a controller's CPU
per state on the 2-core machine under load); the 13 values a free body needs are two runs of doubles at
offsets fixed by the two frame-id strings. Format (XCDR1 little-endian, :mod:`.raw`): int32 sec, uint32
nanosec, string frame_id, string child_frame_id, then (aligned to 8) pose (position 3, orientation 4),
pose covariance 36, twist (linear 3, angular 3), twist covariance 36, all float64.
"""
from __future__ import annotations

import math
import struct

import numpy as np
from nav_msgs.msg import Odometry

from ..errors import DimensionError, NonFiniteError
from .raw import _HEAD, _U32, CDR_LE, _align, _deserialize, subscribe_raw

_TWIST_AT = 8 * (7 + 36)          # bytes from the pose to the twist
_END = _TWIST_AT + 8 * (6 + 36)   # bytes from the pose to the end of the twist covariance


def check_base(base: np.ndarray) -> None:
    """``base`` (13: x y z qx qy qz qw, v, ω) checked and its quaternion normalised in place; NonFiniteError on
    NaN/Inf or a zero quaternion (the caller drops and counts)."""
    if not math.isfinite(base.dot(base)):
        raise NonFiniteError("odometry: non-finite base pose or twist")
    quat = base[3:7]
    nrm = math.sqrt(quat.dot(quat))
    if nrm < 0.5:
        raise NonFiniteError(f"odometry: base quaternion of norm {nrm:.3g} is not a rotation")
    quat /= nrm


def odometry_to_base(msg: Odometry) -> tuple[np.ndarray, np.ndarray]:
    """(q_base (7: x y z qx qy qz qw, quaternion normalised), v_base (6: v, ω in the base frame)).
    NonFiniteError on NaN/Inf or a zero quaternion (the caller drops and counts)."""
    base = OdometryReader().read_message(msg).base
    check_base(base)
    return base[:7], base[7:]


class OdometryReader:
    """One odometry stream read into a preallocated ``base`` (13 values: q_base, then v_base) and its header
    stamp (``sec``, ``nanosec``), from the serialized bytes (:meth:`read`) or a message (:meth:`read_message`);
    unchecked until :func:`check_base`."""

    def __init__(self):
        self.base = np.zeros(13)
        self.sec = self.nanosec = 0

    @property
    def t(self) -> float:
        return self.sec + 1e-9 * self.nanosec

    def read(self, data: bytes) -> OdometryReader:
        """The values of serialized nav_msgs/Odometry; DimensionError on bytes that cannot be one."""
        if data[:2] != CDR_LE:                 # not XCDR1 little-endian: rclpy's own path
            return self.read_message(_deserialize(data, Odometry))
        try:
            sec, nanosec, flen = _HEAD.unpack_from(data, 4)
            p = _align(16 + flen, 4)
            (clen,) = _U32.unpack_from(data, p)
            p = _align(p + 4 + clen, 8)
            if p + _END > len(data):
                raise ValueError("the pose and twist run beyond the end")
            base = self.base
            base[:7] = np.frombuffer(data, "<f8", 7, p)
            base[7:] = np.frombuffer(data, "<f8", 6, p + _TWIST_AT)
        except (struct.error, ValueError) as exc:
            raise DimensionError(f"malformed serialized nav_msgs/Odometry ({len(data)} bytes): {exc}") from None
        self.sec, self.nanosec = sec, nanosec
        return self

    def read_message(self, msg: Odometry) -> OdometryReader:
        p, o = msg.pose.pose.position, msg.pose.pose.orientation
        lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
        self.base[:] = (p.x, p.y, p.z, o.x, o.y, o.z, o.w, lin.x, lin.y, lin.z, ang.x, ang.y, ang.z)
        self.sec, self.nanosec = msg.header.stamp.sec, msg.header.stamp.nanosec
        return self


def subscribe_odometry(node, topic: str, callback, qos, raw: bool, on_error):
    """nav_msgs/Odometry on ``topic``: ``callback`` gets an :class:`OdometryReader` holding the message's values
    (read from the serialized bytes with ``raw``; bytes that cannot be read go to ``on_error(exc)``)."""
    reader = OdometryReader()
    if raw:
        return subscribe_raw(node, Odometry, topic, reader.read, callback, qos, on_error)
    return node.create_subscription(Odometry, topic, lambda msg: callback(reader.read_message(msg)), qos)


def base_to_odometry(stamp, frame_id: str, child_frame_id: str, q: np.ndarray, v: np.ndarray,
                     msg: Odometry | None = None) -> Odometry:
    """Odometry of the base from Pinocchio's q (first 7 entries) and q̇ (first 6)."""
    msg = Odometry() if msg is None else msg
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.child_frame_id = child_frame_id
    pp, o = msg.pose.pose.position, msg.pose.pose.orientation
    pp.x, pp.y, pp.z = (float(x) for x in q[:3])
    o.x, o.y, o.z, o.w = (float(x) for x in q[3:7])
    tw = msg.twist.twist
    tw.linear.x, tw.linear.y, tw.linear.z = (float(x) for x in v[:3])
    tw.angular.x, tw.angular.y, tw.angular.z = (float(x) for x in v[3:6])
    return msg


__all__ = ["OdometryReader", "base_to_odometry", "check_base", "odometry_to_base", "subscribe_odometry"]
