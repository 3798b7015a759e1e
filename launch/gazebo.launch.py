"""Gazebo (gz sim) with gz_ros2_control + qv dynamics and controller nodes.

    ros2 launch qv_ros gazebo.launch.py robot:=planar_3link

The URDF's hardware plugin becomes ``gz_ros2_control/GazeboSimSystem`` and the
``gz_ros2_control::GazeboSimROS2ControlPlugin`` system plugin (parameters: config/controllers*.yaml) is
appended at launch time, so the URDFs stay simulator-neutral. Gazebo simulates the URDF *tree*: a loop
closure (slider-crank) or a wall contact is only enforced if the world models it (an SDF joint or a
collision body); the qv nodes still evaluate the constrained model from ``config/<robot>.yaml``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, IncludeLaunchDescription, OpaqueFunction
from launch.launch_description_sources import PythonLaunchDescriptionSource
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription

PACKAGE = "qv_ros"
ROBOTS = {
    "planar_3link": {"urdf": "urdf/planar_3link.urdf", "params": "config/planar_3link.yaml",
                     "controllers": "config/controllers.yaml"},
    "slider_crank": {"urdf": "urdf/slider_crank.urdf", "params": "config/slider_crank.yaml",
                     "controllers": "config/controllers_slider_crank.yaml"},
}
# force_torque_sensor_broadcaster needs a Gazebo <sensor type="force_torque"> in the world/URDF: not spawned here
CONTROLLERS = ("joint_state_broadcaster", "effort_controller")
GZ_HARDWARE = "gz_ros2_control/GazeboSimSystem"


def _nodes(context, *args, **kwargs):
    from qv_dynamics.ros.urdf import ros2_control_urdf

    share = get_package_share_directory(PACKAGE)
    robot = LaunchConfiguration("robot").perform(context)
    files = ROBOTS[robot]
    controllers = os.path.join(share, files["controllers"])
    params = os.path.join(share, files["params"])
    with open(os.path.join(share, files["urdf"])) as f:
        urdf = ros2_control_urdf(f.read(), GZ_HARDWARE, gazebo_parameters=controllers)
    sim_time = {"use_sim_time": True}
    gz_launch = os.path.join(get_package_share_directory("ros_gz_sim"), "launch", "gz_sim.launch.py")
    world = LaunchConfiguration("world").perform(context)
    nodes = [
        IncludeLaunchDescription(PythonLaunchDescriptionSource(gz_launch),
                                 launch_arguments={"gz_args": f"-r {world}"}.items()),
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf}, sim_time]),
        Node(package="ros_gz_sim", executable="create", output="screen",
             arguments=["-topic", "robot_description", "-name", robot]),
        Node(package="ros_gz_bridge", executable="parameter_bridge",
             arguments=["/clock@rosgraph_msgs/msg/Clock[gz.msgs.Clock"]),
    ]
    for name in CONTROLLERS:
        nodes.append(Node(package="controller_manager", executable="spawner", output="screen",
                          arguments=[name, "--controller-manager", "/controller_manager", "--param-file", controllers]))
    # no force sensor in Gazebo here: the controller runs without measured λ (wrench_topics emptied)
    no_ft = dict(sim_time, wrench_topics=[""], wrench_constraints=[""])
    nodes += [
        Node(package=PACKAGE, executable="qv_dynamics_node", name="qv_dynamics", output="screen",
             parameters=[params, no_ft]),
        Node(package=PACKAGE, executable="qv_controller_node", name="qv_controller", output="screen",
             parameters=[params, no_ft]),
    ]
    return nodes


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS)),
        DeclareLaunchArgument("world", default_value="empty.sdf", description="gz sim world"),
        OpaqueFunction(function=_nodes),
    ])
