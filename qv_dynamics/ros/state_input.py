"""A node's measured state read into preallocated arrays at 1 kHz: joint states and force/torque sensors.

:class:`JointStateReader` takes a sensor_msgs/JointState (a message, or the :class:`~.raw.JointStateView` of
its serialized bytes) into q, q̇ and the reported effort in model order, with the checks and messages of
:func:`~.messages.joint_state_to_arrays` (which builds new arrays per call) and the stamp as ints and
seconds. :class:`SensorWrenches` keeps the latest wrench of each measured constraint in its sensor frame's
axes and gives λ_meas of the active rows at a state's q (SPEC §5: λ in world-aligned axes): one forward
kinematics pass, one frame placement and one 3 × 3 product (two for a constraint with moment rows) per
measured constraint, each constraint's axes picked into λ. The free body's odometry is :mod:`.odometry`,
its pairing with the joint states :mod:`.free_body`.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DimensionError, NonFiniteError
from .messages import JointLayout
from .raw import JointStateView


def _run(index: np.ndarray) -> slice | None:
    """``index`` as a slice when it is one run of consecutive entries (and not empty), else None."""
    if index.size and np.array_equal(index, np.arange(index[0], index[0] + index.size)):
        return slice(int(index[0]), int(index[0]) + index.size)
    return None


class JointStateReader:
    """sensor_msgs/JointState into ``q`` (nq), ``qdot`` (nv), ``effort`` (nv; ``has_effort``) in model order,
    preallocated and overwritten by each :meth:`read` (the caller copies what it keeps). Entries of q and q̇
    not on a 1-DoF joint (a free-flyer root read from odometry) are left as they are."""

    def __init__(self, layout: JointLayout):
        self.layout = layout
        self.q, self.qdot, self.effort = np.zeros(layout.nq), np.zeros(layout.nv), np.zeros(layout.nv)
        n = len(layout.names)
        # the message's values are taken straight into q, q̇, effort where the joints are one run of entries
        qrun = not layout.any_continuous and _run(layout.q_index)
        self._pos = self.q[qrun] if qrun else np.empty(n)
        vrun = _run(layout.v_index)
        self._vel, self._eff = (self.qdot[vrun], self.effort[vrun]) if vrun else (np.empty(n), np.empty(n))
        self._scatter_q, self._scatter_v = not qrun, not vrun
        self._names = None          # the name list of the last message (a raw view shares one tuple)
        self._idx = np.zeros(0, int)
        self.has_effort = False
        self.sec = self.nanosec = 0

    def read(self, msg) -> float:
        """Read ``msg``; its stamp [s]. DimensionError (lengths), UnknownNameError (missing joints) or
        NonFiniteError (NaN/Inf), as :func:`~.messages.joint_state_to_arrays`; the arrays are then partly
        overwritten (the caller drops the message)."""
        names, pos, vel, eff = msg.name, msg.position, msg.velocity, msg.effort
        n_names = len(names)
        if len(pos) != n_names:
            raise DimensionError(f"joint state: {n_names} names but {len(pos)} positions")
        if len(vel) != n_names:
            raise DimensionError(f"joint state: {n_names} names but {len(vel)} velocities")
        if len(eff) not in (0, n_names):
            raise DimensionError(f"joint state: {n_names} names but {len(eff)} efforts")
        if names is not self._names:
            self._idx = self.layout.message_index(names)
            self._names = names
        idx, p, v, e = self._idx, self._pos, self._vel, self._eff
        np.take(pos, idx, out=p)
        np.take(vel, idx, out=v)
        self.has_effort = has_effort = len(eff) > 0
        if has_effort:
            np.take(eff, idx, out=e)
        # a sum of squares is finite iff every entry is (module doc of messages: the fast path)
        if not math.isfinite(p.dot(p) + v.dot(v) + (e.dot(e) if has_effort else 0.0)):
            self._name_nonfinite(has_effort)
        lay = self.layout
        if lay.any_continuous:
            self._continuous_q(p)
        elif self._scatter_q:
            self.q[lay.q_index] = p
        if self._scatter_v:
            self.qdot[lay.v_index] = v
            if has_effort:
                self.effort[lay.v_index] = e
        if type(msg) is JointStateView:
            self.sec, self.nanosec = msg.sec, msg.nanosec
        else:
            stamp = msg.header.stamp
            self.sec, self.nanosec = stamp.sec, stamp.nanosec
        return self.sec + 1e-9 * self.nanosec

    def _continuous_q(self, theta: np.ndarray) -> None:
        """The 1-DoF entries of q from ``theta`` (cos, sin for continuous joints)."""
        q, lay = self.q, self.layout
        for k, i in enumerate(lay.q_index):
            if lay.continuous[k]:
                q[i], q[i + 1] = math.cos(theta[k]), math.sin(theta[k])
            else:
                q[i] = theta[k]

    def _name_nonfinite(self, has_effort: bool) -> None:
        for what, arr in (("position", self._pos), ("velocity", self._vel), ("effort", self._eff)):
            if (what != "effort" or has_effort) and not np.all(np.isfinite(arr)):
                bad = [self.layout.names[i] for i in np.flatnonzero(~np.isfinite(arr))]
                raise NonFiniteError(f"joint state: non-finite {what} for joints {bad}")


class SensorWrenches:
    """The latest wrench (fx, fy, fz, tx, ty, tz) × ``sign`` of each constraint in ``constraints``, in its
    sensor frame's axes, and λ_meas of the active rows from them (module doc)."""

    def __init__(self, system, constraints=(), sign: float = 1.0):
        import pinocchio as pin

        self._pin = pin
        self.system, self.model = system, system.model
        self.data = system.model.createData()     # the kinematics of the state λ is rotated with
        self.names = [c.name for c in constraints]
        self.slot = {name: i for i, name in enumerate(self.names)}
        self.W = np.zeros((len(self.names), 6))
        self.have = np.zeros(len(self.names), bool)
        self.sign = float(sign)
        self._tmp = np.zeros(6)
        self._plan = self._items = None
        self._fk_q: np.ndarray | None = None

    def store(self, name: str, values) -> None:
        """The wrench of constraint ``name`` (six values, the sensor frame's axes); NonFiniteError on NaN/Inf
        (nothing kept), DimensionError on another length."""
        tmp = self._tmp
        if len(values) != 6:
            raise DimensionError(f"wrench: expected length 6, got {len(values)}")
        tmp[:] = values
        if not math.isfinite(tmp.dot(tmp)):
            raise NonFiniteError(f"wrench: non-finite entries at indices {np.flatnonzero(~np.isfinite(tmp)).tolist()}")
        i = self.slot[name]
        np.multiply(tmp, self.sign, out=self.W[i])
        self.have[i] = True

    def latest(self, name: str) -> np.ndarray | None:
        """The kept wrench of ``name`` (sensor axes, × sign), or None before the first."""
        i = self.slot.get(name)
        return None if i is None or not self.have[i] else self.W[i]

    def forget(self) -> None:
        """A new state: the next :meth:`placement` runs the kinematics again, whatever ``q`` it is given."""
        self._fk_q = None

    def placement(self, q: np.ndarray, frame_id: int):
        """The frame's placement (pin.SE3) at ``q``: forward kinematics once per ``q`` object between two
        :meth:`forget` (the node calls it at each state)."""
        pin = self._pin
        if q is not self._fk_q:
            pin.forwardKinematics(self.model, self.data, q)
            self._fk_q = q
        return pin.updateFramePlacement(self.model, self.data, frame_id)

    def _rows_plan(self):
        """Per active constraint (slot, frame id, rows of λ, its axes, moment rows): None unless every active
        constraint is measured; rebuilt when the active set changes."""
        plan = self.system.constraint_plan()
        if plan is not self._plan:
            items = []
            for c, rows, _ in plan.items:
                i = self.slot.get(c.name)
                if i is None:
                    items = None
                    break
                items.append((i, c.frame_id, rows, c.axis_idx, bool(c.axis_idx.size and c.axis_idx.max() >= 3)))
            self._plan, self._items = plan, (items or None, plan.m)
        return self._items

    def rows(self, q: np.ndarray) -> np.ndarray | None:
        """λ_meas of all active rows at ``q`` (world-aligned axes, the rows' order); None unless every active
        constraint has a measurement."""
        if not self.names:
            return None
        items, m = self._rows_plan()
        if items is None:
            return None
        lam, W, have = np.empty(m), self.W, self.have
        for i, fid, rows, axes, moments in items:
            if not have[i]:
                return None
            if fid < 0:
                lam[rows] = W[i][axes]
            elif moments:      # force and moment: R [f t] in one product, then the constraint's axes
                lam[rows] = np.dot(self.placement(q, fid).rotation, W[i].reshape(2, 3).T).T.reshape(6)[axes]
            else:
                lam[rows] = np.dot(self.placement(q, fid).rotation, W[i, :3])[axes]
        return lam


__all__ = ["JointStateReader", "SensorWrenches"]
