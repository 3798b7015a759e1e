"""Reference interface: θ_d(t), θ̇_d(t), θ̈_d(t) and λ_d(t) for the laws.

Every trajectory object is a callable ``t -> Reference`` (the simulator's ``reference=`` contract):

- :class:`TrajectoryReference` from constants or callables (θ_d(t), optional θ̇_d(t), θ̈_d(t), λ_d(t));
- :class:`SplineReference` through waypoints (times, θ values): ``kind="cubic"`` (C², clamped: zero
  end velocity) or ``"quintic"`` (C⁴, zero end velocity and acceleration); held constant outside.

:func:`validate_reference` checks one Reference against the law (sizes, NaN/Inf, joint range) and
returns plain arrays; the laws call it on every ``compute``. Errors are QVError subclasses.

Sign of λ (SPEC §2): M q̈ + h = τ − Aᵀλ, so the constraint force *on the robot* is −Aᵀλ. A tool pressing
down with 10 N on a table (point contact, axis z) has λ_z = −10 (the table pushes up with +10 N).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from qv_dynamics.errors import DimensionError, NonFiniteError, QVError, as_vector
from qv_dynamics.state import Reference

from .splines import DEGREES, PiecewisePoly, fit_spline


class ReferenceRangeError(QVError):
    """A desired coordinate outside its range (a joint coordinate beyond its URDF limits)."""


def _vec(name: str, x, size: int | None) -> np.ndarray:
    if type(x) is np.ndarray and x.ndim == 1 and x.dtype == np.float64:  # the common case: as_vector checks
        return as_vector(name, x, size)
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DimensionError(f"{name}: cannot be read as a float vector ({exc})") from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return as_vector(name, arr, size)


class CheckedReference(Reference):
    """A :class:`Reference` whose fields were checked where they were made (finite float vectors, θ's of one
    length): :class:`SplineReference` output. :func:`validate_reference` then checks only the lengths and
    the joint range (a quintic between waypoints may overshoot them)."""


@dataclass
class ReferenceValues:
    theta: np.ndarray | None
    theta_dot: np.ndarray
    theta_ddot: np.ndarray
    lambda_: np.ndarray


def validate_reference(ref: Reference | None, k: int, m: int, coordinates=None,
                       theta_hold: np.ndarray | None = None) -> ReferenceValues:
    """Check sizes, finiteness and the joint range; None fields become zeros (θ_d: ``theta_hold``)."""
    if ref is None:
        ref = Reference()
    lam = ref.lambda_ if type(ref) is CheckedReference else None
    if type(ref) is CheckedReference and ref.theta.shape[0] == k and (lam is None or lam.shape[0] == m):
        if coordinates is not None:
            coordinates.check_range(ref.theta, "reference.theta (theta_d)")
        return ReferenceValues(ref.theta, ref.theta_dot, ref.theta_ddot,
                               np.zeros(m) if lam is None else lam)
    if not isinstance(ref, Reference):
        raise DimensionError(f"reference: expected qv_control.Reference, got {type(ref).__name__}")
    theta = theta_hold if ref.theta is None else _vec("reference.theta (theta_d)", ref.theta, k)
    thd = np.zeros(k) if ref.theta_dot is None else _vec("reference.theta_dot", ref.theta_dot, k)
    thdd = np.zeros(k) if ref.theta_ddot is None else _vec("reference.theta_ddot", ref.theta_ddot, k)
    lam = np.zeros(m) if ref.lambda_ is None else _vec(
        "reference.lambda_ (lambda_d, one per active constraint row)", ref.lambda_, m)
    if theta is not None and coordinates is not None and ref.theta is not None:
        coordinates.check_range(theta, "reference.theta (theta_d)")
    return ReferenceValues(theta, thd, thdd, lam)


def _as_fn(name: str, x, size: int | None) -> tuple[Callable[[float], np.ndarray] | None, int | None]:
    if x is None:
        return None, size
    if callable(x):
        return x, size
    const = _vec(name, x, size)
    return (lambda t, c=const: c), const.size


class TrajectoryReference:
    """θ_d(t) (+ optional θ̇_d, θ̈_d) and λ_d(t) from constants or callables; ``ref(t) -> Reference``.

    ``size``/``lambda_size`` (or ``coordinates`` and ``system``) let every value be checked at each call;
    θ_d outside a joint coordinate's range raises :class:`ReferenceRangeError`."""

    def __init__(self, theta, theta_dot=None, theta_ddot=None, lambda_=None, size: int | None = None,
                 lambda_size: int | None = None, coordinates=None):
        if coordinates is not None and size is None:
            size = coordinates.size
        self.coordinates = coordinates
        self._theta, size = _as_fn("theta_d", theta, size)
        self._theta_dot, _ = _as_fn("theta_dot_d", theta_dot, size)
        self._theta_ddot, _ = _as_fn("theta_ddot_d", theta_ddot, size)
        self._lambda, lambda_size = _as_fn("lambda_d", lambda_, lambda_size)
        self.size = size
        self.lambda_size = lambda_size
        if self._theta is None:
            raise DimensionError("theta_d is required (a constant vector or a callable t -> vector)")

    def __call__(self, t: float) -> Reference:
        t = float(t)
        if not np.isfinite(t):
            raise NonFiniteError(f"reference time must be finite, got {t}")
        th = _vec("theta_d(t)", self._theta(t), self.size)
        if self.coordinates is not None:
            self.coordinates.check_range(th, f"theta_d({t:.6g})")
        k = th.size
        thd = None if self._theta_dot is None else _vec("theta_dot_d(t)", self._theta_dot(t), k)
        thdd = None if self._theta_ddot is None else _vec("theta_ddot_d(t)", self._theta_ddot(t), k)
        lam = None if self._lambda is None else _vec("lambda_d(t)", self._lambda(t), self.lambda_size)
        return Reference(theta=th, theta_dot=thd, theta_ddot=thdd, lambda_=lam)


def _waypoints(times, waypoints, coordinates) -> tuple[np.ndarray, np.ndarray]:
    """Checked (t, W): ≥ 2 strictly increasing finite times, one finite row per time, inside the coordinates'
    ranges when given."""
    t = np.asarray(times, float)
    W = np.asarray(waypoints, float)
    if W.ndim == 1:
        W = W[:, None]
    if t.ndim != 1 or t.size < 2:
        raise DimensionError(f"spline: need at least 2 times, got shape {t.shape}")
    if W.shape[0] != t.size:
        raise DimensionError(f"spline: {t.size} times but {W.shape[0]} waypoints")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(W))):
        raise NonFiniteError("spline: times and waypoints must be finite")
    if np.any(np.diff(t) <= 0):
        raise DimensionError("spline: times must be strictly increasing")
    if coordinates is not None:
        if W.shape[1] != coordinates.size:
            raise DimensionError(f"spline: waypoints have {W.shape[1]} components, the coordinates "
                                 f"{coordinates.labels} need {coordinates.size}")
        for i, w in enumerate(W):
            coordinates.check_range(w, f"spline waypoint {i}")
    return t, W


class SplineReference(TrajectoryReference):
    """A cubic (C², clamped) or quintic (C⁴, zero end velocity/acceleration) spline through waypoints.

    ``times`` strictly increasing (≥ 2), ``waypoints`` shape (len(times), k). Before the first and after
    the last time the end values are held with zero derivatives."""

    def __init__(self, times: Sequence[float], waypoints, kind: str = "quintic", lambda_=None,
                 lambda_size: int | None = None, coordinates=None):
        t, W = _waypoints(times, waypoints, coordinates)
        if kind not in DEGREES:
            raise DimensionError(f"spline kind must be 'cubic' or 'quintic', got {kind!r}")
        self.kind = kind
        self.times = t
        pp = self._pp = PiecewisePoly(t, fit_spline(t, W, DEGREES[kind]))

        def part(j: int):
            return lambda tt: pp(tt)[j]

        super().__init__(part(0), part(1), part(2), lambda_=lambda_,
                         size=W.shape[1], lambda_size=lambda_size, coordinates=coordinates)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(θ_d, θ̇_d, θ̈_d) at t (held outside [t₀, t_end]) from the precomputed piecewise polynomial."""
        return self._pp(t)

    def __call__(self, t: float) -> Reference:
        t = float(t)
        if not math.isfinite(t):
            raise NonFiniteError(f"reference time must be finite, got {t}")
        th, thd, thdd = self._pp(t)
        if self.coordinates is not None:
            self.coordinates.check_range(th, f"theta_d({t:.6g})")
        lam = None if self._lambda is None else _vec("lambda_d(t)", self._lambda(t), self.lambda_size)
        return CheckedReference(theta=th, theta_dot=thd, theta_ddot=thdd, lambda_=lam)


def as_reference_fn(reference) -> Callable[[float], Reference]:
    """Accept a Reference (constant), a callable t -> Reference, or None (hold / zero force)."""
    if reference is None:
        return lambda t: Reference()
    if isinstance(reference, Reference):
        return lambda t, r=reference: r
    if callable(reference):
        return reference
    raise DimensionError("reference: expected a Reference or a callable t -> Reference, got "
                         f"{type(reference).__name__}")


__all__ = ["CheckedReference", "ReferenceRangeError", "ReferenceValues", "validate_reference", "TrajectoryReference",
           "SplineReference", "as_reference_fn"]
