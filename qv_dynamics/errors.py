"""Errors raised on bad input (SPEC §6): each names what was wrong and why."""
from __future__ import annotations

import math

import numpy as np


class QVError(ValueError):
    """Base class of every qv_ros input/model error (a ValueError, so callers may catch broadly)."""


class NonFiniteError(QVError):
    """A NaN or Inf in a state, command or reference."""


class DimensionError(QVError):
    """An array of the wrong length or shape."""


class UnknownNameError(QVError):
    """A joint or frame name that the model does not contain."""


class ModelError(QVError):
    """A URDF or YAML description that cannot be parsed or is inconsistent."""


class NotPositiveDefiniteError(QVError):
    """The mass matrix is not symmetric positive definite (Cholesky failed)."""


class RankDeficiencyError(QVError):
    """A solve that needs a full-rank constraint Jacobian (the plain KKT system) met a singular one."""


class StateMismatchError(QVError):
    """Arguments that contradict each other, e.g. a q̇ other than the one the dynamics terms were evaluated at."""


class ConvergenceError(QVError):
    """An iteration (Newton–Raphson position correction) did not reach its tolerance."""


def as_vector(name: str, x, size: int | None = None) -> np.ndarray:
    """Return ``x`` as a finite float vector of length ``size``; raise a clear error otherwise."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise DimensionError(f"{name}: cannot be read as a float vector ({exc})") from None
    if arr.ndim != 1:
        raise DimensionError(f"{name}: expected a vector, got an array of shape {arr.shape}")
    if size is not None and arr.shape[0] != size:
        raise DimensionError(f"{name}: expected length {size}, got {arr.shape[0]}")
    # fast path: x·x is finite iff every entry is (NaN/Inf propagate without raising FP flags); only when
    # it is not (or overflows for entries beyond 1e154) is each entry checked
    if not math.isfinite(arr.dot(arr)):
        bad = np.flatnonzero(~np.isfinite(arr)).tolist()
        if bad:
            raise NonFiniteError(f"{name}: non-finite entries at indices {bad}")
    return arr


