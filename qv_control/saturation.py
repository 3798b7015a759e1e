"""Torque limits that keep the force channel.

Every law splits its command into three affine channels::

    τ(α, β) = τ_base + β·τ_force + α·τ_motion,      0 ≤ α, β ≤ 1

- quasi-velocity laws: τ_base = g, τ_force = Q V₁u_ξ, τ_motion = Q V₂u_v (SPEC §2: τ = g + Q(V₁u_ξ + V₂u_v));
- projection laws: τ_base = the h (and coupling) compensation, τ_force = u_F (eq. 51–52), τ_motion =
  (I + μ)PMu_p (eq. 45/54).

When |τ_i| ≤ L_i fails for the full command, the motion channel is scaled down first (largest feasible
α, β = 1): because u_v does not enter the constraint force (ξ = u_ξ + Γ_ξv_r, decoupling), the force
channel is then delivered exactly and only the motion slows down. Only if α = 0 is still infeasible is
the force channel scaled (largest feasible β); if even τ_base alone violates a limit the command is
clipped component-wise (``clipped``). The status of the last call is returned.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qv_dynamics.errors import DimensionError, NonFiniteError


@dataclass
class SaturationStatus:
    """What the limiter did in the last call. ``peak_ratio`` is max|τ_i|/L_i of the unsaturated command."""

    active: bool = False
    motion_scale: float = 1.0
    force_scale: float = 1.0
    clipped: bool = False
    peak_ratio: float = 0.0

    @property
    def force_kept(self) -> bool:
        return self.force_scale == 1.0 and not self.clipped

    @property
    def force_frozen(self) -> bool:
        """The limiter scaled the force channel: integrators of the force loop hold (anti-windup)."""
        return self.active and self.force_scale < 1.0

    @property
    def motion_frozen(self) -> bool:
        """The limiter scaled the motion channel: integrators of the motion loop hold (anti-windup)."""
        return self.active and self.motion_scale < 1.0


def resolve_limits(system, effort_limits) -> np.ndarray | None:
    """``None``/``False`` -> no limit; ``"urdf"`` -> system.effort_limits(); a scalar or an n-vector."""
    if effort_limits is None or effort_limits is False:
        return None
    n = system.nv
    if isinstance(effort_limits, str):
        if effort_limits.lower() != "urdf":
            raise DimensionError(f"effort_limits: expected 'urdf', a number or {n} numbers, got {effort_limits!r}")
        lim = np.asarray(system.effort_limits(), float).copy()
    else:
        lim = np.asarray(effort_limits, float)
        if lim.ndim == 0:
            lim = np.full(n, float(lim))
        if lim.shape != (n,):
            raise DimensionError(f"effort_limits: expected {n} values, got shape {lim.shape}")
    if np.any(np.isnan(lim)) or np.any(lim < 0):
        raise NonFiniteError(f"effort_limits must be >= 0 (inf = no limit), got {lim}")
    return None if np.all(np.isinf(lim)) else lim


def _max_scale(c: np.ndarray, d: np.ndarray, L: np.ndarray) -> float | None:
    """Largest s ∈ [0, 1] with |c + s·d| ≤ L component-wise, or None if there is none.

    Plain Python over the (few) components: the same IEEE operations as the vectorised form, without
    a dozen numpy calls per command at 1 kHz."""
    lo, hi = 0.0, 1.0
    for ci, di, li in zip(c.tolist(), d.tolist(), L.tolist()):
        if di > 0:
            lo = max(lo, (-li - ci) / di)
            hi = min(hi, (li - ci) / di)
        elif di < 0:
            lo = max(lo, (li - ci) / di)
            hi = min(hi, (-li - ci) / di)
        elif abs(ci) > li:  # d = 0: the component cannot be fixed by scaling
            return None
    return hi if lo <= hi + 1e-15 else None


class _LimitInfo:
    """Per-limits-array constants of the fast path (the laws keep one limits array for their life)."""

    __slots__ = ("ref", "key", "simple", "idx", "L", "pairs")

    def __init__(self, limits: np.ndarray):
        self.ref = limits
        self.key = limits.tobytes()
        fin = np.isfinite(limits)
        self.simple = bool(np.all(limits[fin] > 0))   # no zero limit: |τ|/L needs no inf/nan handling
        self.idx = np.flatnonzero(fin)
        self.L = np.ascontiguousarray(limits[self.idx])
        self.pairs = list(zip(self.idx.tolist(), self.L.tolist()))


_INFO: dict[int, _LimitInfo] = {}


def _limit_info(limits: np.ndarray) -> _LimitInfo:
    info = _INFO.get(id(limits))
    if info is None or info.ref is not limits or info.key != limits.tobytes():  # new or changed in place
        if len(_INFO) > 32:
            _INFO.clear()
        info = _INFO[id(limits)] = _LimitInfo(limits)
    return info


def saturate(base: np.ndarray, force: np.ndarray | None, motion: np.ndarray,
             limits: np.ndarray | None) -> tuple[np.ndarray, SaturationStatus]:
    """Apply ``limits`` by scaling the motion channel first, then the force channel (module doc)."""
    if force is None:
        tau = base + motion           # + 0: the same sum without the zero vector
    else:
        tau = base + force + motion
    if limits is None:
        return tau, SaturationStatus()
    info = _limit_info(limits)
    if info.simple:  # fast path (every limit > 0): peak = max over the finite limits of |τ_i|/L_i
        tl = tau.tolist()  # plain floats: the same IEEE divisions without numpy's per-call overhead
        peak = 0.0
        for i, li in info.pairs:
            x = abs(tl[i]) / li
            if not x <= peak:  # larger, or NaN: a NaN in τ counts as an infinite ratio (as nan_to_num below)
                peak = x if x == x else np.inf
                if peak == np.inf:
                    break
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(np.isinf(limits), 0.0, np.abs(tau) / limits)
        peak = float(np.max(np.nan_to_num(ratio, nan=np.inf, posinf=np.inf)))
    if peak <= 1.0:
        return tau, SaturationStatus(peak_ratio=peak)
    if force is None:  # (only the saturated case needs the zero force channel)
        force = np.zeros_like(base)
    L = np.where(np.isinf(limits), np.finfo(float).max, limits)
    alpha = _max_scale(base + force, motion, L)
    if alpha is not None:
        return base + force + alpha * motion, SaturationStatus(True, alpha, 1.0, False, peak)
    beta = _max_scale(base, force, L)
    if beta is not None:
        return base + beta * force, SaturationStatus(True, 0.0, beta, False, peak)
    return np.clip(base, -L, L), SaturationStatus(True, 0.0, 0.0, True, peak)


__all__ = ["SaturationStatus", "resolve_limits", "saturate"]
