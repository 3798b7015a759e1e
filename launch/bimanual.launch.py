"""Two Pandas holding a box (issue 14): MuJoCo weld plant node + one controller node for the 14 joints.

    ros2 launch qv_ros bimanual.launch.py
    ros2 launch qv_ros bimanual.launch.py mode:=lockstep params_file:=/path/to/my_bimanual.yaml

Both nodes read ``config/bimanual_ros.yaml`` (sections qv_loop_plant, qv_controller). The box pose and twist
travel as nav_msgs/Odometry on /box/odom, the grasp wrenches as WrenchStamped. On hardware, replace the
plant node by ros2_control (joint_state_broadcaster, an effort forward controller, wrist F/T broadcasters)
and an object pose estimator publishing /box/odom. Without ``ros2 launch``: ``qv demo bimanual --ros``.
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import resolve_launch

PACKAGE = "qv_ros"
PARAMS = "config/bimanual_ros.yaml"
# every (package, executable) this file starts, resolved before any starts
EXECUTABLES = [(PACKAGE, "qv_loop_plant_node"), (PACKAGE, "qv_controller_node")]


def _nodes(context, *args, **kwargs):
    resolve_launch(context, "bimanual.launch.py", EXECUTABLES)
    share = get_package_share_directory(PACKAGE)
    params = LaunchConfiguration("params_file").perform(context) or os.path.join(share, PARAMS)
    mode = {"mode": LaunchConfiguration("mode").perform(context)}
    return [
        Node(package=PACKAGE, executable="qv_loop_plant_node", name="qv_loop_plant", output="screen",
             parameters=[params, mode]),
        Node(package=PACKAGE, executable="qv_controller_node", name="qv_controller", output="screen",
             parameters=[params]),
    ]


def generate_launch_description():
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value="", description="override config/bimanual_ros.yaml"),
        DeclareLaunchArgument("mode", default_value="realtime", choices=["realtime", "lockstep"],
                              description="plant pacing: wall clock, or one step per effort command"),
        OpaqueFunction(function=_nodes),
    ])
