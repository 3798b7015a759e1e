"""``qv demo --out DIR``: the Panda presses on a MuJoCo table while it traces a circle.

Scenario (one run per controller, all through the ROS 2 topic contract in one process):

The scenario is a :class:`qv_control.task.ContactTask` (the product's task layer):

1. approach: free motion, the tool descends at ``approach_speed`` towards the table and slows to the
   touch-down speed planned from the contact inertia and the table's stiffness (peak ≤ ``peak_ratio`` × F);
2. contact: when MuJoCo's F/T sensor reads more than ``contact_on`` N, the constraint
   ``{type: point_contact, frame: panda_hand_tcp, axes: [z], name: contact}`` is switched on
   (``system.set_active``); the law is rebuilt for the new constraint set so the quasi-velocity basis
   is re-seeded (rank 0 → 1), and the phase change is logged once;
3. press and trace: λ_d ramps to −``force`` (λ is the force the robot applies along z, SPEC sign
   convention M q̈ + h = τ − Aᵀλ), then the tool traces a circle of ``radius`` on the table;
4. force step: the commanded force steps to ``force_step`` N and back (decoupling test);
5. contact loss: the table is lowered by ``lower_by`` (5 mm) through the MuJoCo node's
   ``~/table_height`` topic; the contact is lost (logged once), the tool re-approaches in free motion
   at the touch-down speed and regains the contact (logged once);
6. release: λ_d ramps to zero, the constraint is switched off, the tool lifts.

Controllers: the quasi-velocity hybrid law of :mod:`qv_control.laws` (tracking of θ = tool x, y, (z),
orientation, panda_joint3; force law with a PI on the measured λ), and the baseline of
:mod:`qv_control.laws.impedance` (Cartesian impedance + Jacobian-transpose force). A third run gives the
quasi-velocity law a model with all link masses (and inertias) 10 % too large.

All figures are measured from MuJoCo: the normal force from ``mj_contactForce``, the tool position from
the MuJoCo site. Report: ``summary.json`` + PNG plots in ``--out``.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from qv_dynamics import runfiles
from qv_dynamics.errors import QVError
from qv_dynamics.jsonutil import jsonable as _jsonable
from qv_dynamics.linalg import limit_blas_threads
from qv_dynamics.plants.mujoco_plant import MujocoPlant
from qv_dynamics.state import State

from .config import (
    DemoConfig,
    Scenario,
    demo_law,
    demo_task,
    initial_state,
    load_config,
    make_plant,
    perturbed_system,
    planned_touch_speed,
)
from .recorder import Recorder
from .report import metrics, plot_report, print_table, step_effect, summarize

# what `qv demo` writes into --out (removed before a rerun, so no file of an earlier run survives)
OUT_FILES = ("summary.json", "*_trajectory.npz", "normal_force.png", "path_error.png", "path_xy.png",
             "quasi_velocities.png", "contact_phases.png")


def measured_normal_force(plant: MujocoPlant) -> float:
    """Normal force from the F/T sensor reading (what a real robot would have)."""
    return -float((plant.tool_rotation() @ plant.sensor_wrench()[:3])[2])


def run_direct(cfg: DemoConfig, kind: str = "qv", mass_factor: float = 1.0) -> dict:
    """The scenario without ROS (plant and law called directly): a cross-check of the ROS run."""
    plant_sys, q0, p0, R0 = initial_state(cfg)
    ctrl_sys = plant_sys if mass_factor == 1.0 else perturbed_system(cfg, mass_factor)
    plant = make_plant(cfg, plant_sys)
    plant.reset(q0)
    task = demo_task(cfg, ctrl_sys, p0, planned_touch_speed(cfg, ctrl_sys, q0))
    scenario = Scenario(cfg, task, plant.set_table_height)
    tl = demo_law(kind, cfg, ctrl_sys, R0, q0)
    law = tl.law
    rec = Recorder(task, plant.effort_limits, law)
    t0 = time.perf_counter()
    while True:
        t = plant.time
        fn = measured_normal_force(plant)
        task.update(t, fn, plant.tool_position[2])
        if scenario.step(t):
            break
        point = task.point(t)
        lam_meas = np.array([-fn]) if point["contact"] else None
        tau = law.compute(State(t=t, q=plant.q, qdot=plant.qdot, lambda_meas=lam_meas), tl.reference(point))
        plant.step(tau, cfg.dt)
        rec.record(plant, tau)
    return {"arrays": rec.arrays(), "events": task.events, "plan": task.plan, "wall_time_s": time.perf_counter() - t0,
            "aborted": task.reason, "kind": kind, "mass_factor": mass_factor, "limits": plant.effort_limits}


def run_demo(cfg: DemoConfig, out: Path | None = None, ros: bool = True, plots: bool = True,
             mass_error_run: bool = True) -> dict:
    """All runs + summary (+ plots and summary.json when ``out`` is given)."""
    t0 = time.perf_counter()
    from .ros_run import run_ros

    runner = run_ros if ros else run_direct
    runs = {"qv": runner(cfg, "qv"), "baseline": runner(cfg, "baseline")}
    short = DemoConfig(**asdict(cfg))
    short.phases_after_nominal = False
    if mass_error_run:
        runs["qv_mass_error"] = runner(short, "qv", mass_factor=1.0 + cfg.mass_error)
        nopi = DemoConfig(**asdict(short))
        nopi.force_kp = nopi.force_ki = 0.0
        # supplementary runs call plant and law directly (the lock-step ROS loop is the same closed loop,
        # checked in test/test_demo_short.py); they only shorten the demo
        runs["qv_mass_error_no_pi"] = run_direct(nopi, "qv", mass_factor=1.0 + cfg.mass_error)
    m = {k: metrics(r, cfg if k in ("qv", "baseline") else short) for k, r in runs.items()}
    # decoupling: the same runs without the force step, up to the end of the step window
    nostep = DemoConfig(**asdict(cfg))
    nostep.force_step = cfg.force
    nostep.stop_after_step = cfg.step_window + 0.01
    for k in ("qv", "baseline"):
        counter = run_direct(nostep, k)
        m[k].update(step_effect(runs[k], counter, cfg))
    s = summarize(m, cfg, ros)
    s["wall_time_s"] = time.perf_counter() - t0
    if out is not None:  # every file written to a temporary and renamed into place
        out = runfiles.check_writable(out)
        for k, r in runs.items():
            runfiles.savez(out / f"{k}_trajectory.npz", **r["arrays"])
        if plots:
            s["plots"] = plot_report(out, runs, cfg)
        runfiles.write_json(out / "summary.json", _jsonable(s))
    return s


def main(argv: list[str] | None = None) -> int:
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["anymal"]:  # `qv demo anymal ...`: the legged demo
        from .anymal import main as anymal_main

        return anymal_main(argv[1:])
    ap = argparse.ArgumentParser(prog="qv demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/demo", help="report folder (summary.json + PNG plots)")
    ap.add_argument("--config", default=None, help="demo YAML (default: config/demo.yaml)")
    ap.add_argument("--short", action="store_true", help="the short CI version (a few simulated seconds)")
    ap.add_argument("--no-ros", action="store_true", help="call plant and laws directly (no ROS nodes)")
    ap.add_argument("--no-mass-error", action="store_true", help="skip the 10%% mass-error run")
    args = ap.parse_args(argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("MPLBACKEND", "Agg")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        # before the run: an unwritable --out is refused now; an earlier run's files are removed (and listed)
        runfiles.prepare_out_dir(args.out, OUT_FILES)
        cfg = load_config(args.config)
        if args.short:
            cfg = cfg.shortened()
        print("computing the demo runs", flush=True)  # (the signal tests wait for it)
        s = run_demo(cfg, Path(args.out), ros=not args.no_ros, mass_error_run=not args.no_mass_error)
    except (QVError, TimeoutError) as exc:
        print(f"qv demo: {exc}", file=sys.stderr)
        return 2
    print_table(s)
    print(f"\nwall time {s['wall_time_s']:.1f} s; report in {args.out}/ (summary.json, "
          f"{', '.join(s.get('plots', []))})")
    ok = all(r.get("aborted") is None for r in s["runs"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
