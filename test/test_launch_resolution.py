"""Every launch file resolves every package and executable it will start before it starts any (a missing
one fails the launch with nothing started, naming every missing package), and names its processes after
their executables (not after a command prefix such as ``nice``).

``launch`` / ``launch_ros`` are not installable here: the files are read with ``ast`` (test/launch_ast.py)
and the shared resolver (``qv_control.ros.launch_actions.resolve_executables``, which imports neither) is run
against a real ament index laid out in a temporary prefix.
"""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from launch_ast import constants

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = ROOT / "launch"
SHARED = ROOT / "qv_control" / "ros" / "launch_actions.py"
FILES = sorted(p.name for p in LAUNCH.glob("*.launch.py"))
# calls that start something (or need a package's files): none may come before the resolution
STARTS = {"Node", "qv_node", "qv_spawner", "ordered_qv_bringup", "IncludeLaunchDescription",
          "get_package_share_directory", "robot_files", "target_urdf", "export_mjcf_text", "resolve_urdf", "_urdf_path"}


def _calls(tree: ast.AST) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _name(call: ast.Call) -> str:
    return getattr(call.func, "id", None) or getattr(call.func, "attr", "")


def _started(tree: ast.Module, names: dict) -> set[tuple]:
    """(package, executable) of every process the file starts (executable None: an included launch file's
    package), read from its Node / qv_node / ordered_qv_bringup / IncludeLaunchDescription calls."""
    out = set()
    for call in _calls(tree):
        kw = {k.arg: k.value for k in call.keywords}
        if _name(call) == "Node":
            pkg, exe = kw["package"], kw["executable"]
            out.add((names[pkg.id] if isinstance(pkg, ast.Name) else pkg.value, exe.value))
        elif _name(call) == "qv_node":
            out.add(("qv_ros", call.args[0].value))
        elif _name(call) == "qv_spawner":
            out.add(("qv_ros", "qv_spawner"))
        elif _name(call) == "ordered_qv_bringup":
            out |= {tuple(p) for p in names["ORDERED_BRINGUP"]}
        elif _name(call) == "get_package_share_directory" and isinstance(call.args[0], ast.Constant):
            out.add((call.args[0].value, None))
    return out


def _resolved_first(func: ast.FunctionDef, resolver: str) -> None:
    """The resolver call is a statement of ``func`` that comes before every statement starting something."""
    body = [s for s in func.body if not isinstance(s, (ast.Import, ast.ImportFrom, ast.FunctionDef))]
    first_resolve = next(i for i, s in enumerate(body) if any(_name(c) == resolver for c in _calls(s)))
    starts = [i for i, s in enumerate(body) if any(_name(c) in STARTS for c in _calls(s))]
    assert starts and first_resolve < min(starts), (func.name, first_resolve, starts)


@pytest.mark.parametrize("launch", [f for f in FILES if f != "bringup.launch.py"])
def test_launch_file_resolves_everything_it_starts_first(launch):
    tree = ast.parse((LAUNCH / launch).read_text(), filename=launch)
    names = constants(tree, SHARED)
    names.setdefault("ORDERED_BRINGUP", constants(ast.parse(SHARED.read_text()))["ORDERED_BRINGUP"])
    resolved = {tuple(p) for p in names["EXECUTABLES"]}
    resolved |= {tuple(p) for pairs in names.get("OPTIONAL", {}).values() for p in pairs}
    started = _started(tree, names)
    assert started and started <= resolved, f"{launch} starts {sorted(started - resolved, key=str)} unresolved"
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_nodes")
    _resolved_first(func, "resolve_launch")
    for call in _calls(func):  # each names its own file in the message
        if _name(call) == "resolve_launch":
            assert call.args[1].value == launch


def test_bringup_launch_resolves_everything_it_starts_first():
    """bringup.launch.py imports launch lazily: its plan (executables_for) is read from the module itself."""
    spec = importlib.util.spec_from_file_location("bringup_launch", LAUNCH / "bringup.launch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tree = ast.parse((LAUNCH / "bringup.launch.py").read_text())
    started = _started(tree, constants(tree))
    assert started <= set(mod.executables_for(rsp=True, rviz=True))
    func = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_nodes")
    _resolved_first(func, "resolve_executables")


def test_prefixed_processes_are_named_after_their_executable():
    """A node started behind a command prefix (``nice -n 10``) is labelled with its executable's name."""
    for launch in FILES:
        tree = ast.parse((LAUNCH / launch).read_text())
        for call in _calls(tree):
            kw = {k.arg: k.value for k in call.keywords}
            if _name(call) == "Node" and "prefix" in kw:
                assert "exec_name" in kw and ast.literal_eval(kw["exec_name"]) == kw["executable"].value, launch
    shared = ast.parse(SHARED.read_text())
    qv_node = next(n for n in shared.body if isinstance(n, ast.FunctionDef) and n.name == "qv_node")
    node_call = next(c for c in _calls(qv_node) if _name(c) == "Node")
    kw = {k.arg: ast.unparse(k.value) for k in node_call.keywords}
    assert kw["exec_name"] == kw["executable"] == "executable"


def _prefix(tmp_path: Path, packages: dict) -> Path:
    """An install prefix with an ament index: {package: [executables]} registered and installed."""
    prefix = tmp_path / "install"
    index = prefix / "share" / "ament_index" / "resource_index" / "packages"
    index.mkdir(parents=True)
    for pkg, exes in packages.items():
        (index / pkg).write_text("")
        (prefix / "lib" / pkg).mkdir(parents=True)
        for exe in exes:
            path = prefix / "lib" / pkg / exe
            path.write_text("#!/bin/sh\n")
            path.chmod(0o755)
    return prefix


def test_resolver_names_every_missing_package(tmp_path):
    """Against a prefix holding qv_ros only, the plans of the controller_manager, MuJoCo and Gazebo launch files
    are refused naming every missing package (not only the first), and a complete plan resolves to paths.
    Run in a fresh interpreter with that AMENT_PREFIX_PATH (the ament index caches nothing, but the
    environment is the one a sourced workspace gives)."""
    prefix = _prefix(tmp_path, {"qv_ros": ["qv_sim_node", "qv_dynamics_node", "qv_controller_node", "qv_spawner"]})
    plans = {}
    for launch in ("mujoco_ros2_control.launch.py", "gazebo.launch.py", "ros2_control.launch.py"):
        tree = ast.parse((LAUNCH / launch).read_text())
        plans[launch] = [list(p) for p in constants(tree, SHARED)["EXECUTABLES"]]
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from qv_control.ros.launch_actions import resolve_executables\n"
        f"plans = json.loads({__import__('json').dumps(plans)!r})\n"
        "for name, plan in plans.items():\n"
        "    try:\n"
        "        resolve_executables([tuple(p) for p in plan], name)\n"
        "        print('STARTED', name)\n"
        "    except RuntimeError as exc:\n"
        "        print('REFUSED', exc)\n"
        "print('FOUND', resolve_executables([('qv_ros', 'qv_sim_node'), ('qv_ros', None)], 'x.launch.py'))\n")
    env = dict(os.environ, AMENT_PREFIX_PATH=str(prefix))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    refused = [ln for ln in proc.stdout.splitlines() if ln.startswith("REFUSED")]
    assert len(refused) == 3 and "STARTED" not in proc.stdout, proc.stdout
    text = "\n".join(refused)
    for pkg in ("controller_manager", "mujoco_ros2_control", "robot_state_publisher", "ros_gz_sim",
                "ros_gz_bridge", "gz_ros2_control"):
        assert f"package '{pkg}'" in text, (pkg, text)
    gz = next(ln for ln in refused if "gazebo.launch.py" in ln)
    assert gz.count("package '") == 5 and "nothing was started" in gz  # every missing one, each once
    assert "qv_ros" not in text  # what is there is not reported
    assert str(prefix / "lib" / "qv_ros" / "qv_sim_node") in proc.stdout.split("FOUND", 1)[1]
    # a missing executable of a present package is named with its path
    env["AMENT_PREFIX_PATH"] = str(prefix)
    code2 = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
             "from qv_control.ros.launch_actions import resolve_executables\n"
             "resolve_executables([('qv_ros', 'qv_loop_plant_node')], 'bimanual.launch.py')\n")
    proc = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1 and "executable 'qv_loop_plant_node' of package 'qv_ros'" in proc.stderr
