"""``qv_legged_mujoco_node``: a floating-base robot on the MuJoCo floor (:mod:`qv_dynamics.plants.mujoco_legged`)
behind the ros2_control topic contract plus the base state a legged robot's estimator publishes:

  out ``/joint_states`` (sensor_msgs/JointState: the 1-DoF joints; effort = applied, clipped τ)
  out ``odom_topic`` (nav_msgs/Odometry, default ``/odom``): base pose in ``odom_frame``, twist in
      ``base_frame`` (REP 105; :mod:`qv_dynamics.ros.odometry`), same stamp as the joint state
  out ``/clock`` (rosgraph_msgs/Clock, when ``publish_clock``)
  out ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, once a second: real-time factor, dropped real time,
      clipped and rejected commands; :mod:`qv_dynamics.ros.plant_node`)
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

from ..errors import ModelError
from ..plants.mujoco_legged import FloorScene, LeggedMujocoPlant, standing_configuration
from .messages import arrays_to_joint_state
from .odometry import base_to_odometry
from .params import LEGGED_MUJOCO_NODE
from .plant_node import PlantNodeMixin


class LeggedMujocoNode(PlantNodeMixin, Node):
    """Legged MuJoCo plant node; ``on_step`` callables run after every control period (ground truth)."""

    floating = True

    def __init__(self, node_name: str = "qv_legged_mujoco", *, system=None, plant: LeggedMujocoPlant | None = None,
                 q0=None, on_step: Callable | None = None, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        system, doc = self._declare_and_load(LEGGED_MUJOCO_NODE, system)
        gp = self.get_parameter
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
        topic = self._plant_topics(on_step)
        self.odom_frame, self.base_frame = gp("odom_frame").value, gp("base_frame").value
        self.pub_odom = self.create_publisher(Odometry, gp("odom_topic").value, 10)
        self._start_pacing()
        self.get_logger().info(
            f"legged MuJoCo plant '{system.name}' ({self.mode}, dt={self.dt} s, physics {plant.model.opt.timestep} s, "
            f"feet {plant.feet}, μ={plant.scene.friction}): joints on {self.pub_js.topic_name}, base on "
            f"{self.pub_odom.topic_name} ({self.odom_frame} -> {self.base_frame}), commands from {topic}")

    def publish_state(self) -> None:
        stamp = self._stamp()
        q, v = self.plant.q, self.plant.qdot
        self.pub_odom.publish(base_to_odometry(stamp, self.odom_frame, self.base_frame, q, v))
        self.pub_js.publish(arrays_to_joint_state(stamp, self.layout, q, v, self.plant.last_tau))


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_legged_mujoco_node`` (``--ros-args --params-file config/anymal_mujoco.yaml``)."""
    from .runner import publish_if_lockstep, run_node

    return run_node("qv_legged_mujoco_node", LeggedMujocoNode, argv, on_start=publish_if_lockstep)


if __name__ == "__main__":
    sys.exit(main())
