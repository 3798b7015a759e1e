"""The controller's 1 kHz outputs written as serialized bytes (issue 11).

``Publisher.publish`` takes a serialized message; publishing kept bytes with τ written into them skips
rclpy's per-sample conversion of a Python message (a float64 sequence copied from numpy, a JointState's
header and name strings): measured on this machine ~1.5 µs for the Float64MultiArray and ~3 µs for the
stamped JointState per state, plus ~2 µs of field assignment. The bytes are rclpy's own serialization of a
template message (so the format is the rmw's), with τ at the offset where a marker value was serialized;
where the rmw does not serialize as XCDR1 little-endian, :meth:`CommandBytes.create` returns None and the
node keeps building messages.
"""
from __future__ import annotations

import struct

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from qv_dynamics.ros.raw import CDR_LE  # the one XCDR1 little-endian header check of both nodes' encoders


def _values_at(template: bytes, marker: np.ndarray) -> int | None:
    """The byte offset of the one serialized copy of ``marker`` (float64, little-endian) in ``template``."""
    raw = marker.astype("<f8").tobytes()
    at = template.find(raw)
    return at if at >= 0 and template.find(raw, at + 1) < 0 else None


class CommandBytes:
    """Serialized ``Float64MultiArray`` (empty layout, data = τ in the order of ``joints``) and
    ``JointState`` (header.stamp, name = ``joints``, effort = τ) for one command map."""

    def __init__(self, command: bytes, stamped: bytes, at_command: int, at_stamped: int, n: int):
        self._cmd = bytearray(command)
        self._stamped = bytearray(stamped)
        self.command_data = np.frombuffer(self._cmd, "<f8", n, at_command)
        self.stamped_effort = np.frombuffer(self._stamped, "<f8", n, at_stamped)

    @classmethod
    def create(cls, joints) -> CommandBytes | None:
        from rclpy.serialization import serialize_message

        n = len(joints)
        marker = np.pi * np.arange(1.0, n + 1.0) + 1e-3  # values no other field of the templates holds
        cmd = serialize_message(Float64MultiArray(data=marker.tolist()))
        stamped = serialize_message(JointState(name=list(joints), effort=marker.tolist()))
        if cmd[:2] != CDR_LE or stamped[:2] != CDR_LE:
            return None
        at_cmd, at_st = _values_at(cmd, marker), _values_at(stamped, marker)
        if at_cmd is None or at_st is None:
            return None
        return cls(cmd, stamped, at_cmd, at_st, n)

    def command(self, data: np.ndarray) -> bytes:
        """The command's bytes with ``data`` (τ in the order of the joints)."""
        self.command_data[:] = data
        return bytes(self._cmd)

    def stamped(self, stamp, data: np.ndarray) -> bytes:
        """The stamped command's bytes with the stamp (builtin_interfaces/Time) and ``data`` as effort."""
        struct.pack_into("<iI", self._stamped, 4, stamp.sec, stamp.nanosec)
        self.stamped_effort[:] = data
        return bytes(self._stamped)


class CommandOutput:
    """τ to ``/<controller>/commands`` and (while a reader is matched) ``~/command_stamped`` for one
    ``joints`` list: kept bytes (``raw``, where the rmw allows) or kept messages refilled per state."""

    def __init__(self, pub_cmd, pub_stamped, joints, raw: bool):
        self.joints = joints
        self.pub_cmd, self.pub_stamped = pub_cmd, pub_stamped
        self.encoded = CommandBytes.create(joints) if raw else None
        self._cmd, self._stamped = Float64MultiArray(), JointState(name=list(joints))

    def publish(self, data: np.ndarray, stamp) -> None:
        """``data``: τ in the order of the joints; ``stamp``: the stamp of the state it answers."""
        enc, stamped = self.encoded, self.pub_stamped
        if enc is not None:
            self.pub_cmd.publish(enc.command(data))
        else:
            self._cmd.data = data
            self.pub_cmd.publish(self._cmd)
        if stamped is None or not stamped.get_subscription_count():  # no reader: no cost
            return
        if enc is not None:
            stamped.publish(enc.stamped(stamp, data))
        else:
            msg = self._stamped
            msg.header.stamp, msg.effort = stamp, data
            stamped.publish(msg)


__all__ = ["CommandBytes", "CommandOutput"]
