"""``task.*`` parameters of ``qv_controller_node``: the contact task of :mod:`qv_control.task` described in the
parameters file, declared as data and checked at start (:func:`task_from_parameters`): every value finite
and in its range where it is declared, and consistent with the others (:mod:`qv_control.task.limits`:
``contact_off`` < ``contact_on`` < ``force``, force steps within the limit, ``peak_ratio`` below
``force_limit``, the trace's speed bounded) before the node starts.

A task whose targets (start pose, trace) the tool cannot reach with its start orientation, or whose largest
force would need more than the effort limits, is refused at start (:class:`~qv_control.task.TaskRefused`:
one line, exit 2). ``task.stiffness`` > 0 plans the touch-down speed from the contact inertia at
``task.start_q`` (:func:`qv_control.task.touch_speed`); measure it once with
:func:`qv_control.task.stiffness_from_press`.
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.errors import ModelError
from qv_dynamics.ros.params import Param, bounded, finite_list, one_of

from ..task import KINDS, ContactTask, ContactTaskConfig, TaskLaw, TaskLawSettings, check_task, contact_inertia
from ..task import touch_speed as plan_touch_speed
from ..task.limits import LAW_RANGES, RANGES, UNITS, check_force_limit, check_peak_ratio, check_release_at, in_range

P = "task."


def ranged(name: str):
    """The per-value check of ``task.<name>``: its range in :data:`qv_control.task.limits.RANGES` (the
    task's own fields) or :data:`~qv_control.task.limits.LAW_RANGES` (the plan and the law)."""
    low, high, low_open = RANGES[name] if name in RANGES else LAW_RANGES[name]

    def check(v) -> None:
        in_range(P + name, v, low, high, low_open, UNITS.get(name, "s"))
    return check


def _kf(v) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
        raise ModelError(f"{P}kf must be a number in [0, 1) (a force PI gain of 1 or more amplifies the force "
                         f"error), got {v!r}")


TASK_PARAMS = (
    Param(P + "enabled", False, "run the contact task (qv_control.task) in this node"),
    Param(P + "controller", "qv", f"task law: {', '.join(KINDS)}", one_of(P + "controller", KINDS)),
    Param(P + "frame", "", "tool frame (the constraint's frame)"),
    Param(P + "contact", "contact", "the switchable surface constraint of the model"),
    Param(P + "redundancy_joint", "", "joint added to θ of the qv law (7-DoF arms; empty for 6-DoF)"),
    Param(P + "start_q", None, "configuration the task starts from (targets and Λ_c are checked there)",
          finite_list(P + "start_q")),
    Param(P + "autostart", False, "start the timed task once the loop runs steadily after activation "
          "(start_steady_states; else ~/start or ~/touch_down)"),
    Param(P + "start_tolerance", 0.1, "activation is refused when the measured pose is further than this from "
          "start_q at any joint [rad]; within it the node moves to start_q first (qv_control.ros.lifecycle); in "
          "(0, 1]", bounded(P + "start_tolerance", 0.0, 1.0, unit="rad", low_open=True)),
    Param(P + "surface_height", 0.0, "z of the tool point at touch-down, as believed [m]", ranged("surface_height")),
    Param(P + "force", 10.0, "commanded normal force [N]", ranged("force")),
    Param(P + "force_steps", None, "force steps after the first touch: flat [τ1, F1, τ2, F2, ...] [s, N]",
          finite_list(P + "force_steps")),
    Param(P + "step_ramp", 0.0, "duration of each force step [s] (0: a true step)", ranged("step_ramp")),
    Param(P + "ramp", 0.15, "force ramp from the measured touch force [s]", ranged("ramp")),
    Param(P + "approach_speed", 0.01, "cruise speed of the descent [m/s] (a gap too short to reach it and brake to "
          "the touch-down speed: a triangular descent)", ranged("approach_speed")),
    Param(P + "stiffness", 0.0, "surface stiffness [N/m] for the planned touch-down speed (0: not planned)",
          ranged("stiffness")),
    Param(P + "damping_factor", 2.0, "c of the impact peak c·v√(kΛ_c): 1 lightly, 2 critically damped",
          ranged("damping_factor")),
    Param(P + "peak_ratio", 1.5, "touch-down peak the plan allows, × force (1, task.force_limit)",
          ranged("peak_ratio")),
    Param(P + "height_uncertainty", 0.005, "the surface may be this much higher than told [m]",
          ranged("height_uncertainty")),
    Param(P + "approach_window", 3.0, "no touch-down this long after the descent starts (on the descent's clock: "
          "late states do not count; at most twice this on the states' clock) -> safe hold [s]",
          ranged("approach_window")),
    Param(P + "hold", 0.1, "wait at the start pose before the descent [s]", ranged("hold")),
    Param(P + "contact_on", 2.0, "normal force declaring contact [N]", ranged("contact_on")),
    Param(P + "contact_off", 0.5, "normal force below which contact is lost [N]", ranged("contact_off")),
    Param(P + "contact_off_time", 0.003, "... for this long [s]", ranged("contact_off_time")),
    Param(P + "trace", "circle", "circle | waypoints | none", one_of(P + "trace", ("circle", "waypoints", "none"))),
    Param(P + "settle", 0.35, "from the first touch to the start of the trace [s]", ranged("settle")),
    Param(P + "radius", 0.04, "circle radius [m]", ranged("radius")),
    Param(P + "period", 4.0, "circle period [s]", ranged("period")),
    Param(P + "circle_ramp", 0.6, "circle speed ramp [s]", ranged("circle_ramp")),
    Param(P + "waypoints", None, "trace waypoints on the surface: flat [x1, y1, x2, y2, ...] (world) [m]",
          finite_list(P + "waypoints")),
    Param(P + "segment_time", 1.0, "duration of each waypoint segment [s]", ranged("segment_time")),
    Param(P + "release_at", -1.0, "release this long after the first touch [s] (< 0: after the waypoint trace, "
          "or on ~/lift_off)", check_release_at),
    Param(P + "release_ramp", 0.15, "force ramp to zero at the release [s]", ranged("release_ramp")),
    Param(P + "lift", 0.4, "lift after the release [s]", ranged("lift")),
    Param(P + "lift_speed", 0.01, "lift speed [m/s]", ranged("lift_speed")),
    Param(P + "force_limit", 3.0, "measured normal force above this × the largest force commanded over the last "
          "0.3 s -> safe hold, counted (0: no limit)", check_force_limit),
    Param(P + "retract", 0.003, "the safe hold lifts the tool this far above its last measured height [m]",
          ranged("retract")),
    Param(P + "kp", 60.0, "motion bandwidth k_p [1/s] (qv, osc)", ranged("kp")),
    Param(P + "kd", 120.0, "damping bandwidth k_d [1/s] (qv, osc)", ranged("kd")),
    Param(P + "kf", 0.3, "force PI proportional gain in [0, 1)", _kf),
    Param(P + "ki", 30.0, "force PI integral gain [1/s]", ranged("ki")),
    Param(P + "ki_motion", 0.0, "motion integral gain [1/s²] (qv, osc)", ranged("ki_motion")),
    Param(P + "friction_compensation", "", "'' (off), measured (μ from the F/T) or model (task.friction_mu)",
          one_of(P + "friction_compensation", ("", "measured", "model"))),
    Param(P + "friction_mu", 0.0, "μ (model) or the prior of the estimate (measured)", ranged("friction_mu")),
    Param(P + "ft_filter_hz", 0.0, "first-order low-pass of the measured normal force [Hz] (0: none)",
          ranged("ft_filter_hz")),
    Param(P + "ft_timeout", 0.05, "F/T silent this long in contact -> safe output, hold, counted [s]; at most "
          "10 s", ranged("ft_timeout")),
)


def _pairs(v, name: str) -> list:
    vals = [] if v is None else list(v)
    if len(vals) % 2:
        raise ModelError(f"{P}{name} needs pairs of values, got {len(vals)} values")
    return [(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]


def task_from_parameters(node):
    """(ContactTask, TaskLaw, frame) from the node's ``task.*`` parameters, checked (module doc)."""
    g = {p.name[len(P):]: node.get_parameter(p.name).value for p in TASK_PARAMS}
    system = node.system
    if not g["frame"]:
        raise ModelError(f"{P}frame is required with {P}enabled")
    if g["start_q"] is None:
        raise ModelError(f"{P}start_q is required with {P}enabled (the configuration the task starts from)")
    check_peak_ratio(g["peak_ratio"], g["force_limit"])
    q0 = system.check_q(np.asarray(g["start_q"], float))
    oMf = system.frame_placement(q0, g["frame"])
    p0, R0 = oMf.translation.copy(), oMf.rotation.copy()
    v_touch = None
    if g["stiffness"] > 0:
        v_touch = plan_touch_speed(g["force"], contact_inertia(system, q0, g["frame"]), g["stiffness"],
                                   g["peak_ratio"], g["damping_factor"])
    cfg = ContactTaskConfig(
        contact=g["contact"], surface_height=g["surface_height"], force=g["force"],
        force_steps=_pairs(g["force_steps"], "force_steps"), step_ramp=g["step_ramp"], ramp=g["ramp"],
        approach_speed=g["approach_speed"], touch_speed=v_touch, height_uncertainty=g["height_uncertainty"],
        approach_window=g["approach_window"], hold=g["hold"], contact_on=g["contact_on"],
        contact_off=g["contact_off"], contact_off_time=g["contact_off_time"], trace=g["trace"], settle=g["settle"],
        radius=g["radius"], period=g["period"], circle_ramp=g["circle_ramp"],
        waypoints=_pairs(g["waypoints"], "waypoints"), segment_time=g["segment_time"],
        release_at=None if g["release_at"] < 0 else g["release_at"], release_ramp=g["release_ramp"], lift=g["lift"],
        lift_speed=g["lift_speed"], force_limit=g["force_limit"], retract=g["retract"])
    task = ContactTask(cfg, system, p0)
    check_task(system, q0, g["frame"], R0, task.targets(), task.force.max_force)
    friction = None
    if g["friction_compensation"]:
        friction = {"mode": g["friction_compensation"], "mu": g["friction_mu"], "direction": "reference",
                    "direction_hz": 5.0}
    settings = TaskLawSettings(kp=g["kp"], kd=g["kd"], kf=g["kf"], ki=g["ki"], ki_motion=g["ki_motion"])
    law = TaskLaw(g["controller"], system, g["frame"], g["contact"], q0, R0, g["redundancy_joint"], settings, friction)
    return task, law, g["frame"], g


__all__ = ["TASK_PARAMS", "task_from_parameters"]
