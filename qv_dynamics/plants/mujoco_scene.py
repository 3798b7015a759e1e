"""MJCF export of a Pinocchio model with a table scene, for :class:`~qv_dynamics.plants.mujoco_plant.MujocoPlant`.

The MJCF is generated from the (reduced) Pinocchio model, body by body: joint placements, joint axes,
link masses / centres of mass / inertias (the locked Panda fingers are merged into link 7 exactly as
``pin.buildReducedModel`` merges them), position limits and URDF effort limits. Meshes are not loaded:
the only collision geometry is a sphere at the tool point (``tool_frame``) and the table box, so the
plant is independent of mesh files and robust on a fresh machine.

Scene and modelling choices (documented for the controller, which models a frictionless surface
contact ``{type: point_contact, frame: <tool>, axes: [z]}``):

* torque motors only (``ctrl`` = joint torque, ``ctrlrange`` = ± URDF effort), no position servos;
* joint damping/armature 0 (Pinocchio's M and h carry neither), so free motion matches Pinocchio;
* the tool/table contact is **frictionless** (``condim=1``): the only contact force is along the table
  normal, which is what a ``point_contact`` with ``axes: [z]`` models. A friction cone would add
  tangential forces the controller does not model (it treats them as disturbances);
* stiff soft contact: ``solref=(0.002, 1)`` (2 ms time constant, critically damped; MuJoCo needs it
  ≥ 2 timesteps) with ``solimp=(0.95, 0.99, 0.001)``: about 3 µm of penetration at 10 N, crisp on the
  1 kHz loop (the price is an impact peak of 2–4× the pressing force when touching down at 1 cm/s);
* ``timestep`` 0.5 ms (2 kHz physics); the plant's ``step(tau, dt)`` holds τ over ``dt`` (zero-order hold);
* the table is a mocap body, so its height can change during a run (``set_table_height``);
* a 6-axis force/torque sensor (MuJoCo ``force``/``torque`` sensors) sits at the tool site on a massless
  tool body, so it reads exactly the contact wrench; the normal force is also available from
  ``mj_contactForce`` (``contact_force_world``).

Sign conventions: :meth:`MujocoPlant.contact_force_world` is the force the table exerts **on** the tool,
in world axes (pressing down on the table gives +z). With the SPEC's ``M q̈ + h = τ − Aᵀλ`` and the
constraint row A = ∂z_tool/∂q, the multiplier is ``λ = −F_z`` (:meth:`lambda_z`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self, Sequence

import numpy as np
import pinocchio as pin

from ..errors import ModelError


class SceneFromDict:
    """``from_dict`` for the scene dataclasses: known keys set the fields, the others are kept in ``extra``."""

    @classmethod
    def from_dict(cls, d: dict | None) -> Self:
        d = dict(d or {})
        known = {k: d.pop(k) for k in list(d) if k in cls.__dataclass_fields__}
        return cls(**known, extra=d)


@dataclass
class SceneConfig(SceneFromDict):
    """Scene parameters (all SI units)."""

    tool_frame: str = "panda_hand_tcp"
    tip_radius: float = 0.01
    table_height: float = 0.2          # z of the table top surface
    table_center: Sequence[float] = (0.5, 0.0)
    table_half_size: Sequence[float] = (0.4, 0.5)
    table_thickness: float = 0.05
    timestep: float = 0.0005
    solref: Sequence[float] = (0.002, 1.0)
    solimp: Sequence[float] = (0.95, 0.99, 0.001, 0.5, 2.0)
    friction: float = 0.0              # 0 -> frictionless (condim 1); > 0 -> condim 3 with this μ
    joint_damping: float = 0.0
    gravity: Sequence[float] = (0.0, 0.0, -9.81)
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        """Every number finite and in a physical range (ModelError naming ``scene.<field>``): a NaN table height
        or a 1e9 s timestep would otherwise build a plant that never touches or never steps."""
        for name, low, high, n in (("tip_radius", 0.0, 0.5, 1), ("table_height", -10.0, 10.0, 1),
                                   ("table_center", -10.0, 10.0, 2), ("table_half_size", 1e-6, 10.0, 2),
                                   ("table_thickness", 1e-6, 1.0, 1), ("timestep", 1e-6, 0.01, 1),
                                   ("solref", -1e9, 1e9, 2), ("solimp", -1e9, 1e9, 5), ("friction", 0.0, 2.0, 1),
                                   ("joint_damping", 0.0, 1e4, 1), ("gravity", -100.0, 100.0, 3)):
            v = getattr(self, name)
            try:
                a = np.asarray(v, float).reshape(n)
            except (TypeError, ValueError):
                raise ModelError(f"scene.{name} must be {n} number(s), got {v!r}") from None
            if not np.all(np.isfinite(a)) or np.any(a < low) or np.any(a > high):
                raise ModelError(f"scene.{name} must be {n} finite number(s) in [{low:g}, {high:g}], got {v!r}")
        if self.tip_radius <= 0:
            raise ModelError(f"scene.tip_radius must be > 0 m, got {self.tip_radius!r}")


def _fmt(x) -> str:
    return " ".join(f"{float(v):.12g}" for v in np.ravel(x))


def _quat_wxyz(R: np.ndarray) -> np.ndarray:
    q = pin.Quaternion(R)
    return np.array([q.w, q.x, q.y, q.z])


_AXIS = {"JointModelRX": (1, 0, 0), "JointModelRY": (0, 1, 0), "JointModelRZ": (0, 0, 1),
         "JointModelPX": (1, 0, 0), "JointModelPY": (0, 1, 0), "JointModelPZ": (0, 0, 1)}


#: Smallest principal inertia (kg m²) given to a body in the MJCF: MuJoCo rejects a moving body whose
#: inertia is below mjMINVAL, so a point mass (the slider-crank's links) gets this much about every axis.
#: It changes M(q) by at most 1e-12 kg m² per entry (the slider-crank's entries are ~0.1 kg m²).
POINT_MASS_INERTIA = 1e-12


def joint_axis(jm) -> tuple:
    """Unit axis of a 1-DoF revolute/prismatic joint in its own frame, from its motion subspace S
    (v_joint = S q̇: angular rows for a revolute joint, linear rows for a prismatic one). Pinocchio's
    generic joint wrapper has no ``.axis`` for an unaligned axis such as (0, −1, 0)."""
    jd = jm.createData()
    jm.calc(jd, np.zeros(jm.nq))
    S = np.asarray(jd.S, float).reshape(6, -1)[:, 0]
    a = S[3:] if np.linalg.norm(S[3:]) > 0 else S[:3]
    return tuple(a / np.linalg.norm(a))


def joint_mjcf(model: pin.Model, j: int, damping: float = 0.0, frictionloss: float = 0.0, free: bool = False,
               who: str = "the MuJoCo plant") -> str:
    """``<joint>`` of Pinocchio joint j: a hinge/slide along its axis, limited to the position limits when
    both are finite; with ``free``, ``<freejoint>`` for a free-flyer. ModelError naming ``who`` otherwise."""
    jm = model.joints[j]
    kind, name = jm.shortname(), model.names[j]
    if free and kind == "JointModelFreeFlyer":
        return f'<freejoint name="{name}"/>'
    if kind not in _AXIS and kind not in ("JointModelRevoluteUnaligned", "JointModelPrismaticUnaligned"):
        raise ModelError(f"joint '{name}' of type {kind} is not supported by {who}")
    axis = _AXIS.get(kind) or joint_axis(jm)
    jtype = "slide" if "Prismatic" in kind or kind.startswith("JointModelP") else "hinge"
    lo, hi = model.lowerPositionLimit[jm.idx_q], model.upperPositionLimit[jm.idx_q]
    limited = np.isfinite(lo) and np.isfinite(hi) and hi > lo and abs(hi) < 1e10
    rng = f' range="{lo:.12g} {hi:.12g}" limited="true"' if limited else ' limited="false"'
    return (f'<joint name="{name}" type="{jtype}" axis="{_fmt(axis)}"{rng} damping="{damping:.12g}" armature="0" '
            f'frictionloss="{frictionloss:.12g}"/>')


class _BodyTree:
    """The ``<body>`` tree of the robot: one body per joint, the tool body (site, sensor, tip sphere) on the
    tool frame's parent joint."""

    def __init__(self, model: pin.Model, scene: SceneConfig, contact: str):
        self.model, self.scene, self.contact = model, scene, contact
        self.children: dict[int, list[int]] = {j: [] for j in range(model.njoints)}
        for j in range(1, model.njoints):
            self.children[model.parents[j]].append(j)
        self.tool = model.frames[model.getFrameId(scene.tool_frame)]

    def xml(self) -> list[str]:
        return [line for c in self.children[0] for line in self.body(c, "    ")]

    def joint(self, j: int, indent: str) -> str:
        return f"{indent}  " + joint_mjcf(self.model, j, self.scene.joint_damping)

    def body(self, j: int, indent: str) -> list[str]:
        model = self.model
        Mj = model.jointPlacements[j]
        I = model.inertias[j]
        Ic = np.asarray(I.inertia)
        lines = [f'{indent}<body name="{model.names[j]}_body" pos="{_fmt(Mj.translation)}" '
                 f'quat="{_fmt(_quat_wxyz(Mj.rotation))}">', self.joint(j, indent)]
        if I.mass > 0:
            Ic = Ic + max(0.0, POINT_MASS_INERTIA - float(np.linalg.eigvalsh(Ic)[0])) * np.eye(3)
            full = (Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2])
            lines.append(f'{indent}  <inertial pos="{_fmt(I.lever)}" mass="{I.mass:.12g}" fullinertia="{_fmt(full)}"/>')
        if self.tool.parentJoint == j:
            P = self.tool.placement
            lines += [f'{indent}  <body name="tool" pos="{_fmt(P.translation)}" quat="{_fmt(_quat_wxyz(P.rotation))}">',
                      f'{indent}    <site name="tool_site" size="0.005"/>',
                      f'{indent}    <geom name="tool_tip" type="sphere" size="{self.scene.tip_radius:.12g}" mass="0" '
                      f'contype="1" conaffinity="1" {self.contact}/>',
                      f'{indent}  </body>']
        for c in self.children[j]:
            lines += self.body(c, indent + "  ")
        lines.append(f"{indent}</body>")
        return lines


def mjcf_from_pinocchio(model: pin.Model, scene: SceneConfig | None = None) -> str:
    """Generate MJCF for a fixed-base chain/tree of 1-DoF joints from a Pinocchio model, plus the scene.

    Bodies follow Pinocchio's joint tree (jointPlacements), inertias are Pinocchio's (already merged
    for fixed/locked children). Raises ModelError for joint types MuJoCo cannot mirror here."""
    scene = scene or SceneConfig()
    if not model.existFrame(scene.tool_frame):
        raise ModelError(f"tool frame '{scene.tool_frame}' is not in the model")
    lim = np.array(model.effortLimit, dtype=float)
    cond = 1 if scene.friction <= 0 else 3
    fric = max(scene.friction, 0.0)
    contact = (f'condim="{cond}" friction="{fric:.12g} 0 0" solref="{_fmt(scene.solref)}" '
               f'solimp="{_fmt(scene.solimp)}"')
    tree = _BodyTree(model, scene, contact).xml()
    motors = []
    for j in range(1, model.njoints):
        iv = model.joints[j].idx_v
        e = lim[iv] if lim[iv] > 0 else 1e6
        motors.append(f'    <motor name="{model.names[j]}_motor" joint="{model.names[j]}" gear="1" '
                      f'ctrllimited="true" ctrlrange="{-e:.12g} {e:.12g}"/>')
    cx, cy = scene.table_center
    hx, hy = scene.table_half_size
    ht = scene.table_thickness / 2
    return "\n".join([
        f'<mujoco model="{model.name or "robot"}_table">',
        '  <compiler angle="radian" inertiafromgeom="false" autolimits="true"/>',
        f'  <option timestep="{scene.timestep:.12g}" gravity="{_fmt(scene.gravity)}" integrator="Euler"/>',
        '  <worldbody>',
        f'    <body name="table" mocap="true" pos="{cx:.12g} {cy:.12g} {scene.table_height - ht:.12g}">',
        f'      <geom name="table_top" type="box" size="{hx:.12g} {hy:.12g} {ht:.12g}" contype="1" conaffinity="1" '
        f'{contact} rgba="0.6 0.5 0.4 1"/>',
        '    </body>',
        *tree,
        '  </worldbody>',
        '  <actuator>', *motors, '  </actuator>',
        '  <sensor>',
        '    <force name="tool_force" site="tool_site"/>',
        '    <torque name="tool_torque" site="tool_site"/>',
        '  </sensor>',
        '</mujoco>',
    ])
