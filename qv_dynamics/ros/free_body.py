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

import math

import numpy as np

from ..errors import ModelError

HISTORY = 3   # joint states (and odometries) kept: the odometry of a state may come two states late


class _Ring:
    """The last ``n`` (t, values, tag) entries in preallocated rows, oldest first by :meth:`order`."""

    def __init__(self, n: int, width: int):
        self.t = [-np.inf] * n
        self.values = np.zeros((n, width))
        self.tags: list = [None] * n
        self.size = self.next = 0

    def push(self, t: float, tag=None) -> np.ndarray:
        """Append an entry stamped ``t``; the row to write its values into."""
        i = self.next
        self.t[i], self.tags[i] = t, tag
        self.next = (i + 1) % len(self.t)
        self.size = min(self.size + 1, len(self.t))
        return self.values[i]

    def order(self) -> list[int]:
        """Slots from the oldest entry to the newest."""
        n = len(self.t)
        return [(self.next - self.size + k) % n for k in range(self.size)]

    @property
    def full(self) -> bool:
        return self.size == len(self.t)

    def newest(self) -> int:
        return (self.next - 1) % len(self.t)


class FreeBodySync:
    """Pinocchio q, q̇ from a joint state (1-DoF joints) and the odometry of joint 1 (free-flyer) of its stamp.

    The histories are preallocated rows: a joint state's q and q̇ and an odometry's 13 values are copied in
    (the caller's arrays may be its reading buffers); :meth:`ready` returns new arrays."""

    def __init__(self, system, tolerance: float = 5e-4, counter=None, history: int = HISTORY):
        model = system.model
        if model.njoints < 2 or model.joints[1].shortname() != "JointModelFreeFlyer":
            raise ModelError("odometry input needs a model whose first joint is a free-flyer (floating base "
                             "or a 'floating' URDF joint); this model has none")
        self.iq, self.iv = model.joints[1].idx_q, model.joints[1].idx_v
        self.nq = model.nq
        self.tolerance = float(tolerance)
        self.counter = counter
        self._states = _Ring(int(history), model.nq + model.nv)   # q, q̇ of joint states not paired yet
        self._odoms = _Ring(int(history), 13)                      # q_body (7), v_body (6)
        self.t_done = -np.inf
        self.skipped = 0

    # -- joint states -------------------------------------------------------------------------------------------
    def add_state(self, t: float, q: np.ndarray, qdot: np.ndarray, stamp=None) -> None:
        """A joint state (copied); one older than the latest is ignored (nothing to pair). The latest again after
        it was paired (a plant repeating its state while it waits for a first command, a controller activated
        meanwhile) is paired once more: the node's own duplicate check decides whether to answer it. A state it
        pushes out of the history unpaired is counted (module doc)."""
        ring = self._states
        if ring.size and t <= ring.t[ring.newest()]:
            if t == ring.t[ring.newest()] and t <= self.t_done:
                self.t_done = math.nextafter(t, -math.inf)
            return
        old = ring.t[ring.next] if ring.full else None
        row = ring.push(t, stamp)
        row[:self.nq] = q
        row[self.nq:] = qdot
        if old is not None and old > self.t_done and self.counter is not None:
            self.counter.reject(*self.miss(old))

    @property
    def joint_state(self) -> tuple | None:
        """(t, q, q̇, stamp) of the latest joint state (views on the history); setting one is :meth:`add_state`."""
        ring = self._states
        if not ring.size:
            return None
        i = ring.newest()
        return ring.t[i], ring.values[i, :self.nq], ring.values[i, self.nq:], ring.tags[i]

    @joint_state.setter
    def joint_state(self, value: tuple) -> None:
        self.add_state(*value)

    # -- odometry -----------------------------------------------------------------------------------------------
    def add_odometry(self, t: float, base: np.ndarray) -> None:
        """An odometry at ``t``: ``base`` = q_body (7) then v_body (6), copied."""
        self._odoms.push(t)[:] = base

    @property
    def odometry(self) -> tuple | None:
        """(t, q_body, v_body) of the latest odometry; setting one is :meth:`add_odometry`."""
        ring = self._odoms
        if not ring.size:
            return None
        i = ring.newest()
        return ring.t[i], ring.values[i, :7], ring.values[i, 7:]

    @odometry.setter
    def odometry(self, value: tuple) -> None:
        t, qb, vb = value
        row = self._odoms.push(t)
        row[:7], row[7:] = qb, vb

    # -- pairing ------------------------------------------------------------------------------------------------
    def miss(self, t: float) -> tuple[str, str]:
        """(kind, reason) for a joint state at ``t`` that found no odometry to pair with."""
        odoms = self._odoms
        if not odoms.size:
            return "missing", f"joint state at t = {t:.6f} s: no odometry received yet; no command for it"
        off = min((odoms.t[i] - t for i in odoms.order()), key=abs)
        return "mismatch", (f"joint state at t = {t:.6f} s: the nearest odometry is stamped {1e3 * off:+.3f} ms "
                            f"from it (tolerance {1e3 * self.tolerance:.3g} ms); no command for it")

    def ready(self) -> tuple | None:
        """(t, q, q̇, stamp) of the newest joint state not used yet that has an odometry within the tolerance,
        else None."""
        states, odoms, tol = self._states, self._odoms, self.tolerance
        if not states.size or states.t[states.newest()] <= self.t_done or not odoms.size:
            return None          # (the usual odometry that comes before its joint state: nothing to pair)
        order = states.order()
        o_order = odoms.order()
        for k in range(len(order) - 1, -1, -1):
            i = order[k]
            t = states.t[i]
            if t <= self.t_done:
                return None
            for j in reversed(o_order):
                if abs(t - odoms.t[j]) <= tol:
                    self.skipped += sum(1 for s in order[:k] if states.t[s] > self.t_done)
                    self.t_done = t
                    if self.counter is not None:
                        self.counter.ok()
                    row, od = states.values[i], odoms.values[j]
                    q, qdot = row[:self.nq].copy(), row[self.nq:].copy()
                    q[self.iq:self.iq + 7] = od[:7]
                    qdot[self.iv:self.iv + 6] = od[7:]
                    return t, q, qdot, states.tags[i]
        return None


__all__ = ["FreeBodySync"]
