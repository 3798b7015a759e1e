"""Row ``redundant_contacts``: a flat tool face on the table modelled as three point contacts in a line
(``face_a``, ``face_m``, ``face_b``: three z rows of rank 2 — linearly dependent), pressing a total force
F_d with a commanded moment M_d about the face centre while the face traces x 0.6 → 0.7 → 0.6 m.

The planar 3-link arm (3 joints, all actuated) has one free coordinate in contact (the face's x); the two
independent constraint directions (normal force, moment about y) are both force-controlled.
* qv: the projection hybrid law (``pidc_force``, eq. 54) with θ = face_m.x and λ_d of the three rows, the
  minimum-norm split of (F_d, M_d); its force loop acts on F = Aᵀλ, which is the same for every split of the
  load among dependent rows (the plant decides the split).
* osc: operational-space control with the same task (θ = face_m.x) and the three contact rows (per-row λ_d,
  the same minimum-norm split, and the measured λ of each row): the rows' row space (rank 2) is its force
  space, plain Λ_x.
* osc_tool: the operational-space law of face_m, task rows (x, z, ry), force rows z and ry (λ_d = (−F_d, M_d),
  measured from the plant's total force and moment), the plain Λ_x (no singular pose on the path).
* impedance: Cartesian impedance of face_m (x and orientation) + Jacobian-transpose normal force; it has
  no moment command (its orientation stiffness holds the face level).

Judged by MuJoCo (:class:`~qv_dynamics.plants.mujoco_face.MujocoFacePlant`, frictionless stiff spheres on a
plane: the static press splits 10 N into 3.33 N per contact to 1e-5 N open loop). The judged wrench is
(total force, moment ÷ HALF), so a moment error of 0.01 N·m weighs as 0.25 N.
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.state import Reference

from . import common
from .common import PER_ROW, Tick, cosine_stroke, run_row, smooth_ramp
from .face import FACE, HALF, TABLE, face_pose, face_system

FORCE = 10.0             # N total normal force
MOMENT = 0.1             # N·m about +y at face_m (centre of pressure 1 cm towards +x)
X0, STROKE = 0.6, 0.1    # m, start and length of the trace
T_RAMP, T_HOLD, T_TRACE = 0.3, 0.2, 2.0
#: the per-scene choices of each law (its keyword arguments; gains, force PI and posture are shared: common.py).
#: osc_tool: no singular pose on this path, the plain Λ_x. The damped inverse costs this task its accuracy: constant
#: δ = 0.2 (J M⁻¹ Jᵀ's σ are in 1/kg and 1/(kg m²)) 23 % wrench error and 6.8 mm; δ₀ = 0.2 within 0.1σ₁ (the unit
#: spread puts the moment row inside the band) 68 % and 61 mm
SETUP = {"qv": {"coordinates": ["face_m.x"]},
         "osc": {"coordinates": ["face_m.x"]},
         "osc_tool": {"frame": "face_m", "contact": "face_m", "axes": ("x", "z", "ry"), "force_axis": "z",
                      "moment_axes": ("ry",)},
         "impedance": {"frame": "face_m", "contact": "face_m"}}
#: the impedance baseline has no moment channel: its orientation stiffness holds the face level
NO_MOMENT = "cannot express the commanded moment (no moment channel)"
#: the moment arms (x_i − x_m) of the three rows while the face is level
ARMS = np.array([-HALF, 0.0, HALF])


def split(F: float, M: float) -> np.ndarray:
    """Minimum-norm upward contact forces f (3,) with Σf = F, Σ arm·f = M."""
    S = np.vstack([np.ones(3), ARMS])
    return np.linalg.pinv(S) @ np.array([F, M])


def path(t: float) -> tuple[float, float, float]:
    """The tool's x, ẋ, ẍ: at rest until the ramp and hold end, then one cosine stroke a trace period."""
    return cosine_stroke(t - T_RAMP - T_HOLD, X0, STROKE, T_TRACE)


def tick(t: float, kind: str) -> Tick:
    r = smooth_ramp(t, 0.0, T_RAMP)
    F, M = FORCE * r, MOMENT * r
    x, xd, xdd = path(t)
    p_d = np.array([x, 0.0, TABLE])
    judged = np.array([-F, M / HALF])
    if kind in PER_ROW:
        ref = Reference(theta=np.array([x]), theta_dot=np.array([xd]), theta_ddot=np.array([xdd]),
                        lambda_=-split(F, M))
    else:
        ref = Reference(theta=p_d, theta_dot=np.array([xd, 0, 0]), theta_ddot=np.array([xdd, 0, 0]),
                        lambda_=np.array([-F, M]))
    return Tick(ref, judged, p_d)


def make_law(kind: str, sysm, q0):
    return common.make_law(kind, SETUP[kind], sysm, q0)


def run(kind: str, duration: float | None = None) -> dict:
    """One run (``duration`` default: ramp, hold and one trace out and back: 2.5 s)."""
    from qv_dynamics.plants.mujoco_face import MujocoFacePlant

    sysm = face_system()
    q0 = face_pose(sysm, X0)
    plant = MujocoFacePlant(sysm, FACE, TABLE)
    plant.reset(q0)

    def measure():
        lam = plant.forces()                          # the three rows' λ (SPEC sign, pressing < 0)
        F, M = -lam.sum(), float(ARMS @ -lam)
        fed = lam if kind in PER_ROW else np.array([-F, M])
        return fed, np.array([-F, M / HALF]), plant.site("face_m"), lam

    out = run_row("redundant_contacts", kind, lambda: make_law(kind, sysm, q0), plant, lambda t: tick(t, kind),
                  measure, duration or T_RAMP + T_HOLD + T_TRACE, FORCE, T_RAMP, T_RAMP + T_HOLD)
    if kind == "impedance" and not out["figures"]["failed"]:
        out["figures"]["failed"] = NO_MOMENT           # its figures are kept: the moment it ends with
    return out


__all__ = ["SETUP", "run", "tick", "split", "make_law"]
