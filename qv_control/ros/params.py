"""Parameters of ``qv_controller_node`` as data (see :mod:`qv_dynamics.ros.params` for the mechanism) and
their behaviour (:class:`ControllerParameters`: the on-set callback validates, the post-set callback applies).

``read_only=False`` marks what may change while running: ``joints``, ``law`` and ``law_params.*`` (the law
is rebuilt), ``watchdog_timeout``, ``safe_mode``, ``theta_desired``, ``lambda_desired``. ``law_params.*``
(e.g. ``law_params.kp``) are the keyword arguments of :func:`qv_control.make_law`; the node declares the
ones it is given.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult

from qv_dynamics.errors import ModelError, QVError, UnknownNameError
from qv_dynamics.ros.messages import CommandMap, JointLayout
from qv_dynamics.ros.params import (
    BEST_EFFORT_INPUTS,
    MODEL_IO,
    RAW_MESSAGES,
    STAMP_FUTURE_TOLERANCE,
    WRENCH_SIGN,
    Param,
    as_list,
    at_most,
    bounded,
    finite_list,
    one_of,
    queue_depth,
    topic_name,
    validate,
)

from ..latency import AUTO, MAX_HORIZON, StatePredictor
from ..laws.registry import LAWS, make_law
from ..safe_output import MODES
from .lifecycle import LIFECYCLE_PARAMS
from .sizes import labelled_vector
from .task_params import TASK_PARAMS

SAFE_MODES = MODES  # zero, gravity, hold (qv_control.safe_output)
LAW_PREFIX = "law_params."
MAX_WATCHDOG_TIMEOUT = 10.0  # s: every effort node has a watchdog; a longer timeout is one in name only


def command_delay_check(v) -> None:
    """``command_delay``: a finite number of seconds in [0, MAX_HORIZON], or -1 (one measured period)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or (v < 0 and v != AUTO) \
            or v > MAX_HORIZON:
        raise ModelError(f"command_delay must be in [0, {MAX_HORIZON:g}] s or {AUTO:g} (one update period from "
                         f"the stamps), got {v!r}")


def actuated_joints(law, system) -> list[str]:
    """The 1-DoF joints whose torque ``law`` sets: its ``actuated`` names when it has passive joints (the
    passive-joint laws), else every 1-DoF joint of the model (a free-flyer is never commanded)."""
    names = JointLayout.from_system(system, floating=True).names
    act = getattr(law, "actuated", None)
    if isinstance(act, (list, tuple)) and act and all(isinstance(a, str) for a in act):
        return [n for n in names if n in act]
    return names


def check_joints_cover(law, system, joints) -> None:
    """ModelError naming the joints ``law`` actuates that ``joints`` leaves out (their torque would be dropped)."""
    listed = set(joints or [])
    missing = [j for j in actuated_joints(law, system) if j not in listed]
    if missing:
        raise ModelError(f"the law actuates {missing} but 'joints' {list(joints or [])} does not list "
                         f"{'it' if len(missing) == 1 else 'them'}: the torque would be dropped (add "
                         "them to 'joints' and to the effort controller, or use a passive-joint law)")

CONTROLLER_NODE = tuple(replace(p, read_only=False) if p.name == "joints" else p for p in MODEL_IO) + (
    RAW_MESSAGES,
    BEST_EFFORT_INPUTS,
    Param("joint_states_queue", 1, "subscription depth; 1 acts on the freshest state only (no backlog, and a "
          "lock-step plant's re-sent state is not answered twice), but the middleware then drops a burst unseen: "
          "a depth of at least the burst length counts every bad message; 1 to 1000",
          queue_depth("joint_states_queue")),
    STAMP_FUTURE_TOLERANCE,
    Param("publish_stamped_command", True, "publish ~/command_stamped (τ with joint names and the state's stamp) "
          "while it has a subscriber"),
    Param("velocity_observer_hz", 0.0, "bandwidth [Hz] of the model-based q̇ observer (qv_dynamics.observer: "
          "constrained-dynamics prediction under the last command, corrected by the measured q̇); 0: the law "
          "reads the measured q̇ as is; at most 1000 Hz", bounded("velocity_observer_hz", 0.0, 1000.0, "Hz")),
    Param("command_delay", AUTO, "latency compensation: time [s] from a state's stamp until the command computed "
          "from it acts; the law answers the state predicted at that time from the constrained dynamics under the "
          "command acting until then (qv_control.latency). -1: one update period measured from the /joint_states "
          "stamps (ros2_control hardware: a topic-based controller's command is written in the cycle after the one "
          "that read the state), and 0 while the states' effort reports the last command as applied (a simulator that "
          "applies each command at once; decided per 64 states); "
          "0: none (a lock-step plant applies each command from the state it answers); at "
          f"most {MAX_HORIZON:g} s (the prediction extrapolates: a longer horizon is not a prediction)",
          command_delay_check, read_only=False),
    Param("law", "", f"law name for qv_control.make_law ({', '.join(LAWS)}; qv_legged_controller_node: default "
          "legged)",
          read_only=False),
    Param("watchdog_timeout", 0.1, "no valid /joint_states for this long [s] -> safe output; at most "
          f"{MAX_WATCHDOG_TIMEOUT:g} s (the watchdog cannot be turned off)",
          bounded("watchdog_timeout", 0.0, MAX_WATCHDOG_TIMEOUT, low_open=True), read_only=False),
    Param("watchdog_period", 0.02, "period of the watchdog and of the safe output [s]; at most watchdog_timeout "
          "(a longer period is no watchdog)", bounded("watchdog_period", 0.0, MAX_WATCHDOG_TIMEOUT, low_open=True)),
    Param("safe_mode", "zero", "safe output (qv_control.safe_output): zero effort, gravity τ = g(q_last), or hold (the "
          "damped joint hold about the pose latched at the episode's start); a contact task always uses hold",
          one_of("safe_mode", SAFE_MODES), read_only=False),
    Param("theta_desired", None, "constant θ_d (one value per law coordinate) until a ~/reference trajectory arrives",
          finite_list("theta_desired"), read_only=False),
    Param("lambda_desired", None, "λ_d, one value per active constraint row (sizes checked against the model)",
          finite_list("lambda_desired"), read_only=False),
    Param("wrench_topics", None, "geometry_msgs/WrenchStamped topics measuring λ, paired with wrench_constraints",
          topic_name("wrench_topics")),
    Param("wrench_constraints", None, "constraint names measured by wrench_topics"),
    WRENCH_SIGN,
    Param("odom_topic", "", "nav_msgs/Odometry of the model's free-flyer joint 1 (floating base or held object)",
          topic_name("odom_topic", optional=True)),
    Param("sync_tolerance", 5e-4, "largest stamp difference between a joint state and its odometry [s]; at most "
          "0.1 s", bounded("sync_tolerance", 0.0, 0.1, low_open=True)),
    Param("reference.times", None, "spline reference: knot times [s] from the first valid state",
          finite_list("reference.times")),
    Param("reference.waypoints", None, "spline reference: len(times) × k values, row-major",
          finite_list("reference.waypoints")),
    Param("reference.kind", "quintic", "spline reference: quintic or cubic", one_of("reference.kind",
                                                                                     ("quintic", "cubic"))),
) + LIFECYCLE_PARAMS + TASK_PARAMS


def make_predictor(system, command_delay: float):
    """The node's :class:`~qv_control.latency.StatePredictor` for ``command_delay`` (None for 0: none)."""
    return StatePredictor(system, float(command_delay)) if command_delay != 0 else None


def make_node_law(name: str, system, **params):
    """:func:`qv_control.make_law` for a node: a bad parameter set is a ModelError naming the law."""
    try:
        return make_law(name, system, **params)
    except QVError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise ModelError(f"law '{name}' with parameters {params}: {exc}") from None


def law_theta_names(law, default: list[str]) -> list[str]:
    """Names of the law's minimal coordinates θ (for JointTrajectory.joint_names)."""
    for attr in ("theta_names", "coordinate_names"):
        names = getattr(law, attr, None)
        if names:
            return list(names)
    coords = getattr(law, "coords", None) or getattr(law, "coordinates", None)
    names = getattr(coords, "labels", None) or getattr(coords, "names", None)
    return list(names) if names else list(default)


class ControllerParameters:
    """The parameter behaviour of :class:`~qv_control.ros.controller_node.ControllerNode`: the law built from
    ``law`` + ``law_params.*``, an on-set callback that only validates, a post-set callback that applies."""

    def _declare_law_params(self, overrides) -> list[str]:
        names = []
        for prm in overrides:
            if prm.name.startswith(LAW_PREFIX) and not self.has_parameter(prm.name):
                self.declare_parameter(prm.name, prm.value, ParameterDescriptor(dynamic_typing=True))
                names.append(prm.name)
        return names

    def _law_params(self, overrides: dict | None = None) -> dict:
        out = {}
        for full in self._law_param_names:
            out[full[len(LAW_PREFIX):]] = self.get_parameter(full).value
        for full, val in (overrides or {}).items():
            out[full[len(LAW_PREFIX):]] = val
        out = {k: as_list(v) for k, v in out.items()}
        return {k: (np.asarray(v, float) if isinstance(v, (list, tuple)) and v and
                    all(isinstance(x, (int, float)) for x in v) else v) for k, v in out.items()}

    def check_theta_d(self, law, value) -> np.ndarray | None:
        """θ_d with one value per coordinate of ``law`` (DimensionError naming them); a law without minimal
        coordinates (the impedance baseline) checks its reference itself."""
        if getattr(law, "coords", None) is None:
            return None if value is None else labelled_vector("theta_desired", value, ["θ"] * int(np.size(value)))
        return labelled_vector("theta_desired", value, law_theta_names(law, self.layout.names))

    def _opt_array(self, name: str) -> np.ndarray | None:
        v = self.get_parameter(name).value
        if v is None or (isinstance(v, (list, tuple)) and not v):
            return None
        arr = np.asarray(v, float).ravel()
        if not np.all(np.isfinite(arr)):
            raise ModelError(f"parameter '{name}' has non-finite entries")
        return arr

    def _spline_from_params(self):
        """θ_d(t) from ``reference.times`` + ``reference.waypoints`` (row-major, len(times) × k) with
        ``reference.kind`` (quintic | cubic); t counts from the first valid /joint_states."""
        times = self._opt_array("reference.times")
        wps = self._opt_array("reference.waypoints")
        if times is None and wps is None:
            return None
        if times is None or wps is None or wps.size % times.size:
            raise ModelError("reference.times (T values) and reference.waypoints (T × k values, row-major) "
                             "must be given together")
        from ..references import SplineReference

        return SplineReference(times, wps.reshape(times.size, -1), kind=self.get_parameter("reference.kind").value,
                               coordinates=getattr(self.law, "coords", None) or getattr(self.law, "coordinates", None))

    def _make_task_layer(self, task):
        """The contact task layer from an in-process ``task`` or the ``task.*`` parameters (None: no task)."""
        gp = self.get_parameter
        if task is None and not gp("task.enabled").value:
            return None
        from .task_layer import TaskLayer

        opts = {"ft_filter_hz": gp("task.ft_filter_hz").value, "ft_timeout": gp("task.ft_timeout").value}
        if task is None:
            from .task_params import task_from_parameters

            task, task_law, frame, g = task_from_parameters(self)
            opts["autostart"] = bool(g["autostart"])
        else:
            task, task_law, frame = task
        return TaskLayer(self, task, task_law, frame, **opts)

    def _command_map(self, joints) -> CommandMap:
        """The effort command order; UnknownNameError with the model's joint names."""
        joints = [j for j in joints if j] if isinstance(joints, (list, tuple)) else []
        if not joints:
            raise UnknownNameError("parameter 'joints' is required: the joints of the effort controller, in its order")
        return CommandMap(self.system, joints)

    def _build_law(self, law_changes: dict | None = None, name: str | None = None):
        """The law from ``law`` + ``law_params.*`` (current values, overridden by ``law_changes``)."""
        name = self.get_parameter("law").value if name is None else name
        if not name:
            raise ModelError("parameter 'law' is required (a law name of qv_control.make_law)")
        return make_node_law(name, self.system, **self._law_params(law_changes))

    def validate_parameters(self, params) -> SetParametersResult:
        """On-set callback: validate a change as a whole (table checks, the joints, the law it would build).
        Nothing is applied here: :meth:`apply_parameters` does that once every value is accepted."""
        new = {prm.name: prm.value for prm in params}
        try:
            layer = getattr(self, "task_layer", None)
            refusal = layer.parameter_refusal(new) if layer is not None else None
            if refusal:      # the task owns the force, motion, law and reference (task_layer)
                raise ModelError(refusal)
            validate(CONTROLLER_NODE, new, CONTROLLER_RULES,
                     {n: self.get_parameter(n).value for r in CONTROLLER_RULES for n in r.names})
            joints = new.get("joints", self.get_parameter("joints").value)
            if "joints" in new:
                self._command_map(new["joints"])
            law_changes = {k: v for k, v in new.items() if k.startswith(LAW_PREFIX)}
            law = self.law
            if "law" in new or law_changes:
                if self._injected_law and "law" not in new:
                    raise ModelError("this node's law was passed in-process; set 'law' to rebuild it from parameters")
                law = self._build_law(law_changes, new.get("law"))
            if "joints" in new or law is not self.law:
                check_joints_cover(law, self.system, joints)
            # sizes against the (possibly new) law's coordinates and the active constraint rows
            self.check_theta_d(law, new.get("theta_desired", self.get_parameter("theta_desired").value))
            labelled_vector("lambda_desired", new.get("lambda_desired", self.get_parameter("lambda_desired").value),
                            self.system.row_labels)
        except (QVError, TypeError, ValueError) as exc:
            self.get_logger().warning(f"parameter change refused: {exc}")
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def apply_parameters(self, params) -> None:
        """Post-set callback: apply an accepted change (the parameter values are already set)."""
        new = {prm.name: prm.value for prm in params}
        law_changes = [k for k in new if k.startswith(LAW_PREFIX)]
        for k in law_changes:
            if k not in self._law_param_names:
                self._law_param_names.append(k)
        if "joints" in new:
            self.cmd_map = self._command_map(new["joints"])
        if "law" in new or law_changes:
            self.law = self._build_law()
            self._injected_law = False
            self.theta_names = law_theta_names(self.law, self.layout.names)
        if "watchdog_timeout" in new:
            self.watchdog_timeout = float(new["watchdog_timeout"])
        if "safe_mode" in new:
            self.safe_mode = new["safe_mode"]
        if "command_delay" in new:
            self.predictor = make_predictor(self.system, new["command_delay"])
        if "stamp_future_tolerance" in new:
            self.stamps.future_tolerance = float(new["stamp_future_tolerance"])
        if "theta_desired" in new or "law" in new or law_changes:
            self.theta_d = self.check_theta_d(self.law, self.get_parameter("theta_desired").value)
        if "lambda_desired" in new:
            self.lambda_d = labelled_vector("lambda_desired", new["lambda_desired"], self.system.row_labels)
        self.get_logger().info(f"parameters changed: {sorted(new)}")


# checks across parameters, at start and on every change (qv_dynamics.ros.params.Rule)
CONTROLLER_RULES = (at_most("watchdog_period", "watchdog_timeout"),)

NODE_TABLES = (("qv_controller_node", CONTROLLER_NODE),)  # qv_legged_controller_node: the same table
