"""``qv_controller_node`` as a managed controller: ros2_control's controller lifecycle on rclpy's lifecycle
node (``~/change_state``, ``~/get_state``, lifecycle_msgs).

    unconfigured ──configure──▶ inactive ──activate──▶ active
         ▲  cleanup ◀──────────────┘  ◀──deactivate──────┘

- **configure**: the model, the law(s) (the task's laws built and run once: their kernels loaded), the
  subscriptions, publishers, services and timers; a bad parameter, model or task refuses the transition
  with the reason logged (the node stays unconfigured).
- **inactive**: joint states are received and checked (stamps, sizes, counts), nothing is published on the
  command topic.
- **activate**: needs a valid joint state (else refused: *waiting*, a lifecycle manager retries) and, with
  a task, the last one within ``task.start_tolerance`` of ``task.start_q`` at every joint (else refused for
  good, with the joint and the distance). From then on each state is answered. Bumpless: from the first
  state answered (t₀, q_meas) the motion reference starts at the measured pose, θ_d(t) + Δ(t) with
  Δ(t₀) = θ(q_meas) − θ_d(t₀) (θ of the law's coordinates, so the first command holds the pose it found) blended
  out as Δ(t) = Δ(t₀)(1 − s(τ)), s(τ) = 10τ³ − 15τ⁴ + 6τ⁵, τ = (t − t₀)/T, with θ̇_d and θ̈_d carrying Δ̇ and
  Δ̈: with a task, a move from the found pose to the start pose in the bounded time
  T = max(:data:`MOVE_TIME_MIN`, 1.875 max|Δ(t₀)| / :data:`MOVE_SPEED`) (1.875: the peak of s'). Without a
  task the node's references (``theta_desired``, the spline, ``~/reference``) are applied as given; a law
  without θ_d holds the pose of its first state itself.
- **the task starts** (``task.autostart``) only once the loop runs steadily: ``start_steady_states``
  consecutive states answered, each stamped at most ``start_steady_gap`` state periods (the smallest stamp
  step seen) after the previous answered one, and the move to the start pose done. A start-up is where the
  other processes load (a dynamics node importing and loading kernels beside a realtime plant on a shared
  machine delayed answers by 70–320 ms), and a command held that long is an open-loop torque.
- **deactivate**: the safe output (:meth:`ControllerNode.publish_safe`) once, then nothing; a running task
  goes to its safe hold (reason "controller deactivated").
- **cleanup** / **shutdown**: what configure created is destroyed (shutdown from active deactivates first).

A managed node loads, while it waits unconfigured, what its configure transition will need whatever the
parameters are then (:meth:`~qv_control.ros.controller_node.ControllerNode.prepare_configure`: numba and the
law's compiled kernels, ~1 s of a start on the 2-core machine), so that the configure its manager asks for
soon after is short.

``managed`` (default false) lets the node configure itself in its constructor (a bad configuration raises,
as before) and activate itself at the first valid state it receives (an activation refused is retried at
each later state, until it is deactivated on request): a node started alone or in-process (``qv bringup``,
the demos, the tests) has no lifecycle manager. The launch files set it true and drive the transitions with
``qv_spawner``, as controller_manager's spawner does.
"""
from __future__ import annotations

import math
import time

import numpy as np
from rclpy.lifecycle import TransitionCallbackReturn

from qv_dynamics.ros.params import Param, bounded, int_range
from qv_dynamics.state import Reference

MOVE_SPEED = 0.1       # m/s or rad/s: peak speed of the move from the found pose to the start pose
MOVE_TIME_MIN = 0.2    # s: shortest move
REFUSAL_REPORT = 1.0   # s: a changed refusal is logged and reported at most this often
SUCCESS, FAILURE = TransitionCallbackReturn.SUCCESS, TransitionCallbackReturn.FAILURE

LIFECYCLE_PARAMS = (
    Param("managed", False, "true: wait unconfigured for a lifecycle manager (~/change_state: the launch files' "
          "qv_spawner); false: configure at start and activate at the first valid joint state (a node run alone "
          "or in-process has no manager)"),
    Param("start_steady_states", 200, "the task (task.autostart) starts after this many consecutive states "
          "answered on time (start_steady_gap); 1 to 100000", int_range("start_steady_states", 1, 100000)),
    Param("start_steady_gap", 4.0, "on time: stamped at most this many state periods (the smallest stamp step "
          "seen) after the previous answered state; 1 to 100",
          bounded("start_steady_gap", 1.0, 100.0, unit="periods")),
)


class SteadyLoop:
    """The steady-loop criterion of the module doc: ``answered(t)`` for every answered state's stamp."""

    def __init__(self, states: int, gap: float):
        self.states, self.gap = int(states), float(gap)
        self.reset()

    def reset(self) -> None:
        self.run = 0                      # consecutive states on time
        self.period = math.inf            # smallest stamp step seen
        self.late = 0                     # answered states that broke a run
        self.t_prev: float | None = None
        self.t_steady: float | None = None

    @property
    def steady(self) -> bool:
        return self.t_steady is not None

    def answered(self, t: float) -> bool:
        prev, self.t_prev = self.t_prev, t
        step = None if prev is None else t - prev
        if step is not None and step > 0.0:
            self.period = min(self.period, step)
            if step <= self.gap * self.period * (1 + 1e-9):
                self.run += 1
            else:
                self.run, self.late = 1, self.late + 1
        elif prev is None:
            self.run = 1
        if self.t_steady is None and self.run >= self.states:
            self.t_steady = t
        return self.t_steady is not None


class StartBlend:
    """Δ(t) of the module doc added to a Reference: from Δ₀ at t₀ to zero at t₀ + T."""

    def __init__(self, delta: np.ndarray, t0: float, duration: float):
        self.delta, self.t0, self.T = np.asarray(delta, float), float(t0), float(duration)

    def done(self, t: float) -> bool:
        return t >= self.t0 + self.T

    def apply(self, t: float, ref: Reference) -> Reference:
        if ref.theta is None or np.shape(ref.theta) != self.delta.shape:
            return ref
        tau = min(max((t - self.t0) / self.T, 0.0), 1.0)
        s = tau ** 3 * (10 - 15 * tau + 6 * tau * tau)
        ds = 30 * tau * tau * (1 - tau) ** 2 / self.T
        dds = 60 * tau * (1 - tau) * (1 - 2 * tau) / self.T ** 2
        zero = np.zeros_like(self.delta)
        thd = zero if ref.theta_dot is None else np.asarray(ref.theta_dot, float)
        thdd = zero if ref.theta_ddot is None else np.asarray(ref.theta_ddot, float)
        return Reference(theta=np.asarray(ref.theta, float) + self.delta * (1 - s), theta_dot=thd - self.delta * ds,
                         theta_ddot=thdd - self.delta * dds, lambda_=ref.lambda_)


def measured_theta(law, system, q: np.ndarray) -> np.ndarray | None:
    """θ(q) of the law's coordinates (a task's switching and friction wrappers looked through): its
    ``coords``, or the tool position for the laws whose θ is a frame's origin (osc, impedance); None if
    neither."""
    import pinocchio as pin

    inner = law
    for _ in range(4):
        if hasattr(inner, "current") and callable(inner.current):
            inner = inner.current()
        elif getattr(inner, "coords", None) is None and vars(inner).get("law") is not None:
            inner = vars(inner)["law"]
        else:
            break
    coords = getattr(inner, "coords", None)
    if coords is not None and hasattr(coords, "evaluate"):
        return np.asarray(coords.evaluate(q, np.zeros(system.nv), compiled=False).theta, float).copy()
    fid = getattr(inner, "fid", None)
    if isinstance(fid, (int, np.integer)) and list(getattr(inner, "theta_names", [])) == ["x", "y", "z"]:
        data = system.model.createData()
        pin.framesForwardKinematics(system.model, data, q)
        return data.oMf[int(fid)].translation.copy()
    return None


def start_pose_refusal(system, start_q, q, tolerance: float) -> str:
    """'' if ``q`` is within ``tolerance`` of ``start_q`` at every joint, else the reason (joint, distance)."""
    import pinocchio as pin

    from qv_dynamics.ros.messages import JointLayout

    d = np.abs(pin.difference(system.model, np.asarray(start_q, float), np.asarray(q, float)))
    layout = JointLayout.from_system(system, floating=True)
    worst = int(np.argmax(d))
    if d[worst] <= tolerance:
        return ""
    names = {int(v): n for n, v in zip(layout.names, layout.v_index)}
    return (f"the measured pose is {d[worst]:.3g} rad from task.start_q at {names.get(worst, f'velocity {worst}')} "
            f"(task.start_tolerance {tolerance:g} rad): bring the robot to task.start_q, or set task.start_q to "
            f"the pose it is in")


class ManagedController:
    """The lifecycle of the module doc, mixed into :class:`~qv_control.ros.controller_node.ControllerNode`
    (before ``rclpy.lifecycle.LifecycleNode``); the node provides ``configure_core(**injected)``."""

    def _init_lifecycle(self, injected: dict) -> None:
        self._injected_objects = injected
        self.active = self.configured = False
        self._configured_entities: list = []
        self._configure_error: Exception | None = None
        self.activation_refused, self._refusal_final, self._blend = "", False, None
        self._refusal_reported = -float("inf")
        self.steady_loop = SteadyLoop(self.get_parameter("start_steady_states").value,
                                      self.get_parameter("start_steady_gap").value)
        self.lifecycle_stats = {"activations": 0, "activations_refused": 0, "deactivations": 0,
                                "inactive_states": 0}
        self._autostart = self._autostart_pending = self._anchor_pending = False
        self._t_state: float | None = None
        self._managed = bool(self.get_parameter("managed").value)
        if self._managed:
            self.prepare_configure()               # what every configure of it loads, before it is asked
        elif self.trigger_configure() != SUCCESS:
            raise self._configure_error or RuntimeError("configure failed")

    # -- entities created by configure --------------------------------------------------------------
    def _entities(self) -> list:
        return [*self.subscriptions, *self.publishers, *self.timers, *self.services, *self.clients]

    def _destroy_configured(self) -> None:
        for e in self._configured_entities:
            for destroy in (self.destroy_subscription, self.destroy_publisher, self.destroy_timer,
                            self.destroy_service, self.destroy_client):
                try:
                    if destroy(e):
                        break
                except (TypeError, AttributeError):
                    continue
        self._configured_entities = []
        for remove, cb in ((self.remove_on_set_parameters_callback, self.validate_parameters),
                           (self.remove_post_set_parameters_callback, self.apply_parameters)):
            try:
                remove(cb)
            except ValueError:      # not registered (a configure refused before it got there)
                pass

    # -- transitions ----------------------------------------------------------------------------------
    def on_configure(self, state) -> TransitionCallbackReturn:
        before = {id(e) for e in self._entities()}
        try:
            self.configure_core(**self._injected_objects)
        except Exception as exc:  # noqa: BLE001 - a refused configuration: the reason, the node unconfigured
            self._configure_error = exc
            self._configured_entities = [e for e in self._entities() if id(e) not in before]
            self._destroy_configured()
            self.get_logger().error(f"configure refused: {exc}")
            return FAILURE
        self._configured_entities = [e for e in self._entities() if id(e) not in before]
        if self.task_layer is not None:            # the task starts when the loop is steady (module doc)
            self._autostart, self.task_layer.autostart = self.task_layer.autostart, False
        self.configured = True
        self.get_logger().info("configured (inactive): joint states are read, no command is published until "
                               "activated")
        return SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        reason, final = self._activation_check()
        if reason:
            # a lifecycle manager reads the reason in /diagnostics at once; a node that activates itself retries
            # at every state: its changed reasons are logged and reported at most every REFUSAL_REPORT s
            now, changed = time.monotonic(), reason != self.activation_refused
            self.activation_refused, self._refusal_final = reason, final
            if self._managed or (changed and now - self._refusal_reported >= REFUSAL_REPORT):
                if changed:
                    self.get_logger().warning(f"activation refused: {reason}")
                self._refusal_reported = now
                self.publish_diagnostics()
            self.lifecycle_stats["activations_refused"] += 1
            return FAILURE
        self.activation_refused, self._refusal_final = "", False
        if self.lifecycle_stats["activations"] and callable(getattr(self.law, "reset", None)):
            self.law.reset()                       # a re-activation starts from the pose found, not the old one
        self.t_first, self.stale, self.last_rx = None, False, time.monotonic()
        self.steady_loop.reset()
        self._blend, self._anchor_pending = None, True    # the move is anchored at the first state answered
        self._autostart_pending = self._autostart
        self.active = True
        self.lifecycle_stats["activations"] += 1
        self.get_logger().info("activated: commands from the pose found at the next state")
        return SUCCESS

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self._go_inactive("controller deactivated")
        self._managed = True        # deactivated on request: it stays inactive until activated on request
        return SUCCESS

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self._release()
        return SUCCESS

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        if self.active:
            self._go_inactive("controller shut down")
        if self.configured:
            self._release()
        return SUCCESS

    def on_error(self, state) -> TransitionCallbackReturn:
        self.active = False
        if self.configured:
            self._release()
        return SUCCESS

    def _go_inactive(self, reason: str) -> None:
        task = getattr(self.task_layer, "task", None)
        if task is not None and task.phase not in ("free", "hold", "done") and self._t_state is not None:
            task.hold(self._t_state, reason)
        if self.active and self.q_last is not None:
            self.publish_safe()                    # the safe output once, then nothing
        self.active, self._blend = False, None
        self.lifecycle_stats["deactivations"] += 1
        self.get_logger().info(f"deactivated: {reason}; no command is published until activated")

    def _release(self) -> None:
        self._destroy_configured()
        self.configured, self.active = False, False
        self.task_layer = None
        self.get_logger().info("cleaned up (unconfigured)")

    # -- activation -------------------------------------------------------------------------------------
    def _activation_check(self) -> tuple[str, bool]:
        """('' , _) to activate, else (reason, final): not final while the states are only awaited."""
        if self.q_last is None:
            return "no valid joint state received yet (waiting for the robot)", False
        if self.task_layer is not None:
            tol = float(self.get_parameter("task.start_tolerance").value)
            reason = start_pose_refusal(self.system, self.task_layer.task_law.q0, self.q_last, tol)
            if reason:
                return reason, True
        return "", False

    def _start_blend(self, t: float, q: np.ndarray) -> StartBlend | None:
        """The bumpless start (module doc): with a task, from θ(q) found at t to the task's θ_d."""
        if self.task_layer is None:
            return None
        ref = self.reference_at(t)
        theta = measured_theta(self.law, self.system, q)
        if ref.theta is None or theta is None or np.shape(theta) != np.shape(ref.theta):
            return None
        delta = theta - np.asarray(ref.theta, float)
        size = float(np.max(np.abs(delta))) if delta.size else 0.0
        if size < 1e-9:
            return None
        blend = StartBlend(delta, t, max(MOVE_TIME_MIN, 1.875 * size / MOVE_SPEED))
        self.get_logger().info(f"move from the pose found to the start pose over {blend.T:.2f} s "
                               f"(largest coordinate offset {size:.4g})")
        return blend

    # -- per state (one call each from the node's tick) -----------------------------------------------------
    def on_inactive_state(self, t: float) -> bool:
        """A valid state while inactive: kept (``q_last``); unmanaged, the node activates itself on it (True:
        answer this state)."""
        self._t_state = t
        self.lifecycle_stats["inactive_states"] += 1
        if self._managed or not self.configured:
            return False
        return self.trigger_activate() == SUCCESS

    def on_active_state(self, t: float, q: np.ndarray) -> None:
        """An answered state (t, q): the move's anchor (the first one), the steady-loop criterion and the
        gated task start (module doc)."""
        self._t_state = t
        if self._anchor_pending:
            self._anchor_pending = False
            self._blend = self._start_blend(t, q)
        steady = self.steady_loop.answered(t)
        if self._blend is not None and self._blend.done(t):
            self._blend = None
        if getattr(self, "_autostart_pending", False) and steady and self._blend is None:
            self._autostart_pending = False
            if self.task_layer.task.phase == "free":
                self.task_layer.task.start(t)

    def blended(self, t: float, ref: Reference) -> Reference:
        """``ref`` with the move from the found pose added while it runs."""
        return ref if self._blend is None else self._blend.apply(t, ref)

    # -- reports --------------------------------------------------------------------------------------------
    def lifecycle_state(self) -> str:
        return "active" if self.active else ("inactive" if self.configured else "unconfigured")

    def lifecycle_values(self) -> dict:
        sl = self.steady_loop
        return {"lifecycle_state": self.lifecycle_state(), "activation_refused": self.activation_refused,
                "activation_refused_final": int(self._refusal_final), **self.lifecycle_stats,
                "steady": int(sl.steady), "steady_run": sl.run, "steady_breaks": sl.late,
                "steady_at_s": "nan" if sl.t_steady is None else f"{sl.t_steady:.9f}",
                "start_move_s": 0.0 if self._blend is None else self._blend.T}

    def lifecycle_status(self, level, text: str):
        """(level, text) of the node's /diagnostics with the lifecycle state: inactive is not controlling."""
        if self.active:
            return level, text
        from diagnostic_msgs.msg import DiagnosticStatus

        text = "inactive" + (f": activation refused: {self.activation_refused}" if self.activation_refused else
                             ": no command published until activated")
        return (DiagnosticStatus.WARN if self._refusal_final else level), text


__all__ = ["LIFECYCLE_PARAMS", "ManagedController", "StartBlend", "SteadyLoop", "measured_theta",
           "start_pose_refusal"]
