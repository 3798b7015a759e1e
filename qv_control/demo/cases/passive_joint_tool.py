"""Row ``passive_joint_tool``: the planar arm carries its flat tool face on a passive pivot (joint3 has no
motor), presses the face on the table with F_d and traces x 0.6 → 0.7 → 0.6 m; the pivot's motion is
governed through the face's contacts (eq. 56–62: with the face flat, its angle follows the two motors).

Two motors, three joints, three collinear contact rows of rank 2: one motion coordinate (the face's x) and
one controllable force (the total; the split about the pivot is set by τ₃ = 0: the centre of pressure stays
under the pivot). The controllability test (eq. 58/64) passes on the whole path.
* qv: the passive-joint law (``passive``, eq. 56–62) with θ = face_m.x, actuated joint1/joint2, λ_d = F_d/3
  per row (an internal force: zero moment about the pivot) and the force PI on the measured λ.
* osc: the operational-space law of face_m with task rows (x, z), force row z; its model has a motor on
  every joint, so the command it computes for the pivot is dropped by the plant (the constraint and the
  passive joint are a disturbance to it). Plain Λ_x (no singular pose on the path).
* impedance: Cartesian impedance of face_m (x; no orientation stiffness: the pivot is not driven) +
  Jacobian-transpose normal force; the pivot's command is dropped likewise.

Judged by MuJoCo (:class:`~qv_dynamics.plants.mujoco_face.MujocoFacePlant` with joint3 passive).
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.state import Reference

from .common import Tick, run_row, smooth_ramp
from .face import FACE, TABLE, face_pose, face_system
from .redundant_contacts import KD, KF, KI, KP, T_HOLD, T_RAMP, T_TRACE, X0, path

FORCE = 10.0
PASSIVE = "joint3"
ACTUATED = ["joint1", "joint2"]
#: F_d/3 per row is internal (zero moment about the pivot) while the pivot is over face_m; as the arm moves the
#: internal direction turns by ~1e-5 relative: the law uses λ_d's projection on it (accepted up to 5 %)
INTERNAL_TOL = 0.05


def tick(t: float, kind: str) -> Tick:
    F = FORCE * smooth_ramp(t, 0.0, T_RAMP)
    x, xd, xdd = path(t)
    p_d = np.array([x, 0.0, TABLE])
    if kind == "qv":
        ref = Reference(theta=np.array([x]), theta_dot=np.array([xd]), theta_ddot=np.array([xdd]),
                        lambda_=np.full(3, -F / 3))
    else:
        ref = Reference(theta=p_d, theta_dot=np.array([xd, 0, 0]), theta_ddot=np.array([xdd, 0, 0]),
                        lambda_=np.array([-F]))
    return Tick(ref, -F, p_d)


def make_law(kind: str, sysm, q0):
    if kind == "qv":
        from qv_control.laws.passive import PassiveJointLaw

        return PassiveJointLaw(sysm, ["face_m.x"], actuated=ACTUATED, kp=KP * KD, kd=KP + KD, kf=KF, ki=KI, q0=q0,
                               internal_tol=INTERNAL_TOL)
    if kind == "osc":
        from qv_control.laws.osc import OperationalSpaceLaw

        return OperationalSpaceLaw(sysm, frame="face_m", contact="face_m", force_axis=2, kp=KP, kd=KD, kf=KF, ki=KI,
                                   q_null=q0, axes=(0, 2))
    if kind == "impedance":
        from qv_control.laws.impedance import ImpedanceForceBaseline

        return ImpedanceForceBaseline(sysm, frame="face_m", contact="face_m", kp_rot=0.0, kd_rot=0.0, force_ki=KI,
                                      q_null=q0)
    raise ValueError(f"unknown controller {kind!r}")


def run(kind: str, duration: float | None = None) -> dict:
    """One run (``duration`` default: ramp, hold and one trace out and back: 2.5 s)."""
    from qv_dynamics.plants.mujoco_face import MujocoFacePlant

    sysm = face_system()
    q0 = face_pose(sysm, X0)
    plant = MujocoFacePlant(sysm, FACE, TABLE, passive=(PASSIVE,))
    plant.reset(q0)

    def measure():
        lam = plant.forces()
        return (lam if kind == "qv" else np.array([lam.sum()])), lam.sum(), plant.site("face_m"), lam

    return run_row("passive_joint_tool", kind, lambda: make_law(kind, sysm, q0), plant, lambda t: tick(t, kind),
                   measure, duration or T_RAMP + T_HOLD + T_TRACE, FORCE, T_RAMP, T_RAMP + T_HOLD)


__all__ = ["run", "tick", "make_law"]
