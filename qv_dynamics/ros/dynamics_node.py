"""``qv_dynamics_node``: publishes the quasi-velocity decomposition of the measured state (SPEC §2, §5).

Thin adapter around :meth:`ConstrainedSystem.evaluate` and :func:`quasi_decompose`
(paper `aghili-quasi-velocities`: v = Qᵀq̇ eq. 6a, v_r = V₂ᵀv eq. 13, u_v/u_ξ eq. 18b/21c,
ξ = u_ξ + Γ_ξ v_r eq. 20–21, λ = (Λᵀ)⁺V₁ξ, K = ½‖v_r‖² eq. 22).

Subscribes
  ``/joint_states`` (sensor_msgs/JointState; any order, name-mapped; ``effort`` = applied τ)
  ``odom_topic`` (nav_msgs/Odometry, floating-base models only: the base pose in the world frame and its
      twist in the base frame, REP 105; the latest one completes each joint state)
  ``command_topic`` (std_msgs/Float64MultiArray, optional: τ when /joint_states carries no effort)
  ``wrench_topics`` (geometry_msgs/WrenchStamped, optional, one per name in ``wrench_constraints``)
  ``active_constraints_topic`` (std_msgs/String, optional, transient local): the comma-separated names of the
      active constraints (a controller's contact switches, e.g. ``/qv_controller/active_constraints``); the
      model's constraints are switched to match (the basis is re-seeded at the next sample)
Publishes (all sensor_msgs/JointState: name = labels, position = values, stamp = the input's stamp; each
topic only while it has a subscriber, so an unwatched node costs the loop its input messages only)
  ``~/v``  ``~/v_r``  ``~/xi``  ``~/u_v``  ``~/u_xi``  ``~/lambda``
  ``~/lambda_measured`` (the ``wrench_topics`` rotated to λ's rows; advertised only when they are set)
  ``~/scalars`` (rank, m, n, kinetic_energy, condition, phi_norm, eval_time_ms, basis_reseeded)
  ``~/markers`` (visualization_msgs/MarkerArray: constrained frames and constraint-force arrows)
  ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, every ``diagnostics_period`` s): counts, the
      callback time (mean/max), missed deadlines (a callback longer than the input period) and the
      decimation (``decimation: 0``: chosen to use at most ``load_budget`` of a core, changes logged)
Bad input (NaN, wrong sizes, missing joints) is dropped, counted and logged once per episode.
"""
from __future__ import annotations

import sys
import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from geometry_msgs.msg import Point, WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray, String
from visualization_msgs.msg import Marker, MarkerArray

from ..errors import ModelError, QVError, as_vector
from ..quasi_sampler import QuasiSampler
from .health import EpisodeCounter, diagnostic_array, reject_kind
from .messages import (
    CommandMap,
    JointLayout,
    joint_state_to_arrays,
    labelled,
    sensor_wrench_rows,
    stamp_to_sec,
    wrench_to_array,
)
from .odometry import odometry_to_base
from .pacing import Pacer
from .params import DYNAMICS_NODE, declare, node_model_config
from .raw import input_qos, subscribe_joint_states, subscribe_wrench
from .stamps import FUTURE, OLD, StampGate, stamp_reason

SCALARS = ("rank", "m", "n", "kinetic_energy", "condition", "phi_norm", "eval_time_ms", "basis_reseeded")
QUANTITIES = ("v", "v_r", "xi", "u_v", "u_xi", "lambda", "lambda_measured", "scalars")


class DynamicsNode(Node):
    """Evaluates the constrained model on every /joint_states message and publishes the quasi-variables."""

    def __init__(self, node_name: str = "qv_dynamics", *, system=None, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        declare(self, DYNAMICS_NODE)
        gp = self.get_parameter
        if system is None:
            system, _ = node_model_config(self, floating=True)
        self.system = system
        # a floating base (legged robot) comes from the state estimator's nav_msgs/Odometry (REP 105)
        self.floating = bool(system.floating_base)
        self.layout = JointLayout.from_system(system, floating=self.floating)
        self.base: tuple | None = None
        self.fixed_frame = gp("fixed_frame").value or system.model.frames[1].name
        self.force_scale = float(gp("force_scale").value)
        self.publish_markers = bool(gp("publish_markers").value)
        self.markers_period = float(gp("markers_period").value)
        try:
            self.pacer = Pacer(int(gp("decimation").value), float(gp("load_budget").value),
                               on_change=self._decimation_changed)
        except ValueError as exc:
            raise QVError(f"dynamics node: {exc}") from None
        self._t_markers = -float("inf")
        self.condition_warn = float(gp("condition_warn").value)
        # v = Qᵀq̇ has one component per velocity index: the joint's name (root_joint.vx … .wz for a base)
        self.v_labels = [f"v.{nm}" for nm in system.velocity_names]
        self.rejects = EpisodeCounter(self.get_logger(), "joint_states")
        self.stamps = StampGate(gp("stamp_future_tolerance").value)
        self.odom_rejects = EpisodeCounter(self.get_logger(), "odometry")
        self._msgs: dict[str, JointState] = {}
        self._label_cache: dict = {}
        self.sampler = QuasiSampler(system)  # evaluate + quasi_decompose(prev): passes + one compiled call
        self.tau_cmd: np.ndarray | None = None
        self.lam_meas: dict[str, tuple] = {}
        self.wrench_sign = float(gp("wrench_sign").value)
        self.stats = {"messages": 0, "reseeds": 0, "eval_ms_sum": 0.0, "eval_ms_max": 0.0, "eval_n": 0,
                      "no_effort": 0}
        self.last = {}
        # ~/lambda_measured only where there is something to measure it (wrench_topics): not advertised otherwise
        sensed = any(gp("wrench_topics").value)
        self.pubs = {k: self.create_publisher(JointState, f"~/{k}", 10) for k in QUANTITIES
                     if sensed or k != "lambda_measured"}
        self.pub_markers = self.create_publisher(MarkerArray, "~/markers", 10)
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", 10)
        qos = input_qos(max(1, int(gp("joint_states_queue").value)), bool(gp("best_effort_inputs").value))
        subscribe_joint_states(self, gp("joint_states_topic").value, self.on_joint_states, qos,
                               bool(gp("raw_messages").value),
                               lambda exc: self.rejects.reject(reject_kind(exc), str(exc)))
        if self.floating:
            self.create_subscription(Odometry, gp("odom_topic").value, self.on_odometry, 10)
        cmd_topic = gp("command_topic").value
        if cmd_topic:
            self.cmd_map = CommandMap(system, [j for j in gp("joints").value if j])
            self.cmd_rejects = EpisodeCounter(self.get_logger(), cmd_topic)
            self.create_subscription(Float64MultiArray, cmd_topic, self.on_command, 10)
        topics = [t for t in gp("wrench_topics").value if t]
        cons = [c for c in gp("wrench_constraints").value if c]
        if len(topics) != len(cons):
            raise QVError(f"wrench_topics ({len(topics)}) and wrench_constraints ({len(cons)}) must pair up")
        self.wrench_rejects = EpisodeCounter(self.get_logger(), "wrench")
        for topic, cname in zip(topics, cons):
            c = system.constraint(cname)  # UnknownNameError if absent
            subscribe_wrench(self, topic, lambda m, c=c: self.on_wrench(c, m), bool(gp("raw_messages").value),
                             lambda exc: self.wrench_rejects.reject(reject_kind(exc), str(exc)))
        active_topic = gp("active_constraints_topic").value
        if active_topic:
            self.create_subscription(String, active_topic, self.on_active_constraints,
                                     QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
        self._cpu_mark = (time.monotonic(), time.process_time())
        self._lost_reported = 0
        period = float(gp("diagnostics_period").value)
        if period > 0:
            self.create_timer(period, self.publish_diagnostics)
        self.get_logger().info(
            f"model '{system.name}': joints {self.layout.names}, constraint rows {system.row_labels}; "
            f"publishing under {self.get_fully_qualified_name()}/")

    # ------------------------------------------------------------------ inputs
    def on_command(self, msg: Float64MultiArray) -> None:
        try:
            self.tau_cmd = self.cmd_map.from_message(msg)
            self.cmd_rejects.ok()
        except QVError as exc:
            self.cmd_rejects.reject(reject_kind(exc), str(exc))

    def on_wrench(self, constraint, msg: WrenchStamped) -> None:
        """A force sensor measuring the wrench the robot applies at ``constraint``'s frame, in that frame's
        axes (rotated to world-aligned axes, the axes of λ, with the kinematics of the next joint state)."""
        try:
            # kept in the sensor's axes; rotated when published
            self.lam_meas[constraint.name] = (constraint, self.wrench_sign * wrench_to_array(msg))
            self.wrench_rejects.ok()
        except QVError as exc:
            self.wrench_rejects.reject(reject_kind(exc), str(exc))

    def on_active_constraints(self, msg: String) -> None:
        """Switch the model's constraints to the named set (unknown names: logged, the set left as it is)."""
        names = {n.strip() for n in msg.data.split(",") if n.strip()}
        known = {c.name for c in self.system.constraints}
        if names - known:
            self.get_logger().warning(f"active constraints {sorted(names - known)} unknown to the model; ignored")
            return
        for c in self.system.constraints:
            if c.active != (c.name in names):
                self.system.set_active(c.name, c.name in names)
        self.stats["switches"] = self.stats.get("switches", 0) + 1

    @property
    def decimation(self) -> int:
        return self.pacer.k

    def _decimation_changed(self, old: int, new: int, cost: float, period: float) -> None:
        text = (f"decimation {old} -> {new} (evaluating 1 of every {new} /joint_states messages): a callback "
                f"costs {1e3 * cost:.3f} ms, {1e3 * period:.3f} ms between states, load_budget {self.pacer.budget:g}")
        if new > old:  # rclpy: one severity per logging call site
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)

    def on_odometry(self, msg: Odometry) -> None:
        """The latest base pose and twist (used with the next joint state)."""
        try:
            self.base = odometry_to_base(msg)
            self.odom_rejects.ok()
        except QVError as exc:
            self.odom_rejects.reject(reject_kind(exc), str(exc))

    def on_joint_states(self, msg: JointState) -> None:
        t_in = time.perf_counter()
        try:  # every message is checked (and a bad one counted), also those decimation skips
            q, qdot, tau = joint_state_to_arrays(msg, self.layout)
            if self.floating:  # the base from the latest odometry
                if self.base is None:
                    raise ModelError("floating base: no nav_msgs/Odometry received yet")
                q[:7], qdot[:6] = self.base
        except QVError as exc:
            self.rejects.reject(reject_kind(exc), str(exc))
            return
        stamp = msg.header.stamp   # (a raw view builds it when asked: once)
        t, now = stamp_to_sec(stamp), self.get_clock().now().nanoseconds * 1e-9
        kind = self.stamps.check(t, now)
        if kind is not None:
            self.rejects.reject(kind, stamp_reason(kind, t, now, self.stamps.t_last, self.stamps.future_tolerance))
            return
        if not self.pacer.arrive(t_in, t):
            return
        try:
            if tau is None:
                tau = self.tau_cmd
                if tau is None:
                    self.stats["no_effort"] += 1
            t0 = time.perf_counter()
            prev = self.sampler.prev
            terms, qs = self.sampler.sample(self.system.check_q(q), as_vector("qdot", qdot, self.system.nv), tau)
            dt_ms = 1e3 * (time.perf_counter() - t0)
        except (QVError, ValueError, np.linalg.LinAlgError) as exc:
            self.rejects.reject(reject_kind(exc), str(exc))
            return
        self.rejects.ok()
        if qs.rank_changed:
            self.stats["reseeds"] += 1
            old = prev.rank if prev is not None else 0
            self.get_logger().info(f"constraint rank {old} -> {qs.rank}: null-space basis re-seeded "
                                   "(v_r/ξ components are not continuous across this message)")
        st = self.stats
        st["messages"] += 1
        st["eval_ms_sum"] += dt_ms
        st["eval_n"] += 1
        st["eval_ms_max"] = max(st["eval_ms_max"], dt_ms)
        self.publish(stamp, terms, qs, dt_ms)
        self.pacer.done(time.perf_counter() - t_in)

    # ------------------------------------------------------------------ outputs
    def publish(self, stamp, terms, qs, dt_ms: float) -> None:
        r, n = qs.rank, terms.n
        self.last = {"stamp": stamp_to_sec(stamp), "rank": r, "condition": qs.condition, "M": terms.M,
                     "m": terms.m, "kinetic_energy": qs.kinetic_energy}
        pubs = self.pubs
        out = self._out
        out("v", stamp, self.v_labels, qs.v)
        out("v_r", stamp, self._labels("v_r", n - r), qs.v_r)
        if qs.xi is not None:
            out("xi", stamp, self._labels("xi", r), qs.xi)
            out("u_v", stamp, self._labels("u_v", n - r), qs.u_v)
            out("u_xi", stamp, self._labels("u_xi", r), qs.u_xi)
            out("lambda", stamp, terms.row_labels, qs.lambda_)
        if self.lam_meas and pubs["lambda_measured"].get_subscription_count():
            labels, vals = [], []
            data = self.system.data  # frame placements of this joint state (updated by evaluate)
            for c in self.system.active_constraints:
                if c.name in self.lam_meas:
                    w = self.lam_meas[c.name][1]
                    R = data.oMf[c.frame_id].rotation if c.frame_id >= 0 else np.eye(3)
                    labels += c.row_labels
                    vals += list(sensor_wrench_rows(c, R, w))
            pubs["lambda_measured"].publish(labelled(stamp, labels, vals))
        phi_norm = float(np.linalg.norm(terms.phi)) if terms.phi.size else 0.0
        out("scalars", stamp, SCALARS,
            [r, terms.m, n, qs.kinetic_energy, qs.condition, phi_norm, dt_ms, float(qs.rank_changed)])
        t = self.last["stamp"]
        due = t - self._t_markers >= self.markers_period or t < self._t_markers
        if self.publish_markers and due and self.pub_markers.get_subscription_count():
            self._t_markers = t
            self.pub_markers.publish(self.markers(stamp, terms, qs))

    def _labels(self, prefix: str, k: int) -> list[str]:
        key = (prefix, k)
        lab = self._label_cache.get(key)
        if lab is None:
            lab = self._label_cache[key] = [f"{prefix}.{i}" for i in range(k)]
        return lab

    def _out(self, key: str, stamp, labels, values) -> None:
        """Publish a labelled vector, reusing one message object per topic (the 1 kHz path); nothing is built
        or sent on a topic without a subscriber (a publish costs ~20 µs even then)."""
        if not self.pubs[key].get_subscription_count():
            return
        msg = self._msgs.get(key)
        if msg is None or list(msg.name) != list(labels):
            msg = self._msgs[key] = labelled(stamp, labels, values)
        else:
            msg.header.stamp = stamp
            msg.position = [float(x) for x in values]
        self.pubs[key].publish(msg)

    def markers(self, stamp, terms, qs) -> MarkerArray:
        """A sphere at each constrained frame and an arrow of the force the robot applies there (λ, in N)."""
        arr = MarkerArray()
        data = self.system.data
        row = 0
        lam = qs.lambda_
        for k, c in enumerate(self.system.active_constraints):
            size = c.size
            if c.frame_id < 0:
                row += size
                continue
            p = data.oMf[c.frame_id].translation
            s = Marker()
            s.header.stamp, s.header.frame_id = stamp, self.fixed_frame
            s.ns, s.id, s.type, s.action = "qv_constrained_frames", k, Marker.SPHERE, Marker.ADD
            s.pose.position = Point(x=float(p[0]), y=float(p[1]), z=float(p[2]))
            s.pose.orientation.w = 1.0
            s.scale.x = s.scale.y = s.scale.z = 0.04
            s.color.r, s.color.g, s.color.b, s.color.a = 0.1, 0.5, 1.0, 0.8
            s.text = c.name
            arr.markers.append(s)
            if lam is not None:
                f = np.zeros(6)
                f[c.axis_idx] = lam[row:row + size]
                a = Marker()
                a.header.stamp, a.header.frame_id = stamp, self.fixed_frame
                a.ns, a.id, a.type, a.action = "qv_constraint_forces", k, Marker.ARROW, Marker.ADD
                tip = p + self.force_scale * f[:3]
                a.points = [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])),
                            Point(x=float(tip[0]), y=float(tip[1]), z=float(tip[2]))]
                a.pose.orientation.w = 1.0
                a.scale.x, a.scale.y, a.scale.z = 0.01, 0.02, 0.03
                a.color.r, a.color.g, a.color.b, a.color.a = 1.0, 0.2, 0.1, 1.0
                a.text = f"{c.name}: |F| = {np.linalg.norm(f[:3]):.3g} N"
                arr.markers.append(a)
            row += size
        return arr

    def publish_diagnostics(self) -> None:
        st, last = self.stats, self.last
        rej = self.rejects.counts
        level = DiagnosticStatus.OK
        msg = "ok"
        if not last:
            level, msg = DiagnosticStatus.WARN, "no valid /joint_states yet"
        elif last["condition"] > self.condition_warn:
            level, msg = DiagnosticStatus.WARN, f"near-singular constraints (condition {last['condition']:.3g})"
        elif self.rejects.total:
            level, msg = DiagnosticStatus.WARN, f"{self.rejects.total} joint_states messages rejected"
        mean = st["eval_ms_sum"] / st["eval_n"] if st["eval_n"] else 0.0
        values = {
            "rank": last.get("rank", -1), "constraint_rows": last.get("m", -1),
            "condition_Lambda": last.get("condition", float("nan")),
            "condition_M": float(np.linalg.cond(last["M"])) if last else float("nan"),
            "kinetic_energy": last.get("kinetic_energy", float("nan")), "basis_reseeds": st["reseeds"],
            "eval_time_ms_mean": mean, "eval_time_ms_max": st["eval_ms_max"], "messages": st["messages"],
            "rejected_nonfinite": rej.get("nonfinite", 0), "rejected_size": rej.get("size", 0),
            "rejected_names": rej.get("names", 0), "rejected_model": rej.get("model", 0),
            "rejected_old_stamp": rej.get(OLD, 0), "rejected_future_stamp": rej.get(FUTURE, 0),
            "unknown_parameters": len(self.unknown_parameters),
            "messages_without_effort": st["no_effort"],
        }
        lost = self.pacer.lost - self._lost_reported
        if level == DiagnosticStatus.OK and (lost or self.pacer.k > 1):  # an observer may skip states: say so
            msg = f"ok; decimation {self.pacer.k}, {lost} input states not received since the last report"
        self._lost_reported = self.pacer.lost
        values.update(self.pacer.values())
        # the whole process (middleware threads included) as a share of one core since the last report:
        # receiving every 1 kHz message costs it even where decimation skips the evaluation
        wall, cpu = time.monotonic(), time.process_time()
        values["process_cpu_share"] = (cpu - self._cpu_mark[1]) / max(wall - self._cpu_mark[0], 1e-9)
        self._cpu_mark = (wall, cpu)
        self.pub_diag.publish(diagnostic_array(self.get_clock().now().to_msg(), level,
                                               f"{self.get_name()}: constrained model", msg, self.system.name, values))
        st["eval_ms_max"] = 0.0


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_dynamics_node`` (ROS arguments: ``--ros-args --params-file config/...yaml``)."""
    from .runner import run_node

    return run_node("qv_dynamics_node", DynamicsNode, argv)


if __name__ == "__main__":
    sys.exit(main())
