"""``qv inspect <robot> [--contact FRAME] [--weld FRAME] [--random]``: the quasi-velocity decomposition of a
robot at one state, printed for a human (SPEC §2; paper `aghili-quasi-velocities` eq. 6-22).

The state is the neutral configuration (``--random``: a random one inside the joint limits), a random q̇ in
the null space of the constraints (A q̇ = 0) and τ_a = g + a random torque; printed are the conditioning of
M, the rank of A, v = Qᵀq̇, v_r, K, ξ, λ and, as a cross-check, λ from the projection method.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from .argtypes import nonnegative_int
from .errors import QVError
from .model import ConstrainedSystem
from .projection import direct_dynamics
from .quasi import quasi_decompose

FLOATING = {"solo12", "talos", "talos_full", "anymal", "anymal_b", "anymal_c"}


def _fmt(x: np.ndarray, digits: int = 4) -> str:
    return np.array2string(np.asarray(x), precision=digits, suppress_small=True, max_line_width=110)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="qv inspect", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("robot", help="example-robot-data name (panda, ur5, solo12, talos, ...), URDF path, or a "
                                 "YAML file with robot + constraints")
    p.add_argument("--contact", action="append", default=[], metavar="FRAME",
                   help="point contact at FRAME (3 world axes); repeatable")
    p.add_argument("--weld", action="append", default=[], metavar="FRAME", help="6D weld at FRAME; repeatable")
    p.add_argument("--floating-base", action="store_true", help="add a free-flyer root (auto for legged robots)")
    p.add_argument("--random", action="store_true", help="random configuration instead of the neutral one")
    p.add_argument("--seed", type=nonnegative_int, default=0, help="seed of q̇, τ (and q with --random)")
    return p


def load(args) -> ConstrainedSystem:
    cons = [{"type": "point_contact", "frame": f} for f in args.contact]
    cons += [{"type": "weld", "frame": f} for f in args.weld]
    if str(args.robot).endswith((".yaml", ".yml")):
        system = ConstrainedSystem.from_yaml(args.robot)
        for c in cons:
            system.add_constraint(c)
        return system
    fb = args.floating_base or args.robot in FLOATING
    return ConstrainedSystem.from_urdf(args.robot, constraints=cons, floating_base=fb)


def report(system: ConstrainedSystem, random_q: bool = False, seed: int = 0) -> dict:
    """Compute and print the decomposition; return the printed quantities (for callers and tests)."""
    rng = np.random.default_rng(seed)
    q = system.random_configuration(rng) if random_q else system.neutral()
    A = system.constraint_rows(q)[1]
    if A.shape[0]:
        _, s, Vt = np.linalg.svd(A)
        r = int(np.count_nonzero(s > max(1e-9 * s[0], 1e-9)))
        qdot = Vt[r:].T @ rng.normal(size=system.nv - r)
    else:
        qdot = rng.normal(size=system.nv)
    terms = system.evaluate(q, qdot)
    tau = terms.g + rng.normal(size=system.nv)
    if system.floating_base:
        tau[:6] = 0.0
    qs = quasi_decompose(terms, tau=tau)
    _, F, lam_pp = direct_dynamics(terms, tau=tau)
    w = np.linalg.eigvalsh(terms.M)
    print(f"robot '{system.name}': nq={system.nq}, nv={system.nv}, constraint rows m={terms.m} "
          f"{terms.row_labels if terms.m else ''}")
    print(f"state: {'random' if random_q else 'neutral'} q, random q̇ with A q̇ = 0, τ_a = g + N(0, 1)")
    print(f"M: eigenvalues [{w[0]:.4g}, {w[-1]:.4g}], condition {w[-1] / w[0]:.4g}")
    print(f"A: rank {qs.rank} of {terms.m} rows; Λ = AQ⁻ᵀ singular values {_fmt(qs.S)} "
          f"(condition {qs.condition:.4g}); null-space dimension {qs.V2.shape[1]}")
    print(f"v   = Qᵀq̇          {_fmt(qs.v)}")
    print(f"v_r = V₂ᵀv          {_fmt(qs.v_r)}")
    print(f"K   = ½‖v_r‖²       {0.5 * float(qs.v_r @ qs.v_r):.6g}  (½q̇ᵀMq̇ = {0.5 * qdot @ terms.M @ qdot:.6g})")
    print(f"u   = Q⁻¹(τ_a − g)   {_fmt(qs.u)}")
    print(f"ξ   = V₁ᵀΛᵀλ        {_fmt(qs.xi)}")
    print(f"λ                   {_fmt(qs.lambda_)}")
    if terms.m:
        diff = float(np.linalg.norm(qs.lambda_ - lam_pp) / max(np.linalg.norm(lam_pp), 1e-300))
        print(f"λ (projection method, eq. 32) agrees to {diff:.1e} relative; ‖Aᵀλ‖ = {np.linalg.norm(F):.6g}")
    return {"q": q, "qdot": qdot, "tau": tau, "M_condition": w[-1] / w[0], "rank": qs.rank, "v": qs.v,
            "v_r": qs.v_r, "xi": qs.xi, "lambda": qs.lambda_, "lambda_projection": lam_pp}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        system = load(args)
        report(system, args.random, args.seed)
    except (QVError, FileNotFoundError) as exc:
        print(f"qv inspect: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
