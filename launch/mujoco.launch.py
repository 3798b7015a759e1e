"""The Panda on the MuJoCo table (qv_mujoco_node) + qv dynamics and controller nodes, each its own process.

    ros2 launch qv_ros mujoco.launch.py [robot:=panda|ur5] [mode:=lockstep] [rviz:=true]
    ros2 launch qv_ros mujoco.launch.py params_file:=/path/to/my_arm.yaml   # your arm: its model_config inside

Parameters: ``config/demo_mujoco.yaml`` (sections qv_mujoco, qv_dynamics, qv_controller; model
``config/demo_model.yaml``: robot, contact constraint, ``initial.q``, scene). The plant node publishes
``/joint_states``, ``/clock`` and the tool F/T wrench, the controller answers on
``/effort_controller/commands`` running the contact task of its ``task.*`` parameters (approach, touch,
10 N, circle, force step, release; phase on ``/qv_controller/phase``), and the dynamics node follows its
contact switches. The controller is a managed node (``managed: true``): ``qv_spawner`` configures it and
activates it once it reads the plant's states; the plant holds the arm until its first command, and the
task starts once the loop runs steadily (qv_control.ros.lifecycle). The same plant through controller_manager
is ``mujoco_ros2_control.launch.py robot:=panda``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import (
    MANAGED,
    discovery_profile,
    launch_flag,
    model_urdf,
    params_and_model,
    prefix_arguments,
    qv_node,
    qv_spawner,
    resolve_launch,
)

PACKAGE = "qv_ros"
ROBOTS = {
    "panda": {"model": "config/demo_model.yaml", "params": "config/demo_mujoco.yaml"},
    "ur5": {"model": "config/ur5_table_model.yaml", "params": "config/ur5_mujoco.yaml"},
}
RVIZ_CONFIG = "config/qv.rviz"
# every (package, executable) this file starts, resolved before any starts; OPTIONAL: per true launch flag
EXECUTABLES = [(PACKAGE, "qv_mujoco_node"), (PACKAGE, "qv_dynamics_node"), (PACKAGE, "qv_controller_node"),
               (PACKAGE, "qv_spawner")]
OPTIONAL = {"rsp": [("robot_state_publisher", "robot_state_publisher")], "rviz": [("rviz2", "rviz2")]}


def _nodes(context, *args, **kwargs):
    resolve_launch(context, "mujoco.launch.py", EXECUTABLES, OPTIONAL, "install it, or leave it out: rsp:=false")
    share = get_package_share_directory(PACKAGE)
    params, model = params_and_model(context, ROBOTS)
    with open(model_urdf(model)) as f:
        urdf = f.read()
    sim_time = {"use_sim_time": True}
    mode = {"mode": LaunchConfiguration("mode").perform(context)}
    rsp = launch_flag(context, "rsp")
    nodes = [
        qv_node("qv_mujoco_node", "qv_mujoco", params, mode),
        qv_node("qv_dynamics_node", "qv_dynamics", params, sim_time, prefix="dynamics_prefix"),
        qv_node("qv_controller_node", "qv_controller", params, {**sim_time, **MANAGED}, prefix="controller_prefix"),
        qv_spawner("qv_controller"),   # configure, then activate once it reads the plant's states
        Node(package="rviz2", executable="rviz2", output="log", arguments=["-d", os.path.join(share, RVIZ_CONFIG)],
             parameters=[sim_time], condition=IfCondition(LaunchConfiguration("rviz"))),
    ]
    if rsp:
        nodes.append(Node(package="robot_state_publisher", executable="robot_state_publisher", output="log",
                          parameters=[{"robot_description": urdf}, sim_time]))
    return nodes


def generate_launch_description():
    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("robot", default_value="panda", choices=sorted(ROBOTS)),
        DeclareLaunchArgument("params_file", default_value="",
                              description="your own parameters file (sections qv_mujoco, qv_dynamics, qv_controller); "
                                          "overrides robot's"),
        *prefix_arguments(),
        DeclareLaunchArgument("mode", default_value="realtime", choices=["realtime", "lockstep"],
                              description="plant pacing: wall clock, or one control period per effort command"),
        DeclareLaunchArgument("rsp", default_value="true", description="start robot_state_publisher"),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2 with config/qv.rviz"),
        OpaqueFunction(function=_nodes),
    ])
