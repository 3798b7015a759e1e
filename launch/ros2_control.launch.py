"""controller_manager (mock_components or your hardware) + qv dynamics and controller nodes.

    ros2 launch qv_ros ros2_control.launch.py robot:=planar_3link                 # mock hardware
    ros2 launch qv_ros ros2_control.launch.py robot:=planar_3link use_mock_hardware:=false

The URDF handed to controller_manager is ``qv export-urdf --target mock`` of the robot's model config:
``initial_value`` on every state interface (the model config's ``initial.q``, projected onto the
constraints as the built-in simulator starts), a force/torque ``<sensor>`` reading 0 (not NaN), and the
hardware plugin ``mock_components/GenericSystem`` (with ``use_mock_hardware:=false`` the URDF's own
plugin is kept). The mock is a **wiring test**: mock_components does not integrate effort, so the joints
stay at the initial state whatever the controller commands and the F/T sensor stays 0.

Start-up order (``qv_control.ros.launch_actions.ordered_qv_bringup``): ros2_control_node; one spawner
activating joint_state_broadcaster and force_torque_sensor_broadcaster; once it has exited, the qv nodes;
once qv_controller runs, the spawner of effort_controller (forward_command_controller, interface_name:
effort).
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import (
    CONTROL_ROBOTS,
    FT_TOPIC,
    ORDERED_BRINGUP,
    discovery_profile,
    launch_flag,
    ordered_qv_bringup,
    prefix_arguments,
    resolve_launch,
    robot_files,
)

PACKAGE = "qv_ros"
ROBOTS = CONTROL_ROBOTS
# every (package, executable) this file starts, resolved before any starts
EXECUTABLES = [("robot_state_publisher", "robot_state_publisher"), ("controller_manager", "ros2_control_node"),
               *ORDERED_BRINGUP]


def _nodes(context, *args, **kwargs):
    from qv_dynamics.plants.export import target_urdf

    resolve_launch(context, "ros2_control.launch.py", EXECUTABLES)
    _, files = robot_files(context, ROBOTS)
    controllers = LaunchConfiguration("controllers_file").perform(context) or files["controllers"]
    mock = launch_flag(context, "use_mock_hardware")
    urdf = target_urdf(files["model"], "mock", controllers, keep_hardware=not mock)
    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf}]),
        Node(package="controller_manager", executable="ros2_control_node", output="screen",
             parameters=[controllers], remappings=[("~/robot_description", "/robot_description")]),
        # measured λ from the F/T broadcaster (robot -> environment)
        *ordered_qv_bringup(controllers, files["params"], {"wrench_topics": [FT_TOPIC]}),
    ]


def generate_launch_description():
    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS)),
        *prefix_arguments(),
        DeclareLaunchArgument("use_mock_hardware", default_value="true",
                              description="mock_components/GenericSystem (wiring test) or the URDF's own plugin"),
        DeclareLaunchArgument("controllers_file", default_value="", description="override config/controllers*.yaml"),
        OpaqueFunction(function=_nodes),
    ])
