"""The compiled path of :meth:`qv_control.coordinates.MinimalCoordinates.evaluate`: the kernel's
static inputs (row plan, frame slots, supporting columns, orientation references) built once, and persistent
numpy views of what Pinocchio's kinematic pass leaves in a ``Data`` (``data.J``, ``data.dJ``, the frames'
``oMf`` rotation and translation), so that a tick is one kernel call
(:func:`qv_control.kernels.coordinates.coordinates`).

It serves θ specs with at most two distinct frames (coordinates and, with ``constraint_rates``, the frames of
the active point contacts and welds); anything else (more frames, a loop closure or custom constraint whose Ȧ
is not a frame's J̇) returns None and the caller keeps its numpy path.
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.constraints.base import FrameConstraint
from qv_dynamics.kernels.views import support_mask

MAX_SLOTS = 2


class CompiledCoordinates:
    """Kernel inputs of one :class:`~qv_control.coordinates.MinimalCoordinates` (module doc)."""

    def __init__(self, coords):
        self.coords = coords
        self.model = coords.model
        self._plans: dict = {}            # (constraint_rates, id of the constraint plan) -> (it, (plan, fids, sup))
        self._views = None                # (data, fids, Jw, dJw, R0, p0, R1, p1)
        self._ref = (None, None, None)    # (reference version, fids, Rref)

    def _plan(self, constraint_rates: bool):
        """(plan, frame ids of the slots, supporting columns) or None (module doc)."""
        cplan = self.coords.system.constraint_plan() if constraint_rates else None
        key = (constraint_rates, id(cplan))
        hit = self._plans.get(key)
        if hit is None or hit[0] is not cplan:
            if len(self._plans) > 8:
                self._plans.clear()
            hit = self._plans[key] = (cplan, self._build(cplan))  # (keeps cplan alive: its id stays unique)
        return hit[1] or None

    def _build(self, cplan):
        fids: list[int] = []

        def slot(fid: int) -> int:
            if fid not in fids:
                fids.append(fid)
            return fids.index(fid)
        rows = []
        for it in self.coords.items:
            if it.kind == "joint":
                rows.append((0, 0, it.index, it.v_index))
            else:
                rows.append((1 if it.kind == "position" else 2, slot(it.frame_id), it.index, 0))
        if cplan is not None:
            axes6 = np.arange(6)
            for c, _, sel in cplan.items:
                if type(c).jacobian_rate is not FrameConstraint.jacobian_rate:
                    return ()
                rows += [(3, slot(c.frame_id), int(a), 0) for a in np.atleast_1d(axes6[sel])]
        if len(fids) > MAX_SLOTS:
            return ()
        return np.array(rows, np.int64).reshape(-1, 4), fids, support_mask(self.model, fids)

    def _data_views(self, data, fids):
        v = self._views
        if v is None or v[0] is not data or v[1] is not fids:
            fr = [(data.oMf[f].rotation, data.oMf[f].translation) for f in fids]
            fr += [(np.eye(3), np.zeros(3))] * (MAX_SLOTS - len(fr))
            # views into data's own memory (valid while data lives: we hold it in the tuple)
            v = self._views = (data, fids, data.J, data.dJ, fr[0][0], fr[0][1], fr[1][0], fr[1][1])
        return v

    def _references(self, fids, data):
        """R_ref of each slot (the frame's current orientation where none was set yet, as the numpy path)."""
        coords = self.coords
        rr = coords._rot_ref
        for f in fids:
            if f in rr and rr[f] is None:
                rr[f] = data.oMf[f].rotation.copy()
                coords._ref_version += 1
        ver, fs, Rref = self._ref
        if ver != coords._ref_version or fs is not fids:
            Rref = np.zeros((len(fids) or 1, 3, 3))
            for s, f in enumerate(fids):
                if rr.get(f) is not None:
                    Rref[s] = rr[f]
            self._ref = (coords._ref_version, fids, Rref)
        return Rref

    def prepare(self, data, constraint_rates: bool):
        """The kernel's inputs before q, q̇: (plan, sup, (J_w, J̇_w, R₀, p₀, R₁, p₁), R_ref), or None (not served
        here, module doc)."""
        p = self._plan(constraint_rates)
        if p is None:
            return None
        plan, fids, sup = p
        return plan, sup, self._data_views(data, fids)[2:], self._references(fids, data)

    def evaluate(self, data, q, qdot, constraint_rates: bool):
        """(θ, J, J̇, J̇q̇, θ̇, Ȧ or None) as views of one fresh array, or None: not served here (module doc) or an
        orientation beyond the rotation-vector chart (the numpy path then raises its error)."""
        kernel = self.coords._kernel
        p = None if kernel is None else self.prepare(data, constraint_rates)
        if p is None:
            return None
        plan, sup, v, Rref = p
        k = self.coords.k
        m = plan.shape[0] - k
        out = np.empty((2 * k + m + 3, qdot.shape[0]))
        if kernel(v[0], v[1], v[2], v[3], v[4], v[5], Rref, plan, sup, k, q, qdot, out):
            return None
        b = 2 * k + m
        return out[b, :k], out[:k], out[k:2 * k], out[b + 2, :k], out[b + 1, :k], \
            (out[2 * k:b] if constraint_rates else None)


__all__ = ["CompiledCoordinates", "MAX_SLOTS"]
