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
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import WrenchStamped
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, MultiArrayDimension
from trajectory_msgs.msg import JointTrajectory

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
    def from_system(cls, system) -> "JointLayout":
        """Layout of a :class:`~qv_dynamics.model.ConstrainedSystem` (fixed base only: /joint_states
        cannot carry a floating-base pose)."""
        if getattr(system, "floating_base", False):
            raise ModelError("the ROS nodes need a fixed-base model: /joint_states has no base pose")
        model = system.model
        names, qi, vi, cont = [], [], [], []
        for j in range(1, model.njoints):
            jm = model.joints[j]
            if jm.nv == 0:
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
        layout = JointLayout.from_system(system)
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
    not named get 0). Any other label is ignored."""
    rows = list(row_labels)
    if msg.layout.dim and msg.layout.dim[0].label:
        labels = [x.strip() for x in msg.layout.dim[0].label.split(",") if x.strip()]
        if labels and len(labels) == len(msg.data) and all(lab in rows for lab in labels):
            if len(set(labels)) != len(labels):
                raise DimensionError(f"lambda_desired: a constraint row is named twice in {labels}")
            vals = as_vector("lambda_desired", msg.data, len(labels))
            out = np.zeros(len(rows))
            for lab, x in zip(labels, vals):
                out[rows.index(lab)] = x
            return out
    return as_vector(f"lambda_desired (one value per row {rows})", msg.data, len(rows))


# ----------------------------------------------------------------------------------------------- wrench


def wrench_to_array(msg: WrenchStamped) -> np.ndarray:
    """(fx, fy, fz, tx, ty, tz); NonFiniteError on NaN/Inf."""
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
    rotation (frame -> world-aligned axes); a point contact needs only the force part."""
    if constraint.type == "point_contact":
        return (R @ wrench_frame[:3])[constraint.axis_idx]
    return wrench_rows(constraint, np.concatenate([R @ wrench_frame[:3], R @ wrench_frame[3:]]))


# ----------------------------------------------------------------------------------------------- trajectories


class TrajectoryReference:
    """θ_d(t), θ̇_d(t), θ̈_d(t) from a trajectory_msgs/JointTrajectory, mapped onto named coordinates.

    Positions are interpolated by cubic Hermite splines when the points carry velocities (linear
    otherwise); accelerations are interpolated linearly when given. Before the first point the first is
    held; after the last the last position is held with zero velocity and acceleration. A header stamp
    of zero means "start when received" (``t_receive``)."""

    def __init__(self, msg: JointTrajectory, coordinate_names: Sequence[str], t_receive: float):
        names = list(coordinate_names)
        if not msg.points:
            raise DimensionError("joint trajectory has no points")
        unknown = [n for n in msg.joint_names if n not in names]
        if unknown:
            raise UnknownNameError(f"joint trajectory names {unknown} are not reference coordinates {names}")
        missing = [n for n in names if n not in msg.joint_names]
        if missing:
            raise UnknownNameError(f"joint trajectory lacks reference coordinates {missing}")
        k = len(msg.joint_names)
        order = np.array([list(msg.joint_names).index(n) for n in names], int)
        t0 = stamp_to_sec(msg.header.stamp)
        self.t0 = t_receive if t0 == 0.0 else t0
        ts, P, V, A = [], [], [], []
        for i, p in enumerate(msg.points):
            t = p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
            pos = as_vector(f"trajectory point {i} positions", p.positions, k)[order]
            vel = as_vector(f"trajectory point {i} velocities", p.velocities, k)[order] if len(p.velocities) else None
            acc = as_vector(f"trajectory point {i} accelerations", p.accelerations, k)[order] \
                if len(p.accelerations) else None
            if ts and t <= ts[-1]:
                raise DimensionError(f"trajectory point {i}: time_from_start must increase")
            ts.append(t)
            P.append(pos)
            V.append(vel)
            A.append(acc)
        self.t = np.array(ts)
        self.P = np.array(P)
        self.has_v = all(v is not None for v in V)
        self.V = np.array(V) if self.has_v else None
        self.has_a = all(a is not None for a in A)
        self.A = np.array(A) if self.has_a else None

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = t - self.t0
        n = self.P.shape[1]
        if s <= self.t[0]:
            return self.P[0].copy(), np.zeros(n), np.zeros(n)
        if s >= self.t[-1]:
            return self.P[-1].copy(), np.zeros(n), np.zeros(n)
        i = int(np.searchsorted(self.t, s) - 1)
        h = self.t[i + 1] - self.t[i]
        x = (s - self.t[i]) / h
        p0, p1 = self.P[i], self.P[i + 1]
        if self.has_v:
            v0, v1 = self.V[i], self.V[i + 1]
            h00, h10, h01, h11 = 2 * x**3 - 3 * x**2 + 1, x**3 - 2 * x**2 + x, -2 * x**3 + 3 * x**2, x**3 - x**2
            pos = h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1
            d00, d10, d01, d11 = 6 * x**2 - 6 * x, 3 * x**2 - 4 * x + 1, -6 * x**2 + 6 * x, 3 * x**2 - 2 * x
            vel = (d00 * p0 + d10 * h * v0 + d01 * p1 + d11 * h * v1) / h
            e00, e10, e01, e11 = 12 * x - 6, 6 * x - 4, -12 * x + 6, 6 * x - 2
            acc = (e00 * p0 + e10 * h * v0 + e01 * p1 + e11 * h * v1) / h**2
        else:
            pos = (1 - x) * p0 + x * p1
            vel = (p1 - p0) / h
            acc = np.zeros(n)
        if self.has_a:
            acc = (1 - x) * self.A[i] + x * self.A[i + 1]
        return pos, vel, acc


# ----------------------------------------------------------------------------------------------- node support


def resolve_config_path(path: str) -> str:
    """A config file path as given, or relative to the package's ``config/`` folder (source tree or
    colcon share directory)."""
    from pathlib import Path

    from ..robots import package_share_dir

    p = Path(path).expanduser()
    if p.is_file():
        return str(p)
    for base in (package_share_dir() / "config", package_share_dir()):
        if (base / path).is_file():
            return str(base / path)
    raise ModelError(f"config file '{path}' not found (neither a file nor in {package_share_dir() / 'config'})")


def load_model_config(model_config: str, robot_description: str = "") -> tuple[object, dict]:
    """(ConstrainedSystem, document) from a model YAML ``{robot: {urdf: ..}, constraints: [..], ...}``.

    A non-empty ``robot_description`` (URDF XML, as the ROS parameter of that name) replaces
    ``robot.urdf``. Raises ModelError / UnknownNameError with the reason (bad URDF, missing frame)."""
    import yaml

    from ..model import ConstrainedSystem

    doc: dict = {}
    if model_config:
        path = resolve_config_path(model_config)
        try:
            doc = yaml.safe_load(open(path).read()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ModelError(f"cannot read model config {path}: {exc}") from None
        if not isinstance(doc, dict):
            raise ModelError(f"model config {path} must be a mapping")
    doc = dict(doc)
    robot = dict(doc.get("robot") or {})
    if robot_description.strip():
        robot["urdf"] = robot_description
    if "urdf" not in robot:
        raise ModelError("no robot: set 'model_config' (YAML with robot.urdf) or 'robot_description'")
    doc["robot"] = robot
    system = ConstrainedSystem.from_yaml({"robot": robot, "constraints": doc.get("constraints") or []})
    JointLayout.from_system(system)  # fixed base, 1-DoF joints only
    return system, doc


class EpisodeCounter:
    """Counts rejected inputs by kind and logs one line per *episode* (a run of consecutive rejects of
    that kind, ended by a good input) — SPEC §6 "logged once per episode, never crashes"."""

    def __init__(self, logger, what: str):
        self.logger = logger
        self.what = what
        self.counts: dict[str, int] = {}
        self._open: set[str] = set()

    def reject(self, kind: str, reason: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind not in self._open:
            self._open.add(kind)
            self.logger.warning(f"{self.what}: dropped ({kind}): {reason} [logged once until a good message]")

    def ok(self) -> None:
        if self._open:
            self.logger.info(f"{self.what}: good input again after {sorted(self._open)}")
            self._open.clear()

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def reject_kind(exc: Exception) -> str:
    """Short counter name for a rejected input: nonfinite, size, names, model."""
    if isinstance(exc, NonFiniteError):
        return "nonfinite"
    if isinstance(exc, DimensionError):
        return "size"
    if isinstance(exc, UnknownNameError):
        return "names"
    return "model"


# ----------------------------------------------------------------------------------------------- URDF for ros2_control

GZ_PLUGIN = ('<gazebo>\n'
             '  <plugin filename="gz_ros2_control-system" name="gz_ros2_control::GazeboSimROS2ControlPlugin">\n'
             '    <parameters>{params}</parameters>\n  </plugin>\n</gazebo>\n')


FT_SENSOR = ('    <sensor name="{name}">\n'
             + "".join(f'      <state_interface name="{k}.{a}"/>\n' for k in ("force", "torque") for a in "xyz")
             + '      <param name="frame_id">{frame}</param>\n    </sensor>\n')


def ros2_control_urdf(xml: str, hardware_plugin: str | None = None, gazebo_parameters: str | None = None,
                      ft_sensor: tuple[str, str] | None = None) -> str:
    """The URDF with every ``<ros2_control><hardware><plugin>`` replaced by ``hardware_plugin`` (e.g.
    ``mock_components/GenericSystem`` or ``gz_ros2_control/GazeboSimSystem``); with ``gazebo_parameters``
    (path of controllers.yaml) the gz_ros2_control system plugin appended; with ``ft_sensor`` =
    (sensor name, frame) a force/torque ``<sensor>`` block added to the first ``<ros2_control>`` unless one
    of that name exists (what force_torque_sensor_broadcaster's ``sensor_name`` reads).

    ModelError when the URDF has no ``<ros2_control>`` block (nothing for controller_manager to load)."""
    import re as _re

    if "<ros2_control" not in xml:
        raise ModelError("URDF has no <ros2_control> block: add one (see urdf/README.md) so controller_manager "
                         "knows the joints' effort command and position/velocity/effort state interfaces")
    if hardware_plugin:
        xml = _re.sub(r"(<hardware>\s*<plugin>)[^<]*(</plugin>)", rf"\g<1>{hardware_plugin}\g<2>", xml)
    if ft_sensor and f'<sensor name="{ft_sensor[0]}"' not in xml:
        i = xml.find("</ros2_control>")
        i = xml.rfind("\n", 0, i) + 1 if xml[xml.rfind("\n", 0, i) + 1:i].strip() == "" else i
        xml = xml[:i] + FT_SENSOR.format(name=ft_sensor[0], frame=ft_sensor[1]) + xml[i:]
    if gazebo_parameters:
        i = xml.rfind("</robot>")
        if i < 0:
            raise ModelError("URDF has no closing </robot> tag")
        xml = xml[:i] + GZ_PLUGIN.format(params=gazebo_parameters) + xml[i:]
    return xml


def diagnostic_array(stamp: Time, level: int, name: str, message: str, hardware_id: str,
                     values: dict) -> DiagnosticArray:
    """One DiagnosticStatus (floats printed with 6 significant digits) in a stamped DiagnosticArray."""
    status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id,
                              values=[KeyValue(key=k, value=f"{v:.6g}" if isinstance(v, float) else str(v))
                                      for k, v in values.items()])
    out = DiagnosticArray()
    out.header.stamp = stamp
    out.status = [status]
    return out


def declare_io_parameters(node) -> None:
    """Parameters every node of the effort-command contract shares: the model and the two topics.

    ``model_config``/``robot_description`` (model), ``joints`` (the effort controller's order),
    ``controller_name``/``command_topic`` (``/<controller_name>/commands`` unless overridden) and
    ``joint_states_topic``."""
    from rcl_interfaces.msg import ParameterDescriptor

    p = node.declare_parameter
    p("model_config", "")
    p("robot_description", "")
    p("joints", None, ParameterDescriptor(dynamic_typing=True))
    p("controller_name", "effort_controller")
    p("command_topic", "")
    p("joint_states_topic", "/joint_states")
