"""Two Pandas holding a box: MuJoCo weld plant node + one controller node for the 14 arm joints.

    ros2 launch qv_ros bimanual.launch.py                   # lock-step: one plant step per effort command
    ros2 launch qv_ros bimanual.launch.py mode:=realtime    # wall clock: needs ~1.5 free cores for 1 kHz
    ros2 launch qv_ros bimanual.launch.py mode:=realtime controller_prefix:='chrt -f 30' plant_prefix:='chrt -f 20'
    ros2 launch qv_ros bimanual.launch.py params_file:=/path/to/my_bimanual.yaml

Both nodes read ``config/bimanual_ros.yaml`` (sections qv_loop_plant, qv_controller). The box pose and twist
travel as nav_msgs/Odometry on /box/odom, the grasp wrenches as WrenchStamped. On hardware, replace the
plant node by ros2_control (joint_state_broadcaster, an effort forward controller, wrist F/T broadcasters)
and an object pose estimator publishing /box/odom. Without ``ros2 launch``: ``qv demo bimanual --ros``.

The default is ``mode:=lockstep``: the simulated loop is then exact at any CPU load (each command acts on the
state it answered; the simulation runs slower than the wall clock when the machine is slow). ``mode:=realtime``
paces the plant by the wall clock at dt = 1 ms: the controller's tick for the 14 joints and the free box costs
~0.7-0.9 ms of CPU (and the plant ~0.3 ms per step), so on a machine without that headroom the controller
answers fewer than 1000 states per second and the plant holds each command for several steps
(``bench/bimanual_realtime.py`` measures it). In lock-step the plant waits for every command, so a plant
process descheduled for a while is not a lost robot: the controller's ``watchdog_timeout`` is raised to
``lockstep_watchdog`` (default 1 s; the params file's value, 0.1 s, stands in realtime).
"""
import os

from ament_index_python.packages import get_package_share_directory
from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import MANAGED, checked_params_file, discovery_profile, qv_spawner, resolve_launch

PACKAGE = "qv_ros"
PARAMS = "config/bimanual_ros.yaml"
# every (package, executable) this file starts, resolved before any starts
EXECUTABLES = [(PACKAGE, "qv_loop_plant_node"), (PACKAGE, "qv_controller_node"), (PACKAGE, "qv_spawner")]


def _nodes(context, *args, **kwargs):
    resolve_launch(context, "bimanual.launch.py", EXECUTABLES)
    share = get_package_share_directory(PACKAGE)
    params = checked_params_file(LaunchConfiguration("params_file").perform(context) or os.path.join(share, PARAMS))
    mode = LaunchConfiguration("mode").perform(context)
    ctrl = [params, MANAGED]
    if mode == "lockstep":
        ctrl.append({"watchdog_timeout": float(LaunchConfiguration("lockstep_watchdog").perform(context))})
    return [
        Node(package=PACKAGE, executable="qv_loop_plant_node", name="qv_loop_plant", output="screen",
             parameters=[params, {"mode": mode}], prefix=LaunchConfiguration("plant_prefix"),
             exec_name="qv_loop_plant_node"),
        Node(package=PACKAGE, executable="qv_controller_node", name="qv_controller", output="screen",
             parameters=ctrl, prefix=LaunchConfiguration("controller_prefix"), exec_name="qv_controller_node"),
        qv_spawner("qv_controller"),   # configure, then activate once it reads the plant's states
    ]


def generate_launch_description():
    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("params_file", default_value="", description="override config/bimanual_ros.yaml"),
        DeclareLaunchArgument("mode", default_value="lockstep", choices=["lockstep", "realtime"],
                              description="plant pacing: one step per effort command (exact at any load), or the "
                                          "wall clock (needs the CPU for 1 kHz: see the launch file's doc)"),
        DeclareLaunchArgument("lockstep_watchdog", default_value="1.0",
                              description="controller watchdog_timeout [s] in lock-step mode"),
        DeclareLaunchArgument("controller_prefix", default_value="",
                              description="command prefix of the controller, e.g. 'chrt -f 30' (a realtime process)"),
        DeclareLaunchArgument("plant_prefix", default_value="",
                              description="command prefix of the plant, e.g. 'chrt -f 20' (below the controller)"),
        OpaqueFunction(function=_nodes),
    ])
