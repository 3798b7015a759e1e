"""What a control law sees (``State``) and what it is asked to do (``Reference``).

Every law in :mod:`qv_control` has ``compute(state: State, reference: Reference) -> tau``, where tau is
the full actuator-torque vector in velocity order (gravity included). The simulator, the MuJoCo plant
and the ROS controller node all build these two objects, so one law runs unchanged everywhere.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class State:
    """Measured state: time, q (nq), q̇ (n), and optionally a measured constraint multiplier λ
    (from a force sensor or an estimate) for the force PI terms."""

    t: float
    q: np.ndarray
    qdot: np.ndarray
    lambda_meas: np.ndarray | None = None


@dataclass
class Reference:
    """Desired minimal coordinates θ_d, θ̇_d, θ̈_d and desired constraint multiplier λ_d.

    Any field may be None: a missing θ̇_d/θ̈_d is zero (setpoint), a missing λ_d is zero force."""

    theta: np.ndarray | None = None
    theta_dot: np.ndarray | None = None
    theta_ddot: np.ndarray | None = None
    lambda_: np.ndarray | None = None
