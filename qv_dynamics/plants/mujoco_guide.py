"""A MuJoCo plant for a Pinocchio tree whose point is held on a straight guide (a slider-crank's slider).

The model's one-row ``point_contact`` ``{frame: F, axes: [n]}`` (the point stays on the plane x_n = c, a
bilateral closure) becomes, in MuJoCo, what the mechanism is: a slider body on a ``slide`` joint along the
guide's direction ``along`` (an axis ⟂ n), at height c, and a ``connect`` equality between a site at F and
the slider. The slider has ``slider_mass`` (default 1 g) with gravity compensation, so the guide's normal
force is the force the pin passes to it. The robot's bodies follow :func:`mjcf_with_welds` (Pinocchio's joint
tree, inertias, motors ± URDF effort; Euler at ``timestep``, 0.25 ms: at 0.5 ms the
force error of an exact law is 6x larger); a body whose inertia is zero (the paper's point
masses) gets ``point_inertia`` on its diagonal, the only departure from the model.

State in Pinocchio conventions: ``q``/``qdot`` are the robot's (the slider's own coordinate is kept
consistent by the equality and hidden); ``step(tau, dt)``; ``lambda_meas(A)`` = A⁺ᵀ(−qfrc_constraint) on the
robot's coordinates (SPEC sign M q̈ + h = τ − Aᵀλ), ``guide_force()`` the normal component of the connect
force (N, what a load cell in the slider reads), ``pin_position()`` the site at F from MuJoCo's kinematics.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError, as_vector
from .mujoco_loops import mjcf_with_welds
from .mujoco_plant import MujocoStepping, compile_mjcf, mujoco, require_mujoco

_AXES = {"x": 0, "y": 1, "z": 2}
#: the guide's impedance: MuJoCo's largest (0.9999), a rail that does not yield (measured: the pin leaves the
#: guide by 4 µm under 10 N at solref 2 ms; 0.4 mm with solimp (0.95, 0.99): that soft guide
#: alone puts 0.26 mm of path error on an exact crank-angle tracking)
GUIDE_SOLIMP = (0.9999, 0.9999, 0.001, 0.5, 2.0)


def mjcf_with_guide(model, frame: str, normal: str = "z", along: str = "x", height: float = 0.0,
                    timestep: float = 0.00025, slider_mass: float = 1e-3, point_inertia: float = 1e-6,
                    solref=(0.002, 1.0), solimp=GUIDE_SOLIMP) -> str:
    """MJCF of the tree plus the slider on its guide (module doc)."""
    if normal not in _AXES or along not in _AXES or normal == along:
        raise ModelError(f"guide: normal and along must be two different axes of x, y, z; got {normal!r}, {along!r}")
    xml = mjcf_with_welds(model, [("guide", frame, model.frames[0].name)], timestep, solref)
    xml = xml.replace('fullinertia="0 0 0 0 0 0"', f'fullinertia="{point_inertia:g} {point_inertia:g} '
                                                   f'{point_inertia:g} 0 0 0"')
    pos = np.zeros(3)
    pos[_AXES[normal]] = height
    ax = np.zeros(3)
    ax[_AXES[along]] = 1.0
    slider = (f'    <body name="slider" pos="{pos[0]:.12g} {pos[1]:.12g} {pos[2]:.12g}" gravcomp="1">\n'
              f'      <joint name="slider_guide" type="slide" axis="{ax[0]:g} {ax[1]:g} {ax[2]:g}" limited="false"/>\n'
              f'      <inertial pos="0 0 0" mass="{slider_mass:.12g}" diaginertia="1e-9 1e-9 1e-9"/>\n'
              '      <site name="slider_site" size="0.005"/>\n    </body>\n  </worldbody>')
    lines = [ln for ln in xml.split("\n") if "<weld " not in ln]
    xml = "\n".join(lines).replace("  </worldbody>", slider, 1)
    imp = " ".join(f"{v:g}" for v in solimp)
    return xml.replace("  <equality>", f'  <equality>\n    <connect name="guide" site1="{frame}" site2="slider_site" '
                                       f'solref="{solref[0]:.12g} {solref[1]:.12g}" solimp="{imp}"/>', 1)


class MujocoGuidePlant(MujocoStepping):
    """MuJoCo twin of a robot whose ``point_contact`` constraint ``name`` is a slider on a guide (module doc)."""

    def __init__(self, system, constraint: str = "slider", along: str = "x", timestep: float = 0.00025,
                 solref=(0.002, 1.0), slider_mass: float = 1e-3, solimp=GUIDE_SOLIMP):
        require_mujoco()
        c = system.constraint(constraint)
        if c.type != "point_contact" or len(c.axes) != 1:
            raise ModelError(f"constraint '{constraint}': the guide plant models a one-axis point_contact")
        self.system, self.pin_model = system, system.model
        self.normal = _AXES[c.axes[0]] if isinstance(c.axes[0], str) else int(c.axes[0])
        height = float(np.asarray(c.position, float)[self.normal])
        self.xml = mjcf_with_guide(system.model, c.frame, "xyz"[self.normal], along, height, timestep,
                                   slider_mass, solref=solref, solimp=solimp)
        self.model, self.data = compile_mjcf(self.xml)
        self._eq = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_EQUALITY, "guide")
        self._site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, c.frame)
        self._along = _AXES[along]
        n = self.pin_model.nv
        if self.model.nv != n + 1:
            raise ModelError(f"MuJoCo guide model has nv={self.model.nv}; expected {n} + the slider")
        self.n = n
        self.effort_limits = self.model.actuator_ctrlrange[:, 1].copy()

    def reset(self, q, qdot=None) -> None:
        """Robot state from Pinocchio's q, q̇; the slider placed under the pin, moving with it."""
        q, qdot = self._reset_data(q, qdot, self.n, self.n)
        self.data.qpos[:self.n], self.data.qvel[:self.n] = q, qdot
        mujoco.mj_kinematics(self.model, self.data)
        self.data.qpos[self.n] = self.data.site_xpos[self._site][self._along]
        mujoco.mj_forward(self.model, self.data)
        mujoco.mj_fwdVelocity(self.model, self.data)
        jac = np.zeros((3, self.model.nv))
        mujoco.mj_jacSite(self.model, self.data, jac, None, self._site)
        self.data.qvel[self.n] = jac[self._along, :self.n] @ qdot
        mujoco.mj_forward(self.model, self.data)

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos[:self.n].copy()

    @property
    def qdot(self) -> np.ndarray:
        return self.data.qvel[:self.n].copy()

    def pin_position(self) -> np.ndarray:
        return self.data.site_xpos[self._site].copy()

    def constraint_force(self) -> np.ndarray:
        """Aᵀλ (SPEC sign) on the robot's coordinates: −qfrc_constraint."""
        return -self.data.qfrc_constraint[:self.n].copy()

    def lambda_meas(self, A: np.ndarray) -> np.ndarray:
        return np.linalg.pinv(np.atleast_2d(A)).T @ self.constraint_force()

    def guide_force(self) -> float:
        """Normal component of the connect force on the robot's pin (N; SPEC λ sign: the multiplier with
        generalized force −Aᵀλ on the robot, i.e. λ = −(force on the pin)·n)."""
        d = self.data
        rows = np.nonzero((d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY) & (d.efc_id == self._eq))[0]
        if rows.size != 3:
            return float("nan")
        return -float(d.efc_force[rows[self.normal]])

    def step(self, tau, dt: float | None = None) -> None:
        tau = as_vector("tau", tau, self.n)
        self._advance(tau, dt)


__all__ = ["MujocoGuidePlant", "mjcf_with_guide"]
