"""Row ``singular_pass``: the slider-crank of ``closed_chain_force`` pressing 10 N on its guide while the crank
swings π/2 + 0.4 → π/2 − 0.4 → π/2 + 0.4 rad, through the fold q₁ = π/2 twice: the rod folds onto the crank,
the pin sits on the crank's pivot and the constraint row A = ∂z_C/∂q vanishes (rank 1 → 0 → 1).

At the fold the guide force does no work on any joint (Aᵀλ = 0 for every λ): it is carried by the pivot, not
by the motors, so no controller sets it there; the row measures what each does to it and to the path.
Controllers as in :mod:`.closed_chain_force` (qv: ``pidc_force`` with θ = crank angle; osc of the pin (x, z)
with the damped Λ near singularities; impedance of the pin). Judged by MuJoCo's guide force (load cell).

Near the fold σ(A) = ‖A‖ → 0 and the projection's normal acceleration a⊥ = −A⁺Ȧq̇ grows like |Ȧq̇|/‖A‖ (the
plant's soft guide lets q̇ leave the constraint's tangent cone, so Ȧq̇ does not vanish with A): with the default
rank floor (ATOL) qv's demand reaches the motor limit for a few ms at each crossing even with no force
commanded. ``rank_atol`` = :data:`RANK_ATOL` (1 % of the crank length, in A's units of m) drops the row there
instead (:mod:`qv_control.laws.projection_base`); the row itself runs qv as configured by default.
"""
from __future__ import annotations

import math

from .closed_chain_force import FORCE, L, run_swing

CENTRE, AMP = math.pi / 2, 0.4
#: an absolute rank floor at the model's scale: 1 % of the crank length (A = ∂z_C/∂q is in m)
RANK_ATOL = 0.01 * L


def run(kind: str, duration: float | None = None, rank_atol: float | None = None, force: float = FORCE) -> dict:
    """One run (``duration`` default 2.5 s: ramp, hold, one full swing through the fold and back); ``rank_atol``
    and ``force`` as in :func:`.closed_chain_force.run_swing`."""
    return run_swing("singular_pass", kind, CENTRE, AMP, duration, rank_atol=rank_atol, force=force)


__all__ = ["run", "CENTRE", "AMP", "RANK_ATOL"]
