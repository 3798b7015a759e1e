"""qv_dynamics: constrained multibody dynamics in quasi-velocities and projection operators.

Pure math (numpy + Pinocchio); never imports rclpy. Public API (SPEC §4)::

    from qv_dynamics import ConstrainedSystem, quasi_decompose, direct_dynamics, simulate

``QuasiSampler(system).sample(q, q̇)`` is ``evaluate`` + ``quasi_decompose(prev)`` for a 1 kHz loop: the same
terms and state from Pinocchio's passes and one compiled call, in buffers reused from sample to sample.
"""
from .lazy import make_lazy

# public name -> module, imported on first use (qv_dynamics.lazy): ``import qv_dynamics`` loads nothing heavy
_LAZY = {
    **{name: ".errors" for name in (
        "ConvergenceError", "DimensionError", "ModelError", "NonFiniteError", "NotPositiveDefiniteError", "QVError",
        "RankDeficiencyError", "StateMismatchError", "UnknownNameError")},
    "ConstrainedSystem": ".model", "DynamicsTerms": ".model",
    "direct_dynamics": ".projection", "projection": ".projection",
    "QuasiState": ".quasi", "quasi_decompose": ".quasi", "torque_from_quasi_forces": ".quasi",
    "QuasiSampler": ".quasi_sampler",
    "simulate": ".sim", "Stepper": ".sim", "Trajectory": ".sim",
}

__all__ = [
    "ConstrainedSystem", "DynamicsTerms", "QuasiState", "quasi_decompose", "direct_dynamics", "projection",
    "torque_from_quasi_forces", "QuasiSampler", "simulate", "Stepper", "Trajectory",
    "QVError", "NonFiniteError", "DimensionError", "UnknownNameError", "ModelError", "NotPositiveDefiniteError",
    "RankDeficiencyError", "ConvergenceError", "StateMismatchError",
]

make_lazy(__name__)
