"""Custom constraint: a user function of (q, q̇) returning Φ, A and Ȧq̇ (SPEC §3).

    {type: custom, function: callable(q, qdot) -> (phi, A, Adot_qdot), rows: k}

Rows are labelled ``name[i]``. Ȧ (needed by the minimal coordinates' Ḋ) is a central difference of A(q)
along q̇, O(h²).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pinocchio as pin

from ..errors import DimensionError, ModelError
from .base import Constraint


class CustomConstraint(Constraint):
    kind = "custom"
    keys = ("function", "rows")
    default_axes = ()

    def __init__(self, function: Callable | None = None, rows: int = 0, **kw):
        super().__init__(**kw)
        self.function = function
        self.n_rows = int(rows)
        self.nv = 0  # set by bind

    def bind(self, system) -> None:
        super().bind(system)
        self.nv = system.nv

    @property
    def size(self) -> int:
        return self.n_rows

    @property
    def row_labels(self) -> list[str]:
        return [f"{self.name}[{i}]" for i in range(self.n_rows)]

    def row_selector(self):
        return slice(0, self.n_rows)

    fresh_rows = False  # the user's function may return arrays it keeps (and changes later)

    def call(self, q: np.ndarray, qdot, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Φ, A, Ȧq̇) from the user function, shapes checked (DimensionError names the constraint)."""
        qd = qdot if qdot is not None else np.zeros(n)
        cphi, cA, cad = self.function(q, qd)
        cphi = np.atleast_1d(np.asarray(cphi, float))
        cA = np.atleast_2d(np.asarray(cA, float))
        cad = np.atleast_1d(np.asarray(cad, float))
        k = self.n_rows
        if cA.shape != (k, n) or cphi.shape != (k,) or cad.shape != (k,):
            raise DimensionError(f"custom constraint '{self.name}': expected phi ({k},), A ({k},{n}), "
                                 f"Adot_qdot ({k},), got {cphi.shape}, {cA.shape}, {cad.shape}")
        return cphi, cA, cad

    def rows(self, model: pin.Model, data: pin.Data, q, qdot, mode, sel):
        phi, A, ad = self.call(q, qdot, model.nv)
        return phi, A, (ad if mode is not None else None)

    def residual(self, data: pin.Data, q: np.ndarray) -> np.ndarray:
        return self.call(q, None, self.nv)[0]

    def jacobian(self, model: pin.Model, data: pin.Data, q: np.ndarray) -> np.ndarray:
        return self.call(q, None, model.nv)[1]

    def drift(self, model: pin.Model, data: pin.Data, q, qdot: np.ndarray, mode: str) -> np.ndarray:
        return self.call(q, qdot, model.nv)[2]

    def jacobian_rate(self, system, q, qdot, frame_rate) -> np.ndarray:
        n = system.nv
        nrm = float(np.linalg.norm(qdot))
        if nrm == 0.0:
            return np.zeros((self.n_rows, n))
        h = 1e-6 / nrm
        _, Ap, _ = self.function(system.integrate(q, h * qdot), qdot)
        _, Am, _ = self.function(system.integrate(q, -h * qdot), qdot)
        return (np.atleast_2d(np.asarray(Ap, float)) - np.atleast_2d(np.asarray(Am, float))) / (2.0 * h)

    def read_keys(self, d: dict, index: int) -> None:
        self.function = d.pop("function", None)
        if not callable(self.function):
            raise ModelError(f"constraint #{index} (custom): 'function' must be callable (q, qdot) -> "
                             "(phi, A, Adot_qdot)")
        self.n_rows = int(d.pop("rows", 0))
        if self.n_rows <= 0:
            raise ModelError(f"constraint #{index} (custom): 'rows' must be a positive integer")
        self.read_target(d)
