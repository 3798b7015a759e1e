"""Internal-force channel of a law with passive joints (paper `aghili-projection-operator` §7.3–7.4).

Sign convention (SPEC): M q̈ + h = f − Aᵀλ. With passive joints (B of eq. 55 selects the actuated
velocities, I − B the passive ones) an admissible generalized force has (I − B)f = 0. For a wanted
acceleration q̈ the passive rows then fix only the passive part of the constraint force,

    A_pᵀλ = −(h + Mq̈)_p          (A_p = the passive columns of A),

so λ is determined up to the **internal forces**

    λ_int ∈ 𝓔 = R(A) ∩ N(A_pᵀ),    E = orthonormal basis of 𝓔 (m × s),

which (i) do not move anything: Aᵀλ_int ∈ R(Aᵀ) = N(A)⊥ is impotent (P Aᵀλ_int = 0), and (ii) need no
passive torque: (Aᵀλ_int)_p = A_pᵀλ_int = 0. They are produced by the actuated torque Δf = AᵀE z alone:
adding it to any command leaves q̈ unchanged and adds E z to λ. For two hands rigidly holding a free box
(12 rows, box columns of rank 6) s = 6: the squeeze forces and moments.

R(A) instead of all of ℝᵐ handles redundant rows: λ is unique only modulo N(Aᵀ) (the minimum-norm λ
lies in R(A)), and a component in N(Aᵀ) is no force at all. E is computed by two rank-revealing SVDs
(rank rule σᵢ > max(rtol·σ₁(A), atol) as everywhere in :mod:`qv_dynamics.projection`):
A = U₁S₁V₁ᵀ gives U₁ (basis of R(A)); E = U₁·N(A_pᵀU₁).

Every λ splits uniquely as λ = λ₀ + E z with z = Eᵀλ (the internal coordinates) and λ₀ ⊥ 𝓔 (the part the
motion and the passive bodies' equations fix, plus any N(Aᵀ) component).

Use with a target internal force (squeeze) through :class:`InternalForceChannel` (force PI on the
measured internal force, anti-windup, bounded dt), or with an external chooser of z (e.g. a friction-
cone QP for feet): ``InternalForceChannel(chooser=fn)`` with ``fn(lambda_0, E) -> z``, or directly the
pieces of :class:`InternalForceBasis`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from qv_dynamics.errors import DimensionError, QVError, as_vector
from qv_dynamics.linalg import ATOL, RTOL, svd_full, svd_thin

from .integral import BoundedIntegral, PreviousTarget

#: ``chooser(lambda_0, E) -> z``: the internal coordinates wanted, given the particular multiplier
#: λ₀ (⊥ 𝓔, fixed by the motion) and the basis E; the commanded multiplier is then λ₀ + E z.
Chooser = Callable[[np.ndarray, np.ndarray], np.ndarray]


class NonInternalForceError(QVError):
    """A desired multiplier λ_d with a part outside the internal-force space: that part would need a
    passive torque or move the system, so the force channel cannot deliver it."""


@dataclass
class InternalForceBasis:
    """Orthonormal basis E (m × s) of the internal forces 𝓔 = R(A) ∩ N(A_pᵀ) at one configuration.

    ``A`` (m × n) and ``actuated`` (n bools) are kept for the torque map; ``rank`` is rank(A);
    ``passive_rank`` = rank(A_pᵀU₁) (how many force directions the passive bodies' equations fix)."""

    E: np.ndarray
    A: np.ndarray
    actuated: np.ndarray
    rank: int
    passive_rank: int

    @property
    def m(self) -> int:
        return self.E.shape[0]

    @property
    def size(self) -> int:
        """s = dim 𝓔 = rank(A) − rank(A_pᵀU₁)."""
        return self.E.shape[1]

    @property
    def projector(self) -> np.ndarray:
        """Π = EEᵀ: orthogonal projector of ℝᵐ onto 𝓔 (basis-independent)."""
        return self.E @ self.E.T

    def split(self, lam) -> tuple[np.ndarray, np.ndarray]:
        """λ = λ₀ + E z: returns (λ₀, z) with z = Eᵀλ and λ₀ = λ − E z ⊥ 𝓔."""
        lam = as_vector("lambda", lam, self.m)
        z = self.E.T @ lam
        return lam - self.E @ z, z

    def excess(self, lambda_d) -> tuple[np.ndarray, np.ndarray, float, float]:
        """(z_d, off, ‖off‖, ‖λ_d‖): the internal coordinates z_d = Eᵀλ_d of λ_d and its non-internal part
        off = λ_d − EEᵀλ_d (what the force channel cannot deliver)."""
        lam = as_vector("lambda_d", lambda_d, self.m)
        z = self.E.T @ lam
        off = lam - self.E @ z
        return z, off, math.sqrt(off.dot(off)), math.sqrt(lam.dot(lam))   # = np.linalg.norm, without its wrapper

    def check(self, lambda_d, rtol: float = 1e-6, atol: float = 1e-6,
              labels: Sequence[str] | None = None) -> np.ndarray:
        """z_d = Eᵀλ_d, after checking that λ_d is internal: ‖λ_d − EEᵀλ_d‖ ≤ atol + rtol·‖λ_d‖, else
        :class:`NonInternalForceError` naming the size of the offending part and its largest rows."""
        z, off, size, total = self.excess(lambda_d)
        if size > atol + rtol * total:
            names = list(labels) if labels is not None and len(labels) == self.m else \
                [f"row {i}" for i in range(self.m)]
            worst = np.argsort(-np.abs(off))[:3]
            rows = ", ".join(f"{names[i]}: {off[i]:+.3g}" for i in worst if abs(off[i]) > 0)
            raise NonInternalForceError(
                f"lambda_d has a non-internal part of norm {size:.3g} (‖lambda_d‖ = {total:.3g}, tolerance "
                f"{atol + rtol * total:.2g}); only its projection on the {self.size}-dimensional internal-force "
                f"space (null space of the passive columns of Aᵀ) can be commanded, the rest is fixed by the "
                f"motion and the passive bodies' equations. Largest offending rows: {rows}")
        return z

    def generalized_force(self, z) -> np.ndarray:
        """Aᵀ E z (n-vector): the generalized force of the internal force E z; zero on the passive joints
        and in N(A)⊥, so it moves nothing."""
        z = as_vector("z (internal-force coordinates)", z, self.size)
        return self.A.T @ (self.E @ z)

    def torque(self, z) -> np.ndarray:
        """The actuator torque that adds E z to λ without changing q̈: Aᵀ E z with its passive entries
        (zero up to rounding) set to exactly zero."""
        f = self.generalized_force(z)
        f[~self.actuated] = 0.0
        return f


def _rank(s: np.ndarray, scale: float, rtol: float, atol: float) -> int:
    return int(np.count_nonzero(s > max(rtol * scale, atol))) if s.size else 0


def internal_force_basis(A: np.ndarray, actuated, rtol: float = RTOL, atol: float = ATOL) -> InternalForceBasis:
    """E = U₁·N(A_pᵀU₁) for the constraint Jacobian ``A`` (m × n) and the actuated mask (n bools, or the
    velocity indices of the actuated joints). Rank decisions are relative to σ₁(A)."""
    A = np.asarray(A, float)
    if A.ndim != 2:
        raise DimensionError(f"A: expected an m x n matrix, got shape {A.shape}")
    m, n = A.shape
    mask = _mask(actuated, n)
    if m == 0:
        return InternalForceBasis(np.zeros((0, 0)), A, mask, 0, 0)
    U, s, _ = svd_thin(A)                        # U[:, :r] only: r ≤ min(m, n)
    scale = float(s[0]) if s.size else 0.0
    r = _rank(s, scale, rtol, atol)
    U1 = U[:, :r]
    K = A[:, ~mask].T @ U1                       # A_pᵀU₁ (n_p × r)
    if K.shape[0] == 0 or r == 0:
        return InternalForceBasis(U1.copy(), A, mask, r, 0)
    _, sk, Vkt = svd_full(K)
    rk = _rank(sk, scale, rtol, atol)
    E = U1 @ Vkt[rk:].T
    return InternalForceBasis(E, A, mask, r, rk)


def _mask(actuated, n: int) -> np.ndarray:
    arr = np.asarray(actuated)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise DimensionError(f"actuated: expected {n} booleans, got shape {arr.shape}")
        return arr.copy()
    mask = np.zeros(n, bool)
    idx = arr.astype(int).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise DimensionError(f"actuated: velocity indices must lie in [0, {n}), got {idx.tolist()}")
    mask[idx] = True
    return mask


@dataclass
class InternalForceCommand:
    """Output of :meth:`InternalForceChannel.command`: the torque to add, the commanded internal
    coordinates z (λ = λ₀ + E z), the target z_d, the PI correction (λ-space, projected) and the basis."""

    tau: np.ndarray
    z: np.ndarray
    z_d: np.ndarray
    correction: np.ndarray | None
    basis: InternalForceBasis
    events: list = field(default_factory=list)


class InternalForceChannel:
    """Stateful force channel: internal-force target (+ PI on the measured internal force) or chooser.

    Per call, with the law's motion command producing the multiplier λ_m (with an exact model):

        z = Eᵀλ_d + Eᵀ(k_f e + k_i ∫e dt),   e = EEᵀ(λ_d,prev − λ_meas)  (target, eq. 52 restricted to 𝓔)
        z = chooser(λ_m − EEᵀλ_m, E)                                       (external chooser)
        Δτ = AᵀE(z − Eᵀλ_m)            → λ = λ_m − EEᵀλ_m + E z, q̈ unchanged.

    The error and its integral live in λ-space (m-vectors projected by EEᵀ), so they do not depend on the
    (arbitrary, configuration-dependent) SVD basis. The integral is advanced only for 0 < dt ≤ ``max_dt``,
    frozen while ``freeze`` is set (the limiter scaled the force channel: anti-windup), bounded by
    ``i_max`` (norm of k_i∫e, N), and reset when the number of rows m changes. Each change of (m, rank,
    dim 𝓔) — a grasp released or made, a singular pose — re-seeds the basis and is logged in ``events``.
    A λ_d whose non-internal part exceeds the check's tolerance (atol + rtol·‖λ_d‖) raises
    :class:`NonInternalForceError` with ``non_internal="raise"``; with ``non_internal="project"`` its projection
    EEᵀλ_d is commanded instead and the sample is counted (``projected``, the largest part ``non_internal_max``):
    a λ_d planned for the reference pose (or computed at a delayed or predicted state) differs from an internal
    force at the measured pose by the tracking error, and refusing the whole command would cost the motion.
    ``kf < 1``: the measured force is one sample old (see :class:`qv_control` ForcePI). For the same reason the
    error compares the reading with λ_d,prev, the target of the previous sample (the command it was produced
    under; :class:`~qv_control.laws.integral.PreviousTarget`, shared with ForcePI): after a step of λ_d the
    feedforward Eᵀλ_d delivers the step and the PI does not add k_f·Δ + k_i·dt·Δ on top of it.
    """

    def __init__(self, kf: float = 0.0, ki: float = 0.0, max_dt: float = 0.1, i_max: float = math.inf,
                 chooser: Chooser | None = None, check_rtol: float = 1e-6, check_atol: float = 1e-6,
                 rtol: float = RTOL, atol: float = ATOL, non_internal: str = "raise"):
        for name, val in (("kf", kf), ("ki", ki), ("max_dt", max_dt), ("i_max", i_max)):
            if not (isinstance(val, (int, float)) and val >= 0 and not math.isnan(val)):
                raise QVError(f"{name}: expected a number >= 0, got {val!r}")
        if kf >= 1.0:
            raise QVError(f"kf = {kf:g} must be < 1 (the measured internal force is one sample old)")
        if chooser is not None and not callable(chooser):
            raise QVError("chooser: expected a callable (lambda_0, E) -> z")
        if non_internal not in ("raise", "project"):
            raise QVError(f"non_internal: expected 'raise' or 'project', got {non_internal!r}")
        self.non_internal = non_internal
        self.projected, self.non_internal_max = 0, 0.0
        self.kf, self.ki, self.max_dt, self.i_max = float(kf), float(ki), float(max_dt), float(i_max)
        self.chooser = chooser
        self.check_rtol, self.check_atol = float(check_rtol), float(check_atol)
        self.rtol, self.atol = rtol, atol
        self.events: list[dict] = []
        self.reset()

    def reset(self) -> None:
        self._integral = BoundedIntegral(self.ki, self.i_max, self.max_dt)
        self._target = PreviousTarget()
        self._signature: tuple | None = None

    @property
    def integral(self) -> np.ndarray | None:
        """∫e dt of the PI (λ-space m-vector), None before the first measured sample."""
        return self._integral.z

    def basis(self, A: np.ndarray, actuated, t: float = 0.0, labels: Sequence[str] | None = None) -> InternalForceBasis:
        """:func:`internal_force_basis`, logging a re-seed event when (m, rank, s) change."""
        b = internal_force_basis(A, actuated, self.rtol, self.atol)
        self.note((b.m, b.rank, b.size), t, labels)
        return b

    def note(self, sig: tuple, t: float = 0.0, labels: Sequence[str] | None = None) -> None:
        """Log a re-seed event when the basis signature (m, rank, dim 𝓔) changes; reset the integral when m
        does (also for a basis formed elsewhere, e.g. the compiled tick of a passive law)."""
        if sig != self._signature:
            if self._signature is not None:
                self.events.append({"t": float(t), "m": sig[0], "rank": sig[1], "internal_dim": sig[2],
                                    "previous": dict(zip(("m", "rank", "internal_dim"), self._signature)),
                                    "rows": list(labels) if labels is not None else None})
            if self._signature is None or self._signature[0] != sig[0]:
                self._integral.reset()        # rows changed: the old integral and target have no meaning
                self._target.reset()
            self._signature = sig

    def _target_z(self, basis: InternalForceBasis, lambda_d, labels) -> np.ndarray:
        """z_d = Eᵀλ_d: checked (``non_internal="raise"``) or projected and counted (class doc)."""
        if self.non_internal == "raise":
            return basis.check(lambda_d, self.check_rtol, self.check_atol, labels)
        z, _, size, total = basis.excess(lambda_d)
        if size > self.check_atol + self.check_rtol * total:
            self.projected += 1
            self.non_internal_max = max(self.non_internal_max, size)
        return z

    def _pi(self, t: float, e: np.ndarray, freeze: bool) -> np.ndarray:
        return self.kf * e + self._integral.step(t, e, freeze)

    def command(self, t: float, basis: InternalForceBasis, lambda_motion, lambda_d=None, lambda_meas=None,
                freeze: bool = False, labels: Sequence[str] | None = None) -> InternalForceCommand:
        """Δτ that makes the internal part of λ equal to the target (module doc). ``lambda_d=None`` means
        zero internal force; ``lambda_meas`` (m) closes the PI loop; ``freeze`` stops the integral."""
        E = basis.E
        lam_m = as_vector("lambda_motion", lambda_motion, basis.m)
        z_m = E.T @ lam_m
        corr = None
        if self.chooser is not None:
            z = as_vector("chooser output z", self.chooser(lam_m - E @ z_m, E), basis.size)
            z_d = z.copy()
        else:
            z_d = np.zeros(basis.size) if lambda_d is None else self._target_z(basis, lambda_d, labels)
            z = z_d.copy()
            if lambda_meas is not None and (self.kf > 0 or self.ki > 0):
                lam_meas = as_vector("lambda_meas", lambda_meas, basis.m)
                # EEᵀ(λ_d,prev − λ_meas): the reading answers the previous command (class doc)
                e = E @ (E.T @ self._target.error(float(t), E @ z_d, lam_meas))
                corr = self._pi(float(t), e, freeze)
                z = z + E.T @ corr
        return InternalForceCommand(basis.torque(z - z_m), z, z_d, corr, basis)


def export_internal(ch: InternalForceChannel, ct) -> None:
    """The compiled tick's internal-force PI state (:mod:`qv_control.kernels.tick`) into ``ch``; its counted
    projections move into ``ch``'s counters."""
    from ..kernels import layout as L

    st = ct.state
    ch._integral.z = ct.vector(L.F_PIZ).copy() if st[L.S_PI_Z] else None
    ch._integral.t_prev = None if math.isnan(st[L.S_PI_T]) or not st[L.S_PI_Z] else float(st[L.S_PI_T])
    ht = st[L.S_HIST_T]
    ch._target._hist = None if math.isnan(ht) else (
        float(ht), ct.vector(L.F_PID).copy(), ct.vector(L.F_PIDP).copy() if st[L.S_HIST_PREV] else None)
    ch.projected += int(st[L.S_PROJECTED])
    ch.non_internal_max = max(ch.non_internal_max, float(st[L.S_OFF_MAX]))
    st[L.S_PROJECTED] = st[L.S_OFF_MAX] = 0.0


def import_internal(ch: InternalForceChannel, ct) -> None:
    """``ch``'s PI state into the compiled tick (what has the tick's m rows)."""
    from ..kernels import layout as L

    st, m = ct.state, ct.m
    z, tp = ch._integral.z, ch._integral.t_prev
    st[L.S_PI_Z] = z is not None and z.shape == (m,)
    if st[L.S_PI_Z]:
        ct.vector(L.F_PIZ)[:] = z
    st[L.S_PI_T] = np.nan if tp is None else tp
    h = ch._target._hist
    ok = h is not None and h[1].shape == (m,)
    st[L.S_HIST_T] = h[0] if ok else np.nan
    st[L.S_HIST_PREV] = ok and h[2] is not None
    if ok:
        ct.vector(L.F_PID)[:] = h[1]
        if h[2] is not None:
            ct.vector(L.F_PIDP)[:] = h[2]
    st[L.S_PROJECTED] = st[L.S_OFF_MAX] = 0.0


__all__ = ["Chooser", "InternalForceBasis", "InternalForceChannel", "InternalForceCommand",
           "NonInternalForceError", "export_internal", "import_internal", "internal_force_basis"]
