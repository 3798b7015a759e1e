"""A MuJoCo plant built from the same URDF as the Pinocchio model, plus a table scene; the MJCF and
the modelling choices are in :mod:`qv_dynamics.plants.mujoco_scene`.

Sign conventions: :meth:`MujocoPlant.contact_force_world` is the force the table exerts **on** the tool,
in world axes (pressing down on the table gives +z). With the SPEC's ``M q̈ + h = τ − Aᵀλ`` and the
constraint row A = ∂z_tool/∂q, the multiplier is ``λ = −F_z`` (:meth:`lambda_z`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pinocchio as pin

from ..errors import DimensionError, ModelError, as_vector
from .mujoco_scene import SceneConfig, mjcf_from_pinocchio
from .table_plant import TablePlant

try:  # mujoco is a run-time dependency of this module only
    import mujoco
except ImportError as exc:  # pragma: no cover - reported when the module is used
    mujoco = None
    _IMPORT_ERROR = exc
else:
    _IMPORT_ERROR = None


def require_mujoco() -> None:
    """ModelError when MuJoCo is not installed (it is a run-time dependency of the plants only)."""
    if mujoco is None:  # pragma: no cover
        raise ModelError(f"mujoco is not installed ({_IMPORT_ERROR}); `pip install mujoco`")


def compile_mjcf(xml: str):
    """(MjModel, MjData) of a generated MJCF; ModelError when MuJoCo is missing or rejects the model."""
    require_mujoco()
    try:
        model = mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        raise ModelError(f"MuJoCo rejected the generated model: {exc}") from None
    return model, mujoco.MjData(model)


class MujocoStepping:
    """What the MuJoCo plants share: the clock, resetting ``data`` and stepping whole physics steps."""

    model: "mujoco.MjModel"
    data: "mujoco.MjData"

    @property
    def time(self) -> float:
        return float(self.data.time)

    def _pin_model(self, system_or_model) -> pin.Model:
        """The Pinocchio model of a ConstrainedSystem or a pinocchio.Model (ModelError otherwise)."""
        require_mujoco()
        pmodel = getattr(system_or_model, "model", system_or_model)
        if not isinstance(pmodel, pin.Model):
            raise ModelError(f"{type(self).__name__} needs a ConstrainedSystem or a pinocchio.Model")
        return pmodel

    def _compile(self, pmodel: pin.Model, scene, scene_cls: type, to_mjcf: Callable) -> None:
        """scene (a ``scene_cls``, or its dict), the MJCF ``to_mjcf(pmodel, scene)``, the MuJoCo model and data,
        the actuators' effort limits (ctrlrange), and the contact-force buffer and last applied τ."""
        self.scene = scene if isinstance(scene, scene_cls) else scene_cls.from_dict(scene)
        self.pin_model = pmodel
        self.xml = to_mjcf(pmodel, self.scene)
        self.model, self.data = compile_mjcf(self.xml)
        self.effort_limits = np.array([self.model.actuator_ctrlrange[i, 1] for i in range(self.model.nu)])
        self._c6 = np.zeros(6)
        self.last_tau = np.zeros(pmodel.nv)

    def _reset_data(self, q, qdot, nq: int, nv: int) -> tuple[np.ndarray, np.ndarray]:
        """Checked (q, q̇) (q̇ = 0 when None) after ``mj_resetData``."""
        q = as_vector("q", q, nq)
        qdot = np.zeros(nv) if qdot is None else as_vector("qdot", qdot, nv)
        mujoco.mj_resetData(self.model, self.data)
        return q, qdot

    def _advance(self, ctrl: np.ndarray, dt: float | None, forward: bool = True) -> None:
        """Hold ``ctrl`` for ``dt`` rounded to whole timesteps (default and at least one); with ``forward``,
        ``mj_forward`` after, so sensors / contacts / site positions match the new state."""
        self.data.ctrl[:] = ctrl
        k = 1 if dt is None else max(1, int(round(float(dt) / self.model.opt.timestep)))
        for _ in range(k):
            mujoco.mj_step(self.model, self.data)
        if forward:
            mujoco.mj_forward(self.model, self.data)


class MujocoPlant(MujocoStepping, TablePlant):
    """MuJoCo plant mirroring a :class:`~qv_dynamics.model.ConstrainedSystem`'s robot, with a table.

    ``step(tau, dt)`` applies joint torques (clipped to the URDF effort limits by MuJoCo's ctrlrange)
    for ``dt`` seconds; ``q``, ``qdot``, ``time``, ``tool_position``, ``contact_force_world``,
    ``sensor_wrench`` read the state."""

    def __init__(self, system_or_model, scene: SceneConfig | dict | None = None):
        pmodel = self._pin_model(system_or_model)
        if pmodel.nq != pmodel.nv:
            raise ModelError("MujocoPlant supports fixed-base robots with 1-DoF joints only")
        self._compile(pmodel, scene, SceneConfig, mjcf_from_pinocchio)
        self.joint_names = [pmodel.names[j] for j in range(1, pmodel.njoints)]
        self.n = self.model.nv
        self._tip = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "tool_tip")
        self._table = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "table_top")
        self._site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, "tool_site")
        self._tool_body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "tool")
        self._sadr = {nm: self.model.sensor_adr[mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SENSOR, nm)]
                      for nm in ("tool_force", "tool_torque")}

    # ------------------------------------------------------------------ state
    def reset(self, q, qdot=None) -> None:
        q, qdot = self._reset_data(q, qdot, self.n, self.n)
        self.data.mocap_pos[0, 2] = self.scene.table_height - self.scene.table_thickness / 2
        self.data.qpos[:] = q
        self.data.qvel[:] = qdot
        mujoco.mj_forward(self.model, self.data)

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos.copy()

    @property
    def qdot(self) -> np.ndarray:
        return self.data.qvel.copy()

    @property
    def tool_position(self) -> np.ndarray:
        """World position of the tool point (centre of the tip sphere, the Pinocchio tool frame)."""
        return self.data.site_xpos[self._site].copy()

    @property
    def tool_velocity(self) -> np.ndarray:
        v = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, self.data, mujoco.mjtObj.mjOBJ_SITE, self._site, v, 0)
        return v[3:].copy()

    @property
    def table_height(self) -> float:
        return float(self.data.mocap_pos[0, 2] + self.scene.table_thickness / 2)

    def set_table_height(self, z: float) -> None:
        """Move the table top to height z (e.g. lower by 5 mm mid-run to cause a contact loss)."""
        self.data.mocap_pos[0, 2] = float(z) - self.scene.table_thickness / 2

    # ------------------------------------------------------------------ forces
    def contact_force_world(self) -> np.ndarray:
        """Total force the table exerts on the tool tip, world axes (from ``mj_contactForce``)."""
        f = np.zeros(3)
        d = self.data
        for i in range(d.ncon):
            c = d.contact[i]
            g1, g2 = c.geom1, c.geom2
            if {g1, g2} != {self._tip, self._table}:
                continue
            mujoco.mj_contactForce(self.model, d, i, self._c6)
            frame = c.frame.reshape(3, 3)          # rows: normal, tangent1, tangent2 (world)
            fw = frame.T @ self._c6[:3]            # force on geom2 from geom1... see sign below
            # mj_contactForce returns the force geom1 exerts on geom2 (normal points from geom1 to geom2)
            f += fw if g2 == self._tip else -fw
        return f

    def in_contact(self) -> bool:
        d = self.data
        return any({d.contact[i].geom1, d.contact[i].geom2} == {self._tip, self._table} for i in range(d.ncon))

    def sensor_wrench(self) -> np.ndarray:
        """F/T sensor reading at the tool site (force, torque) in the **site** frame, MuJoCo convention
        (the force the parent side exerts on the tool body; with the massless tool body this is minus
        the contact wrench)."""
        a, b = self._sadr["tool_force"], self._sadr["tool_torque"]
        return np.concatenate([self.data.sensordata[a:a + 3], self.data.sensordata[b:b + 3]]).copy()

    def tool_wrench_world(self) -> np.ndarray:
        """The external (contact) wrench on the tool, world axes, at the tool point, from the F/T sensor."""
        R = self.data.site_xmat[self._site].reshape(3, 3)
        w = self.sensor_wrench()
        return np.concatenate([-R @ w[:3], -R @ w[3:]])

    def tool_rotation(self) -> np.ndarray:
        return self.data.site_xmat[self._site].reshape(3, 3).copy()

    # ------------------------------------------------------------------ stepping
    def step(self, tau, dt: float | None = None) -> None:
        """Apply joint torques τ (clipped to ± effort limit by MuJoCo) for ``dt`` (default one timestep)."""
        tau = as_vector("tau", tau, self.n)
        self.last_tau = np.clip(tau, -self.effort_limits, self.effort_limits)
        self._advance(tau, dt)

    # ------------------------------------------------------------------ free-motion dynamics (reference)
    def mass_matrix(self, q) -> np.ndarray:
        """MuJoCo's joint-space inertia M(q) (``mj_fullM``), for comparison with Pinocchio's CRBA."""
        q = as_vector("q", q, self.n)
        d = mujoco.MjData(self.model)
        d.qpos[:] = q
        mujoco.mj_forward(self.model, d)
        M = np.zeros((self.n, self.n))
        if hasattr(d, "qM"):  # mujoco 3.x: mj_fullM(m, dst, qM)
            mujoco.mj_fullM(self.model, M, d.qM)
        else:                 # mujoco >= 4: mj_fullM(m, d, dst)
            mujoco.mj_fullM(self.model, d, M)
        return M

    def bias_forces(self, q, qdot) -> np.ndarray:
        """MuJoCo's C(q,q̇)q̇ + g(q) (``qfrc_bias``), for comparison with Pinocchio's RNEA(q, q̇, 0)."""
        q = as_vector("q", q, self.n)
        qdot = as_vector("qdot", qdot, self.n)
        d = mujoco.MjData(self.model)
        d.qpos[:] = q
        d.qvel[:] = qdot
        mujoco.mj_forward(self.model, d)
        return d.qfrc_bias.copy()

    def free_acceleration(self, q, qdot, tau) -> np.ndarray:
        """q̈ of the free robot (table far away) under τ: MuJoCo's forward dynamics (no contact)."""
        q = as_vector("q", q, self.n)
        qdot = as_vector("qdot", qdot, self.n)
        tau = as_vector("tau", tau, self.n)
        d = mujoco.MjData(self.model)
        d.mocap_pos[0, 2] = -100.0
        d.qpos[:] = q
        d.qvel[:] = qdot
        d.ctrl[:] = tau
        mujoco.mj_forward(self.model, d)
        return d.qacc.copy()


def check_joint_order(plant: MujocoPlant, names: Sequence[str]) -> None:
    if list(names) != plant.joint_names:
        raise DimensionError(f"joint order {list(names)} differs from the plant's {plant.joint_names}")
