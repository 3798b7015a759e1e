"""``qv_sim_node``: the built-in constrained simulator behind ros2_control's topics (SPEC §5).

It speaks the contract of joint_state_broadcaster + an effort forward controller, so the controller
node cannot tell it from hardware:

  out ``/joint_states`` (sensor_msgs/JointState: position, velocity, effort = last applied τ)
  out ``~/<constraint>/wrench`` (geometry_msgs/WrenchStamped, one per point/weld/loop constraint): the
      wrench the robot applies at the constraint frame (λ of M q̈ + h = τ − Aᵀλ), in that frame's axes,
      as a force_torque_sensor_broadcaster would publish it; λ is the multiplier at the start of the last
      step (the value ``simulate`` hands the controller as ``State.lambda_meas``), stamped with the new state
  out ``odom_topic`` (nav_msgs/Odometry, floating-base models: base pose in ``odom_frame``, twist in
      ``base_frame``, REP 105), before the joint state of the same stamp
  out ``/clock`` (rosgraph_msgs/Clock, when ``publish_clock``) for ``use_sim_time``
  in  ``/<controller_name>/commands`` (std_msgs/Float64MultiArray in the order of ``joints``)

Modes (parameter ``mode``):
  ``realtime``  wall-clock paced (``real_time_factor``), zero-order hold of the latest command: like hardware.
  ``lockstep``  as fast as possible and deterministic: one step of ``dt`` per received command, then the
                new state is published. With the controller answering every state, the closed loop equals
                the library's ``simulate`` (same law, same stepper). ``lockstep_resend`` re-publishes the
                state when no command came for that long (start-up, controller restarted).
Integration uses :class:`qv_dynamics.sim.Stepper` (projection method, sec. 6 of
`aghili-projection-operator`: integrate, Newton–Raphson position projection, velocity projection).
"""
from __future__ import annotations

import re
import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock as RosClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState

from ..errors import ConvergenceError, ModelError, NonFiniteError, QVError
from ..robots import scale_inertias
from ..sim.stepper import length_scale
from .health import EpisodeCounter
from .messages import array_to_wrench, arrays_to_joint_state, constraint_wrench
from .odometry import base_to_odometry
from .params import SIM_NODE
from .plant_node import PlantNodeMixin
from .raw import JointStateEncoder, WrenchEncoder

SUBSTEPS = (2, 4, 8)  # a failed step of dt is retried with dt/2, dt/4, dt/8


class StepperState:
    """The simulator's :class:`~qv_dynamics.sim.Stepper` plus the state it advances, stepped exactly as
    :func:`~qv_dynamics.sim.simulate` does: the section-6 correction is applied once to the initial
    state, t = k·dt, τ held over each step, and ``lam`` = λ at the start of the last step (what ``simulate``
    passes to the next controller call as ``State.lambda_meas``)."""

    def __init__(self, system, q0, qdot0, dt: float, method: str = "projection", integrator: str = "rk4", **kw):
        from ..sim.stepper import Stepper

        self.stepper = Stepper(system, method, integrator, **kw)
        self.dt = float(dt)
        self.k = 0
        q = system.check_q(q0).copy()
        qdot = np.asarray(qdot0, float).copy()
        if method == "projection":
            q, qdot = self.stepper.correct(q, qdot)
        self.q, self.qdot = q, qdot
        self.lam: np.ndarray | None = None
        self.rank = 0
        self.substep_retries = 0

    def _substeps(self, tau: np.ndarray, exc: Exception) -> tuple[np.ndarray, np.ndarray]:
        for k in SUBSTEPS:
            h = self.dt / k
            try:
                q, qdot = self.q, self.qdot
                for i in range(k):
                    q, qdot = self.stepper.step(q, qdot, tau, h, self.t + i * h)
            except (ConvergenceError, NonFiniteError):
                continue
            self.substep_retries += 1
            return q, qdot
        raise ConvergenceError(f"{exc} (also with {', '.join(map(str, SUBSTEPS))} substeps)") from None

    @property
    def t(self) -> float:
        return self.k * self.dt

    def warm(self) -> None:
        """One throwaway step from copies of the state with τ = 0: the first call of the compiled kernels
        loads them (measured ~18 ms on the Panda, 0.07-0.1 ms after), which would otherwise overrun the first
        paced step; q, q̇, k and the stall count are left as they were."""
        stalls = self.stepper.nr_stalls
        try:
            self.stepper.step(self.q.copy(), self.qdot.copy(), np.zeros_like(self.qdot), self.dt, self.t)
        except (QVError, np.linalg.LinAlgError):
            pass  # the real first step meets the same error and reports it
        self.stepper.nr_stalls = stalls

    def step(self, tau: np.ndarray) -> None:
        """One step of dt; a failed step (NR not converging, blow-up) is retried from the same state with
        2, 4, then 8 substeps (``substep_retries`` counts the rescues) before the error is raised."""
        try:
            self.q, self.qdot = self.stepper.step(self.q, self.qdot, tau, self.dt, self.t)
        except (ConvergenceError, NonFiniteError) as exc:
            self.q, self.qdot = self._substeps(tau, exc)
        self.lam = self.stepper.last.lam.copy()
        self.rank = self.stepper.last.rank
        self.k += 1


def topic_token(name: str) -> str:
    """A constraint name as a valid ROS topic token (``wall#1`` -> ``wall_1``)."""
    tok = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return tok if tok and not tok[0].isdigit() else f"c_{tok}"


class SimNode(PlantNodeMixin, Node):
    """Constrained simulator node; ``step_once(tau)`` is also callable in-process (bringup, tests)."""

    def __init__(self, node_name: str = "qv_sim", *, system=None, q0=None, qdot0=None, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        system, doc = self._declare_and_load(SIM_NODE, system)
        self.floating = bool(system.floating_base)  # the base goes out as nav_msgs/Odometry
        gp = self.get_parameter
        scale = float(gp("mass_scale").value)
        if scale != 1.0:
            scale_inertias(system, scale)
        self._configure_plant(system)
        init = doc.get("initial") or {}
        q0 = self._initial("q0", q0, init.get("q"), system.neutral(), to_q=True)
        qdot0 = self._initial("qdot0", qdot0, init.get("qdot"), np.zeros(system.nv))
        try:
            nr_tol = float(gp("nr_tol").value) * length_scale(system)  # nr_tol > 0: checked by the table
            # 1e3 nr_tol: an NR that stalls there has reached the rounding floor of this model's kinematics
            self.stepper = StepperState(system, q0, qdot0, self.dt, method=gp("method").value,
                                        integrator=gp("integrator").value, nr_tol=nr_tol, nr_floor=1e3 * nr_tol)
        except ValueError as exc:  # unknown method/integrator (QVErrors are ValueErrors too)
            raise exc if isinstance(exc, QVError) else ModelError(str(exc)) from None
        if self.mode == "realtime":
            self.stepper.warm()
        self.on_step = []  # in-process observers f(sim) called after every step (bringup recording)
        self.on_stop = []  # ... and when the simulation stops on an error
        self.tau = np.zeros(system.nv)
        self.rejects = EpisodeCounter(self.get_logger(), "effort commands")
        self.publish_clock = bool(gp("publish_clock").value)
        self.publish_wrench = bool(gp("publish_wrench").value)
        self.steps = 0
        self.error: str | None = None
        self.exit_code: int | None = None  # set when the simulation stopped for good (the runner exits with it)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        self._diag_prev = (time.monotonic(), 0)
        period = float(gp("diagnostics_period").value)
        if period > 0:
            self.create_timer(period, self.publish_diagnostics)
        self.pub_js = self.create_publisher(JointState, gp("joint_states_topic").value, 10)
        raw = bool(gp("raw_messages").value)
        self._js_encoder = JointStateEncoder.create(self.layout.names) if raw else None
        self.pub_clock = self.create_publisher(Clock, "/clock", 10) if self.publish_clock else None
        self.pub_odom = self.create_publisher(Odometry, gp("odom_topic").value, 10) if self.floating else None
        self.odom_frames = (gp("odom_frame").value, gp("base_frame").value)
        self.pub_wrench = {}
        for c in system.constraints:
            if c.frame_id >= 0:
                self.pub_wrench[c.name] = self.create_publisher(
                    WrenchStamped, f"~/{topic_token(c.name)}/wrench", 10)
        frames = {c.name: system.model.frames[c.frame_id].name for c in system.constraints if c.frame_id >= 0}
        self._wrench_encoders = {k: WrenchEncoder.create(f) for k, f in frames.items()} if raw else {}
        topic = gp("command_topic").value or f"/{gp('controller_name').value}/commands"
        self._subscribe_commands(topic)
        # pacing is wall-clock, whatever use_sim_time says
        self._start_pacing(clock=RosClock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(
            f"simulating '{system.name}' ({self.mode}, dt={self.dt} s): joints {self.layout.names}, "
            f"commands from {topic} in order {self.cmd_map.joints}, constraints {[c.name for c in system.constraints]}")

    # ------------------------------------------------------------------ state
    @property
    def t(self) -> float:
        return float(self.stepper.t)

    @property
    def q(self) -> np.ndarray:
        return self.stepper.q

    @property
    def qdot(self) -> np.ndarray:
        return self.stepper.qdot

    def _measured(self) -> tuple[np.ndarray, np.ndarray]:
        return self.stepper.q, self.stepper.qdot

    def publish_state(self) -> None:
        stamp = self._stamp()
        if self.publish_wrench and self.pub_wrench:
            self._publish_wrenches(stamp)  # before the joint state: a controller reacting to it has λ_meas
        if self.pub_odom is not None:
            self.pub_odom.publish(base_to_odometry(stamp, *self.odom_frames, self.q, self.qdot))
        enc, lay = self._js_encoder, self.layout
        if enc is None:
            self.pub_js.publish(arrays_to_joint_state(stamp, lay, self.q, self.qdot, self.tau_applied))
        else:  # the same message, written into kept bytes (raw_messages)
            self.pub_js.publish(enc.encode(stamp, lay.from_q(self.q), self.qdot[lay.v_index],
                                           self.tau_applied[lay.v_index]))

    def _publish_wrenches(self, stamp) -> None:
        lam = self.stepper.lam
        if lam is None or len(lam) != self.system.m:
            return
        data = self.system.data
        row = 0
        for c in self.system.active_constraints:
            pub = self.pub_wrench.get(c.name)
            if pub is not None and pub.get_subscription_count():  # a wrench nobody reads is not computed
                w = constraint_wrench(c, lam[row:row + c.size])
                Rt = data.oMf[c.frame_id].rotation.T  # world-aligned -> frame axes (sensor convention)
                enc = self._wrench_encoders.get(c.name)
                if enc is None:
                    frame = self.system.model.frames[c.frame_id].name
                    pub.publish(array_to_wrench(stamp, frame, np.concatenate([Rt @ w[:3], Rt @ w[3:]])))
                else:  # the same message, written into kept bytes (raw_messages)
                    pub.publish(enc.encode(stamp, Rt @ w[:3], Rt @ w[3:]))
            row += c.size

    def step_once(self, tau: np.ndarray | None = None) -> None:
        self.stepper.step(self._drive_tau(tau))
        self.steps += 1
        for f in self.on_step:
            f(self)

    def _advance(self, steps: int) -> bool:
        """Step; a solver error (NR not converging, blow-up) stops the simulation instead of the node."""
        try:
            return super()._advance(steps)
        except (QVError, np.linalg.LinAlgError) as exc:
            self._stop(exc)
            return False

    def _stop(self, exc: Exception) -> None:
        self.get_logger().error(f"simulation stopped for good at t={self.t:.4f} s: {exc}; the node exits (code 1)")
        self.mode = "stopped"
        self.error = str(exc)
        self.publish_diagnostics()
        self.exit_code = 1
        for f in self.on_stop:
            f(self)

    def publish_diagnostics(self) -> None:
        """The plant's status (:meth:`PlantNodeMixin.publish_plant_status`) plus substep rescues, NR stalls,
        the constraint residual and whether the stepper runs the compiled kernels; ERROR once the simulation
        stopped."""
        st = self.stepper.stepper
        self.publish_plant_status("simulator", {"substep_retries": self.stepper.substep_retries,
                                                "nr_stalls": st.nr_stalls, "phi_norm": st.phi_norm,
                                                "compiled_stepper": st.compiled}, self.error)


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_sim_node`` (``--ros-args --params-file config/<robot>.yaml``)."""
    from .runner import publish_if_lockstep, run_node

    return run_node("qv_sim_node", SimNode, argv, on_start=publish_if_lockstep)


if __name__ == "__main__":
    sys.exit(main())
