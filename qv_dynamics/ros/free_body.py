"""A free body in the state of an effort-controlled robot: /joint_states + nav_msgs/Odometry.

A model whose first joint is a free-flyer (a floating base, or a free object the arms hold, such as the
box of ``urdf/bimanual_panda_box.urdf``) gets that joint's pose and twist from nav_msgs/Odometry (SPEC §1:
pose in the world frame, twist in the body frame, REP 105 — :mod:`qv_dynamics.ros.odometry`) and the
1-DoF joints from /joint_states. :class:`FreeBodySync` pairs the two by stamp: a lock-step plant publishes
both with one stamp; a state estimator's odometry is accepted within ``tolerance`` seconds of the joint
state. The two topics travel separately, so at 1 kHz under load the odometry of a state can arrive after
the next joint state: the last ``history`` joint states not paired yet and the last ``history`` odometries
are kept, and the newest joint state with an odometry within the tolerance is answered (each at most once,
never one older than an answered one). A joint state pushed out of that history unpaired is a *miss*,
counted on ``counter`` (a :class:`~qv_dynamics.ros.health.EpisodeCounter`, logged once per episode) by kind:
``missing`` (no odometry yet) or ``mismatch`` (the nearest odometry's stamp is further than ``tolerance``
from it: late, early or stopped); a pairing ends the episode. Joint states passed over because a newer one
was paired first are counted in ``skipped``.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..errors import ModelError

HISTORY = 3   # joint states (and odometries) kept: the odometry of a state may come two states late


class FreeBodySync:
    """Pinocchio q, q̇ from a joint state (1-DoF joints) and the odometry of joint 1 (free-flyer) of its stamp."""

    def __init__(self, system, tolerance: float = 5e-4, counter=None, history: int = HISTORY):
        model = system.model
        if model.njoints < 2 or model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ModelError("odometry input needs a model whose first joint is a free-flyer (floating base "
                             "or a 'floating' URDF joint); this model has none")
        self.iq, self.iv = model.joints[1].idx_q, model.joints[1].idx_v
        self.tolerance = float(tolerance)
        self.counter = counter
        self._states: deque = deque(maxlen=int(history))   # (t, q, q̇, stamp) not paired yet, oldest first
        self._odoms: deque = deque(maxlen=int(history))    # (t, q_body (7), v_body (6)), oldest first
        self.t_done = -np.inf
        self.skipped = 0

    @property
    def joint_state(self) -> tuple | None:
        """(t, q, q̇, stamp) of the latest joint state; setting one counts a joint state it pushes out of the
        history unpaired."""
        return self._states[-1] if self._states else None

    @joint_state.setter
    def joint_state(self, value: tuple) -> None:
        if self._states and value[0] <= self._states[-1][0]:
            return                                   # not newer than the latest: nothing to pair
        old = self._states[0] if len(self._states) == self._states.maxlen else None
        self._states.append(value)
        if old is not None and old[0] > self.t_done and self.counter is not None:
            self.counter.reject(*self.miss(old[0]))

    @property
    def odometry(self) -> tuple | None:
        """(t, q_body, v_body) of the latest odometry; setting one keeps it in the history."""
        return self._odoms[-1] if self._odoms else None

    @odometry.setter
    def odometry(self, value: tuple) -> None:
        self._odoms.append(value)

    def miss(self, t: float) -> tuple[str, str]:
        """(kind, reason) for a joint state at ``t`` that found no odometry to pair with."""
        if not self._odoms:
            return "missing", f"joint state at t = {t:.6f} s: no odometry received yet; no command for it"
        off = min((o[0] - t for o in self._odoms), key=abs)
        return "mismatch", (f"joint state at t = {t:.6f} s: the nearest odometry is stamped {1e3 * off:+.3f} ms "
                            f"from it (tolerance {1e3 * self.tolerance:.3g} ms); no command for it")

    def ready(self) -> tuple | None:
        """(t, q, q̇, stamp) of the newest joint state not used yet that has an odometry within the tolerance,
        else None."""
        for i in range(len(self._states) - 1, -1, -1):
            t, q, qdot, stamp = self._states[i]
            if t <= self.t_done:
                return None
            for od in reversed(self._odoms):
                if abs(t - od[0]) <= self.tolerance:
                    self.skipped += sum(1 for s in list(self._states)[:i] if s[0] > self.t_done)
                    self.t_done = t
                    if self.counter is not None:
                        self.counter.ok()
                    q, qdot = q.copy(), qdot.copy()
                    q[self.iq:self.iq + 7] = od[1]
                    qdot[self.iv:self.iv + 6] = od[2]
                    return t, q, qdot, stamp
        return None


__all__ = ["FreeBodySync"]
