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


def check_keys(where: str, mapping, allowed) -> None:
    """ModelError when ``mapping`` (a dict read from YAML) has a key not in ``allowed``: each unknown key is
    named with the closest allowed one (``constrants (did you mean constraints?)``), as the nodes name a
    misspelled parameter. A misspelled key would otherwise be ignored and its section silently missing."""
    import difflib

    if not isinstance(mapping, dict):
        raise ModelError(f"{where}: expected a mapping, got {type(mapping).__name__}")
    allowed = list(allowed)
    unknown = [str(k) for k in mapping if k not in allowed]
    if unknown:
        named = []
        for k in unknown:
            close = difflib.get_close_matches(k, allowed, n=1, cutoff=0.6)
            named.append(f"{k} (did you mean {close[0]}?)" if close else k)
        raise ModelError(f"{where}: unknown keys {', '.join(named)}; allowed: {', '.join(allowed)}")


def as_bool(where: str, value) -> bool:
    """A YAML boolean (true/false, not the string 'no' that ``bool()`` reads as True); ModelError otherwise."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ModelError(f"{where}: expected true or false, got {value!r}")


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


