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

import array
import time

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

    def command_bytes(self) -> bytes:
        """The command's bytes with the values last written into ``command_data``."""
        return self._cmd.bytes()

    def stamped(self, sec: int, nanosec: int, data: np.ndarray) -> bytes:
        """The stamped command's bytes with the stamp (sec, nanosec) and ``data`` as effort."""
        self.stamped_effort[:] = data
        return self._stamped.stamped_at(sec, nanosec)


READERS_PERIOD = 0.05   # [s] the stamped command's reader count is looked up this often


class CommandOutput:
    """τ to ``/<controller>/commands`` and (while a reader is matched) ``~/command_stamped`` for one
    ``joints`` list: kept bytes (``raw``, where the rmw allows) or kept messages refilled per state; the
    stamped copy goes out while a reader was matched at the last look (every :data:`READERS_PERIOD` s).
    ``index``: the entries of the values given to :meth:`publish` in the order of the joints (τ in velocity
    order and the command map's ``v_index``); None: the values are in that order already."""

    def __init__(self, pub_cmd, pub_stamped, joints, raw: bool, index=None):
        self.joints = joints
        self.index = None if index is None else np.asarray(index, int)
        self.pub_cmd, self.pub_stamped = pub_cmd, pub_stamped
        self.encoded = CommandBytes.create(joints) if raw else None
        self._cmd, self._stamped = Float64MultiArray(), JointState(name=list(joints))
        self._readers, self._readers_due = 0, -np.inf

    def _stamped_readers(self) -> int:
        """Readers of the stamped command, asked every :data:`READERS_PERIOD` s (a graph query costs µs)."""
        now = time.monotonic()
        if now >= self._readers_due:
            self._readers, self._readers_due = self.pub_stamped.get_subscription_count(), now + READERS_PERIOD
        return self._readers

    def publish(self, values: np.ndarray, sec: int, nanosec: int) -> None:
        """``values``: τ (module doc: ``index``); ``sec``, ``nanosec``: the stamp of the state it answers."""
        enc, stamped, index = self.encoded, self.pub_stamped, self.index
        if enc is not None:
            data = enc.command_data              # written in place: no array built per state
            if index is None:
                data[:] = values
            else:
                np.take(values, index, out=data)
            self.pub_cmd.publish(enc.command_bytes())
        else:
            data = np.asarray(values, float) if index is None else np.take(values, index)
            self._cmd.data = array.array("d", data.tobytes())
            self.pub_cmd.publish(self._cmd)
        if stamped is None or not self._stamped_readers():  # no reader: no cost
            return
        if enc is not None:
            stamped.publish(enc.stamped(sec, nanosec, data))
        else:
            msg = self._stamped
            msg.header.stamp.sec, msg.header.stamp.nanosec, msg.effort = sec, nanosec, self._cmd.data
            stamped.publish(msg)


__all__ = ["CommandBytes", "CommandOutput"]
