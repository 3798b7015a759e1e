"""Row ``singular_pass``: a two-prong tool whose two contact rows become one on the path. The planar 3-link
arm presses its tip (``face_m``, the end of link 3) and a second prong (``finger``, a rigid bracket on link 2
hanging beside link 3, side by side in y) on the table while the tip traces x 0.6 → 0.7 → 0.6 m. At x = X_STAR
the two prongs meet (link 3 vertical, the finger's point on the tip's): the rows A_tip = A_finger, rank 2 → 1
→ 2 twice per run (σ_min(A) 0.04 at the start, 0 at X_STAR), and the split of the load between the prongs
does no work there (λ = (1, −1) spans N(Aᵀ)) while the total stays in the row space that remains.

* qv: the projection hybrid law (``pidc_force``, eq. 54) with θ = face_m.x and λ_d = (−F/2, −F/2) (the
  minimum-norm split of F, in the surviving row space at X_STAR); its force loop acts on F = Aᵀλ. Below the
  rank floor its motion channel drops the vanishing row and moves along the tangent carried from the last
  full-rank tick (:mod:`qv_control.laws.projection_base`).
* osc: operational-space control with the same task (θ = face_m.x), both prongs' rows (per-row λ_d and
  measured λ) and the same rank decision and carried tangent (:mod:`qv_control.laws.osc_constrained`).
* osc_tool: the operational-space law of the tip (task rows x, z; force axis z fed the plant's total force);
  its single-frame task cannot express the finger's row, which it meets as a disturbance.
* impedance: Cartesian impedance of the tip (x) + Jacobian-transpose normal force on the total.

Judged by MuJoCo (:class:`~qv_dynamics.plants.mujoco_face.MujocoFacePlant`: a frictionless stiff sphere per
prong on the table plane; link 2 and link 3 do not collide): the total normal force against F, both prongs
pressing (neither lifts off), the tip's path.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from qv_dynamics.state import Reference

from . import common
from .common import PER_ROW, Tick, cosine_stroke, run_row, smooth_ramp
from .face import TABLE, face_pose, face_system, face_urdf

FORCE = 10.0             # N total normal force (both prongs)
X_STAR = 0.65            # m, tip x where the prongs meet (rank 1)
X0, STROKE = 0.6, 0.1    # m, start and length of the trace (through X_STAR out and back)
T_RAMP, T_HOLD, T_TRACE = 0.3, 0.2, 2.0
ROWS = ("face_m", "finger")
#: the rank floor both laws take here is the library's default, 1.5 % of the model's reach: 0.0225 m
#: (:func:`qv_control.laws.projection_base.default_rank_atol`). Measured over the row, without a lift-off: qv for
#: floors of 0.015-0.03 m, osc for 0.02-0.03 m; with the bare floor (``rank_atol=0``) both lose the task (qv 89.7 %,
#: 13.7 mm; osc 101 %, 1.9 mm, |τ| at the limit)
#: the per-scene choices of each law (its keyword arguments; gains, force PI and posture are shared: common.py)
SETUP = {"qv": {"coordinates": ["face_m.x"]},
         "osc": {"coordinates": ["face_m.x"]},
         "osc_tool": {"frame": "face_m", "contact": "face_m", "axes": ("x", "z"), "force_axis": "z"},
         "impedance": {"frame": "face_m", "contact": "face_m"}}


def fork_system():
    """ConstrainedSystem of the arm with z point contacts at the tip and at the finger: the finger frame is on
    link 2 where the tip is when link 3 hangs vertically with the tip at (X_STAR, TABLE), oriented as link 3."""
    import pinocchio as pin

    from qv_dynamics.model import ConstrainedSystem

    tip = face_system(("face_m",))
    m, d = tip.model, tip.data
    pin.framesForwardKinematics(m, d, face_pose(tip, X_STAR))
    rel = d.oMi[m.getJointId("joint2")].inverse() * d.oMf[m.getFrameId("face_m")]
    t, rpy = rel.translation, pin.rpy.matrixToRpy(rel.rotation)
    extra = ('  <joint name="finger_joint" type="fixed"><parent link="link2"/><child link="finger"/>'
             f'<origin xyz="{t[0]:.15g} {t[1]:.15g} {t[2]:.15g}" rpy="{rpy[0]:.15g} {rpy[1]:.15g} {rpy[2]:.15g}"/>'
             '</joint>\n  <link name="finger"/>\n')
    xml = face_urdf().replace("  <ros2_control", extra + "  <ros2_control", 1)
    cons = [{"type": "point_contact", "name": nm, "frame": nm, "axes": ["z"], "position": [0.0, 0.0, TABLE]}
            for nm in ROWS]
    return ConstrainedSystem.from_urdf(xml, cons)


def fork_pose(system, x: float) -> np.ndarray:
    """q with the tip at (x, TABLE) and the finger on the table, on the branch through X_STAR where the prongs
    pass each other (link 3 tilts by ≈ −2.1 (x − X_STAR) rad; the other branch keeps them together)."""
    import pinocchio as pin

    m, d = system.model, system.data
    tip, fin = m.getFrameId("face_m"), m.getFrameId("finger")

    def res(q):
        pin.framesForwardKinematics(m, d, q)
        return [d.oMf[tip].translation[0] - x, d.oMf[tip].translation[2] - TABLE, d.oMf[fin].translation[2] - TABLE]

    guess = face_pose(system, x, tilt=-2.1 * (x - X_STAR))
    return least_squares(res, guess, xtol=1e-15, ftol=1e-15, gtol=1e-15).x


def path(t: float) -> tuple[float, float, float]:
    """The tool's x, ẋ, ẍ: at rest until the ramp and hold end, then one cosine stroke a trace period."""
    return cosine_stroke(t - T_RAMP - T_HOLD, X0, STROKE, T_TRACE)


def tick(t: float, kind: str, force: float = FORCE) -> Tick:
    F = force * smooth_ramp(t, 0.0, T_RAMP)
    x, xd, xdd = path(t)
    p_d = np.array([x, 0.0, TABLE])
    if kind in PER_ROW:
        ref = Reference(theta=np.array([x]), theta_dot=np.array([xd]), theta_ddot=np.array([xdd]),
                        lambda_=np.full(2, -F / 2))
    else:
        ref = Reference(theta=p_d, theta_dot=np.array([xd, 0, 0]), theta_ddot=np.array([xdd, 0, 0]),
                        lambda_=np.array([-F]))
    return Tick(ref, -F, p_d)


def make_law(kind: str, sysm, q0, rank_atol: float | None = None):
    """The law of ``kind`` (SETUP); ``rank_atol`` (qv and osc) in place of the library's default floor."""
    setup = dict(SETUP[kind])
    if kind in PER_ROW and rank_atol is not None:
        setup["rank_atol"] = rank_atol
    return common.make_law(kind, setup, sysm, q0)


def run(kind: str, duration: float | None = None, rank_atol: float | None = None,
        force: float = FORCE) -> dict:
    """One run (``duration`` default 2.5 s: ramp, hold, one trace through X_STAR and back); ``rank_atol``:
    qv's rank floor (None: the library default), ``force``: the commanded total (figures stay relative to
    FORCE)."""
    from qv_dynamics.plants.mujoco_face import MujocoFacePlant

    sysm = fork_system()
    q0 = fork_pose(sysm, X0)
    plant = MujocoFacePlant(sysm, ROWS, TABLE)
    plant.reset(q0)

    def measure():
        lam = plant.forces()                          # the two prongs' λ (SPEC sign, pressing < 0)
        fed = lam if kind in PER_ROW else np.array([lam.sum()])
        return fed, lam.sum(), plant.site("face_m"), lam

    return run_row("singular_pass", kind, lambda: make_law(kind, sysm, q0, rank_atol), plant,
                   lambda t: tick(t, kind, force), measure, duration or T_RAMP + T_HOLD + T_TRACE, FORCE, T_RAMP,
                   T_RAMP + T_HOLD)


__all__ = ["SETUP", "run", "tick", "make_law", "fork_system", "fork_pose", "X_STAR", "ROWS"]
