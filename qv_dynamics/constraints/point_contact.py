"""Point contact: a frame origin held at a world point along some world axes (SPEC §3).

    {type: point_contact, frame: tool0, axes: [x, y, z], position: [..]}

Φ = (p(q) − p₀)_axes, A = J_v (world-aligned, the selected rows), Ȧq̇ = classical acceleration of the
origin at q̈ = 0. ``position`` defaults to where the frame is when the contact is made.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..errors import ModelError
from .base import FrameConstraint


class PointContact(FrameConstraint):
    """Translations only (rows x, y, z); the common case, kept short for the 1 kHz loop."""

    kind = "point_contact"

    def residual(self, data: pin.Data, q: np.ndarray) -> np.ndarray:
        return self.placement(data).translation - self.position

    def read_keys(self, d: dict, index: int) -> None:
        if any(a.startswith("r") for a in self.axes):
            raise ModelError(f"constraint #{index}: a point contact constrains translations only, got {self.axes}")
        super().read_keys(d, index)
