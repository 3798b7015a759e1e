"""Row ``passive_joint_tool``: the planar arm carries its flat tool face on a passive pivot (joint3 has no
motor), presses the face on the table with F_d and traces x 0.6 → 0.7 → 0.6 m; the pivot's motion is
governed through the face's contacts (eq. 56–62: with the face flat, its angle follows the two motors).

Two motors, three joints, three collinear contact rows of rank 2: one motion coordinate (the face's x) and
one controllable force (the total; the split about the pivot is set by τ₃ = 0: the centre of pressure stays
under the pivot). The controllability test (eq. 58/64) passes on the whole path.
* qv: the passive-joint law (``passive``, eq. 56–62) with θ = face_m.x, actuated joint1/joint2, λ_d = F_d/3
  per row (an internal force: zero moment about the pivot) and the force PI on the measured λ.
* osc: operational-space control with the same task (θ = face_m.x), the three contact rows (per-row λ_d and
  measured λ) and the same actuation selection: each tick the contact forces the task leaves free (the moment
  about the pivot) take the pivot's torque, so the command on joint3 is zero (an actuation-consistent OSC).
* osc_tool: the operational-space law of face_m with task rows (x, z), force row z fed the total force; its
  model has a motor on every joint, so the command it computes for the pivot is dropped by the plant (the
  constraint and the passive joint are a disturbance to it). Plain Λ_x (no singular pose on the path).
* impedance: Cartesian impedance of face_m (x; no orientation stiffness: the pivot is not driven) +
  Jacobian-transpose normal force; the pivot's command is dropped likewise.

Judged by MuJoCo (:class:`~qv_dynamics.plants.mujoco_face.MujocoFacePlant` with joint3 passive).
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.state import Reference

from . import common
from .common import PER_ROW, Tick, run_row, smooth_ramp
from .face import FACE, TABLE, face_pose, face_system
from .redundant_contacts import T_HOLD, T_RAMP, T_TRACE, X0, path

FORCE = 10.0
PASSIVE = "joint3"
ACTUATED = ["joint1", "joint2"]
#: F_d/3 per row is internal (zero moment about the pivot) while the pivot is over face_m; as the arm moves the
#: internal direction turns, by up to 1.2e-3 relative on the trace: the law uses λ_d's projection on it (accepted up
#: to 5 %)
INTERNAL_TOL = 0.05


#: the per-scene choices of each law (its keyword arguments; gains, force PI and posture are shared: common.py)
SETUP = {"qv": {"law": "passive", "coordinates": ["face_m.x"], "actuated": ACTUATED, "internal_tol": INTERNAL_TOL},
         "osc": {"coordinates": ["face_m.x"], "actuated": ACTUATED},
         "osc_tool": {"frame": "face_m", "contact": "face_m", "axes": ("x", "z"), "force_axis": "z"},
         "impedance": {"frame": "face_m", "contact": "face_m", "kp_rot": 0.0, "kd_rot": 0.0}}


def tick(t: float, kind: str) -> Tick:
    F = FORCE * smooth_ramp(t, 0.0, T_RAMP)
    x, xd, xdd = path(t)
    p_d = np.array([x, 0.0, TABLE])
    if kind in PER_ROW:
        ref = Reference(theta=np.array([x]), theta_dot=np.array([xd]), theta_ddot=np.array([xdd]),
                        lambda_=np.full(3, -F / 3))
    else:
        ref = Reference(theta=p_d, theta_dot=np.array([xd, 0, 0]), theta_ddot=np.array([xdd, 0, 0]),
                        lambda_=np.array([-F]))
    return Tick(ref, -F, p_d)


def make_law(kind: str, sysm, q0):
    return common.make_law(kind, SETUP[kind], sysm, q0)


def run(kind: str, duration: float | None = None, feedback: str = "rows") -> dict:
    """One run (``duration`` default: ramp, hold and one trace out and back: 2.5 s). ``feedback="total"``: qv and
    osc are fed the plant's total force spread evenly over the three rows instead of each row's λ (the judged
    figure alone, without the moment the pivot's balance sets)."""
    from qv_dynamics.plants.mujoco_face import MujocoFacePlant

    sysm = face_system()
    q0 = face_pose(sysm, X0)
    plant = MujocoFacePlant(sysm, FACE, TABLE, passive=(PASSIVE,))
    plant.reset(q0)

    def measure():
        lam = plant.forces()
        fed = (lam if feedback == "rows" else np.full(3, lam.sum() / 3)) if kind in PER_ROW else np.array([lam.sum()])
        return fed, lam.sum(), plant.site("face_m"), lam

    return run_row("passive_joint_tool", kind, lambda: make_law(kind, sysm, q0), plant, lambda t: tick(t, kind),
                   measure, duration or T_RAMP + T_HOLD + T_TRACE, FORCE, T_RAMP, T_RAMP + T_HOLD)


__all__ = ["SETUP", "run", "tick", "make_law"]
