"""``qv_legged_controller_node``: :class:`~qv_control.laws.legged.LeggedLaw` behind ROS topics (issue 13).

  in  ``/joint_states`` (sensor_msgs/JointState, joint_state_broadcaster)
  in  ``odom_topic`` (nav_msgs/Odometry, default ``/odom``: the state estimator; base pose in the world
      frame, twist in the base frame, REP 105 — :mod:`qv_dynamics.ros.odometry`)
  out ``/<controller_name>/commands`` (std_msgs/Float64MultiArray, order of ``joints``), one per joint state
      whose stamp is within ``sync_tolerance`` of the latest odometry (a plant in lock-step publishes both
      with one stamp)

Parameters: ``model_config`` (YAML: ``robot`` with ``floating_base: true``, foot ``constraints``, optional
``plan`` and ``law``), ``feet`` (default: every constraint), ``plan`` (YAML mapping, see
:func:`qv_control.gait.plan_from_spec`; the parameter ``plan_yaml`` overrides it), the law gains ``kp``,
``kd``, ``kp_swing``, ``mu``, ``f_min``. A bad message is dropped and counted (logged once per episode);
a law error (a fall: coordinates singular, uncontrollable stance) is logged once and no command is sent.
"""
from __future__ import annotations

import sys

import numpy as np
import yaml
from nav_msgs.msg import Odometry
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from qv_dynamics.errors import ModelError, QVError
from qv_dynamics.ros.health import EpisodeCounter, reject_kind
from qv_dynamics.ros.messages import CommandMap, JointLayout, joint_state_to_arrays, stamp_to_sec
from qv_dynamics.ros.odometry import odometry_to_base
from qv_dynamics.ros.params import declare, load_model_config
from qv_dynamics.state import State

from ..gait import plan_from_spec
from ..laws.legged import LeggedLaw
from .params import LEGGED_CONTROLLER_NODE


class LeggedControllerNode(Node):
    """``law`` (a LeggedLaw) and ``system`` may be given in-process; otherwise built from the parameters."""

    def __init__(self, node_name: str = "qv_legged_controller", *, system=None, law: LeggedLaw | None = None,
                 **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        declare(self, LEGGED_CONTROLLER_NODE)
        gp = self.get_parameter
        doc: dict = {}
        if system is None:
            system, doc = load_model_config(gp("model_config").value, gp("robot_description").value, floating=True)
        if law is None:
            law = self._make_law(system, doc)
        self.system, self.law = system, law
        self.layout = JointLayout.from_system(system, floating=True)
        joints = [j for j in (gp("joints").value or []) if j] or list(self.layout.names)
        self.cmd_map = CommandMap(system, joints)
        self.sync = float(gp("sync_tolerance").value)
        self.js_rejects = EpisodeCounter(self.get_logger(), "joint states")
        self.odom_rejects = EpisodeCounter(self.get_logger(), "odometry")
        self.law_errors = EpisodeCounter(self.get_logger(), "control law")
        self.stats = {"commands": 0, "law_errors": 0}
        self._js = None          # (t, q, qdot) of the latest joint state
        self._odom = None        # (t, q_base, v_base)
        self._done = -np.inf
        self._msg = Float64MultiArray()
        topic = gp("command_topic").value or f"/{gp('controller_name').value}/commands"
        self.pub_cmd = self.create_publisher(Float64MultiArray, topic, 10)
        self.create_subscription(JointState, gp("joint_states_topic").value, self.on_joint_state, 10)
        self.create_subscription(Odometry, gp("odom_topic").value, self.on_odometry, 10)
        self.get_logger().info(f"legged controller: feet {law.feet}, joints {joints} -> {topic}, base from "
                               f"{gp('odom_topic').value}")

    def _make_law(self, system, doc: dict) -> LeggedLaw:
        gp = self.get_parameter
        feet = [f for f in (gp("feet").value or []) if f] or [c.name for c in system.constraints]
        text = gp("plan_yaml").value
        try:
            spec = yaml.safe_load(text) if text else doc.get("plan")
        except yaml.YAMLError as exc:
            raise ModelError(f"plan_yaml does not parse: {exc}") from None
        plan = plan_from_spec(feet, spec)
        return LeggedLaw(system, feet, plan=plan, kp=gp("kp").value, kd=gp("kd").value,
                         kp_swing=gp("kp_swing").value, mu=gp("mu").value, f_min=gp("f_min").value)

    # ------------------------------------------------------------------ callbacks
    def on_joint_state(self, msg: JointState) -> None:
        arrays = self.js_rejects.accept(joint_state_to_arrays, msg, self.layout)
        if arrays is not None:
            self._js = (stamp_to_sec(msg.header.stamp), arrays[0], arrays[1])
            self._try_compute()

    def on_odometry(self, msg: Odometry) -> None:
        base = self.odom_rejects.accept(odometry_to_base, msg)
        if base is not None:
            self._odom = (stamp_to_sec(msg.header.stamp), *base)
            self._try_compute()

    def _try_compute(self) -> None:
        if self._js is None or self._odom is None:
            return
        t, q, qdot = self._js
        if t <= self._done or abs(t - self._odom[0]) > self.sync:
            return
        self._done = t
        q, qdot = q.copy(), qdot.copy()
        q[:7], qdot[:6] = self._odom[1], self._odom[2]
        try:
            tau = self.law.compute(State(t=t, q=q, qdot=qdot))
        except QVError as exc:
            self.stats["law_errors"] += 1
            self.law_errors.reject(reject_kind(exc), str(exc))
            return
        self.law_errors.ok()
        self.pub_cmd.publish(self.cmd_map.to_message(tau, self._msg))
        self.stats["commands"] += 1


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_legged_controller_node`` (``--ros-args --params-file config/anymal_controller.yaml``)."""
    from qv_dynamics.ros.runner import run_node

    return run_node("qv_legged_controller_node", LeggedControllerNode, argv)


if __name__ == "__main__":
    sys.exit(main())
