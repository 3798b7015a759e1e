"""The floating base in the ROS contract (SPEC §1): nav_msgs/Odometry as REP 105 state estimators publish it.

``pose`` is the base frame (``child_frame_id``) in the world frame (``header.frame_id``, e.g. ``odom``);
``twist`` is the base twist **in the base frame**. That is exactly Pinocchio's free-flyer convention
(q_base = position, quaternion x y z w; v_base = linear and angular velocity in the base frame), so the
conversion is a copy in both directions.
"""
from __future__ import annotations

import math

import numpy as np
from nav_msgs.msg import Odometry

from ..errors import NonFiniteError


def odometry_to_base(msg: Odometry) -> tuple[np.ndarray, np.ndarray]:
    """(q_base (7: x y z qx qy qz qw, quaternion normalised), v_base (6: v, ω in the base frame)).
    NonFiniteError on NaN/Inf or a zero quaternion (the caller drops and counts)."""
    p, o = msg.pose.pose.position, msg.pose.pose.orientation
    lin, ang = msg.twist.twist.linear, msg.twist.twist.angular
    q = np.array([p.x, p.y, p.z, o.x, o.y, o.z, o.w])
    v = np.array([lin.x, lin.y, lin.z, ang.x, ang.y, ang.z])
    if not math.isfinite(q.dot(q) + v.dot(v)):
        raise NonFiniteError("odometry: non-finite base pose or twist")
    nrm = float(np.linalg.norm(q[3:]))
    if nrm < 0.5:
        raise NonFiniteError(f"odometry: base quaternion of norm {nrm:.3g} is not a rotation")
    q[3:] /= nrm
    return q, v


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


__all__ = ["base_to_odometry", "odometry_to_base"]
