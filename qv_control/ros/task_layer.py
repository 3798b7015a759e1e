"""The contact task (:mod:`qv_control.task`) as an optional layer of ``qv_controller_node``.

The node stays a generic core (watchdog, safe output, stamps, diagnostics); with a task it gets:

- the law: the task's :class:`~qv_control.task.TaskLaw` (rebuilt at each contact switch), the reference:
  the task point mapped to the law's θ;
- contact detection: the normal force f_n = −(R f)·e_z of the wrench measured at the task's constraint
  (``wrench_topics``/``wrench_constraints``; f in the sensor frame's axes, R its orientation at the state's
  q), low-passed at ``task_ft_filter_hz``; the state machine runs once per joint state;
- run-time commands (std_srvs/Trigger), each answering whether it acted (``success``) and why (``message``),
  a refusal counted (``commands_refused``): ``~/start`` (the timed task), ``~/touch_down`` (approach and
  press until ``~/lift_off``), ``~/lift_off``, ``~/hold`` (the safe hold, reason "commanded"), ``~/reset``
  (a hold or done back to free, the tool brought back to the start pose; then ``~/start`` again). The
  state machine of :mod:`qv_control.task.contact_task` decides; here: ``~/start`` or ``~/touch_down`` before
  the first joint state is deferred to it (answered "armed"), a second one while armed is refused;
- inputs that would change the task's force, motion, law or reference — ``lambda_desired`` and
  ``theta_desired`` (parameters or the ``~/lambda_desired`` and ``~/reference`` topics), ``law`` and
  ``law_params.*`` — are refused while the node runs a task (the parameter set answers unsuccessful with the
  reason, a topic message is dropped), counted (``inputs_refused`` and ``refused_<input>``), logged once per
  input: the task's law and reference are the only ones that reach the command. The ``task.*`` parameters are
  read at start (read-only: a set answers unsuccessful) and counted the same way; a task is changed by
  starting the node with new ones, not by queuing changes into a running task; ``theta_desired``,
  ``lambda_desired`` or a ``reference.*`` spline given at start with a task are refused at start (one line,
  exit 2): they would replace the task's references from the first state on;
- the safe hold: the node sends its safe output (:mod:`qv_control.safe_output`: the damped joint hold about
  the pose latched at the hold, lifted by ``task.retract``) every state while the task holds, not the law;
  a law that fails to compute sends the task to its hold (reason "control law failed: ...");
- ``~/phase`` (std_msgs/String, transient local): the phase, on every change; ``~/active_constraints``
  (std_msgs/String, transient local): the comma-separated active constraint names after every switch, which
  the dynamics node follows (its ``active_constraints_topic``);
- the friction compensation (``task.friction_compensation``) gets the measured contact force on the tool
  −R f (world axes) every sample;
- a measured normal force (the unfiltered reading) above ``task.force_limit`` × the largest force commanded
  over the last ``limit_window`` s: the task's safe hold in the same state (it lifts off by ``task.retract``),
  counted (``force_limit_trips``);
- an F/T topic silent for ``task_ft_timeout`` s while in contact: the safe output for that sample, the task
  goes to its hold (free motion, no force) and the episode is counted (``ft_stale_episodes``).
"""
from __future__ import annotations

import time

import numpy as np
from rclpy.qos import DurabilityPolicy, QoSProfile
from std_msgs.msg import String
from std_srvs.srv import Trigger

from qv_dynamics.errors import ModelError

from ..task import LowPass

#: inputs the task owns while it runs: parameter names (or their prefix) and topics
TASK_OWNED = ("lambda_desired", "theta_desired", "law", "law_params.", "reference")


class TaskLayer:
    """Runs a :class:`~qv_control.task.ContactTask` and its :class:`~qv_control.task.TaskLaw` inside ``node``."""

    def __init__(self, node, task, task_law, frame: str, ft_filter_hz: float = 0.0, ft_timeout: float = 0.05,
                 autostart: bool = False):
        self.node, self.task, self.task_law = node, task, task_law
        given = [n for n in ("theta_desired", "lambda_desired", "reference.times", "reference.waypoints")
                 if node.get_parameter(n).value not in (None, [])]
        if given:          # they would replace the task's motion or force from the first state on
            raise ModelError(f"{', '.join(given)} cannot be given with task.enabled: the contact task sets the "
                             "motion and force references (remove them from the parameters)")
        self.frame = frame
        self.fid = node.system.frame_id(frame)
        self.contact = task.cfg.contact
        self.ft_timeout = float(ft_timeout)
        self.filter_hz = float(ft_filter_hz)
        self.lowpass: LowPass | None = None
        self.autostart = autostart
        self.stats = {"ft_stale_episodes": 0, "switches": 0, "commands_refused": 0, "inputs_refused": 0,
                      "resets": 0}
        self.refused: dict[str, int] = {}
        self._stale = False
        self.wrench_rx: float | None = None
        self.armed: str | None = None          # a start / touch_down asked for before the first state
        self.t_now: float | None = None        # the stamp of the last state (None: none yet)
        self.fn_raw = 0.0
        task.on_switch = self._on_switch
        task.logger = node.get_logger()
        # the law of each constraint set built and run once now, not at the first touch-down
        task_law.warm(task_law.q0)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_phase = node.create_publisher(String, "~/phase", latched)
        self.pub_active = node.create_publisher(String, "~/active_constraints", latched)
        self._phase = None
        self._publish_phase()
        self._publish_active()
        for name, fn in (("start", self._start), ("touch_down", self._touch_down), ("lift_off", self._lift_off),
                         ("hold", self._hold), ("reset", self._reset)):
            node.create_service(Trigger, f"~/{name}", lambda req, res, fn=fn: self._serve(fn, res))
        node.add_pre_set_parameters_callback(self._count_read_only)

    # -- outputs --------------------------------------------------------------------------------------------
    def _publish_phase(self) -> None:
        if self.task.phase != self._phase:
            self._phase = self.task.phase
            self.pub_phase.publish(String(data=self._phase))

    def _publish_active(self) -> None:
        self.pub_active.publish(String(data=",".join(c.name for c in self.node.system.active_constraints)))

    def _on_switch(self, active: bool) -> None:
        self.stats["switches"] += 1
        self.lowpass = None
        self._publish_active()

    # -- inputs the task owns --------------------------------------------------------------------------------
    def refuse_input(self, name: str) -> str:
        """Count a refused input (a parameter or a topic message of :data:`TASK_OWNED`); the reason."""
        self.stats["inputs_refused"] += 1
        first = name not in self.refused
        self.refused[name] = self.refused.get(name, 0) + 1
        why = (f"{name} refused: the contact task owns the force, motion, law and reference of this node "
               f"(phase {self.task.phase}); change the task through task.* and ~/start, ~/lift_off, ~/hold, "
               "~/reset")
        if first:
            self.node.get_logger().warning(why + " [logged once per input]")
        return why

    def _count_read_only(self, params):
        """Pre-set callback: ``task.*`` (read at start: the parameter services refuse them as read-only) and
        undeclared ``law_params.*`` never reach the on-set validation; they are counted here."""
        for p in params:
            if p.name.startswith("task.") or (p.name.startswith("law_params.") and not self.node.has_parameter(p.name)):
                self.refuse_input(p.name)
        return params

    def parameter_refusal(self, names) -> str | None:
        """The reason a parameter change touching an input the task owns is refused (counted), else None."""
        owned = [n for n in names if any(n == o or (o.endswith(".") and n.startswith(o)) for o in TASK_OWNED)]
        return "; ".join(self.refuse_input(n) for n in owned) or None

    # -- commands ---------------------------------------------------------------------------------------------
    def _serve(self, fn, res):
        ok, msg = fn(self.t_now)
        res.success, res.message = bool(ok), msg
        if not ok:
            self.stats["commands_refused"] += 1
        self._publish_phase()
        return res

    def _begin(self, t, what: str):
        if t is None:      # no state yet: the task has no time and no pose to start from
            if self.armed is not None:
                return False, f"already armed: {self.armed} at the first joint state"
            if self.task.phase != "free":
                return False, f"the task is not in free motion (phase {self.task.phase})"
            self.armed = what
            return True, f"armed: {what} at the first joint state"
        ok = (self.task.start if what == "start" else self.task.touch_down)(t)
        return ok, self.task.why

    def _start(self, t):
        return self._begin(t, "start")

    def _touch_down(self, t):
        return self._begin(t, "touch_down")

    def _lift_off(self, t):
        if t is None:
            return False, "nothing to lift off from (no joint state yet)"
        return self.task.lift_off(t), self.task.why

    def _hold(self, t):
        self.armed = None
        return self.task.hold(self.t_now or 0.0, "commanded"), self.task.why

    def _reset(self, t):
        """A hold or done back to free: the tool from where it is (forward kinematics at the last state) back
        to the start pose; the law rebuilt (integrals dropped), the F/T filter and stale episode cleared."""
        q = self.node.q_last
        p_now = None if q is None else self.node.system.frame_placement(q, self.frame).translation.copy()
        ok = self.task.reset(t or 0.0, p_now)
        if ok:
            self.stats["resets"] += 1
            self.task_law.switching.reset()
            self.lowpass, self._stale = None, False
        return ok, self.task.why

    def safe_hold(self, t: float | None, reason: str) -> None:
        """The task's safe hold from the node (a failed law, stale states in contact), the phase published;
        the node sends its safe output."""
        self.task.hold((self.t_now or 0.0) if t is None else t, reason)
        self._publish_phase()

    # -- per state --------------------------------------------------------------------------------------------
    def on_wrench(self) -> None:
        self.wrench_rx = time.monotonic()

    def normal_force(self, q: np.ndarray) -> float | None:
        """f_n at q (low-passed at ``task_ft_filter_hz``); the unfiltered reading is kept in ``fn_raw``."""
        wrenches = self.node.wrenches
        raw = wrenches.latest(self.contact)
        if raw is None:
            return None
        R = wrenches.placement(q, self.fid).rotation
        f_tool = -(R @ raw[:3])             # the contact force on the tool, world axes
        measure = getattr(self.task_law.law, "measure", None)
        if measure is not None:             # friction compensation: μ̂ from the tangential force
            measure(f_tool)
        fn = self.fn_raw = float(f_tool[2])
        if self.filter_hz > 0:
            if self.lowpass is None:
                self.lowpass = LowPass(self.filter_hz, 1e-3)
            fn = float(self.lowpass(np.array([fn]))[0])
        return fn

    def step(self, t: float, q: np.ndarray) -> bool:
        """Run the state machine for the state (t, q); False: publish the safe output for this state (the
        task holds)."""
        self.t_now = t
        task = self.task
        if (self.autostart or self.armed) and task.phase == "free":
            (task.touch_down if self.armed == "touch_down" else task.start)(t)
        self.armed, self.autostart = None, False     # autostart: the first run only (after ~/reset: ~/start)
        in_contact = self.node.system.constraint(self.contact).active
        age = None if self.wrench_rx is None else time.monotonic() - self.wrench_rx
        if in_contact and (age is None or age > self.ft_timeout):
            if not self._stale:
                self._stale = True
                self.stats["ft_stale_episodes"] += 1
            task.hold(t, f"F/T topic silent for more than {self.ft_timeout} s in contact")
            self._publish_phase()
            return False
        self._stale = False
        fn = self.normal_force(q)      # no F/T reading yet: no contact can be detected (f_n = 0)
        z = self.node.wrenches.placement(q, self.fid).translation[2]   # (one kinematics pass per state)
        task.update(t, 0.0 if fn is None else fn, float(z), fn_start=None if fn is None else self.fn_raw)
        self._publish_phase()
        return task.phase != "hold"

    def reference(self, t: float):
        return self.task_law.reference(self.task.point(t))

    def diagnostics(self) -> dict:
        """Phase, reason, counts; ``task_t_contact_s``: the stamp of the state at which the first touch was
        detected, to the ns (the task's timeline counts from it: a judge from outside aligns on it)."""
        tc = self.task.t_contact
        return {"task_phase": self.task.phase, "task_reason": self.task.reason or "", **self.stats,
                **{f"refused_{k}": n for k, n in self.refused.items()},
                "force_limit_trips": self.task.force_limit_trips,
                "task_t_contact_s": "nan" if tc is None else f"{tc:.9f}"}
