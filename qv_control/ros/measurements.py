"""The measured inputs of ``qv_controller_node`` per state (:class:`Measurements`, mixed into
:class:`~qv_control.ros.controller_node.ControllerNode`): /joint_states, the free body's nav_msgs/Odometry
and the force/torque sensors' geometry_msgs/WrenchStamped.

Each is read from its serialized bytes (``raw_messages``; rclpy builds no message) into preallocated arrays
(:mod:`qv_dynamics.ros.state_input`, :mod:`qv_dynamics.ros.odometry`), the stamps as ints and seconds; the
stamp gate compares with the system clock as a float (the ROS clock object only while it follows /clock,
``use_sim_time``: ``get_clock().now()`` costs ~4–7 µs a state). A joint state is checked (names, sizes,
finite values, stamp: dropped and counted otherwise) and answered at once, or with a free body first paired
with the odometry of its stamp (:class:`~qv_dynamics.ros.free_body.FreeBodySync`). A wrench is kept in its
sensor's axes and rotated to λ's world-aligned rows with the kinematics of the state it is used with
(:class:`~qv_dynamics.ros.state_input.SensorWrenches`). Per state the node builds what the law API takes
(one :class:`~qv_dynamics.state.State`, its q and q̇ copied out of the reading buffers) and nothing else.
"""
from __future__ import annotations

import time

from geometry_msgs.msg import WrenchStamped

from qv_dynamics.errors import ModelError, QVError
from qv_dynamics.ros.health import reject_kind
from qv_dynamics.ros.odometry import check_base, subscribe_odometry
from qv_dynamics.ros.raw import input_qos, subscribe_joint_states, subscribe_wrench
from qv_dynamics.ros.stamps import stamp_reason
from qv_dynamics.ros.state_input import JointStateReader, SensorWrenches


class Measurements:
    """The subscriptions and callbacks of the module doc; the node provides ``_control(t, q, q̇, stamp,
    effort)`` (``stamp``: (sec, nanosec) of the state answered)."""

    def _subscribe_measurements(self, odom_topic: str) -> None:
        """/joint_states (``best_effort_inputs``, ``raw_messages``), the odometry and the wrench sensors."""
        gp = self.get_parameter
        raw = bool(gp("raw_messages").value)
        qos = input_qos(max(1, int(gp("joint_states_queue").value)), bool(gp("best_effort_inputs").value))
        self.reader = JointStateReader(self.layout)
        self._sim_clock = self.get_clock().ros_time_is_active
        subscribe_joint_states(self, gp("joint_states_topic").value, self.on_joint_states, qos, raw,
                               lambda exc: self.rejects["joint_states"].reject(reject_kind(exc), str(exc)))
        if odom_topic:   # the freshest, as the joint states
            subscribe_odometry(self, odom_topic, self.on_odometry, qos, raw,
                               lambda exc: self.rejects["odometry"].reject(reject_kind(exc), str(exc)))
        topics, cons = self._str_list("wrench_topics"), self._str_list("wrench_constraints")
        if len(topics) != len(cons):
            raise ModelError(f"wrench_topics ({len(topics)}) and wrench_constraints ({len(cons)}) must pair up")
        self.wrenches = SensorWrenches(self.system, [self.system.constraint(c) for c in cons],
                                       float(gp("wrench_sign").value))
        for topic, cname in zip(topics, cons):
            subscribe_wrench(self, topic, lambda m, c=cname: self.on_wrench(c, m), raw, lambda exc: self.rejects[
                "wrench"].reject(reject_kind(exc), str(exc)), depth=qos.depth)   # the freshest, as the states

    def clock_now(self) -> float:
        """The node clock [s] the stamps are checked against: the system clock, or while the ROS clock follows
        /clock (``use_sim_time``; looked up at configure and by the watchdog) that clock."""
        if self._sim_clock:
            return self.get_clock().now().nanoseconds * 1e-9
        return time.time()

    def on_joint_states(self, msg) -> None:
        reader = self.reader
        try:
            t = reader.read(msg)
        except QVError as exc:
            self.rejects["joint_states"].reject(reject_kind(exc), str(exc))
            return
        now = self.clock_now()
        kind = self.stamps.check(t, now)
        if kind is not None:
            self.rejects["joint_states"].reject(kind, stamp_reason(kind, t, now, self.stamps.t_last,
                                                                   self.stamps.future_tolerance))
            return
        self.rejects["joint_states"].ok()
        stamp = (reader.sec, reader.nanosec)
        if self.free_body is not None:
            self.free_body.add_state(t, reader.q, reader.qdot, stamp)  # an unpaired previous one is counted
            self._control_free_body()
            return
        self._control(t, reader.q.copy(), reader.qdot.copy(), stamp, reader.effort if reader.has_effort else None)

    def on_odometry(self, reader) -> None:
        """``reader``: the :class:`~qv_dynamics.ros.odometry.OdometryReader` holding the message's values."""
        try:
            check_base(reader.base)
        except QVError as exc:
            self.rejects["odometry"].reject(reject_kind(exc), str(exc))
            return
        self.rejects["odometry"].ok()
        self.free_body.add_odometry(reader.t, reader.base)
        self._control_free_body()

    def _control_free_body(self) -> None:
        state = self.free_body.ready()
        if state is not None:
            self._control(*state)

    def on_wrench(self, constraint: str, msg) -> None:
        """Keep the wrench (a message, or its six values read from the bytes) in the sensor frame's axes; it is
        rotated to world-aligned axes (the axes of λ) with the kinematics of the joint state it is used with."""
        try:
            if isinstance(msg, WrenchStamped):
                f, t = msg.wrench.force, msg.wrench.torque
                msg = (f.x, f.y, f.z, t.x, t.y, t.z)
            self.wrenches.store(constraint, msg)
            self.rejects["wrench"].ok()
            if self.task_layer is not None:
                self.task_layer.on_wrench()
        except QVError as exc:
            self.rejects["wrench"].reject(reject_kind(exc), str(exc))


__all__ = ["Measurements"]
