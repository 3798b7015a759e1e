"""Row ``singular_pass``: the slider-crank of ``closed_chain_force`` pressing 10 N on its guide while the crank
swings π/2 + 0.4 → π/2 − 0.4 → π/2 + 0.4 rad, through the fold q₁ = π/2 twice: the rod folds onto the crank,
the pin sits on the crank's pivot and the constraint row A = ∂z_C/∂q vanishes (rank 1 → 0 → 1).

At the fold the guide force does no work on any joint (Aᵀλ = 0 for every λ): it is carried by the pivot, not
by the motors, so no controller sets it there; the row measures what each does to it and to the path.
Controllers as in :mod:`.closed_chain_force` (qv: ``pidc_force`` with θ = crank angle; osc of the pin (x, z)
with the damped Λ near singularities; impedance of the pin). Judged by MuJoCo's guide force (load cell).
"""
from __future__ import annotations

import math

from .closed_chain_force import run_swing

CENTRE, AMP = math.pi / 2, 0.4


def run(kind: str, duration: float | None = None) -> dict:
    """One run (``duration`` default 2.5 s: ramp, hold, one full swing through the fold and back)."""
    return run_swing("singular_pass", kind, CENTRE, AMP, duration)


__all__ = ["run", "CENTRE", "AMP"]
