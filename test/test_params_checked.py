"""Parameters checked before anything moves: task.*, legged plans and node parameters finite, in range and
consistent; parameters files and YAML checked before rcl or the package reads them; relative paths next to
the file that names them.

Each test feeds the bad input and asserts the refusal (ModelError naming the parameter in-process; one line
and exit code 2 from a process, no traceback), and the good input next to it is accepted, so a refusal
cannot pass by refusing everything. Processes are started side by side and reaped within bounded times.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
from rcl_interfaces.srv import GetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_helpers import call, ros_session, stop_processes  # noqa: E402
from test_contact_task_node import params as task_params  # noqa: E402
from test_ros_nodes import arm_params  # noqa: E402

from qv_control.gait import FootStep, GaitPlan, plan_from_spec  # noqa: E402
from qv_control.ros.bringup import load_params_file, to_parameters  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_control.task import ContactTaskConfig  # noqa: E402
from qv_dynamics.errors import ModelError, QVError  # noqa: E402
from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.yamlio import MAX_LIST, load_yaml  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 53) % 200
ARM = ROOT / "config" / "planar_3link.yaml"
MODEL = ROOT / "config" / "planar_3link_model.yaml"
CTX_ARGS = {"automatically_declare_parameters_from_overrides": False}


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_checked_probe") as s:
        yield s


def _env() -> dict:
    return dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")


def _start(module: str, *ros_args: str, cwd=ROOT) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, "--ros-args", *ros_args], cwd=str(cwd), env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _refused(proc: subprocess.Popen, *words: str, timeout: float = 120.0) -> str:
    """Exit code 2 and one line naming ``words``, no traceback."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"not refused within {timeout} s: {out[-2000:]}")
    lines = [ln for ln in out.splitlines() if ln.strip()]
    assert proc.returncode == 2, (proc.returncode, out[-2000:])
    assert len(lines) == 1 and "Traceback" not in out and "refused to start" in lines[0], out[-2000:]
    assert all(w in lines[0] for w in words), (words, lines[0])
    return lines[0]


# ------------------------------------------------------------------ task.* parameters
@pytest.mark.parametrize("name, value, words", [
    ("approach_speed", 1e300, ("task.approach_speed",)),
    ("approach_speed", 1.5, ("task.approach_speed", "1")),
    ("surface_height", math.inf, ("task.surface_height",)),
    ("release_at", math.nan, ("task.release_at",)),
    ("ft_timeout", 1e9, ("task.ft_timeout",)),
    ("approach_window", 1e9, ("task.approach_window",)),
    ("retract", 10.0, ("task.retract",)),
    ("period", 1e9, ("task.period",)),
    ("force", math.nan, ("task.force",)),
    ("kf", 1.0, ("task.kf",)),
    ("force_limit", math.inf, ("task.force_limit",)),
    ("waypoints", [0.5] * 2_500_000, ("task.waypoints", "at most")),                # in-process: no file bound
])
def test_task_values_out_of_range_refused_where_declared(ros, name, value, words):
    ctx, _, _ = ros
    with pytest.raises(ModelError) as ei:
        ControllerNode("qv_task_bad", context=ctx, parameter_overrides=to_parameters(task_params(**{name: value})),
                       **CTX_ARGS)
    assert all(w in str(ei.value) for w in words), str(ei.value)


@pytest.mark.parametrize("task, words", [
    ({"contact_on": 40.0, "force": 10.0}, ("task.contact_on", "task.force")),                 # above the limit too
    ({"contact_on": 0.4, "contact_off": 0.5}, ("task.contact_off", "task.contact_on")),
    ({"force": 30.0, "force_steps": [1.0, 5.0]}, ("task.force_steps", "5 N", "task.force_limit")),  # a step down
    ({"force_steps": [1.0, 15.0, 1.0, 20.0]}, ("task.force_steps", "same time")),
    ({"force_steps": [1.0, 0.4]}, ("task.force_steps", "contact_off")),
    ({"radius": 0.8, "period": 1.0}, ("task.radius", "m/s")),                             # a 5 m/s circle
    ({"peak_ratio": 3.0}, ("task.peak_ratio", "task.force_limit")),                      # plan trips the limit
])
def test_task_values_inconsistent_with_each_other_refused(ros, task, words):
    ctx, _, _ = ros
    with pytest.raises(ModelError) as ei:
        ControllerNode("qv_task_bad", context=ctx, parameter_overrides=to_parameters(task_params(**task)), **CTX_ARGS)
    assert all(w in str(ei.value) for w in words), str(ei.value)


def test_task_good_values_next_to_the_bad_ones_accepted(ros):
    """The boundary values the refusals sit next to are accepted: a step down just inside the limit (30 -> 10.5
    N with a limit of 3×), the largest approach speed, a 0.5 m/s circle, contact_on just below the force."""
    ctx, _, _ = ros
    node = ControllerNode("qv_task_ok", context=ctx, parameter_overrides=to_parameters(task_params(
        force=30.0, force_steps=[1.0, 10.5], approach_speed=0.25, radius=0.05, period=2 * math.pi * 0.05 / 0.5,
        contact_on=29.0, release_at=5.0)), **CTX_ARGS)
    try:
        cfg = node.task_layer.task.cfg
        assert cfg.force_steps == [(1.0, 10.5)] and cfg.approach_speed == 0.25 and cfg.release_at == 5.0
    finally:
        node.destroy_node()


def test_task_config_in_the_library_refuses_the_same_values():
    """ContactTaskConfig (the library, used by the demos) refuses what the node refuses, with the same names."""
    ok = ContactTaskConfig(surface_height=0.2, force=10.0, force_limit=3.0)
    assert ok.force == 10.0
    for kw, word in (({"approach_speed": 1e300}, "approach_speed"), ({"release_at": math.nan}, "release_at"),
                     ({"surface_height": math.inf}, "surface_height"), ({"retract": 10.0}, "retract"),
                     ({"contact_on": 12.0}, "contact_on"),
                     ({"force": 30.0, "force_limit": 3.0, "force_steps": [(1.0, 5.0)]}, "force_steps"),
                     ({"waypoints": [(0.0, 0.0)] * 1001, "trace": "waypoints"}, "waypoints")):
        with pytest.raises(ModelError, match=word):
            ContactTaskConfig(**kw)


# ------------------------------------------------------------------ node parameters
def test_node_values_refused_at_start_and_on_change(ros):
    """wrench_sign 0 or NaN (would turn off contact detection and the force limit), a watchdog period longer
    than its timeout (no watchdog) or beyond 10 s, unbounded plant and observer periods, a MuJoCo scene with a
    1e9 s timestep or an infinite table height: refused naming the parameter; at run time, lowering
    watchdog_timeout below watchdog_period is refused and changes nothing."""
    ctx, _, _ = ros
    for name, value in (("wrench_sign", 0.0), ("wrench_sign", math.nan), ("wrench_sign", 2.0),
                        ("watchdog_period", 100.0), ("watchdog_period", 0.5), ("sync_tolerance", 1e9),
                        ("stamp_future_tolerance", 1e9), ("velocity_observer_hz", 1e9)):
        with pytest.raises(ModelError, match=name):
            ControllerNode("qv_node_bad", context=ctx, parameter_overrides=arm_params(**{name: value}), **CTX_ARGS)
    model = Parameter("model_config", value=str(MODEL))
    for name, value in (("wrench_sign", 0.0), ("markers_period", 1e9), ("decimation", -1), ("load_budget", 5.0)):
        with pytest.raises(ModelError, match=name):
            DynamicsNode("qv_dyn_bad", context=ctx, parameter_overrides=[model, Parameter(name, value=value)])
    from qv_dynamics.ros.sim_node import SimNode

    for name, value in (("dt", 1e9), ("clock_period", 1e9), ("real_time_factor", 1e9), ("max_steps_per_tick", 10**9),
                        ("mass_scale", 1e9)):
        with pytest.raises(ModelError, match=name):
            SimNode("qv_sim_bad", context=ctx, parameter_overrides=[model, Parameter("joints", value=[
                "joint1", "joint2", "joint3"]), Parameter(name, value=value)])
    from qv_dynamics.ros.mujoco_node import MujocoNode

    mj = load_params_file(ROOT / "config" / "demo_mujoco.yaml")["qv_mujoco"]
    for name, value in (("scene.timestep", 1e9), ("scene.table_height", math.inf), ("scene.friction", math.nan)):
        with pytest.raises(ModelError, match=name):
            MujocoNode("qv_mj_bad", context=ctx, parameter_overrides=to_parameters(dict(mj, **{name: value})),
                       **CTX_ARGS)
    node = ControllerNode("qv_node_ok", context=ctx, parameter_overrides=arm_params(
        wrench_sign=-1.0, watchdog_period=0.05, watchdog_timeout=0.1), **CTX_ARGS)
    try:
        assert node.wrenches.sign == -1.0
        res = node.set_parameters([Parameter("watchdog_timeout", value=0.02)])[0]
        assert not res.successful and "watchdog_period" in res.reason, res.reason
        assert node.watchdog_timeout == 0.1
        assert node.set_parameters([Parameter("watchdog_timeout", value=0.05)])[0].successful
        assert node.watchdog_timeout == 0.05
    finally:
        node.destroy_node()


# ------------------------------------------------------------------ legged plans
def _step(foot: str, t0: float, **kw) -> dict:
    return dict(foot=foot, t_unload=t0, t_lift=t0 + 0.4, t_touch=t0 + 0.9, t_loaded=t0 + 1.3, **kw)


FEET = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]


@pytest.mark.parametrize("spec, words", [
    ({"kind": "step", "steps": [_step("LF_FOOT", 1.0, step=[math.nan, 0.0, 0.0])]}, ("step",)),
    ({"kind": "step", "steps": [_step("LF_FOOT", 1.0, height=math.nan)]}, ("height",)),
    ({"kind": "step", "steps": [_step("LF_FOOT", 1.0, shift=[0.0, math.inf, 0.0])]}, ("shift",)),
    ({"kind": "step", "steps": [_step("LF_FOOT", 1.0), _step("RF_FOOT", 1.2)]}, ("two feet",)),
    ({"kind": "step", "steps": [_step("LF_FOOT", 1.0), _step("LF_FOOT", 2.0)]}, ("same foot",)),
    ({"kind": "step", "steps": [_step("LF_FOOT", math.nan)]}, ("t_unload",)),
    ({"kind": "sway", "amplitude": [0.0, math.nan, 0, 0, 0, 0], "frequency": [0.5] * 6}, ("amplitude",)),
    ({"kind": "sway", "amplitude": [0.01] * 6, "frequency": [math.inf] * 6}, ("frequency",)),
    ({"kind": "sway", "amplitude": [0.01] * 6, "frequency": [0.5] * 6, "ramp": math.nan}, ("ramp",)),
    ({"kind": "sway", "amplitude": [0.01] * 6, "frequency": [0.5] * 6, "phase": 1.0}, ("phase",)),
])
def test_legged_plans_refused_before_they_start(spec, words):
    """NaN or infinite step and sway values, two feet swinging at once and a foot's overlapping steps: refused
    (ModelError naming the value) when the plan is built; the same plans made valid are accepted."""
    with pytest.raises(ModelError) as ei:
        plan_from_spec(FEET, spec)
    assert all(w in str(ei.value) for w in words), str(ei.value)
    good = plan_from_spec(FEET, {"kind": "step", "steps": [_step("LF_FOOT", 1.0), _step("RF_FOOT", 2.3),
                                                             _step("LF_FOOT", 3.6)]})
    assert [s.foot for s in good.steps] == ["LF_FOOT", "RF_FOOT", "LF_FOOT"]
    assert good.phase("LF_FOOT", 1.5)[0] == "swing" and good.phase("RF_FOOT", 1.5) == ("stance", 1.0)


def test_legged_node_refuses_a_plan_with_two_swinging_feet(ros):
    """The legged controller with the shipped ANYmal config starts; with law_params.plan swinging two feet at
    once it is refused with the reason (a process would exit 2 with that line)."""
    from qv_control.ros.legged_controller_node import LeggedControllerNode

    ctx, _, _ = ros
    base = load_params_file(ROOT / "config" / "anymal.yaml")["qv_legged_controller"]
    node = LeggedControllerNode("qv_legged_ok", context=ctx, parameter_overrides=to_parameters(base), **CTX_ARGS)
    node.destroy_node()
    bad = yaml.safe_dump({"kind": "step", "steps": [_step("LF_FOOT", 1.0), _step("RH_FOOT", 1.5)]})
    with pytest.raises(ModelError, match="two feet"):
        LeggedControllerNode("qv_legged_bad", context=ctx, parameter_overrides=to_parameters(
            dict(base, **{"law_params.plan": bad})), **CTX_ARGS)
    with pytest.raises(QVError):
        FootStep("LF_FOOT", 1.0, 0.9, 1.5, 1.7)  # times out of order (as before)
    assert GaitPlan(FEET).phase("LF_FOOT", 0.0) == ("stance", 1.0)


# ------------------------------------------------------------------ YAML bounds
BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9 if p else ['1'] * 9)}]\n"
               for p, c in zip(["", "a", "b", "c", "d", "e"], "abcdef")) + "g: [" + ", ".join(["*f"] * 9) + "]\n"


def test_yaml_loader_bounds_aliases_lists_depth_and_duplicates():
    """Nested aliases (9^7 values once expanded) refused in milliseconds; a list longer than MAX_LIST, nesting
    deeper than 64, a key twice, a second document: refused with the line; a few aliases are fine."""
    t0 = time.monotonic()
    with pytest.raises(ModelError, match="aliases are expanded"):
        load_yaml(text=BOMB, what="bomb")
    assert time.monotonic() - t0 < 5.0  # (milliseconds measured; the bound only guards against expansion)
    cases = (("a: [" + ", ".join(["0.5"] * (MAX_LIST + 1)) + "]\n", "a list of"), ("[" * 70 + "]" * 70, "deeper"),
             ("a: 1\nb: 2\na: 3\n", "key 'a' appears twice"), ("a: 1\n---\nb: 1\n", "single document"),
             ("a:\n\tb: 1\n", "tab in the indentation"))
    for text, words in cases:
        with pytest.raises(ModelError, match=words):
            load_yaml(text=text, what="case")
    assert load_yaml(text="a: &x {b: [1, 2]}\nc: *x\n") == {"a": {"b": [1, 2]}, "c": {"b": [1, 2]}}
    assert load_yaml(text="a: [" + ", ".join(["0.5"] * MAX_LIST) + "]\n")["a"][-1] == 0.5


# ------------------------------------------------------------------ parameters files, as processes
def test_bad_parameters_files_refused_in_one_line(tmp_path):
    """Each bad parameters file: exit code 2 and one line naming the file and the fault, before rcl reads it
    (rcl answers most of them with a 25-line RCLError traceback). 2.5 million waypoints are refused by the
    size bound at once (rcl and the node took more than 120 s); a list just over MAX_LIST by the list bound."""
    good = yaml.safe_load(ARM.read_text())
    good["qv_controller"]["ros__parameters"]["model_config"] = str(MODEL)
    files = {
        "missing": (tmp_path / "missing.yaml", None, ("missing.yaml", "No such file")),
        "list": (tmp_path / "list.yaml", "- a\n- b\n", ("mapping of node names", "list")),
        "tabs": (tmp_path / "tabs.yaml", "qv_controller:\n\tros__parameters:\n\t\tlaw: x\n", ("tab",)),
        "binary": (tmp_path / "binary.bin", b"\x7fELF\x00\x01\x02", ("binary",)),
        "latin1": (tmp_path / "latin1.yaml", "qv_controller:\n  ros__parameters:\n    law: caf\xe9\n".encode("latin-1"),
                   ("not UTF-8",)),
        "anchors": (tmp_path / "anchors.yaml", "qv_controller:\n  ros__parameters:\n    a: &x 1.0\n    b: *x\n",
                    ("anchors",)),
        "mixed": (tmp_path / "mixed.yaml", "qv_controller:\n  ros__parameters:\n    q0: [1, 2.5]\n", ("q0", "mixes")),
        "no_section": (tmp_path / "nosec.yaml", "qv_controller:\n  law: x\n", ("ros__parameters",)),
        "long": (tmp_path / "long.yaml", "qv_controller:\n  ros__parameters:\n    task:\n      waypoints: ["
                 + ", ".join(["0.5"] * (MAX_LIST + 2)) + "]\n", ("a list of",)),
        "huge": (tmp_path / "huge.yaml", None, ("bytes",)),
        "bad_value": (tmp_path / "sign.yaml", yaml.safe_dump({"qv_controller": {"ros__parameters": dict(
            good["qv_controller"]["ros__parameters"], wrench_sign=0.0)}}), ("wrench_sign", "1 or -1")),
    }
    for key, (path, text, _) in files.items():
        if isinstance(text, bytes):
            path.write_bytes(text)
        elif text is not None:
            path.write_text(text)
    with open(files["huge"][0], "w") as f:  # 2.5 million waypoints (~13 MB)
        f.write("qv_controller:\n  ros__parameters:\n    task:\n      waypoints: [")
        f.write(", ".join(["0.25"] * 2_500_000))
        f.write("]\n")
    procs = {k: _start("qv_control.ros.controller_node", "--params-file", str(p)) for k, (p, _, _) in files.items()}
    t0 = time.monotonic()
    try:
        for key, proc in procs.items():
            line = _refused(proc, *files[key][2])
            assert str(files[key][0]) in line or key == "bad_value", line
    finally:
        stop_processes([p for p in procs.values() if p.poll() is None])
    assert time.monotonic() - t0 < 120.0  # all eleven side by side, each a start-up and one check


# ------------------------------------------------------------------ relative paths: next to the naming file
def _user_files(tmp_path: Path) -> tuple[Path, Path]:
    """A user's folder holding a parameters file, its model config (relative) and the model's URDF (relative),
    and another working folder; the model config's name is unknown to the package."""
    user = tmp_path / "user"
    user.mkdir()
    shutil.copy(ROOT / "urdf" / "planar_3link.urdf", user / "my_arm.urdf")
    model = yaml.safe_load(MODEL.read_text())
    model["robot"]["urdf"] = "my_arm.urdf"
    (user / "my_arm_model.yaml").write_text(yaml.safe_dump(model))
    doc = yaml.safe_load(ARM.read_text())
    for sec in doc.values():
        sec["ros__parameters"]["model_config"] = "my_arm_model.yaml"
    doc["qv_sim"]["ros__parameters"]["controller_name"] = "rel_ctrl"
    doc["qv_controller"]["ros__parameters"]["controller_name"] = "rel_ctrl"
    (user / "my_arm.yaml").write_text(yaml.safe_dump(doc))
    other = tmp_path / "elsewhere"
    other.mkdir()
    return user / "my_arm.yaml", other


def test_nodes_find_relative_paths_next_to_the_parameters_file_from_another_folder(ros, tmp_path):
    """Three nodes started as ``ros2 launch`` starts them (a node name remap, the user's parameters file by a
    relative path, then launch's own generated file of overrides) from another working folder: each finds
    ``my_arm_model.yaml`` next to the parameters file and the model finds its URDF next to itself; they start
    and answer the parameter service (the handshake), then stop with code 0 on SIGINT. The same file read
    in-process (qv bringup) and by the launch files' helpers resolves the same way. A model config that exists
    only in the working folder is not taken for one named in the file (refused, naming the file's folder)."""
    _, ex, probe = ros
    params, other = _user_files(tmp_path)
    rel = os.path.relpath(params, other)
    launch_overrides = tmp_path / "launch_params_x.yaml"  # what launch_ros writes for `parameters=[file, {..}]`
    launch_overrides.write_text("/**:\n  ros__parameters:\n    use_sim_time: false\n")
    procs = [_start(f"qv_{mod}", "-r", f"__node:={name}", "--params-file", rel, "--params-file", str(launch_overrides),
                    cwd=other)
             for mod, name in (("dynamics.ros.sim_node", "qv_sim"), ("dynamics.ros.dynamics_node", "qv_dynamics"),
                               ("control.ros.controller_node", "qv_controller"))]
    try:
        for name in ("qv_sim", "qv_dynamics", "qv_controller"):
            client = probe.create_client(GetParameters, f"/{name}/get_parameters")
            answer = call(ex, client, GetParameters.Request(names=["model_config"]),
                          alive=lambda: all(p.poll() is None for p in procs))
            assert answer is not None, (name, [p.poll() for p in procs])
            assert answer.values[0].string_value == "my_arm_model.yaml"
            probe.destroy_client(client)
    finally:
        results = stop_processes(procs)
    assert [r[0] for r in results] == [0, 0, 0], "\n".join(f"exit {r[0]}:\n{r[1][-4000:]}" for r in results
                                                            if r[0] != 0)

    from qv_control.ros.launch_actions import model_of_params, model_urdf

    cwd = os.getcwd()
    os.chdir(other)
    try:
        flat = load_params_file(rel)
        assert flat["qv_controller"]["model_config"] == str(params.parent / "my_arm_model.yaml")
        assert model_of_params(rel) == str(params.parent / "my_arm_model.yaml")
        assert model_urdf(model_of_params(rel)) == str(params.parent / "my_arm.urdf")
    finally:
        os.chdir(cwd)
    # the rule is the file's folder, not the working folder: a model only in the working folder is refused
    (params.parent / "my_arm_model.yaml").rename(other / "my_arm_model.yaml")
    line = _refused(_start("qv_control.ros.controller_node", "--params-file", rel, cwd=other), "my_arm_model.yaml",
                    str(params.parent))
    assert "next to the parameters file" in line
    np.testing.assert_equal(os.path.isfile(other / "my_arm_model.yaml"), True)


# ------------------------------------------------------------------ the qv command on bad files
def test_qv_commands_refuse_non_utf8_and_alias_bombs_in_one_line(tmp_path, capfd):
    """A Latin-1 model config, demo config or parameters file (UnicodeDecodeError before) and nested aliases
    (``qv bringup`` ran for minutes): one line naming the file, exit code 2, at once; the same commands on
    the shipped files are accepted (inspect prints the model)."""
    from qv_control.cli import main

    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("robot:\n  urdf: panda\n# café\n".encode("latin-1"))
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    cases = [(["inspect", str(latin1)], "not UTF-8"),
             (["bringup", str(latin1), "--domain-id", str(DOMAIN)], "not UTF-8"),
             (["demo", "--config", str(latin1), "--out", str(tmp_path / "d")], "not UTF-8"),
             (["export-mjcf", str(latin1), str(tmp_path / "x.xml")], "not UTF-8"),
             (["bringup", str(bomb), "--domain-id", str(DOMAIN)], "anchors and aliases"),
             (["inspect", str(bomb)], "aliases are expanded")]
    for args, words in cases:
        t0 = time.monotonic()
        try:
            code = main(args)
        except SystemExit as exc:
            code = exc.code
        err = capfd.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and words in lines[0] and "Traceback" not in err, (args, code, err)
        assert str(tmp_path) in lines[0], lines[0]
        assert time.monotonic() - t0 < 60.0, args  # (at once: the bound only catches a run of minutes)
    assert main(["inspect", str(MODEL)]) == 0 and "robot 'planar_3link'" in capfd.readouterr().out
