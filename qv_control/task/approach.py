"""The guarded approach: a touch-down speed planned from the contact inertia and the surface stiffness.

Impact model (the lecture's): a tool point of effective mass Λ_c = (J_c M⁻¹ J_cᵀ)⁻¹ along the surface
normal n that meets a surface of stiffness k at normal speed ṙ_c⁻ delivers the impulse Λ_c ṙ_c⁻ over the
contact's time constant √(Λ_c/k), a force peak of c·ṙ_c⁻√(kΛ_c) (c = 1 for a lightly damped contact, the
spring's peak; c = 2 for a critically damped one, the damping force at first touch). The planned
touch-down speed keeps the peak within ρ × the commanded force F:

    ṙ_c⁻ = ρ F / (c √(k Λ_c))

The stiffness is measured once by a static press (:func:`stiffness_from_press`): press with two forces
F₁ < F₂ and read the tool height z₁, z₂ at rest; k = (F₂ − F₁)/(z₁ − z₂).

:class:`ApproachProfile` is the vertical reference of the descent: accelerate at ``acc`` to the cruise
speed v₁, cruise down to ``slow_gap`` above the highest surface height believed possible (told height +
``uncertainty``), brake at ``acc`` to the touch speed v₂ and continue at v₂ until the wrench reports the
contact. A descent that starts at or below that slow-down height runs at v₂ only.
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import ModelError


def contact_inertia(system, q, frame: str, axis: int = 2) -> float:
    """Λ_c = (J_c M⁻¹ J_cᵀ)⁻¹ of ``frame``'s origin along world axis ``axis`` (the surface normal) at q."""
    model, data = system.model, system.data
    pin.computeJointJacobians(model, data, np.asarray(q, float))
    pin.updateFramePlacements(model, data)
    Jc = pin.getFrameJacobian(model, data, system.frame_id(frame), pin.LOCAL_WORLD_ALIGNED)[axis]
    return 1.0 / float(Jc @ np.linalg.solve(system.mass_matrix(q), Jc))


def touch_speed(force: float, Lambda_c: float, stiffness: float, peak_ratio: float = 1.5,
                damping_factor: float = 1.0) -> float:
    """Touch-down speed ṙ_c⁻ = ρF/(c√(kΛ_c)) whose impact peak stays within ``peak_ratio`` ρ × ``force``."""
    for name, v in (("force", force), ("Lambda_c", Lambda_c), ("stiffness", stiffness),
                    ("peak_ratio", peak_ratio), ("damping_factor", damping_factor)):
        if not (math.isfinite(v) and v > 0):
            raise ModelError(f"touch_speed: {name} must be a positive number, got {v!r}")
    return peak_ratio * force / (damping_factor * math.sqrt(stiffness * Lambda_c))


def stiffness_from_press(forces, heights) -> float:
    """Surface stiffness k [N/m] from a static press: the least-squares slope of F against −z over
    (F_i, z_i) pairs read at rest (at least two distinct forces). ModelError if the heights do not fall
    as the force grows."""
    F = np.asarray(forces, float).ravel()
    z = np.asarray(heights, float).ravel()
    if F.size != z.size or F.size < 2 or np.ptp(F) <= 0:
        raise ModelError("stiffness_from_press: give at least two (force, height) pairs with distinct forces")
    slope = np.polyfit(F, z, 1)[0]          # dz/dF [m/N]
    if not slope < 0:
        raise ModelError(f"stiffness_from_press: the tool height must fall as the force grows (dz/dF = {slope:g})")
    return float(-1.0 / slope)


class ApproachProfile:
    """Vertical reference (z, ż, z̈) of a descent started at height ``z0`` at time ``t0`` (module doc).
    ``v_touch=None``: a fixed-speed descent (accelerate to ``speed`` and keep it)."""

    def __init__(self, z0: float, t0: float, speed: float, v_touch: float | None, z_slow: float,
                 acc: float = 2.0):
        self.z0, self.t0, self.acc = float(z0), float(t0), float(acc)
        v1 = float(speed)
        v2 = v1 if v_touch is None else min(float(v_touch), v1)
        if self.z0 <= z_slow:      # re-approach from (just above) the surface: at the touch speed only
            v1 = v2
        self.v1, self.v2 = v1, v2
        self.t_acc = v1 / self.acc
        self.d_brake = (v1 * v1 - v2 * v2) / (2 * self.acc)
        self.d_cruise = max(0.0, self.z0 - z_slow - self.d_brake - 0.5 * v1 * self.t_acc) if v2 < v1 else np.inf
        self.t_cruise_end = self.t_acc + self.d_cruise / v1
        self.t_brake = (v1 - v2) / self.acc

    def __call__(self, t: float) -> tuple[float, float, float]:
        v1, v2, a = self.v1, self.v2, self.acc
        s = max(0.0, t - self.t0)
        if s <= self.t_acc:
            # the acceleration starts strictly after t0 (1 ns: a state stamped t0 in integer ns is not after it)
            return self.z0 - 0.5 * a * s * s, -a * s, (-a if t > self.t0 + 1e-9 else 0.0)
        if s <= self.t_cruise_end:
            return self.z0 - 0.5 * v1 * self.t_acc - v1 * (s - self.t_acc), -v1, 0.0
        z1 = self.z0 - 0.5 * v1 * self.t_acc - self.d_cruise
        if s <= self.t_cruise_end + self.t_brake:
            u = s - self.t_cruise_end
            return z1 - v1 * u + 0.5 * a * u * u, -(v1 - a * u), a
        return z1 - self.d_brake - v2 * (s - self.t_cruise_end - self.t_brake), -v2, 0.0


__all__ = ["ApproachProfile", "contact_inertia", "stiffness_from_press", "touch_speed"]
