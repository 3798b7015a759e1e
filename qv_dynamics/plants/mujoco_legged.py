"""A MuJoCo plant for a floating-base legged robot on a flat floor, built from the Pinocchio model.

Scene (all choices stated, because a simulator is a model too):

* the root free-flyer becomes a MuJoCo ``freejoint``; every other joint a hinge/slide with a torque motor
  (``ctrlrange`` = ± URDF effort), no armature, with the model's joint ``damping`` and Coulomb ``friction``
  (URDF ``<dynamics>``, Pinocchio's ``model.damping`` / ``model.friction``; ANYmal C's URDF has none) as MuJoCo
  ``damping`` and ``frictionloss``;
* **point feet**: a sphere of radius ``foot_radius`` (3 mm by default) centred at each foot frame, the only
  collision geometry of the robot, against a floor plane at z = 0 with Coulomb friction ``friction``
  (0.8) and ``condim=3`` (no torsional/rolling friction). The controller's ``point_contact`` holds the
  sphere centre; a rolling sphere moves its centre by r·Δangle, so r is kept small (3 mm → 0.3 mm per
  0.1 rad of shank rotation);
* soft contact ``solref=(0.004, 1)``, ``solimp=(0.95, 0.99, 0.001)``: 0.05 mm of penetration under the
  standing load; elliptic friction cones. MuJoCo's soft friction creeps under a steady tangential load
  (measured: ANYmal standing under joint PD, 36 N tangential per foot, feet slid 5 mm in 3 s), so the
  ``noslip`` post-solver is on (``noslip_iterations=10``; then 0.06 mm in 3 s, the rolling of the sphere);
* ``timestep`` 0.5 ms; :meth:`LeggedMujocoPlant.step` holds τ over ``dt`` (1 ms: the 1 kHz loop).

Conventions: :attr:`q` and :attr:`qdot` are Pinocchio's (base position, quaternion x y z w; base linear
and angular velocity in the **base** frame, then the joints); MuJoCo's free joint stores the quaternion
w x y z and the linear velocity in the world frame, converted here. Foot forces are the forces the floor
exerts **on** each foot, in world axes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pinocchio as pin

from ..errors import DimensionError, ModelError, as_vector
from .mujoco_plant import MujocoStepping, mujoco
from .mujoco_scene import SceneFromDict, _fmt, _quat_wxyz, joint_mjcf


@dataclass
class FloorScene(SceneFromDict):
    """Scene parameters (SI units). ``feet``: the foot frames (one sphere each)."""

    feet: Sequence[str] = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")
    foot_radius: float = 0.001
    friction: float = 0.8
    timestep: float = 0.0005
    solref: Sequence[float] = (0.004, 1.0)
    solimp: Sequence[float] = (0.95, 0.99, 0.001, 0.5, 2.0)
    gravity: Sequence[float] = (0.0, 0.0, -9.81)
    noslip_iterations: int = 10
    extra: dict = field(default_factory=dict)


def _inertial(I: pin.Inertia, indent: str) -> list[str]:
    if I.mass <= 0:
        return []
    Ic = np.asarray(I.inertia)
    full = (Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2])
    return [f'{indent}<inertial pos="{_fmt(I.lever)}" mass="{I.mass:.12g}" fullinertia="{_fmt(full)}"/>']


def mjcf_floor_scene(model: pin.Model, scene: FloorScene | None = None) -> str:
    """MJCF of the robot (free-flyer root, body tree of Pinocchio's joints, merged inertias) on a floor,
    with a sphere and a site at each foot frame and a torque motor per 1-DoF joint."""
    scene = scene or FloorScene()
    if model.nq == model.nv or model.joints[1].shortname() != "JointModelFreeFlyer":
        raise ModelError("mjcf_floor_scene needs a floating-base model (from_urdf(..., floating_base=True))")
    feet: dict[int, list[tuple[str, pin.SE3]]] = {}
    for f in scene.feet:
        if not model.existFrame(f):
            raise ModelError(f"foot frame '{f}' is not in the model")
        fr = model.frames[model.getFrameId(f)]
        feet.setdefault(fr.parentJoint, []).append((f, fr.placement))
    children: dict[int, list[int]] = {j: [] for j in range(model.njoints)}
    for j in range(1, model.njoints):
        children[model.parents[j]].append(j)
    r = float(scene.foot_radius)
    contact = (f'contype="1" conaffinity="0" condim="3" friction="{scene.friction:.12g} 0 0" '
               f'solref="{_fmt(scene.solref)}" solimp="{_fmt(scene.solimp)}"')

    def body(j: int, indent: str) -> list[str]:
        Mj = model.jointPlacements[j]
        iv = model.joints[j].idx_v
        dyn = {} if j == 1 else {"damping": float(model.damping[iv]), "frictionloss": float(model.friction[iv])}
        lines = [f'{indent}<body name="{model.names[j]}_body" pos="{_fmt(Mj.translation)}" '
                 f'quat="{_fmt(_quat_wxyz(Mj.rotation))}">', indent + "  " + joint_mjcf(model, j, free=True, **dyn)]
        lines += _inertial(model.inertias[j], indent + "  ")
        for f, P in feet.get(j, []):
            lines += [f'{indent}  <site name="{f}" pos="{_fmt(P.translation)}" size="0.01"/>',
                      f'{indent}  <geom name="{f}" type="sphere" size="{r:.12g}" pos="{_fmt(P.translation)}" '
                      f'mass="0" {contact}/>']
        for c in children[j]:
            lines += body(c, indent + "  ")
        lines.append(f"{indent}</body>")
        return lines

    lim = np.array(model.effortLimit, dtype=float)
    motors = []
    for j in range(2, model.njoints):
        iv = model.joints[j].idx_v
        e = lim[iv] if 0 < lim[iv] < 1e10 else 1e6
        motors.append(f'    <motor name="{model.names[j]}_motor" joint="{model.names[j]}" gear="1" '
                      f'ctrllimited="true" ctrlrange="{-e:.12g} {e:.12g}"/>')
    return "\n".join([
        f'<mujoco model="{model.name or "robot"}_floor">',
        '  <compiler angle="radian" inertiafromgeom="false" autolimits="true"/>',
        f'  <option timestep="{scene.timestep:.12g}" gravity="{_fmt(scene.gravity)}" integrator="Euler" '
        f'cone="elliptic" noslip_iterations="{int(scene.noslip_iterations)}"/>',
        '  <worldbody>',
        f'    <geom name="floor" type="plane" size="0 0 1" contype="0" conaffinity="1" condim="3" '
        f'friction="{scene.friction:.12g} 0 0" solref="{_fmt(scene.solref)}" solimp="{_fmt(scene.solimp)}"/>',
        *body(1, "    "),
        '  </worldbody>',
        '  <actuator>', *motors, '  </actuator>',
        '</mujoco>',
    ])


class LeggedMujocoPlant(MujocoStepping):
    """MuJoCo plant of a floating-base robot standing on a floor (module doc for the scene and conventions).

    ``step(tau, dt)`` takes the full n-vector (the six base entries must be 0: the base is not actuated)
    or only the actuated joints' torques."""

    def __init__(self, system_or_model, scene: FloorScene | dict | None = None):
        pmodel = self._pin_model(system_or_model)
        self._compile(pmodel, scene, FloorScene, mjcf_floor_scene)
        self.nq, self.n = pmodel.nq, pmodel.nv
        self.joint_names = [pmodel.names[j] for j in range(2, pmodel.njoints)]
        self.feet = list(self.scene.feet)
        gid = {f: mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f) for f in self.feet}
        self._foot_of_geom = {g: i for i, g in enumerate(gid.values())}
        self._site = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, f) for f in self.feet]
        self._floor = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "floor")

    # ------------------------------------------------------------------ state (Pinocchio convention)
    def reset(self, q, qdot=None) -> None:
        q, qdot = self._reset_data(q, qdot, self.nq, self.n)
        self.set_state(q, qdot)

    def set_state(self, q, qdot) -> None:
        d = self.data
        d.qpos[:3] = q[:3]
        d.qpos[3] = q[6]
        d.qpos[4:7] = q[3:6]
        d.qpos[7:] = q[7:]
        R = pin.Quaternion(q[6], q[3], q[4], q[5]).normalized().matrix()
        d.qvel[:3] = R @ qdot[:3]
        d.qvel[3:] = qdot[3:]
        mujoco.mj_forward(self.model, d)

    @property
    def q(self) -> np.ndarray:
        qp = self.data.qpos
        quat = qp[3:7] / np.linalg.norm(qp[3:7])
        return np.concatenate([qp[:3], quat[1:4], quat[:1], qp[7:]])

    @property
    def base_rotation(self) -> np.ndarray:
        w, x, y, z = self.data.qpos[3:7] / np.linalg.norm(self.data.qpos[3:7])
        return pin.Quaternion(w, x, y, z).matrix()

    @property
    def qdot(self) -> np.ndarray:
        v = self.data.qvel.copy()
        v[:3] = self.base_rotation.T @ v[:3]
        return v

    def base_twist_world(self) -> np.ndarray:
        """(linear velocity, angular velocity) of the base, both in world axes."""
        return np.concatenate([self.data.qvel[:3], self.base_rotation @ self.data.qvel[3:6]])

    def foot_positions(self) -> np.ndarray:
        """(n_feet, 3) world positions of the foot frames (sphere centres)."""
        return np.array([self.data.site_xpos[s] for s in self._site])

    # ------------------------------------------------------------------ contact forces
    def foot_forces(self) -> np.ndarray:
        """(n_feet, 3) forces the floor exerts on each foot, world axes (``mj_contactForce``)."""
        F = np.zeros((len(self.feet), 3))
        d = self.data
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = c.geom1, c.geom2
            foot = self._foot_of_geom.get(g2 if g1 == self._floor else g1)
            if foot is None or self._floor not in (g1, g2):
                continue
            mujoco.mj_contactForce(self.model, d, i, self._c6)
            fw = c.frame.reshape(3, 3).T @ self._c6[:3]   # force of geom1 on geom2, world axes
            F[foot] += fw if g2 != self._floor else -fw
        return F

    def in_contact(self) -> np.ndarray:
        """Per foot: True if its sphere touches the floor (a MuJoCo contact exists)."""
        on = np.zeros(len(self.feet), bool)
        d = self.data
        for i in range(d.ncon):
            c = d.contact[i]
            for g in (c.geom1, c.geom2):
                if g in self._foot_of_geom:
                    on[self._foot_of_geom[g]] = True
        return on

    # ------------------------------------------------------------------ stepping
    def step(self, tau, dt: float | None = None) -> None:
        """Apply joint torques (clipped to ± effort limit by MuJoCo) for ``dt`` (default one timestep)."""
        tau = np.asarray(tau, float).ravel()
        if tau.size == self.n:
            if np.any(tau[:6] != 0.0):
                raise DimensionError(f"tau: the floating base is not actuated, got base entries {tau[:6]}")
            tau = tau[6:]
        tau = as_vector("tau", tau, self.n - 6)
        self.last_tau = np.concatenate([np.zeros(6), np.clip(tau, -self.effort_limits, self.effort_limits)])
        self._advance(tau, dt)


def standing_configuration(system, base_xyz: Sequence[float] = (0.0, 0.0, None), joints: dict | None = None,
                           feet: Sequence[str] = FloorScene.feet, foot_radius: float = FloorScene.foot_radius,
                           penetration: float = 0.0):
    """q with the given joint angles whose base height puts the lowest foot sphere on the floor (z = r),
    sunk by ``penetration`` (m; the soft contact's static penetration, to start near equilibrium)."""
    model = system.model
    q = pin.neutral(model)
    for name, val in (joints or {}).items():
        q[model.joints[model.getJointId(name)].idx_q] = val
    q[:2] = base_xyz[:2]
    q[2] = 0.0
    pin.framesForwardKinematics(model, system.data, q)
    zmin = min(system.data.oMf[model.getFrameId(f)].translation[2] for f in feet)
    q[2] = foot_radius - zmin - penetration if base_xyz[2] is None else base_xyz[2]
    return q


#: ANYmal C standing posture of its SRDF (``group_state standing``).
ANYMAL_C_STANDING = {"LF_HAA": -0.1, "LF_HFE": 0.7, "LF_KFE": -1.0, "RF_HAA": 0.1, "RF_HFE": 0.7, "RF_KFE": -1.0,
                     "LH_HAA": -0.1, "LH_HFE": -0.7, "LH_KFE": 1.0, "RH_HAA": 0.1, "RH_HFE": -0.7, "RH_KFE": 1.0}

__all__ = ["FloorScene", "LeggedMujocoPlant", "mjcf_floor_scene", "standing_configuration",
           "ANYMAL_C_STANDING"]
