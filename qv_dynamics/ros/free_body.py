"""A free body in the state of an effort-controlled robot: /joint_states + nav_msgs/Odometry.

A model whose first joint is a free-flyer (a floating base, or a free object the arms hold, such as the
box of ``urdf/bimanual_panda_box.urdf``) gets that joint's pose and twist from nav_msgs/Odometry (SPEC §1:
pose in the world frame, twist in the body frame, REP 105 — :mod:`qv_dynamics.ros.odometry`) and the
1-DoF joints from /joint_states. :class:`FreeBodySync` pairs the two by stamp: a lock-step plant publishes
both with one stamp; a state estimator's odometry is accepted within ``tolerance`` seconds of the joint
state. Each joint state is used at most once. A joint state replaced by the next one before it was paired
is a *miss*, counted on ``counter`` (a :class:`~qv_dynamics.ros.health.EpisodeCounter`, logged once per
episode) by kind: ``missing`` (no odometry yet) or ``mismatch`` (the latest odometry's stamp is further
than ``tolerance`` from it: late, early or stopped); a pairing ends the episode.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError


class FreeBodySync:
    """Pinocchio q, q̇ from the latest joint state (1-DoF joints) and the odometry of joint 1 (free-flyer)."""

    def __init__(self, system, tolerance: float = 5e-4, counter=None):
        model = system.model
        if model.njoints < 2 or model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ModelError("odometry input needs a model whose first joint is a free-flyer (floating base "
                             "or a 'floating' URDF joint); this model has none")
        self.iq, self.iv = model.joints[1].idx_q, model.joints[1].idx_v
        self.tolerance = float(tolerance)
        self.counter = counter
        self._js: tuple | None = None            # (t, q, q̇, stamp)
        self.odometry: tuple | None = None      # (t, q_body (7), v_body (6))
        self.t_done = -np.inf

    @property
    def joint_state(self) -> tuple | None:
        """(t, q, q̇, stamp) of the latest joint state; setting it counts the previous one if never paired."""
        return self._js

    @joint_state.setter
    def joint_state(self, value: tuple) -> None:
        old = self._js
        if old is not None and old[0] > self.t_done and value[0] > old[0] and self.counter is not None:
            self.counter.reject(*self.miss(old[0]))
        self._js = value

    def miss(self, t: float) -> tuple[str, str]:
        """(kind, reason) for a joint state at ``t`` that found no odometry to pair with."""
        if self.odometry is None:
            return "missing", f"joint state at t = {t:.6f} s: no odometry received yet; no command for it"
        off = self.odometry[0] - t
        return "mismatch", (f"joint state at t = {t:.6f} s: the latest odometry is stamped {1e3 * off:+.3f} ms "
                            f"from it (tolerance {1e3 * self.tolerance:.3g} ms); no command for it")

    def ready(self) -> tuple | None:
        """(t, q, q̇, stamp) once a joint state not used yet has an odometry within the tolerance, else None."""
        if self._js is None or self.odometry is None:
            return None
        t, q, qdot, stamp = self._js
        if t <= self.t_done or abs(t - self.odometry[0]) > self.tolerance:
            return None
        self.t_done = t
        if self.counter is not None:
            self.counter.ok()
        q, qdot = q.copy(), qdot.copy()
        q[self.iq:self.iq + 7] = self.odometry[1]
        qdot[self.iv:self.iv + 6] = self.odometry[2]
        return t, q, qdot, stamp


__all__ = ["FreeBodySync"]
