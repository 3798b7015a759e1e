"""Row ``closed_chain_force``: the paper's slider-crank (urdf/slider_crank.urdf, both joints actuated)
presses its slider onto the guide with λ_d while the crank swings 0.5 → −0.5 → 0.5 rad, through the outer
dead centre q₁ = 0 twice (crank and rod aligned, the slider at x = 2l).

At the dead centre the pin's 2×2 Jacobian (x, z) loses rank: the slider's x cannot move to first order, and
x = 2l·cos θ cannot tell +θ from −θ. The crank angle θ is the coordinate that stays regular.
* qv: the projection hybrid law (``pidc_force``, eq. 54) with θ = the crank angle: A = ∂z_C/∂q keeps rank
  1 there and JN ≠ 0, so nothing in the law is singular.
* osc: operational-space control with the same task (θ = the crank angle) and the guide row as its force
  direction (x = (θ, z_C), J = [e₁ᵀ; A], square and regular through the dead centre); plain Λ_x.
* osc_tool: the operational-space law of the pin frame with task rows (x, z) — the guide normal as its force
  axis, the slider's x as its motion axis, x_d(t) = 2l cos θ_d; Λ_x by the damped pseudo-inverse of the ROS 2
  examples (δ₀ = 0.2), switched on near the singularity (:func:`qv_control.laws.osc.damped_inverse`).
  Measured over the row: 12.9 %, 2.9 mm, |τ| at the limit; undamped 3.2 %; a constant δ = 0.2 stalls 25 mm
  short of the dead centre (lost the task).
* impedance: Cartesian impedance of the pin (x) + Jacobian-transpose force along z, the same force integral.

Judged by MuJoCo (:class:`~qv_dynamics.plants.mujoco_guide.MujocoGuidePlant`: a slider on a slide joint
held to the pin by a ``connect`` equality; the guide force is the connect force, a load cell's reading).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from qv_dynamics.state import Reference

from . import common
from .common import PER_ROW, Tick, run_row, smooth_ramp

MODEL = Path(__file__).resolve().parents[3] / "config" / "slider_crank_model.yaml"
L = 0.3                  # m, crank and rod length
THETA0 = 0.5             # rad, start and turning point of the swing
FORCE = 10.0             # N pressed onto the guide (λ_d = −FORCE: the pin pushes down)
T_RAMP, T_HOLD, T_SWING = 0.3, 0.2, 1.0   # force ramp, hold, half period of the swing (s)
#: the per-scene choices of each law (its keyword arguments; gains, force PI and posture are shared: common.py)
SETUP = {"qv": {"coordinates": ["crank_joint"]},
         "osc": {"coordinates": ["crank_joint"]},
         "osc_tool": {"frame": "slider_pin", "contact": "slider", "axes": ("x", "z"), "force_axis": "z",
                      "damping": 0.2},
         "impedance": {"frame": "slider_pin", "contact": "slider", "kp_rot": 0.0, "kd_rot": 0.0}}


def system():
    from qv_dynamics.model import ConstrainedSystem

    return ConstrainedSystem.from_yaml(str(MODEL))


def crank(t: float, centre: float = 0.0, amp: float = THETA0) -> tuple[float, float, float]:
    """θ_d, θ̇_d, θ̈_d: hold centre + amp, then centre + amp·cos(π s / T_SWING) for s = t − T_RAMP − T_HOLD ≥ 0."""
    s = t - T_RAMP - T_HOLD
    if s <= 0:
        return centre + amp, 0.0, 0.0
    w = math.pi / T_SWING
    return (centre + amp * math.cos(w * s), -amp * w * math.sin(w * s), -amp * w * w * math.cos(w * s))


def tick(t: float, kind: str, centre: float = 0.0, amp: float = THETA0, force: float = FORCE) -> Tick:
    th, thd, thdd = crank(t, centre, amp)
    lam = -force * smooth_ramp(t, 0.0, T_RAMP)
    x, xd = 2 * L * math.cos(th), -2 * L * math.sin(th) * thd
    xdd = -2 * L * (math.cos(th) * thd * thd + math.sin(th) * thdd)
    p_d = np.array([x, 0.0, 0.0])
    if kind in PER_ROW:
        ref = Reference(theta=np.array([th]), theta_dot=np.array([thd]), theta_ddot=np.array([thdd]),
                        lambda_=np.array([lam]))
    else:
        ref = Reference(theta=p_d, theta_dot=np.array([xd, 0.0, 0.0]), theta_ddot=np.array([xdd, 0.0, 0.0]),
                        lambda_=np.array([lam]))
    return Tick(ref, lam, p_d)


def make_law(kind: str, sysm, q0, rank_atol: float | None = None):
    setup = dict(SETUP[kind])
    if rank_atol is not None and kind in PER_ROW:
        setup["rank_atol"] = rank_atol
    return common.make_law(kind, setup, sysm, q0)


def run(kind: str, duration: float | None = None) -> dict:
    """One run (``duration`` default: ramp, hold and one full swing: 2.5 s)."""
    return run_swing("closed_chain_force", kind, 0.0, THETA0, duration)


def run_swing(name: str, kind: str, centre: float, amp: float, duration: float | None = None,
              rank_atol: float | None = None, force: float = FORCE) -> dict:
    """The row's scenario with the crank swinging centre + amp → centre − amp → centre + amp, pressing ``force``
    (the figures stay relative to FORCE; ``rank_atol``: qv's absolute floor of A's rank decision,
    :mod:`qv_control.laws.projection_base`)."""
    from qv_dynamics.plants.mujoco_guide import MujocoGuidePlant

    sysm = system()
    q0 = np.array([centre + amp, -2 * (centre + amp)])
    plant = MujocoGuidePlant(sysm, "slider")
    plant.reset(q0)
    duration = duration or T_RAMP + T_HOLD + 2 * T_SWING

    def measure():
        lam = plant.guide_force()
        return lam, lam, plant.pin_position(), [lam]

    return run_row(name, kind, lambda: make_law(kind, sysm, q0, rank_atol), plant,
                   lambda t: tick(t, kind, centre, amp, force), measure, duration, FORCE, T_RAMP, T_RAMP + T_HOLD)


__all__ = ["SETUP", "run", "run_swing", "tick", "crank", "make_law", "system"]
