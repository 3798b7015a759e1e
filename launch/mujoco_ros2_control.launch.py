"""ros-controls/mujoco_ros2_control (MuJoCo behind controller_manager) + qv dynamics and controller nodes.

    ros2 launch qv_ros mujoco_ros2_control.launch.py robot:=planar_3link [headless:=true]

At launch the robot's model config is exported (``qv export-mjcf`` and ``qv export-urdf --target
mujoco``, into a temporary folder): the MJCF has the robot (Pinocchio's bodies and inertias, a torque
motor per joint named by joint), the scene (the Panda's table) or the model's point contacts as exact
MuJoCo equality constraints (planar_3link's wall, the slider-crank's rail), the ``tool_force`` /
``tool_torque`` sensor pair at the constraint frame and a keyframe ``initial`` = the model config's
``initial.q`` projected onto the constraints (as the built-in simulator starts). The URDF names
``mujoco_ros2_control/MujocoSystemInterface`` with that MJCF and the ``fts`` sensor. The same
``config/controllers*.yaml`` as for mock hardware and Gazebo is used unchanged.

mujoco_ros2_control publishes the F/T sensor *negated* (the environment's reaction on the tool, −λ, in
the tool frame), hence ``wrench_sign: -1.0`` for the qv nodes here.

Start-up order (``qv_control.ros.launch_actions.ordered_qv_bringup``): mujoco_ros2_control's
ros2_control_node; one spawner activating joint_state_broadcaster and force_torque_sensor_broadcaster;
once it has exited, the qv nodes; once qv_controller runs, the spawner of effort_controller.
"""
import os
import tempfile

from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import (
    CONTROL_ROBOTS,
    FT_TOPIC,
    ORDERED_BRINGUP,
    launch_flag,
    ordered_qv_bringup,
    prefix_arguments,
    resolve_launch,
    robot_files,
)

PACKAGE = "qv_ros"
ROBOTS = {
    **CONTROL_ROBOTS,
    "panda": {"model": "config/demo_model.yaml", "params": "config/demo_mujoco.yaml",
              "controllers": "config/controllers_panda.yaml"},
}
# every (package, executable) this file starts, resolved before any starts
EXECUTABLES = [("robot_state_publisher", "robot_state_publisher"), ("mujoco_ros2_control", "ros2_control_node"),
               *ORDERED_BRINGUP]


def _nodes(context, *args, **kwargs):
    from qv_dynamics.plants.export import export_mjcf_text, target_urdf, write_text

    resolve_launch(context, "mujoco_ros2_control.launch.py", EXECUTABLES)
    robot, files = robot_files(context, ROBOTS)
    model, controllers = files["model"], files["controllers"]
    headless = launch_flag(context, "headless")
    mjcf = write_text(os.path.join(tempfile.mkdtemp(prefix="qv_mujoco_"), f"{robot}.xml"), export_mjcf_text(model))
    urdf = target_urdf(model, "mujoco", controllers, mjcf_file=mjcf, headless=headless)
    sim_time = {"use_sim_time": True}
    # the F/T sensor through force_torque_sensor_broadcaster (the params file names the constraint it measures);
    # mujoco_ros2_control publishes the environment's reaction −λ
    sensor = dict(sim_time, wrench_topics=[FT_TOPIC], wrench_sign=-1.0)
    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf}, sim_time]),
        Node(package="mujoco_ros2_control", executable="ros2_control_node", output="screen",
             parameters=[sim_time, controllers], on_exit=Shutdown()),
        *ordered_qv_bringup(controllers, files["params"], sensor),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS)),
        *prefix_arguments(),
        DeclareLaunchArgument("headless", default_value="false", description="run MuJoCo without its viewer"),
        OpaqueFunction(function=_nodes),
    ])
