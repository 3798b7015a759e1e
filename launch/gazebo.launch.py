"""Gazebo (gz sim) with gz_ros2_control + qv dynamics and controller nodes.

    ros2 launch qv_ros gazebo.launch.py robot:=planar_3link

The URDF is ``qv export-urdf --target gazebo`` of the robot's model config: bolted to the world (a
``world`` link and fixed joint), a massive root (sdformat drops a massless root and everything below
it), collisions copied from the visuals plus a sphere at each constraint frame, ``initial_value`` from
the model config's ``initial.q`` (projected onto the constraints as the built-in simulator starts),
hardware ``gz_ros2_control/GazeboSimSystem`` and the ``gz_ros2_control::GazeboSimROS2ControlPlugin``
with ``config/controllers*.yaml``. Gazebo simulates the URDF *tree*: the wall of planar_3link and the
slider-crank's rail are not in the world, and there is no F/T sensor (the qv nodes run without measured
λ); for those use ``mujoco_ros2_control.launch.py`` or the built-in simulator.

Start-up order (``qv_control.ros.launch_actions.ordered_qv_bringup``): gz sim, spawn the robot (ros_gz_sim
create); once it exists, the spawner of joint_state_broadcaster; once that has exited, the qv nodes;
once qv_controller runs, the spawner of effort_controller. Until then the joints get no torque (the arm
sags for the start-up moment).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import (
    CONTROL_ROBOTS,
    ORDERED_BRINGUP,
    discovery_profile,
    ordered_qv_bringup,
    prefix_arguments,
    resolve_launch,
    robot_files,
)

PACKAGE = "qv_ros"
ROBOTS = CONTROL_ROBOTS
# every (package, executable) this file starts, resolved before any starts (None: a package whose launch file
# is included, or whose plugin Gazebo loads)
EXECUTABLES = [("ros_gz_sim", None), ("ros_gz_sim", "create"), ("robot_state_publisher", "robot_state_publisher"),
               ("ros_gz_bridge", "parameter_bridge"), ("gz_ros2_control", None), *ORDERED_BRINGUP]


def _nodes(context, *args, **kwargs):
    from qv_dynamics.plants.export import target_urdf

    resolve_launch(context, "gazebo.launch.py", EXECUTABLES)
    robot, files = robot_files(context, ROBOTS)
    controllers = files["controllers"]
    urdf = target_urdf(files["model"], "gazebo", controllers)
    sim_time = {"use_sim_time": True}
    gz_launch = os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")
    world = LaunchConfiguration("world").perform(context)
    create = Node(package="ros_gz_sim", executable="create", output="screen",
                  arguments=["-topic", "robot_description", "-name", robot])
    no_ft = dict(sim_time, wrench_topics=[""], wrench_constraints=[""])  # no F/T sensor in this world
    return [
        IncludeLaunchDescription(PythonLaunchDescriptionSource(gz_launch),
                                 launch_arguments={"gz_args": f"-r {world}"}.items()),
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf}, sim_time]),
        create,
        Node(package="ros_gz_bridge", executable="parameter_bridge",
             arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"]),
        *ordered_qv_bringup(controllers, files["params"], no_ft,
                            broadcasters=["joint_state_broadcaster"], after=create),
    ]


def generate_launch_description():
    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS)),
        *prefix_arguments(),
        DeclareLaunchArgument("world", default_value="empty.sdf", description="gz sim world"),
        OpaqueFunction(function=_nodes),
    ])
