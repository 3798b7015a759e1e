"""``qv_loop_plant_node``: the MuJoCo weld plant (:mod:`qv_dynamics.plants.mujoco_loops`) behind the topics of
ros2_control and of a state estimator: arms holding a free object through weld grasps.

  out ``/joint_states`` (sensor_msgs/JointState: the 1-DoF joints; position, velocity, effort = applied τ)
  out ``odom_topic`` (nav_msgs/Odometry): the free-flyer joint 1 (the object) — pose in ``odom_frame``, twist
      in ``base_frame`` (= the object's frame; SPEC §1, REP 105), stamped like the joint state
  out ``~/<loop closure>/wrench`` (geometry_msgs/WrenchStamped), one per weld: the wrench the hand applies
      to the object at frame_a (a wrist force/torque sensor), in frame_a's axes (frame_id = frame_a):
      rotated to world axes it is that constraint's λ rows
  out ``/clock`` (rosgraph_msgs/Clock, when ``publish_clock``)
  out ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, once a second: real-time factor, dropped real time,
      clipped and rejected commands; :mod:`qv_dynamics.ros.plant_node`)
  in  ``/<controller_name>/commands`` (std_msgs/Float64MultiArray in the order of ``joints``)

Modes ``realtime`` / ``lockstep`` as the other plant nodes (:mod:`qv_dynamics.ros.plant_node`). The model
config's loop closures (6 axes each) become the welds; the plant starts at ``initial.q`` of the config.
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np
from geometry_msgs.msg import WrenchStamped
from nav_msgs.msg import Odometry
from rclpy.clock import Clock as SteadyClock
from rclpy.clock import ClockType
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data

from ..plants.mujoco_loops import MujocoLoopPlant
from .messages import array_to_wrench, arrays_to_joint_state
from .odometry import base_to_odometry
from .params import LOOP_PLANT_NODE
from .plant_node import PlantNodeMixin


class LoopPlantNode(PlantNodeMixin, Node):
    """``plant`` (a :class:`MujocoLoopPlant`, e.g. with :class:`PlantConditions`) may be passed in-process;
    ``on_step`` callables run after every control period with the node."""

    floating = True   # joint 1 (the held object's free-flyer) is published as odometry, not in /joint_states

    def __init__(self, node_name: str = "qv_loop_plant", *, system=None, plant: MujocoLoopPlant | None = None,
                 q0=None, on_step: Callable | None = None, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        system, doc = self._declare_and_load(LOOP_PLANT_NODE, system)
        gp = self.get_parameter
        self._configure_plant(system)
        self.plant = plant if plant is not None else MujocoLoopPlant(system)
        q0 = self._initial("q0", q0, (doc.get("initial") or {}).get("q"), None)
        if q0 is not None:
            self.plant.reset(q0)
        self.odom_frame, self.body_frame = gp("odom_frame").value, gp("base_frame").value
        self.welds = [(c, self.create_publisher(WrenchStamped, f"~/{c.name}/wrench", qos_profile_sensor_data))
                      for c in system.constraints]
        topic = self._plant_topics(on_step)
        self.pub_odom = self.create_publisher(Odometry, gp("odom_topic").value, 10)
        self._start_pacing(clock=SteadyClock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(f"MuJoCo weld plant '{system.name}' ({self.mode}, dt={self.dt} s): joints "
                               f"{self.layout.names}, object on {self.pub_odom.topic_name}, welds "
                               f"{[c.name for c, _ in self.welds]}, commands from {topic}")

    def publish_state(self) -> None:
        stamp = self._stamp()
        plant, system = self.plant, self.system
        q, qdot = plant.q, plant.measured_qdot()
        active = [c for c, _ in self.welds if c.active]
        if active:
            _, A = system.constraint_rows(q)
            lam = plant.lambda_meas(A, noisy=True)
            k = 0
            for c, pub in self.welds:
                if not c.active:
                    continue
                R = system.frame_placement(q, c.frame).rotation      # λ rows: world axes at frame_a
                w = np.concatenate([R.T @ lam[k:k + 3], R.T @ lam[k + 3:k + 6]])
                pub.publish(array_to_wrench(stamp, c.frame, w))
                k += c.size
        jm = system.model.joints[1]
        self.pub_odom.publish(base_to_odometry(stamp, self.odom_frame, self.body_frame,
                                               q[jm.idx_q:jm.idx_q + 7], qdot[jm.idx_v:jm.idx_v + 6]))
        self.pub_js.publish(arrays_to_joint_state(stamp, self.layout, q, qdot, self.tau))


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_loop_plant_node`` (``--ros-args --params-file config/bimanual_ros.yaml``)."""
    from .runner import publish_if_lockstep, run_node

    return run_node("qv_loop_plant_node", LoopPlantNode, argv, on_start=publish_if_lockstep)


__all__ = ["LoopPlantNode"]

if __name__ == "__main__":
    sys.exit(main())
