"""qv_control: hybrid force/motion control laws (pure numpy) and the controller ROS node.

Each law is a class with ``compute(state, reference) -> tau`` (SPEC §4): the full n-vector of actuator
torques, gravity included. Build one by name with :func:`make_law` (names in :mod:`qv_control.laws`)::

    from qv_control import make_law, State, Reference
    law = make_law("quasi_tracking", system, coordinates=["panda_hand.x", "panda_hand.y", "panda_hand.rx",
                   "panda_hand.ry", "panda_hand.rz", "panda_joint3"], kp=5.0, kd=10.0)
    tau = law.compute(State(t, q, qdot, lambda_meas), Reference(theta_d, theta_dot_d, theta_ddot_d, lambda_d))

θ needs exactly n − r entries (D = (∂θ/∂q)Q⁻ᵀV₂ square; a clear DimensionError says how many). Sign of λ
(SPEC): M q̈ + h = τ − Aᵀλ, so pressing a tool down on a table with 10 N (point contact, axis z) is
λ_d = −10. Laws, parameters and equations: :mod:`qv_control.laws`. The contact task (approach, touch-down,
press and trace, release) and its composables (friction compensation, velocity observer, F/T low-pass):
:mod:`qv_control.task`.
"""
from qv_dynamics.lazy import make_lazy

# public name -> module, imported on first use (qv_dynamics.lazy): a node's entry point loads nothing heavy
_LAZY = {
    "State": "qv_dynamics.state", "Reference": "qv_dynamics.state",
    "MinimalCoordinates": ".coordinates",
    "ControlLaw": ".laws.base", "ForcePI": ".laws.base", "GainError": ".laws.base",
    "PassiveJointLaw": ".laws.passive", "check_controllability": ".laws.passive",
    "PIDCLaw": ".laws.pidc", "PIDCForceLaw": ".laws.pidc_force", "UncontrollableError": ".laws.projection_base",
    "QuasiSetpointLaw": ".laws.quasi_setpoint", "QuasiTrackingLaw": ".laws.quasi_tracking",
    "LAWS": ".laws.registry", "make_law": ".laws.registry", "scale_inertias": ".laws.registry",
    **{name: ".references" for name in ("ReferenceRangeError", "SplineReference", "TrajectoryReference",
                                         "validate_reference")},
    "SaturationStatus": ".saturation", "saturate": ".saturation",
    **{name: ".task" for name in ("ApproachProfile", "CircleTrace", "ContactDetector", "ContactTask",
                                   "ContactTaskConfig", "ForceProfile", "LowPass", "SwitchingLaw", "TaskLaw",
                                   "TaskLawSettings", "TaskRefused", "WaypointTrace", "check_task",
                                   "contact_inertia", "stiffness_from_press", "touch_speed")},
    "FrictionCompensation": ".laws.friction", "VelocityObserver": "qv_dynamics.observer",
}

__all__ = [
    "State", "Reference", "make_law", "LAWS", "scale_inertias", "ControlLaw", "ForcePI", "GainError",
    "QuasiTrackingLaw", "QuasiSetpointLaw", "PIDCLaw", "PIDCForceLaw", "PassiveJointLaw", "UncontrollableError",
    "check_controllability", "MinimalCoordinates", "TrajectoryReference", "SplineReference", "ReferenceRangeError",
    "validate_reference", "SaturationStatus", "saturate",
    "ApproachProfile", "CircleTrace", "ContactDetector", "ContactTask", "ContactTaskConfig", "ForceProfile",
    "LowPass", "SwitchingLaw", "TaskLaw", "TaskLawSettings", "TaskRefused", "WaypointTrace", "check_task",
    "contact_inertia", "stiffness_from_press", "touch_speed", "FrictionCompensation", "VelocityObserver",
]

make_lazy(__name__)
