"""``qv_mujoco_node``: the MuJoCo plant (:mod:`qv_dynamics.plants.mujoco_plant`) behind ros2_control's topics.

Same contract as the built-in simulator node (:mod:`qv_dynamics.ros.sim_node`) and ros2_control hardware with
joint_state_broadcaster + force_torque_sensor_broadcaster + an effort forward controller:

  out ``/joint_states`` (sensor_msgs/JointState: position, velocity, effort = applied, clipped τ)
  out ``~/tool_ft/wrench`` (``wrench_topic``; geometry_msgs/WrenchStamped): MuJoCo's force/torque sensor at
      the tool site, i.e. the wrench the robot applies to the environment, in the tool frame's axes
      (frame_id = the tool frame). Rotated to world axes, its z row is λ of the surface contact.
  out ``/clock`` (rosgraph_msgs/Clock, when ``publish_clock``) for ``use_sim_time``
  out ``/diagnostics`` (diagnostic_msgs/DiagnosticArray, once a second: real-time factor, dropped real time,
      clipped and rejected commands, the drives' hold; :mod:`qv_dynamics.ros.plant_node`; and
      ``contact_force_peak_n``: the largest normal force of the table on the tool so far)
  in  ``/<controller_name>/commands`` (std_msgs/Float64MultiArray in the order of ``joints``)
  in  ``~/table_height`` (std_msgs/Float64): move the table top (scene change, e.g. lower it by 5 mm)

Modes (parameter ``mode``), as in the built-in simulator node:
  ``realtime``  wall-clock paced (``real_time_factor``), zero-order hold of the latest command.
  ``lockstep``  deterministic: one control period ``dt`` (``dt / timestep`` physics steps) per received
                command, then the new state is published; ``lockstep_resend`` re-publishes the state when
                no command came for that long (start-up).
Scene parameters: ``scene.table_height``, ``scene.tip_radius``, ``scene.friction``, ``scene.timestep``,
``scene.tool_frame`` (see :class:`~qv_dynamics.plants.mujoco_scene.SceneConfig`).
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from std_msgs.msg import Float64

from ..errors import ModelError
from ..plants.mujoco_plant import MujocoPlant
from ..plants.mujoco_scene import SceneConfig
from .health import EpisodeCounter
from .messages import array_to_wrench, arrays_to_joint_state
from .params import MUJOCO_NODE, SCENE_KEYS
from .plant_node import PlantNodeMixin


class MujocoNode(PlantNodeMixin, Node):
    """MuJoCo plant node; ``step_once(tau)`` is also callable in-process. ``on_step`` is a list of callables
    taking the node, run after every control period (e.g. to record MuJoCo's ground truth)."""

    def __init__(self, node_name: str = "qv_mujoco", *, system=None, plant: MujocoPlant | None = None,
                 q0=None, qdot0=None, on_step: Callable | None = None, **node_kwargs):
        super().__init__(node_name, **node_kwargs)
        system, doc = self._declare_and_load(MUJOCO_NODE, system)
        gp = self.get_parameter
        self._configure_plant(system)
        if plant is None:
            scene = dict(doc.get("scene") or {})
            for k in SCENE_KEYS:
                v = gp(f"scene.{k}").value
                if v is not None:
                    scene[k] = v
            plant = MujocoPlant(system, SceneConfig.from_dict(scene))
        if plant.joint_names != self.layout.names:
            raise ModelError(f"plant joints {plant.joint_names} differ from the model's {self.layout.names}")
        if self.dt < plant.model.opt.timestep * 0.999:
            raise ModelError(f"dt={self.dt} is shorter than the MuJoCo timestep {plant.model.opt.timestep}")
        self.plant = plant
        init = doc.get("initial") or {}
        q0 = self._initial("q0", q0, init.get("q"), system.neutral())
        qdot0 = self._initial("qdot0", qdot0, init.get("qdot"), np.zeros(system.nv))
        if q0 is not None:
            plant.reset(q0, qdot0)
        topic = self._plant_topics(on_step)
        self.contact_peak = 0.0         # N, the largest normal force of the table on the tool so far
        self.table_rejects = EpisodeCounter(self.get_logger(), "table height")
        self.tool_frame = plant.scene.tool_frame
        self.pub_wrench = self.create_publisher(WrenchStamped, gp("wrench_topic").value, qos_profile_sensor_data)
        self.create_subscription(Float64, "~/table_height", self.on_table_height, 10)
        self._start_pacing()
        self.get_logger().info(
            f"MuJoCo plant '{system.name}' ({self.mode}, control dt={self.dt} s, physics "
            f"{plant.model.opt.timestep} s): joints {self.layout.names}, commands from {topic}, "
            f"F/T sensor at '{self.tool_frame}' on {self.pub_wrench.topic_name}, table at "
            f"z={plant.table_height:.4f} m")

    # ------------------------------------------------------------------ state
    def step_once(self, tau: np.ndarray | None = None) -> None:
        """One control period; the largest normal force of the table on the tool (MuJoCo's contact force,
        world z) is kept for /diagnostics (``contact_force_peak_n``): the plant's own judge of a strike."""
        super().step_once(tau)
        fz = float(self.plant.contact_force_world()[2]) if self.plant.data.ncon else 0.0
        if fz > self.contact_peak:
            self.contact_peak = fz

    def publish_state(self) -> None:
        stamp = self._stamp()
        self.pub_wrench.publish(array_to_wrench(stamp, self.tool_frame, self.plant.sensor_wrench()))
        self.pub_js.publish(arrays_to_joint_state(stamp, self.layout, self.plant.q, self.plant.qdot,
                                                  self.plant.last_tau))

    # ------------------------------------------------------------------ callbacks
    def on_table_height(self, msg: Float64) -> None:
        z = float(msg.data)
        if not np.isfinite(z):
            self.table_rejects.reject("nonfinite", f"table height {z}")
            return
        self.table_rejects.ok()
        self.plant.set_table_height(z)
        self.get_logger().info(f"table top moved to z={z:.4f} m at t={self.t:.3f} s")


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_mujoco_node`` (``--ros-args --params-file config/demo_mujoco.yaml``)."""
    from .runner import publish_if_lockstep, run_node

    return run_node("qv_mujoco_node", MujocoNode, argv, on_start=publish_if_lockstep)


if __name__ == "__main__":
    sys.exit(main())
