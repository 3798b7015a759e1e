"""What the two plant nodes (``qv_sim_node``, ``qv_mujoco_node``) share (SPEC §5–§6): the parameters of the
ros2_control topic contract, the pacing modes, and the effort-command callback.

Modes: ``realtime`` steps on its own pacing thread at absolute wall-clock deadlines (``real_time_factor``,
zero-order hold of the latest command, one /joint_states message per step, at most ``max_steps_per_tick``
steps per wake-up: a plant that cannot keep up drops real time, counted and
reported as a real-time factor, rather than running the held command open loop for a long burst); with
``wait_for_command`` (default) real time starts at the first valid effort command and until then the
initial state is published every 10 ms, like a robot held by its brakes until the controller is up;
``lockstep`` steps once per received command and publishes the new state (``lockstep_resend`` re-publishes
it when no command came for that long). A bad command (wrong size, NaN) is dropped and counted, never applied.

The drives hold the robot (:mod:`qv_dynamics.plants.drive_hold`: each actuated joint holds its position
with damping on a gravity model) whenever the plant steps without a command to apply: before the first
command (realtime with ``wait_for_command`` false; with it, time itself waits) and once ``command_timeout``
s of plant time passed since the last one (a stalled or deactivated controller). A timeout episode is
counted (``command_timeout_episodes``), logged once, and ends at the next valid command.

The MuJoCo plant nodes (:meth:`PlantNodeMixin._plant_topics`) publish diagnostic_msgs/DiagnosticArray on
``/diagnostics`` once a second (steady clock): the real-time factor over the last second (simulated s per wall
s), dropped real time, clipped and rejected effort commands, the state and command counts, and the pacing
thread's wake-up latency; WARN while a realtime plant runs below 0.99 of ``real_time_factor``.
"""
from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.clock import Clock as RosClock
from rclpy.clock import ClockType
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..errors import QVError
from ..plants.drive_hold import DriveHold
from .health import EpisodeCounter, diagnostic_array, reject_kind
from .messages import CommandMap, JointLayout, sec_to_stamp
from .pacing import DeadlineLoop
from .params import declare, node_model_config
from .raw import input_qos, subscribe_commands

WAIT_PUBLISH_PERIOD = 0.01  # s between state messages while waiting for the first command
DIAGNOSTICS_PERIOD = 1.0    # s of wall time between /diagnostics messages of the MuJoCo plant nodes


class PlantNodeMixin:
    """Mixed into an rclpy ``Node`` that defines ``publish_state()``, ``tau``, ``steps``, ``step_once()`` (or
    has a ``plant`` with ``step(tau, dt)`` and an ``on_step`` list for the default one),
    ``rejects`` (EpisodeCounter) and, in realtime mode, ``wall0``."""

    def _declare_and_load(self, table, system) -> tuple[object, dict]:
        """Declare the node's parameter table; (system, model config document) from the parameters unless
        ``system`` was passed in-process."""
        declare(self, table)
        if system is not None:
            return system, {}
        return node_model_config(self, floating=True)

    def _configure_plant(self, system) -> None:
        """system, joint layout, command map (``joints`` order) and the checked mode, dt, real-time factor."""
        gp = self.get_parameter
        self.system = system
        self.layout = JointLayout.from_system(system, floating=getattr(self, "floating", False))
        joints = [j for j in (gp("joints").value or []) if j] or list(self.layout.names)
        self.cmd_map = CommandMap(system, joints)
        self.mode = gp("mode").value  # mode, dt and real_time_factor are checked by the parameter table
        self.dt = float(gp("dt").value)
        self.rtf = float(gp("real_time_factor").value)
        self.max_steps = int(gp("max_steps_per_tick").value)  # >= 1: checked by the parameter table
        self.started = not (self.mode == "realtime" and bool(gp("wait_for_command").value))
        self._wait_pub = -float("inf")
        self.effort_limits = np.asarray(system.effort_limits(), float)  # inf where the URDF gives none
        self.clipped = 0                # effort commands clipped to the URDF limits
        self._clipping = False          # inside a clipping episode (logged once per episode)
        self.overruns = 0               # realtime ticks that could not catch up (real time dropped)
        self.dropped_time = 0.0         # wall seconds of real time dropped by those ticks
        self._overrun_logged = -float("inf")
        self.clock_period = float(gp("clock_period").value)
        self._clock_due = -float("inf")  # simulated time of the next /clock message
        self.commands_received = 0      # valid effort commands (diagnostics: the command rate at the plant)
        self.states_published = 0       # /joint_states messages (diagnostics: the state rate)
        # the drives' hold (module doc): engaged while there is no command to apply
        self.command_timeout = float(gp("command_timeout").value)
        self.hold = DriveHold(system, self.cmd_map.v_index, float(gp("hold_bandwidth").value))
        self._cmd_step: int | None = None  # the step count at the last valid command (None: none yet)
        self.holding = False
        self.hold_episodes = 0          # command timeouts (a hold after commands had come)
        self.hold_steps = 0             # steps taken under the hold (before the first command included)
        self.tau_applied = np.zeros(system.nv)

    def _plant_topics(self, on_step) -> str:
        """What the MuJoCo plant nodes set up alike: the ``on_step`` list, the held τ, the command reject
        counter, the step count, /joint_states, /clock (``publish_clock``) and the effort command subscription
        (``command_topic``, else ``/<controller_name>/commands``); returns that topic."""
        gp = self.get_parameter
        self.on_step = [on_step] if on_step is not None else []
        self.tau = np.zeros(self.system.nv)
        self.rejects = EpisodeCounter(self.get_logger(), "effort commands")
        self.steps = 0
        self.publish_clock = bool(gp("publish_clock").value)
        self.pub_js = self.create_publisher(JointState, gp("joint_states_topic").value, 10)
        self.pub_clock = self.create_publisher(Clock, "/clock", 10) if self.publish_clock else None
        topic = gp("command_topic").value or f"/{gp('controller_name').value}/commands"
        self._subscribe_commands(topic)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_prev = (time.monotonic(), 0)
        self.create_timer(DIAGNOSTICS_PERIOD, self.publish_diagnostics,
                          clock=RosClock(clock_type=ClockType.STEADY_TIME))
        return topic

    def publish_diagnostics(self) -> None:
        """One DiagnosticStatus (module doc): the figures since the previous one and the totals."""
        self.publish_plant_status("plant")

    def publish_plant_status(self, kind: str, extra: dict | None = None, error: str | None = None) -> None:
        """The plants' common /diagnostics status ``<node>: <kind>``: steps, real-time factor over the last
        period (plant s per wall s), states and commands, overruns, dropped real time, clipped and rejected
        commands, the drives' hold, the pacing thread's wake-up latency, plus ``extra``; ERROR with ``error``
        (the plant stopped), WARN while the drives hold or behind real time."""
        now = time.monotonic()
        wall, steps = self._diag_prev
        rtf = (self.steps - steps) * self.dt / (now - wall) if now > wall else 0.0
        self._diag_prev = (now, self.steps)
        values = {"mode": self.mode, "steps": self.steps, "t": self.t, "real_time_factor": rtf,
                  "states_published": self.states_published, "commands_received": self.commands_received,
                  "overruns": self.overruns, "dropped_real_time_s": self.dropped_time,
                  "clipped_commands": self.clipped, "rejected_commands": self.rejects.total,
                  **(extra or {}), **self.hold_values()}
        if getattr(self, "_rt_loop", None) is not None:  # wake-up latency of the pacing thread past its deadlines
            values["wake_late_ms"] = 1e3 * self._rt_loop.late
        if error:
            level, message = DiagnosticStatus.ERROR, f"stopped: {error}"
        elif not self.started:
            level, message = DiagnosticStatus.OK, "waiting for the first effort command"
        elif self.holding and self._cmd_step is not None:
            level, message = DiagnosticStatus.WARN, f"no effort command for {self.command_timeout:g} s: drives holding"
        elif self.mode == "realtime" and rtf < 0.99 * self.rtf:
            level, message = DiagnosticStatus.WARN, f"behind real time: factor {rtf:.3f}"
        else:
            level, message = DiagnosticStatus.OK, "ok"
        self.pub_diag.publish(diagnostic_array(self.get_clock().now().to_msg(), level, f"{self.get_name()}: {kind}",
                                               message, self.system.name, values))

    def hold_values(self) -> dict:
        """The drives' hold in /diagnostics: timeout episodes, holding now, plant time held in all [s]; a
        plant that tracks its contact force adds its peak since the start (``contact_peak``, N)."""
        out = {"command_timeout_episodes": self.hold_episodes, "holding": int(self.holding),
               "hold_s": self.hold_steps * self.dt}
        if getattr(self, "contact_peak", None) is not None:
            out["contact_force_peak_n"] = self.contact_peak
        return out

    def _subscribe_commands(self, topic: str) -> None:
        """The effort commands, read from the serialized message unless ``raw_messages`` is false."""
        gp = self.get_parameter
        # lock-step: reliable whatever best_effort_inputs says (a lost command would stop the loop until the
        # re-send; the controller does not answer the same state twice within its duplicate window)
        best_effort = bool(gp("best_effort_inputs").value) and self.mode != "lockstep"
        subscribe_commands(self, topic, self.on_command, input_qos(10, best_effort),
                           bool(gp("raw_messages").value), lambda exc: self.rejects.reject(reject_kind(exc), str(exc)))

    @property
    def t(self) -> float:
        """Simulated time of a plant object (the MuJoCo plants); nodes without one define their own."""
        return self.plant.time

    def _stamp(self):
        """The stamp of the current state, first published on /clock when ``publish_clock`` and at least
        ``clock_period`` of simulated time has passed since the last /clock message (or time went back)."""
        t = self.t
        stamp = sec_to_stamp(t)
        if self.pub_clock is not None and (t >= self._clock_due or t < self._clock_due - self.clock_period - self.dt):
            self._clock_due = t + self.clock_period - 0.5 * self.dt  # half a step: no rounding skips a message
            self.pub_clock.publish(Clock(clock=stamp))
        self.states_published += 1
        return stamp

    def _start_pacing(self, clock=None) -> None:
        """Realtime: the pacing thread (:class:`DeadlineLoop`, one step and one published state per period of
        ``dt / real_time_factor`` at absolute wall-clock deadlines); lock-step: the re-send timer (``clock``:
        e.g. a steady clock so that it stays wall-clock whatever ``use_sim_time`` says)."""
        self.last_cmd_wall = time.monotonic()
        self.resend = float(self.get_parameter("lockstep_resend").value)
        kw = {} if clock is None else {"clock": clock}
        self._rt_loop = None
        if self.mode == "realtime":
            self.wall0 = time.monotonic()
            self._rt_loop = DeadlineLoop(self.on_realtime_tick, self._next_due, name=f"{self.get_name()}_realtime")
            self._rt_loop.start()
        elif self.resend > 0:
            self.create_timer(self.resend, self.on_resend, **kw)

    def _next_due(self) -> float:
        """Wall-clock deadline of the next realtime step (step k is due at wall0 + k·dt/real_time_factor);
        while waiting for the first command, one period from now (the wait publishes every 10 ms)."""
        period = self.dt / self.rtf
        if not self.started:
            return time.monotonic() + min(period, WAIT_PUBLISH_PERIOD)
        return self.wall0 + (self.steps + 1) * period

    def destroy_node(self):
        """The pacing thread is stopped (and joined) first: no step or publish after the node is gone."""
        if getattr(self, "_rt_loop", None) is not None:
            self._rt_loop.stop()
        return super().destroy_node()

    def _initial(self, name: str, given, from_doc, default: np.ndarray, to_q: bool = False) -> np.ndarray:
        """Initial q0/q̇0: the constructor argument, else the parameter, else the model config's value, else
        ``default``. ``to_q``: a parameter/config value with one entry per joint is mapped to Pinocchio's q."""
        if given is not None:
            return np.asarray(given, float)
        val = self.get_parameter(name).value
        if val is None or (isinstance(val, (list, tuple)) and not val):
            val = from_doc
        if val is None:
            return default
        arr = np.asarray(val, float)
        if to_q and arr.shape == (len(self.layout.names),):
            q = self.layout.to_q(arr)
            if getattr(self, "floating", False):  # joints only: the base at the origin, upright
                q[:7] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
            return q
        return arr

    def step_once(self, tau: np.ndarray | None = None) -> None:
        """One control period of a plant object with ``step(tau, dt)`` (the MuJoCo plants): hold τ (the latest
        command unless given; the drives' hold when there is none, module doc) over ``dt``, then run the
        ``on_step`` callables with the node."""
        self.plant.step(self._drive_tau(tau), self.dt)
        self.steps += 1
        for fn in self.on_step:
            fn(self)

    def _measured(self) -> tuple[np.ndarray, np.ndarray]:
        """(q, q̇) of the plant now (what the drives' encoders read)."""
        return self.plant.q, self.plant.qdot

    def _drive_tau(self, tau: np.ndarray | None = None) -> np.ndarray:
        """The torque of the next step: ``tau`` (a command given in-process), the latest command, or the
        drives' hold when none came for ``command_timeout`` s of plant time or none came yet (module doc)."""
        if tau is not None:
            self.tau, self._cmd_step = tau, self.steps
        last = self._cmd_step
        if last is not None and (self.steps - last) * self.dt < self.command_timeout - 1e-9:
            if self.holding:
                self.holding = False
                self.hold.release()
                self.get_logger().info(f"effort commands resumed at t={self.t:.3f} s: the drives apply them again")
            self.tau_applied = self.tau
            return self.tau
        if not self.holding:
            self.holding = True
            if last is not None:
                self.hold_episodes += 1
                self.get_logger().warning(
                    f"no effort command for {self.command_timeout:g} s (t={self.t:.3f} s): the drives hold the "
                    f"pose with damping until commands resume (episode {self.hold_episodes})")
        self.hold_steps += 1
        self.tau_applied = self.hold.torque(*self._measured())
        return self.tau_applied

    def _advance(self, steps: int) -> bool:
        """Step the plant ``steps`` times; False when it stopped (the simulator stops on a solver error)."""
        for _ in range(steps):
            self.step_once()
        return True

    # ------------------------------------------------------------------ callbacks
    def on_command(self, msg: Float64MultiArray) -> None:
        try:
            tau = self.cmd_map.from_message(msg)
        except QVError as exc:
            self.rejects.reject(reject_kind(exc), str(exc))
            return
        self.rejects.ok()
        self.commands_received += 1
        # hand-over to the pacing thread: one reference swap of a fresh array (atomic under the GIL; never
        # written in place), read once per step, so a step holds one command over its whole dt
        self.tau = self._clip(tau)
        self._cmd_step = self.steps   # the drives apply commands again (read by the pacing thread)
        if not self.started:  # real time starts now, from the state the controller has answered
            self.wall0 = time.monotonic() - self.steps * self.dt / self.rtf  # before ``started``: the thread
            self.started = True                                               # reads them in that order
            self.get_logger().info("first effort command: real time starts")
        if self.mode == "lockstep" and self._advance(1):
            self.publish_state()
        # the resend clock starts when the answered state is out, not when the command came: a step that took
        # longer than lockstep_resend (a loaded machine) must not make the node re-send the state the controller
        # is answering right now (two answers to one state would step the plant twice with the same command)
        self.last_cmd_wall = time.monotonic()

    def _clip(self, tau: np.ndarray) -> np.ndarray:
        """τ clipped to the URDF effort limits (an actuator cannot do more); counted, logged once per episode."""
        lim = self.effort_limits
        if (np.abs(tau) <= lim).all():
            if self._clipping:
                self._clipping = False
                self.get_logger().info("effort commands within the URDF limits again")
            return tau
        self.clipped += 1
        if not self._clipping:
            self._clipping = True
            over = [f"τ[{i}] = {tau[i]:.4g} (limit {lim[i]:.4g})" for i in np.flatnonzero(np.abs(tau) > lim)]
            self.get_logger().warning(f"effort command beyond the URDF limits, clipped ({', '.join(over)}) "
                                      "[logged once until the commands are within the limits]")
        return np.clip(tau, -lim, lim)

    def on_resend(self) -> None:
        if self.mode == "lockstep" and time.monotonic() - self.last_cmd_wall > self.resend:
            self.publish_state()

    def on_realtime_tick(self) -> None:
        """One wake-up of the pacing thread: every step due by now (at most ``max_steps``), each followed by
        its own /joint_states message; beyond the cap real time is dropped (counted, as RTF)."""
        if self.mode != "realtime":  # stopped (solver error) or switched: the thread ends
            if self._rt_loop is not None:
                self._rt_loop.stop()
            return
        if not self.started:
            now = time.monotonic()
            if now - self._wait_pub >= WAIT_PUBLISH_PERIOD:
                self._wait_pub = now
                self.publish_state()
            return
        # + 1e-6 step: a wake-up at the deadline is not taken for one just before it by rounding
        due = int((time.monotonic() - self.wall0) * self.rtf / self.dt + 1e-6) - self.steps
        for _ in range(min(max(due, 0), self.max_steps)):
            if not self._advance(1):
                return
            self.publish_state()
        if due > self.max_steps:  # cannot keep up: drop real time rather than burst (counted, as RTF)
            self._drop_real_time((due - self.max_steps) * self.dt / self.rtf)

    def _drop_real_time(self, lag: float) -> None:
        self.wall0 += lag
        self.overruns += 1
        self.dropped_time += lag
        now = time.monotonic()
        if now - self._overrun_logged > 5.0:  # at most one line per 5 s
            self._overrun_logged = now
            self.get_logger().warning(
                f"behind real time: {self.overruns} overrun(s), {1e3 * self.dropped_time:.1f} ms of real time "
                "dropped so far (the plant never takes bigger steps; /diagnostics: real_time_factor)")
