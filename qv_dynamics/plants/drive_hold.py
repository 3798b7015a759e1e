"""The drives' own hold: what a robot's joint drives do when no torque command comes (a plant's
``command_timeout``, or no command yet).

A torque-controlled arm does not run a held torque open loop for ever: Franka's FCI stops the robot after
20 missed 1 kHz commands, Universal Robots' external control script stops after its receive timeout (20 ms
by default), Rethink's arms fall back to position control and hold the pose. ros2_control's topic-based
effort path has no such timeout of its own (the forward command controller and the simulated hardware
interfaces keep writing the last value), so the plant nodes model the drive's: after ``command_timeout``
s without a command each actuated joint holds the position it had then, with damping, on a gravity model
(as a position-holding drive on its own model, or a brake):

    τ_i = g_i(q) + K_p,i (q_h,i − q_i) − K_d,i q̇_i,    K_p,i = ω² M_ii(q_h),  K_d,i = 2ω M_ii(q_h)

(critically damped at the bandwidth ω for a joint whose inertia is the diagonal entry M_ii; q_h − q is
``pin.difference``, so continuous joints and a free-flyer root are handled; the base of a floating-base
robot is not actuated: its rows stay zero). The hold is clipped to the effort limits. A joint moving at
q̇₀ when the hold engages stops within |q̇₀|/(ω e) of where it was (the largest excursion of a critically
damped joint), which bounds what a held command can do to the time ``command_timeout``.
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..errors import ModelError

HOLD_BANDWIDTH = 40.0   # rad/s: ω of the hold (stable with a 1 ms control period: ω·dt = 0.04)


def check_bandwidth(omega: float) -> float:
    """ω in (0, 500] rad/s (ModelError otherwise): beyond it an explicit 1 kHz loop is not a stable hold."""
    if isinstance(omega, bool) or not isinstance(omega, (int, float)) or not math.isfinite(omega) \
            or not 0.0 < omega <= 500.0:
        raise ModelError(f"hold_bandwidth must be a number in (0, 500] rad/s, got {omega!r}")
    return float(omega)


class DriveHold:
    """The hold of the module doc for the joints at velocity indices ``v_index`` of ``system``."""

    def __init__(self, system, v_index, bandwidth: float = HOLD_BANDWIDTH):
        self.system = system
        self.model = system.model
        self.data = self.model.createData()      # private: the hold never clobbers the system's Data
        self.v_index = np.asarray(v_index, int)
        self.omega = check_bandwidth(bandwidth)
        self.limits = np.asarray(system.effort_limits(), float)
        self.q_hold: np.ndarray | None = None
        self.kp = self.kd = np.zeros(len(self.v_index))

    @property
    def engaged(self) -> bool:
        return self.q_hold is not None

    def engage(self, q) -> None:
        """Hold the pose ``q`` (the gains from the joint inertias there)."""
        q = np.asarray(q, float).copy()
        M = pin.crba(self.model, self.data, q)
        m = np.diag(M)[self.v_index]
        self.kp, self.kd = self.omega ** 2 * m, 2.0 * self.omega * m
        self.q_hold = q

    def release(self) -> None:
        self.q_hold = None

    def torque(self, q, qdot) -> np.ndarray:
        """τ (velocity order, zeros where not actuated) holding ``q_hold``; engages at ``q`` if not engaged."""
        q, qdot = np.asarray(q, float), np.asarray(qdot, float)
        if self.q_hold is None:
            self.engage(q)
        g = pin.computeGeneralizedGravity(self.model, self.data, q)
        err = pin.difference(self.model, q, self.q_hold)
        ix = self.v_index
        tau = np.zeros(self.model.nv)
        tau[ix] = g[ix] + self.kp * err[ix] - self.kd * qdot[ix]
        return np.clip(tau, -self.limits, self.limits)


__all__ = ["HOLD_BANDWIDTH", "DriveHold", "check_bandwidth"]
