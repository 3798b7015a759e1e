"""Two Pandas facing each other 0.8 m apart holding a free 2 kg box (issue 14): ``urdf/bimanual_panda_box.urdf``.

* The arms come from example-robot-data's ``panda.urdf`` (inertias, joint placements and limits unchanged;
  visuals/collisions dropped, the two finger joints made ``fixed``: fingers locked), with every link/joint
  name prefixed ``left_`` / ``right_``. ``left_panda_link0`` sits at (−0.4, 0, 0); ``right_panda_link0``
  at (+0.4, 0, 0) turned by π about z, so the same joint angles give the mirrored pose.
* ``box`` (2 kg, 0.10 × 0.20 × 0.15 m) hangs on a ``floating`` joint ``box_joint`` below ``world``:
  Pinocchio makes it a free-flyer in the middle of the tree (nq = 21, nv = 20).
* ``box_grasp_left`` / ``box_grasp_right`` are box frames placed exactly at the hand TCPs
  (``left_panda_hand_tcp`` / ``right_panda_hand_tcp``) in the nominal pose (box centre at
  :func:`box_position`, both arms at ``Q_ARM`` = the Panda "ready" posture, hands pointing down at the box's
  top face), so two 6-axis ``loop_closure`` constraints hand ↔ box frame hold with Φ = 0 there.

:func:`bimanual_system` loads it with the two grasps as 6-axis loop closures (12 rows, rank 12, n − r = 8,
six internal wrench components); ``python -m qv_dynamics.sim.bimanual`` regenerates the URDF (deterministic).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin

from ..model import ConstrainedSystem
from ..robots import package_share_dir, resolve_urdf

BASE_X = 0.4
#: the Panda "ready" posture: TCP 0.307 m in front of the base, 0.59 m up, pointing down; joint 3 at 0
Q_ARM = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])
BOX_SIZE = (0.30, 0.10, 0.10)
BOX_BELOW_TCP = 0.05     # box centre below the TCPs: the hands hold the box at its top face
BOX_MASS = 2.0
URDF_NAME = "bimanual_panda_box.urdf"
SIDES = ("left", "right")


def _f(x) -> str:
    return " ".join(repr(float(v)) for v in np.ravel(x))


def _tcp_in_base(q_arm: np.ndarray) -> pin.SE3:
    """TCP pose of one Panda (base at the origin) at joint angles ``q_arm`` (fingers locked)."""
    model = pin.buildModelFromUrdf(resolve_urdf("panda"))
    model = pin.buildReducedModel(model, [model.getJointId("panda_finger_joint1"),
                                          model.getJointId("panda_finger_joint2")], pin.neutral(model))
    data = model.createData()
    pin.framesForwardKinematics(model, data, q_arm)
    return data.oMf[model.getFrameId("panda_hand_tcp")].copy()


def _prefixed_arm(side: str) -> list[ET.Element]:
    tree = ET.parse(resolve_urdf("panda"))
    out = []
    for el in tree.getroot():
        if el.tag not in ("link", "joint"):
            continue
        el.set("name", f"{side}_{el.get('name')}")
        for tag in ("visual", "collision", "safety_controller", "dynamics"):
            for sub in el.findall(tag):
                el.remove(sub)
        for tag in ("parent", "child"):
            sub = el.find(tag)
            if sub is not None:
                sub.set("link", f"{side}_{sub.get('link')}")
        if el.tag == "joint" and "finger_joint" in el.get("name"):
            el.set("type", "fixed")
            for sub in el.findall("axis") + el.findall("limit"):
                el.remove(sub)
        out.append(el)
    return out


def _fixed(name: str, parent: str, child: str, M: pin.SE3) -> ET.Element:
    j = ET.Element("joint", name=name, type="fixed")
    ET.SubElement(j, "origin", xyz=_f(M.translation), rpy=_f(pin.rpy.matrixToRpy(M.rotation)))
    ET.SubElement(j, "parent", link=parent)
    ET.SubElement(j, "child", link=child)
    return j


def build() -> tuple[str, np.ndarray]:
    """The URDF text and the arm posture it was built for."""
    q_arm = Q_ARM
    robot = ET.Element("robot", name="bimanual_panda_box")
    ET.SubElement(robot, "link", name="world")
    bases = {"left": pin.SE3(np.eye(3), np.array([-BASE_X, 0, 0])),
             "right": pin.SE3(pin.rpy.rpyToMatrix(0, 0, np.pi), np.array([BASE_X, 0, 0]))}
    for side, M in bases.items():
        robot.extend(_prefixed_arm(side))
        robot.append(_fixed(f"{side}_base_joint", "world", f"{side}_panda_link0", M))
    box = ET.SubElement(robot, "link", name="box")
    inertial = ET.SubElement(box, "inertial")
    ET.SubElement(inertial, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=repr(BOX_MASS))
    a, b, c = BOX_SIZE
    ET.SubElement(inertial, "inertia", ixx=repr(BOX_MASS * (b * b + c * c) / 12),
                  iyy=repr(BOX_MASS * (a * a + c * c) / 12),
                  izz=repr(BOX_MASS * (a * a + b * b) / 12), ixy="0", ixz="0", iyz="0")
    bj = ET.SubElement(robot, "joint", name="box_joint", type="floating")
    ET.SubElement(bj, "origin", xyz="0 0 0", rpy="0 0 0")
    ET.SubElement(bj, "parent", link="world")
    ET.SubElement(bj, "child", link="box")
    xml = ET.tostring(robot, encoding="unicode")
    # grasp frames: the TCP poses in the box frame at the nominal configuration
    model = pin.buildModelFromXML(xml)
    data = model.createData()
    q = nominal_q(model, q_arm)
    pin.framesForwardKinematics(model, data, q)
    box_M = pin.SE3(np.eye(3), box_position())
    for side in bases:
        tcp = data.oMf[model.getFrameId(f"{side}_panda_hand_tcp")]
        ET.SubElement(robot, "link", name=f"box_grasp_{side}")
        robot.append(_fixed(f"box_grasp_{side}_joint", "box", f"box_grasp_{side}", box_M.actInv(tcp)))
    ET.indent(robot, "  ")
    header = ("<?xml version=\"1.0\"?>\n<!-- generated by python -m qv_dynamics.sim.bimanual from example-robot-data "
              "panda.urdf: two Pandas 0.8 m apart (fingers fixed) and a 2 kg free box -->\n")
    return header + ET.tostring(robot, encoding="unicode") + "\n", q_arm


def nominal_q(model, q_arm: np.ndarray | None = None) -> np.ndarray:
    """q (nq = 21) of the nominal pose: both arms at ``q_arm`` (default ``Q_ARM``), box at rest between the
    hands (identity orientation); ``model`` is a pinocchio.Model or a ConstrainedSystem."""
    model = getattr(model, "model", model)
    q_arm = Q_ARM if q_arm is None else np.asarray(q_arm, float)
    q = pin.neutral(model)
    for side in SIDES:
        for i in range(7):
            q[model.joints[model.getJointId(f"{side}_panda_joint{i + 1}")].idx_q] = q_arm[i]
    iq = model.joints[model.getJointId("box_joint")].idx_q
    q[iq:iq + 7] = [*box_position(), 0, 0, 0, 1]
    return q


def box_position() -> np.ndarray:
    """Nominal box centre: midway between the two TCPs, BOX_BELOW_TCP below them."""
    z = _tcp_in_base(Q_ARM).translation[2]
    return np.array([0.0, 0.0, z - BOX_BELOW_TCP])


def arm_joints(side: str | None = None) -> list[str]:
    """The 7 joint names of one arm (``side`` = left/right) or the 14 of both, left first."""
    sides = SIDES if side is None else (side,)
    return [f"{s}_panda_joint{i}" for s in sides for i in range(1, 8)]


def grasp_constraint(side: str) -> dict:
    """A 6-axis loop closure hand TCP ↔ box grasp frame (SPEC §3), named ``grasp_<side>``."""
    return {"type": "loop_closure", "name": f"grasp_{side}", "frame_a": f"{side}_panda_hand_tcp",
            "frame_b": f"box_grasp_{side}", "axes": ["x", "y", "z", "rx", "ry", "rz"]}


def bimanual_system(sides=SIDES) -> ConstrainedSystem:
    """The two arms + free box with the grasps of ``sides`` (both by default) as loop closures."""
    return ConstrainedSystem.from_urdf(URDF_NAME, constraints=[grasp_constraint(s) for s in sides])


def main() -> None:
    out = package_share_dir() / "urdf" / URDF_NAME
    text, _ = build()
    out.write_text(text)
    print(f"wrote {out}; box centre {box_position()}")


if __name__ == "__main__":
    main()
