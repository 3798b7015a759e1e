"""Weld: a frame's full pose held in the world (SPEC §3), six rows by default.

    {type: weld, frame: tool0}            # rows x y z rx ry rz

Φ = (p − p₀, log₃(R R₀ᵀ))_axes (world-aligned rotation error), A = the frame Jacobian (world-aligned),
Ȧq̇ = classical acceleration at q̈ = 0. The target pose defaults to the frame's pose when welded.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from .base import AXES, FrameConstraint


class Weld(FrameConstraint):
    kind = "weld"
    default_axes = AXES

    def residual(self, data: pin.Data, q: np.ndarray) -> np.ndarray:
        oMf = self.placement(data)
        out = np.empty(6)
        out[:3] = oMf.translation
        out[:3] -= self.position
        out[3:] = pin.log3(oMf.rotation.dot(self.rotation.T))
        return out
