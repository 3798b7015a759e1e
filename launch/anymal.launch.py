"""ANYmal C on the MuJoCo floor + the legged controller, each node its own process.

    ros2 launch qv_ros anymal.launch.py                      # realtime, the plan of config/anymal_model.yaml
    ros2 launch qv_ros anymal.launch.py mode:=lockstep
    ros2 launch qv_ros anymal.launch.py plant:=false         # real robot: controller only
    ros2 launch qv_ros anymal.launch.py controller_prefix:='chrt -f 30' plant_prefix:='chrt -f 20'

Parameters: ``config/anymal.yaml`` (sections qv_legged_mujoco, qv_legged_controller).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import MANAGED, checked_params_file, discovery_profile, qv_spawner, resolve_launch

PACKAGE = "qv_ros"
# every (package, executable) this file starts, resolved before any starts; OPTIONAL: per true launch flag
EXECUTABLES = [(PACKAGE, "qv_legged_controller_node"), (PACKAGE, "qv_spawner")]
OPTIONAL = {"plant": [(PACKAGE, "qv_legged_mujoco_node")]}


def _nodes(context, *args, **kwargs):
    resolve_launch(context, "anymal.launch.py", EXECUTABLES, OPTIONAL)
    share = get_package_share_directory(PACKAGE)
    params = checked_params_file(LaunchConfiguration("params_file").perform(context)
                                 or os.path.join(share, "config", "anymal.yaml"))
    sim_time = {"use_sim_time": LaunchConfiguration("plant").perform(context).lower() == "true"}
    mode = {"mode": LaunchConfiguration("mode").perform(context)}
    return [
        Node(package=PACKAGE, executable="qv_legged_mujoco_node", name="qv_legged_mujoco", output="screen",
             parameters=[params, mode], condition=IfCondition(LaunchConfiguration("plant")),
             prefix=LaunchConfiguration("plant_prefix"), exec_name="qv_legged_mujoco_node"),
        Node(package=PACKAGE, executable="qv_legged_controller_node", name="qv_legged_controller",
             output="screen", parameters=[params, sim_time, MANAGED], prefix=LaunchConfiguration("controller_prefix"),
             exec_name="qv_legged_controller_node"),
        qv_spawner("qv_legged_controller"),   # configure, then activate once it reads the robot's states
    ]


def generate_launch_description():
    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("params_file", default_value="", description="override config/anymal.yaml"),
        DeclareLaunchArgument("mode", default_value="realtime", choices=["realtime", "lockstep"],
                              description="plant pacing: wall clock, or one step per effort command"),
        DeclareLaunchArgument("plant", default_value="true", description="start the MuJoCo plant node"),
        DeclareLaunchArgument("controller_prefix", default_value="",
                              description="command prefix of the controller, e.g. 'chrt -f 30' (a realtime process)"),
        DeclareLaunchArgument("plant_prefix", default_value="",
                              description="command prefix of the plant, e.g. 'chrt -f 20' (below the controller)"),
        OpaqueFunction(function=_nodes),
    ])
