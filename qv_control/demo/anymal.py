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
import logging
import sys
import time
from collections import deque
from pathlib import Path

import numpy as np

from qv_dynamics import runfiles
from qv_dynamics.errors import QVError
from qv_dynamics.jsonutil import jsonable
from qv_dynamics.plants.mujoco_legged import LeggedMujocoPlant, standing_configuration
from qv_dynamics.state import State

from .anymal_scene import FEET, AnymalConfig, Recorder, make_law, make_plan, make_system, plan_spec  # noqa: F401

LOG = logging.getLogger("qv.demo.anymal")


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
    runfiles.savefig(fig, p, dpi=90)
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
    if out is not None:  # every file renamed into place, summary.json last
        out = runfiles.check_writable(out)
        if plots:
            s["plots"] = plot_report(out, runs, cfg)
        runfiles.write_json(out / "summary.json", jsonable(s))
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
