"""The deployment paths' files: URDFs rewritten for ros2_control mock, Gazebo and MuJoCo, and
the MJCF export, for the two demo robots and the Panda.

References: sdformat's own URDF->SDF converter (``ign sdf -p`` / ``gz sdf -p``, skipped where not
installed), MuJoCo's compiler, mass matrix (mj_fullM), bias forces and F/T sensor against Pinocchio's
CRBA, RNEA and the static balance τ − g = Aᵀλ, and the built-in simulator's start state.
"""
from __future__ import annotations

import math
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import mujoco
import numpy as np
import pytest

from qv_dynamics.plants.export import export_mjcf_text, load_config, main_mjcf, main_urdf, target_urdf
from qv_dynamics.plants.mjcf_export import MJCF_INITIAL_KEY

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "config"
# model config, controllers file, F/T sensor name
ROBOTS = {
    "planar_3link": ("planar_3link_model.yaml", "controllers.yaml", "tip_ft"),
    "slider_crank": ("slider_crank_model.yaml", "controllers_slider_crank.yaml", "slider_ft"),
    "panda": ("demo_model.yaml", "controllers_panda.yaml", "tool_ft"),
}


def _urdf(robot: str, target: str, **kw) -> ET.Element:
    model, controllers, _ = ROBOTS[robot]
    return ET.fromstring(target_urdf(str(CONFIG / model), target, str(CONFIG / controllers), **kw))


@pytest.fixture(scope="module")
def mjcf(tmp_path_factory):
    """robot -> (path of the exported MJCF, compiled MjModel)."""
    out = {}
    for robot, (model, _, _) in ROBOTS.items():
        path = tmp_path_factory.mktemp(robot) / f"{robot}.xml"
        path.write_text(export_mjcf_text(str(CONFIG / model)))
        out[robot] = (path, mujoco.MjModel.from_xml_path(str(path)))
    return out


# ----------------------------------------------------------------------------------------------- mock


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_mock_urdf_has_finite_initial_values(robot):
    """mock_components/GenericSystem, every state interface with a finite initial_value: positions =
    the projected initial.q, F/T sensor 0 (mock_components would otherwise report NaN)."""
    _, _, sensor = ROBOTS[robot]
    _, _, names, q0, _ = load_config(str(CONFIG / ROBOTS[robot][0]))
    block = _urdf(robot, "mock").find("ros2_control")
    assert block.find("hardware/plugin").text == "mock_components/GenericSystem"
    joints = block.findall("joint")
    assert [j.get("name") for j in joints] == names
    for j, q in zip(joints, q0):
        values = {s.get("name"): float(s.find("param[@name='initial_value']").text)
                  for s in j.findall("state_interface")}
        assert set(values) == {"position", "velocity", "effort"}
        assert all(math.isfinite(v) for v in values.values())
        assert values["position"] == q and values["velocity"] == 0.0
    ft = block.find(f"sensor[@name='{sensor}']")
    assert [s.get("name") for s in ft.findall("state_interface")] == \
        ["force.x", "force.y", "force.z", "torque.x", "torque.y", "torque.z"]
    assert {float(s.find("param[@name='initial_value']").text) for s in ft.findall("state_interface")} == {0.0}
    assert ft.find("param[@name='frame_id']").text


def test_rewrite_refuses_unknown_joints_and_adds_missing_command_interfaces():
    """An effort-controller joint the model lacks is refused by name; one the URDF's block lists without
    an effort command interface gets one (the controller would fail to claim it)."""
    from qv_dynamics.errors import ModelError
    from qv_dynamics.plants.urdf_targets import TargetSpec, rewrite_urdf

    xml = (ROOT / "urdf" / "slider_crank.urdf").read_text()
    spec = dict(joints=["crank_joint", "rod_joint"], q0={"crank_joint": 0.5, "rod_joint": -1.0})
    out = ET.fromstring(rewrite_urdf(xml, "mock", TargetSpec(**spec, actuated=["crank_joint", "rod_joint"])))
    assert len(out.findall("ros2_control/joint/command_interface[@name='effort']")) == 2
    with pytest.raises(ModelError, match="slider_joint"):
        rewrite_urdf(xml, "mock", TargetSpec(**spec, actuated=["slider_joint"]))
    with pytest.raises(ModelError, match="webots"):
        rewrite_urdf(xml, "webots", TargetSpec(**spec))
    with pytest.raises(ModelError, match="not valid XML"):
        rewrite_urdf(xml[:-20], "mock", TargetSpec(**spec))


def test_mock_urdf_actuation_and_locked_joints():
    """The slider-crank's rod stays passive (no command interface, as effort_controller lists only the
    crank); the Panda's block is created from the model: 7 effort joints, the locked fingers fixed."""
    sc = _urdf("slider_crank", "mock").find("ros2_control")
    assert [j.get("name") for j in sc.findall("joint[command_interface]")] == ["crank_joint"]
    panda = _urdf("panda", "mock")
    block = panda.find("ros2_control")
    assert [j.get("name") for j in block.findall("joint[command_interface]")] == \
        [f"panda_joint{i}" for i in range(1, 8)]
    for finger in ("panda_finger_joint1", "panda_finger_joint2"):
        assert panda.find(f"joint[@name='{finger}']").get("type") == "fixed"


# ----------------------------------------------------------------------------------------------- gazebo


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_gazebo_urdf_structure(robot):
    """world link + fixed joint to the root, massive root, a collision on every link with a visual and
    at each constraint frame, gz_ros2_control hardware and system plugin with the controllers file."""
    root = _urdf(robot, "gazebo")
    wj = root.find("joint[@name='world_joint']")
    assert wj.get("type") == "fixed" and wj.find("parent").get("link") == "world"
    base = root.find(f"link[@name='{wj.find('child').get('link')}']")
    assert float(base.find("inertial/mass").get("value")) > 0
    for link in root.findall("link"):
        if link.find("visual") is not None:
            assert link.find("collision") is not None, link.get("name")
    system, *_ = load_config(str(CONFIG / ROBOTS[robot][0]))
    for c in system.constraints:
        assert root.find(f"link[@name='{c.frame}']/collision") is not None, c.frame
    assert root.find("ros2_control/hardware/plugin").text == "gz_ros2_control/GazeboSimSystem"
    plugin = root.find("gazebo/plugin")
    assert plugin.get("name") == "gz_ros2_control::GazeboSimROS2ControlPlugin"
    assert plugin.find("parameters").text == str(CONFIG / ROBOTS[robot][1])


def _sdf_tool() -> list[str] | None:
    for exe in ("gz", "ign"):
        if shutil.which(exe):
            probe = subprocess.run([exe, "sdf", "--help"], capture_output=True, text=True, timeout=60)
            if probe.returncode == 0:
                return [exe, "sdf", "-p"]
    return None


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_gazebo_urdf_converts_to_sdf_with_every_link(robot, tmp_path):
    """sdformat's own converter: every URDF link is an SDF link or lumped into its parent through a fixed
    joint (its geometry as sdformat's ``<parent>_fixed_joint_lump__<link>`` elements, its mass in the
    parent's: the total mass is conserved), and the model is fixed to the world.
    The demo URDFs as they are convert to an empty model (massless root): checked as the counter-case."""
    tool = _sdf_tool()
    if tool is None:
        pytest.skip("sdformat's converter (ign/gz sdf, Debian: ignition-tools + libsdformat-dev) not installed")
    urdf = _urdf(robot, "gazebo")
    path = tmp_path / f"{robot}.urdf"
    path.write_text(ET.tostring(urdf, encoding="unicode"))
    proc = subprocess.run([*tool, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sdf = ET.fromstring(proc.stdout)
    model = sdf.find("model")
    sdf_links = {lk.get("name") for lk in model.findall("link")}
    lumped = " ".join(e.get("name", "") for e in model.iter() if "fixed_joint_lump__" in e.get("name", ""))
    fixed_children = {j.find("child").get("link") for j in urdf.findall("joint") if j.get("type") == "fixed"}
    for link in urdf.findall("link"):
        name = link.get("name")
        if name == "world" or name in sdf_links:
            continue
        assert name in fixed_children, (robot, name, "dropped although it is not welded to its parent")
        if link.find("collision") is not None or link.find("visual") is not None:
            assert f"fixed_joint_lump__{name}_" in lumped, (robot, name, sorted(sdf_links))
    # lumped links keep their mass: the SDF's total mass is the URDF's
    mass_urdf = sum(float(e.get("value")) for e in urdf.findall("link/inertial/mass"))
    mass_sdf = sum(float(e.text) for e in model.findall("link/inertial/mass"))
    assert abs(mass_sdf - mass_urdf) < 1e-9 * mass_urdf
    wj = model.find("joint[@name='world_joint']")
    assert wj is not None and wj.get("type") == "fixed" and wj.find("parent").text == "world"
    assert wj.find("child").text in sdf_links
    if robot != "panda":  # the URDF as shipped loses every link in sdformat
        raw = subprocess.run([*tool, str(ROOT / "urdf" / f"{robot}.urdf")], capture_output=True, text=True,
                             timeout=120)
        assert ET.fromstring(raw.stdout).find("model/link") is None


# ----------------------------------------------------------------------------------------------- mujoco


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_mujoco_urdf_names_plugin_mjcf_actuators_and_sensor(robot, mjcf):
    """MujocoSystemInterface with the exported MJCF; every ros2_control joint is a MuJoCo joint driven by
    a motor (mujoco_ros2_control maps joints to actuators by joint name); the fts sensor names the MJCF
    force/torque pair <mujoco_sensor_name>_force/_torque."""
    path, m = mjcf[robot]
    _, _, sensor = ROBOTS[robot]
    block = _urdf(robot, "mujoco", mjcf_file=str(path), headless=True).find("ros2_control")
    hw = block.find("hardware")
    assert hw.find("plugin").text == "mujoco_ros2_control/MujocoSystemInterface"
    params = {p.get("name"): p.text for p in hw.findall("param")}
    assert params["mujoco_model"] == str(path) and params["headless"] == "true"
    assert mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, params["initial_keyframe"]) >= 0
    for j in block.findall("joint"):
        jid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_JOINT, j.get("name"))
        assert jid >= 0
        motors = [a for a in range(m.nu) if m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                  and m.actuator_trnid[a, 0] == jid and m.actuator_biastype[a] == 0]
        assert len(motors) == 1, j.get("name")
    ft = block.find(f"sensor[@name='{sensor}']")
    fp = {p.get("name"): p.text for p in ft.findall("param")}
    assert fp["mujoco_type"] == "fts"
    for suffix, kind in (("_force", mujoco.mjtSensor.mjSENS_FORCE), ("_torque", mujoco.mjtSensor.mjSENS_TORQUE)):
        sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, fp["mujoco_sensor_name"] + suffix)
        assert sid >= 0 and m.sensor_type[sid] == kind


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_mjcf_export_mass_matrix_and_gravity_equal_pinocchio(robot, mjcf):
    """M(q) and g(q) of the compiled export equal Pinocchio's CRBA/RNEA to 1e-9 (relative) at random q
    (measured ≤ 6e-11 for the slider-crank, whose point masses get POINT_MASS_INERTIA = 1e-12 kg m²)."""
    system, *_ = load_config(str(CONFIG / ROBOTS[robot][0]))
    _, m = mjcf[robot]
    d = mujoco.MjData(m)
    n = system.nv
    rng = np.random.default_rng(15)
    lo, hi = np.maximum(system.model.lowerPositionLimit, -3), np.minimum(system.model.upperPositionLimit, 3)
    for _ in range(5):
        q = lo + (hi - lo) * rng.uniform(0.1, 0.9, n)
        d.qpos[:n] = q
        d.qvel[:] = 0.0
        mujoco.mj_forward(m, d)
        M = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, M, d.qM) if hasattr(d, "qM") else mujoco.mj_fullM(m, d, M)
        t = system.evaluate(q, np.zeros(n))
        assert np.abs(M[:n, :n] - t.M).max() <= 1e-9 * np.abs(t.M).max()
        assert np.abs(d.qfrc_bias[:n] - t.g).max() <= 1e-9 * max(np.abs(t.g).max(), 1.0)


@pytest.mark.parametrize("robot, lam_d", [("planar_3link", 5.0), ("planar_3link", -5.0), ("slider_crank", 5.0),
                                          ("slider_crank", -5.0), ("panda", -10.0)])
def test_mjcf_export_ft_sensor_reads_lambda_in_static_press(robot, lam_d, mjcf):
    """Static press through the exported constraint (the Panda: on the table, raised to touch the tool
    sphere; a contact only pushes, λ_z < 0): τ = g(q) + A(q)ᵀλ_d + a null-space PD holding the pose. At
    rest MuJoCo's force sensor, rotated to world axes, equals λ_d and Pinocchio's static balance
    λ = (Aᵀ)⁺(τ − g) (measured ≤ 6e-10 N through the equality constraints, 1.0e-7 N of 10 N through the
    Panda's soft table contact); what mujoco_ros2_control publishes (the sensor negated) is −λ: the
    environment's reaction, hence wrench_sign −1 in mujoco_ros2_control.launch.py."""
    system, doc, _, q0, _ = load_config(str(CONFIG / ROBOTS[robot][0]))
    _, m = mjcf[robot]
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, MJCF_INITIAL_KEY))
    site = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SITE, "tool_site")
    tol = 3e-9
    if robot == "panda":  # table top moved up to the bottom of the tool sphere; the contact row z
        mujoco.mj_forward(m, d)
        top = m.geom_size[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "table_top"), 2]
        d.mocap_pos[0, 2] = d.site_xpos[site, 2] - doc["scene"]["tip_radius"] - top
        system.set_active(system.constraints[0].name, True)
        tol = 3e-7
    n = system.nv
    for _ in range(6000):  # 3 s at the 0.5 ms physics step
        q, v = d.qpos[:n].copy(), d.qvel[:n].copy()
        t = system.evaluate(q, np.zeros(n))
        N = np.eye(n) - np.linalg.pinv(t.A) @ t.A
        d.ctrl[:] = t.g + t.A.T @ [lam_d] + N @ (50.0 * (q0 - q) - 10.0 * v)
        mujoco.mj_step(m, d)
    mujoco.mj_forward(m, d)
    assert np.abs(d.qvel).max() < 1e-8  # at rest (measured ≤ 7e-10)
    t = system.evaluate(d.qpos[:n], np.zeros(n))
    lam_static = np.linalg.lstsq(t.A.T, d.ctrl - t.g, rcond=None)[0]
    sid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "tool_force")
    sensor = d.sensordata[m.sensor_adr[sid]:m.sensor_adr[sid] + 3]
    R = d.site_xmat[site].reshape(3, 3)
    c = system.constraints[0]
    lam_sensor = (R @ sensor)[c.axis_idx]
    assert abs(lam_sensor[0] - lam_d) < tol and abs(lam_sensor[0] - lam_static[0]) < tol
    published = -sensor  # mujoco_ros2_control: data.force = -sensordata
    assert abs((R @ published)[c.axis_idx][0] + lam_d) < tol
    free = [i for i in range(3) if i not in c.axis_idx]
    assert np.abs((R @ sensor)[free]).max() < 2e-8  # measured ≤ 4.3e-9


# ----------------------------------------------------------------------------------------------- start state


@pytest.mark.parametrize("params", ["planar_3link.yaml", "slider_crank.yaml"])
def test_bringup_and_launch_files_start_from_the_same_state(params, mjcf):
    """The one-process bringup's simulator start (initial.q projected onto the constraints) equals the
    initial_value of the exported URDFs (mock, Gazebo, MuJoCo) and the MJCF keyframe, to 1e-12."""
    import os

    from qv_control.ros.bringup import Bringup

    robot = params.split(".")[0]
    domain = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 15) % 200
    with Bringup(str(CONFIG / params), domain_id=domain, dynamics=False, record=False) as b:
        q_sim = b.sim.layout.from_q(b.sim.stepper.q)
    path, m = mjcf[robot]
    key = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, MJCF_INITIAL_KEY)
    np.testing.assert_allclose(m.key_qpos[key, :len(q_sim)], q_sim, rtol=0, atol=1e-12)
    for target, kw in (("mock", {}), ("gazebo", {}), ("mujoco", {"mjcf_file": str(path)})):
        block = _urdf(robot, target, **kw).find("ros2_control")
        q_urdf = [float(j.find("state_interface[@name='position']/param").text) for j in block.findall("joint")]
        np.testing.assert_allclose(q_urdf, q_sim, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------------------------- CLI


def test_cli_export_commands(tmp_path, capsys):
    """``qv export-urdf`` (target mujoco writes the MJCF next to the URDF) and ``qv export-mjcf``; a bad
    model config or target is a one-line error with exit code 2."""
    from qv_control.cli import main

    out = tmp_path / "p3.urdf"
    assert main(["export-urdf", "--target", "mujoco", str(CONFIG / "planar_3link_model.yaml"), str(out),
                 "--controllers", str(CONFIG / "controllers.yaml")]) == 0
    root = ET.fromstring(out.read_text())
    mj = root.find("ros2_control/hardware/param[@name='mujoco_model']").text
    assert Path(mj) == (tmp_path / "p3.xml").resolve()
    mujoco.MjModel.from_xml_path(mj)
    assert main_mjcf([str(CONFIG / "slider_crank_model.yaml"), str(tmp_path / "sc.xml")]) == 0
    assert mujoco.MjModel.from_xml_path(str(tmp_path / "sc.xml")).nu == 2
    assert main_urdf(["--target", "mock", str(tmp_path / "missing.yaml"), str(tmp_path / "x.urdf")]) == 2
    assert "cannot read model config" in capsys.readouterr().err
    assert not (tmp_path / "x.urdf").exists()
    with pytest.raises(SystemExit) as exc:
        main_urdf(["--target", "webots", str(CONFIG / "planar_3link_model.yaml"), str(tmp_path / "y.urdf")])
    assert exc.value.code == 2


def test_mjcf_export_closes_the_loop_with_the_launch_parameters():
    """planar_3link's controller (law, gains, reference and λ_d = 5 N of config/planar_3link.yaml) on the
    exported MJCF at 1 kHz, λ measured as mujoco_ros2_control publishes it (sensor negated, tool axes)
    and the launch file reads it (wrench_sign −1): the loop closes on MuJoCo's wall. From 1 s to 3 s:
    |θ − θ_d| ≤ 2.5e-6 and |λ − 5| ≤ 1.4e-4 N measured (exact model: the MJCF carries Pinocchio's
    inertias; the built-in simulator's plant is 10 % heavier, so its figures differ)."""
    import pinocchio as pin

    from qv_control.laws import make_law
    from qv_control.references import SplineReference
    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.ros.messages import sensor_wrench_rows
    from qv_dynamics.state import State

    system, _, _, _, _ = load_config(str(CONFIG / "planar_3link_model.yaml"))
    p = load_params_file(CONFIG / "planar_3link.yaml")["qv_controller"]
    law = make_law(p["law"], system, **{k[len("law_params."):]: v for k, v in p.items() if k.startswith("law_params.")})
    times = p["reference.times"]
    ref = SplineReference(times, np.reshape(p["reference.waypoints"], (len(times), -1)), kind=p["reference.kind"],
                          lambda_=p["lambda_desired"])
    m = mujoco.MjModel.from_xml_string(export_mjcf_text(str(CONFIG / "planar_3link_model.yaml")))
    d = mujoco.MjData(m)
    mujoco.mj_resetDataKeyframe(m, d, mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_KEY, MJCF_INITIAL_KEY))
    n, c, data = system.nv, system.constraints[0], system.model.createData()
    sid = m.sensor_adr[mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_SENSOR, "tool_force")]
    theta_err, lam_err = [], []
    for i in range(3000):
        t = i * 1e-3
        q, v = d.qpos[:n].copy(), d.qvel[:n].copy()
        published = -d.sensordata[sid:sid + 6]  # mujoco_ros2_control's F/T state interfaces
        pin.forwardKinematics(system.model, data, q)
        lam = sensor_wrench_rows(c, pin.updateFramePlacement(system.model, data, c.frame_id).rotation, -1.0 * published)
        r = ref(t)
        d.ctrl[:] = law.compute(State(t=t, q=q, qdot=v, lambda_meas=lam), r)
        for _ in range(round(1e-3 / m.opt.timestep)):
            mujoco.mj_step(m, d)
        if t >= 1.0:
            theta_err.append(np.abs(law.coords.evaluate(q, v).theta - r.theta).max())
            lam_err.append(abs(lam[0] - p["lambda_desired"][0]))
    assert max(theta_err) < 1e-5 and max(lam_err) < 5e-4, (max(theta_err), max(lam_err))
