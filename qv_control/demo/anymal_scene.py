"""The ANYmal C scenario of ``qv demo anymal``: its configuration, model, contact plans, legged law and the
per-sample record, shared by the direct runs (:mod:`qv_control.demo.anymal`) and the runs through ROS nodes
(:mod:`qv_control.demo.anymal_ros`)."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from qv_dynamics import ConstrainedSystem
from qv_dynamics.plants.mujoco_legged import ANYMAL_C_STANDING, LeggedMujocoPlant
from qv_dynamics.robots import scale_inertias

from ..gait import GaitPlan, crawl_steps, plan_from_spec
from ..laws.legged import LeggedLaw

FEET = ("LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT")
#: crouched stance (knees bent more than the SRDF's): leaves the legs room for the 5 cm / 10° sway
CROUCH = {**ANYMAL_C_STANDING, **{f"{leg}_HFE": (0.85 if leg[1] == "F" else -0.85) for leg in ("LF", "RF", "LH", "RH")},
          **{f"{leg}_KFE": (-1.45 if leg[1] == "F" else 1.45) for leg in ("LF", "RF", "LH", "RH")}}


@dataclass
class AnymalConfig:
    robot: str = "anymal_c"
    feet: tuple = FEET
    posture: dict = field(default_factory=lambda: dict(CROUCH))
    mu: float = 0.8
    f_min: float = 10.0
    kp: float = 400.0
    kd: float = 40.0
    kp_swing: float = 900.0
    dt: float = 0.001
    sway_amplitude: tuple = (0.05, 0.05, 0.05, np.deg2rad(10), np.deg2rad(10), np.deg2rad(10))
    sway_frequency: tuple = (0.25, 0.2, 0.15, 0.22, 0.18, 0.12)
    sway_time: float = 8.0
    step_foot: str = "LF_FOOT"
    step: tuple = (0.10, 0.0, 0.0)
    step_height: float = 0.06
    step_shift: tuple = (-0.06, -0.08, 0.0)
    step_times: tuple = (1.0, 1.4, 1.9, 2.3)     # unload, lift, touchdown, loaded
    step_time: float = 3.5
    mass_scale: float = 1.1
    penetration: float = 5e-5        # the floor's static penetration under the standing load (measured)
    walk_steps: int = 8              # the optional crawl (``--walk``): LH LF RH RF ..., each foot step long
    delay: int = 2                   # step_realistic: the state reaches the law this many periods old
    velocity_noise: float = 0.02     # step_realistic: σ of joint velocity noise (rad/s; base twist half)

    def shortened(self) -> "AnymalConfig":
        """CI variant: 2 s of sway at a faster pace, the same step with shorter phases."""
        return replace(self, sway_time=2.0, sway_frequency=tuple(2 * f for f in self.sway_frequency),
                       step_times=(0.8, 1.1, 1.5, 1.8), step_time=2.6)


def make_system(cfg: AnymalConfig, mass_scale: float = 1.0) -> ConstrainedSystem:
    system = ConstrainedSystem.from_urdf(cfg.robot, floating_base=True, constraints=[
        {"type": "point_contact", "frame": f, "name": f} for f in cfg.feet])
    if mass_scale != 1.0:
        scale_inertias(system, mass_scale)
    return system


def plan_spec(cfg: AnymalConfig, kind: str) -> tuple[dict, float]:
    """The plan mapping (:func:`qv_control.gait.plan_from_spec`, also the controller node's ``plan``) and
    the run's duration."""
    if kind == "step":
        t = cfg.step_times
        st = {"foot": cfg.step_foot, "t_unload": t[0], "t_lift": t[1], "t_touch": t[2], "t_loaded": t[3],
              "step": list(cfg.step), "height": cfg.step_height, "shift": list(cfg.step_shift),
              "shift_time": min(0.8, t[0] - 0.1)}
        return {"kind": "step", "steps": [st]}, cfg.step_time
    return {"kind": "sway", "amplitude": list(cfg.sway_amplitude), "frequency": list(cfg.sway_frequency)}, \
        cfg.sway_time


def make_plan(cfg: AnymalConfig, kind: str, system: ConstrainedSystem | None = None,
              q0: np.ndarray | None = None) -> tuple[GaitPlan, float]:
    """The plan of a run; ``walk`` (a crawl of ``walk_steps`` steps) needs the model and q0 for the feet."""
    if kind == "walk":
        feet = {f: system.frame_placement(q0, f).translation for f in cfg.feet}
        order = [cfg.feet[i % 4] for i in (2, 0, 3, 1)] * (cfg.walk_steps // 4 + 1)   # LH LF RH RF ...
        steps = crawl_steps(feet, order[:cfg.walk_steps], step=cfg.step, height=cfg.step_height)
        return GaitPlan(cfg.feet, steps), steps[-1].t_loaded + steps[-1].shift_time
    spec, T = plan_spec(cfg, kind)
    return plan_from_spec(cfg.feet, spec), T


def make_law(cfg: AnymalConfig, system: ConstrainedSystem, plan: GaitPlan) -> LeggedLaw:
    return LeggedLaw(system, cfg.feet, plan=plan, kp=cfg.kp, kd=cfg.kd, kp_swing=cfg.kp_swing, mu=cfg.mu,
                     f_min=cfg.f_min)


class Recorder:
    """Per-sample record of one run: time, base pose error, measured foot positions/forces, plan phases,
    torques; :meth:`arrays` returns numpy arrays."""

    def __init__(self):
        self.rows: dict[str, list] = {k: [] for k in ("t", "e_pos", "e_rot", "feet", "forces", "load", "tau")}

    def add(self, t, law: LeggedLaw, plant: LeggedMujocoPlant, tau) -> None:
        e = law.last["e_p"]
        self.rows["t"].append(t)
        self.rows["e_pos"].append(e[:3].copy())
        self.rows["e_rot"].append(e[3:6].copy())
        self.rows["feet"].append(plant.foot_positions())
        self.rows["forces"].append(plant.foot_forces())
        self.rows["load"].append([(lambda ph: ph[1] if ph[0] == "stance" else -1.0)(law.plan.phase(f, t))
                                  for f in law.feet])
        self.rows["tau"].append(np.asarray(tau, float).copy())

    def arrays(self) -> dict:
        return {k: np.array(v) for k, v in self.rows.items()}


__all__ = ["AnymalConfig", "CROUCH", "FEET", "Recorder", "make_law", "make_plan", "make_system", "plan_spec"]
