"""Checks of a contact task before it starts: every target reachable with the tool's orientation, and the
torque to press with the largest commanded force within the effort limits.

Reachability: for each target p_i (start pose and the trace's points on the surface) a damped
least-squares inverse kinematics from the start configuration q₀ solves for the tool pose (p_i, R₀):
Δq = Jᵀ(JJᵀ + μ²I)⁻¹e with e = (p_i − p, log₃(R₀Rᵀ)), q clamped to the joint limits; a residual above
``tol`` (position, m; orientation, rad) after ``iterations`` steps makes the target unreachable.

Effort: at each solved configuration the static torque of a press with force F along the surface
normal, τ = g(q) − J_nᵀF (SPEC: M q̈ + h = τ − Aᵀλ with λ = −F), must satisfy |τ_i| ≤ τ_max,i.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import ModelError


class TaskRefused(ModelError):
    """A contact task that cannot be run as described (the message says which target or joint)."""


def solve_pose(system, q0, frame: str, p, R, iterations: int = 200, damping: float = 1e-3):
    """Damped least-squares IK for the pose (p, R) of ``frame`` from q0 (module doc): (q, |e_p|, |e_R|)."""
    model, data = system.model, system.data
    fid = system.frame_id(frame)
    q = np.asarray(q0, float).copy()
    lo, hi = model.lowerPositionLimit, model.upperPositionLimit
    for _ in range(iterations):
        pin.framesForwardKinematics(model, data, q)
        oMf = data.oMf[fid]
        e = np.concatenate([np.asarray(p, float) - oMf.translation, pin.log3(R @ oMf.rotation.T)])
        if np.linalg.norm(e) < 1e-9:
            break
        J = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)
        dq = J.T @ np.linalg.solve(J @ J.T + damping ** 2 * np.eye(6), e)
        q = np.clip(pin.integrate(model, q, dq), lo, hi)
    pin.framesForwardKinematics(model, data, q)
    oMf = data.oMf[fid]
    return q, float(np.linalg.norm(p - oMf.translation)), float(np.linalg.norm(pin.log3(R @ oMf.rotation.T)))


def check_task(system, q0, frame: str, R, targets, force: float, normal_axis: int = 2,
               tol: tuple[float, float] = (1e-3, 1e-2)) -> list[np.ndarray]:
    """Raise :class:`TaskRefused` naming the first unreachable target or the first joint whose press torque
    exceeds its effort limit (module doc); returns the solved configurations."""
    limits = np.asarray(system.effort_limits(), float)
    fid = system.frame_id(frame)
    model, data = system.model, system.data
    qs = []
    for i, p in enumerate(np.asarray(targets, float)):
        q, ep, eR = solve_pose(system, q0, frame, p, R)
        if ep > tol[0] or eR > tol[1]:
            raise TaskRefused(f"task target {i} at ({p[0]:.3f}, {p[1]:.3f}, {p[2]:.3f}) m is unreachable with the "
                              f"tool's orientation (IK residual {1e3 * ep:.1f} mm, {eR:.3f} rad)")
        Jn = pin.computeFrameJacobian(model, data, q, fid, pin.LOCAL_WORLD_ALIGNED)[normal_axis]
        tau = pin.computeGeneralizedGravity(model, data, q) - Jn * force
        over = np.nonzero(np.abs(tau) > limits)[0]
        if over.size:
            j = int(over[0])
            raise TaskRefused(f"task force {force:g} N exceeds the effort limit of "
                              f"{system.velocity_names[j]} at target {i}: |τ| = {abs(tau[j]):.1f} > "
                              f"{limits[j]:.1f} N m")
        qs.append(q)
    return qs


__all__ = ["TaskRefused", "check_task", "solve_pose"]
