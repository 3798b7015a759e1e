"""controller_manager (real hardware or mock_components) + qv dynamics and controller nodes.

    ros2 launch qv_ros ros2_control.launch.py robot:=planar_3link use_mock_hardware:=true

Loads the robot's ``<ros2_control>`` block from ``urdf/<robot>.urdf`` (the hardware plugin is replaced by
``mock_components/GenericSystem`` when ``use_mock_hardware:=true``), starts ``ros2_control_node`` with
``config/controllers*.yaml`` and spawns joint_state_broadcaster, the effort forward controller
(forward_command_controller, interface_name: effort) and force_torque_sensor_broadcaster. The qv
controller node then drives ``/<effort controller>/commands`` exactly as it drives the built-in simulator.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "qv_ros"
ROBOTS = {
    "planar_3link": {"urdf": "urdf/planar_3link.urdf", "params": "config/planar_3link.yaml",
                     "controllers": "config/controllers.yaml", "ft_sensor": ("tip_ft", "tip")},
    "slider_crank": {"urdf": "urdf/slider_crank.urdf", "params": "config/slider_crank.yaml",
                     "controllers": "config/controllers_slider_crank.yaml", "ft_sensor": ("slider_ft", "slider_pin")},
}
CONTROLLERS = ("joint_state_broadcaster", "effort_controller", "force_torque_sensor_broadcaster")
MOCK_PLUGIN = "mock_components/GenericSystem"


def _nodes(context, *args, **kwargs):
    from qv_dynamics.ros.urdf import ros2_control_urdf

    share = get_package_share_directory(PACKAGE)
    robot = LaunchConfiguration("robot").perform(context)
    files = ROBOTS[robot]
    controllers = LaunchConfiguration("controllers_file").perform(context) or os.path.join(share, files["controllers"])
    params = os.path.join(share, files["params"])
    with open(os.path.join(share, files["urdf"])) as f:
        urdf = f.read()
    mock = LaunchConfiguration("use_mock_hardware").perform(context).lower() in ("1", "true", "yes")
    urdf = ros2_control_urdf(urdf, MOCK_PLUGIN if mock else None, ft_sensor=files["ft_sensor"])
    description = {"robot_description": urdf}
    nodes = [
        Node(package="robot_state_publisher", executable="robot_state_publisher", parameters=[description]),
        Node(package="controller_manager", executable="ros2_control_node", output="screen",
             parameters=[controllers], remappings=[("~/robot_description", "/robot_description")]),
    ]
    for name in CONTROLLERS:
        nodes.append(Node(package="controller_manager", executable="spawner", output="screen",
                          arguments=[name, "--controller-manager", "/controller_manager", "--param-file", controllers]))
    # measured λ from force_torque_sensor_broadcaster instead of the built-in simulator's wrench topic
    sensor = {"use_sim_time": False, "wrench_topics": ["/force_torque_sensor_broadcaster/wrench"]}
    nodes += [
        Node(package=PACKAGE, executable="qv_dynamics_node", name="qv_dynamics", output="screen",
             parameters=[params, sensor]),
        Node(package=PACKAGE, executable="qv_controller_node", name="qv_controller", output="screen",
             parameters=[params, sensor]),
    ]
    return nodes


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS)),
        DeclareLaunchArgument("use_mock_hardware", default_value="true",
                              description="replace the URDF's hardware plugin by mock_components/GenericSystem"),
        DeclareLaunchArgument("controllers_file", default_value="", description="override config/controllers*.yaml"),
        OpaqueFunction(function=_nodes),
    ])
