"""Node parameters declared as data (SPEC §5–§6): one table of :class:`Param` per node.

A node declares its table (:func:`declare`; description, type and read-only flag go into the
``ParameterDescriptor``, so ``ros2 param describe`` shows them), validates a change with
:func:`validate` in its on-set callback (validation only: nothing is applied there) and applies it in a
post-set callback. :func:`unknown_overrides` lists the names of a ``--params-file`` that no table
declares (a misspelled key would otherwise be ignored silently); :func:`markdown_table` renders a table
for the README (``test/test_params_tables.py`` keeps the two in sync).

The model every node of the effort-command contract loads from its parameters (:func:`load_model_config`,
:func:`resolve_config_path`) is read in :mod:`qv_dynamics.ros.params_file` (imported from here too).
"""
from __future__ import annotations

import array
import difflib
import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from rcl_interfaces.msg import ParameterDescriptor

from ..errors import ModelError
from ..plants.drive_hold import check_bandwidth
from ..sim.stepper import INTEGRATORS, METHODS
from ..yamlio import MAX_LIST
from .params_file import load_model_config, node_model_config, resolve_config_path  # noqa: F401 (used from here)


@dataclass(frozen=True)
class Param:
    """One node parameter. ``default=None`` means dynamically typed (lists of either type, or unset);
    ``check(value)`` raises ModelError with the reason; ``read_only`` parameters are read at start only."""

    name: str
    default: Any
    description: str
    check: Callable[[Any], None] | None = None
    read_only: bool = True

    @property
    def type_name(self) -> str:
        d = self.default
        if d is None:
            return "any"
        for typ, name in ((bool, "bool"), (int, "integer"), (float, "double"), (str, "string")):
            if isinstance(d, typ):  # bool before int: a bool is an int in Python
                return name
        return "string_array" if all(isinstance(x, str) for x in d) else "double_array"

    def validate(self, value) -> None:
        if self.check is not None and value is not None:
            self.check(as_list(value))


def as_list(value):
    """A parameter value as the nodes read it: rclpy delivers a double or integer array set through the
    parameter service (``ros2 param set``) as ``array.array``, a params file's as a list; both become a list."""
    return value.tolist() if isinstance(value, array.array) else value


# ------------------------------------------------------------------------------------------ checks
def positive(name: str) -> Callable[[Any], None]:
    def check(v) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ModelError(f"{name} must be a positive number, got {v!r}")
    return check


def non_negative(name: str) -> Callable[[Any], None]:
    def check(v) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ModelError(f"{name} must be a number >= 0, got {v!r}")
    return check


def one_of(name: str, choices: Sequence[str]) -> Callable[[Any], None]:
    def check(v) -> None:
        if v not in choices:
            raise ModelError(f"{name} must be one of {tuple(choices)}, got {v!r}")
    return check


def bounded(name: str, low: float, high: float, unit: str = "s", low_open: bool = False) -> Callable[[Any], None]:
    """A finite number in [low, high] (``low_open``: (low, high])."""
    def check(v) -> None:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v > high \
                or v < low or (low_open and v == low):
            raise ModelError(f"{name} must be a number in {'(' if low_open else '['}{low:g}, {high:g}] {unit}, "
                             f"got {v!r}")
    return check


def int_range(name: str, low: int, high: int) -> Callable[[Any], None]:
    def check(v) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
            raise ModelError(f"{name} must be an integer in [{low}, {high}], got {v!r}")
    return check


def topic_name(name: str, optional: bool = False, template: str = "{}") -> Callable[[Any], None]:
    """A valid ROS topic name (rclpy's rules: alphanumerics, '_', '/', '~', substitutions); a list of them is
    checked entry by entry, empty entries skipped. ``optional``: the empty string means none;
    ``template``: the topic the value makes (``controller_name`` -> ``/{}/commands``)."""
    from rclpy.exceptions import InvalidTopicNameException
    from rclpy.expand_topic_name import expand_topic_name
    from rclpy.validate_full_topic_name import validate_full_topic_name
    from rclpy.validate_topic_name import validate_topic_name

    def check(v) -> None:
        for item in (v if isinstance(v, (list, tuple)) else [v]):
            if not isinstance(item, str):
                raise ModelError(f"{name} must be a topic name (a string), got {v!r}")
            if not item and (optional or isinstance(v, (list, tuple))):
                continue
            try:
                validate_topic_name(template.format(item))  # then as rclpy expands it (a node named "node")
                validate_full_topic_name(expand_topic_name(template.format(item), "node", "/"))
            except (InvalidTopicNameException, ValueError) as exc:
                reason = str(exc).splitlines()[0].split(": ", 1)[-1].rstrip(":")
                raise ModelError(f"{name} {item!r} does not make a valid topic name ({reason})") from None
    return check


def unit_sign(name: str) -> Callable[[Any], None]:
    """+1 or -1 (a sign: 0 or NaN would silently turn off what it multiplies)."""
    def check(v) -> None:
        if isinstance(v, bool) or v not in (1, -1):
            raise ModelError(f"{name} must be 1 or -1, got {v!r}")
    return check


@dataclass(frozen=True)
class Rule:
    """A check across parameters: ``check(values)`` ({name: value} of at least ``names``) raises ModelError;
    run at start and on every change of one of ``names``."""

    names: tuple[str, ...]
    check: Callable[[dict], None]


def at_most(name: str, other: str) -> Rule:
    """``name`` <= ``other`` (e.g. a watchdog's period within its timeout: a longer period is no watchdog)."""
    def check(values: dict) -> None:
        a, b = values.get(name), values.get(other)
        if a is not None and b is not None and a > b:
            raise ModelError(f"{name} ({a:g}) must not exceed {other} ({b:g})")
    return Rule((name, other), check)


def finite_list(name: str) -> Callable[[Any], None]:
    """Finite numbers, at most MAX_LIST of them (a parameters file's lists are bounded the same way)."""
    def check(v) -> None:
        vals = v if isinstance(v, (list, tuple)) else [v]
        if len(vals) > MAX_LIST:
            raise ModelError(f"{name} has {len(vals)} values, at most {MAX_LIST}")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in vals):
            raise ModelError(f"{name} must be a list of finite numbers, got {v!r}")
    return check


# ------------------------------------------------------------------------------------------ tables
BEST_EFFORT_INPUTS = Param("best_effort_inputs", True, "subscribe to joint states and effort commands best-effort "
                           "(keep-last): matches reliable publishers too, a lost sample is superseded by the next "
                           "instead of re-sent, and the publisher keeps no acknowledgement state for this reader")
RAW_MESSAGES = Param("raw_messages", True, "1 kHz topics (joint states, effort commands, wrenches) read from and "
                     "/joint_states and the controller's commands (and ~/command_stamped) written to serialized "
                     "messages (ros/raw.py, qv_control/ros/outputs.py); false: rclpy's messages")
PLANT_MODES = ("realtime", "lockstep")
MAX_QUEUE = 1000  # joint_states_queue: deepest subscription queue


def queue_depth(name: str) -> Callable[[Any], None]:
    """A subscription depth: 1 to MAX_QUEUE (a depth of 0 keeps no message)."""
    return int_range(name, 1, MAX_QUEUE)


DIAGNOSTICS_PERIOD_CHECK = bounded("diagnostics_period", 0.0, 3600.0)
STAMP_FUTURE_TOLERANCE = Param("stamp_future_tolerance", 0.5, "a /joint_states stamped further ahead of the node "
                               "clock [s] is dropped; at most 10 s", bounded("stamp_future_tolerance", 0.0, 10.0),
                               read_only=False)
WRENCH_SIGN = Param("wrench_sign", 1.0, "1, or -1 if the sensor reports the environment's reaction instead of λ "
                    "(0 would turn off contact detection and the force limit)", unit_sign("wrench_sign"))

JOINT_STATES_TOPIC = Param("joint_states_topic", "/joint_states", "sensor_msgs/JointState topic (name-mapped)",
                           topic_name("joint_states_topic"))
# the model and the two topics of the effort-command contract (controller and plant nodes)
MODEL_IO = (
    Param("model_config", "", "model YAML (robot.urdf, constraints), a path or a name in the package's config/"),
    Param("robot_description", "", "URDF XML; replaces robot.urdf of model_config when non-empty"),
    Param("joints", None, "joints of the effort controller, in its command order"),
    Param("controller_name", "effort_controller", "commands go to /<controller_name>/commands",
          topic_name("controller_name", template="/{}/commands")),
    Param("command_topic", "", "overrides /<controller_name>/commands when non-empty",
          topic_name("command_topic", optional=True)),
    JOINT_STATES_TOPIC,
)

# the floating base as a state estimator publishes it (nav_msgs/Odometry, REP 105): plant and legged controller
ODOMETRY = (
    Param("odom_topic", "/odom", "nav_msgs/Odometry of the base: pose in odom_frame, twist in base_frame",
          topic_name("odom_topic")),
    Param("odom_frame", "odom", "world frame of the odometry (header.frame_id)"),
    Param("base_frame", "base", "base frame of the odometry (child_frame_id)"),
)

PLANT = MODEL_IO + (
    Param("dt", 0.001, "integration step [s]; at most 0.05 s", bounded("dt", 0.0, 0.05, low_open=True)),
    Param("mode", "realtime", "realtime (wall-clock timer) or lockstep (one step per command)",
          one_of("mode", PLANT_MODES)),
    Param("real_time_factor", 1.0, "simulated seconds per wall-clock second (realtime mode); at most 100",
          bounded("real_time_factor", 0.0, 100.0, unit="", low_open=True)),
    Param("lockstep_resend", 0.5, "re-publish the state after this long without a command [s] (lockstep); "
          "0: never (a lost state or command then stalls the loop until the controller's watchdog); at most 60 s",
          bounded("lockstep_resend", 0.0, 60.0)),
    Param("publish_clock", True, "publish /clock with the simulated time"),
    RAW_MESSAGES,
    BEST_EFFORT_INPUTS,
    Param("clock_period", 0.0, "simulated time between /clock messages [s]; 0: every step. Every use_sim_time node "
          "receives each one; ROS time then advances in steps of clock_period (state stamps stay exact); at most 1 s",
          bounded("clock_period", 0.0, 1.0)),
    Param("q0", None, "initial joint positions (one per joint), else the model config's initial.q", finite_list("q0")),
    Param("qdot0", None, "initial joint velocities, else the model config's initial.qdot", finite_list("qdot0")),
    Param("wait_for_command", True, "realtime: the clock starts at the first valid effort command (the initial "
          "state is published every 10 ms until then)"),
    Param("max_steps_per_tick", 5, "realtime: longest catch-up burst [steps]; beyond it real time is dropped "
          "(counted, reported as the real-time factor); 1 to 1000", int_range("max_steps_per_tick", 1, 1000)),
    Param("command_timeout", 0.02, "plant time [s] without an effort command after which the drives hold the "
          "pose with damping until commands resume (counted: command_timeout_episodes); as a robot's drives "
          "(Franka: 20 missed 1 kHz commands, UR: 20 ms), and below 2/k_d of the controller (a command held "
          "longer makes its damping an unstable sampled loop); in (0, 1] s",
          bounded("command_timeout", 0.0, 1.0, low_open=True)),
    Param("hold_bandwidth", 40.0, "bandwidth ω [rad/s] of the drives' hold, critically damped on the robot's "
          "model: τ = g + M(ω² Δq − 2ω q̇) (qv_dynamics.plants.drive_hold); in (0, 500]", check_bandwidth),
)

SIM_NODE = PLANT + (
    Param("publish_wrench", True, "publish each constraint's λ as geometry_msgs/WrenchStamped"),
    Param("method", "projection", "projection (section 6) or kkt_baumgarte", one_of("method", METHODS)),
    Param("integrator", "rk4", "rk4, semi_implicit_euler or scipy", one_of("integrator", INTEGRATORS)),
    Param("mass_scale", 1.0, "plant/model mismatch: every link's mass and rotational inertia × this; at most 100",
          bounded("mass_scale", 0.0, 100.0, unit="", low_open=True)),
    Param("nr_tol", 1e-12, "Newton–Raphson tolerance per metre of model length (sim.stepper.length_scale); "
          "an iteration that stalls below 1000x it is accepted (rounding floor) and counted; at most 1e-3",
          bounded("nr_tol", 0.0, 1e-3, unit="", low_open=True)),
    Param("diagnostics_period", 1.0, "period of /diagnostics [s] (real-time factor, clipped commands, "
          "substep retries); 0 disables them; at most 3600 s", DIAGNOSTICS_PERIOD_CHECK),
) + ODOMETRY

SCENE_KEYS = ("table_height", "tip_radius", "friction", "timestep", "tool_frame")

MUJOCO_NODE = PLANT + (
    Param("wrench_topic", "~/tool_ft/wrench", "the tool force/torque sensor (geometry_msgs/WrenchStamped)",
          topic_name("wrench_topic")),
) + tuple(Param(f"scene.{k}", None, f"MuJoCo scene: {k} (SceneConfig), else the model config's scene.{k}")
          for k in SCENE_KEYS)

LEGGED_MUJOCO_NODE = PLANT + ODOMETRY

# the MuJoCo weld plant: its free-flyer joint 1 (the held object) goes out as odometry
LOOP_PLANT_NODE = PLANT + ODOMETRY

DYNAMICS_NODE = (
    Param("model_config", "", "model YAML (robot.urdf, constraints), a path or a name in the package's config/"),
    Param("robot_description", "", "URDF XML; replaces robot.urdf of model_config when non-empty"),
    JOINT_STATES_TOPIC,
    Param("active_constraints_topic", "", "std_msgs/String (transient local) naming the active constraints, "
          "comma-separated: the model follows a controller's contact switches (/qv_controller/active_constraints)",
          topic_name("active_constraints_topic", optional=True)),
    RAW_MESSAGES,
    BEST_EFFORT_INPUTS,
    Param("joint_states_queue", 10, "subscription depth; deep enough that a burst is seen and a bad message "
          f"counted (1 evaluates the freshest state only, but the middleware drops a burst unseen); 1 to "
          f"{MAX_QUEUE}", queue_depth("joint_states_queue")),
    replace(STAMP_FUTURE_TOLERANCE, read_only=True),
    Param("command_topic", "", "effort commands to read τ from (quasi-forces u_v, u_ξ); empty: none",
          topic_name("command_topic", optional=True)),
    Param("joints", [""], "order of the effort commands on command_topic"),
    Param("wrench_topics", [""], "geometry_msgs/WrenchStamped topics, one per name in wrench_constraints",
          topic_name("wrench_topics")),
    Param("wrench_constraints", [""], "constraint names measured by wrench_topics"),
    WRENCH_SIGN,
    Param("fixed_frame", "", "frame of the markers (default: the model's first frame)"),
    Param("force_scale", 0.01, "marker arrow length per newton [m/N]; at most 1",
          bounded("force_scale", 0.0, 1.0, unit="m/N", low_open=True)),
    Param("publish_markers", True, "publish visualization_msgs/MarkerArray of the constraint forces"),
    Param("markers_period", 0.04, "message time between MarkerArrays [s]; at most 60 s",
          bounded("markers_period", 0.0, 60.0)),
    Param("decimation", 0, "evaluate every k-th /joint_states message; 0: k chosen to fit load_budget (logged); at "
          "most 1000", int_range("decimation", 0, 1000)),
    Param("load_budget", 0.25, "automatic decimation: at most this fraction of a core (callback time over the "
          "input period), in (0, 1]", bounded("load_budget", 0.0, 1.0, unit="", low_open=True)),
    Param("diagnostics_period", 1.0, "period of /diagnostics [s]; 0 disables them; at most 3600 s",
          DIAGNOSTICS_PERIOD_CHECK),
    Param("condition_warn", 1e6, "warn when cond(A M⁻¹ Aᵀ) exceeds this (a finite number > 1: a condition "
          "number is never below 1)", bounded("condition_warn", 1.0, 1e300, unit="", low_open=True)),
) + ODOMETRY

# names rclpy declares itself, and prefixes a node may declare from overrides (e.g. law_params.*)
BUILTIN = ("use_sim_time", "start_type_description_service")


# ------------------------------------------------------------------------------------------ mechanics
def declare(node, table: Sequence[Param], prefixes: Sequence[str] = (), rules: Sequence[Rule] = ()) -> None:
    """Declare every parameter of ``table`` on ``node`` (description, type and read-only flag in its
    descriptor), refuse bad start-up values (ModelError with the reason) and warn about overrides that no
    entry of the table declares (``prefixes``: name prefixes the node declares itself, e.g. ``law_params.``);
    their names are kept in ``node.unknown_parameters`` for its diagnostics.

    An integer given for a double (``watchdog_timeout: 1`` in a params file, ``ros2 param set ... dt 1``) is
    taken as that double, at start and on a change (a pre-set callback); any other type mismatch is a
    ModelError naming the parameter and both types."""
    from rclpy.exceptions import InvalidParameterTypeException

    overrides = getattr(node, "_parameter_overrides", None)
    doubles = {p.name for p in table if p.type_name == "double"}
    if overrides:
        for name, prm in list(overrides.items()):
            if name in doubles:
                overrides[name] = _int_as_double(prm)
    for p in table:
        desc = ParameterDescriptor(description=p.description, read_only=p.read_only,
                                   dynamic_typing=p.default is None)
        try:
            node.declare_parameter(p.name, p.default, desc)
        except InvalidParameterTypeException:
            given = overrides.get(p.name) if overrides else None
            got = f", got {given.type_.name.lower()} {given.value!r}" if given is not None else ""
            raise ModelError(f"parameter '{p.name}' must be of type {p.type_name}{got}") from None
    node.add_pre_set_parameters_callback(lambda params: [_int_as_double(x) if x.name in doubles else x
                                                         for x in params])
    values = {p.name: node.get_parameter(p.name).value for p in table}
    validate(table, values, rules, values)
    node.unknown_parameters = warn_unknown(node, prefixes)


def _int_as_double(prm):
    """``prm`` with an integer value turned into the double it stands for (other values as they are)."""
    from rclpy.parameter import Parameter

    if prm.type_ == Parameter.Type.INTEGER:
        return Parameter(prm.name, Parameter.Type.DOUBLE, float(prm.value))
    return prm


def validate(table: Sequence[Param], new: dict, rules: Sequence[Rule] = (), current: dict | None = None) -> None:
    """ModelError with the reason when a value of ``new`` ({name: value}) fails its table check, or when a
    rule reading one of them fails on ``current`` values updated with ``new``."""
    by_name = {p.name: p for p in table}
    for name, value in new.items():
        p = by_name.get(name)
        if p is not None:
            p.validate(value)
    merged = dict(current or {}, **new)
    for rule in rules:
        if any(n in new for n in rule.names):
            rule.check({n: as_list(merged.get(n)) for n in rule.names})


def unknown_overrides(node, prefixes: Sequence[str] = ()) -> list[str]:
    """Names given to ``node`` (``--params-file``, ``parameter_overrides``) that it did not declare, with a
    close declared name when there is one; a node warns about them and counts them in its diagnostics."""
    overrides = getattr(node, "_parameter_overrides", {}) or {}
    declared = [p.name for p in node._parameters.values()] if hasattr(node, "_parameters") else []
    out = []
    for name in overrides:
        if node.has_parameter(name) or name in BUILTIN or name.startswith("qos_overrides.") \
                or any(name.startswith(pre) for pre in prefixes):
            continue
        close = difflib.get_close_matches(name, declared, n=1)
        out.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return out


def warn_unknown(node, prefixes: Sequence[str] = ()) -> list[str]:
    """Log one warning listing the unknown parameter names (see :func:`unknown_overrides`); returns them."""
    unknown = unknown_overrides(node, prefixes)
    if unknown:
        node.get_logger().warning(f"ignored parameters that {node.get_name()} does not declare: {unknown}")
    return unknown


def markdown_table(table: Sequence[Param]) -> str:
    """The README table of a node's parameters: name, type, default, read-only, description."""
    rows = ["| parameter | type | default | read-only | description |", "|---|---|---|---|---|"]
    for p in table:
        default = "unset" if p.default is None else "`" + repr(p.default).replace("|", "\\|") + "`"
        rows.append(f"| `{p.name}` | {p.type_name} | {default} | {'yes' if p.read_only else 'no'} | "
                    f"{p.description.replace('|', '/')} |")
    return "\n".join(rows) + "\n"


# the parameter tables of the docs (doc/generate.py) and of the tests
NODE_TABLES = (("qv_dynamics_node", DYNAMICS_NODE), ("qv_sim_node", SIM_NODE), ("qv_mujoco_node", MUJOCO_NODE),
               ("qv_legged_mujoco_node", LEGGED_MUJOCO_NODE),
               ("qv_loop_plant_node", LOOP_PLANT_NODE))
