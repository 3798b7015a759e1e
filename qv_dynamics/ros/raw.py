"""The 1 kHz topics read from (and /joint_states written to) their serialized form.

rclpy builds a Python message for every sample it delivers (a Header, a Time, a list of name strings, three
arrays); at 1 kHz on a loaded machine that costs each subscriber more than the middleware itself (measured
on this 2-core machine under load: ~40 µs of process CPU per message for a ``raw=True`` subscription,
~80–170 µs for the same subscription building the message). A node subscribed with ``raw=True`` hands the
bytes to :class:`JointStateDecoder`, which reads the stamp and the three float64 sequences with numpy at
offsets found once per name list, and yields a :class:`JointStateView` with the fields the nodes read.

Format: the rmw's serialized message, XCDR1 little-endian (encapsulation ``00 01``): int32 sec, uint32
nanosec, string frame_id, sequence<string> name, then position, velocity, effort as sequence<double>; a
string is uint32 length (with its NUL) + bytes, a sequence uint32 count + items, each item aligned to its
size counted from the byte after the 4-byte encapsulation. Any other encapsulation (big-endian, XCDR2) is
left to rclpy's own ``deserialize_message``: the fast path never guesses.
"""
from __future__ import annotations

import struct

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..errors import DimensionError

CDR_LE = b"\x00\x01"
_U32 = struct.Struct("<I")
_HEAD = struct.Struct("<iII")  # sec, nanosec, frame_id length
_STAMP = struct.Struct("<iI")  # sec, nanosec


def _align(p: int, n: int) -> int:
    """Offset ``p`` rounded up to a multiple of ``n`` counted from the end of the encapsulation (byte 4)."""
    return p + (-(p - 4)) % n


class _Header:
    __slots__ = ("stamp", "frame_id")


class JointStateView:
    """The fields of a JointState the nodes read: ``sec``, ``nanosec`` (the header stamp as ints: no message
    object built), ``header.stamp`` (a builtin_interfaces/Time built when asked for), ``name`` (a tuple, shared
    between messages with the same names), ``position``/``velocity``/``effort`` (read-only float64 arrays on
    the message's bytes)."""

    __slots__ = ("sec", "nanosec", "frame_id", "name", "position", "velocity", "effort")

    @property
    def header(self) -> _Header:
        header = _Header()
        header.stamp, header.frame_id = Time(sec=self.sec, nanosec=self.nanosec), self.frame_id
        return header


class JointStateDecoder:
    """Decodes serialized sensor_msgs/JointState; the name list of the last message is kept, so a stream
    with a fixed name list (joint_state_broadcaster) is read with two bytes comparisons and three
    ``np.frombuffer``. Malformed bytes raise :class:`DimensionError` (the node drops and counts them)."""

    def __init__(self):
        self._names_bytes = b""
        self._names: tuple[str, ...] = ()
        self._frame_len = -1
        self._frame_id = ""
        self._frame_bytes = b""

    def decode(self, data: bytes) -> JointStateView | JointState:
        if data[:2] != CDR_LE:  # not XCDR1 little-endian: rclpy's own (slow, general) path
            return _deserialize(data, JointState)
        try:
            return self._decode(data)
        except (struct.error, ValueError, UnicodeDecodeError) as exc:
            raise DimensionError(f"malformed serialized sensor_msgs/JointState ({len(data)} bytes): {exc}") from None

    def _decode(self, data: bytes) -> JointStateView:
        size = len(data)
        sec, nanosec, flen = _HEAD.unpack_from(data, 4)
        p = 16 + flen
        if flen != self._frame_len or not data.startswith(self._frame_bytes, 16):
            if p > size:
                raise ValueError("frame_id beyond the end")
            self._frame_len, self._frame_bytes = flen, bytes(data[16:p])
            self._frame_id = self._frame_bytes[:-1].decode() if flen else ""
        p = _align(p, 4)
        if self._names_bytes and data.startswith(self._names_bytes, p):
            p += len(self._names_bytes)
        else:
            p = self._read_names(data, p)
        view = JointStateView()
        view.sec, view.nanosec, view.frame_id = sec, nanosec, self._frame_id
        view.name = self._names
        view.position, p = _doubles(data, p)
        view.velocity, p = _doubles(data, p)
        view.effort, p = _doubles(data, p)
        return view

    def _read_names(self, data: bytes, start: int) -> int:
        """Parse the name sequence at ``start``; keep its bytes and the names for the next message."""
        (count,) = _U32.unpack_from(data, start)
        if count > len(data):
            raise ValueError(f"{count} names")
        p = start + 4
        names = []
        for _ in range(count):
            p = _align(p, 4)
            (n,) = _U32.unpack_from(data, p)
            end = p + 4 + n
            if n == 0 or end > len(data) or data[end - 1] != 0:
                raise ValueError("a name string is not NUL-terminated within the message")
            names.append(data[p + 4:end - 1].decode())
            p = end
        self._names_bytes, self._names = bytes(data[start:p]), tuple(names)
        return p


def _doubles(data: bytes, p: int) -> tuple[np.ndarray, int]:
    """A sequence<double> at ``p``: (read-only array on the bytes, offset after it)."""
    count, start, end = _sequence(data, p)
    return (np.frombuffer(data, "<f8", count, start) if count else np.empty(0)), end


def _sequence(data: bytes, p: int) -> tuple[int, int, int]:
    """(count, offset of the first double, offset after the last) of the sequence<double> at ``p``."""
    p = _align(p, 4)
    (count,) = _U32.unpack_from(data, p)
    p += 4
    if count == 0:
        return 0, p, p
    p = _align(p, 8)
    end = p + 8 * count
    if end > len(data):
        raise ValueError(f"a sequence of {count} doubles runs beyond the end")
    return count, p, end


class KeptBytes:
    """Kept serialized bytes of one message, written in place (the 1 kHz outputs: no Python message built
    and converted per sample). rclpy serializes a template once, its float64 fields holding marker values
    (π·j + 10⁻³, j = 1, 2, … over all fields: values no other field holds); each field's values are found
    at the one place the markers were serialized and exposed as a float64 array on the bytes
    (``fields[name]``). A message that starts with a std_msgs/Header has its stamp (int32 sec, uint32
    nanosec) at byte 4, right after the encapsulation. :meth:`create` returns None where the rmw does not
    serialize as XCDR1 little-endian or a marker is not found exactly once (the caller builds messages)."""

    def __init__(self, template: bytes, offsets: dict[str, tuple[int, int]]):
        self._buf = bytearray(template)
        self.fields = {k: np.frombuffer(self._buf, "<f8", n, at) for k, (at, n) in offsets.items()}

    @classmethod
    def create(cls, build, sizes: dict[str, int]) -> KeptBytes | None:
        """``build(values)`` -> the template message with ``values[name]`` (a list of ``sizes[name]``
        floats) in each float64 field; ``sizes``: the number of values of each field."""
        from rclpy.serialization import serialize_message

        markers, j = {}, 1.0
        for k, n in sizes.items():
            markers[k] = np.pi * np.arange(j, j + n) + 1e-3
            j += n
        template = serialize_message(build({k: m.tolist() for k, m in markers.items()}))
        if template[:2] != CDR_LE:
            return None
        offsets = {}
        for k, m in markers.items():
            at = _values_at(template, m) if m.size else 0
            if at is None:
                return None
            offsets[k] = (at, m.size)
        return cls(template, offsets)

    def stamped(self, stamp: Time) -> bytes:
        """The bytes with this header stamp (and the values last written into ``fields``)."""
        return self.stamped_at(stamp.sec, stamp.nanosec)

    def stamped_at(self, sec: int, nanosec: int) -> bytes:
        """The bytes with the header stamp (sec, nanosec) (and the values last written into ``fields``)."""
        _STAMP.pack_into(self._buf, 4, sec, nanosec)
        return bytes(self._buf)

    def bytes(self) -> bytes:
        return bytes(self._buf)


def _values_at(template: bytes, marker: np.ndarray) -> int | None:
    """The byte offset of the one serialized copy of ``marker`` (float64, little-endian) in ``template``."""
    raw = marker.astype("<f8").tobytes()
    at = template.find(raw)
    return at if at >= 0 and template.find(raw, at + 1) < 0 else None


class JointStateEncoder:
    """Serialized sensor_msgs/JointState for a fixed name list (a plant's /joint_states), kept as
    :class:`KeptBytes`: each state is written into its stamp and its three arrays. ``None`` from
    :meth:`create` where the rmw does not serialize as XCDR1 little-endian (the caller builds messages)."""

    def __init__(self, kept: KeptBytes):
        self._kept = kept
        self.position, self.velocity, self.effort = (kept.fields[k] for k in ("position", "velocity", "effort"))

    @classmethod
    def create(cls, names) -> JointStateEncoder | None:
        n = len(names)
        kept = KeptBytes.create(lambda v: JointState(name=list(names), **v),
                                {"position": n, "velocity": n, "effort": n})
        return cls(kept) if kept is not None else None

    def encode(self, stamp: Time, position: np.ndarray, velocity: np.ndarray, effort: np.ndarray) -> bytes:
        """The message's bytes with this stamp and these values (in the order of the names)."""
        self.position[:] = position
        self.velocity[:] = velocity
        self.effort[:] = effort
        return self._kept.stamped(stamp)


def input_qos(depth: int, best_effort: bool):
    """Keep-last ``depth``, best effort or reliable: the QoS of a node's 1 kHz inputs (``best_effort_inputs``).
    A best-effort reader matches reliable writers too (ros2_control's joint_state_broadcaster and effort
    controllers are reliable), so only the readers choose; every publisher of this package stays reliable."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.BEST_EFFORT if best_effort
                      else ReliabilityPolicy.RELIABLE)


class WrenchEncoder:
    """Serialized geometry_msgs/WrenchStamped of one sensor frame as :class:`KeptBytes`; ``None`` from
    :meth:`create` where the rmw is not XCDR1 little-endian."""

    def __init__(self, kept: KeptBytes):
        self._kept = kept
        self.values = kept.fields["wrench"]

    @classmethod
    def create(cls, frame_id: str) -> WrenchEncoder | None:
        def build(v):
            msg = WrenchStamped()
            msg.header.frame_id = frame_id
            f, t = msg.wrench.force, msg.wrench.torque
            f.x, f.y, f.z, t.x, t.y, t.z = v["wrench"]
            return msg

        kept = KeptBytes.create(build, {"wrench": 6})
        return cls(kept) if kept is not None else None

    def encode(self, stamp: Time, force: np.ndarray, torque: np.ndarray) -> bytes:
        self.values[:3] = force
        self.values[3:] = torque
        return self._kept.stamped(stamp)


def subscribe_joint_states(node, topic: str, callback, qos, raw: bool, on_error):
    """``node.create_subscription`` for sensor_msgs/JointState. ``raw``: the serialized message is decoded
    here (:class:`JointStateDecoder`) and ``callback`` gets a :class:`JointStateView`; bytes that cannot be
    read go to ``on_error(exc)`` (drop and count). Else rclpy builds the message and ``callback`` gets it."""
    if not raw:
        return node.create_subscription(JointState, topic, callback, qos)
    return subscribe_raw(node, JointState, topic, JointStateDecoder().decode, callback, qos, on_error)


class ArrayView:
    """The field of a std_msgs/Float64MultiArray the plants read: ``data`` (read-only float64 array)."""

    __slots__ = ("data",)


def float64_array(data: bytes) -> ArrayView | Float64MultiArray:
    """A serialized std_msgs/Float64MultiArray with an empty layout (what effort controllers send) read with
    numpy; one with layout dimensions, or another encapsulation, through rclpy's ``deserialize_message``."""
    if data[:2] == CDR_LE and data[4:8] == b"\x00\x00\x00\x00":  # no layout.dim
        try:
            view = ArrayView()
            view.data, _ = _doubles(data, 12)  # after dim count and data_offset
            return view
        except (struct.error, ValueError) as exc:
            raise DimensionError(f"malformed serialized std_msgs/Float64MultiArray ({len(data)} bytes): {exc}") \
                from None
    return _deserialize(data, Float64MultiArray)


def wrench_values(data: bytes) -> np.ndarray:
    """(fx, fy, fz, tx, ty, tz) of a serialized geometry_msgs/WrenchStamped (read-only array)."""
    if data[:2] != CDR_LE:
        w = _deserialize(data, WrenchStamped).wrench
        return np.array([w.force.x, w.force.y, w.force.z, w.torque.x, w.torque.y, w.torque.z])
    try:
        (flen,) = _U32.unpack_from(data, 12)
        p = _align(16 + flen, 8)
        if p + 48 > len(data):
            raise ValueError("the wrench runs beyond the end")
        return np.frombuffer(data, "<f8", 6, p)
    except (struct.error, ValueError) as exc:
        raise DimensionError(f"malformed serialized geometry_msgs/WrenchStamped ({len(data)} bytes): {exc}") from None


def subscribe_wrench(node, topic: str, callback, raw: bool, on_error, depth: int | None = None):
    """A force/torque sensor's geometry_msgs/WrenchStamped, best effort (matches any publisher); ``callback``
    gets the message, or with ``raw`` its six values (:func:`wrench_values`). ``depth``: keep-last depth (default
    the sensor-data profile's 5; 1 for a controller that must act on the freshest reading: a deeper queue read
    one message per executor turn stays that many samples behind once it has filled)."""
    from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data

    qos = qos_profile_sensor_data if depth is None else QoSProfile(depth=int(depth),
                                                                   reliability=ReliabilityPolicy.BEST_EFFORT)
    if not raw:
        return node.create_subscription(WrenchStamped, topic, callback, qos)
    return subscribe_raw(node, WrenchStamped, topic, wrench_values, callback, qos, on_error)


def subscribe_commands(node, topic: str, callback, qos, raw: bool, on_error):
    """Effort commands (std_msgs/Float64MultiArray); ``callback`` gets the message, or with ``raw`` an
    :class:`ArrayView`."""
    if not raw:
        return node.create_subscription(Float64MultiArray, topic, callback, qos)
    return subscribe_raw(node, Float64MultiArray, topic, float64_array, callback, qos, on_error)


def _deserialize(data: bytes, msg_type):
    from rclpy.serialization import deserialize_message

    try:
        return deserialize_message(data, msg_type)
    except Exception as exc:  # noqa: BLE001 - rclpy raises its RMWError: one kind for the node's count
        raise DimensionError(f"serialized {msg_type.__name__} not readable: {exc}") from None


def subscribe_raw(node, msg_type, topic: str, read, callback, qos, on_error):
    """``node.create_subscription(msg_type, ..., raw=True)`` whose bytes go through ``read`` (e.g.
    :func:`float64_array`) to ``callback``; a DimensionError of ``read`` goes to ``on_error(exc)``."""

    def on_bytes(data: bytes) -> None:
        try:
            value = read(data)
        except DimensionError as exc:
            on_error(exc)
            return
        callback(value)

    return node.create_subscription(msg_type, topic, on_bytes, qos, raw=True)
