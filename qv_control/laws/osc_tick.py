"""What the operational-space laws share around their compiled tick (:mod:`qv_control.kernels.osc`): the kernel's
static inputs read from Pinocchio's ``Data`` (views held since construction), the packed state ``S``
(:mod:`qv_control.kernels.osc_layout`) and its exchange with the objects the numpy path keeps (:class:`ForcePI`,
:class:`IntegralCarry`, :class:`SaturationStatus`): a law whose tick the kernel declines (a factor not positive
definite, a non-finite input, an input of another type or shape, a set-up the kernel does not serve) runs its numpy
path for that sample from the same state, and hands the state back.

Read lazily from ``S`` and the kernel's ``out``: ``law.saturation`` and ``law.last`` (built when first read after a
compiled sample: a tick pays for no Python objects).
"""
from __future__ import annotations

import math

import numpy as np

from qv_dynamics.kernels.loader import load
from qv_dynamics.kernels.views import support_mask
from qv_dynamics.quasi_sampler import data_views

from ..kernels import osc_layout as L
from ..kernels.layout import GAP_PERIODS
from ..saturation import SaturationStatus
from .packed import EPOCH


def kernel_inputs(system, module: str, name: str):
    """(tick, views (Y, Cᵀ, J_w, J̇_w, oMf), tree, armature, g⃗) of the kernel ``name`` of ``module`` (of
    :mod:`qv_control.kernels`), or None (numba missing, cache not warmed, ``Data`` not laid out as the views
    need): the numpy path then serves every sample."""
    tick = load(f"qv_control.kernels.{module}", name)
    views = None if tick is None else data_views(system.model, system.data)
    if views is None:
        return None
    Y, tree, armature, grav, Ct, Jw, dJw, oMf = views
    return tick, (Y, Ct, Jw, dJw, oMf), tree, armature, grav


class PackedState:
    """The packed state of an operational-space law (``self._S``, ``self._out``) with the numpy path's objects: the
    force PI, the limiter's status and, in the tool-frame law, the carried integral torque. ``_packed``: S holds
    the state (since a compiled sample); the objects are read back from it before a numpy sample or anything that
    reads or changes them (:meth:`_to_objects`: reset, the carried torque), and written into it when a compiled
    sample follows (:meth:`_from_objects`)."""

    _packed = False
    _stale = False        # ``last`` and ``saturation`` are to be read from S / out

    def _init_packed(self, rows: int, width: int, out_rows: int) -> None:
        self._S = np.zeros((rows, width))
        self._out = np.zeros((out_rows, width))
        self._S[L.VAR, L.PI_PERIOD] = math.inf
        self._S[L.VAR, L.WAS_CONTACT] = -1.0
        self._S[L.PAR, L.GAP] = GAP_PERIODS
        self._sat = SaturationStatus()
        self._last: dict = {}

    @property
    def q_null(self):
        """The posture q_n (None: the first state's q), also in ``S`` for the kernel."""
        return self._q_null

    @q_null.setter
    def q_null(self, value) -> None:
        self._q_null = value
        if value is not None:
            self._S[L.Q_NULL, :self.system.nv] = value

    # ------------------------------------------------------------------ lazily read diagnostics
    @property
    def saturation(self) -> SaturationStatus:
        if self._stale:
            self._unpack_last()
        return self._sat

    @saturation.setter
    def saturation(self, status: SaturationStatus) -> None:
        self._sat = status
        V = self._S[L.VAR]
        V[L.SAT_ACTIVE], V[L.SAT_MOTION], V[L.SAT_FORCE] = float(status.active), status.motion_scale, \
            status.force_scale
        V[L.SAT_CLIPPED], V[L.SAT_PEAK] = float(status.clipped), status.peak_ratio

    @property
    def last(self) -> dict:
        if self._stale:
            self._unpack_last()
        return self._last

    @last.setter
    def last(self, value: dict) -> None:
        self._last = value

    def _unpack_last(self) -> None:
        self._stale = False
        V = self._S[L.VAR]
        self._sat = SaturationStatus(bool(V[L.SAT_ACTIVE]), float(V[L.SAT_MOTION]), float(V[L.SAT_FORCE]),
                                     bool(V[L.SAT_CLIPPED]), float(V[L.SAT_PEAK]))
        self._last.update(self._diagnostics())
        self._last["saturation"] = self._sat

    def _diagnostics(self) -> dict:
        """The law's ``last`` entries of the last compiled sample (from S and out)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ the state's two homes
    def _to_objects(self) -> None:
        """S → the force PI's (and the law's) objects, before a numpy sample."""
        if not self._packed:
            return
        self.saturation                      # (unpacks ``last`` and the status)
        S, V = self._S, self._S[L.VAR]
        pi = self.force_pi
        zs, hs = int(V[L.PI_ZSIZE]), int(V[L.PI_SIZE])
        pi.z = S[L.PI_Z, :zs].copy() if V[L.PI_Z_OK] else None
        pi.t_prev = float(V[L.PI_T]) if V[L.PI_T_OK] else None
        pi.period = float(V[L.PI_PERIOD])
        pi._target._hist = (float(V[L.PI_H_T]), S[L.PI_D, :hs].copy(),
                            S[L.PI_DPREV, :hs].copy() if V[L.PI_H_PREV] else None) if V[L.PI_H_OK] else None
        self._law_to_objects()
        self._packed = False

    def _from_objects(self) -> None:
        """The objects → S, after a numpy sample (the next compiled one continues from them)."""
        S, V = self._S, self._S[L.VAR]
        pi = self.force_pi
        V[L.PI_Z_OK] = pi.z is not None
        if pi.z is not None:
            V[L.PI_ZSIZE] = pi.z.shape[0]
            S[L.PI_Z, :pi.z.shape[0]] = pi.z
        V[L.PI_T_OK] = pi.t_prev is not None
        V[L.PI_T] = 0.0 if pi.t_prev is None else pi.t_prev
        V[L.PI_PERIOD] = pi.period
        h = pi._target._hist
        V[L.PI_H_OK] = h is not None
        if h is not None:
            V[L.PI_H_T], V[L.PI_SIZE], V[L.PI_H_PREV] = h[0], h[1].shape[0], h[2] is not None
            S[L.PI_D, :h[1].shape[0]] = h[1]
            if h[2] is not None:
                S[L.PI_DPREV, :h[2].shape[0]] = h[2]
        self.saturation = self._sat
        self._law_from_objects()
        self._packed = True

    def _law_to_objects(self) -> None:
        """The law's own state, S → objects."""

    def _law_from_objects(self) -> None:
        """The law's own state, objects → S."""


def carry_to_objects(S: np.ndarray, carry, n: int) -> None:
    """S → :class:`~qv_control.laws.carry.IntegralCarry` (b, τ_I, the phase)."""
    V = S[L.VAR]
    carry.bias = S[L.BIAS, :n].copy() if V[L.BIAS_OK] else None
    carry.tau_int = S[L.TAU_INT, :n].copy() if V[L.TAU_INT_OK] else None
    carry._phase = [float(V[L.PHASE_START]), float(V[L.PHASE_LAST])] if V[L.PHASE_OK] else None


def carry_from_objects(S: np.ndarray, carry, n: int) -> None:
    """:class:`~qv_control.laws.carry.IntegralCarry` → S."""
    V = S[L.VAR]
    V[L.BIAS_OK], V[L.TAU_INT_OK], V[L.PHASE_OK] = carry.bias is not None, carry.tau_int is not None, \
        carry._phase is not None
    if carry.bias is not None:
        S[L.BIAS, :n] = carry.bias
    if carry.tau_int is not None:
        S[L.TAU_INT, :n] = carry.tau_int
    if carry._phase is not None:
        V[L.PHASE_START], V[L.PHASE_LAST] = carry._phase




def body_plan(law):
    """(G, m) of the whole-body tick for the active constraint set (:mod:`qv_control.kernels.osc_body`'s ``G``:
    counts, joint tree, the coordinates' plan, the frame of each coordinate slot, the frames (those of the
    coordinates and of the constraint rows, each once) and their supporting columns, the rows' plan), or None: the
    kernel does not serve it (a custom constraint or rows of its own, more than two coordinate frames) and the numpy
    path does."""
    served = law._sampler._served()
    cplan = law.coords._fast._plan(False) if law.coords._fast is not None else None
    if served is None or cplan is None:
        return None
    cfids, rplan = cplan[1], served[2].copy()
    tree = law._fast[2]
    n, k, m = law.system.nv, law.k, rplan.shape[0]
    if m > law._S.shape[1]:                    # (rows added to the system after the law was built)
        return None
    fids = list(cfids)
    for i in range(m):                         # the rows' frame slots → indices into the merged frames
        for c in (0, 1):
            if rplan[i, c] >= 0:
                f = int(served[0][rplan[i, c]])
                fids += [f] if f not in fids else []
                rplan[i, c] = fids.index(f)
    blocks = [np.array([[tree.shape[0], k, len(fids), m, len(cfids)]]), tree, cplan[0],
              np.array([list(range(len(cfids))) or [0]]), np.array([fids or [0]]),
              support_mask(law.system.model, fids)[:len(fids)], rplan]
    G = np.zeros((sum(b.shape[0] for b in blocks), max(n, 5, len(fids))), np.int64)
    row = 0
    for b in blocks:
        G[row:row + b.shape[0], :b.shape[1]] = b
        row += b.shape[0]
    return G, m


def pack_tool_gains(law) -> None:
    """The tool-frame law's parameters in its ``S`` (gains, δ₀, the force PI's, limits): at construction and after
    an assignment of any of them (a :class:`~qv_control.laws.packed.Setting` bumps :data:`EPOCH`)."""
    S, n = law._S, law.system.nv
    P = S[L.PAR]
    P[[L.KP_X, L.KD_X, L.KI_X, L.KP_NULL, L.I_LIMIT]] = law.KP, law.KD, law.KI, law.KP_null, \
        law.integral_limit
    P[[L.KF, L.KI_F, L.MAX_DT, L.DAMPING, L.PI_ON]] = law.force_pi.kf, law.force_pi.ki, \
        law.force_pi.max_dt, law.damping, float(law.force_pi.enabled)
    P[L.HAS_LIMITS] = law.limits is not None
    if law.limits is not None:
        S[L.LIMITS, :n] = law.limits
    law._epoch = EPOCH[0]


def pack_tool(law) -> None:
    """The tool-frame law's inputs to :func:`qv_control.kernels.osc.tool_tick` in its ``S``: parameters
    (:func:`pack_tool_gains`), rows, the model's armature and g⃗; ``_fast`` becomes (tick, views + the joint tree and
    the frame's supporting columns)."""
    S, n, k = law._S, law.system.nv, len(law.force_axes)
    P = S[L.PAR]
    pack_tool_gains(law)
    P[[L.FRAME, L.N_AXES, L.N_FORCE, L.CARRY_MIN]] = law.fid, len(law.axes), k, law._carry.min_time
    S[L.AXES, :len(law.axes)] = law.axes
    S[L.AXES, 6:6 + k] = law.force_axes
    law._zero3 = np.zeros(3)
    law._zk = np.zeros(k)
    law._tau = law._out[L.TAU, :n]
    if law._fast is None:
        return
    tick, views, tree, armature, grav = law._fast
    P[L.NJOINTS] = tree.shape[0]
    S[L.ARMATURE, :n] = armature
    S[L.GRAV, :3] = grav
    G = np.zeros((tree.shape[0] + 1, max(n, 3)), np.int64)
    G[:-1, :3] = tree
    G[-1, :n] = support_mask(law.system.model, [law.fid])[0]
    P[L.NQ] = law.system.nq
    law._fast = (tick, (*views, G))     # what the kernel reads of Data, and the joint tree


__all__ = ["EPOCH", "PackedState", "body_plan", "carry_from_objects", "carry_to_objects", "kernel_inputs",
           "pack_tool", "pack_tool_gains"]
