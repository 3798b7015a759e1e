"""PIDC motion control (paper `aghili-projection-operator` eq. 45–46; weighted minimum norm eq. 49–50)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from qv_dynamics.errors import as_vector
from qv_dynamics.projection import length_metric, pinv_rank, weighted_metric
from qv_dynamics.state import Reference, State

from .base import GainError, scalar_gain
from .projection_base import ProjectionLawBase


class PIDCLaw(ProjectionLawBase):
    """Projected inverse-dynamics control, eq. 45–46 (motion only, f = f∥: minimum ‖f‖, eq. 48).

    ``kp``, ``kd`` are G_P (1/s², scalar or k-vector) and G_D (1/s). ``W`` (n-vector = diagonal, or n×n
    p.d.) or ``kappa`` (eq. 50, with ``translational`` = names of prismatic/translational joints) select the
    weighted minimum-norm variant (eq. 49). The constraint force is whatever the motion requires."""

    name = "pidc"
    tick_mode = 0

    def __init__(self, system, coordinates, kp=100.0, kd=20.0, W=None, kappa: float | None = None,
                 translational: Sequence[str] = (), effort_limits="urdf", cond_max: float = 1e6,
                 compiled: bool = True, rank_atol: float | None = None):
        super().__init__(system, coordinates, kp=kp, kd=kd, effort_limits=effort_limits, cond_max=cond_max,
                         compiled=compiled, rank_atol=rank_atol)
        n = system.nv
        if W is None and kappa is not None:
            mask = np.zeros(n, bool)
            for name in translational:
                mask[system.joint_v_index(name)] = True
            W = length_metric(mask, scalar_gain("kappa", kappa))      # eq. 50 (a length > 0)
        self.W = None
        if W is not None:
            try:
                W = np.asarray(W, float)
                if W.ndim == 1:
                    W = np.diag(as_vector("W", W, n))
            except (TypeError, ValueError) as exc:  # text, ragged rows, NaN entries
                raise GainError(f"W: expected {n} diagonal entries or a finite {n}x{n} matrix ({exc})") from None
            if W.shape != (n, n) or not np.all(np.isfinite(W)):
                raise GainError(f"W: expected {n} diagonal entries or a finite {n}x{n} matrix, got shape {W.shape}")
            _, _, self._Wh, self._Wmh = weighted_metric(np.eye(n), np.zeros((0, n)), W)  # checks p.d.
            self.W = 0.5 * (W + W.T)

    def _weighted_parallel(self, A: np.ndarray, P: np.ndarray):
        """The projector x ↦ W^½P_W W^-½x (the identity map onto P x when W is None)."""
        if self.W is None:
            return P
        _, _, V2w = pinv_rank(A @ self._Wmh)
        return self._Wh @ (V2w @ (V2w.T @ self._Wmh))

    def _compiled_case(self) -> bool:
        return self.W is None   # (the weighted variant: the numpy path)

    def _compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """The numpy path of :meth:`compute`."""
        t, terms, ref, P, Apinv, a_perp, u_p, _ = self._pidc(state, reference)
        Pw = self._weighted_parallel(terms.A, P)
        return self._finish(Pw.dot(terms.h), None, Pw.dot(terms.M.dot(u_p)))
