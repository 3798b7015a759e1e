"""Cost of the dynamics core vs Pinocchio's constraintDynamics, measured side by side on the same states.

    PYTHONPATH=. .venv/bin/python bench/dynamics.py [--states 200] [--reps 20] [--write-table PATH]

For each model and each random state every candidate runs ``reps`` times back to back, the candidates
interleaved state by state so that load changes hit all of them alike; every call is timed on its own and
the figures are medians over all calls (robust to the preemptions of a shared machine). Ratios are against
``pin.constraintDynamics`` (which also starts from q, q̇, τ:
it computes M, h, the constraint Jacobians and drifts itself), so the fair comparison is
``evaluate + direct_dynamics``; ``evaluate + quasi_decompose (prev)`` is the dynamics node's per-sample
cost at 1 kHz: the previous QuasiState (of the state 1 ms earlier along q̇, itself decomposed with the one
before as its ``prev``) is passed, so V₁, V₂ are aligned to it (qv_dynamics.quasi_basis) as in the node; without
``prev`` the bases are seeded by a full SVD. ``QuasiSampler.sample (prev)`` gives the same terms and state
(to rounding, test_quasi_sampler.py) with the same ``prev`` from Pinocchio's passes and one compiled call: the
path the quasi-velocity laws take each tick. ``--write-table PATH`` also writes the medians and ratios of both
models (Markdown, with the command and the machine) for the docs (``doc/results/generated/dynamics.md``).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
from functools import partial
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from models import null_space_qdot, pin_constraint_vectors  # noqa: E402  (the tests' Pinocchio reference)
from timing import median_table, time_calls, write_table  # noqa: E402  (bench/)

from qv_dynamics import ConstrainedSystem, direct_dynamics, quasi_decompose  # noqa: E402
from qv_dynamics.linalg import limit_blas_threads  # noqa: E402
from qv_dynamics.quasi_sampler import QuasiSampler  # noqa: E402


def bench_model(label, system, specs, n_states, reps, seed=0):
    model = system.model
    pdata = model.createData()
    cms, cds = pin_constraint_vectors(system, specs)  # std::vectors, as Pinocchio's examples
    pin.initConstraintDynamics(model, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    rng = np.random.default_rng(seed)
    cases = {
        "evaluate": lambda q, v, tau: system.evaluate(q, v),
        "quasi_decompose": None,   # terms precomputed, see below
        "direct_dynamics (projection)": None,
        "direct_dynamics (kkt)": None,
        "evaluate + quasi_decompose": lambda q, v, tau: quasi_decompose(system.evaluate(q, v), tau=tau),
        "evaluate + quasi_decompose (prev)": None,
        "QuasiSampler.sample (prev)": None,
        "evaluate + direct_dynamics (projection)": lambda q, v, tau: direct_dynamics(system.evaluate(q, v), tau=tau),
        "evaluate + direct_dynamics (kkt)":
            lambda q, v, tau: direct_dynamics(system.evaluate(q, v), tau=tau, method="kkt"),
        "pin.constraintDynamics": lambda q, v, tau: pin.constraintDynamics(model, pdata, q, v, tau, cms, cds, prox),
    }
    times = {k: [] for k in cases}
    sampler = QuasiSampler(system)
    worst_err = 0.0
    for _ in range(n_states):
        q = system.random_configuration(rng)
        v = null_space_qdot(system, q, rng)
        tau = 10.0 * rng.normal(size=system.nv)
        if system.floating_base:
            tau[:6] = 0.0
        # the sample 1 ms earlier, itself aligned to the one before (the node's steady state: prev comes from
        # the previous sample's decomposition, not from a fresh SVD seed)
        seed = quasi_decompose(system.evaluate(system.integrate(q, -2e-3 * v), v))
        prev = quasi_decompose(system.evaluate(system.integrate(q, -1e-3 * v), v), prev=seed)
        terms = system.evaluate(q, v)
        qdd_ref = pin.constraintDynamics(model, pdata, q, v, tau, cms, cds, prox).copy()
        qdd = direct_dynamics(terms, tau=tau)[0]
        worst_err = max(worst_err, float(np.linalg.norm(qdd - qdd_ref) / np.linalg.norm(qdd_ref)))
        local = dict(cases)
        local["quasi_decompose"] = lambda q, v, tau: quasi_decompose(terms, tau=tau)
        local["evaluate + quasi_decompose (prev)"] = \
            lambda q, v, tau: quasi_decompose(system.evaluate(q, v), tau=tau, prev=prev).condition  # as the node
        local["QuasiSampler.sample (prev)"] = partial(_sampled, sampler, prev)
        local["direct_dynamics (projection)"] = lambda q, v, tau: direct_dynamics(terms, tau=tau)
        local["direct_dynamics (kkt)"] = lambda q, v, tau: direct_dynamics(terms, tau=tau, method="kkt")
        for k, f in local.items():
            times[k] += time_calls(f, reps, q, v, tau)
    print(f"\n{label}: nv={system.nv}, m={system.m} constraint rows, {n_states} states x {reps} reps; "
          f"q̈ vs Pinocchio worst relative error {worst_err:.1e}")
    return median_table(times)


def _sampled(sampler, prev, q, v, tau):
    """The sampler's steady state at 1 kHz: the same ``prev`` as ``evaluate + quasi_decompose (prev)``."""
    sampler.prev = prev
    return sampler.sample(q, v, tau)[1].condition


def _median_us(f, reps: int) -> float:
    return 1e6 * float(np.median(time_calls(f, reps)))


def parts(label, system, reps=2000, seed=1):
    """Where one ``evaluate + quasi_decompose (prev)`` sample goes, per call (µs, medians at one state): the
    Pinocchio passes inside ``evaluate``, the rest of ``evaluate`` (checks, copies, constraint rows from
    Python), the compiled decomposition call alone (numba dispatch included) and the rest of
    ``quasi_decompose`` (checks, buffers, the QuasiState's views)."""
    from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED as LWA
    from qv_dynamics.quasi import compiled_kernel

    model, data = system.model, system.data
    rng = np.random.default_rng(seed)
    q = system.random_configuration(rng)
    v = null_space_qdot(system, q, rng)
    tau = 10.0 * rng.normal(size=system.nv)
    seed_qs = quasi_decompose(system.evaluate(system.integrate(q, -2e-3 * v), v))
    prev = quasi_decompose(system.evaluate(system.integrate(q, -1e-3 * v), v), prev=seed_qs)
    terms = system.evaluate(q, v)
    fids = [c.frame_id for c in system.active_constraints]
    pin_parts = {
        "crba": lambda: pin.crba(model, data, q),
        "computeGeneralizedGravity": lambda: pin.computeGeneralizedGravity(model, data, q),
        "computeCoriolisMatrix": lambda: pin.computeCoriolisMatrix(model, data, q, v),
        "updateFramePlacements": lambda: pin.updateFramePlacements(model, data),
        "frame Jacobians + J̇ (all constraints)": lambda: [(pin.getFrameJacobian(model, data, f, LWA),
                                                          pin.getFrameJacobianTimeVariation(model, data, f, LWA))
                                                         for f in fids],
    }
    med = {k: _median_us(f, reps) for k, f in pin_parts.items()}
    ev = _median_us(lambda: system.evaluate(q, v), reps)
    whole = _median_us(lambda: quasi_decompose(system.evaluate(q, v), tau=tau, prev=prev).condition, reps)
    qd = _median_us(lambda: quasi_decompose(terms, tau=tau, prev=prev).condition, reps)
    kernel = compiled_kernel()
    n, m = terms.A.shape[1], terms.A.shape[0]
    out, vec = np.empty((6 * n + 4 * m, n)), np.empty(6 * n + 2 * m)
    args = (terms.M, terms.C, terms.A, terms.Adot_qdot, v, prev._V, prev._UR, terms.g, tau, m, 1e-9, 1e-9, out, vec)
    kern = _median_us(lambda: kernel(*args), reps) if kernel is not None and prev._V is not None else float("nan")
    p = sum(med.values())
    print(f"\n{label}: where evaluate + quasi_decompose (prev) goes, µs per call (one state, {reps} calls each)")
    for k, t in med.items():
        print(f"    pin.{k:40s} {t:6.2f}")
    print(f"  evaluate: Pinocchio passes {p:.1f} + the rest {ev - p:.1f} = {ev:.1f}")
    print(f"  quasi_decompose (prev, tau, .condition): compiled call {kern:.1f} + the rest {qd - kern:.1f} = {qd:.1f}")
    print(f"  together {whole:.1f}")
    sampler_parts(system, q, v, tau, prev, reps)


def sampler_parts(system, q, v, tau, prev, reps: int) -> None:
    """Where one ``QuasiSampler.sample`` (prev, tau, .condition) goes: its two Pinocchio passes, the one kernel
    call (numba dispatch included) and the rest (Python: plan check, warm start, τ check, the state's fields)."""
    from qv_dynamics.quasi import warm_start

    sampler = QuasiSampler(system)
    whole = _median_us(lambda: _sampled(sampler, prev, q, v, tau), reps)
    inp = sampler._served()
    if inp is None or sampler._kernel is None:
        print("  QuasiSampler: the reference path serves this model (no kernel)")
        return
    passes = _median_us(lambda: sampler._passes(q, v), reps)
    fids, sup, rplan, slots = inp
    Vp, Up = warm_start(prev)
    slot = slots[0]
    args = (*sampler._views, fids, sup, rplan, v, Vp, Up, tau, 1e-9, 1e-9, slot.T, slot.tv, slot.out, slot.vec)
    kern = _median_us(lambda: sampler._kernel(*args), reps)
    print(f"  QuasiSampler.sample (prev, tau, .condition): Pinocchio passes {passes:.1f} + kernel call {kern:.1f} "
          f"+ the rest {whole - passes - kern:.1f} = {whole:.1f}")


def table(path: str, arm: dict, legs: dict, n_states: int, reps: int) -> None:
    """Each candidate's median (µs) and ratio to ``pin.constraintDynamics`` on both models, as Markdown."""
    pa, pl = arm["pin.constraintDynamics"], legs["pin.constraintDynamics"]
    rows = [[f"`{k}`", f"{arm[k]:.1f}", f"{arm[k] / pa:.1f}", f"{legs[k]:.1f}", f"{legs[k] / pl:.1f}"] for k in arm]
    write_table(path, f"Dynamics core against pin.constraintDynamics on the same random states (Panda: {n_states} "
                f"states, Talos: {max(20, n_states // 4)}; {reps} reps each; medians)",
                f"PYTHONPATH=. .venv/bin/python bench/dynamics.py --states {n_states} --reps {reps} --write-table PATH",
                ["candidate", "Panda µs", "Panda × pin", "Talos µs", "Talos × pin"], rows,
                "Panda: 7-DoF, a 3-D point contact at panda_hand; Talos: floating base, two 6-D foot welds. "
                "pin.constraintDynamics is called with StdVec_RigidConstraintModel / StdVec_RigidConstraintData "
                "containers, as Pinocchio's examples call it. Timings on a shared machine: read the ratios.")


def main(argv=None) -> int:
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=200)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--write-table", metavar="PATH", help="also write the dynamics table (Markdown) to PATH")
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()}, numpy {np.__version__}, pinocchio {pin.__version__}, "
          f"{platform.machine()}")
    panda = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    arm = bench_model("Panda 7-DoF, point contact at panda_hand", panda, [("3d", "panda_hand")],
                      args.states, args.reps)
    talos = ConstrainedSystem.from_urdf("talos", floating_base=True, constraints=[
        {"type": "weld", "frame": "left_sole_link"}, {"type": "weld", "frame": "right_sole_link"}])
    legs = bench_model("Talos floating base, two 6D foot welds", talos,
                       [("6d", "left_sole_link"), ("6d", "right_sole_link")], max(20, args.states // 4), args.reps)
    eq, ed = arm["evaluate + quasi_decompose"], arm["evaluate + direct_dynamics (projection)"]
    p = arm["pin.constraintDynamics"]
    print(f"\narm target (<= 100 µs median and <= 10x Pinocchio): evaluate + quasi_decompose {eq:.1f} µs "
          f"({eq / p:.1f}x), evaluate + direct_dynamics {ed:.1f} µs ({ed / p:.1f}x) -> "
          f"{'met' if max(eq, ed) <= 100 and max(eq, ed) / p <= 10 else 'NOT met'}")
    for key in ("evaluate + quasi_decompose", "evaluate + quasi_decompose (prev)", "QuasiSampler.sample (prev)"):
        r_arm = arm[key] / p
        r_legs = legs[key] / legs["pin.constraintDynamics"]
        print(f"target ({key} <= 3x Pinocchio): Panda {r_arm:.1f}x, Talos {r_legs:.1f}x "
              f"-> {'met' if max(r_arm, r_legs) <= 3 else 'NOT met'}")
    if args.write_table:
        table(args.write_table, arm, legs, args.states, args.reps)
    parts("Panda", panda)
    parts("Talos", talos)
    from law_tick import first_tick
    from law_tick import run as law_tick

    law_tick(max(10, args.states), max(5, args.reps // 2))  # >= 5 back-to-back calls: warm caches for all
    first_tick()
    print(f"machine load: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1/5/15 min), {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
