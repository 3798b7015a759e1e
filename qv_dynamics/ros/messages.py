"""Message <-> numpy helpers for the ROS nodes (SPEC §5, §6): name mapping, validation, labelled vectors.

Pure functions and small value classes; they import ROS message *types* only (no rclpy node, no
executor), so they are unit-testable without a running graph.

Conventions
-----------
* ``/joint_states`` (sensor_msgs/JointState) is name-mapped: any order, extra joints ignored, every
  model joint required. Continuous joints (Pinocchio ``q = (cos θ, sin θ)``) take the angle θ.
* Effort commands (std_msgs/Float64MultiArray) are in the order of the controller's ``joints``
  parameter: the contract of ``forward_command_controller`` with ``interface_name: effort``.
* Labelled, stamped vectors (v, v_r, ξ, u_v, u_ξ, λ, scalars) are published as sensor_msgs/JointState with
  ``name`` = labels and ``position`` = values (``velocity``/``effort`` empty): ``ros2 topic echo`` shows
  label and value side by side and plotting tools index by name (e.g. ``/qv_dynamics/xi/position[0]``
  or PlotJuggler's ``xi/<label>``). See ``urdf/README.md`` (section "Topics").
"""
from __future__ import annotations

import array
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from ..errors import DimensionError, ModelError, NonFiniteError, UnknownNameError, as_vector

# ----------------------------------------------------------------------------------------------- time


def stamp_to_sec(stamp: Time) -> float:
    """builtin_interfaces/Time -> seconds (float)."""
    return float(stamp.sec) + 1e-9 * float(stamp.nanosec)


def sec_to_stamp(t: float) -> Time:
    """Seconds -> builtin_interfaces/Time (rounded to the nanosecond, t ≥ 0)."""
    if not math.isfinite(t) or t < 0:
        raise NonFiniteError(f"time stamp must be finite and ≥ 0, got {t}")
    ns = int(round(t * 1e9))
    return Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


# ----------------------------------------------------------------------------------------------- joints


@dataclass
class JointLayout:
    """Where each named 1-DoF joint of a model lives in q and q̇ (Pinocchio order).

    ``continuous[i]`` is True for a joint with q = (cos θ, sin θ) (URDF ``continuous``)."""

    names: list[str]
    q_index: np.ndarray
    v_index: np.ndarray
    continuous: np.ndarray
    nq: int
    nv: int
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def any_continuous(self) -> bool:
        return bool(self.continuous.any())

    @classmethod
    def from_system(cls, system, floating: bool = False) -> "JointLayout":
        """Layout of a :class:`~qv_dynamics.model.ConstrainedSystem`. /joint_states cannot carry a
        floating-base pose: ``floating=True`` (the legged nodes) lays out the 1-DoF joints only and leaves
        the free-flyer root to nav_msgs/Odometry (:mod:`qv_dynamics.ros.odometry`)."""
        if getattr(system, "floating_base", False) and not floating:
            raise ModelError("the ROS nodes need a fixed-base model: /joint_states has no base pose "
                             "(floating base: the legged nodes read it from nav_msgs/Odometry)")
        model = system.model
        names, qi, vi, cont = [], [], [], []
        for j in range(1, model.njoints):
            jm = model.joints[j]
            if jm.nv == 0 or (floating and j == 1 and jm.shortname() == "JointModelFreeFlyer"):
                continue
            if jm.nv != 1 or jm.nq not in (1, 2):
                raise ModelError(f"joint '{model.names[j]}' has nq={jm.nq}, nv={jm.nv}: only 1-DoF joints "
                                 "(revolute, prismatic, continuous) can be mapped to /joint_states")
            names.append(model.names[j])
            qi.append(jm.idx_q)
            vi.append(jm.idx_v)
            cont.append(jm.nq == 2)
        return cls(names, np.array(qi, int), np.array(vi, int), np.array(cont, bool), model.nq, model.nv)

    # -- mapping a message's name list onto the model ------------------------------------------------
    def message_index(self, msg_names: Sequence[str]) -> np.ndarray:
        """For each model joint, its index in ``msg_names``. Cached per name tuple (the broadcaster
        sends the same list every time). UnknownNameError names the missing joints."""
        key = tuple(msg_names)
        idx = self._cache.get(key)
        if idx is None:
            pos = {}
            for i, n in enumerate(key):
                if n in pos:
                    raise DimensionError(f"joint name '{n}' appears twice in the message")
                pos[n] = i
            missing = [n for n in self.names if n not in pos]
            if missing:
                raise UnknownNameError(f"joint state lacks model joints {missing} (message has {list(key)})")
            idx = np.array([pos[n] for n in self.names], int)
            if len(self._cache) > 16:
                ident = self._cache.get("__identity__")
                self._cache.clear()
                if ident is not None:
                    self._cache["__identity__"] = ident
            self._cache[key] = idx
        return idx

    def _identity(self) -> tuple[bool, bool]:
        """(q order = joint order, q̇ order = joint order): then to_q/to_v are plain copies."""
        ident = self._cache.get("__identity__")
        if ident is None:
            n = len(self.names)
            ident = (not self.any_continuous and n == self.nq and np.array_equal(self.q_index, np.arange(n)),
                     n == self.nv and np.array_equal(self.v_index, np.arange(n)))
            self._cache["__identity__"] = ident
        return ident

    def to_q(self, theta: np.ndarray) -> np.ndarray:
        """Joint coordinates in model joint order -> Pinocchio q (cos/sin for continuous joints)."""
        if self._identity()[0]:
            return np.array(theta, dtype=float)
        q = np.zeros(self.nq)
        if not self.any_continuous:
            q[self.q_index] = theta
            return q
        for k in range(len(self.names)):
            i = self.q_index[k]
            if self.continuous[k]:
                q[i], q[i + 1] = math.cos(theta[k]), math.sin(theta[k])
            else:
                q[i] = theta[k]
        return q

    def from_q(self, q: np.ndarray) -> np.ndarray:
        """Pinocchio q -> one coordinate per joint (the angle for continuous joints)."""
        if not self.any_continuous:
            return np.asarray(q, float)[self.q_index]
        out = np.empty(len(self.names))
        for k in range(len(self.names)):
            i = self.q_index[k]
            out[k] = math.atan2(q[i + 1], q[i]) if self.continuous[k] else q[i]
        return out

    def to_v(self, values: np.ndarray) -> np.ndarray:
        if self._identity()[1]:
            return np.array(values, dtype=float)
        v = np.zeros(self.nv)
        v[self.v_index] = values
        return v


def joint_state_to_arrays(msg: JointState, layout: JointLayout, need_velocity: bool = True
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(q, q̇, effort|None) in model order from a JointState. Raises DimensionError (lengths),
    UnknownNameError (missing joints) or NonFiniteError (NaN/Inf) — the caller drops and counts."""
    n_names = len(msg.name)
    if len(msg.position) != n_names:
        raise DimensionError(f"joint state: {n_names} names but {len(msg.position)} positions")
    if len(msg.velocity) not in ((n_names,) if need_velocity else (0, n_names)):
        raise DimensionError(f"joint state: {n_names} names but {len(msg.velocity)} velocities")
    if len(msg.effort) not in (0, n_names):
        raise DimensionError(f"joint state: {n_names} names but {len(msg.effort)} efforts")
    idx = layout.message_index(msg.name)
    pos = np.asarray(msg.position, float)[idx]
    vel = np.asarray(msg.velocity, float)[idx] if len(msg.velocity) else np.zeros(len(idx))
    eff = np.asarray(msg.effort, float)[idx] if len(msg.effort) else None
    # fast path: a sum of squares is finite iff every entry is (NaN/Inf propagate); only if it is not
    # (or overflows) is each array checked entry by entry
    if not math.isfinite(pos.dot(pos) + vel.dot(vel) + (eff.dot(eff) if eff is not None else 0.0)):
        for what, arr in (("position", pos), ("velocity", vel), ("effort", eff)):
            if arr is not None and not np.all(np.isfinite(arr)):
                bad = [layout.names[i] for i in np.flatnonzero(~np.isfinite(arr))]
                raise NonFiniteError(f"joint state: non-finite {what} for joints {bad}")
    q = layout.to_q(pos)
    qdot = layout.to_v(vel)
    tau = layout.to_v(eff) if eff is not None else None
    return q, qdot, tau


def arrays_to_joint_state(stamp: Time, layout: JointLayout, q: np.ndarray, qdot: np.ndarray,
                          effort: np.ndarray | None = None) -> JointState:
    """The message joint_state_broadcaster would send for (q, q̇, τ)."""
    msg = JointState()
    msg.header.stamp = stamp
    msg.name = list(layout.names)
    msg.position = layout.from_q(q).tolist()
    msg.velocity = np.asarray(qdot, float)[layout.v_index].tolist()
    if effort is not None:
        msg.effort = np.asarray(effort, float)[layout.v_index].tolist()
    return msg


# ----------------------------------------------------------------------------------------------- commands


class CommandMap:
    """τ (velocity order) <-> Float64MultiArray in the order of the controller's ``joints`` parameter."""

    def __init__(self, system, joints: Sequence[str]):
        joints = list(joints)
        if not joints:
            raise UnknownNameError("'joints' is empty: list the joints the effort controller commands")
        layout = JointLayout.from_system(system, floating=True)   # commands never include a base
        unknown = [j for j in joints if j not in layout.names]
        if unknown:
            raise UnknownNameError(f"unknown joint(s) {unknown} in 'joints'; the model has {layout.names}")
        dup = sorted({j for j in joints if joints.count(j) > 1})
        if dup:
            raise UnknownNameError(f"joint(s) {dup} listed twice in 'joints'")
        self.joints = joints
        self.nv = layout.nv
        self.v_index = np.array([layout.v_index[layout.names.index(j)] for j in joints], int)

    def to_message(self, tau: np.ndarray, msg: Float64MultiArray | None = None) -> Float64MultiArray:
        """τ in the order of ``joints``; fills ``msg`` (a message kept for reuse) when given."""
        if msg is None:
            msg = Float64MultiArray()
        msg.data = self.to_array(tau)
        return msg

    def to_array(self, tau: np.ndarray) -> array.array:
        """τ in the order of ``joints`` as the array.array('d') a message field takes without re-checking."""
        return array.array("d", np.asarray(tau, float)[self.v_index].tobytes())

    def from_message(self, msg: Float64MultiArray) -> np.ndarray:
        """Full τ (zeros on joints not commanded). DimensionError / NonFiniteError on bad input."""
        data = as_vector("effort command", msg.data, len(self.joints))
        tau = np.zeros(self.nv)
        tau[self.v_index] = data
        return tau


# ----------------------------------------------------------------------------------------------- labelled


def labelled(stamp: Time, labels: Sequence[str], values: Iterable[float], frame_id: str = "") -> JointState:
    """A stamped, labelled vector as sensor_msgs/JointState: name = labels, position = values."""
    msg = JointState()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    msg.name = list(labels)
    msg.position = [float(x) for x in values]
    if len(msg.name) != len(msg.position):
        raise DimensionError(f"labelled vector: {len(msg.name)} labels for {len(msg.position)} values")
    return msg


def labelled_values(msg: JointState) -> dict[str, float]:
    return dict(zip(msg.name, msg.position))


def float_array(values: Iterable[float], labels: Sequence[str] | None = None) -> Float64MultiArray:
    """Float64MultiArray whose single layout dimension carries the labels (joined by ',')."""
    msg = Float64MultiArray()
    msg.data = [float(x) for x in values]
    if labels is not None:
        msg.layout.dim = [MultiArrayDimension(label=",".join(labels), size=len(msg.data), stride=len(msg.data))]
    return msg


def lambda_desired_from_message(msg: Float64MultiArray, row_labels: Sequence[str]) -> np.ndarray:
    """λ_d from std_msgs/Float64MultiArray: one value per active constraint row, in ``row_labels``
    order. If ``layout.dim[0].label`` lists constraint row labels separated by commas (``"wall.x"``,
    ``"contact.x,contact.z"``), one per value, the values are matched by label instead (any order; rows
    not named get 0). A label that names a row (``<constraint>.<axis>`` or ``<constraint>[i]``) the model
    does not have is refused (UnknownNameError), never applied to another row; a plain label without
    '.' or '[' (a description such as ``"lambda_d"``) is ignored."""
    rows = list(row_labels)
    if msg.layout.dim and msg.layout.dim[0].label:
        labels = [x.strip() for x in msg.layout.dim[0].label.split(",") if x.strip()]
        if any("." in lab or "[" in lab for lab in labels):
            unknown = [lab for lab in labels if lab not in rows]
            if unknown:
                raise UnknownNameError(f"lambda_desired: unknown constraint row(s) {unknown}; "
                                       f"the active rows are {rows}")
            if len(set(labels)) != len(labels):
                raise DimensionError(f"lambda_desired: a constraint row is named twice in {labels}")
            vals = as_vector(f"lambda_desired (one value per label {labels})", msg.data, len(labels))
            out = np.zeros(len(rows))
            for lab, x in zip(labels, vals):
                out[rows.index(lab)] = x
            return out
    return as_vector(f"lambda_desired (one value per row {rows})", msg.data, len(rows))


# ----------------------------------------------------------------------------------------------- wrench


def wrench_to_array(msg: WrenchStamped | np.ndarray) -> np.ndarray:
    """(fx, fy, fz, tx, ty, tz) of the message, or of its six values as read from the serialized message
    (:func:`qv_dynamics.ros.raw.wrench_values`); NonFiniteError on NaN/Inf."""
    if isinstance(msg, np.ndarray):
        return as_vector("wrench", msg, 6)
    f, t = msg.wrench.force, msg.wrench.torque
    return as_vector("wrench", [f.x, f.y, f.z, t.x, t.y, t.z], 6)


def array_to_wrench(stamp: Time, frame_id: str, w: Sequence[float]) -> WrenchStamped:
    msg = WrenchStamped()
    msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    w = [float(x) for x in w]
    (msg.wrench.force.x, msg.wrench.force.y, msg.wrench.force.z,
     msg.wrench.torque.x, msg.wrench.torque.y, msg.wrench.torque.z) = w
    return msg


def constraint_wrench(constraint, lam_rows: np.ndarray) -> np.ndarray:
    """World-aligned 6-vector (force, torque) of one constraint from its λ rows (zeros on free axes).

    With M q̈ + h = τ − Aᵀλ, λ is the wrench the robot applies to the constraint (environment),
    expressed in world-aligned axes at the constraint frame."""
    w = np.zeros(6)
    w[constraint.axis_idx] = lam_rows
    return w


def wrench_rows(constraint, wrench_world: np.ndarray) -> np.ndarray:
    """Inverse of :func:`constraint_wrench`: the λ rows of one constraint from a world-aligned wrench."""
    return np.asarray(wrench_world, float)[constraint.axis_idx]


def sensor_wrench_rows(constraint, R: np.ndarray, wrench_frame: np.ndarray) -> np.ndarray:
    """The λ rows of one constraint from a wrench in its frame's axes (a force sensor), R = the frame's
    rotation (frame -> world-aligned axes); rows on translations only (a point contact) need only the force."""
    if constraint.axis_idx.size and constraint.axis_idx.max() < 3:  # translation rows only: the force part
        return (R @ wrench_frame[:3])[constraint.axis_idx]
    return wrench_rows(constraint, np.concatenate([R @ wrench_frame[:3], R @ wrench_frame[3:]]))
