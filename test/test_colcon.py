"""``colcon build`` of the repository (ament_python) in a colcon workspace, and what lands there.

The workspace is the README's: ``<ws>/src/qv_ros`` (a link to this checkout), ``colcon build
--packages-select qv_ros`` run with the venv's colcon (colcon-package-selection, colcon-bash from
requirements.txt), then ``source install/setup.bash`` in bash. Checks: the node executables in
``install/qv_ros/lib/qv_ros``, launch/urdf/config files in ``install/qv_ros/share/qv_ros``; every launch
file parses as Python and every qv_ros executable, parameter file and URDF it names exists in the
installed tree (``launch`` itself is not installed here, so the files are read with ``ast``); the
installed simulator node starts from the install tree alone (AMENT_PREFIX_PATH, no source checkout on the
path) and publishes /joint_states; ``bringup.launch.py`` resolves its packages before starting any.
"""
from __future__ import annotations

import ast
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from launch_ast import constants

from qv_dynamics.robots import EXAMPLE_ROBOTS, resolve_urdf

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
EXECUTABLES = ("qv_dynamics_node", "qv_sim_node", "qv_controller_node", "qv")
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 19) % 200  # not the demo test's +11


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """<ws>/src/qv_ros -> this checkout; ``colcon build --packages-select qv_ros`` as the README says."""
    colcon = BIN / "colcon"
    if not colcon.exists():
        colcon = shutil.which("colcon")
    assert colcon, "colcon not found next to the interpreter (pip install -r requirements.txt)"
    ws = tmp_path_factory.mktemp("ws")
    (ws / "src").mkdir()
    (ws / "src" / "qv_ros").symlink_to(ROOT, target_is_directory=True)
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run([str(colcon), "build", "--packages-select", "qv_ros", "--event-handlers", "console_direct-"],
                          cwd=ws, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Finished <<< qv_ros" in proc.stdout
    return ws


@pytest.fixture(scope="module")
def install(workspace):
    return workspace / "install" / "qv_ros"


def test_source_install_setup_bash_puts_the_package_on_the_paths(workspace):
    """``source install/setup.bash`` (colcon-bash) works and the installed package is what Python imports."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "AMENT_PREFIX_PATH")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    script = ("set -e; source install/setup.bash; echo \"AMENT=$AMENT_PREFIX_PATH\"; "
              "python -c 'import qv_dynamics; print(\"FILE=\" + qv_dynamics.__file__)'")
    proc = subprocess.run(["bash", "-c", script], cwd=workspace, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    assert str(workspace / "install" / "qv_ros") in out["AMENT"].split(os.pathsep)
    assert out["FILE"].startswith(str(workspace / "install" / "qv_ros"))


def _readme_python_snippet() -> str:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## In Python"):]
    return section[section.index("```python") + len("```python"):section.index("```", section.index("```python") + 9)]


def test_setup_installs_the_package_into_the_venv(tmp_path):
    """After ``bash scripts/setup.sh``: ``.venv/bin/qv --help`` works, and the README's Python API snippet,
    saved as a script outside the repository, runs with the venv's python (no PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    qv = BIN / "qv"
    assert qv.is_file(), f"{qv} missing: scripts/setup.sh must install the package into the venv"
    proc = subprocess.run([str(qv), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "simulate" in proc.stdout, proc.stderr
    script = tmp_path / "snippet.py"
    script.write_text(_readme_python_snippet() + "\nprint('SNIPPET_OK', tau.shape)\n")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "SNIPPET_OK (7,)" in proc.stdout


def test_bringup_launch_resolves_every_package_before_starting(install, tmp_path):
    """bringup.launch.py resolves every package and executable it will start before it returns any action
    (a missing robot_state_publisher fails with nothing started), and ``rsp:=false`` drops that node.
    ``launch`` is not installable here: the launch file's resolver is called directly, against the
    installed tree (AMENT_PREFIX_PATH), in a fresh interpreter."""
    lf = install / "share" / "qv_ros" / "launch" / "bringup.launch.py"
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('bringup_launch', {str(lf)!r})\n"
        "mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)\n"
        "print('FOUND', mod.resolve_executables([('qv_ros', 'qv_sim_node'), ('qv_ros', 'qv_controller_node')]))\n"
        "try:\n"
        "    mod.resolve_executables([('qv_ros', 'qv_sim_node'), ('robot_state_publisher', 'robot_state_publisher')])\n"
        "except RuntimeError as exc:\n"
        "    print('REFUSED', exc)\n"
        "print('PLAN_NO_RSP', [p for p, _ in mod.executables_for(rsp=False, rviz=False)])\n"
        "print('PLAN_RSP', [p for p, _ in mod.executables_for(rsp=True, rviz=True)])\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["AMENT_PREFIX_PATH"] = str(install)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in proc.stdout.splitlines() if " " in ln}
    assert str(install / "lib" / "qv_ros" / "qv_sim_node") in lines["FOUND"]
    assert "robot_state_publisher" in lines["REFUSED"] and "nothing was started" in lines["REFUSED"]
    assert "robot_state_publisher" not in lines["PLAN_NO_RSP"] and "qv_ros" in lines["PLAN_NO_RSP"]
    assert "robot_state_publisher" in lines["PLAN_RSP"] and "rviz2" in lines["PLAN_RSP"]
    src = lf.read_text()
    assert 'DeclareLaunchArgument("rsp"' in src


def test_executables_and_share_files_installed(install):
    lib = install / "lib" / "qv_ros"
    for exe in EXECUTABLES:
        assert (lib / exe).is_file() and os.access(lib / exe, os.X_OK), exe
    share = install / "share" / "qv_ros"
    for rel in ("package.xml", "launch/bringup.launch.py", "launch/ros2_control.launch.py",
                "launch/gazebo.launch.py", "launch/mujoco.launch.py", "launch/mujoco_ros2_control.launch.py",
                "config/controllers_panda.yaml", "config/demo_mujoco.yaml",
                "urdf/slider_crank.urdf", "urdf/planar_3link.urdf", "urdf/README.md",
                "config/controllers.yaml", "config/controllers_slider_crank.yaml", "config/planar_3link.yaml",
                "config/slider_crank.yaml", "config/qv.rviz"):
        assert (share / rel).is_file(), rel
    assert (install.parent / "qv_ros" / "share" / "ament_index" / "resource_index" / "packages" / "qv_ros").is_file()


def _launch_references(path: Path, shared: Path | None = None) -> tuple[set[str], set[str], dict]:
    """(qv_ros executables, share-relative file paths, ROBOTS table) named in a launch file (``shared``: the
    installed launch_actions module whose names it imports)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    consts = constants(tree, shared)
    exes, files = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Node":
            kw = {k.arg: k.value for k in node.keywords}
            pkg = kw.get("package")
            pkg = consts.get(pkg.id) if isinstance(pkg, ast.Name) else getattr(pkg, "value", None)
            exe = getattr(kw.get("executable"), "value", None)
            if pkg == "qv_ros" and exe is not None:
                exes.add(exe)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith(("urdf/", "config/", "launch/")):
            files.add(node.value)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "qv_node":  # launch_actions helper
            exes.add(node.args[0].value)
    return exes, files, consts.get("ROBOTS", {})


def _installed_module(install: Path, dotted: str) -> Path:
    site = next((install / "lib").glob("python3*/site-packages"))
    return site.joinpath(*dotted.split(".")).with_suffix(".py")


# launch files for one robot with nodes of its own: (executables, files they need in share/)
SINGLE_ROBOT_LAUNCHES = {
    "anymal.launch.py": ({"qv_legged_mujoco_node", "qv_legged_controller_node"},
                         ("config/anymal.yaml", "config/anymal_model.yaml")),
    "bimanual.launch.py": ({"qv_loop_plant_node", "qv_controller_node"},
                           ("config/bimanual_ros.yaml", "config/bimanual_model.yaml", "urdf/bimanual_panda_box.urdf")),
}


def test_launch_files_reference_installed_things(install):
    share = install / "share" / "qv_ros"
    lib = install / "lib" / "qv_ros"
    launches = sorted((share / "launch").glob("*.launch.py"))
    assert len(launches) == 7
    for lf in launches:
        compile(lf.read_text(), str(lf), "exec")
        helper = None
        if "qv_control.ros.launch_actions" in lf.read_text():  # nodes and robots from the shared helper
            helper = _installed_module(install, "qv_control.ros.launch_actions")
            assert helper.is_file(), helper
        exes, files, robots = _launch_references(lf, helper)
        if "ordered_qv_bringup(" in lf.read_text():  # the qv nodes the shared helper starts
            exes |= _launch_references(helper)[0]
        for exe in exes:
            assert (lib / exe).is_file(), f"{lf.name}: executable {exe} not installed"
        if lf.name in SINGLE_ROBOT_LAUNCHES:  # their own plant and controller, one robot (no ROBOTS table)
            nodes, needed = SINGLE_ROBOT_LAUNCHES[lf.name]
            assert exes == nodes, exes
            for rel in needed:
                assert (share / rel).is_file(), rel
            continue
        assert exes >= {"qv_dynamics_node", "qv_controller_node"}, (lf.name, exes)
        assert robots, f"{lf.name}: no ROBOTS table"
        for robot, entry in robots.items():
            for key, rel in entry.items():
                if key == "urdf" and rel in EXAMPLE_ROBOTS:  # example-robot-data (the Panda), not in share/
                    assert Path(resolve_urdf(rel)).is_file(), rel
                elif isinstance(rel, str):
                    files.add(rel)
        for rel in files:
            assert (share / rel).is_file(), f"{lf.name}: {rel} not in the installed share directory"
    # every parameters file's model_config and every model's URDF resolve inside share/
    for params in ("planar_3link.yaml", "slider_crank.yaml", "panda_table.yaml", "bimanual_ros.yaml"):
        doc = yaml.safe_load((share / "config" / params).read_text())
        for node, sec in doc.items():
            mc = sec["ros__parameters"].get("model_config")
            assert mc and (share / "config" / mc).is_file(), (params, node, mc)
            urdf = yaml.safe_load((share / "config" / mc).read_text())["robot"]["urdf"]
            assert (share / "urdf" / urdf).is_file() or urdf in EXAMPLE_ROBOTS, urdf
    # controllers files name the controllers the launch files spawn
    for cf in ("controllers.yaml", "controllers_slider_crank.yaml", "controllers_panda.yaml"):
        doc = yaml.safe_load((share / "config" / cf).read_text())
        cm = doc["controller_manager"]["ros__parameters"]
        assert cm["effort_controller"]["type"] == "forward_command_controller/ForwardCommandController"
        assert doc["effort_controller"]["ros__parameters"]["interface_name"] == "effort"
        assert cm["joint_state_broadcaster"]["type"] == "joint_state_broadcaster/JointStateBroadcaster"
        assert "force_torque_sensor_broadcaster" in cm


def test_installed_sim_node_runs_from_install_tree(install, tmp_path):
    """The installed qv_sim_node finds its config/URDF through ament_index and publishes /joint_states."""
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState

    site = next((install / "lib").glob("python3*/site-packages"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(site), AMENT_PREFIX_PATH=str(install), ROS_DOMAIN_ID=str(DOMAIN),
               ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    params = install / "share" / "qv_ros" / "config" / "slider_crank.yaml"
    proc = subprocess.Popen([str(install / "lib" / "qv_ros" / "qv_sim_node"), "--ros-args", "-r",
                             "__node:=qv_sim", "--params-file", str(params),
                             "-p", "wait_for_command:=false"],  # no controller here: let time run at once
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=DOMAIN, args=[])
    node = rclpy.create_node("colcon_probe", context=ctx)
    got = []
    node.create_subscription(JointState, "/joint_states", got.append, 10)
    try:
        end = time.monotonic() + 30.0
        while time.monotonic() < end and len(got) < 5 and proc.poll() is None:
            _spin(node, ctx)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        assert len(got) >= 5
        assert list(got[-1].name) == ["crank_joint", "rod_joint"]
        assert got[-1].header.stamp.sec > 0 or got[-1].header.stamp.nanosec > 0
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
    err = proc.stderr.read() if proc.stderr else ""
    assert "Traceback" not in err, err[-2000:]
    assert str(ROOT) not in err  # nothing came from the source checkout


def _spin(node, ctx) -> None:
    from rclpy.executors import SingleThreadedExecutor

    ex = getattr(node, "_probe_ex", None)
    if ex is None:
        ex = node._probe_ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
    ex.spin_once(timeout_sec=0.1)
