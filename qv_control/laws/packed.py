"""The Python half of a law's whole compiled tick: its packed arguments (:mod:`qv_control.kernels.layout`) and
what Python keeps doing around the one call.

A law with a compiled tick holds a :class:`CompiledTick`: the int vector ``I`` (the static plan: joint tree,
frame slots of the coordinates and the constraint rows, the rows, unit-norm parts of q) and the float vector
``F`` (parameters, the law's state between ticks, the last tick's diagnostics), built when the law is made and
again after each rare event. A tick is then Pinocchio's Coriolis pass and the kernel; Python handles the rest:

- a **rare event** (the first tick, a change of the active constraints, a rank change, an input the kernel
  declines, an error to raise) runs the law's numpy path for that tick: the state is handed to the law's Python
  objects first (:meth:`ControlLaw._export_state`) and taken back after (:meth:`ControlLaw._import_state`);
- a **gain change**: the laws' gains are :class:`Setting` descriptors; assigning one bumps :data:`EPOCH`, and
  the next tick packs the parameters again (a gain array changed in place is not seen: assign it);
- ``law.last`` and ``law.saturation`` are formed from the diagnostics block when read.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np
import pinocchio as pin

from qv_dynamics.constraints.base import FrameConstraint
from qv_dynamics.constraints.loop_closure import LoopClosure
from qv_dynamics.kernels.views import support_mask, tree_of

from ..kernels import layout as L

_coriolis = pin.computeCoriolisMatrix

#: bumped by every assignment of a :class:`Setting`: a compiled tick packs its parameters again when it moved
EPOCH = [0]

#: (jacobian, drift, jacobian_rate) of the constraint kinds whose rows the tick kernels form
_FRAME_KINDS = {(FrameConstraint.jacobian, FrameConstraint.drift, FrameConstraint.jacobian_rate),
                (LoopClosure.jacobian, LoopClosure.drift, LoopClosure.jacobian_rate)}


class Setting:
    """A law parameter read by its compiled tick: a plain attribute whose assignment bumps :data:`EPOCH`."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            return obj.__dict__[self.name]
        except KeyError:
            raise AttributeError(self.name) from None

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.name] = value
        EPOCH[0] += 1


class Packer:
    """Blocks by their layout index: ``ints(h, a)`` and ``floats(h, a)`` (a vector is one row, a matrix its rows),
    then :meth:`build` → (I, F): two 2-D arrays, I's row 0 the header of (first row, rows, columns) triples."""

    def __init__(self):
        self._ints: dict[int, np.ndarray] = {}
        self._floats: dict[int, np.ndarray] = {}

    def ints(self, h: int, a) -> None:
        self._ints[h] = _two_d(a, np.int64)

    def floats(self, h: int, a) -> None:
        self._floats[h] = _two_d(a, float)

    def build(self) -> tuple[np.ndarray, np.ndarray]:
        wi = max([3 * L.NBLOCK] + [a.shape[1] for a in self._ints.values()])
        wf = max([1] + [a.shape[1] for a in self._floats.values()])
        I = np.zeros((1 + sum(a.shape[0] for a in self._ints.values()), wi), np.int64)
        F = np.zeros((sum(a.shape[0] for a in self._floats.values()), wf))
        for arr, blocks, o in ((I, self._ints, 1), (F, self._floats, 0)):
            for h, a in blocks.items():
                I[0, 3 * h:3 * h + 3] = (o, a.shape[0], a.shape[1])
                arr[o:o + a.shape[0], :a.shape[1]] = a
                o += a.shape[0]
        return I, F


def _two_d(a, dtype) -> np.ndarray:
    """``a`` as rows × columns (a vector: one row)."""
    a = np.asarray(a, dtype)
    if a.ndim <= 1:
        return a.reshape(1, -1)
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:])))


def fblock(I: np.ndarray, F: np.ndarray, h: int) -> np.ndarray:
    """Float block ``h`` as its rows of F (:func:`qv_control.kernels.blocks.fm`)."""
    o, r, c = (int(x) for x in I[0, 3 * h:3 * h + 3])
    return F[o:o + r, :c]


def fvector(I: np.ndarray, F: np.ndarray, h: int) -> np.ndarray:
    """Float block ``h`` of one row as a vector view."""
    o, _, c = (int(x) for x in I[0, 3 * h:3 * h + 3])
    return F[o, :c]


def placements_of(vec) -> np.ndarray | None:
    """``data.oMi`` or ``data.oMf`` as one (items × 12) array over Pinocchio's memory (rotation column-major, then
    the origin), or None when not laid out so (checked element by element; valid while ``data`` lives)."""
    nf = len(vec)
    base = vec[0].rotation.__array_interface__["data"][0]
    for k in range(nf):
        R, p = vec[k].rotation, vec[k].translation
        if (R.__array_interface__["data"][0] != base + 96 * k or not R.flags.f_contiguous
                or p.__array_interface__["data"][0] != base + 96 * k + 72):
            return None
    view = np.ctypeslib.as_array((ctypes.c_double * (12 * nf)).from_address(base)).reshape(nf, 12)
    for k in range(nf):
        if not (np.array_equal(view[k, :9], vec[k].rotation.ravel(order="F"))
                and np.array_equal(view[k, 9:], vec[k].translation)):
            return None
    return view


def data_views(system) -> tuple | None:
    """What the tick kernels read of ``system.data`` after ``computeCoriolisMatrix``: the composite inertias, Cᵀ
    (C-ordered view of Eigen's column-major C), J_w, J̇_w, the joint placements and the frame placements (written
    back for the frames the tick uses); None when ``data`` is not laid out as these views need."""
    from qv_dynamics.kernels.crb import composite_inertia_view  # numba: only once a tick kernel loaded

    model, data = system.model, system.data
    Y, oMi, oMf = composite_inertia_view(model, data), placements_of(data.oMi), placements_of(data.oMf)
    if Y is None or oMi is None or oMf is None:
        return None
    return Y, data.C.T, data.J, data.dJ, oMi, oMf


def frame_plan(system, coords, extra_frames=()) -> dict | None:
    """The frame slots and rows a tick kernel needs for the active constraints and the coordinates ``coords``
    (plus ``extra_frames``): int blocks I_PLAN, I_SUP, I_RPLAN, I_FJOINT, I_FID, float blocks F_FPLACE, F_RREF, and m;
    None when a constraint is not a frame kind (custom, or rows of its own)."""
    model = system.model
    fids: list[int] = []

    def slot(fid: int) -> int:
        if fid not in fids:
            fids.append(fid)
        return fids.index(fid)
    plan = []
    for it in coords.items:
        if it.kind == "joint":
            plan.append((0, 0, it.index, it.v_index))
        else:
            plan.append((1 if it.kind == "position" else 2, slot(it.frame_id), it.index, 0))
    for f in extra_frames:
        slot(f)
    cplan = system.constraint_plan()
    axes6 = np.arange(6)
    rows = []
    for c, _, sel in cplan.items:
        kind = type(c)
        if (kind.jacobian, kind.drift, kind.jacobian_rate) not in _FRAME_KINDS:
            return None
        sa = slot(c.frame_id)
        sb = slot(c.frame_b_id) if c.frame_b_id >= 0 else -1
        rows += [(sa, sb, int(a)) for a in np.atleast_1d(axes6[sel])]
    rr = coords._rot_ref
    Rref = np.zeros((len(fids), 9))
    place = np.zeros((len(fids), 12))
    for s, f in enumerate(fids):
        R = rr.get(f)
        if R is not None:
            Rref[s] = np.asarray(R, float).ravel()
        fr = model.frames[f]
        place[s, :9] = fr.placement.rotation.ravel(order="F")
        place[s, 9:] = fr.placement.translation
    return {L.I_PLAN: np.array(plan, np.int64).reshape(-1, 4), L.I_SUP: support_mask(model, fids),
            L.I_RPLAN: np.array(rows, np.int64).reshape(-1, 3), L.I_FJOINT: [model.frames[f].parentJoint for f in fids],
            L.I_FID: fids, "m": cplan.m, "slots": len(fids), L.F_FPLACE: place, L.F_RREF: Rref}


def evaluated(reference, state):
    """A callable reference evaluated at the state's time (when that is a finite number; else left as it is, for
    the numpy path to refuse); anything else as it is."""
    from qv_dynamics.state import Reference

    if isinstance(reference, Reference) or not callable(reference):
        return reference
    try:
        t = float(state.t)
    except (TypeError, ValueError):
        return reference
    return reference(t) if math.isfinite(t) else reference


def _no_nan(x) -> float:
    return np.nan if x is None else float(x)


class CompiledTick:
    """The packed arguments and the one call of a law's compiled tick (module doc). ``kernel``: the tick kernel;
    the law supplies ``_pack(packer, plan)`` (its parameter and state blocks), ``_export_state(tick)``,
    ``_import_state(tick)`` and ``_diagnostics(tick)``."""

    def __init__(self, law, kernel, views):
        self.law, self.kernel, self.views = law, kernel, views
        self.source = law   # the law whose coordinates, gains and tolerances are packed (the legged law: its stance's)
        self.system = law.system
        self.model, self.data = self.system.model, self.system.data
        self.n = self.system.nv
        self.I = self.F = None
        self.plan_key = self.epoch = self.ref_version = None
        self.live = False

    # ------------------------------------------------------------------ packing
    def pack(self) -> bool:
        """Build I and F for the current constraint plan, gains and coordinates' references; False: the plan is
        not one the kernel serves (the numpy path serves every tick until it changes)."""
        law, src, system = self.law, self.source, self.system
        self.plan_key, self.epoch, self.ref_version = system._plan_key, EPOCH[0], src.coords._ref_version
        plan = frame_plan(system, src.coords, law._extra_frames())
        self.live = False
        if plan is None:
            self.I = None
            return False
        p = Packer()
        model = self.model
        n, m, k = system.nv, plan["m"], src.k
        width = L.diag_width(n, m, k)
        p.ints(L.I_SIZES, [n, system.nq, m, k, plan["slots"], law._tick_mode(), model.njoints, width])
        p.ints(L.I_TREE, tree_of(model))
        for h in (L.I_PLAN, L.I_SUP, L.I_RPLAN, L.I_FJOINT, L.I_FID):
            p.ints(h, plan[h])
        p.ints(L.I_QUAT, np.array([(lo, hi) for _, lo, hi in system.unit_norm_parts()], np.int64).reshape(-1, 2))
        p.floats(L.F_FPLACE, plan[L.F_FPLACE])
        p.floats(L.F_RREF, plan[L.F_RREF])
        p.floats(L.F_ARM, np.array(model.armature, float))
        p.floats(L.F_GRAV, model.gravity.linear.copy())
        p.floats(L.F_LO, src.coords._lo)
        p.floats(L.F_HI, src.coords._hi)
        lim = law.limits
        p.floats(L.F_LIM, np.full(n, np.inf) if lim is None else lim)
        p.floats(L.F_KP, src.kp)
        par = np.zeros(L.NPAR)
        par[[L.P_KD, L.P_COND_MAX, L.P_RTOL, L.P_ATOL, L.P_HAS_LIMITS]] = src.kd, src.cond_max, *src._tolerances(), \
            lim is not None
        pi = src.force_pi
        par[[L.P_KF, L.P_KI, L.P_PI_DT, L.P_PI_ON]] = pi.kf, pi.ki, pi.max_dt, pi.enabled
        p.floats(L.F_PAR, par)
        st = np.zeros(L.NSTATE)
        st[[L.S_PI_T, L.S_HIST_T, L.S_INT_T, L.S_E_T, L.S_GVN_T, L.S_PHASE0, L.S_PHASE1]] = np.nan
        st[L.S_PI_PERIOD] = np.inf
        p.floats(L.F_ST, st)
        pis = law._pi_size(n, m)
        for h, size in ((L.F_PIZ, pis), (L.F_PID, pis), (L.F_PIDP, pis), (L.F_IZ, k), (L.F_EP, k), (L.F_GVN, k),
                        (L.F_GRATE, k), (L.F_BIAS, n), (L.F_HOLD, k), (L.F_TAUI, n)):
            p.floats(h, np.zeros(size))
        p.floats(L.F_VP, np.eye(n))
        p.floats(L.F_UP, np.eye(m))
        p.floats(L.F_UC, np.eye(k))
        p.floats(L.F_DMAT, np.zeros((k, k)))
        p.floats(L.F_AFULL, np.zeros((m, n)))
        for h in (L.F_KI6, L.F_FMAX):
            p.floats(h, np.zeros(0))
        p.floats(L.F_FRICTION, np.zeros((2, n)))
        p.floats(L.F_QP, np.zeros((0, 27)))
        p.ints(L.I_PAS, np.zeros(0))
        p.floats(L.F_DIAG, np.zeros((L.NDIAG, width)))
        law._pack(p, plan)
        self.I, self.F = p.build()
        self.m, self.k, self.width = m, k, width
        return True

    def block(self, h: int) -> np.ndarray:
        return fblock(self.I, self.F, h)

    def vector(self, h: int) -> np.ndarray:
        return fvector(self.I, self.F, h)

    @property
    def state(self) -> np.ndarray:
        return self.vector(L.F_ST)

    # ------------------------------------------------------------------ rare events
    def stale(self) -> bool:
        """The packed plan or parameters no longer match the system, the gains or the coordinates' references."""
        return (self.system._plan_key is not self.plan_key or EPOCH[0] != self.epoch
                or self.source.coords._ref_version != self.ref_version)

    def hand_over(self) -> None:
        """Before a numpy-path tick: the state goes to the law's Python objects (when the arrays hold it)."""
        self.sync()
        self.live = False

    def sync(self) -> None:
        """The state into the law's Python objects, the arrays still holding it (counters move, not copied)."""
        if self.live and self.I is not None:
            self.law._export_state(self)

    def take_back(self) -> None:
        """After a numpy-path tick: pack again if stale, then take the state from the law's Python objects."""
        if self.I is None or self.stale():
            if not self.pack():
                return
        self.live = bool(self.law._import_state(self))
        self.state[L.S_LIVE] = float(self.live)

    def numpy_tick(self, compute, state, reference):
        """One tick by the law's numpy path ``compute``, the state handed over and taken back around it."""
        self.hand_over()
        tau = compute(state, reference)
        self.take_back()
        return tau

    # ------------------------------------------------------------------ the tick
    def run(self, state, ref):
        """τ of the compiled tick, or None (a rare event: module doc). ``ref``: a Reference or None."""
        if not self.live or self.stale():
            return None
        th = thd = thdd = lamd = None
        if ref is not None:
            th, thd, thdd, lamd = ref.theta, ref.theta_dot, ref.theta_ddot, ref.lambda_
        tau = np.empty(self.n)
        try:   # (_call, written out: the 1 kHz path)
            q, qdot = state.q, state.qdot
            _coriolis(self.model, self.data, q, qdot)
            ok = self.kernel(*self.views, self.I, self.F, q, qdot, state.lambda_meas, th, thd, thdd, lamd, state.t,
                             tau)
        except Exception:   # (a state or reference Pinocchio or the kernel cannot take as it is)
            ok = self._call_converted(state, th, thd, thdd, lamd, tau)
        if not ok:
            return None
        law = self.law
        law._last_from = law._sat_from = self
        return tau

    def _call(self, q, qdot, lam, th, thd, thdd, lamd, t, tau) -> int:
        _coriolis(self.model, self.data, q, qdot)
        return self.kernel(*self.views, self.I, self.F, q, qdot, lam, th, thd, thdd, lamd, t, tau)

    def _call_converted(self, state, th, thd, thdd, lamd, tau) -> int:
        """The call with every vector as float64 (lists, integer arrays) and t as a float; 0 when one does not
        convert (the numpy path names it)."""
        try:
            vec = [None if x is None else np.asarray(x, float) for x in
                   (state.q, state.qdot, state.lambda_meas, th, thd, thdd, lamd)]
            if any(x is not None and x.ndim != 1 for x in vec):
                return 0
            return self._call(*vec, float(state.t), tau)
        except Exception:
            return 0

    def saturation(self):
        from ..saturation import SaturationStatus

        sc = self.block(L.F_DIAG)[L.D_SCALARS]
        if self.law.limits is None:
            return SaturationStatus()
        if sc[L.DS_ACTIVE] == 0.0:
            return SaturationStatus(peak_ratio=float(sc[L.DS_PEAK]))
        return SaturationStatus(True, float(sc[L.DS_MOTION_SCALE]), float(sc[L.DS_FORCE_SCALE]),
                                bool(sc[L.DS_CLIPPED]), float(sc[L.DS_PEAK]))

    def diagnostics(self) -> dict:
        return self.law._diagnostics(self)

    def cond(self) -> float:
        """cond(D) of the last tick: the kernel's when it formed one, else from the singular values of its D
        (LAPACK, as :func:`qv_control.coordinates.check_reduced_jacobian`)."""
        from ..coordinates import _singular_values

        c = float(self.block(L.F_DIAG)[L.D_SCALARS, L.DS_COND])
        if c == c:
            return c
        D = self.block(L.F_DMAT)
        if D.shape[0] == 0:
            return 1.0
        s = _singular_values(np.array(D))
        return float(s[0] / s[-1]) if s[-1] > 0 else np.inf


__all__ = ["CompiledTick", "EPOCH", "Packer", "Setting", "data_views", "fblock", "frame_plan", "placements_of"]
