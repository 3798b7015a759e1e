"""``qv demo anymal``: ANYmal C on a MuJoCo floor — body-pose sway on four feet, one foot step, mass error.

Runs (each a fresh MuJoCo scene of :mod:`qv_dynamics.plants.mujoco_legged`, control at 1 kHz):

* ``sway``: four-foot stance while the body follows a 5 cm / 10° sinusoidal pose in all six coordinates;
* ``step``: shift the body over the other three feet, ramp the LF foot's load out, lift it, move it 10 cm
  forward, put it down, ramp its load in, shift back;
* ``mass_error`` (optional): the sway with every body's mass and inertia 10 % too large in the controller;
* ``step_realistic`` (direct runs only): the step with the 10 % mass error, the state 2 ms old and white
  velocity noise (σ 0.02 rad/s on the joints, 0.01 on the base twist): not in the headline figures;
* ``walk`` (``--walk``, stretch): a statically stable crawl (:func:`qv_control.gait.crawl_steps`), 8 steps of
  10 cm (LH LF RH RF twice), the body shifted over each support triangle first.

The law is :class:`qv_control.laws.legged.LeggedLaw` (passive base, QP foot forces, contact plan).
``summary.json``: base_pos_rms_m / base_rot_rms_rad (sway), foot_slip_max_m (stance feet, all runs),
base_drop_max_m (step: base height below its reference), min_cone_margin (N, μf_n − ‖f_t‖ of the
measured MuJoCo forces of fully loaded stance feet), max_abs_torque_ratio (|τ|/URDF limit), through_ros.
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import QVError
from qv_dynamics.plants.mujoco_legged import ANYMAL_C_STANDING, LeggedMujocoPlant, standing_configuration
from qv_dynamics.robots import scale_inertias
from qv_dynamics.state import State

from ..gait import GaitPlan, crawl_steps, plan_from_spec
from ..laws.legged import LeggedLaw

LOG = logging.getLogger("qv.demo.anymal")
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


class Measurement:
    """What the controller sees: the plant state ``delay`` control periods old, velocities with white noise
    (σ = ``noise`` rad/s on the joints, noise/2 m/s and rad/s on the base twist), seeded."""

    def __init__(self, delay: int = 0, noise: float = 0.0, seed: int = 0):
        self.delay, self.noise = int(delay), float(noise)
        self.rng = np.random.default_rng(seed)
        self.buf: deque = deque()

    def __call__(self, t: float, q: np.ndarray, qdot: np.ndarray) -> State:
        if self.noise > 0:
            scale = np.r_[np.full(6, 0.5), np.ones(qdot.size - 6)] * self.noise
            qdot = qdot + scale * self.rng.standard_normal(qdot.size)
        self.buf.append((t, q, qdot))
        while len(self.buf) > self.delay + 1:
            self.buf.popleft()
        _, q_m, v_m = self.buf[0]
        return State(t=t, q=q_m, qdot=v_m)     # the law's clock is now; the state is old


def run_direct(cfg: AnymalConfig, kind: str, mass_scale: float = 1.0, delay: int = 0,
               noise: float = 0.0) -> dict:
    """One run with plant and law called directly (no ROS); returns the record arrays and the events.
    ``delay`` (control periods) and ``noise`` (rad/s): see :class:`Measurement`."""
    plant_sys, ctrl_sys = make_system(cfg), make_system(cfg, mass_scale)
    q0 = standing_configuration(plant_sys, joints=cfg.posture, feet=cfg.feet, penetration=cfg.penetration)
    plant = LeggedMujocoPlant(plant_sys)
    plant.reset(q0)
    plan, T = make_plan(cfg, kind, plant_sys, q0)
    law = make_law(cfg, ctrl_sys, plan)
    measure = Measurement(delay, noise)
    rec = Recorder()
    wall = time.perf_counter()
    aborted = None
    for _ in range(int(round(T / cfg.dt))):
        t = plant.time
        try:
            tau = law.compute(measure(t, plant.q, plant.qdot))
        except QVError as exc:          # a fall ends the run, reported (never silent)
            aborted = f"t={t:.3f}: {exc}"
            break
        rec.add(t, law, plant, tau)
        plant.step(tau, cfg.dt)
    out = rec.arrays()
    out.update(events=law.events, aborted=aborted, wall_s=time.perf_counter() - wall, limits=plant.effort_limits,
               qp_infeasible=law.qp.infeasible, qp_solves=law.qp.solves, kind=kind, mass_scale=mass_scale)
    return out


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.sum(x**2, axis=1)))) if len(x) else float("nan")


def metrics(run: dict, mu: float, settle: float = 0.05) -> dict:
    """Acceptance figures of one run (module doc). Slip and cone margins count from ``settle`` seconds on:
    the robot starts with its feet just touching the soft floor and sinks 0.05 mm in the first steps."""
    keep = run["t"] >= settle
    load, feet, F = run["load"][keep], run["feet"][keep], run["forces"][keep]
    slip = np.zeros(load.shape[1])
    for i in range(load.shape[1]):       # horizontal travel of each foot during each of its stance periods
        stance = load[:, i] >= 0
        start = None
        for k in range(len(stance)):
            if stance[k] and start is None:
                start = k
            if stance[k] and start is not None:
                slip[i] = max(slip[i], float(np.linalg.norm(feet[k, i, :2] - feet[start, i, :2])))
            if not stance[k]:
                start = None
    loaded = load >= 1.0
    fn, ft = F[..., 2], np.linalg.norm(F[..., :2], axis=-1)
    margin = mu * fn - ft
    tau = run["tau"][:, 6:]
    return {
        "base_pos_rms_m": _rms(run["e_pos"]), "base_rot_rms_rad": _rms(run["e_rot"]),
        "base_pos_max_m": float(np.linalg.norm(run["e_pos"], axis=1).max()),
        "foot_slip_max_m": float(slip.max()), "foot_slip_m": slip.tolist(),
        "base_drop_max_m": float(max(0.0, run["e_pos"][:, 2].max())),      # e = θ_d − θ > 0: below reference
        "min_cone_margin": float(margin[loaded].min()),
        "min_normal_force": float(fn[loaded].min()),
        "max_abs_torque_ratio": float((np.abs(tau) / run["limits"]).max()),
        "contact_events": [(round(e["t"], 4), e["foot"], e["event"]) for e in run["events"]],
        "qp_infeasible": int(run["qp_infeasible"]), "aborted": run["aborted"],
        "simulated_s": float(run["t"][-1]) if len(run["t"]) else 0.0, "wall_s": float(run["wall_s"]),
    }


def plot_report(out: Path, runs: dict, cfg: AnymalConfig) -> list[str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, ax = plt.subplots(len(runs), 3, figsize=(15, 3.2 * len(runs)), squeeze=False)
    for row, (name, run) in enumerate(runs.items()):
        t = run["t"]
        ax[row, 0].plot(t, 1e3 * run["e_pos"])
        ax[row, 0].set_ylabel(f"{name}\nbase position error (mm)")
        ax[row, 0].legend(["x", "y", "z"], fontsize=7)
        ax[row, 1].plot(t, np.rad2deg(run["e_rot"]))
        ax[row, 1].set_ylabel("orientation error (deg)")
        fn = run["forces"][..., 2]
        margin = cfg.mu * fn - np.linalg.norm(run["forces"][..., :2], axis=-1)
        for i, f in enumerate(cfg.feet):
            line = ax[row, 2].plot(t, fn[:, i], label=f"{f} f_n")[0]
            ax[row, 2].plot(t, margin[:, i], ls="--", color=line.get_color(), lw=0.8)
            swing = run["load"][:, i] < 0
            if swing.any():
                ax[row, 2].fill_between(t, 0, fn.max(), where=swing, color=line.get_color(), alpha=0.15)
        ax[row, 2].set_ylabel("normal force (solid), cone margin (dashed), N\nshaded: swing")
        ax[row, 2].legend(fontsize=7)
        for a in ax[row]:
            a.set_xlabel("t (s)")
            a.grid(alpha=0.3)
    fig.tight_layout()
    p = out / "anymal_runs.png"
    fig.savefig(p, dpi=90)
    plt.close(fig)
    names.append(p.name)
    return names


def run_demo(cfg: AnymalConfig, out: Path | None, ros: bool = False, mass_error_run: bool = True,
             plots: bool = True, walk: bool = False, realistic: bool = True) -> dict:
    runner = run_direct
    if ros:
        from .anymal_ros import run_ros as runner
    runs = {"sway": runner(cfg, "sway"), "step": runner(cfg, "step")}
    if mass_error_run:
        runs["mass_error"] = runner(cfg, "sway", mass_scale=cfg.mass_scale)
    if realistic and not ros:  # the step with 10 % mass error, 2 ms old state, velocity noise
        runs["step_realistic"] = run_direct(cfg, "step", mass_scale=cfg.mass_scale, delay=cfg.delay,
                                            noise=cfg.velocity_noise)
    if walk:  # stretch: reported in runs.walk, not in the headline figures
        runs["walk"] = runner(cfg, "walk")
    per = {k: metrics(r, cfg.mu) for k, r in runs.items()}
    head = [p for k, p in per.items() if k not in ("walk", "step_realistic")]
    s = {"base_pos_rms_m": per["sway"]["base_pos_rms_m"], "base_rot_rms_rad": per["sway"]["base_rot_rms_rad"],
         "foot_slip_max_m": max(p["foot_slip_max_m"] for p in head),
         "base_drop_max_m": per["step"]["base_drop_max_m"],
         "min_cone_margin": min(p["min_cone_margin"] for p in head),
         "max_abs_torque_ratio": max(p["max_abs_torque_ratio"] for p in head),
         "through_ros": bool(ros), "runs": per}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        if plots:
            s["plots"] = plot_report(out, runs, cfg)
        (out / "summary.json").write_text(json.dumps(s, indent=2, default=float))
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv demo anymal", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/anymal", help="report folder (summary.json + PNG plots)")
    ap.add_argument("--short", action="store_true", help="the short CI version")
    ap.add_argument("--ros", action="store_true", help="run plant and controller as ROS nodes")
    ap.add_argument("--no-mass-error", action="store_true", help="skip the 10%% mass-error run")
    ap.add_argument("--walk", action="store_true", help="also a slow crawl of 8 steps (stretch; ~17 s simulated)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = AnymalConfig()
    if args.short:
        cfg = cfg.shortened()
    s = run_demo(cfg, Path(args.out), ros=args.ros, mass_error_run=not args.no_mass_error, walk=args.walk)
    for k in ("base_pos_rms_m", "base_rot_rms_rad", "foot_slip_max_m", "base_drop_max_m", "min_cone_margin",
              "max_abs_torque_ratio", "through_ros"):
        print(f"{k:22s} {s[k]}")
    for name, p in s["runs"].items():
        print(f"{name:12s} pos rms {1e3 * p['base_pos_rms_m']:.3f} mm, "
              f"rot rms {np.rad2deg(p['base_rot_rms_rad']):.4f} deg,"
              f" slip {1e3 * p['foot_slip_max_m']:.3f} mm, events {p['contact_events']}, aborted {p['aborted']},"
              f" {p['simulated_s']:.1f} s simulated in {p['wall_s']:.1f} s")
    return 0 if all(p["aborted"] is None for p in s["runs"].values()) else 1


__all__ = ["AnymalConfig", "make_system", "make_plan", "make_law", "run_direct", "metrics", "run_demo", "main"]
