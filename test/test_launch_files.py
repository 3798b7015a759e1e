"""The launch files (read with ``ast``: launch/launch_ros are not installed here; imported and built
where they are): the URDF each one hands to ros2_control, the spawner order, the parameter files.
"""
from __future__ import annotations

import ast
import importlib.util
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import pytest
import yaml
from launch_ast import constants

from qv_dynamics.plants.export import export_mjcf_text, target_urdf
from qv_dynamics.plants.urdf_targets import HARDWARE

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "launch"
# launch file -> the ros2_control target of its URDF
CONTROL_LAUNCHES = {"ros2_control.launch.py": "mock", "gazebo.launch.py": "gazebo",
                    "mujoco_ros2_control.launch.py": "mujoco"}


def _tree(name: str) -> ast.Module:
    return ast.parse((LAUNCH / name).read_text(), filename=name)


def _constants(tree: ast.Module) -> dict:
    return constants(tree, ROOT / "qv_control" / "ros" / "launch_actions.py")


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name]


@pytest.mark.parametrize("launch", sorted(CONTROL_LAUNCHES))
def test_launch_urdf_is_valid_with_the_expected_plugins(launch, tmp_path):
    """For every robot of the launch file's ROBOTS table, the URDF it builds (target_urdf with the target
    named in the file) parses and names the target's hardware plugin (Gazebo: and the gz system plugin
    with the controllers file; MuJoCo: an MJCF that compiles)."""
    tree = _tree(launch)
    target = CONTROL_LAUNCHES[launch]
    used = {c.args[1].value for c in _calls(tree, "target_urdf") if isinstance(c.args[1], ast.Constant)}
    assert used == {target}, used
    for robot, files in _constants(tree)["ROBOTS"].items():
        model, controllers = str(ROOT / files["model"]), str(ROOT / files["controllers"])
        kw = {}
        if target == "mujoco":
            kw["mjcf_file"] = str(tmp_path / f"{robot}.xml")
            Path(kw["mjcf_file"]).write_text(export_mjcf_text(model))
            mujoco.MjModel.from_xml_path(kw["mjcf_file"])
        root = ET.fromstring(target_urdf(model, target, controllers, **kw))
        assert root.find("ros2_control/hardware/plugin").text == HARDWARE[target]
        if target == "gazebo":
            assert root.find("gazebo/plugin/parameters").text == controllers
        if target == "mujoco":
            assert root.find("ros2_control/hardware/param[@name='mujoco_model']").text == kw["mjcf_file"]
        # the qv controller commands the effort controller's joints, in its order
        params = yaml.safe_load((ROOT / files["params"]).read_text())
        ctrl = yaml.safe_load(Path(controllers).read_text())
        assert params["qv_controller"]["ros__parameters"]["joints"] == \
            ctrl["effort_controller"]["ros__parameters"]["joints"]
        assert ctrl["controller_manager"]["ros__parameters"]["enforce_command_limits"] is True


@pytest.mark.parametrize("launch", sorted(set(CONTROL_LAUNCHES) - {"mujoco_ros2_control.launch.py"}))
def test_spawners_are_ordered(launch):
    """Broadcasters first (one spawner), then the qv nodes when that spawner has exited, then the effort
    controller once qv_controller runs: the effort controller never goes active before the qv controller
    exists (the arm is not left without commands in between). The launch files use the shared
    ``ordered_qv_bringup``; its event chain is read here."""
    assert len(_calls(_tree(launch), "ordered_qv_bringup")) == 1
    helper = ast.parse((ROOT / "qv_control" / "ros" / "launch_actions.py").read_text())
    func = next(n for n in helper.body if isinstance(n, ast.FunctionDef) and n.name == "ordered_qv_bringup")
    spawned = {t.id: c.args[0] for c in ast.walk(func) if isinstance(c, ast.Assign)
               for t in c.targets if isinstance(c.value, ast.Call) and getattr(c.value.func, "id", "") == "spawner"
               for c in [c.value]}
    assert ast.unparse(spawned["spawn_effort"]) == "[EFFORT_CONTROLLER]"
    assert ast.unparse(spawned["spawn_broadcasters"]) == "broadcasters"
    handlers = {}
    for call in _calls(func, "OnProcessExit") + _calls(func, "OnProcessStart"):
        kw = {k.arg: k.value for k in call.keywords}
        actions = kw["on_exit"] if "on_exit" in kw else kw["on_start"]
        handlers[(call.func.id, kw["target_action"].id)] = [e.id for e in actions.elts] \
            if isinstance(actions, ast.List) else actions.id
    assert handlers[("OnProcessExit", "spawn_broadcasters")] == ["qv_dynamics", "qv_controller", "spawn_qv"]
    assert handlers[("OnProcessExit", "after")] == ["spawn_broadcasters"]
    # the effort controller only once qv_spawner has exited with success (the qv controller is active)
    assert handlers[("OnProcessExit", "spawn_qv")] == "after_qv"
    after_qv = next(n for n in ast.walk(func) if isinstance(n, ast.FunctionDef) and n.name == "after_qv")
    ret = next(n for n in ast.walk(after_qv) if isinstance(n, ast.Return)).value
    assert ast.unparse(ret.test) == "event.returncode == 0" and ast.unparse(ret.body) == "[spawn_effort]"
    assert "spawn_effort" not in ast.unparse(ret.orelse)


def test_qv_controllers_are_managed_and_spawned():
    """Every launch file that starts a qv controller node starts it managed (waiting for a lifecycle
    manager: ``MANAGED`` among its parameters) and a ``qv_spawner`` naming that node (the shared
    ``ordered_qv_bringup`` does both for the controller_manager launch files)."""
    helper = ast.parse((ROOT / "qv_control" / "ros" / "launch_actions.py").read_text())
    assert ast.literal_eval(next(n.value for n in helper.body if isinstance(n, ast.Assign)
                                 and getattr(n.targets[0], "id", "") == "MANAGED")) == {"managed": True}
    for path in sorted(LAUNCH.glob("*.launch.py")):
        tree = ast.parse(path.read_text())
        if _calls(tree, "ordered_qv_bringup"):
            continue
        controllers = {}
        for c in _calls(tree, "Node") + _calls(tree, "qv_node"):
            kw = {k.arg: k.value for k in c.keywords}
            exe = c.args[0].value if c.args else getattr(kw.get("executable"), "value", "")
            if exe in ("qv_controller_node", "qv_legged_controller_node"):
                name = c.args[1].value if c.args else kw["name"].value
                controllers[name] = ast.unparse(c)
        spawned = {c.args[0].value for c in _calls(tree, "qv_spawner")}
        assert controllers and set(controllers) == spawned, (path.name, controllers, spawned)
        for name, call in controllers.items():
            assert "MANAGED" in call or "ctrl" in call, (path.name, call)
        if "ctrl = [params, MANAGED]" not in path.read_text():
            assert all("MANAGED" in call for call in controllers.values()), path.name


def test_mujoco_ros2_control_launch_holds_the_simulation_until_the_controller_runs():
    """mujoco_ros2_control steps from its start with no torque: one spawner activates the broadcasters and the
    effort controller, then the simulation is paused, reset to the ``initial`` keyframe and held by g(q0) on the
    effort controller, then the qv nodes start (the controller managed, with its qv_spawner), and the simulation
    resumes at the controller's READY line; each step only after the previous one succeeded
    (test/test_ros2_control_mujoco.py runs this order against the built stack)."""
    tree = _tree("mujoco_ros2_control.launch.py")
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_nodes")
    spawns = _calls(func, "spawner")
    assert len(spawns) == 1 and ast.unparse(spawns[0].args[0]) == "[*BROADCASTERS, EFFORT_CONTROLLER]"
    steps = next(n.value for n in ast.walk(func) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "")
                 == "steps")
    assert ast.unparse(steps) == "[(spawn, pause), (pause, reset), (reset, hold), (hold, qv_nodes)]"
    hold = next(n.value for n in ast.walk(func) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "")
                == "hold")
    assert "gravity_hold(model, controllers)" in ast.unparse(hold) and "/commands" in ast.unparse(hold)
    group = next(c for c in _calls(func, "GroupAction"))
    assert ast.unparse(group.args[0]) == "[qv_dynamics, qv_controller, qv_spawner('qv_controller')]"
    io = _calls(func, "OnProcessIO")
    assert len(io) == 1 and ast.unparse(io[0]) == \
        "OnProcessIO(target_action=qv_controller, on_stdout=resume, on_stderr=resume)"
    then = next(n for n in ast.walk(func) if isinstance(n, ast.FunctionDef) and n.name == "then")
    ret = next(n for n in ast.walk(then) if isinstance(n, ast.Return)).value.body
    assert ast.unparse(ret.test) == "event.returncode == 0" and ast.unparse(ret.body) == "[action]"
    calls = sorted((ast.literal_eval(c.args[0]), ast.literal_eval(c.args[2])) for c in _calls(func, "sim_call"))
    assert calls == [("reset_world", "{keyframe: initial}"), ("set_pause", "{paused: false}"),
                     ("set_pause", "{paused: true}")]


def test_mujoco_ros2_control_launch_gravity_hold():
    """The hold command is g(q0) of the model config's initial state in the effort controller's joint order
    (the slider-crank: its one actuated joint), against Pinocchio."""
    import numpy as np
    import pinocchio as pin

    if importlib.util.find_spec("launch_ros") is None:
        pytest.skip("launch / launch_ros not installed (not on PyPI): the launch file is not importable")
    spec = importlib.util.spec_from_file_location("mrc_launch", LAUNCH / "mujoco_ros2_control.launch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from qv_dynamics.plants.export import load_config

    for model, ctrl, joints in (("demo_model.yaml", "controllers_panda.yaml", 7),
                                ("slider_crank_model.yaml", "controllers_slider_crank.yaml", 1)):
        system, _, names, q0, _ = load_config(str(ROOT / "config" / model))
        assert joints == 7 or len(names) > joints
        g = module.gravity_hold(str(ROOT / "config" / model), str(ROOT / "config" / ctrl))
        ref = pin.computeGeneralizedGravity(system.model, system.data, q0)
        actuated = names if joints == 7 else ["crank_joint"]
        np.testing.assert_allclose(g, [ref[names.index(j)] for j in actuated], rtol=0, atol=1e-12)


def test_mujoco_ros2_control_launch_flips_the_wrench_sign():
    """mujoco_ros2_control publishes −λ (sensordata negated; test_urdf_targets' static press): the launch
    file hands the qv nodes wrench_sign −1 with the broadcaster's topic."""
    tree = _tree("mujoco_ros2_control.launch.py")
    calls = [c for c in _calls(tree, "dict") if any(k.arg == "wrench_sign" for k in c.keywords)]
    assert len(calls) == 1
    kw = {k.arg: k.value for k in calls[0].keywords}
    assert ast.literal_eval(kw["wrench_sign"]) == -1.0 and ast.unparse(kw["wrench_topics"]) == "[FT_TOPIC]"


def test_mujoco_launch_uses_the_demo_parameters():
    """launch/mujoco.launch.py: qv_mujoco_node + qv_dynamics_node + qv_controller_node on
    config/demo_mujoco.yaml, whose controller's contact task starts from the model config's initial.q."""
    tree = _tree("mujoco.launch.py")
    exes = {getattr(k.value, "value", None) for c in _calls(tree, "Node") for k in c.keywords if k.arg == "executable"}
    exes |= {c.args[0].value for c in _calls(tree, "qv_node")}  # launch_actions.qv_node(executable, ...)
    assert {"qv_mujoco_node", "qv_dynamics_node", "qv_controller_node"} <= exes
    params = yaml.safe_load((ROOT / _constants(tree)["ROBOTS"]["panda"]["params"]).read_text())
    model = yaml.safe_load((ROOT / "config" / params["qv_mujoco"]["ros__parameters"]["model_config"]).read_text())
    assert params["qv_controller"]["ros__parameters"]["task"]["start_q"] == model["initial"]["q"]


@pytest.mark.skipif(importlib.util.find_spec("launch") is None or importlib.util.find_spec("launch_ros") is None,
                    reason="launch / launch_ros not installed (not on PyPI): launch files checked with ast only")
@pytest.mark.parametrize("launch", sorted(p.name for p in LAUNCH.glob("*.launch.py")))
def test_launch_files_build_a_description(launch):
    spec = importlib.util.spec_from_file_location(launch.replace(".", "_"), LAUNCH / launch)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.generate_launch_description().entities


def test_mujoco_launch_parameters_touch_down_and_press():
    """The parameters of launch/mujoco.launch.py, run in-process in lock-step (plant + controller through
    real rclpy topics): the controller's task touches the table within its approach window at a peak of
    at most 1.5x the commanded 10 N (the plant's own contact force) and then presses within 5 % of it."""
    import os

    import numpy as np
    import rclpy
    from rclpy.context import Context

    from qv_control.ros.bringup import load_params_file, to_parameters
    from qv_control.ros.controller_node import ControllerNode
    from qv_dynamics.ros.mujoco_node import MujocoNode
    from qv_dynamics.ros.runner import make_executor

    params = load_params_file(ROOT / "config" / "demo_mujoco.yaml")
    model = yaml.safe_load((ROOT / "config" / "demo_model.yaml").read_text())
    ctx = Context()
    rclpy.init(context=ctx, domain_id=(int(os.environ.get("ROS_DOMAIN_ID", "0")) + 16) % 200, args=[])
    nodes = []
    try:
        plant = MujocoNode("qv_mujoco", context=ctx, parameter_overrides=to_parameters(
            dict(params["qv_mujoco"], mode="lockstep", lockstep_resend=0.05)))
        nodes.append(plant)
        nodes.append(ControllerNode("qv_controller", context=ctx, parameter_overrides=to_parameters(
            dict(params["qv_controller"], use_sim_time=True, watchdog_timeout=5.0))))
        np.testing.assert_array_equal(plant.plant.q, model["initial"]["q"])
        ex = make_executor(ctx)
        for n in nodes:
            ex.add_node(n)
        plant.publish_state()
        import time

        ctrl, fn = nodes[1], []
        plant.on_step.append(lambda node: fn.append((node.plant.time, node.plant.normal_force())))
        end = time.monotonic() + 120.0
        while ctrl.task_layer.task.t_contact is None and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
        tc = ctrl.task_layer.task.t_contact
        assert tc is not None, ctrl.task_layer.task.reason
        while plant.plant.time < tc + 0.6 and time.monotonic() < end:
            ex.spin_once(timeout_sec=0.1)
        t, f = np.array(fn).T
        assert f[t >= tc - 0.01].max() <= 15.0
        assert abs(f[-1] - 10.0) < 0.5 and ctrl.task_layer.task.phase == "contact"
        ex.shutdown()
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


def test_launch_files_declare_the_node_prefixes():
    """Every launch file that starts qv_dynamics_node through the shared actions (or reads its prefix argument)
    declares the ``dynamics_prefix``/``controller_prefix`` arguments the node actions read."""
    users = []
    for path in sorted(LAUNCH.glob("*.launch.py")):
        text = path.read_text()
        if "ordered_qv_bringup(" in text or "dynamics_prefix" in text:
            users.append(path.name)
            assert _calls(_tree(path.name), "prefix_arguments"), path.name
    assert len(users) >= 5, users  # bringup, mujoco, ros2_control, gazebo, mujoco_ros2_control


def test_a_users_parameters_file_names_its_model(tmp_path):
    """mujoco.launch.py params_file:=…: robot_state_publisher shows the model the file's nodes load."""
    from qv_control.ros.launch_actions import model_of_params
    from qv_dynamics.errors import ModelError

    (tmp_path / "my_model.yaml").write_text("robot: {urdf: ur5}\n")
    mine = tmp_path / "my_arm.yaml"
    mine.write_text("qv_mujoco: {ros__parameters: {mode: realtime}}\n"
                    "qv_controller: {ros__parameters: {model_config: my_model.yaml}}\n")
    assert model_of_params(str(mine)) == str(tmp_path / "my_model.yaml")
    mine.write_text("qv_controller: {ros__parameters: {model_config: ur5_table_model}}\n")
    assert model_of_params(str(mine)).endswith("config/ur5_table_model.yaml")
    mine.write_text("qv_controller: {ros__parameters: {model_config: no_such_model.yaml}}\n")
    with pytest.raises(ModelError, match="no_such_model"):
        model_of_params(str(mine))
    mine.write_text("qv_controller: {ros__parameters: {law: quasi_tracking}}\n")
    with pytest.raises(RuntimeError, match="model_config"):
        model_of_params(str(mine))


def test_bringup_shows_the_model_of_a_users_parameters_file(tmp_path):
    """bringup.launch.py params_file:=…: robot_state_publisher gets the URDF of the model the file names."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bringup_launch_rsp", ROOT / "launch" / "bringup.launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mine = tmp_path / "my_arm.yaml"
    mine.write_text("qv_controller: {ros__parameters: {model_config: ur5_table_model}}\n")
    assert mod._model_urdf(str(mine)).endswith("ur_description/urdf/ur5_robot.urdf")


def test_launch_files_give_their_processes_the_discovery_profile():
    """Every launch file sets the Fast DDS discovery profile first, before any process it starts (the first
    action of its description); the benches' environment keeps a user's own profile file."""
    from qv_control.ros.launch_actions import PROFILES_VARIABLE, discovery_env, discovery_profile_path

    for path in sorted(LAUNCH.glob("*.launch.py")):
        desc = next(c for c in _calls(_tree(path.name), "LaunchDescription"))
        first = desc.args[0].elts[0]
        assert isinstance(first, ast.Call) and first.func.id == "discovery_profile", path.name
    given = Path(discovery_env({})[PROFILES_VARIABLE])       # installed share/ or this source tree
    assert given.is_absolute() and given.read_text() == (ROOT / "config" / "fastdds_discovery.xml").read_text()
    assert discovery_env({PROFILES_VARIABLE: "/mine.xml"})[PROFILES_VARIABLE] == "/mine.xml"
    assert Path(discovery_profile_path()).resolve().is_file()


def test_fast_dds_reads_the_discovery_profile(tmp_path):
    """The profile announces through start-up (≥ 3 s) and then every second; a node process given it (as the
    launch files give it) starts with no Fast DDS XML error, and a copy with one value broken makes Fast DDS
    say so: the variable is read by this middleware, the file is not silently ignored."""
    pytest.importorskip("rclpy")
    import os
    import subprocess
    import sys

    from qv_control.ros.launch_actions import PROFILES_VARIABLE, discovery_env

    good = discovery_env({})[PROFILES_VARIABLE]
    root = ET.parse(good).getroot()
    ns = {"d": "http://www.eprosima.com"}
    count = int(root.find(".//d:initialAnnouncements/d:count", ns).text)
    period = int(root.find(".//d:initialAnnouncements/d:period/d:nanosec", ns).text) * 1e-9
    lease = int(root.find(".//d:leaseAnnouncement/d:sec", ns).text)
    assert count * period >= 3.0 and lease <= 1   # announced through start-up, then every second
    bad = tmp_path / "broken.xml"
    bad.write_text(Path(good).read_text().replace("<count>30</count>", "<count>thirty</count>"))
    script = ("import rclpy; rclpy.init(); n = rclpy.create_node('qv_profile_probe'); print('started', flush=True); "
              "n.destroy_node(); rclpy.shutdown()")
    outs = {}
    for name, profile in (("good", good), ("bad", str(bad))):
        env = dict(os.environ, ROS_DOMAIN_ID="199", ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                   **{PROFILES_VARIABLE: profile})
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
        outs[name] = run.stdout + run.stderr
        assert run.returncode == 0 and "started" in outs[name], outs[name]
    assert "XMLPARSER" not in outs["good"] and "Error" not in outs["good"], outs["good"]
    assert "XMLPARSER" in outs["bad"] and "broken.xml" in outs["bad"], outs["bad"]
