"""The safe output of an effort controller: what it sends when its law cannot be trusted (a failed tick, a
stale state, a task's safe hold). Safe in contact (SPEC §6): stop pressing, lift off, hold the pose with
damping, within one tick, with nothing of the law that just failed.

Mode ``hold`` (the damped joint-space hold)::

    τ = g(q) + M₀ (ω² (q_h ⊖ q) − 2ζω q̇),    clipped to the effort limits

- q₀ the pose latched when the safe output starts (its first tick), M₀ = M(q₀) (CRBA) and g the model's
  gravity torque: near q₀ the closed loop is q̈ ≈ ω²(q_h ⊖ q) − 2ζω q̇, every joint a damped second-order
  system of natural frequency ω (``hz``, default 4 Hz) and damping ratio ζ (default 1, critically damped):
  the pose is held (a gravity-model error Δg leaves the steady offset M₀⁻¹Δg/ω², no drift) and the motion
  is stopped;
- q_h = q₀ ⊕ Δq, the latched pose lifted by ``lift`` m along the surface normal n of a tool ``frame``:
  Δq = Jᵀ(JJᵀ + μ²I)⁻¹ (ℓ n, 0) with J the frame's 6 × n Jacobian at q₀ (world-aligned axes; the tool's
  orientation kept, μ = 10⁻³): a tool that was pressing is pulled off the surface rather than held into it.
  The law's press is gone at the first safe tick: g(q) carries the arm's weight, and nothing more pushes.

Modes ``gravity`` (τ = g(q): the arm floats, it drifts under any model error and keeps what momentum it
has) and ``zero`` (τ = 0) are kept for robots where a joint hold does not apply (a floating base standing on
its legs); a contact task always uses ``hold``.

On the stale-state path (the watchdog) the last received pose stands for q and the velocity is unknown: with
q frozen the "spring" is a constant torque, so a pose latched there is not lifted (q_h = q₀: τ = g(q₀), what
the arm needs to float where it was last seen; an open-loop lift would push it up for as long as the states
stay away: 9 cm in 0.4 s on the demo's Panda). The first state with a velocity re-latches the pose, lifted.
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import ModelError

MODES = ("zero", "gravity", "hold")


class SafeOutput:
    """τ of the module doc for ``system`` (a :class:`~qv_dynamics.ConstrainedSystem`). ``torque(mode, q,
    q̇)`` latches the pose at its first call after :meth:`release` (or at an explicit :meth:`latch`)."""

    def __init__(self, system, hz: float = 4.0, damping: float = 1.0):
        if not (math.isfinite(hz) and hz > 0 and math.isfinite(damping) and damping > 0):
            raise ModelError(f"safe output: hz and damping must be positive numbers, got {hz!r}, {damping!r}")
        self.system, self.model = system, system.model
        self.data = system.model.createData()
        self.w, self.zeta = 2 * math.pi * float(hz), float(damping)
        self.limits = np.asarray(system.effort_limits(), float)
        self.q0: np.ndarray | None = None
        self.q_h: np.ndarray | None = None
        self.M0: np.ndarray | None = None
        self.blind = False          # latched without a velocity (the watchdog): not lifted
        self.latches = 0

    @property
    def latched(self) -> bool:
        return self.q0 is not None

    def latch(self, q, lift: float = 0.0, frame: str | None = None, normal=(0.0, 0.0, 1.0)) -> None:
        """Hold about q (module doc), lifted by ``lift`` m along ``normal`` at ``frame``."""
        model, data = self.model, self.data
        q = np.asarray(q, float).copy()
        M = pin.crba(model, data, q)
        self.M0 = np.triu(M) + np.triu(M, 1).T
        dq = np.zeros(model.nv)
        if lift > 0 and frame:
            J = pin.computeFrameJacobian(model, data, q, self.system.frame_id(frame), pin.LOCAL_WORLD_ALIGNED)
            e = np.concatenate([lift * np.asarray(normal, float), np.zeros(3)])
            dq = J.T @ np.linalg.solve(J @ J.T + 1e-6 * np.eye(6), e)
        self.q0, self.q_h = q, pin.integrate(model, q, dq)
        self.latches += 1

    def release(self) -> None:
        """Forget the latched pose (the law is back in control): the next safe tick latches anew."""
        self.q0 = self.q_h = self.M0 = None
        self.blind = False

    def gravity(self, q) -> np.ndarray:
        return pin.computeGeneralizedGravity(self.model, self.data, np.asarray(q, float)).copy()

    def torque(self, mode: str, q, qdot=None, lift: float = 0.0, frame: str | None = None) -> np.ndarray:
        """The safe τ for the state (q, q̇) (q̇ None: unknown, taken as 0); ``lift``/``frame`` are used
        when this call latches the pose."""
        if mode == "zero" or q is None:
            return np.zeros(self.model.nv)
        if mode == "gravity":
            return self.gravity(q)
        if mode != "hold":
            raise ModelError(f"safe output mode must be one of {MODES}, got {mode!r}")
        if not self.latched or (self.blind and qdot is not None):
            self.latch(q, lift if qdot is not None else 0.0, frame)
            self.blind = qdot is None
        q = np.asarray(q, float)
        v = np.zeros(self.model.nv) if qdot is None else np.asarray(qdot, float)
        if v.shape != (self.model.nv,) or not np.all(np.isfinite(v)):
            v = np.zeros(self.model.nv)      # an unusable velocity: the spring without damping
        e = pin.difference(self.model, q, self.q_h)
        tau = self.gravity(q) + self.M0 @ (self.w * self.w * e - 2 * self.zeta * self.w * v)
        return np.clip(tau, -self.limits, self.limits)


__all__ = ["MODES", "SafeOutput"]
