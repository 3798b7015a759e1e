"""Model-based joint-velocity observer: q̇ from a noisy measurement, the commanded torque and the model.

A low-pass on the measured q̇ trades noise against lag: the lag of a filter below the motion loop's
bandwidth costs damping, and above it the loop follows the noise. The observer predicts the velocity from
the constrained dynamics instead and corrects the prediction with the measurement at a low bandwidth, so
the noise is cut without lagging what the model explains (continuous form, y the measured q̇):

    v̂̇ = q̈_m(q, v̂, τ) + d̂ + l₁(y − v̂),    d̂̇ = l₂(y − v̂),    l₁ = 2ζω, l₂ = ω², ω = 2π f_o

    q̈_m = a − M⁻¹Aᵀ(AM⁻¹Aᵀ)⁻¹(A a + Ȧq̇),   a = M⁻¹(τ − h(q, v̂) + τ_ext)

i.e. the acceleration of the SPEC's constrained dynamics M q̈ + h = τ − Aᵀλ with the active constraint
rows A of ``system`` (a stiff contact: no acceleration along its normal) and a measured external
generalised force τ_ext (e.g. J_pᵀ f of an F/T sensor: the tangential friction the model lacks). d̂ is a
generalised-acceleration disturbance (model error, unmodelled friction): with it a constant model error
leaves no steady velocity error. The estimation error e = q̇ − v̂ obeys ë + l₁ė + l₂e = δ̇ for an
acceleration error δ of the model: a second-order low-pass of bandwidth ω on the noise (ζ = 1: a double
pole at −ω), no lag on what the model predicts. When a constraint row becomes active (touch-down), v̂
jumps by the lecture's impact map v̂⁺ = N_c v̂⁻ = v̂⁻ − M⁻¹Aᵀ(AM⁻¹Aᵀ)⁺Av̂⁻ (a plastic impact).

Discrete (semi-implicit Euler, Δt from the sample times): v⁻ = v̂ + Δt(q̈_m + d̂), r = y − v⁻,
v̂ = v⁻ + l₁Δt r, d̂ += l₂Δt r. A gap longer than ``max_dt`` (or time going back) restarts from y.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import DimensionError, as_vector
from .impact import m_projection
from .projection import direct_dynamics


class VelocityObserver:
    """Joint-velocity observer of ``system`` (module doc): ``update(t, q, qdot_meas, tau, tau_ext)`` → v̂.

    ``bandwidth_hz`` f_o of the correction (noise bandwidth; f_o ≤ 0: v̂ = y), ``damping`` ζ,
    ``disturbance`` estimates d̂ (off: l₂ = 0). ``tau`` is the torque applied since the previous sample
    (the last command), ``tau_ext`` the measured external generalised force (None: zero)."""

    def __init__(self, system, bandwidth_hz: float = 20.0, damping: float = 1.0, disturbance: bool = True,
                 max_dt: float = 0.1):
        if not (math.isfinite(bandwidth_hz) and math.isfinite(damping) and damping > 0):
            raise DimensionError(f"observer bandwidth_hz must be finite and damping > 0, got {bandwidth_hz}, "
                                 f"{damping}")
        self.system = system
        w = 2 * math.pi * max(0.0, float(bandwidth_hz))
        self.l1, self.l2 = 2 * float(damping) * w, (w * w if disturbance else 0.0)
        self.max_dt = float(max_dt)
        self.reset()

    def reset(self) -> None:
        self.v: np.ndarray | None = None             # v̂
        self.d = np.zeros(self.system.nv)            # d̂
        self._t: float | None = None
        self._rows: list[str] = []                   # active constraint rows at the last sample
        self.impacts = 0                             # impact maps applied (touch-downs seen)

    def acceleration(self, q: np.ndarray, v: np.ndarray, tau: np.ndarray, tau_ext: np.ndarray | None
                     ) -> np.ndarray:
        """q̈_m of the constrained dynamics (module doc) at (q, v) under τ + τ_ext."""
        terms = self.system.evaluate(q, v, coriolis=False, checked=True)
        return direct_dynamics(terms, tau=tau if tau_ext is None else tau + tau_ext)[0]

    def update(self, t: float, q, qdot_meas, tau, tau_ext=None) -> np.ndarray:
        """One sample: predict from the model, correct with the measured q̇ (module doc); returns v̂."""
        sysm = self.system
        q = sysm.check_q(q)
        y = as_vector("qdot_meas", qdot_meas, sysm.nv)
        tau = as_vector("tau", tau, sysm.nv)
        tau_ext = None if tau_ext is None else as_vector("tau_ext", tau_ext, sysm.nv)
        t = float(t)
        dt = None if self._t is None else t - self._t
        self._t = t
        rows = list(sysm.row_labels)
        if self.v is None or dt is None or not 0.0 < dt <= self.max_dt or self.l1 <= 0:
            self.v, self._rows = y.copy(), rows
            if dt is None or not 0.0 <= dt <= self.max_dt:
                self.d[:] = 0.0
            return self.v.copy()
        if any(r not in self._rows for r in rows):  # a row became active: the impact map v̂⁺ = N_c v̂⁻
            terms = sysm.evaluate(q, self.v, coriolis=False, checked=True)
            self.v = m_projection(terms.M, terms.A, self.v)[0]
            self.impacts += 1
        self._rows = rows
        v_minus = self.v + dt * (self.acceleration(q, self.v, tau, tau_ext) + self.d)
        r = y - v_minus
        self.v = v_minus + (self.l1 * dt) * r
        self.d = self.d + (self.l2 * dt) * r
        return self.v.copy()


__all__ = ["VelocityObserver"]
