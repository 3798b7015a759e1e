"""The constrained simulator (SPEC §5): a :class:`Stepper` advances one step, :func:`simulate` runs a schedule."""
from .stepper import INTEGRATORS, METHODS, Stepper, Trajectory, simulate

__all__ = ["Stepper", "Trajectory", "simulate", "METHODS", "INTEGRATORS"]
