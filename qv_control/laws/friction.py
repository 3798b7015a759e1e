"""Friction compensation for a sliding contact, added to any law of the tool frame.

The laws model a frictionless surface contact (a ``point_contact`` with ``axes: [z]``). A real surface
adds a tangential force f_t on the tool, i.e. the generalised force J_pᵀf_t on the robot (J_p: the tool's
world-aligned translational Jacobian), which the law sees as a disturbance: it drags the path and, through
the coupling of the arm's inertia, the normal force. The compensation cancels Coulomb friction:

    τ = τ_law − J_pᵀ f̂_t,    f̂_t = −μ̂ |λ_meas| v̂_t

with v̂_t the unit sliding direction of the tool point (measured q̇) and μ̂ either a fixed parameter
(``mode="model"``, ``mu``) or **estimated** from the F/T sensor (``mode="measured"``, ``mu`` the prior
used until the tool first slides): μ̂ is the low-passed (``filter_hz``) ratio −f_t·v̂_t / |λ_meas| of the
measured tangential force along the sliding
direction to the measured normal force. Estimating the one constant μ rather than feeding the measured
tangential force back keeps the F/T noise and the sensor's sample of delay out of the torque.
The sliding direction v̂_t comes from the measured q̇; with joint-velocity noise (σ = 0.01 rad/s gives mm/s
on the tool against a 6 cm/s slide) a raw v̂_t turns the 8 N of a μ = 0.8 contact by its noise and the
compensation itself injects that as a tangential force that the arm's inertia couples into the normal force
(Drake, μ = 0.8 + q̇ noise: 1.9 % force RMS error). ``direction_hz`` > 0 low-passes the tangential
velocity before v̂_t is taken (0.97 % at 5 Hz); its lag, 1/(2π f_c) ≈ 32 ms at 5 Hz, turns v̂_t by
ω·32 ms on a circle of angular rate ω (0.05 rad at the demo's 1.6 rad/s), a slowly varying error the
motion integral removes. Both act only while the tool slides (tangential speed ≥ ``v_eps``): while it
sticks the tangential force is a constraint reaction to the law's own push, and cancelling it would
close a loop of gain one.

``direction="reference"`` takes v̂_t from the reference instead, the tool's desired tangential velocity
``reference.theta_dot[reference_axes]`` (the laws of the conditions start θ with the tool's x, y): no
noise, no lag, and it compensates from the moment the reference moves, while the tool still sticks, with
μ̂ = the prior ``mu`` until the tool slides and the estimate takes over (no loop: the magnitude is μ̂|λ|,
never the measured reaction). Without it the motion loop winds up against static friction when a
motion starts, the push lowers the normal force through the arm's inertia coupling and the breakaway
adds the compensation on top of the wound-up push (Drake, μ = 0.8: −8 % then +11 %, 0.51 s before the
force stays within 5 %; 0.020 s with the reference direction and a prior of 0.5). Above the true μ the
prior pushes the tool ahead at the start (prior 0.8 on μ = 0.3: 0.40 s), far below it the wind-up remains
(prior 0.3 on μ = 0.8: 0.48 s).
In quasi-velocities the cancelled term has a motion part V₂ᵀQ⁻¹J_pᵀf_t (what drags the path) and a force
part V₁ᵀQ⁻¹J_pᵀf_t (which the force PI would otherwise have to absorb); both are removed. Only while the
law's contact constraint is active; ``law.peak_ratio``, ``law.saturation`` ... are forwarded.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import DimensionError
from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED as LWA
from qv_dynamics.state import Reference, State


class FrictionCompensation:
    """Wrap ``law`` (any object with ``compute(state, reference)``) with τ −= J_pᵀ f̂_t (module doc)."""

    def __init__(self, law, system, frame: str, contact: str = "contact", mode: str = "measured",
                 mu: float = 0.0, normal_axis: int = 2, v_eps: float = 1e-3, filter_hz: float = 2.0,
                 direction_hz: float = 0.0, direction: str = "measured", reference_axes=(0, 1)):
        if mode not in ("measured", "model"):
            raise DimensionError(f"friction compensation mode must be 'measured' or 'model', got {mode!r}")
        if direction not in ("measured", "reference"):
            raise DimensionError(f"friction direction must be 'measured' or 'reference', got {direction!r}")
        self.law, self.system, self.mode, self.direction = law, system, mode, direction
        self.reference_axes = [int(i) for i in reference_axes]
        if len(self.reference_axes) != 2:
            raise DimensionError(f"reference_axes must name the 2 tangential entries, got {reference_axes!r}")
        self.fid = system.frame_id(frame)
        self.contact = contact
        system.constraint(contact)
        self.mu, self.v_eps = float(mu), float(v_eps)
        self.tangent = [i for i in range(3) if i != normal_axis]
        self._f_meas = np.zeros(3)
        self.last_f_t = np.zeros(3)
        self.filter_hz = float(filter_hz)
        self._t: float | None = None     # time of the last μ̂ update (None: restart the estimate)
        self.direction_hz = float(direction_hz)
        self._v: tuple[float, np.ndarray] | None = None   # (t, low-passed tangential velocity)

    def __getattr__(self, name):  # peak_ratio, saturation, last, theta_names ... of the wrapped law
        return getattr(self.law, name)

    def measure(self, force_world: np.ndarray) -> None:
        """The contact force on the tool from the F/T sensor (world axes), for ``mode="measured"``."""
        self._f_meas = np.asarray(force_world, float).reshape(3).copy()

    def _mu(self, t: float, v_hat: np.ndarray, lam: float) -> float:
        """μ̂: the fixed parameter, or the low-passed measured ratio −f_t·v̂_t/|λ| (module doc)."""
        if self.mode == "model":
            return self.mu
        ratio = max(0.0, -float(self._f_meas[self.tangent] @ v_hat)) / max(abs(lam), 1e-6)
        if self._t is None or t <= self._t:
            self.mu = ratio if self._t is None else self.mu
        else:
            alpha = 1.0 - np.exp(-2 * np.pi * self.filter_hz * (t - self._t))
            self.mu += alpha * (ratio - self.mu)
        self._t = t
        return self.mu

    def _velocity(self, t: float, v: np.ndarray) -> np.ndarray:
        """The tangential velocity low-passed at ``direction_hz`` (0: as measured); restarts after a gap."""
        if self.direction_hz <= 0:
            return v
        if self._v is None or not 0.0 <= t - self._v[0] <= 0.1:
            self._v = (t, v.copy())
        elif t > self._v[0]:
            alpha = 1.0 - np.exp(-2 * np.pi * self.direction_hz * (t - self._v[0]))
            self._v = (t, self._v[1] + alpha * (v - self._v[1]))
        return self._v[1].copy()

    def _reference_direction(self, reference: Reference | None) -> np.ndarray | None:
        """Unit desired tangential velocity (``direction="reference"``), None below ``v_eps``."""
        v = np.asarray(reference.theta_dot, float)[self.reference_axes]
        speed = float(np.linalg.norm(v))
        return v / speed if speed >= self.v_eps else None

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        tau = self.law.compute(state, reference)
        self.last_f_t = np.zeros(3)
        if not self.system.constraint(self.contact).active or state.lambda_meas is None:
            self._t = self._v = None
            return tau
        model, data = self.system.model, self.system.data
        J = pin.computeFrameJacobian(model, data, np.asarray(state.q, float), self.fid, LWA)[:3]
        v = self._velocity(float(state.t), (J @ np.asarray(state.qdot, float))[self.tangent])
        speed = float(np.linalg.norm(v))
        lam = float(np.ravel(state.lambda_meas)[0])
        if speed >= self.v_eps:
            self._mu(float(state.t), v / speed, lam)         # μ̂ is estimated only while the tool slides
        d = v / speed if speed >= self.v_eps else None
        if self.direction == "reference" and reference is not None and reference.theta_dot is not None:
            d = self._reference_direction(reference)
        if d is None:
            return tau
        self.last_f_t[self.tangent] = -self.mu * abs(lam) * d
        return tau - J.T @ self.last_f_t


__all__ = ["FrictionCompensation"]
