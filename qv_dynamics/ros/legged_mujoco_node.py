"""``qv_legged_mujoco_node``: a floating-base robot on the MuJoCo floor (:mod:`qv_dynamics.plants.mujoco_legged`)
behind the ros2_control topic contract plus the base state a legged robot's estimator publishes:

  out ``/joint_states`` (sensor_msgs/JointState: the 1-DoF joints; effort = applied, clipped τ)
  out ``odom_topic`` (nav_msgs/Odometry, default ``/odom``): base pose in ``odom_frame``, twist in
      ``base_frame`` (REP 105; :mod:`qv_dynamics.ros.odometry`), same stamp as the joint state
  out ``/clock`` (rosgraph_msgs/Clock, when ``publish_clock``)
  in  ``/<controller_name>/commands`` (std_msgs/Float64MultiArray in the order of ``joints``)

Modes ``realtime`` / ``lockstep`` as the other plant nodes (:mod:`qv_dynamics.ros.plant_node`). The model
YAML (``model_config``) has ``robot`` (``floating_base: true``), the foot ``constraints`` (unused by the
plant, which has real contacts), ``scene`` (:class:`~qv_dynamics.plants.mujoco_legged.FloorScene` keys) and
``initial.posture`` (joint angles; the base height puts the feet on the floor).
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np
from nav_msgs.msg import Odometry
from rclpy.node import Node
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from ..errors import ModelError
from ..plants.mujoco_legged import FloorScene, LeggedMujocoPlant, standing_configuration
from .health import EpisodeCounter
from .messages import arrays_to_joint_state, sec_to_stamp
from .odometry import base_to_odometry
from .params import LEGGED_MUJOCO_NODE, declare, load_model_config
from .plant_node import PlantNodeMixin


class LeggedMujocoNode(PlantNodeMixin, Node):
    """Legged MuJoCo plant node; ``on_step`` callables run after every control period (ground truth)."""

    floating = True

    def __init__(self, node_name: str = "qv_legged_mujoco", *, system=None, plant: LeggedMujocoPlant | None = None,
                 q0=None, on_step: Callable | None = None, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        declare(self, LEGGED_MUJOCO_NODE)
        gp = self.get_parameter
        doc: dict = {}
        if system is None:
            system, doc = load_model_config(gp("model_config").value, gp("robot_description").value, floating=True)
        if not system.floating_base:
            raise ModelError("qv_legged_mujoco_node needs a floating-base model (robot.floating_base: true)")
        self._configure_plant(system)
        if plant is None:
            plant = LeggedMujocoPlant(system, FloorScene.from_dict(doc.get("scene")))
        if plant.joint_names != self.layout.names:
            raise ModelError(f"plant joints {plant.joint_names} differ from the model's {self.layout.names}")
        self.plant = plant
        if q0 is None:
            init = doc.get("initial") or {}
            q0 = standing_configuration(system, joints=init.get("posture") or {}, feet=plant.feet,
                                        foot_radius=plant.scene.foot_radius,
                                        penetration=float(init.get("penetration", 0.0)))
        plant.reset(np.asarray(q0, float))
        self.on_step: list[Callable] = [on_step] if on_step is not None else []
        self.tau = np.zeros(system.nv)
        self.rejects = EpisodeCounter(self.get_logger(), "effort commands")
        self.publish_clock = bool(gp("publish_clock").value)
        self.steps = 0
        self.odom_frame, self.base_frame = gp("odom_frame").value, gp("base_frame").value
        self.pub_js = self.create_publisher(JointState, gp("joint_states_topic").value, 10)
        self.pub_odom = self.create_publisher(Odometry, gp("odom_topic").value, 10)
        self.pub_clock = self.create_publisher(Clock, "/clock", 10) if self.publish_clock else None
        topic = gp("command_topic").value or f"/{gp('controller_name').value}/commands"
        self.create_subscription(Float64MultiArray, topic, self.on_command, 10)
        self._start_pacing()
        self.get_logger().info(
            f"legged MuJoCo plant '{system.name}' ({self.mode}, dt={self.dt} s, physics {plant.model.opt.timestep} s, "
            f"feet {plant.feet}, μ={plant.scene.friction}): joints on {self.pub_js.topic_name}, base on "
            f"{self.pub_odom.topic_name} ({self.odom_frame} -> {self.base_frame}), commands from {topic}")

    @property
    def t(self) -> float:
        return self.plant.time

    def publish_state(self) -> None:
        stamp = sec_to_stamp(self.t)
        q, v = self.plant.q, self.plant.qdot
        if self.pub_clock is not None:
            self.pub_clock.publish(Clock(clock=stamp))
        self.pub_odom.publish(base_to_odometry(stamp, self.odom_frame, self.base_frame, q, v))
        self.pub_js.publish(arrays_to_joint_state(stamp, self.layout, q, v, self.plant.last_tau))


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_legged_mujoco_node`` (``--ros-args --params-file config/anymal_mujoco.yaml``)."""
    from .runner import publish_if_lockstep, run_node

    return run_node("qv_legged_mujoco_node", LeggedMujocoNode, argv, on_start=publish_if_lockstep)


if __name__ == "__main__":
    sys.exit(main())
