"""ros-controls/mujoco_ros2_control (MuJoCo behind controller_manager) + qv dynamics and controller nodes.

    ros2 launch qv_ros mujoco_ros2_control.launch.py robot:=panda headless:=true
    ros2 launch qv_ros mujoco_ros2_control.launch.py robot:=planar_3link [headless:=true]

At launch the robot's model config is exported (``qv export-mjcf`` and ``qv export-urdf --target
mujoco``, into a temporary folder): the MJCF has the robot (Pinocchio's bodies and inertias, a torque
motor per joint named by joint), the scene (the Panda's table) or the model's point contacts as exact
MuJoCo equality constraints (planar_3link's wall, the slider-crank's rail), the ``tool_force`` /
``tool_torque`` sensor pair at the constraint frame and a keyframe ``initial`` = the model config's
``initial.q`` projected onto the constraints (as the built-in simulator starts). The URDF names
``mujoco_ros2_control/MujocoSystemInterface`` with that MJCF and the ``fts`` sensor. The same
``config/controllers*.yaml`` as for mock hardware and Gazebo is used unchanged. ``robot:=panda`` runs the
contact task of ``config/demo_mujoco.yaml`` (as ``mujoco.launch.py`` does against the package's own plant).

mujoco_ros2_control publishes the F/T sensor *negated* (the environment's reaction on the tool, −λ, in
the tool frame), hence ``wrench_sign: -1.0`` for the qv nodes here.

Start-up order. mujoco_ros2_control steps the physics from its start and applies no torque until commands
come (this package's plants hold the robot until the first command), and its controller_manager (on the
simulation's clock) changes no controller and publishes no state while the simulation is paused. Each step
once the previous one has exited with success: mujoco_ros2_control's ros2_control_node and one spawner
activating joint_state_broadcaster, force_torque_sensor_broadcaster and effort_controller; the simulation
paused (``/mujoco_ros2_control_node/set_pause``) and reset to the ``initial`` keyframe (``~/reset_world``); the
gravity torque g(q0) of that pose sent to the effort controller (``forward_command_controller`` keeps its last
command: the arm is held when the physics resumes); the qv nodes, the controller ``managed`` with its
``qv_spawner``; once the controller is configured (its law loaded), the simulation resumed, and qv_spawner
activates the controller at the pose it finds.
"""
import os
import tempfile

from launch.actions import (
    DeclareLaunchArgument,
    ExecuteProcess,
    GroupAction,
    LogInfo,
    OpaqueFunction,
    RegisterEventHandler,
    Shutdown,
)
from launch.event_handlers import OnProcessExit, OnProcessIO
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from qv_control.ros.launch_actions import (
    BROADCASTERS,
    CONTROL_ROBOTS,
    EFFORT_CONTROLLER,
    FT_TOPIC,
    MANAGED,
    ORDERED_BRINGUP,
    discovery_profile,
    launch_flag,
    prefix_arguments,
    qv_node,
    qv_spawner,
    resolve_launch,
    robot_files,
    spawner,
)

PACKAGE = "qv_ros"
ROBOTS = {
    **CONTROL_ROBOTS,
    "panda": {"model": "config/demo_model.yaml", "params": "config/demo_mujoco.yaml",
              "controllers": "config/controllers_panda.yaml"},
}
# every (package, executable) this file starts, resolved before any starts (None: a package whose services
# it calls)
EXECUTABLES = [("robot_state_publisher", "robot_state_publisher"), ("mujoco_ros2_control", "ros2_control_node"),
               ("mujoco_ros2_control_msgs", None), *ORDERED_BRINGUP]
SIM = "/mujoco_ros2_control_node"
READY = "law '"   # qv_controller's line once configured (its law loaded)


def sim_call(service: str, srv: str, request: str) -> ExecuteProcess:
    """``ros2 service call`` of a service of mujoco_ros2_control's simulation."""
    return ExecuteProcess(cmd=["ros2", "service", "call", f"{SIM}/{service}", f"mujoco_ros2_control_msgs/srv/{srv}",
                               request], output="screen")


def gravity_hold(model: str, controllers: str) -> list:
    """g(q0) of the model config's initial state, in the order of the effort controller's joints: the command
    that holds the arm at the reset pose until the qv controller is active."""
    import pinocchio as pin

    from qv_dynamics.plants.export import controllers_info, load_config

    system, _, names, q0, _ = load_config(model)
    g = pin.computeGeneralizedGravity(system.model, system.data, q0)
    joints = controllers_info(controllers)[0] or names
    return [float(g[names.index(j)]) for j in joints]


def _nodes(context, *args, **kwargs):
    from qv_dynamics.plants.export import export_mjcf_text, target_urdf, write_text

    resolve_launch(context, "mujoco_ros2_control.launch.py", EXECUTABLES)
    robot, files = robot_files(context, ROBOTS)
    model, controllers, params = files["model"], files["controllers"], files["params"]
    headless = launch_flag(context, "headless")
    mjcf = write_text(os.path.join(tempfile.mkdtemp(prefix="qv_mujoco_"), f"{robot}.xml"), export_mjcf_text(model))
    urdf = target_urdf(model, "mujoco", controllers, mjcf_file=mjcf, headless=headless)
    sim_time = {"use_sim_time": True}
    # the F/T sensor through force_torque_sensor_broadcaster (the params file names the constraint it measures);
    # mujoco_ros2_control publishes the environment's reaction −λ
    sensor = dict(sim_time, wrench_topics=[FT_TOPIC], wrench_sign=-1.0)
    spawn = spawner([*BROADCASTERS, EFFORT_CONTROLLER], controllers)
    pause, reset = sim_call("set_pause", "SetPause", "{paused: true}"), sim_call("reset_world", "ResetWorld",
                                                                                "{keyframe: initial}")
    hold = ExecuteProcess(cmd=["ros2", "topic", "pub", "--once", "-w", "1", f"/{EFFORT_CONTROLLER}/commands",
                               "std_msgs/msg/Float64MultiArray", f"{{data: {gravity_hold(model, controllers)}}}"],
                          output="screen")
    qv_dynamics = qv_node("qv_dynamics_node", "qv_dynamics", params, sensor, prefix="dynamics_prefix")
    qv_controller = qv_node("qv_controller_node", "qv_controller", params, {**sensor, **MANAGED},
                            prefix="controller_prefix")
    qv_nodes = GroupAction([qv_dynamics, qv_controller, qv_spawner("qv_controller")])
    steps = [(spawn, pause), (pause, reset), (reset, hold), (hold, qv_nodes)]
    resumed = []

    def then(action):  # the next step only after a step that succeeded
        return lambda event, _context: [action] if event.returncode == 0 else \
            [LogInfo(msg=f"{event.action.name} failed (exit {event.returncode}): start-up stopped")]

    def resume(event):  # once, at the controller's READY line (configured; qv_spawner activates it next)
        if resumed or READY not in event.text.decode(errors="replace"):
            return None
        resumed.append(True)
        return [sim_call("set_pause", "SetPause", "{paused: false}")]

    return [
        Node(package="robot_state_publisher", executable="robot_state_publisher",
             parameters=[{"robot_description": urdf}, sim_time]),
        Node(package="mujoco_ros2_control", executable="ros2_control_node", output="screen",
             parameters=[sim_time, controllers], on_exit=Shutdown(), prefix=LaunchConfiguration("plant_prefix"),
             exec_name="ros2_control_node"),
        spawn,
        *[RegisterEventHandler(OnProcessExit(target_action=a, on_exit=then(b))) for a, b in steps],
        RegisterEventHandler(OnProcessIO(target_action=qv_controller, on_stdout=resume, on_stderr=resume)),
    ]


def generate_launch_description():
    return LaunchDescription([
        discovery_profile(),   # Fast DDS: discovery done during start-up (config/fastdds_discovery.xml)
        DeclareLaunchArgument("robot", default_value="planar_3link", choices=sorted(ROBOTS)),
        *prefix_arguments(),
        DeclareLaunchArgument("headless", default_value="false", description="run MuJoCo without its viewer"),
        DeclareLaunchArgument("plant_prefix", default_value="",
                              description="command prefix of mujoco_ros2_control's node, e.g. 'chrt -f 20' (its "
                              "physics thread then keeps real time on a loaded machine)"),
        OpaqueFunction(function=_nodes),
    ])
