"""Built-in constrained simulator + dynamics node + controller node (+ robot_state_publisher, optional rviz).

    ros2 launch qv_ros bringup.launch.py robot:=planar_3link rviz:=true
    ros2 launch qv_ros bringup.launch.py robot:=slider_crank mode:=lockstep
    ros2 launch qv_ros bringup.launch.py robot:=panda_table
    ros2 launch qv_ros bringup.launch.py robot:=slider_crank rsp:=false

Every node reads ``config/<robot>.yaml`` (sections qv_sim, qv_dynamics, qv_controller). Without
``ros2 launch`` the same three nodes run in one process: ``qv bringup config/<robot>.yaml``.

Every package and executable this file will start is resolved through the ament index *before* any
process starts: a missing ``robot_state_publisher`` (or ``rviz2``) fails the launch with nothing
started, so no qv node is left running as an orphan. ``rsp:=false`` leaves robot_state_publisher out.
The ``launch`` modules are imported inside the functions that need them, so the resolver can be
checked without a launch install (test/test_colcon.py).
"""
import os

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


def _model_urdf(params: str) -> str:
    """The URDF file of the model a user's parameters file names (its model_config's robot.urdf)."""
    from qv_control.ros.launch_actions import model_of_params, model_urdf

    return model_urdf(model_of_params(params))


def executables_for(rsp: bool, rviz: bool) -> list:
    """(package, executable) of every process this launch starts."""
    out = [(PACKAGE, "qv_sim_node"), (PACKAGE, "qv_dynamics_node"), (PACKAGE, "qv_controller_node"),
           (PACKAGE, "qv_spawner")]
    if rsp:
        out.append(("robot_state_publisher", "robot_state_publisher"))
    if rviz:
        out.append(("rviz2", "rviz2"))
    return out


def resolve_executables(pairs) -> list:
    """Path of each (package, executable) from the ament index; RuntimeError naming every missing one
    (:func:`qv_control.ros.launch_actions.resolve_executables`)."""
    from qv_control.ros.launch_actions import resolve_executables as resolve

    return resolve(pairs, "bringup.launch.py", "install it, or leave it out: rsp:=false, rviz:=false")


def _nodes(context, *args, **kwargs):
    from ament_index_python.packages import get_package_share_directory
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    from qv_control.ros.launch_actions import MANAGED, qv_spawner

    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    robot = arg("robot")
    if robot not in ROBOTS:
        raise RuntimeError(f"robot:={robot} is not one of {sorted(ROBOTS)}")
    rsp = arg("rsp").lower() in ("true", "1", "yes")
    rviz = arg("rviz").lower() in ("true", "1", "yes")
    resolve_executables(executables_for(rsp, rviz))  # before any process starts
    share = get_package_share_directory(PACKAGE)
    files = ROBOTS[robot]
    params = arg("params_file") or os.path.join(share, files["params"])
    with open(_urdf_path(share, files["urdf"]) if not arg("params_file") else _model_urdf(params)) as f:
        urdf = f.read()  # robot_state_publisher shows the model the nodes load
    sim_time = {"use_sim_time": True}
    mode = {"mode": arg("mode")}
    nodes = [
        Node(package=PACKAGE, executable="qv_sim_node", name="qv_sim", output="screen",
             parameters=[params, mode]),
        Node(package=PACKAGE, executable="qv_dynamics_node", name="qv_dynamics", output="screen",
             parameters=[params, sim_time], prefix=arg("dynamics_prefix") or None, exec_name="qv_dynamics_node"),
        Node(package=PACKAGE, executable="qv_controller_node", name="qv_controller", output="screen",
             parameters=[params, sim_time, MANAGED], prefix=arg("controller_prefix") or None,
             exec_name="qv_controller_node"),
        qv_spawner("qv_controller"),   # configure, then activate once it reads the simulator's states
    ]
    if rsp:
        nodes.append(Node(package="robot_state_publisher", executable="robot_state_publisher", output="log",
                          parameters=[{"robot_description": urdf}, sim_time]))
    if rviz:
        nodes.append(Node(package="rviz2", executable="rviz2", output="log",
                          arguments=["-d", os.path.join(share, RVIZ_CONFIG)], parameters=[sim_time]))
    return nodes


def generate_launch_description():
    from launch.actions import DeclareLaunchArgument, OpaqueFunction

    from launch import LaunchDescription
    from qv_control.ros.launch_actions import discovery_profile, prefix_arguments

    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS),
                              description="demo robot (urdf/<robot>.urdf, config/<robot>.yaml)"),
        DeclareLaunchArgument("params_file", default_value="", description="override config/<robot>.yaml"),
        DeclareLaunchArgument("mode", default_value="realtime", choices=["realtime", "lockstep"],
                              description="simulator pacing: wall clock, or one step per effort command"),
        DeclareLaunchArgument("rsp", default_value="true",
                              description="start robot_state_publisher (TF for rviz); false if it is not installed"),
        DeclareLaunchArgument("rviz", default_value="false", description="start rviz2 with config/qv.rviz"),
        *prefix_arguments(),
        OpaqueFunction(function=_nodes),
    ])
