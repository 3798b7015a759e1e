"""qv_dynamics: constrained multibody dynamics in quasi-velocities and projection operators.

Pure math (numpy + Pinocchio); never imports rclpy. Public API (SPEC §4)::

    from qv_dynamics import ConstrainedSystem, quasi_decompose, direct_dynamics, simulate

``QuasiSampler(system).sample(q, q̇)`` is ``evaluate`` + ``quasi_decompose(prev)`` for a 1 kHz loop: the same
terms and state from Pinocchio's passes and one compiled call, in buffers reused from sample to sample.
"""
from .errors import (
    ConvergenceError,
    DimensionError,
    ModelError,
    NonFiniteError,
    NotPositiveDefiniteError,
    QVError,
    RankDeficiencyError,
    StateMismatchError,
    UnknownNameError,
)
from .model import ConstrainedSystem, DynamicsTerms
from .projection import direct_dynamics, projection
from .quasi import QuasiState, quasi_decompose, torque_from_quasi_forces
from .quasi_sampler import QuasiSampler

__all__ = [
    "ConstrainedSystem", "DynamicsTerms", "QuasiState", "quasi_decompose", "direct_dynamics", "projection",
    "torque_from_quasi_forces", "QuasiSampler", "simulate", "Stepper", "Trajectory",
    "QVError", "NonFiniteError", "DimensionError", "UnknownNameError", "ModelError", "NotPositiveDefiniteError",
    "RankDeficiencyError", "ConvergenceError", "StateMismatchError",
]


def __getattr__(name):  # the simulator is imported lazily (it pulls in more)
    if name in ("simulate", "Stepper", "Trajectory"):
        from . import sim as simulator

        return getattr(simulator, name)
    raise AttributeError(name)
