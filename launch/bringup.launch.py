"""Built-in constrained simulator + dynamics node + controller node (+ robot_state_publisher, optional rviz).

    ros2 launch qv_ros bringup.launch.py robot:=planar_3link rviz:=true
    ros2 launch qv_ros bringup.launch.py robot:=slider_crank mode:=lockstep
    ros2 launch qv_ros bringup.launch.py robot:=panda_table

Every node reads ``config/<robot>.yaml`` (sections qv_sim, qv_dynamics, qv_controller). Without
``ros2 launch`` the same three nodes run in one process: ``qv bringup config/<robot>.yaml``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "qv_ros"
ROBOTS = {
    "planar_3link": {"urdf": "urdf/planar_3link.urdf", "params": "config/planar_3link.yaml"},
    "slider_crank": {"urdf": "urdf/slider_crank.urdf", "params": "config/slider_crank.yaml"},
    # the 7-DoF arm of the main demo (example-robot-data), tool on the table (rigid contact)
    "panda_table": {"urdf": "panda", "params": "config/panda_table.yaml"},
}
RVIZ_CONFIG = "config/qv.rviz"


def _urdf_path(share: str, entry: str) -> str:
    """A URDF of the package's share folder, else an example-robot-data name (``panda``)."""
    path = os.path.join(share, entry)
    if os.path.isfile(path):
        return path
    from qv_dynamics.robots import resolve_urdf

    return resolve_urdf(entry)


def _nodes(context, *args, **kwargs):
    share = get_package_share_directory(PACKAGE)
    robot = LaunchConfiguration("robot").perform(context)
    if robot not in ROBOTS:
        raise RuntimeError(f"robot:={robot} is not one of {sorted(ROBOTS)}")
    files = ROBOTS[robot]
    params = LaunchConfiguration("params_file").perform(context) or os.path.join(share, files["params"])
    with open(_urdf_path(share, files["urdf"])) as f:
        urdf = f.read()
    sim_time = {"use_sim_time": True}
    mode = {"mode": LaunchConfiguration("mode").perform(context)}
    return [
        Node(package=PACKAGE, executable="qv_sim_node", name="qv_sim", output="screen",
             parameters=[params, mode]),
        Node(package=PACKAGE, executable="qv_dynamics_node", name="qv_dynamics", output="screen",
             parameters=[params, sim_time]),
        Node(package=PACKAGE, executable="qv_controller_node", name="qv_controller", output="screen",
             parameters=[params, sim_time]),
        Node(package="robot_state_publisher", executable="robot_state_publisher", output="log",
             parameters=[{"robot_description": urdf}, sim_time]),
        Node(package="rviz2", executable="rviz2", output="log", arguments=["-d", os.path.join(share, RVIZ_CONFIG)],
             parameters=[sim_time], condition=IfCondition(LaunchConfiguration("rviz"))),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS),
                              description="demo robot (urdf/<robot>.urdf, config/<robot>.yaml)"),
        DeclareLaunchArgument("params_file", default_value="", description="override config/<robot>.yaml"),
        DeclareLaunchArgument("mode", default_value="realtime", choices=["realtime", "lockstep"],
                              description="simulator pacing: wall clock, or one step per effort command"),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2 with config/qv.rviz"),
        OpaqueFunction(function=_nodes),
    ])
