"""A MuJoCo plant for a Pinocchio tree with free-flyer joints and 6-axis loop closures as **weld equalities**.

Built for closed chains through a free object (two arms holding a box), from the same URDF as
the Pinocchio model:

* bodies follow Pinocchio's joint tree (joint placements, inertias with fixed children merged), so the DOF
  order is Pinocchio's; 1-DoF joints become hinges/slides with a torque motor (``ctrlrange`` = ± URDF
  effort), a free-flyer becomes a ``freejoint`` (no motor);
* every 6-axis ``loop_closure`` of the system becomes ``<weld site1=frame_a site2=frame_b>`` between sites
  at the two frames: the sites are held together in position and orientation, softly, with
  ``solref = (timeconst, dampratio)`` (default 2 ms, critically damped) and ``solimp``; the weld
  deflection under load is the grasp's compliance (a wrong internal force shows up as weld stretch, a
  released weld drops the object). Welds can be switched at run time (:meth:`set_weld`: grasp released or
  made);
* no contact geometry (``contype = 0``): the only interaction is through the welds; joint damping and
  armature 0 (Pinocchio's M and h carry neither), Euler integrator at ``timestep`` (default 0.5 ms),
  torque held over each ``step`` (zero-order hold).

Conversions (Pinocchio ↔ MuJoCo) for a free-flyer: q = [p, quat xyzw] ↔ qpos = [p, quat wxyz];
v = [Rᵀṗ, ω_body] ↔ qvel = [ṗ, ω_body]; generalized force [Rᵀf, τ_body] ↔ [f, τ_body].

The measured multiplier (SPEC sign M q̈ + h = τ − Aᵀλ) is λ = A⁺ᵀ(−qfrc_constraint) with the model's A at
the plant's q: MuJoCo's weld forces lie in the row space of the relative-twist Jacobian of the same two
frames, which is R(Aᵀ).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pinocchio as pin

from ..errors import ModelError, as_vector
from ..projection import pinv_basis
from .mujoco_plant import MujocoStepping, compile_mjcf, mujoco, require_mujoco
from .mujoco_scene import _fmt, _quat_wxyz, joint_mjcf


def mjcf_with_welds(model: pin.Model, welds: Sequence[tuple[str, str, str]], timestep: float = 0.0005,
                    solref: Sequence[float] = (0.002, 1.0), solimp: Sequence[float] = (0.95, 0.99, 0.001, 0.5, 2.0),
                    gravity: Sequence[float] | None = None, conditions: PlantConditions | None = None) -> str:
    """MJCF of the Pinocchio tree plus ``welds`` = [(name, frame_a, frame_b), ...] as site welds, with the
    plant-only departures from the model in ``conditions``."""
    cond = conditions or PlantConditions()
    children: dict[int, list[int]] = {j: [] for j in range(model.njoints)}
    for j in range(1, model.njoints):
        children[model.parents[j]].append(j)
    sites: dict[int, list[str]] = {j: [] for j in range(model.njoints)}
    for _, fa, fb in welds:
        for fr in (fa, fb):
            if not model.existFrame(fr):
                raise ModelError(f"weld frame '{fr}' is not in the model")
            f = model.frames[model.getFrameId(fr)]
            P = f.placement * cond.site_offset(fr)
            sites[f.parentJoint].append(f'<site name="{fr}" pos="{_fmt(P.translation)}" '
                                        f'quat="{_fmt(_quat_wxyz(P.rotation))}" size="0.005"/>')

    def body(j: int, indent: str) -> list[str]:
        Mj, I = model.jointPlacements[j], model.inertias[j]
        k = cond.mass_scale.get(model.names[j], 1.0)
        I = pin.Inertia(I.mass * k, I.lever, np.asarray(I.inertia) * k)
        lines = [f'{indent}<body name="{model.names[j]}_body" pos="{_fmt(Mj.translation)}" '
                 f'quat="{_fmt(_quat_wxyz(Mj.rotation))}">',
                 f"{indent}  " + joint_mjcf(model, j, cond.joint_damping, cond.frictionloss, free=True,
                                            who="the MuJoCo loop plant")]
        if I.mass > 0:
            Ic = np.asarray(I.inertia)
            full = (Ic[0, 0], Ic[1, 1], Ic[2, 2], Ic[0, 1], Ic[0, 2], Ic[1, 2])
            lines.append(f'{indent}  <inertial pos="{_fmt(I.lever)}" mass="{I.mass:.12g}" fullinertia="{_fmt(full)}"/>')
        lines += [f"{indent}  {s}" for s in sites[j]]
        for c in children[j]:
            lines += body(c, indent + "  ")
        return lines + [f"{indent}</body>"]

    tree = [f"    {s}" for s in sites[0]]
    for c in children[0]:
        tree += body(c, "    ")
    lim = np.array(model.effortLimit, dtype=float)
    motors = [f'    <motor name="{model.names[j]}_motor" joint="{model.names[j]}" gear="1" ctrllimited="true" '
              f'ctrlrange="{-lim[model.joints[j].idx_v]:.12g} {lim[model.joints[j].idx_v]:.12g}"/>'
              for j in range(1, model.njoints) if model.joints[j].nv == 1]
    eq = [f'    <weld name="{nm}" site1="{fa}" site2="{fb}" solref="{_fmt(solref)}" solimp="{_fmt(solimp)}"/>'
          for nm, fa, fb in welds]
    g = model.gravity.linear if gravity is None else np.asarray(gravity, float)
    return "\n".join([
        f'<mujoco model="{model.name or "robot"}_welds">',
        '  <compiler angle="radian" inertiafromgeom="false" autolimits="true"/>',
        f'  <option timestep="{timestep:.12g}" gravity="{_fmt(g)}" integrator="Euler"/>',
        '  <worldbody>', *tree, '  </worldbody>',
        '  <equality>', *eq, '  </equality>',
        '  <actuator>', *motors, '  </actuator>',
        '</mujoco>'])


@dataclass
class PlantConditions:
    """What the plant has and the controller's model does not (the same for every controller compared).

    ``mass_scale``: {joint name: factor} on the body carried by that joint (e.g. the box heavier than
    modelled); ``joint_damping`` (N·m·s/rad) and ``frictionloss`` (N·m, Coulomb) on every 1-DoF joint;
    ``site_offsets``: {frame: (xyz, rotation vector)} moves a weld site away from the model's frame (a
    grasp that is not where the model says); ``force_noise`` (N, σ per row of the measured λ) and
    ``velocity_noise`` (rad/s or m/s, σ on the measured q̇), drawn from ``seed``."""

    mass_scale: dict = field(default_factory=dict)
    joint_damping: float = 0.0
    frictionloss: float = 0.0
    site_offsets: dict = field(default_factory=dict)
    force_noise: float = 0.0
    velocity_noise: float = 0.0
    seed: int = 0

    def site_offset(self, frame: str) -> pin.SE3:
        xyz, rv = self.site_offsets.get(frame, ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)))
        return pin.SE3(pin.exp3(np.asarray(rv, float)), np.asarray(xyz, float))


class MujocoLoopPlant(MujocoStepping):
    """MuJoCo twin of a :class:`~qv_dynamics.model.ConstrainedSystem` whose 6-axis loop closures are welds.

    State in Pinocchio conventions: ``q`` (nq), ``qdot`` (nv), ``step(tau, dt)`` with τ an nv-vector (the
    entries of unactuated DOFs must be 0), ``lambda_meas(A)``, ``set_weld(name, active)``."""

    def __init__(self, system, timestep: float = 0.0005, solref=(0.002, 1.0), solimp=(0.95, 0.99, 0.001, 0.5, 2.0),
                 conditions: PlantConditions | None = None):
        require_mujoco()
        self.system = system
        pm = self.pin_model = system.model
        welds = []
        for c in system.constraints:
            if c.type != "loop_closure" or len(c.axes) != 6:
                raise ModelError(f"constraint '{c.name}': the loop plant models 6-axis loop closures only")
            welds.append((c.name, c.frame, c.frame_b))
        self.conditions = conditions or PlantConditions()
        self._rng = np.random.default_rng(self.conditions.seed)
        self.xml = mjcf_with_welds(pm, welds, timestep, solref, solimp, conditions=self.conditions)
        self.model, self.data = compile_mjcf(self.xml)
        self._weld_id = {nm: mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_EQUALITY, nm) for nm, _, _ in welds}
        self._free = [(pm.joints[j].idx_q, pm.joints[j].idx_v) for j in range(1, pm.njoints)
                      if pm.joints[j].shortname() == "JointModelFreeFlyer"]
        self._act_v = np.array([pm.joints[j].idx_v for j in range(1, pm.njoints) if pm.joints[j].nv == 1], int)
        self.effort_limits = self.model.actuator_ctrlrange[:, 1].copy()
        if self.model.nq != pm.nq or self.model.nv != pm.nv:
            raise ModelError(f"MuJoCo model has nq={self.model.nq}, nv={self.model.nv}; Pinocchio {pm.nq}, {pm.nv}")
        self.weld_active = {c.name: bool(c.active) for c in system.constraints}
        for c in system.constraints:
            self.set_weld(c.name, c.active)

    # ------------------------------------------------------------------ conversions
    def _rot(self, qpos: np.ndarray, iq: int) -> np.ndarray:
        w, x, y, z = qpos[iq + 3:iq + 7]
        return pin.Quaternion(w, x, y, z).normalized().matrix()

    def reset(self, q, qdot=None) -> None:
        """Set the state from Pinocchio's q and q̇."""
        q, qdot = self._reset_data(q, qdot, self.pin_model.nq, self.pin_model.nv)
        for name, active in self.weld_active.items():   # mj_resetData restores the model's eq_active0
            self.set_weld(name, active)
        qpos, qvel = q.copy(), qdot.copy()
        for iq, iv in self._free:
            qpos[iq + 3:iq + 7] = [q[iq + 6], q[iq + 3], q[iq + 4], q[iq + 5]]
            R = pin.Quaternion(*q[[iq + 6, iq + 3, iq + 4, iq + 5]]).normalized().matrix()
            qvel[iv:iv + 3] = R @ qdot[iv:iv + 3]
        self.data.qpos[:] = qpos
        self.data.qvel[:] = qvel
        mujoco.mj_forward(self.model, self.data)

    @property
    def q(self) -> np.ndarray:
        qpos = self.data.qpos.copy()
        q = qpos.copy()
        for iq, _ in self._free:
            w, x, y, z = qpos[iq + 3:iq + 7] / np.linalg.norm(qpos[iq + 3:iq + 7])
            q[iq + 3:iq + 7] = [x, y, z, w]
        return q

    @property
    def qdot(self) -> np.ndarray:
        v = self.data.qvel.copy()
        for iq, iv in self._free:
            v[iv:iv + 3] = self._rot(self.data.qpos, iq).T @ v[iv:iv + 3]
        return v

    def constraint_force(self) -> np.ndarray:
        """Aᵀλ (SPEC sign) in Pinocchio's velocity coordinates: −qfrc_constraint, free-flyer force rotated
        to the body frame."""
        f = -self.data.qfrc_constraint.copy()
        for iq, iv in self._free:
            f[iv:iv + 3] = self._rot(self.data.qpos, iq).T @ f[iv:iv + 3]
        return f

    def lambda_meas(self, A: np.ndarray, noisy: bool = False) -> np.ndarray:
        """λ = A⁺ᵀ(Aᵀλ) from the plant's generalized constraint force (module doc), plus the force noise of
        the conditions when ``noisy``."""
        lam = pinv_basis(A)[0].T @ self.constraint_force()     # A⁺ by one thin SVD (rank rule of the model)
        if noisy and self.conditions.force_noise > 0:
            lam = lam + self.conditions.force_noise * self._rng.standard_normal(lam.size)
        return lam

    def measured_qdot(self) -> np.ndarray:
        """q̇ with the velocity noise of the conditions (what a controller reads)."""
        v = self.qdot
        if self.conditions.velocity_noise > 0:
            v = v + self.conditions.velocity_noise * self._rng.standard_normal(v.size)
        return v

    # ------------------------------------------------------------------ stepping and topology
    def set_weld(self, name: str, active: bool, where_it_is: bool = False):
        """Switch a weld (grasp) on or off. ``where_it_is=True`` (a gripper closing): the frame_b site is
        first moved to frame_a's current pose, so the weld holds the pose it finds instead of pulling the
        two frames together; the returned value is the (position, angle) gap it closed over, else None."""
        if name not in self._weld_id:
            raise ModelError(f"unknown weld '{name}'; have {sorted(self._weld_id)}")
        gap = None
        if active and where_it_is:
            gap = self._reseat(self._weld_id[name])
        self.data.eq_active[self._weld_id[name]] = 1 if active else 0
        self.weld_active[name] = bool(active)
        return gap

    def _reseat(self, eq: int) -> tuple[float, float]:
        m, d = self.model, self.data
        mujoco.mj_kinematics(m, d)
        sa, sb = int(m.eq_obj1id[eq]), int(m.eq_obj2id[eq])
        body = int(m.site_bodyid[sb])
        Ra, Rb = d.site_xmat[sa].reshape(3, 3), d.site_xmat[sb].reshape(3, 3)
        gap = (float(np.linalg.norm(d.site_xpos[sa] - d.site_xpos[sb])), float(np.linalg.norm(pin.log3(Ra @ Rb.T))))
        Rbody = d.xmat[body].reshape(3, 3)
        m.site_pos[sb] = Rbody.T @ (d.site_xpos[sa] - d.xpos[body])
        m.site_quat[sb] = _quat_wxyz(Rbody.T @ Ra)
        mujoco.mj_kinematics(m, d)
        return gap

    def step(self, tau, dt: float | None = None) -> None:
        """Apply τ (nv-vector, zero on unactuated DOFs) for ``dt`` (default one physics step)."""
        tau = as_vector("tau", tau, self.pin_model.nv)
        self._advance(tau[self._act_v], dt, forward=False)


__all__ = ["MujocoLoopPlant", "PlantConditions", "mjcf_with_welds"]
