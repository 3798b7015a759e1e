"""URDF rewriting per ros2_control target: ``mock``, ``gazebo``, ``mujoco``.

The qv nodes always load the *model* URDF (Pinocchio, untouched); what ros2_control, Gazebo or
mujoco_ros2_control load is this rewritten copy. Pure XML processing (ElementTree), no ROS imports.

What each target adds to the URDF:

* every target: a ``<ros2_control>`` block (created from the model's joints when the URDF has none:
  effort command + position/velocity/effort state; joints not in ``actuated`` get state interfaces
  only), ``initial_value`` on every state interface (position = the model config's ``initial.q``,
  velocity = ``initial.qdot``, effort = 0), a force/torque ``<sensor>`` (``force.x`` … ``torque.z``,
  every ``initial_value`` 0, ``frame_id``; not for Gazebo, which would need a gz ``force_torque``
  sensor), and the model's locked joints turned into ``fixed``
  joints (their Pinocchio value is the neutral one, 0) and dropped from ``<ros2_control>``;
* ``mock``: hardware ``mock_components/GenericSystem``. A wiring test only: mock_components does not
  integrate effort (position and velocity stay at their initial values) and nothing writes the
  sensor (it stays 0, where without ``initial_value`` it would be NaN and the qv nodes would drop it);
* ``gazebo``: hardware ``gz_ros2_control/GazeboSimSystem``; a ``world`` link with a fixed joint to
  the root (the robot is bolted down), an ``<inertial>`` on a massless root (sdformat's URDF parser
  drops a massless root and everything below it), a ``<collision>`` copied from the ``<visual>`` of
  every link that has none and a sphere at each constraint frame, and the
  ``gz_ros2_control::GazeboSimROS2ControlPlugin`` with the controllers file;
* ``mujoco``: hardware ``mujoco_ros2_control/MujocoSystemInterface`` with ``mujoco_model`` = the
  exported MJCF (:mod:`qv_dynamics.plants.mjcf_export`: a motor actuator per joint, named by joint,
  and the ``<force>``/``<torque>`` sensor pair ``tool_force``/``tool_torque`` at the tool site), the
  initial keyframe, and the F/T sensor's ``mujoco_type fts`` / ``mujoco_sensor_name tool`` parameters.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from ..errors import ModelError

TARGETS = ("mock", "gazebo", "mujoco")
HARDWARE = {"mock": "mock_components/GenericSystem",
            "gazebo": "gz_ros2_control/GazeboSimSystem",
            "mujoco": "mujoco_ros2_control/MujocoSystemInterface"}
GZ_SYSTEM_PLUGIN = ("gz_ros2_control-system", "gz_ros2_control::GazeboSimROS2ControlPlugin")
FT_INTERFACES = tuple(f"{k}.{a}" for k in ("force", "torque") for a in "xyz")
#: name of the MJCF force/torque sensor pair (``<name>_force``, ``<name>_torque``) at the tool site
MJCF_FT_SENSOR = "tool"
MJCF_INITIAL_KEY = "initial"
#: mass (kg) and principal inertia (kg m²) given to a massless root link for Gazebo; the root is welded
#: to the world, so these never enter the dynamics
ROOT_MASS, ROOT_INERTIA = 1.0, 1e-3
COLLISION_RADIUS = 0.01  # m, sphere at each constraint frame


@dataclass
class TargetSpec:
    """What the rewriting needs besides the URDF: joint names in model order with their initial
    position/velocity, the actuated subset, locked joints, constraint frames, F/T sensor, files."""

    joints: Sequence[str]
    q0: Mapping[str, float]
    qdot0: Mapping[str, float] = field(default_factory=dict)
    actuated: Sequence[str] | None = None          # None: every model joint
    locked: Sequence[str] = ()
    constraint_frames: Sequence[str] = ()
    ft_sensor: tuple[str, str] | None = None       # (ros2_control sensor name, frame_id)
    controllers_file: str = ""                     # gazebo: gz_ros2_control <parameters>
    mjcf_file: str = ""                            # mujoco: mujoco_model
    headless: bool = False                         # mujoco: no viewer window
    keep_hardware: bool = False                    # keep the URDF's own hardware plugin (real robot)


def rewrite_urdf(xml: str, target: str, spec: TargetSpec) -> str:
    """The URDF for ``target`` (see the module docstring); ModelError on a bad URDF or target."""
    if target not in TARGETS:
        raise ModelError(f"unknown target '{target}': one of {TARGETS}")
    try:
        robot = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ModelError(f"URDF is not valid XML: {exc}") from None
    if robot.tag != "robot":
        raise ModelError(f"URDF root element is <{robot.tag}>, expected <robot>")
    lock_joints(robot, spec.locked)
    block = ensure_ros2_control(robot, spec)
    params = {}
    if target == "mujoco":
        if not spec.mjcf_file:
            raise ModelError("target mujoco needs the exported MJCF file (qv export-mjcf)")
        params = {"mujoco_model": spec.mjcf_file, "initial_keyframe": MJCF_INITIAL_KEY,
                  "headless": str(spec.headless).lower()}
    if not spec.keep_hardware:
        set_hardware(block, HARDWARE[target], params)
    set_initial_values(block, spec.q0, spec.qdot0)
    if spec.ft_sensor and target != "gazebo":  # Gazebo would need a gz force_torque sensor: not modelled
        extra = {"mujoco_type": "fts", "mujoco_sensor_name": MJCF_FT_SENSOR} if target == "mujoco" else {}
        add_ft_sensor(block, spec.ft_sensor[0], spec.ft_sensor[1], extra)
    if target == "gazebo":
        fix_to_world(robot)
        ensure_root_inertial(robot)
        add_collisions(robot, spec.constraint_frames)
        if spec.controllers_file:
            add_gazebo_plugin(robot, spec.controllers_file)
    ET.indent(robot, "  ")
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"


# ----------------------------------------------------------------------------------------------- tree


def root_link(robot: ET.Element) -> str:
    """The link that is no joint's child (ModelError unless exactly one)."""
    children = {j.find("child").get("link") for j in robot.findall("joint") if j.find("child") is not None}
    roots = [lk.get("name") for lk in robot.findall("link") if lk.get("name") not in children]
    if len(roots) != 1:
        raise ModelError(f"URDF must have exactly one root link, found {roots}")
    return roots[0]


def lock_joints(robot: ET.Element, names: Sequence[str]) -> None:
    """Locked joints (Pinocchio's reduced model, at the neutral value 0) become ``fixed`` joints."""
    for name in names:
        j = robot.find(f"joint[@name='{name}']")
        if j is None:
            raise ModelError(f"locked joint '{name}' is not in the URDF")
        j.set("type", "fixed")
        for tag in ("axis", "limit", "dynamics", "mimic", "safety_controller", "calibration"):
            for e in j.findall(tag):
                j.remove(e)


def fix_to_world(robot: ET.Element) -> None:
    """A ``world`` link and a fixed joint ``world_joint`` to the root link (the robot is bolted down)."""
    if robot.find("link[@name='world']") is not None:
        return
    root = root_link(robot)
    robot.insert(0, ET.Element("link", name="world"))
    joint = ET.Element("joint", name="world_joint", type="fixed")
    ET.SubElement(joint, "parent", link="world")
    ET.SubElement(joint, "child", link=root)
    ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
    robot.insert(1, joint)


def ensure_root_inertial(robot: ET.Element) -> None:
    """Give a massless root (below ``world``) an inertial: sdformat drops a massless root link."""
    root = root_link(robot)
    if root == "world":
        root = robot.find("joint[@name='world_joint']/child").get("link")
    link = robot.find(f"link[@name='{root}']")
    if link.find("inertial") is None:
        inertial = ET.SubElement(link, "inertial")
        ET.SubElement(inertial, "mass", value=f"{ROOT_MASS:g}")
        ET.SubElement(inertial, "inertia", ixx=f"{ROOT_INERTIA:g}", iyy=f"{ROOT_INERTIA:g}",
                      izz=f"{ROOT_INERTIA:g}", ixy="0", ixz="0", iyz="0")


def add_collisions(robot: ET.Element, constraint_frames: Sequence[str]) -> None:
    """A ``<collision>`` per link: a copy of its first ``<visual>`` geometry when it has none, and a
    sphere at each constraint frame (so a wall or a loop added to the world can touch it)."""
    for link in robot.findall("link"):
        if link.find("collision") is not None:
            continue
        visual = link.find("visual")
        name = link.get("name")
        if visual is not None and visual.find("geometry") is not None:
            col = ET.SubElement(link, "collision", name=f"{name}_collision")
            for tag in ("origin", "geometry"):
                if visual.find(tag) is not None:
                    col.append(_copy(visual.find(tag)))
        elif name in constraint_frames:
            col = ET.SubElement(link, "collision", name=f"{name}_collision")
            ET.SubElement(ET.SubElement(col, "geometry"), "sphere", radius=f"{COLLISION_RADIUS:g}")


def add_gazebo_plugin(robot: ET.Element, controllers_file: str) -> None:
    gz = ET.SubElement(robot, "gazebo")
    plugin = ET.SubElement(gz, "plugin", filename=GZ_SYSTEM_PLUGIN[0], name=GZ_SYSTEM_PLUGIN[1])
    ET.SubElement(plugin, "parameters").text = controllers_file


def _copy(e: ET.Element) -> ET.Element:
    return ET.fromstring(ET.tostring(e))


# ----------------------------------------------------------------------------------------------- ros2_control


def ensure_ros2_control(robot: ET.Element, spec: TargetSpec) -> ET.Element:
    """The ``<ros2_control>`` block, created from ``spec.joints`` when there is none; locked joints
    removed from it; an effort command interface on every joint of ``spec.actuated`` (the effort
    controller's joints); ModelError for a joint the model or the block does not have."""
    blocks = robot.findall("ros2_control")
    if len(blocks) > 1:
        raise ModelError("URDF has several <ros2_control> blocks: merge them into one system")
    locked = set(spec.locked)
    actuated = set(spec.joints if spec.actuated is None else spec.actuated)
    unknown = sorted(actuated - set(spec.joints))
    if unknown:
        raise ModelError(f"effort controller joints {unknown} are not model joints {list(spec.joints)}")
    if not blocks:
        block = ET.SubElement(robot, "ros2_control", name=f"{robot.get('name', 'robot')}_system", type="system")
        ET.SubElement(ET.SubElement(block, "hardware"), "plugin").text = HARDWARE["mock"]
        for name in spec.joints:
            j = ET.SubElement(block, "joint", name=name)
            if name in actuated:
                ET.SubElement(j, "command_interface", name="effort")
            for s in ("position", "velocity", "effort"):
                ET.SubElement(j, "state_interface", name=s)
        return block
    block = blocks[0]
    for j in block.findall("joint"):
        if j.get("name") in locked:
            block.remove(j)
        elif j.get("name") not in spec.joints:
            raise ModelError(f"<ros2_control> joint '{j.get('name')}' is not a model joint {list(spec.joints)}")
        elif j.get("name") in actuated and j.find("command_interface[@name='effort']") is None:
            j.insert(0, ET.Element("command_interface", name="effort"))  # the effort controller claims it
    missing = sorted(actuated - {j.get("name") for j in block.findall("joint")})
    if missing:
        raise ModelError(f"<ros2_control> has no joint {missing} (the effort controller's joints)")
    return block


def set_hardware(block: ET.Element, plugin: str, params: Mapping[str, str]) -> None:
    """Hardware plugin and its ``<param>`` children (replacing params of the same name)."""
    hw = block.find("hardware")
    if hw is None:
        hw = ET.Element("hardware")
        block.insert(0, hw)
    p = hw.find("plugin")
    if p is None:
        p = ET.SubElement(hw, "plugin")
    p.text = plugin
    for k, v in params.items():
        _set_param(hw, k, v)


def _set_param(parent: ET.Element, name: str, value) -> None:
    e = parent.find(f"param[@name='{name}']")
    if e is None:
        e = ET.SubElement(parent, "param", name=name)
    e.text = str(value)


def set_initial_values(block: ET.Element, q0: Mapping[str, float], qdot0: Mapping[str, float]) -> None:
    """``initial_value`` of every joint state interface: position q0, velocity q̇0, anything else 0."""
    for j in block.findall("joint"):
        name = j.get("name")
        if name not in q0:
            raise ModelError(f"no initial position for <ros2_control> joint '{name}'")
        for s in j.findall("state_interface"):
            value = {"position": q0[name], "velocity": qdot0.get(name, 0.0)}.get(s.get("name"), 0.0)
            _set_param(s, "initial_value", f"{float(value):.17g}")


def add_ft_sensor(block: ET.Element, name: str, frame: str, params: Mapping[str, str]) -> None:
    """A force/torque ``<sensor>`` (force.x … torque.z, initial_value 0, frame_id) unless one of that
    name exists, whose interfaces then get ``initial_value`` 0 and ``params``."""
    sensor = block.find(f"sensor[@name='{name}']")
    if sensor is None:
        sensor = ET.SubElement(block, "sensor", name=name)
        for itf in FT_INTERFACES:
            ET.SubElement(sensor, "state_interface", name=itf)
    for k, v in dict(params, frame_id=frame).items():
        _set_param(sensor, k, v)
    for s in sensor.findall("state_interface"):
        _set_param(s, "initial_value", "0.0")
