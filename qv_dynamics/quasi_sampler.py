"""One sample of ``evaluate`` + ``quasi_decompose`` at the cost of Pinocchio's passes and one compiled call
for a control loop that decomposes every state it receives.

:class:`QuasiSampler` runs two Pinocchio passes — the Coriolis matrix, which leaves J_w, J̇_w and the composite
inertias in ``data``, and the frame placements — where ``system.evaluate`` runs four (CRBA and gravity too),
then :func:`qv_dynamics.kernels.quasi.sample`, which reads ``data`` through views held since construction, forms
M and g from the composite inertias (:mod:`qv_dynamics.kernels.crb`: CRBA's sums, checked against ``crba`` and
``computeGeneralizedGravity`` at construction), the constraint rows A, Ȧq̇ of the frame constraints, and runs
the steady-state decomposition of
:func:`qv_dynamics.quasi.compiled_decompose` (the same kernel, the same equations, the same rank rule).
Constraints without a target are anchored after the passes, as ``evaluate`` does. Every other sample — the
first (no previous basis), the first after a change of the active constraints, custom constraints (or a
frame constraint with rows of its own), a rank loss or anything the kernel declines — takes
``system.evaluate`` + ``quasi_decompose`` (which raise or re-seed the basis as they do for any caller).
:meth:`QuasiSampler.evaluate` gives the terms alone the same way (:func:`qv_dynamics.kernels.quasi.terms`).

Results are the sampler's buffers, like a Pinocchio ``Data``: the terms and the state of a sample stay valid
until the next call (the state of the one before is kept as ``prev``: two buffers in turn); copy what must
outlive it. Φ of the returned terms is computed when first read, from the frame placements in
``system.data``: read it before anything else runs a Pinocchio pass on that ``data`` (another sampler or law
on the same system, ``system.evaluate``).
"""
from __future__ import annotations

import ctypes

import numpy as np
import pinocchio as pin

from .constraints.base import FrameConstraint
from .constraints.loop_closure import LoopClosure
from .errors import as_vector
from .kernels.loader import load
from .kernels.views import support_mask, tree_of
from .linalg import ATOL, RTOL, kernel_vector
from .model import DynamicsTerms
from .quasi import QuasiState, force_views, quasi_decompose, state_views, warm_start

#: (jacobian, drift) implementations whose rows :func:`.kernels.frame.constraint_rows` reproduces
_FRAME_ROWS = {(FrameConstraint.jacobian, FrameConstraint.drift), (LoopClosure.jacobian, LoopClosure.drift)}


class SampledTerms(DynamicsTerms):
    """:class:`~qv_dynamics.model.DynamicsTerms` held in a sampler's buffers; Φ computed when read."""

    def __init__(self, system, q, qdot, T: np.ndarray, tv: np.ndarray, n: int, labels: list):
        self.system, self.q, self.qdot = system, q, qdot
        self.M, self.C, self.A = T[:n], T[n:2 * n], T[2 * n:]
        self.g, self.h, self.Adot_qdot = tv[:n], tv[n:2 * n], tv[2 * n:-1]
        self.row_labels = labels
        self._phi = None

    @property
    def phi(self) -> np.ndarray:
        """Φ(q) of the active rows (from the frame placements ``data`` holds since the sample)."""
        if self._phi is None:
            plan, data = self.system.constraint_plan(), self.system.data
            parts = [c.residual(data, self.q)[sel] for c, _, sel in plan.items]
            self._phi = np.concatenate(parts) if parts else np.zeros(0)
        return self._phi


def placements_view(data: pin.Data) -> np.ndarray | None:
    """Every frame placement of ``data`` as one (frames × 12) array over Pinocchio's own memory (rotation
    column-major, then the origin), or None when ``data.oMf`` is not laid out that way (checked element by
    element). Valid while ``data`` lives: the caller keeps ``data``."""
    nf = len(data.oMf)
    rot0 = data.oMf[0].rotation
    base = rot0.__array_interface__["data"][0]
    for k in range(nf):
        R, p = data.oMf[k].rotation, data.oMf[k].translation
        if (R.__array_interface__["data"][0] != base + 96 * k or not R.flags.f_contiguous
                or p.__array_interface__["data"][0] != base + 96 * k + 72):
            return None
    view = np.ctypeslib.as_array((ctypes.c_double * (12 * nf)).from_address(base)).reshape(nf, 12)
    for k in range(nf):
        if not (np.array_equal(view[k, :9], data.oMf[k].rotation.ravel(order="F"))
                and np.array_equal(view[k, 9:], data.oMf[k].translation)):
            return None
    return view


def data_views(model: pin.Model, data: pin.Data) -> tuple | None:
    """What the kernels read of ``data`` (:data:`qv_dynamics.kernels.quasi._DATA_SIG`'s first eight): the composite
    inertias (:func:`.kernels.crb.composite_inertia_view`), the joint tree, the armature, g⃗, Cᵀ (a C-ordered view
    of Eigen's column-major ``data.C``: the kernel reads it transposed), J_w, J̇_w and every frame placement; or
    None when ``data`` is not laid out as these views need (the reference path then serves). The armature and g⃗
    are copied: a sampler serves the model as it was when built."""
    from .kernels.crb import composite_inertia_view  # numba: reached only once the compiled kernel loaded

    Y, oMf = composite_inertia_view(model, data), placements_view(data)
    if Y is None or oMf is None:
        return None
    return (Y, tree_of(model), np.array(model.armature, float), model.gravity.linear.copy(), data.C.T, data.J,
            data.dJ, oMf)


class _Slot:
    """One buffer set: the terms' T, tv and the kernel's out, vec, with a DynamicsTerms and a QuasiState whose
    arrays are views of them (made once)."""

    def __init__(self, system, n: int, m: int, labels: list):
        self.T, self.tv = np.zeros((2 * n + m, n)), np.zeros(2 * n + m + 1)  # tv[-1]: ½vᵀv
        self.out, self.vec = np.zeros((6 * n + 4 * m, n)), np.zeros(6 * n + 2 * m)
        self.terms = SampledTerms(system, None, None, self.T, self.tv, n, labels)
        self.qs = QuasiState(**state_views(self.out, self.vec, n, m))
        self.forces = force_views(self.vec, n, m)
        self.has_forces = False


class QuasiSampler:
    """``sample(q, q̇[, τ])`` = ``(terms, qs)`` of ``system.evaluate(q, q̇)`` and ``quasi_decompose(terms, τ,
    prev)`` with ``prev`` the previous sample's state (module doc); ``evaluate(q, q̇)`` the terms alone (the
    projection laws' sample). ``reset()`` forgets ``prev`` (V₁, V₂ are re-seeded at the next sample). q and q̇
    must be validated float vectors (a law's ``_read_state``)."""

    def __init__(self, system, rtol: float = RTOL, atol: float = ATOL):
        self.system, self.rtol, self.atol = system, rtol, atol
        self.prev: QuasiState | None = None
        self._kernel = load("qv_dynamics.kernels.quasi", "sample")
        self._terms_kernel = load("qv_dynamics.kernels.quasi", "terms")
        self._views = data_views(system.model, system.data) if self._kernel is not None else None
        self._plan = None      # the system's constraint plan the kernel inputs below were built for
        self._inputs = None    # (fids, sup, rplan, slots) or None: this plan takes the reference path
        self._turn = 0

    def reset(self) -> None:
        self.prev = None

    def _build(self, plan):
        """Kernel inputs of a constraint plan: None when a constraint is not a frame constraint (custom)."""
        fids, rows = [], []
        axes6 = np.arange(6)
        for c, _, sel in plan.items:
            # rows the kernel knows: a frame's Jacobian (point contact, weld) or two frames' difference; a
            # subclass with rows of its own (or a custom constraint) takes the reference path
            kind = type(c)
            if (kind.jacobian, kind.drift) not in _FRAME_ROWS:
                return None
            slots = []
            for f in (c.frame_id, c.frame_b_id):
                if f >= 0 and f not in fids:
                    fids.append(f)
                slots.append(fids.index(f) if f >= 0 else -1)
            rows += [(slots[0], slots[1], int(a)) for a in np.atleast_1d(axes6[sel])]
        n, m = self.system.nv, plan.m
        slots = (_Slot(self.system, n, m, plan.labels), _Slot(self.system, n, m, plan.labels),
                 _Slot(self.system, n, m, plan.labels))  # two in turn for sample(), one for evaluate()
        return (np.array(fids or [0], np.int64), support_mask(self.system.model, fids),
                np.array(rows, np.int64).reshape(m, 3), slots)

    def _served(self):
        """The kernel inputs of the current constraint plan, or None (the reference path serves it)."""
        plan = self.system.constraint_plan()
        if plan is not self._plan:
            self._plan, self._inputs = plan, self._build(plan) if self._views is not None else None
        return self._inputs

    def _passes(self, q: np.ndarray, qdot: np.ndarray) -> None:
        """Pinocchio's Coriolis pass (C, J_w, J̇_w, the joint placements and the composite inertias, from which
        the kernel forms M and g: :mod:`.kernels.crb`) and the frame placements, then ``evaluate``'s anchoring
        of constraints without a target yet."""
        system = self.system
        model, data = system.model, system.data
        pin.computeCoriolisMatrix(model, data, q, qdot)
        pin.updateFramePlacements(model, data)
        system._anchor_from_data(False)

    def evaluate(self, q: np.ndarray, qdot: np.ndarray) -> DynamicsTerms:
        """``system.evaluate(q, q̇)`` (terms only, no decomposition) in one kernel call after the passes; the
        terms live in the sampler's buffers until its next ``evaluate``."""
        inp = self._served()
        if inp is None or self._terms_kernel is None:
            return self.system.evaluate(q, qdot, checked=True)
        self._passes(q, qdot)
        fids, sup, rplan, slots = inp
        slot = slots[2]
        self._terms_kernel(*self._views, fids, sup, rplan, qdot, slot.T, slot.tv)
        terms = slot.terms
        terms.q, terms.qdot, terms._phi = q, qdot, None
        return terms

    def sample(self, q: np.ndarray, qdot: np.ndarray, tau: np.ndarray | None = None
               ) -> tuple[DynamicsTerms, QuasiState]:
        """(terms, qs) of this state (module doc)."""
        system, prev = self.system, self.prev
        inp = self._served()
        if inp is not None and prev is not None and prev.rank == self._plan.m:
            self._passes(q, qdot)
            fids, sup, rplan, slots = inp
            slot = slots[self._turn]
            Vp, Up = warm_start(prev)
            t = _NO_TAU if tau is None else kernel_vector(as_vector("tau", tau, system.nv))
            if not self._kernel(*self._views, fids, sup, rplan, qdot, Vp, Up, t, self.rtol, self.atol, slot.T,
                                slot.tv, slot.out, slot.vec):
                return self._finish(slot, q, qdot, tau)
        terms = system.evaluate(q, qdot, checked=True)
        qs = quasi_decompose(terms, tau=tau, prev=prev, rtol=self.rtol, atol=self.atol)
        self.prev = qs
        return terms, qs

    def _finish(self, slot: _Slot, q, qdot, tau) -> tuple[DynamicsTerms, QuasiState]:
        terms, qs = slot.terms, slot.qs
        terms.q, terms.qdot, terms._phi = q, qdot, None
        qs.kinetic_energy = slot.tv.item(-1)
        qs._U1 = None  # computed from Λ when asked, as for any state
        if slot.has_forces != (tau is not None):  # the quasi-forces' views are set, or None without τ
            slot.has_forces = tau is not None
            for k, arr in slot.forces.items():
                setattr(qs, k, arr if slot.has_forces else None)
        self._turn ^= 1
        self.prev = qs
        return terms, qs


_NO_TAU = np.zeros(0)
