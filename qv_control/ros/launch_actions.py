"""Launch actions shared by the controller_manager launch files (mock hardware, Gazebo, mujoco_ros2_control).

Imported by ``launch/*.launch.py``; ``launch``/``launch_ros`` (present on a full ROS 2 install) are imported
by the functions that build actions, so :func:`resolve_executables` runs without them.

Every launch file resolves every package and executable it will start (:func:`resolve_executables`)
before it returns any action: a missing one fails the launch with nothing started, naming every missing
package, so no node is left running as an orphan of a launch that then fails.

:func:`ordered_qv_bringup` starts the controllers and the qv nodes in an order that never
leaves an active effort controller without its commanding node:

1. one spawner activating the broadcasters (joint_state_broadcaster, force_torque_sensor_broadcaster);
2. when it has exited (they are active): ``qv_dynamics_node``, ``qv_controller_node`` (``managed``) and its
   ``qv_spawner``, which configures it and activates it once it reads joint states;
3. when that ``qv_spawner`` has exited with success (the qv controller is active): the spawner of
   ``effort_controller``; a qv controller that refused to activate leaves it unspawned.

A launch file that starts a qv controller node on its own passes :data:`MANAGED` with its parameters and
starts :func:`qv_spawner` beside it.

Every launch file starts with :func:`discovery_profile`: the Fast DDS discovery settings of
``config/fastdds_discovery.xml`` (announce for 3 s after start, then every second) for every process it
starts, unless ``FASTDDS_DEFAULT_PROFILES_FILE`` names the user's own file; the benchmarks start their
processes the same way (:func:`discovery_env`).
"""
from __future__ import annotations

import os
from typing import Sequence

from ament_index_python.packages import get_package_share_directory

PACKAGE = "qv_ros"
EFFORT_CONTROLLER = "effort_controller"
BROADCASTERS = ("joint_state_broadcaster", "force_torque_sensor_broadcaster")
FT_TOPIC = "/force_torque_sensor_broadcaster/wrench"  # force_torque_sensor_broadcaster's WrenchStamped
# the robots every controller_manager launch file offers: model config, qv parameters, controllers (share/)
CONTROL_ROBOTS = {
    "planar_3link": {"model": "config/planar_3link_model.yaml", "params": "config/planar_3link.yaml",
                     "controllers": "config/controllers.yaml"},
    "slider_crank": {"model": "config/slider_crank_model.yaml", "params": "config/slider_crank.yaml",
                     "controllers": "config/controllers_slider_crank.yaml"},
}


# what ordered_qv_bringup starts: (package, executable)
ORDERED_BRINGUP = [("controller_manager", "spawner"), (PACKAGE, "qv_dynamics_node"), (PACKAGE, "qv_controller_node"),
                   (PACKAGE, "qv_spawner")]
MANAGED = {"managed": True}   # a qv controller node started by a launch file waits for its qv_spawner
DISCOVERY_PROFILE = "config/fastdds_discovery.xml"   # (share/ or the source tree)
PROFILES_VARIABLE = "FASTDDS_DEFAULT_PROFILES_FILE"


def discovery_profile_path() -> str:
    """The installed ``config/fastdds_discovery.xml``, or the source tree's when the package is not installed."""
    try:
        return os.path.join(get_package_share_directory(PACKAGE), DISCOVERY_PROFILE)
    except (LookupError, OSError):   # PackageNotFoundError, or no AMENT_PREFIX_PATH: a source checkout
        return os.path.join(os.path.dirname(__file__), "..", "..", DISCOVERY_PROFILE)


def discovery_env(env: dict) -> dict:
    """``env`` with :data:`PROFILES_VARIABLE` set to the package's discovery profile unless it names one
    already (the user's own file wins), as :func:`discovery_profile` does in the launch files."""
    out = dict(env)
    if not out.get(PROFILES_VARIABLE):
        out[PROFILES_VARIABLE] = os.path.abspath(discovery_profile_path())
    return out


def discovery_profile():
    """The launch action that gives every process the launch file starts the discovery profile (module doc)."""
    from launch.actions import SetEnvironmentVariable
    from launch.substitutions import EnvironmentVariable

    return SetEnvironmentVariable(PROFILES_VARIABLE, EnvironmentVariable(
        PROFILES_VARIABLE, default_value=os.path.abspath(discovery_profile_path())))


def resolve_executables(pairs, launch_file: str, hint: str = "") -> list[str]:
    """Path of each (package, executable) from the ament index (executable None: the package only, e.g. one
    whose launch file is included); RuntimeError naming every missing one and saying nothing was started."""
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    if not os.environ.get("AMENT_PREFIX_PATH"):
        raise RuntimeError(f"{os.path.basename(launch_file)}: AMENT_PREFIX_PATH is not set (source the ROS 2 "
                           "install and the workspace's install/setup.bash); nothing was started")
    paths, missing = [], []
    for pkg, exe in dict.fromkeys(pairs):
        try:
            prefix = get_package_prefix(pkg)
        except PackageNotFoundError:
            if f"package '{pkg}'" not in missing:
                missing.append(f"package '{pkg}'")
            continue
        if exe is None:
            continue
        path = os.path.join(prefix, "lib", pkg, exe)
        if not os.access(path, os.X_OK):
            missing.append(f"executable '{exe}' of package '{pkg}' ({path})")
        paths.append(path)
    if missing:
        raise RuntimeError(f"{os.path.basename(launch_file)}: missing {', '.join(missing)}; nothing was started"
                           + (f" ({hint})" if hint else ""))
    return paths


def resolve_launch(context, launch_file: str, always, optional: dict | None = None, hint: str = "") -> list[str]:
    """:func:`resolve_executables` of what a launch file starts: ``always`` plus, for each true flag (launch
    argument) of ``optional`` ({flag: pairs}), its pairs."""
    pairs = list(always) + [p for flag, more in (optional or {}).items() if launch_flag(context, flag) for p in more]
    return resolve_executables(pairs, launch_file, hint)


def robot_files(context, robots: dict) -> tuple[str, dict]:
    """(name, files as paths in the package's share directory) of the robot chosen by the ``robot`` argument."""
    from launch.substitutions import LaunchConfiguration

    share = get_package_share_directory(PACKAGE)
    robot = LaunchConfiguration("robot").perform(context)
    return robot, {key: os.path.join(share, rel) for key, rel in robots[robot].items()}


def params_and_model(context, robots: dict) -> tuple[str, str]:
    """(parameters file, model config) of a launch: the ``params_file`` argument when given, with the model its
    nodes name (:func:`model_of_params`), else the files of the robot chosen by ``robot``."""
    from launch.substitutions import LaunchConfiguration

    _, files = robot_files(context, robots)
    params = LaunchConfiguration("params_file").perform(context)
    return (params, model_of_params(params)) if params else (files["params"], files["model"])


def model_of_params(params: str) -> str:
    """The model config a parameters file's nodes load: ``model_config`` of the first section that sets one,
    found as the nodes find it (next to the file, else a name in the package's config/). The file is checked
    as the nodes check it (:func:`qv_dynamics.ros.params_file.check_params_file`): a bad one fails the launch
    before any node starts."""
    from qv_dynamics.ros.params import resolve_config_path
    from qv_dynamics.ros.params_file import check_params_file, node_sections

    names = [sec.get("model_config") for _, sec in node_sections(check_params_file(params))]
    model = next((m for m in names if isinstance(m, str) and m), None)
    if model is None:
        raise RuntimeError(f"{params}: no section sets model_config (the model robot_state_publisher shows)")
    return resolve_config_path(model, os.path.dirname(os.path.abspath(os.path.expanduser(params))))


def checked_params_file(params: str) -> str:
    """``params`` once checked as the nodes will check it: a bad parameters file fails the launch with one
    line before any node starts (instead of nodes that exit 2 under a launch that keeps running)."""
    from qv_dynamics.ros.params_file import check_params_file

    check_params_file(params)
    return params


def model_urdf(model: str) -> str:
    """The URDF file of a model config (its ``robot.urdf``, found next to it or by name)."""
    from qv_dynamics.robots import resolve_urdf
    from qv_dynamics.yamlio import load_yaml

    doc = load_yaml(model, "model config")
    urdf = ((doc or {}).get("robot") or {}).get("urdf") if isinstance(doc, dict) else None
    if not isinstance(urdf, str):
        raise RuntimeError(f"model config {model}: no robot.urdf")
    return resolve_urdf(urdf, os.path.dirname(os.path.abspath(model)))


def launch_flag(context, name: str) -> bool:
    """A true/false launch argument (1/true/yes, any case, is true)."""
    from launch.substitutions import LaunchConfiguration

    return LaunchConfiguration(name).perform(context).lower() in ("1", "true", "yes")


def spawner(controllers: Sequence[str], param_file: str):
    """One controller_manager spawner loading, configuring and activating ``controllers`` in order."""
    from launch_ros.actions import Node

    return Node(package="controller_manager", executable="spawner", output="screen",
                arguments=[*controllers, "--param-file", param_file])


def prefix_arguments() -> list:
    """Launch arguments ``dynamics_prefix`` (default :data:`~qv_dynamics.ros.runner.OBSERVER_PREFIX`, a lower
    CPU priority for the observer) and ``controller_prefix`` (default none), e.g. ``taskset -c 1`` to keep
    the controller on a core of its own (pinning one's own processes needs no privileges either)."""
    from launch.actions import DeclareLaunchArgument

    from qv_dynamics.ros.runner import OBSERVER_PREFIX

    return [DeclareLaunchArgument("dynamics_prefix", default_value=OBSERVER_PREFIX,
                                  description="command prefix of qv_dynamics_node (an observer: lower priority)"),
            DeclareLaunchArgument("controller_prefix", default_value="",
                                  description="command prefix of qv_controller_node, e.g. 'taskset -c 1'")]


def qv_node(executable: str, name: str, params: str, overrides: dict, prefix: str = ""):
    """A qv node; ``prefix``: the name of a launch argument holding its command prefix (see
    :func:`prefix_arguments`). The process is labelled with the executable's name (launch would otherwise
    name it after the prefix's first word: ``nice-2``)."""
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node

    return Node(package=PACKAGE, executable=executable, name=name, output="screen", parameters=[params, overrides],
                prefix=LaunchConfiguration(prefix) if prefix else None, exec_name=executable)


def qv_spawner(node_name: str):
    """The ``qv_spawner`` of a managed qv controller node (started with :data:`MANAGED`): configures and
    activates it, as controller_manager's spawner does a controller (:mod:`qv_control.ros.spawner`)."""
    from launch_ros.actions import Node

    return Node(package=PACKAGE, executable="qv_spawner", arguments=[node_name], output="screen")


def ordered_qv_bringup(controllers_file: str, params: str, overrides: dict,
                       broadcasters: Sequence[str] = BROADCASTERS, after=None) -> list:
    """Broadcasters -> qv nodes -> effort controller (module docstring). ``after``: an action (e.g. the
    Gazebo ``create`` node) whose exit starts the broadcaster spawner; None starts it at once."""
    from launch.actions import LogInfo, RegisterEventHandler
    from launch.event_handlers import OnProcessExit

    spawn_broadcasters = spawner(broadcasters, controllers_file)
    spawn_effort = spawner([EFFORT_CONTROLLER], controllers_file)
    qv_dynamics = qv_node("qv_dynamics_node", "qv_dynamics", params, overrides, prefix="dynamics_prefix")
    qv_controller = qv_node("qv_controller_node", "qv_controller", params, {**overrides, **MANAGED},
                            prefix="controller_prefix")
    spawn_qv = qv_spawner("qv_controller")
    first = [spawn_broadcasters] if after is None else \
        [RegisterEventHandler(OnProcessExit(target_action=after, on_exit=[spawn_broadcasters]))]

    def after_qv(event, _context):  # the effort controller only behind an active qv controller
        return [spawn_effort] if event.returncode == 0 else \
            [LogInfo(msg="qv_controller is not active: effort_controller is not spawned")]

    return first + [
        RegisterEventHandler(OnProcessExit(target_action=spawn_broadcasters,
                                           on_exit=[qv_dynamics, qv_controller, spawn_qv])),
        RegisterEventHandler(OnProcessExit(target_action=spawn_qv, on_exit=after_qv)),
    ]
