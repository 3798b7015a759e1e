"""Loop closure: two frames of the same robot held together (SPEC §3), e.g. a closed kinematic chain.

    {type: loop_closure, frame_a: a, frame_b: b, axes: [x, z], offset: [..], rotation: [..]}

Φ = (p_a − p_b − offset, log₃(R_a (R_b R_off)ᵀ))_axes, A = J_a − J_b (world-aligned), Ȧq̇ = the
difference of the two frames' classical accelerations at q̈ = 0. Offset 0 and rotation I by default.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

from ..errors import ModelError
from ..linalg import LOCAL_WORLD_ALIGNED
from .base import Constraint, frame_drift


class LoopClosure(Constraint):
    kind = "loop_closure"
    keys = ("frame_a", "frame_b", "frame")

    def bind(self, system) -> None:
        super().bind(system)
        if self.position is None:
            self.position = np.zeros(3)
        if self.rotation is None:
            self.rotation = np.eye(3)
        frames = system.model.frames
        if frames[self.frame_id].parentJoint == frames[self.frame_b_id].parentJoint:
            raise ModelError(f"constraint '{self.name or self.kind}': frames '{self.frame}' and '{self.frame_b}' are "
                             "on one rigid body (no joint moves one against the other): its rows of A would be all "
                             "zero")

    def residual(self, data: pin.Data, q: np.ndarray) -> np.ndarray:
        oMa, oMb = data.oMf[self.frame_id], data.oMf[self.frame_b_id]
        return np.concatenate([oMa.translation - oMb.translation - self.position,
                               pin.log3(oMa.rotation @ (oMb.rotation @ self.rotation).T)])

    def jacobian(self, model: pin.Model, data: pin.Data, q: np.ndarray) -> np.ndarray:
        return (pin.getFrameJacobian(model, data, self.frame_id, LOCAL_WORLD_ALIGNED)
                - pin.getFrameJacobian(model, data, self.frame_b_id, LOCAL_WORLD_ALIGNED))

    def drift(self, model: pin.Model, data: pin.Data, q, qdot: np.ndarray, mode: str) -> np.ndarray:
        return (frame_drift(model, data, self.frame_id, qdot, mode)
                - frame_drift(model, data, self.frame_b_id, qdot, mode))

    def jacobian_rate(self, system, q, qdot, frame_rate) -> np.ndarray:
        return frame_rate(self.frame_id) - frame_rate(self.frame_b_id)

    def read_keys(self, d: dict, index: int) -> None:
        self.frame = d.pop("frame_a", d.pop("frame", None))
        self.frame_b = d.pop("frame_b", None)
        if not self.frame or not self.frame_b:
            raise ModelError(f"constraint #{index} (loop_closure): 'frame_a' and 'frame_b' are required")
        self.read_target(d)
