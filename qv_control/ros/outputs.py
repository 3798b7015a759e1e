"""The controller's 1 kHz outputs written as serialized bytes.

``Publisher.publish`` takes a serialized message; publishing kept bytes with τ written into them skips
rclpy's per-sample conversion of a Python message (a float64 sequence copied from numpy, a JointState's
header and name strings): measured on this machine ~1.5 µs for the Float64MultiArray and ~3 µs for the
stamped JointState per state, plus ~2 µs of field assignment. The bytes are rclpy's own serialization of a
template (:class:`qv_dynamics.ros.raw.KeptBytes`, the one byte writer of both packages' nodes); where the
rmw does not serialize as XCDR1 little-endian, :meth:`CommandBytes.create` returns None and the node keeps
building messages.
"""
from __future__ import annotations

import numpy as np
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from qv_dynamics.ros.raw import KeptBytes


class CommandBytes:
    """Serialized ``Float64MultiArray`` (empty layout, data = τ in the order of ``joints``) and
    ``JointState`` (header.stamp, name = ``joints``, effort = τ) for one command map."""

    def __init__(self, command: KeptBytes, stamped: KeptBytes):
        self._cmd, self._stamped = command, stamped
        self.command_data, self.stamped_effort = command.fields["data"], stamped.fields["effort"]

    @classmethod
    def create(cls, joints) -> CommandBytes | None:
        n = len(joints)
        cmd = KeptBytes.create(lambda v: Float64MultiArray(**v), {"data": n})
        stamped = KeptBytes.create(lambda v: JointState(name=list(joints), **v), {"effort": n})
        return cls(cmd, stamped) if cmd is not None and stamped is not None else None

    def command(self, data: np.ndarray) -> bytes:
        """The command's bytes with ``data`` (τ in the order of the joints)."""
        self.command_data[:] = data
        return self._cmd.bytes()

    def stamped(self, stamp, data: np.ndarray) -> bytes:
        """The stamped command's bytes with the stamp (builtin_interfaces/Time) and ``data`` as effort."""
        self.stamped_effort[:] = data
        return self._stamped.stamped(stamp)


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
