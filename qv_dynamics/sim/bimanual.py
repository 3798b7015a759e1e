"""Two arms holding a free box as one closed chain, built from a :class:`~qv_dynamics.sim.bimanual_spec.BimanualSpec`
(YAML: :meth:`BimanualSpec.from_dict`); the shipped default is two Pandas facing each other 0.8 m apart
(:func:`~qv_dynamics.sim.bimanual_spec.panda_pair`, ``urdf/bimanual_panda_box.urdf``).

* Each arm comes from its URDF (inertias, joint placements and limits unchanged; visuals/collisions dropped,
  its ``locked`` joints made ``fixed``) with every link/joint name prefixed ``<arm name>_``; its root link hangs
  below ``world`` at ``base_xyz`` / ``base_rpy``.
* ``box`` (mass, size of the spec; uniform cuboid inertia) hangs on a ``floating`` joint ``box_joint`` below
  ``world``: Pinocchio makes it a free-flyer in the middle of the tree (joint 1).
* ``box_grasp_<arm>`` are box frames placed exactly at the arms' ``<arm>_<tcp>`` frames in the nominal pose
  (both arms at their ``posture``, box centre at :func:`box_position`, world orientation), so two 6-axis
  ``loop_closure`` constraints hand ↔ box frame hold with Φ = 0 there.

:func:`bimanual_system` loads it with the two grasps as 6-axis loop closures (12 rows, rank 12; n − r = 6 +
the redundant joints). ``python -m qv_dynamics.sim.bimanual`` regenerates the Panda pair's URDF
(deterministic); ``python -m qv_dynamics.sim.bimanual my_arms.yaml out.urdf`` writes another pair's.
"""
from __future__ import annotations

import functools
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

from ..model import ConstrainedSystem
from ..robots import package_share_dir, resolve_urdf
from .bimanual_spec import ArmSpec, BimanualSpec, BimanualSpecError, panda_pair

DEFAULT = panda_pair()
SIDES = DEFAULT.sides
URDF_NAME = DEFAULT.urdf
BOX = "box"


def _f(x) -> str:
    return " ".join(repr(float(v)) for v in np.ravel(x))


def _spec(spec, system=None) -> BimanualSpec:
    return spec if spec is not None else getattr(system, "bimanual_spec", None) or DEFAULT


@functools.lru_cache(maxsize=16)
def _arm_model(robot: str, locked: tuple) -> tuple[pin.Model, tuple]:
    """One arm alone (base at the origin, ``locked`` joints fixed at 0) and its moving joints' names. Errors
    start with the key of the arm's description they concern (``robot:``, ``locked:``)."""
    try:
        model = pin.buildModelFromUrdf(resolve_urdf(robot))
    except (FileNotFoundError, RuntimeError, ValueError) as exc:
        raise BimanualSpecError(f"robot: '{robot}': {exc}") from None
    for j in locked:
        if not model.existJointName(j):
            raise BimanualSpecError(f"locked: '{j}' is not a joint of '{robot}' {list(model.names[1:])}")
    model = pin.buildReducedModel(model, [model.getJointId(j) for j in locked], pin.neutral(model))
    names = tuple(model.names[j] for j in range(1, model.njoints) if model.joints[j].nv == 1)
    if len(names) != model.nv:
        raise BimanualSpecError(f"robot: '{robot}': only 1-DoF joints are supported, got {list(model.names[1:])}")
    return model, names


def moving_joints(arm: ArmSpec) -> tuple:
    """The arm's moving joints (unprefixed, kinematic order): one ``posture`` entry each."""
    return _arm_model(arm.robot, tuple(arm.locked))[1]


def _check_arm(arm: ArmSpec, where: str) -> None:
    try:
        model, names = _arm_model(arm.robot, tuple(arm.locked))
    except BimanualSpecError as exc:
        raise BimanualSpecError(f"{where}.{exc}") from None
    if len(arm.posture) != len(names):
        raise BimanualSpecError(f"{where}.posture: '{arm.robot}' has {len(names)} moving joints {list(names)}, "
                                f"got {len(arm.posture)} angles")
    if not model.existFrame(arm.tcp):
        raise BimanualSpecError(f"{where}.tcp: no frame '{arm.tcp}' in '{arm.robot}'")
    for j in arm.redundancy:
        if j not in names:
            raise BimanualSpecError(f"{where}.redundancy: '{j}' is not a moving joint of '{arm.robot}' {list(names)}")


def _tcp_in_base(arm: ArmSpec) -> pin.SE3:
    """TCP pose of one arm (base at the origin) at its posture."""
    model, _ = _arm_model(arm.robot, tuple(arm.locked))
    data = model.createData()
    pin.framesForwardKinematics(model, data, np.asarray(arm.posture, float))
    return data.oMf[model.getFrameId(arm.tcp)].copy()


def _base(arm: ArmSpec) -> pin.SE3:
    return pin.SE3(pin.rpy.rpyToMatrix(*arm.base_rpy), np.asarray(arm.base_xyz, float))


def _prefixed_arm(arm: ArmSpec) -> tuple[list[ET.Element], str]:
    """The arm's links and joints, prefixed, and its (prefixed) root link."""
    side, locked = arm.name, set(arm.locked)
    tree = ET.parse(resolve_urdf(arm.robot))
    out, children = [], set()
    for el in tree.getroot():
        if el.tag not in ("link", "joint"):
            continue
        name = el.get("name")
        el.set("name", f"{side}_{name}")
        for tag in ("visual", "collision", "safety_controller", "dynamics"):
            for sub in el.findall(tag):
                el.remove(sub)
        for tag in ("parent", "child"):
            sub = el.find(tag)
            if sub is not None:
                sub.set("link", f"{side}_{sub.get('link')}")
        if el.tag == "joint":
            children.add(el.find("child").get("link"))
            if name in locked:
                el.set("type", "fixed")
                for sub in el.findall("axis") + el.findall("limit") + el.findall("mimic"):
                    el.remove(sub)
        out.append(el)
    roots = [el.get("name") for el in out if el.tag == "link" and el.get("name") not in children]
    if len(roots) != 1:
        raise BimanualSpecError(f"arm robot '{arm.robot}': expected one root link, got {roots}")
    return out, roots[0]


def _fixed(name: str, parent: str, child: str, M: pin.SE3) -> ET.Element:
    j = ET.Element("joint", name=name, type="fixed")
    ET.SubElement(j, "origin", xyz=_f(M.translation), rpy=_f(pin.rpy.matrixToRpy(M.rotation)))
    ET.SubElement(j, "parent", link=parent)
    ET.SubElement(j, "child", link=child)
    return j


def check(spec: BimanualSpec, where: str = "bimanual.system") -> BimanualSpec:
    """The description's values against the arms' URDFs (robots, locked joints, postures, TCP frames,
    redundancy joints); :class:`BimanualSpecError` names ``<where>.arms[i].<key>``."""
    for i, arm in enumerate(spec.arms):
        _check_arm(arm, f"{where}.arms[{i}]")
    n_arms = sum(len(moving_joints(a)) for a in spec.arms)
    n_red = sum(len(a.redundancy) for a in spec.arms)
    if n_red != n_arms - 12:     # k = n − r = (n_arms + 6) − 12 coordinates: the box pose and the redundancy
        raise BimanualSpecError(f"{where}.arms[*].redundancy: the arms have {n_arms} moving joints, so the grasped "
                                f"chain has {n_arms - 6} minimal coordinates: the box pose and {n_arms - 12} "
                                f"redundancy joint(s), got {n_red}")
    return spec


def build(spec: BimanualSpec | None = None) -> str:
    """The URDF text of the two arms and the box (module doc)."""
    spec = check(_spec(spec))
    robot = ET.Element("robot", name=spec.name)
    ET.SubElement(robot, "link", name="world")
    for arm in spec.arms:
        elements, root = _prefixed_arm(arm)
        robot.extend(elements)
        robot.append(_fixed(f"{arm.name}_base_joint", "world", root, _base(arm)))
    box = ET.SubElement(robot, "link", name=BOX)
    inertial = ET.SubElement(box, "inertial")
    ET.SubElement(inertial, "origin", xyz="0 0 0", rpy="0 0 0")
    m = spec.object.mass
    ET.SubElement(inertial, "mass", value=repr(m))
    a, b, c = spec.object.size
    ET.SubElement(inertial, "inertia", ixx=repr(m * (b * b + c * c) / 12), iyy=repr(m * (a * a + c * c) / 12),
                  izz=repr(m * (a * a + b * b) / 12), ixy="0", ixz="0", iyz="0")
    bj = ET.SubElement(robot, "joint", name="box_joint", type="floating")
    ET.SubElement(bj, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(bj, "parent", link="world")
    ET.SubElement(bj, "child", link=BOX)
    # grasp frames: the TCP poses in the box frame at the nominal configuration
    box_M = pin.SE3(np.eye(3), box_position(spec))
    for arm in spec.arms:
        tcp = _base(arm) * _tcp_in_base(arm)
        ET.SubElement(robot, "link", name=f"box_grasp_{arm.name}")
        robot.append(_fixed(f"box_grasp_{arm.name}_joint", BOX, f"box_grasp_{arm.name}", box_M.actInv(tcp)))
    ET.indent(robot, "  ")
    arms = " and ".join(f"{a.name}: {a.robot}" for a in spec.arms)
    header = ("<?xml version=\"1.0\"?>\n<!-- generated by python -m qv_dynamics.sim.bimanual: arms "
              f"{arms} (locked joints fixed) and a {m:g} kg free box -->\n")
    return header + ET.tostring(robot, encoding="unicode") + "\n"


def nominal_q(model, q_arm: np.ndarray | None = None, spec: BimanualSpec | None = None) -> np.ndarray:
    """q of the nominal pose: each arm at its posture (or every arm at ``q_arm``), box at rest between the
    hands (world orientation); ``model`` is a pinocchio.Model or a ConstrainedSystem."""
    spec = _spec(spec, model)
    model = getattr(model, "model", model)
    q = pin.neutral(model)
    for arm in spec.arms:
        angles = arm.posture if q_arm is None else np.asarray(q_arm, float)
        for name, x in zip(moving_joints(arm), angles):
            q[model.joints[model.getJointId(f"{arm.name}_{name}")].idx_q] = x
    iq = model.joints[model.getJointId("box_joint")].idx_q
    q[iq:iq + 7] = [*box_position(spec), 0, 0, 0, 1]
    return q


def box_position(spec: BimanualSpec | None = None) -> np.ndarray:
    """Nominal box centre: the midpoint of the two TCPs plus the object's ``offset``."""
    spec = _spec(spec)
    tcps = [(_base(a) * _tcp_in_base(a)).translation for a in spec.arms]
    return 0.5 * (tcps[0] + tcps[1]) + np.asarray(spec.object.offset, float)


def arm_joints(side: str | None = None, spec: BimanualSpec | None = None) -> list[str]:
    """The moving joint names of one arm (``side`` = its name) or of both, first arm first (prefixed)."""
    spec = _spec(spec)
    arms = spec.arms if side is None else (spec.arm(side),)
    return [f"{a.name}_{j}" for a in arms for j in moving_joints(a)]


def tcp_frame(side: str, spec: BimanualSpec | None = None) -> str:
    """The grasping frame of arm ``side`` in the two-arm model."""
    return f"{side}_{_spec(spec).arm(side).tcp}"


def redundancy_joints(side: str | None = None, spec: BimanualSpec | None = None) -> list[str]:
    """The joints taken as minimal coordinates besides the box pose (prefixed), of one arm or of both."""
    spec = _spec(spec)
    arms = spec.arms if side is None else (spec.arm(side),)
    return [f"{a.name}_{j}" for a in arms for j in a.redundancy]


def grasp_constraint(side: str, spec: BimanualSpec | None = None) -> dict:
    """A 6-axis loop closure hand TCP ↔ box grasp frame (SPEC §3), named ``grasp_<side>``."""
    return {"type": "loop_closure", "name": f"grasp_{side}", "frame_a": tcp_frame(side, spec),
            "frame_b": f"box_grasp_{side}", "axes": ["x", "y", "z", "rx", "ry", "rz"]}


def bimanual_system(sides=None, spec: BimanualSpec | None = None) -> ConstrainedSystem:
    """The two arms + free box with the grasps of ``sides`` (both by default) as loop closures; the
    description is kept as ``system.bimanual_spec``."""
    spec = _spec(spec)
    sides = spec.sides if sides is None else tuple(sides)
    source = spec.urdf if spec.urdf is not None else build(spec)
    system = ConstrainedSystem.from_urdf(source, constraints=[grasp_constraint(s, spec) for s in sides])
    system.bimanual_spec = spec
    return system


def main(argv: list[str] | None = None) -> int:
    """``python -m qv_dynamics.sim.bimanual [config.yaml out.urdf]``: write the URDF of a description."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        from ..yamlio import load_yaml

        doc = load_yaml(argv[0], "two-arm description") or {}
        section = doc.get("bimanual", doc) if isinstance(doc, dict) else doc
        spec = check(BimanualSpec.from_dict(section.get("system", section) if isinstance(section, dict) else section))
        out = argv[1] if len(argv) > 1 else f"{spec.name}.urdf"
    else:
        spec, out = DEFAULT, str(package_share_dir() / "urdf" / URDF_NAME)
    with open(out, "w") as fh:
        fh.write(build(spec))
    print(f"wrote {out}; box centre {box_position(spec)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
