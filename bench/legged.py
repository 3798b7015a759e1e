"""Cost of one LeggedLaw call (ANYmal C, four feet: dynamics terms, PIDC with passive base, internal-force
basis, foot-force QP) against pin.constraintDynamics and against the passive-joint law alone, side by side.

    PYTHONPATH=. .venv/bin/python bench/legged.py [--states 100] [--reps 10]

Every candidate runs ``reps`` times on each state, interleaved state by state so that load changes hit all
alike; figures are medians over all calls. The 1 kHz loop needs the law under 1 ms (plus the middleware).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from models import PinReference  # noqa: E402
from timing import time_calls  # noqa: E402  (bench/)

from qv_control.demo.anymal import AnymalConfig, make_system  # noqa: E402
from qv_control.laws.legged import BASE_AXES, LeggedLaw  # noqa: E402
from qv_control.laws.passive import PassiveJointLaw  # noqa: E402
from qv_dynamics.linalg import limit_blas_threads  # noqa: E402
from qv_dynamics.plants.mujoco_legged import standing_configuration  # noqa: E402
from qv_dynamics.state import State  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", type=int, default=100)
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args(argv)
    limit_blas_threads(1)
    cfg = AnymalConfig()
    system = make_system(cfg)
    q0 = standing_configuration(system, joints=cfg.posture)
    legged = LeggedLaw(system, cfg.feet)
    passive = PassiveJointLaw(system, [{"frame": "base", "axes": list(BASE_AXES), "rotation_reference": np.eye(3)}],
                              actuated=system.joint_names, effort_limits=None)
    ref = PinReference(system, [("3d", f) for f in cfg.feet])
    rng = np.random.default_rng(0)
    times = {"pin.constraintDynamics": [], "PassiveJointLaw.compute": [], "LeggedLaw.compute": []}
    for _ in range(args.states):
        q = q0.copy()
        q[7:] += 0.02 * rng.standard_normal(12)
        v = 0.01 * rng.standard_normal(18)
        tau = np.r_[np.zeros(6), 10 * rng.standard_normal(12)]
        st = State(t=0.0, q=q, qdot=v)
        for name, fn in (("pin.constraintDynamics", lambda: ref(q, v, tau)),
                         ("PassiveJointLaw.compute", lambda: passive.compute(st)),
                         ("LeggedLaw.compute", lambda: legged.compute(st))):
            times[name] += time_calls(fn, args.reps)
    base = np.median(times["pin.constraintDynamics"])
    print(f"ANYmal C, 4 feet, {args.states} states x {args.reps} reps (pinocchio {pin.__version__}); medians:")
    for name, ts in times.items():
        med = np.median(ts)
        print(f"  {name:26s} {1e6 * med:8.1f} us   p99 {1e6 * np.percentile(ts, 99):8.1f} us   "
              f"x{med / base:5.1f} of pin.constraintDynamics")
    return 0


if __name__ == "__main__":
    sys.exit(main())
