"""Common machinery of the control laws: state/reference checks, gains, the force PI term, limits.

Pure numpy + the qv_dynamics model; never imports rclpy. Every law is a class with
``compute(state, reference) -> tau`` (full n-vector of actuator torques, gravity included) and keeps:

- ``law.system``: its own :class:`qv_dynamics.ConstrainedSystem` model (it may differ from the plant:
  model error, see :func:`qv_control.laws.scale_inertias`); its active constraints define m and λ_d;
- ``law.saturation``: a :class:`~qv_control.saturation.SaturationStatus` of the last call;
- ``law.last``: a dict of diagnostics of the last call (θ, θ_d, errors, ε, cond(D), ...).
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod

import numpy as np

from qv_dynamics.errors import DimensionError, NonFiniteError, QVError, as_vector
from qv_dynamics.kernels.loader import load
from qv_dynamics.linalg import ATOL, RTOL
from qv_dynamics.quasi_sampler import QuasiSampler
from qv_dynamics.state import Reference, State

from ..coordinates import MinimalCoordinates, as_coordinates
from ..kernels.layout import GAP_PERIODS
from ..references import CheckedReference, ReferenceValues, validate_reference
from ..saturation import SaturationStatus, resolve_limits, saturate
from .integral import PreviousTarget
from .packed import Setting, evaluated

_F64 = np.dtype(np.float64)


class GainError(QVError):
    """A gain that is not a finite positive number (or outside its stability range)."""


def scalar_gain(name: str, value, positive: bool = True, upper: float | None = None) -> float:
    try:
        g = float(value)
    except (TypeError, ValueError):
        raise GainError(f"{name}: expected a number, got {value!r}") from None
    if not np.isfinite(g) or (g <= 0 if positive else g < 0):
        raise GainError(f"{name}: must be {'> 0' if positive else '>= 0'} and finite, got {value!r}")
    if upper is not None and g >= upper:
        raise GainError(f"{name} = {g:g} must be < {upper:g}")
    return g


def vector_gain(name: str, value, k: int) -> np.ndarray:
    """A positive scalar or k-vector (diagonal gain on the θ coordinates)."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise GainError(f"{name}: expected a positive number or {k} of them, got {value!r}") from None
    if arr.ndim == 0:
        arr = np.full(k, float(arr))
    try:
        arr = as_vector(name, arr, k)
    except QVError as exc:
        raise GainError(str(exc)) from None
    if np.any(arr <= 0):
        raise GainError(f"{name}: every entry must be > 0, got {arr}")
    return arr


def check_coordinate_count(labels, n: int, m: int) -> None:
    """θ needs k = n − r coordinates (D square, eq. 34) with r = rank A ≤ m: k < n − m (too few for any rank
    of the m active rows) or k > n is refused when the law is built, not at its first ``compute``."""
    k = len(labels)
    if k < n - m or k > n:
        raise DimensionError(
            f"minimal coordinates: {k} given ({', '.join(labels) or 'none'}) but the constrained system has "
            f"n - r >= {n} - {m} = {n - m} degrees of freedom (n = {n} velocities, {m} active constraint rows)"
            + ("; add coordinates" if k < n - m else f"; at most n = {n}"))


def tool_and_contact(system, frame: str, contact: str | None) -> int:
    """Frame id of the tool of a Cartesian law; unknown frame or contact names raise UnknownNameError here."""
    fid = system.frame_id(frame)
    if contact is not None:
        system.constraint(contact)
    return fid




class ForcePI:
    """PI on a measured force: correction = k_f·e + k_i·∫e dt, e = desired − measured (eq. 52).

    The measurement reaches the law one sample late (it is the force produced by the previous command),
    so the algebraic force loop e_k = −k_f e_{k−1} + … is stable only for k_f < 1 (checked). The integral
    is advanced with the time stamps of the states by dt = clip(t − t_prev, 0, min(max_dt, GAP_PERIODS·T))
    (T the smallest step seen: the sample period) and frozen while the limiter scales the force channel
    (anti-windup). It resets when the number of constraint rows changes. A late sample integrates at most
    GAP_PERIODS periods: the error in a gap was not observed, and the plant held the previous command (or its
    drives held the pose and the force fell) meanwhile; integrating the error found after a 100 ms stall as
    if it had lasted the whole gap added k_i·e·0.1 s = 30 N to a 10 N press (k_i = 30 /s) and struck the
    table at 25–49 N on resume (``bench/startup_gap.py --in-contact``; 12–16 N with the cap).

    Because the reading is one sample old, :meth:`error` compares it with the desired value *of the previous
    sample* (the command it was produced under), not with the new one: after a step of the desired force
    the feedforward delivers the step and the PI does not add k_f·(step) on top of it (measured before this:
    21.2 % overshoot for one sample, 12 → 20 N with k_f = 0.5, k_i = 30)."""

    kf = Setting()
    ki = Setting()
    max_dt = Setting()
    enabled = Setting()

    def __init__(self, kf=0.0, ki=0.0, max_dt: float = 0.1):
        self.kf = scalar_gain("kf (force proportional gain)", kf, positive=False, upper=1.0)
        self.ki = scalar_gain("ki (force integral gain)", ki, positive=False)
        self.max_dt = max_dt
        self.enabled = self.kf > 0 or self.ki > 0
        self.reset()

    def reset(self) -> None:
        self.z: np.ndarray | None = None
        self.t_prev: float | None = None
        self.period = math.inf          # the smallest positive step between samples seen
        self._target = PreviousTarget()

    def error(self, t: float, desired: np.ndarray, measured: np.ndarray | None) -> np.ndarray | None:
        """e = d_{k−1} − measured_k (the desired value of the previous sample; d_k at the first sample or
        after a reset). Repeated calls at the same t are idempotent."""
        if measured is None:
            return None
        return self._target.error(t, desired, measured)

    def correction(self, t: float, desired: np.ndarray, measured: np.ndarray | None,
                   saturation: SaturationStatus) -> np.ndarray | None:
        """k_f·e + k_i·∫e for the desired force (or λ) and the measured one (one sample old, :meth:`error`),
        the integral frozen while ``saturation`` (the limiter's last call) scaled the force channel."""
        return self.update(t, self.error(t, desired, measured), freeze=saturation.force_frozen)

    def update(self, t: float, error: np.ndarray | None, freeze: bool = False) -> np.ndarray | None:
        if not self.enabled or error is None:
            return None
        if self.z is None or self.z.shape != error.shape:
            self.z = np.zeros_like(error)
            self.t_prev = None
        if self.t_prev is not None and not freeze:
            # bounded, non-negative step: a stamp that goes back integrates nothing, a gap (or a stamp far
            # ahead) at most max_dt; t_prev always follows the stamps, so one bad stamp cannot freeze it
            step = t - self.t_prev
            if 0.0 < step < self.period:
                self.period = step
            dt = min(max(step, 0.0), self.max_dt, GAP_PERIODS * self.period)
            if dt > 0.0:
                self.z = self.z + dt * error
        self.t_prev = t
        return self.kf * error + self.ki * self.z


class ControlLaw(ABC):
    """Abstract base of the laws: holds the model, the minimal coordinates θ(q), limits, the force PI and
    diagnostics; a law implements :meth:`compute`."""

    name = "base"
    #: the law takes a tick's terms through :meth:`_terms` (or a decomposition through the sampler)
    uses_terms: bool = False
    # gains and limits read by the compiled tick (qv_control.laws.packed: assigning one repacks it)
    kp = Setting()
    kd = Setting()
    cond_max = Setting()
    limits = Setting()
    #: the whole-tick kernel (``module.name``) of the law, or None
    tick_kernel: str | None = None
    _ct = None          # the law's CompiledTick (qv_control.laws.packed), or None: the numpy path every tick
    _last_from = None   # the CompiledTick whose diagnostics ``last`` shows when read
    _sat_from = None    # the same for ``saturation``

    def __init__(self, system, coordinates, kp=10.0, kd=10.0, kf=0.0, ki=0.0, effort_limits="urdf",
                 cond_max: float = 1e6, compiled: bool = True):
        self.system = system
        # compiled=False: the numpy reference path everywhere (qv_control.kernels.laws, qv_dynamics.kernels.quasi)
        self.compiled = bool(compiled)
        self.coords: MinimalCoordinates = as_coordinates(system, coordinates, self.compiled)
        self.k = self.coords.size
        check_coordinate_count(self.coords.labels, system.nv, system.m)
        self.kp = vector_gain("kp", kp, self.k)
        self.kd = scalar_gain("kd", kd)
        self.force_pi = ForcePI(kf, ki)
        self.limits = resolve_limits(system, effort_limits)
        self.cond_max = scalar_gain("cond_max", cond_max)
        self.saturation = SaturationStatus()
        self.last = {}
        # a tick's terms (and a quasi law's decomposition) from Pinocchio's passes + one compiled call, for the
        # laws that take their terms from ``system.evaluate`` (uses_terms)
        self._sampler = QuasiSampler(system) if self.compiled and self.uses_terms else None
        self._theta_hold: np.ndarray | None = None
        # ((nq,), (nv,)) of the fixed-base fast state check (:meth:`_read_arrays`); None: always the checks
        self._shapes = None if system.floating_base else ((system.nq,), (system.nv,))
        self._unit_parts = [(lo, hi) for _, lo, hi in system.unit_norm_parts()]  # quaternions inside the tree

    # ------------------------------------------------------------------ the compiled tick
    @property
    def last(self) -> dict:
        """Diagnostics of the last call (θ, θ_d, errors, ε, cond(D), ...): formed from the compiled tick's
        diagnostics block when read."""
        if self._last_from is not None:
            self._last, self._last_from = self._last_from.diagnostics(), None
        return self._last

    @last.setter
    def last(self, value: dict) -> None:
        self._last, self._last_from = value, None

    @property
    def saturation(self) -> SaturationStatus:
        """What the limiter did in the last call."""
        if self._sat_from is not None:
            self._saturation, self._sat_from = self._sat_from.saturation(), None
        return self._saturation

    @saturation.setter
    def saturation(self, value: SaturationStatus) -> None:
        self._saturation, self._sat_from = value, None

    def _start_compiled_tick(self) -> None:
        """Build the law's compiled tick (:class:`qv_control.laws.packed.CompiledTick`) when its kernel loads and
        Pinocchio's Data has the layout its views need; packed at the first numpy-path tick."""
        if not self.compiled or self.tick_kernel is None:
            return
        from .packed import CompiledTick, data_views

        module, name = self.tick_kernel.rsplit(".", 1)
        kernel = load(module, name)
        views = data_views(self.system) if kernel is not None else None
        if views is not None:
            self._ct = CompiledTick(self, kernel, views)

    def _compiled_compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ by the compiled tick, or by the numpy path :meth:`_compute` (no compiled tick, options it does not
        serve, a callable reference that does not evaluate to a Reference, or a rare event) with the state handed
        over and taken back around it."""
        ct = self._ct
        if ct is None or not self._compiled_case():
            return self._compute(state, reference)
        if reference is not None and type(reference) is not Reference and type(reference) is not CheckedReference:
            reference = evaluated(reference, state)
            if not isinstance(reference, Reference):
                return ct.numpy_tick(self._compute, state, reference)
        tau = ct.run(state, reference)
        return tau if tau is not None else ct.numpy_tick(self._compute, state, reference)

    def _compute(self, state: State, reference) -> np.ndarray:
        """The numpy path of ``compute`` (a law with a compiled tick defines it)."""
        raise NotImplementedError

    def _compiled_case(self) -> bool:
        """Whether the law's present options are the compiled tick's (else the numpy path serves every tick)."""
        return True

    def _tick_mode(self) -> int:
        """The kernel's law mode (I_SIZES)."""
        return 0

    def _tolerances(self) -> tuple[float, float]:
        """(rtol, atol) of the rank decision."""
        return RTOL, ATOL

    def _extra_frames(self) -> tuple:
        """Frame ids the kernel needs besides the coordinates' and the constraints'."""
        return ()

    def _pack(self, packer, plan) -> None:
        """The law's own blocks (parameters beyond the common ones)."""

    def _pi_size(self, n: int, m: int) -> int:
        """Entries of the force PI's state (λ-space: m)."""
        return m

    def _export_state(self, tick) -> None:
        """The compiled tick's state into the law's Python objects (before a numpy-path tick)."""

    def _import_state(self, tick) -> bool:
        """The law's Python objects into the compiled tick's state (after a numpy-path tick); False: the next tick
        takes the numpy path too."""
        return False

    def _diagnostics(self, tick) -> dict:
        """``last`` of a compiled tick."""
        return {}

    def _own_state(self) -> None:
        """The Python objects hold the state from now on (a method changing it outside a tick)."""
        if self._ct is not None:
            self._ct.hand_over()

    # ------------------------------------------------------------------ helpers for subclasses
    def _terms(self, q: np.ndarray, qdot: np.ndarray):
        """``system.evaluate(q, q̇)`` of a validated state (``_read_state``): the sampler's terms, valid within
        this tick (:meth:`qv_dynamics.quasi_sampler.QuasiSampler.evaluate`), or on the reference path fresh ones."""
        if self._sampler is not None:
            return self._sampler.evaluate(q, qdot)
        return self.system.evaluate(q, qdot, checked=True)

    def reset(self) -> None:
        """Forget the latched hold target, the force integral and the basis history."""
        self._own_state()
        self._theta_hold = None
        self.force_pi.reset()
        self.saturation = SaturationStatus()

    def _read_state(self, state: State):
        if not isinstance(state, State):
            raise DimensionError(f"state: expected qv_control.State, got {type(state).__name__}")
        t = float(state.t)
        if not math.isfinite(t):
            raise NonFiniteError(f"state.t must be finite, got {state.t}")
        fast = self._read_arrays(state)
        if fast is not None:
            return (t, *fast)
        q = self.system.check_q(state.q)
        qdot = as_vector("state.qdot", state.qdot, self.system.nv)
        lam = state.lambda_meas
        if lam is not None:
            lam = np.asarray(lam, float)
            lam = as_vector("state.lambda_meas", lam.reshape(-1) if lam.ndim == 0 else lam, self.system.m)
        for name, x in (("q", q), ("qdot", qdot), ("lambda_meas", lam)):
            with np.errstate(over="ignore"):
                big = x is not None and not math.isfinite(x.dot(x))
            if big:  # finite entries whose squares overflow
                i = int(np.argmax(np.abs(x)))
                raise NonFiniteError(f"state.{name}: entries too large (|{name}[{i}]| = {abs(x[i]):.3g}; the sum of "
                                     "squares overflows beyond ~1e154: the dynamics would be NaN)")
        return t, q, qdot, lam

    def _read_arrays(self, state: State):
        """(q, q̇, λ_meas) when they are already float64 vectors of the right sizes with finite entries and a
        fixed base (the 1 kHz case: one finiteness test, q·q + q̇·q̇ + λ·λ, for all three, and the norm of each
        mid-tree quaternion); None otherwise,
        and :meth:`_read_state` checks them one by one (and raises naming the bad one)."""
        q, qdot, lam = state.q, state.qdot, state.lambda_meas
        shapes = self._shapes
        if shapes is None or type(q) is not np.ndarray or type(qdot) is not np.ndarray:
            return None
        # (the float64 dtype is one object: an identity test; anything else takes the checking path)
        if q.dtype is not _F64 or qdot.dtype is not _F64 or q.shape != shapes[0] or qdot.shape != shapes[1]:
            return None
        s = q.dot(q) + qdot.dot(qdot)
        if lam is not None:
            if type(lam) is not np.ndarray or lam.dtype is not _F64 or lam.shape != (self.system.m,):
                return None
            s += lam.dot(lam)
        if not math.isfinite(s):
            return None
        for lo, hi in self._unit_parts:  # |n² − 1| ≤ 2e-6 here, |n − 1| ≤ 1e-6 in check_q (which names the joint)
            p = q[lo:hi]
            if abs(p.dot(p) - 1.0) > 2e-6:
                return None
        return q, qdot, lam

    def _read_reference(self, reference, t: float, theta_now: np.ndarray, m: int) -> ReferenceValues:
        if reference is not None and not isinstance(reference, Reference) and callable(reference):
            reference = reference(t)
        if self._theta_hold is None:
            self._theta_hold = theta_now.copy()
        return validate_reference(reference, self.k, m, self.coords, theta_hold=self._theta_hold)

    def _held_theta(self, q, qdot) -> np.ndarray:
        """The hold target θ_d of a reference without θ_d: latched at the first sample (θ there; evaluated
        only then)."""
        if self._theta_hold is None:  # (numpy path: no coordinates kernel to load for this one sample)
            return self.coords.evaluate(q, qdot, data=self.system.data, compiled=False).theta
        return self._theta_hold

    def _finish(self, base, force, motion) -> np.ndarray:
        tau, self.saturation = saturate(base, force, motion, self.limits)
        self.last["saturation"] = self.saturation
        return tau

    def _force_correction(self, t: float, desired: np.ndarray, measured: np.ndarray | None) -> np.ndarray | None:
        """The force PI's correction for the desired force (or λ) and the measured one (one sample old)."""
        return self.force_pi.correction(t, desired, measured, self.saturation)

    @abstractmethod
    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ (n-vector, gravity included) for the measured state and the reference."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(coordinates={self.coords.labels}, kp={self.kp.tolist()}, kd={self.kd})"


__all__ = ["ControlLaw", "ForcePI", "GainError", "check_coordinate_count", "scalar_gain", "vector_gain"]
