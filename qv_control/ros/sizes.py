"""Sizes and labels of the controller's references, checked where they enter (SPEC §6).

θ_d has one value per minimal coordinate of the law (its labels, k = n − r) and λ_d one value per active
constraint row (``system.row_labels``). A wrong length is refused at start and at a parameter change with
a message naming the expected labels, so it can never reach the 1 kHz loop (where every tick would fail
and the node would only hold the safe output).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from qv_dynamics.errors import DimensionError, NonFiniteError


def labelled_vector(name: str, value, labels: Sequence[str]) -> np.ndarray | None:
    """``value`` (None / empty = not set) as a finite vector with one entry per label; DimensionError
    ("expected 2 values for ['tip.z', 'joint3'], got 1") or NonFiniteError otherwise."""
    if value is None or (isinstance(value, (list, tuple, np.ndarray)) and len(value) == 0):
        return None
    try:
        arr = np.asarray(value, dtype=float).ravel()
    except (TypeError, ValueError):
        raise DimensionError(f"{name}: expected numbers, one for each of {list(labels)}, got {value!r}") from None
    if arr.size != len(labels):
        raise DimensionError(f"{name}: expected {len(labels)} value(s), one for each of {list(labels)}, "
                             f"got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise NonFiniteError(f"{name}: non-finite entries {arr.tolist()}")
    return arr


__all__ = ["labelled_vector"]
