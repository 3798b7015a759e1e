"""``qv_controller_node``: a hybrid force/motion law of :mod:`qv_control` behind ros2_control topics (SPEC §5).

Thin adapter: /joint_states -> :class:`~qv_dynamics.state.State`, references -> :class:`Reference`,
``law.compute(state, reference)`` -> τ -> ``/<controller_name>/commands`` (std_msgs/Float64MultiArray in
the order of ``joints``: the contract of ``forward_command_controller`` with ``interface_name: effort``
and of ``effort_controllers/JointGroupEffortController``, deprecated upstream in favour of it).

Topics
  in  ``joint_states_topic`` (default ``/joint_states``), sensor_msgs/JointState, name-mapped
  in  ``~/reference`` trajectory_msgs/JointTrajectory: θ_d(t) (+θ̇_d, θ̈_d), names = the law's coordinates
  in  ``~/lambda_desired`` std_msgs/Float64MultiArray: λ_d, one value per active constraint row in the
      order printed at start (or named by ``layout.dim[0].label`` = "row1,row2,...")
  in  ``wrench_topics`` geometry_msgs/WrenchStamped (optional, paired with ``wrench_constraints``):
      measured λ for the laws' force integral terms
  in  ``odom_topic`` nav_msgs/Odometry (optional): the pose (world) and twist (body frame) of the model's
      free-flyer joint 1 — a floating base or a held object; a command is computed when a joint state and
      an odometry with stamps within ``sync_tolerance`` have both arrived
  out ``/<controller_name>/commands`` (or ``command_topic``) std_msgs/Float64MultiArray
  out ``~/command_stamped`` sensor_msgs/JointState: the same τ (``effort``) with the joint names and the
      stamp of the state it answers (plotting, latency measurement); ``publish_stamped_command``; sent
      only while a subscriber is matched (each message costs the 1 kHz path a publish)
  out ``/diagnostics`` diagnostic_msgs/DiagnosticArray (counts, watchdog episodes, compute time)
  task layer (optional, ``task.*`` parameters, :mod:`.task_layer`): services ``~/start``, ``~/touch_down``,
      ``~/lift_off``, ``~/hold``, ``~/reset`` (std_srvs/Trigger); out ``~/phase``, ``~/active_constraints``
      (std_msgs/String); while it runs, the inputs that would change its force, motion, law or reference
      (λ_d, θ_d, ``~/reference``, ``law``, ``law_params.*``) are refused and counted

Safety (SPEC §6): a stale /joint_states (no valid message for ``watchdog_timeout`` s, wall clock) makes
the node publish the safe output (:mod:`.safe_hold`) every ``watchdog_period`` s, with one log line per
episode; so does a law that fails to compute; NaN/Inf or wrong-sized messages are dropped and counted;
parameters are validated at start (unknown joint -> refused with the reason) and on change.
"""
from __future__ import annotations

import math
import os
import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.clock import Clock, ClockType
from rclpy.lifecycle import LifecycleNode
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from qv_dynamics.errors import QVError
from qv_dynamics.ros.free_body import FreeBodySync
from qv_dynamics.ros.health import EpisodeCounter, reject_kind
from qv_dynamics.ros.messages import JointLayout, lambda_desired_from_message
from qv_dynamics.ros.params import declare, node_model_config, validate
from qv_dynamics.ros.params_file import named_path, resolve_config_path
from qv_dynamics.ros.stamps import StampGate
from qv_dynamics.state import Reference, State

from .controller_report import ControllerReport
from .lifecycle import ManagedController
from .measurements import Measurements
from .outputs import CommandOutput
from .params import (
    CONTROLLER_NODE,
    CONTROLLER_RULES,
    LAW_PREFIX,
    ControllerParameters,
    check_joints_cover,
    law_theta_names,
    make_predictor,
)
from .safe_hold import SafeHoldMixin
from .sizes import labelled_vector
from .trajectory import JointTrajectoryReference

DUPLICATE_WINDOW = 0.25  # [s] the last answered stamp again within this is not answered (< lockstep_resend 0.5 s)
CPU_SAMPLE = 16          # the law's thread CPU time is sampled every this many commands (a clock read costs ~0.5 µs)


class ControllerNode(ControllerParameters, Measurements, SafeHoldMixin, ControllerReport, ManagedController,
                     LifecycleNode):
    """Event-driven: one effort command per valid /joint_states message while active (:mod:`.lifecycle`)."""

    def __init__(self, node_name: str = "qv_controller", *, system=None, law=None, reference=None, task=None,
                 **node_kwargs):
        """``system``/``law`` may be passed in-process (bringup, tests); otherwise they are built from the
        parameters ``model_config``/``robot_description`` and ``law`` + ``law_params.*``. ``reference`` is an
        optional callable t -> Reference used until a reference topic message arrives. ``task``: a
        (ContactTask, TaskLaw, frame) run by the task layer (:mod:`.task_layer`); else ``task.*`` parameters.
        Unless ``managed``, the node configures here (a bad configuration raises) and activates at its first
        valid state (:mod:`.lifecycle`)."""
        node_kwargs.setdefault("automatically_declare_parameters_from_overrides", False)
        super().__init__(node_name, **node_kwargs)
        declare(self, CONTROLLER_NODE, prefixes=(LAW_PREFIX,), rules=CONTROLLER_RULES)
        # law_params.* from a params file (--params-file) or in-process overrides, e.g. law_params.kp
        overrides = list(getattr(self, "_parameter_overrides", {}).values()) or \
            list(node_kwargs.get("parameter_overrides") or [])
        self._law_param_names = self._declare_law_params(overrides)
        self.task_layer = None
        self._init_lifecycle({"system": system, "law": law, "reference": reference, "task": task})

    def prepare_configure(self) -> None:
        """A managed node waiting for its configure (:mod:`.lifecycle`): the model and law built once from the
        parameters as they are now and dropped, which loads numba and the law's compiled kernels into the
        process (most of a configure's time, the same for any later parameters); configure then builds its law
        from the parameters as they are when it runs, and takes the model built here when the parameters naming it
        (:meth:`_model_key`) are unchanged. Nothing is created, refused or reported here: a model or law that
        cannot be built is configure's to refuse."""
        if any(self._injected_objects.get(k) is not None for k in ("system", "law")):
            return                                  # in-process objects: nothing to load
        gp, t0 = self.get_parameter, time.monotonic()
        try:
            key = self._model_key()
            self.system, _ = node_model_config(self, floating=bool(gp("odom_topic").value))
            self._prepared_model = (key, self.system)   # configure takes it while its parameters are these
            self._build_law()
        except Exception:  # noqa: BLE001 - configure builds them again and says why they cannot be
            return
        finally:
            self.__dict__.pop("system", None)
        self.get_logger().info(f"unconfigured (managed): the law's compiled kernels loaded in "
                               f"{time.monotonic() - t0:.2f} s; waiting for configure (~/change_state)")

    def _model_key(self) -> tuple:
        """What the model is built from: the parameters naming it and the files they name as they are now (a
        changed file builds it again)."""
        gp = self.get_parameter
        path, base = named_path(self, "model_config")
        try:
            found = resolve_config_path(path, base) if path else ""
            stamp = os.stat(found).st_mtime_ns if found else 0
        except (OSError, QVError):
            found, stamp = path, None
        return gp("robot_description").value, bool(gp("odom_topic").value), path, base, found, stamp

    def configure_core(self, system=None, law=None, reference=None, task=None) -> None:
        """The configure transition (:mod:`.lifecycle`): model, law, task, topics, timers, callbacks."""
        gp = self.get_parameter
        validate(CONTROLLER_NODE, {p.name: gp(p.name).value for p in CONTROLLER_NODE})  # as set while unconfigured
        odom_topic = gp("odom_topic").value
        prepared, self._prepared_model = getattr(self, "_prepared_model", None), None
        if system is None and prepared is not None and prepared[0] == self._model_key():
            system = prepared[1]                     # built while unconfigured from the same parameters
        if system is None:
            system, _ = node_model_config(self, floating=bool(odom_topic))
        self.system = system
        self.layout = JointLayout.from_system(system, floating=bool(odom_topic))
        self.cmd_map = self._command_map(gp("joints").value)
        self.watchdog_timeout = float(gp("watchdog_timeout").value)
        self.safe_mode = gp("safe_mode").value
        self.task_layer = self._make_task_layer(task)
        if self.task_layer is not None:
            law, reference = self.task_layer.task_law.law, self.task_layer.reference
        self._injected_law = law is not None
        self.law = law if law is not None else self._build_law()
        check_joints_cover(self.law, system, self.cmd_map.joints)  # no actuated joint's torque dropped
        self.theta_names = law_theta_names(self.law, self.layout.names)
        # an injected reference sees the states' time as is (like simulate); the parameter spline counts
        # from the first valid state (wall-clock stamps on hardware)
        self.reference_fn = reference if reference is not None else self._spline_from_params()
        self._ref_relative = reference is None and self.reference_fn is not None
        self.t_first: float | None = None
        self.traj: JointTrajectoryReference | None = None
        # sizes checked where they enter: one θ_d per law coordinate, one λ_d per active constraint row
        self.theta_d = self.check_theta_d(self.law, gp("theta_desired").value)
        self.lambda_d = labelled_vector("lambda_desired", gp("lambda_desired").value, system.row_labels)
        self.stamps = StampGate(gp("stamp_future_tolerance").value)
        self.rejects = {k: EpisodeCounter(self.get_logger(), k) for k in
                        ("joint_states", "reference", "lambda_desired", "wrench", "law", "odometry", "odometry_sync")}
        self.free_body = FreeBodySync(system, gp("sync_tolerance").value, self.rejects["odometry_sync"]) \
            if odom_topic else None  # a free body (floating base, held object) from Odometry, paired by stamp
        self.q_last: np.ndarray | None = None
        hz = float(gp("velocity_observer_hz").value)   # q̇ for the law: measured, or the model-based observer's
        self.observer = None
        if hz > 0:
            from qv_dynamics.observer import VelocityObserver  # (imported only when used)

            self.observer = VelocityObserver(system, hz)
        self._tau_sent = np.zeros(system.nv)             # the observer's input: the last command sent
        # latency compensation: the law answers the state at the time its command acts (command_delay)
        self.predictor = make_predictor(system, gp("command_delay").value)
        self.last_rx: float | None = None
        self.stale = False
        self._answered = (None, 0.0)  # (stamp, wall time) of the last state answered
        self.stats = {"commands": 0, "duplicates": 0, "safe_commands": 0, "watchdog_episodes": 0,
                      "compute_ms_max": 0.0, "compute_ms_sum": 0.0, "compute_cpu_ms_sum": 0.0, "compute_cpu_samples": 0}
        self.pub_cmd = self.create_publisher(Float64MultiArray, self._command_topic(), 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self.pub_stamped = self.create_publisher(JointState, "~/command_stamped", 10) \
            if gp("publish_stamped_command").value else None
        self._raw, self._out = bool(gp("raw_messages").value), None
        self._subscribe_measurements(odom_topic)
        self.create_subscription(JointTrajectory, "~/reference", self.on_reference, 10)
        self.create_subscription(Float64MultiArray, "~/lambda_desired", self.on_lambda_desired, 10)
        # steady clock: the watchdog must fire even when (simulated) ROS time stands still
        self.watchdog_timer = self.create_timer(float(gp("watchdog_period").value), self.on_watchdog,
                                                clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.create_timer(1.0, self.publish_diagnostics)
        self.add_on_set_parameters_callback(self.validate_parameters)
        self.add_post_set_parameters_callback(self.apply_parameters)
        self.get_logger().info(
            f"law '{type(self.law).__name__}' on '{system.name}': commands {self.cmd_map.joints} -> "
            f"{self.pub_cmd.topic_name}; θ coordinates {self.theta_names}; λ rows {system.row_labels}; "
            f"watchdog {self.watchdog_timeout} s -> {self.safe_mode}")

    # ------------------------------------------------------------------ parameters
    def _str_list(self, name: str) -> list[str]:
        v = self.get_parameter(name).value
        return [s for s in (v or []) if s]

    def _command_topic(self) -> str:
        topic = self.get_parameter("command_topic").value
        return topic or f"/{self.get_parameter('controller_name').value}/commands"

    # ------------------------------------------------------------------ inputs
    def on_reference(self, msg: JointTrajectory) -> None:
        if self.task_layer is not None:
            self.task_layer.refuse_input("reference")
            return
        try:
            now = self.get_clock().now().nanoseconds * 1e-9
            self.traj = JointTrajectoryReference(msg, self.theta_names, now)
            self.rejects["reference"].ok()
        except QVError as exc:
            self.rejects["reference"].reject(reject_kind(exc), str(exc))

    def on_lambda_desired(self, msg: Float64MultiArray) -> None:
        if self.task_layer is not None:
            self.task_layer.refuse_input("lambda_desired")
            return
        try:
            self.lambda_d = lambda_desired_from_message(msg, self.system.row_labels)
            self.rejects["lambda_desired"].ok()
        except QVError as exc:
            self.rejects["lambda_desired"].reject(reject_kind(exc), str(exc))

    def reference_at(self, t: float) -> Reference:
        """The reference at ``t``: θ_d from ``~/reference`` (else ``theta_desired``, else the reference
        function), λ_d from ``lambda_desired`` (else the function's), the start move added (:mod:`.lifecycle`);
        one Reference built, the function's own returned when nothing replaces a field of it."""
        theta = thd = thdd = None
        if self.traj is not None:
            theta, thd, thdd = self.traj.sample(t)
        elif self.theta_d is not None:
            theta = self.theta_d
        lam = self.lambda_d if self.lambda_d is not None and self.lambda_d_fits() else None
        if self.reference_fn is not None and (theta is None or lam is None):
            ref = self.reference_fn(t - (self.t_first or 0.0) if self._ref_relative else t)
            if theta is None and lam is None:
                return self.blended(t, ref)
            if theta is None:
                theta, thd, thdd = ref.theta, ref.theta_dot, ref.theta_ddot
            else:
                lam = ref.lambda_
        return self.blended(t, Reference(theta=theta, theta_dot=thd, theta_ddot=thdd, lambda_=lam))

    def _control(self, t: float, q: np.ndarray, qdot: np.ndarray, stamp: tuple, effort: np.ndarray | None = None
                 ) -> None:
        """One command for the state (t, q, q̇) stamped ``stamp`` (sec, nanosec); ``effort``: what the plant
        reports it applied."""
        self.last_rx = now = time.monotonic()
        if t == self._answered[0] and now - self._answered[1] < DUPLICATE_WINDOW:
            # the same state again soon after its answer (a lock-step plant's re-send crossing a slow answer,
            # a plant repeating its state while it waits): a second answer would be a second step with it
            self.stats["duplicates"] += 1
            return
        self.q_last = q
        if not self.active and not self.on_inactive_state(t):   # inactive: kept, not answered (.lifecycle)
            return
        if self.stale:
            self.stale = False
            self.get_logger().info("joint_states resumed: control law active again")
        if self.t_first is None:
            self.t_first = t
        st, v_meas = self.stats, qdot
        self.wrenches.forget()       # one kinematics pass at q for the task layer and the measured λ
        self.on_active_state(t, q)   # the move's anchor, the steady loop, the task's start (.lifecycle)
        if self.task_layer is not None and not self.task_layer.step(t, q):
            self.publish_safe(qdot)
            return
        # the control computation (observer, latency prediction, reference, law) is timed: wall time every
        # command, the thread's CPU time every CPU_SAMPLE-th
        sample = not st["commands"] % CPU_SAMPLE
        try:
            lam, t_act = self.wrenches.rows(q), t
            t0, c0 = time.perf_counter(), time.thread_time() if sample else 0.0
            if self.observer is not None:
                qdot = self.observer.update(t, q, qdot, self._tau_sent)
            if self.predictor is not None:  # τ held until ours acts: the last sent (unknown before the first)
                held = self._tau_sent if st["commands"] or st["safe_commands"] else None
                t_act, q, qdot = self.predictor.predict(t, q, qdot, held, effort)
            tau = self.law.compute(State(t=t_act, q=q, qdot=qdot, lambda_meas=lam), self.reference_at(t_act))
            tau = np.asarray(tau, float)
            if tau.shape != (self.system.nv,) or not (math.isfinite(tau.dot(tau)) or np.all(np.isfinite(tau))):
                raise QVError(f"law returned {tau.shape} / non-finite torque")
        except Exception as exc:  # noqa: BLE001 - never crash the node (SPEC §6): count, log once, safe output
            self.rejects["law"].reject(reject_kind(exc), str(exc))
            self.law_failed(t, str(exc), v_meas)
            return
        self.rejects["law"].ok()
        self.law_ok()
        self._tau_sent = tau
        dt = 1e3 * (time.perf_counter() - t0)
        if sample:   # wall time minus this thread's CPU time: time the thread was descheduled
            st["compute_cpu_ms_sum"] += 1e3 * (time.thread_time() - c0)
            st["compute_cpu_samples"] += 1
        st["compute_ms_sum"] += dt
        if dt > st["compute_ms_max"]:
            st["compute_ms_max"] = dt
        st["commands"] += 1
        # outgoing messages are kept as bytes (or messages) and refilled: building one costs more than filling
        out = self._out
        if out is None or out.joints is not self.cmd_map.joints:
            out = self._out = CommandOutput(self.pub_cmd, self.pub_stamped, self.cmd_map.joints, self._raw,
                                            self.cmd_map.v_index)
        out.publish(tau, *stamp)
        self._answered, self.last_rx = (t, now), time.monotonic()  # watchdog age from the end of a long compute
        if st["commands"] == 1:
            self.first_command_report()

    # ------------------------------------------------------------------ safety
    def on_watchdog(self) -> None:
        self._sim_clock = self.get_clock().ros_time_is_active   # the stamps' clock (Measurements.clock_now)
        if not self.active:   # inactive: nothing is published (.lifecycle)
            return
        age = time.monotonic() - self.last_rx if self.last_rx is not None else 0.0  # armed by the first state
        if age > self.watchdog_timeout:
            if not self.stale:
                self.stale = True
                self.stats["watchdog_episodes"] += 1
                self.get_logger().warning(
                    f"watchdog: {self._stale_what()} for {age:.3f} s (timeout {self.watchdog_timeout} s): "
                    f"publishing the safe output ({'hold' if self.task_layer else self.safe_mode}) until they resume")
                self.stale_in_contact(age)
            self.publish_safe()

    def _stale_what(self) -> str:
        """What the watchdog misses: valid joint states, or (a free body) joint states with a matching odometry."""
        sync = self.rejects["odometry_sync"]
        if sync.failing:
            return f"no joint_states paired with an odometry within sync_tolerance ({sync.last_reason})"
        return "no valid joint_states"


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_controller_node`` (``--ros-args --params-file config/<robot>.yaml``)."""
    from qv_dynamics.ros.runner import run_node
    return run_node("qv_controller_node", lambda: ControllerNode(automatically_declare_parameters_from_overrides=False),
                    argv)


if __name__ == "__main__":
    sys.exit(main())
