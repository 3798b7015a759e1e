"""A free body in the state of an effort-controlled robot: /joint_states + nav_msgs/Odometry.

A model whose first joint is a free-flyer (a floating base, or a free object the arms hold, such as the
box of ``urdf/bimanual_panda_box.urdf``) gets that joint's pose and twist from nav_msgs/Odometry (SPEC §1:
pose in the world frame, twist in the body frame, REP 105 — :mod:`qv_dynamics.ros.odometry`) and the
1-DoF joints from /joint_states. :class:`FreeBodySync` pairs the two by stamp: a lock-step plant publishes
both with one stamp; a state estimator's odometry is accepted within ``tolerance`` seconds of the joint
state. Each joint state is used at most once.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError


class FreeBodySync:
    """Pinocchio q, q̇ from the latest joint state (1-DoF joints) and the odometry of joint 1 (free-flyer)."""

    def __init__(self, system, tolerance: float = 5e-4):
        model = system.model
        if model.njoints < 2 or model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ModelError("odometry input needs a model whose first joint is a free-flyer (floating base "
                             "or a 'floating' URDF joint); this model has none")
        self.iq, self.iv = model.joints[1].idx_q, model.joints[1].idx_v
        self.tolerance = float(tolerance)
        self.joint_state: tuple | None = None   # (t, q, q̇, stamp)
        self.odometry: tuple | None = None      # (t, q_body (7), v_body (6))
        self.t_done = -np.inf

    def ready(self) -> tuple | None:
        """(t, q, q̇, stamp) once a joint state not used yet has an odometry within the tolerance, else None."""
        if self.joint_state is None or self.odometry is None:
            return None
        t, q, qdot, stamp = self.joint_state
        if t <= self.t_done or abs(t - self.odometry[0]) > self.tolerance:
            return None
        self.t_done = t
        q, qdot = q.copy(), qdot.copy()
        q[self.iq:self.iq + 7] = self.odometry[1]
        qdot[self.iv:self.iv + 6] = self.odometry[2]
        return t, q, qdot, stamp


__all__ = ["FreeBodySync"]
