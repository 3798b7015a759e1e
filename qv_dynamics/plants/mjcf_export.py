"""MJCF of a model config for mujoco_ros2_control and MuJoCo: robot, scene, constraints, initial state.

Built on the plant's exporter (:func:`~qv_dynamics.plants.mujoco_scene.mjcf_from_pinocchio`: bodies, joint axes
and inertias from the Pinocchio model, a torque motor per joint named ``<joint>_motor`` acting on the
joint of that name, the ``tool_force``/``tool_torque`` sensor pair at the tool site), plus:

* the scene: the config's ``scene`` (the demo's table) or, without one, no table;
* every ``point_contact`` with an explicit ``position`` that the table does not already model becomes
  an exact bilateral constraint in MuJoCo: a site at the constraint frame, an *anchor* body at the
  position that slides freely along the world axes the constraint leaves free (``ANCHOR_MASS``, gravity
  compensated), and an ``<equality connect>`` between the two sites. MuJoCo's equality constraints are
  soft (``solref``/``solimp`` of the scene): the frame sits ~µm off the surface under load, and the
  anchor's 1 g adds m·a along the free axes while the frame accelerates (zero at rest);
* a keyframe ``initial`` with the config's ``initial.q``/``initial.qdot`` (anchors placed at the frame).

Sign of the F/T reading (the quantity a controller sees): MuJoCo's ``force`` sensor gives the force the
tool's parent exerts on the massless tool body, i.e. minus the environment's force on the tool =
**λ** (the force the robot applies to the environment, SPEC M q̈ + h = τ − Aᵀλ), in tool-site axes.
mujoco_ros2_control publishes the *negated* sensor data (``-sensordata``: the environment's reaction
−λ), so force_torque_sensor_broadcaster's wrench from that path needs ``wrench_sign: -1.0`` in the
qv nodes; ``qv_mujoco_node`` publishes the sensor as it is (λ, ``wrench_sign`` 1).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

from ..errors import ModelError
from .mujoco_scene import SceneConfig, mjcf_from_pinocchio

ANCHOR_MASS = 1e-3  # kg; 1e-6 makes MuJoCo's constraint solver ill-conditioned (the closure then fails)
ANCHOR_INERTIA = 1e-7  # kg m², principal (the anchor does not rotate)
MJCF_INITIAL_KEY = "initial"
AXIS_INDEX = {"x": 0, "y": 1, "z": 2}


def _fmt(x) -> str:
    return " ".join(f"{float(v):.17g}" for v in np.ravel(x))


def tool_frame_of(system, doc: dict) -> str:
    """The frame carrying the MJCF tool site / F/T sensor: ``scene.tool_frame``, else the frame of the
    first constraint, else the frame of the last joint's child link."""
    scene = doc.get("scene") or {}
    if scene.get("tool_frame"):
        return str(scene["tool_frame"])
    for c in system.constraints:
        if c.frame:
            return c.frame
    model = system.model
    frames = [f.name for f in model.frames if f.parentJoint == model.njoints - 1 and f.type == pin.FrameType.BODY]
    return frames[-1]


def export_mjcf(system, doc: dict, q0=None, qdot0=None) -> str:
    """MJCF text for the model config ``doc`` (already loaded into ``system``); see the module docstring."""
    model = system.model
    has_table = bool(doc.get("scene"))
    scene = SceneConfig.from_dict(dict(doc.get("scene") or {}, tool_frame=tool_frame_of(system, doc)))
    scene.gravity = tuple(np.asarray(model.gravity.linear, float))
    root = ET.fromstring(mjcf_from_pinocchio(model, scene))
    world = root.find("worldbody")
    if not has_table:
        world.remove(world.find("body[@name='table']"))
    q0 = pin.neutral(model) if q0 is None else np.asarray(q0, float)
    qdot0 = np.zeros(model.nv) if qdot0 is None else np.asarray(qdot0, float)
    if model.nq != model.nv:
        raise ModelError("MJCF export supports 1-DoF joints only (nq = nv)")
    pin.forwardKinematics(model, system.data, q0, qdot0)
    pin.updateFramePlacements(model, system.data)
    equality = ET.Element("equality")
    anchor_q, anchor_v = [], []
    for c in system.constraints:
        if c.type != "point_contact" or not c.explicit_target:
            continue  # anchored at activation (the table) or not a point: not mirrored in MuJoCo
        if has_table and c.frame == scene.tool_frame and tuple(c.axes) == ("z",):
            continue  # the table surface models it (unilateral contact)
        site = _frame_site(root, model, c.frame, f"{c.name}_frame")
        p_frame = system.data.oMf[c.frame_id].translation
        v_frame = pin.getFrameVelocity(model, system.data, c.frame_id, pin.LOCAL_WORLD_ALIGNED).linear
        free = [a for a in "xyz" if a not in c.axes]
        body = ET.SubElement(world, "body", name=f"{c.name}_anchor", pos=_fmt(c.position), gravcomp="1")
        for a in free:
            ET.SubElement(body, "joint", name=f"{c.name}_slide_{a}", type="slide",
                          axis=_fmt(np.eye(3)[AXIS_INDEX[a]]), limited="false", damping="0", armature="0")
            anchor_q.append(p_frame[AXIS_INDEX[a]] - c.position[AXIS_INDEX[a]])
            anchor_v.append(v_frame[AXIS_INDEX[a]])
        ET.SubElement(body, "inertial", pos="0 0 0", mass=f"{ANCHOR_MASS:g}", diaginertia=_fmt([ANCHOR_INERTIA] * 3))
        ET.SubElement(body, "site", name=f"{c.name}_anchor", size="0.004")
        ET.SubElement(equality, "connect", name=c.name, site1=site, site2=f"{c.name}_anchor",
                      solref=_fmt(scene.solref), solimp=_fmt(scene.solimp), active=str(c.active).lower())
    if len(equality):
        root.insert(list(root).index(root.find("actuator")), equality)
    key = ET.SubElement(ET.SubElement(root, "keyframe"), "key", name=MJCF_INITIAL_KEY,
                        qpos=_fmt(np.concatenate([q0, anchor_q])), qvel=_fmt(np.concatenate([qdot0, anchor_v])))
    if has_table:  # the table is a mocap body: a keyframe must give its pose too
        key.set("mpos", world.find("body[@name='table']").get("pos"))
        key.set("mquat", "1 0 0 0")
    ET.indent(root, "  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def _frame_site(root: ET.Element, model: pin.Model, frame: str, name: str) -> str:
    """Name of a site at a Pinocchio frame: the tool site when it is the tool frame, else a new site in
    the MJCF body of the frame's parent joint (bodies are named ``<joint>_body``)."""
    tool = root.find(".//body[@name='tool']")
    f = model.frames[model.getFrameId(frame)]
    parent = root.find(f".//body[@name='{model.names[f.parentJoint]}_body']")
    if tool is not None and parent is not None and tool in list(parent):
        tool_pos = np.array(tool.get("pos").split(), float)
        if np.allclose(tool_pos, f.placement.translation, atol=1e-12):
            return "tool_site"
    if parent is None:
        raise ModelError(f"constraint frame '{frame}' is not on a moving body of the model")
    ET.SubElement(parent, "site", name=name, pos=_fmt(f.placement.translation), size="0.004")
    return name
