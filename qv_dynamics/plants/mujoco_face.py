"""A MuJoCo plant for a Pinocchio tree touching a table with several point contacts (a flat tool face).

Each contact frame of the model (``point_contact`` rows along z) gets a sphere of ``radius`` whose lowest point
is the frame (centre ``radius`` above it along the frame's own ``-normal_local`` axis); the table is a plane
at ``table_height``. Contacts are frictionless (``condim = 1``: the face slides; MuJoCo's soft contact with
friction bounces a sliding contact open loop) and stiff (``solimp`` 0.99/0.999, ``solref`` 2 ms). Robot bodies
follow :func:`~qv_dynamics.plants.mujoco_loops.mjcf_with_welds` (Pinocchio's tree, inertias, motors ±
URDF effort), Euler at ``timestep``.

Joints listed in ``passive`` have no motor: ``step`` applies τ on the actuated joints only (a command for a
passive joint is dropped, as the hardware would). ``forces()``: the normal force of each contact sphere on the
table, as the SPEC multiplier of its z row (M q̈ + h = τ − Aᵀλ: the table pushing up by f gives λ = −f), 0 for a
sphere not touching.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ModelError, as_vector
from .mujoco_loops import mjcf_with_welds
from .mujoco_plant import MujocoStepping, compile_mjcf, mujoco, require_mujoco


def mjcf_with_face(model, frames: Sequence[str], table_height: float, radius: float = 0.005,
                   center_local=(-1.0, 0.0, 0.0), timestep: float = 0.00025, solref=(0.002, 1.0),
                   solimp=(0.99, 0.999, 0.001, 0.5, 2.0), passive: Sequence[str] = ()) -> str:
    """MJCF of the tree, one sphere per contact frame (centre ``radius`` along ``center_local`` of the frame),
    a frictionless table plane at ``table_height``; the joints in ``passive`` get no motor."""
    xml = mjcf_with_welds(model, [], timestep)
    for j in passive:
        if not model.existJointName(j):
            raise ModelError(f"passive joint '{j}' is not in the model")
        xml = "\n".join(ln for ln in xml.split("\n") if f'<motor name="{j}_motor"' not in ln)
    c = np.asarray(center_local, float)
    c = c / np.linalg.norm(c)
    for fr in frames:
        if not model.existFrame(fr):
            raise ModelError(f"contact frame '{fr}' is not in the model")
        f = model.frames[model.getFrameId(fr)]
        p = f.placement.translation + f.placement.rotation @ (radius * c)
        body = f'<body name="{model.names[f.parentJoint]}_body"'
        geom = (f'<geom name="{fr}" type="sphere" size="{radius:.12g}" pos="{p[0]:.12g} {p[1]:.12g} {p[2]:.12g}" '
                f'condim="1" solref="{solref[0]:g} {solref[1]:g}" solimp="{" ".join(f"{v:g}" for v in solimp)}" '
                'mass="0" contype="1" conaffinity="1"/>')
        head, sep, tail = xml.partition(body)
        line_end = tail.index("\n")
        xml = head + sep + tail[:line_end] + "\n" + " " * 8 + geom + tail[line_end:]
    table = (f'    <geom name="table" type="plane" size="5 5 0.1" pos="0 0 {table_height:.12g}" condim="1" '
             f'contype="1" conaffinity="1"/>\n  </worldbody>')
    xml = xml.replace("  </worldbody>", table, 1).replace("  <equality>\n  </equality>\n", "")
    return xml.replace('<option timestep', '<option cone="elliptic" timestep', 1)


class MujocoFacePlant(MujocoStepping):
    """MuJoCo twin of a robot whose z point contacts ``constraints`` are spheres on a table (module doc)."""

    def __init__(self, system, constraints: Sequence[str], table_height: float, radius: float = 0.005,
                 center_local=(-1.0, 0.0, 0.0), timestep: float = 0.00025, solref=(0.002, 1.0),
                 passive: Sequence[str] = ()):
        require_mujoco()
        self.system, self.pin_model = system, system.model
        frames = [system.constraint(c).frame for c in constraints]
        self.xml = mjcf_with_face(system.model, frames, table_height, radius, center_local, timestep, solref,
                                  passive=passive)
        self.model, self.data = compile_mjcf(self.xml)
        self._geoms = [mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, f) for f in frames]
        self.n = self.pin_model.nv
        if self.model.nv != self.n:
            raise ModelError(f"MuJoCo face model has nv={self.model.nv}; Pinocchio {self.n}")
        pm = self.pin_model
        self._act_v = np.array([pm.joints[pm.getJointId(nm)].idx_v for nm in pm.names[1:] if nm not in passive], int)
        #: per velocity: the motor's limit, inf on a passive joint (whatever is commanded there is not applied)
        self.effort_limits = np.full(self.n, np.inf)
        self.effort_limits[self._act_v] = self.model.actuator_ctrlrange[:, 1]

    def reset(self, q, qdot=None) -> None:
        q, qdot = self._reset_data(q, qdot, self.n, self.n)
        self.data.qpos[:], self.data.qvel[:] = q, qdot
        mujoco.mj_forward(self.model, self.data)

    @property
    def q(self) -> np.ndarray:
        return self.data.qpos.copy()

    @property
    def qdot(self) -> np.ndarray:
        return self.data.qvel.copy()

    def forces(self) -> np.ndarray:
        """λ of each contact row (SPEC sign: −normal force), 0 where the sphere does not touch."""
        lam = np.zeros(len(self._geoms))
        f6 = np.zeros(6)
        for i in range(self.data.ncon):
            con = self.data.contact[i]
            for k, g in enumerate(self._geoms):
                if g in (con.geom1, con.geom2):
                    mujoco.mj_contactForce(self.model, self.data, i, f6)
                    lam[k] -= f6[0]
        return lam

    def site(self, frame: str) -> np.ndarray:
        """World position of a model frame from the plant's state (Pinocchio kinematics at the plant's q)."""
        import pinocchio as pin

        m, d = self.pin_model, self.system.data
        pin.framesForwardKinematics(m, d, self.q)
        return d.oMf[m.getFrameId(frame)].translation.copy()

    def step(self, tau, dt: float | None = None) -> None:
        self._advance(as_vector("tau", tau, self.n)[self._act_v], dt)


__all__ = ["MujocoFacePlant", "mjcf_with_face"]
