"""The constrained simulator (SPEC §4 "Simulator contract"): a :class:`Stepper` advances one step (section 6
of the projection-operator paper), :func:`simulate` runs it with a controller and a contact schedule."""
from .simulation import Simulation, simulate
from .stepper import INTEGRATORS, METHODS, Accel, Stepper
from .trajectory import Trajectory

__all__ = ["Stepper", "Accel", "Trajectory", "Simulation", "simulate", "METHODS", "INTEGRATORS"]
