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
contact. A descent that starts at or below that slow-down height runs at v₂ only. The cruise speed is what
the gap z₀ − z_slow allows: a gap too short to reach the asked speed and brake from it gives a triangular
profile whose peak v̂ = √(a(z₀ − z_slow) + v₂²/2) brakes to v₂ exactly at z_slow, so the touch-down speed is
the planned one whatever the asked cruise speed (0.3 m/s over the demo's 9 mm gap: v̂ = 0.13 m/s).

:class:`ReferenceClock` is the time such a profile is read at: the states' clock, advanced at most
``max_step`` per update and slowed to a stop while the reference leads the measured tool by the lead bound,
so a late state or a tool that does not follow never leaves the reference ahead of the tool.
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
    ``v_touch=None``: a fixed-speed descent (accelerate to ``speed`` and keep it).

    The cruise speed is what the gap allows: v₁ = min(speed, max(v̂, v₂)), v̂² = a·(z₀ − z_slow) + v₂²/2 the
    peak of a triangular profile that accelerates from rest and brakes to v₂ exactly at z_slow. So the speed
    at z_slow is v₂ whatever ``speed`` says (a gap too short to reach v₂ from rest: v₂ is reached below
    z_slow, never exceeded)."""

    def __init__(self, z0: float, t0: float, speed: float, v_touch: float | None, z_slow: float,
                 acc: float = 2.0):
        self.z0, self.t0, self.acc = float(z0), float(t0), float(acc)
        v1 = float(speed)
        v2 = v1 if v_touch is None else min(float(v_touch), v1)
        gap = self.z0 - float(z_slow)
        if v2 < v1:     # a re-approach from (just above) the surface runs at the touch speed only
            v1 = v2 if gap <= 0 else min(v1, max(math.sqrt(self.acc * gap + 0.5 * v2 * v2), v2))
        self.v1, self.v2 = v1, v2
        self.t_acc = v1 / self.acc
        self.d_acc = 0.5 * v1 * self.t_acc
        self.d_brake = (v1 * v1 - v2 * v2) / (2 * self.acc)
        self.d_cruise = max(0.0, gap - self.d_brake - self.d_acc) if v2 < v1 else math.inf
        self.t_cruise_end = self.t_acc + self.d_cruise / v1
        self.t_brake = (v1 - v2) / self.acc

    def __call__(self, t: float) -> tuple[float, float, float]:
        v1, v2, a = self.v1, self.v2, self.acc
        s = max(0.0, t - self.t0)
        if s <= self.t_acc:
            # the acceleration starts strictly after t0 (1 ns: a state stamped t0 in integer ns is not after it)
            return self.z0 - 0.5 * a * s * s, -a * s, (-a if t > self.t0 + 1e-9 else 0.0)
        if s <= self.t_cruise_end:
            return self.z0 - self.d_acc - v1 * (s - self.t_acc), -v1, 0.0
        z1 = self.z0 - self.d_acc - self.d_cruise
        if s <= self.t_cruise_end + self.t_brake:
            u = s - self.t_cruise_end
            return z1 - v1 * u + 0.5 * a * u * u, -(v1 - a * u), a
        return z1 - self.d_brake - v2 * (s - self.t_cruise_end - self.t_brake), -v2, 0.0

    def time_at(self, z: float) -> float:
        """The time at which the profile passes height ``z`` (t0 for z ≥ z0): the inverse of z(t)."""
        d, v1, v2, a = self.z0 - float(z), self.v1, self.v2, self.acc
        if d <= 0:
            return self.t0
        if d <= self.d_acc:
            return self.t0 + math.sqrt(2 * d / a)
        d -= self.d_acc
        if d <= self.d_cruise:
            return self.t0 + self.t_acc + d / v1
        d -= self.d_cruise
        if d <= self.d_brake:
            return self.t0 + self.t_cruise_end + (v1 - math.sqrt(max(0.0, v1 * v1 - 2 * a * d))) / a
        return self.t0 + self.t_cruise_end + self.t_brake + (d - self.d_brake) / v2


class LiftProfile:
    """Vertical reference of a lift: up from ``z0`` at ``speed`` for ``duration`` s from ``t0``, then held."""

    def __init__(self, z0: float, t0: float, speed: float, duration: float):
        self.z0, self.t0, self.speed, self.duration = float(z0), float(t0), float(speed), float(duration)

    def __call__(self, t: float) -> tuple[float, float, float]:
        s = t - self.t0
        moving = 0.0 <= s < self.duration
        return self.z0 + min(max(s, 0.0), self.duration) * self.speed, (self.speed if moving else 0.0), 0.0

    def time_at(self, z: float) -> float:
        """The time at which the lift passes height ``z`` (clamped to the lift)."""
        return self.t0 + min(max((float(z) - self.z0) / self.speed, 0.0), self.duration)


class ReferenceClock:
    """The time τ a motion profile is read at: the clock of the states, slowed so that neither a late state
    nor a tool that does not follow makes the reference run away from the measured tool.

        τ_k = τ_{k−1} + g_k · min(t_k − t_{k−1}, Δ_max),    g_k = clip(2 − 2ℓ_k/b, 0, 1)

    with ℓ_k how far the reference (read at τ_{k−1}) leads the measured tool along its direction of motion
    and b the lead bound: full speed while ℓ ≤ b/2, stopped at ℓ ≥ b. The owner then keeps the reference
    within b of the tool (:meth:`clamp` with the profile's inverse): a tool that fell behind (held by a
    brake, pushed back, reversed under a held braking command) takes the reference back to b ahead of it, a
    tool that went on ahead (under a held command) moves it on to b behind it (a descent: the law pulls it
    back up by b at most); a lift's reference is moved on to the tool whenever the tool is ahead (nothing
    pulls it back down towards the surface),
    so the law never chases an error above b. Δ_max bounds the advance of one update:
    after a state that comes late (a descheduled controller, a lost tick) the reference goes on from where
    it was instead of jumping by the gap, so the law does not chase it with added speed. Between updates
    ``at(t)`` = τ_k + g_k clip(t − t_k, 0, Δ_max) (a law's sample may be predicted ahead of the state's
    stamp). The reference read at τ(t) has the speed g·ż(τ) and the acceleration g²·z̈(τ) (ż = z'(τ)τ̇)."""

    def __init__(self, t: float, max_step: float, lead: float):
        self.t = self.tau = float(t)
        self.max_step, self.lead = float(max_step), float(lead)
        self.g = 1.0

    def advance(self, t: float, lead: float, max_step: float | None = None) -> float:
        """One update at t with the reference leading the measured tool by ``lead`` (m, ≥ 0 ahead); τ.
        ``max_step``: Δ_max from now on (the owner's choice from the update period; default: as built)."""
        if max_step is not None:
            self.max_step = float(max_step)
        self.g = min(1.0, max(0.0, 2.0 - 2.0 * lead / self.lead)) if self.lead > 0 else 1.0
        self.tau += self.g * min(max(0.0, t - self.t), self.max_step)
        self.t = max(self.t, float(t))
        return self.tau

    def clamp(self, low: float = -math.inf, high: float = math.inf) -> None:
        """τ ← min(max(τ, ``low``), ``high``) (the class doc: the reference kept within b of the tool)."""
        self.tau = min(max(self.tau, float(low)), float(high))

    def at(self, t: float) -> float:
        return self.tau + self.g * min(max(0.0, t - self.t), self.max_step)


__all__ = ["ApproachProfile", "LiftProfile", "ReferenceClock", "contact_inertia", "stiffness_from_press", "touch_speed"]
