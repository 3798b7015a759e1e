"""Operational-space control of a constrained system, set up as a practitioner sets up whole-body OSC: task
coordinates θ(q) of any frames and joints, every active contact row as a force-controlled operational
direction with per-row λ feedback, and an actuation selection (the passive joints get no torque; the contact
forces the task leaves free absorb it). The baseline that is given the problem the projection laws are given.

Sign convention (SPEC): M q̈ + h = τ − Aᵀλ. Contact rows: A (m × n) of the active constraints, A = U S Vᵀ, rank
r by the projection laws' rule (σ > max(RTOL·σ₁, ``rank_atol``), :mod:`.projection_base`), Ā = U₁ᵀA (r × n)
its row space (redundant rows merged; rows below the floor dropped from the motion task). Operational space
x = (θ, Ā-coordinates), J = [J_θ; Ā] ((k + r) × n), J̇q̇ = [J̇_θq̇; U₁ᵀȦq̇] and, with

    Λ_x = (J M⁻¹ Jᵀ)⁻¹,   J̄ = M⁻¹ Jᵀ Λ_x,   Nᵀ = I − Jᵀ J̄ᵀ,
    τ = h + Jᵀ Λ_x (a − J̇q̇) + Nᵀ M(G_P(q_n − q) − G_D q̇) + Aᵀ f,
    a = (θ̈_d + G_D ė + G_P e, 0),   f = λ_d + Π(k_f e_λ + k_i ∫e_λ),   e_λ = λ_d − λ_meas (per row),

the closed loop is ẍ = a + J M⁻¹Aᵀ(f − λ); the rigid rows' Ā q̈ + U₁ᵀȦq̇ = 0 give U₁ᵀ(f − λ) = 0, so the
contact force is the commanded one (up to the redundant rows' N(Aᵀ) part, which is no force) and θ̈ = θ̈_d +
G_D ė + G_P e: ë + G_D ė + G_P e = 0, the projection laws' poles with the same G_P, G_D (``kp``, ``kd``, as
:class:`~qv_control.laws.pidc_force.PIDCForceLaw` takes them). With k + r = n (θ minimal, as the projection
laws require) N = 0; with fewer rows (a row dropped below the floor) the posture q_n (default: the first
state) acts in the null space that opens.

Actuation (``actuated``; the others passive, p): each channel c (gravity and drift, force, motion) gets the
contact force δ = −(A_pᵀ)⁺c_p that cancels its passive torque (A_p: the passive columns of A), c ← c + Aᵀδ,
and c_p ← 0; δ lies in R(A_p) ⊥ 𝓔 = R(A) ∩ N(A_pᵀ) (:mod:`.internal_force`), so the commanded forces in 𝓔 stay
and the motion does not change (Aᵀδ is taken by the rigid rows). Π is the projector onto 𝓔 (onto R(A) when
every joint is actuated): the PI acts on the force components the torques can command.

Rank loss, as the projection laws treat it (:mod:`.projection_base`, the same ``rank_atol`` and default): the rows
whose σ falls below the floor leave the motion task, and while they are out the task takes, in their place, the
rest N of N(Ā) beside the tangent T = orth(V₂V₂ᵀT_prev) carried from the last tick with every row, with the
damping acceleration −G_D Nᵀq̇ (so the motion stays on the branch it came along); the force channel keeps every
row. ``damping`` δ₀ > 0 replaces Λ_x by the damped inverse of :func:`qv_control.laws.osc.damped_inverse`.

The tick is one Pinocchio pass (``computeCoriolisMatrix`` and the frame placements) and one compiled call
(:func:`qv_control.kernels.osc_body.body_tick`: the terms, θ, the row space and the carried tangent by Jacobi
rotations, Λ_x, the channels, Π and the force PI, the actuation selection and the limiter, the state packed in one
array: :mod:`qv_control.laws.osc_tick`); the numpy path below is the reference (``compiled=False``) and serves the
first sample (θ_d held), a set-up the kernel does not serve and a sample it declines (where the numpy path raises).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import RankDeficiencyError
from qv_dynamics.linalg import ATOL, RTOL, svd_full
from qv_dynamics.projection import pinv_rank
from qv_dynamics.state import Reference, State

from ..kernels import osc_layout as L
from ..references import CheckedReference
from .base import ControlLaw, scalar_gain
from .internal_force import internal_force_basis
from .osc import _cho_solve, damped_inverse
from .osc_tick import EPOCH, PackedState, body_plan, kernel_inputs
from .packed import Setting
from .passive import _actuated_mask
from .projection_base import checked_rank_atol


class ConstrainedOperationalSpaceLaw(PackedState, ControlLaw):
    """Whole-body operational-space hybrid law (module doc).

    ``compute(state, reference)``: ``reference.theta`` θ_d (k), ``theta_dot``, ``theta_ddot``; ``lambda_`` λ_d
    of every active row (m); ``state.lambda_meas`` the measured λ of every row. ``actuated``: the actuated
    joints' names (None: all). ``rank_atol``: the rank floor of the contact rows (None: the projection laws'
    model-scale default, :func:`~qv_control.laws.projection_base.default_rank_atol`). ``q_null``: the posture
    (None: the first state)."""

    name = "osc_constrained"
    uses_terms = True
    # parameters the compiled tick reads from its packed state (with the base's kp, kd, cond_max, limits and the
    # force PI's gains): an assignment packs them again at the next tick
    damping = Setting()
    rank_atol = Setting()
    kp_null = Setting()

    def __init__(self, system, coordinates, kp=100.0, kd=20.0, kf=0.0, ki=0.0, actuated: Sequence[str] | None = None,
                 q_null=None, effort_limits="urdf", damping: float = 0.0, rank_atol: float | None = None,
                 cond_max: float = 1e6, compiled: bool = True):
        n, m_all = system.nv, sum(c.size for c in system.constraints)
        self._init_packed(*L.body_state_shape(n, m_all), L.LAMBDA_X + n)
        super().__init__(system, coordinates, kp=kp, kd=kd, kf=kf, ki=ki, effort_limits=effort_limits,
                         cond_max=cond_max, compiled=compiled)
        self.damping = scalar_gain("damping", damping, positive=False)
        self.rank_atol = checked_rank_atol(system, rank_atol)
        self.mask = np.ones(system.nv, bool) if actuated is None else _actuated_mask(system, actuated)
        self._passive = ~self.mask
        if self.limits is not None and self._passive.any():
            self.limits = np.where(self.mask, self.limits, np.inf)
        self.q_null = None if q_null is None else system.check_q(q_null)
        self.kp_null = float(np.mean(self.kp))
        # the tick after one Pinocchio pass in one compiled call (qv_control.kernels.osc_body); None: the numpy path
        served = self.compiled and self.coords._fast is not None
        self._fast = kernel_inputs(system, "osc_body", "body_tick") if served else None
        self._plans: tuple = (None, None)     # (the constraint plan's key, its (G, m, zeros(m)) or None)
        self._rref: tuple = (None, None)      # (the coordinates' reference version, R_ref)
        self._last_m = 0
        self._pack_parameters()

    def _pack_parameters(self) -> None:
        """The kernel's static inputs: gains, rank rules, limits, the actuation mask, θ's range, armature and g⃗."""
        S, n, k = self._S, self.system.nv, self.k
        P = S[L.PAR]
        pi = self.force_pi
        P[[L.KD_C, L.KP_NULL, L.RANK_ATOL, L.COND_MAX, L.DAMPING]] = self.kd, self.kp_null, self.rank_atol, \
            self.cond_max, self.damping
        P[[L.KF, L.KI_F, L.MAX_DT, L.PI_ON, L.RTOL, L.ATOL]] = pi.kf, pi.ki, pi.max_dt, float(pi.enabled), RTOL, ATOL
        P[[L.NQ, L.N_PASSIVE, L.HAS_LIMITS]] = self.system.nq, int(self._passive.sum()), self.limits is not None
        if self.limits is not None:
            S[L.LIMITS, :n] = self.limits
        S[L.KP, :k] = self.kp
        S[L.MASK, :n] = self.mask
        S[L.LO, :k], S[L.HI, :k] = self.coords._lo, self.coords._hi
        self._zk = np.zeros(k)
        self._tau = self._out[L.TAU, :n]
        self._epoch = EPOCH[0]
        if self._fast is not None:
            _, _, _, armature, grav = self._fast
            S[L.ARMATURE, :n], S[L.GRAV, :3] = armature, grav

    #: N(A) of the last tick with every row above the floor, and the tangent carried while rows are below it
    _V2_full: np.ndarray | None = None
    _T_lost: np.ndarray | None = None

    def reset(self) -> None:
        self._to_objects()
        super().reset()
        self._V2_full = self._T_lost = None

    def _law_to_objects(self) -> None:
        """The carried basis, S → the numpy path's N(A) of the last full-rank tick or tangent."""
        S, V, n = self._S, self._S[L.VAR], self.system.nv
        kind, c = int(V[L.LAST_KIND]), int(V[L.LAST_COLS])
        self._V2_full = self._T_lost = None
        if kind == 1:
            V1 = S[L.LAST:L.LAST + n, :c]
            self._V2_full = svd_full(V1.T)[2][c:].T if c else np.eye(n)
        elif kind == 2:
            self._T_lost = S[L.LAST:L.LAST + n, :c].copy()

    def _law_from_objects(self) -> None:
        S, V, n = self._S, self._S[L.VAR], self.system.nv
        last = self._T_lost if self._T_lost is not None else self._V2_full
        V[L.LAST_KIND], V[L.LAST_COLS] = (0.0, 0.0) if last is None else (2.0, last.shape[1])
        if last is not None:
            S[L.LAST:L.LAST + n, :last.shape[1]] = last

    def _diagnostics(self) -> dict:
        out, V, k, m = self._out, self._S[L.VAR], self.k, self._last_m
        d = dict(t=float(V[L.T_PREV]), theta=out[L.C_THETA, :k].copy(), theta_d=out[L.THETA_D, :k].copy(),
                 e_theta=out[L.C_E, :k].copy(), lambda_d=out[L.LAM_D, :m].copy(), rank=int(V[L.RANK]),
                 Lambda_x=out[L.LAMBDA_X:L.LAMBDA_X + int(V[L.LAMBDA_DIM]), :int(V[L.LAMBDA_DIM])].copy())
        if m:
            d.update(f=out[L.F_CMD, :m].copy(), force_feedback=bool(V[L.FEEDBACK]))
        if self._passive.any():
            d["passive_residual"] = float(V[L.RESIDUAL])
        return d

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ (class doc): one Pinocchio pass and the compiled tick, or the numpy path (module doc)."""
        if self._fast is not None and self._theta_hold is not None \
                and (reference is None or type(reference) in _REFERENCES):
            tau = self._tick(state, reference if reference is not None else _NO_REFERENCE)
            if tau is not None:
                return tau
            self._to_objects()                  # (the next compiled sample continues from the objects)
        return self._compute_numpy(state, reference)

    def _tick(self, state: State, ref: Reference) -> np.ndarray | None:
        """τ of the compiled tick, or None: the numpy path serves this sample (a set-up the kernel does not serve, an
        input of another type or size, a non-finite one, a sample where the numpy path decides or raises: the
        kernel's codes, osc_layout)."""
        system = self.system
        plans = self._plans
        if system._plan_key is not plans[0]:     # (set_active and a new constraint clear the plan's key)
            inputs = body_plan(self)                # (it reads the system's constraint plan, renewing the key)
            plans = self._plans = (system._plan_key, inputs if inputs is None else (*inputs, np.zeros(inputs[1])))
        if plans[1] is None:
            return None
        if EPOCH[0] != self._epoch:
            self._pack_parameters()                 # (a parameter was assigned)
        G, m, zm = plans[1]
        th, thd, thdd, lam, meas, flags = ref.theta, ref.theta_dot, ref.theta_ddot, ref.lambda_, state.lambda_meas, 0
        if th is None:
            th, flags = self._theta_hold, 4
        if thd is None:
            thd = self._zk
        if thdd is None:
            thdd = self._zk
        if lam is None:
            lam = zm
        if meas is None:
            meas = zm
        else:
            flags |= 2
        if self._unit_parts and self._read_arrays(state) is None:
            return None
        if not self._packed:
            self._from_objects()
        coords, rref = self.coords, self._rref
        model, data = system.model, system.data
        fast = self._fast
        try:
            pin.computeCoriolisMatrix(model, data, state.q, state.qdot)
            pin.updateFramePlacements(model, data)
            system._anchor_from_data(False)
            if rref[0] != coords._ref_version:  # R_ref of the coordinates' frames (their compiled copy)
                cf = coords._fast
                rref = self._rref = (coords._ref_version, cf._references(cf._plan(False)[1], data))
            code = fast[0](*fast[1], G, rref[1], state.q, state.qdot, th, thd, thdd, lam, meas, float(state.t),
                           flags, self._S, self._out)
        except (TypeError, ValueError, RuntimeError):   # another type or size: the numpy path says which
            return None
        if code != L.OK:
            return None
        self._last_m, self._stale = m, True
        return self._tau.copy()

    def _compute_numpy(self, state: State, reference: Reference | None = None) -> np.ndarray:
        t, q, qdot, lam_meas = self._read_state(state)
        terms = self._terms(q, qdot)
        kin = self.coords.evaluate(q, qdot, data=self.system.data)
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        if self.q_null is None:
            self.q_null = q.copy()
        e = ref.theta - kin.theta
        a_theta = ref.theta_ddot + self.kd * (ref.theta_dot - kin.theta_dot) + self.kp * e
        A, m = terms.A, terms.m
        U1, r, V2 = self._row_space(A)
        J = np.vstack([kin.J, U1.T.dot(A)])
        Jdqd = np.concatenate([kin.Jdot_qdot, U1.T.dot(terms.Adot_qdot)])
        a = np.concatenate([a_theta, np.zeros(r)])
        if V2 is not None and self.k < V2.shape[1]:      # rows below the floor: the carried tangent (module doc)
            Nb = self._lost_rows(V2)
            if Nb is not None:
                J = np.vstack([J, Nb.T])
                Jdqd = np.concatenate([Jdqd, np.zeros(Nb.shape[1])])
                a = np.concatenate([a, -self.kd * Nb.T.dot(qdot)])
        M = terms.M
        MinvJt = _cho_solve(M, J.T)
        X = J.dot(MinvJt)
        Lam = self._task_inertia(X, r)
        Jbar = MinvJt.dot(Lam)
        tau0 = M.dot(self.kp_null * (self.q_null - q) - self.kd * qdot)        # posture, in the null space
        motion = J.T.dot(Lam.dot(a) - Jbar.T.dot(tau0)) + tau0
        base = terms.h - J.T.dot(Lam.dot(Jdqd))
        force = None
        if m:
            Pi = self._commandable(A)
            corr = self._force_correction(t, Pi.dot(ref.lambda_), None if lam_meas is None else Pi.dot(lam_meas))
            f = ref.lambda_ if corr is None else ref.lambda_ + corr
            force = A.T.dot(f)
            self.last.update(f=f, force_feedback=corr is not None)
        if self._passive.any():
            base, force, motion = self._actuation_consistent(A, base, force, motion)
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=-e, lambda_d=ref.lambda_, rank=r,
                         Lambda_x=Lam)
        return self._finish(base, force, motion)

    def _row_space(self, A: np.ndarray) -> tuple[np.ndarray, int, np.ndarray | None]:
        """U₁ (m × r) of A's row space with the rank rule σ > max(RTOL·σ₁, rank_atol), r, and V₂ (a basis of N(Ā))
        when the floor dropped rows that the default rule keeps (None otherwise: this tick's N(A) is kept as the
        last full-rank one)."""
        m, n = A.shape
        if m == 0:
            self._V2_full, self._T_lost = np.eye(n), None
            return np.zeros((0, 0)), 0, None
        U, s, Vt = svd_full(A)
        r = int(np.count_nonzero(s > max(RTOL * s[0], self.rank_atol)))
        if r == int(np.count_nonzero(s > max(RTOL * s[0], ATOL))):
            self._V2_full, self._T_lost = Vt[r:].T, None
            return U[:, :r], r, None
        return U[:, :r], r, Vt[r:].T

    def _lost_rows(self, V2: np.ndarray) -> np.ndarray | None:
        """While rows are below the floor: T = orth(V₂V₂ᵀT_last), the tangent carried from the last tick with every
        row (transported tick by tick, as the projection laws carry it), and an orthonormal basis of the rest of
        N(Ā) (None without a full-rank tick before, or when the tangent is lost: the posture acts there)."""
        last = self._T_lost if self._T_lost is not None else self._V2_full
        if last is None or last.shape[0] != V2.shape[0]:
            return None
        T, s, _ = np.linalg.svd(V2.dot(V2.T.dot(last)), full_matrices=False)
        if s.size == 0 or s[-1] < 0.5:
            return None
        self._T_lost = T
        Nr, sn, _ = np.linalg.svd(V2 - T.dot(T.T.dot(V2)), full_matrices=False)
        return Nr[:, sn > 0.5]

    def _task_inertia(self, X: np.ndarray, r: int) -> np.ndarray:
        """Λ_x = X⁻¹ (or the damped inverse); a singular X (θ does not complete the rows: JM⁻¹Jᵀ of cond >
        cond_max) raises RankDeficiencyError naming the coordinates."""
        if self.damping > 0:
            return damped_inverse(X, self.damping)
        s = np.linalg.svd(X, compute_uv=False)
        if not (s.size and s[-1] > 0 and s[0] / s[-1] <= self.cond_max ** 2):
            raise RankDeficiencyError(
                f"osc_constrained: the task ({', '.join(self.coords.labels)}) and the {r} independent contact "
                f"rows do not form an operational space here (cond(J M⁻¹ Jᵀ) > {self.cond_max:.3g}²; {X.shape[0]} "
                f"task rows for n = {self.system.nv})")
        return np.linalg.inv(X)

    def _commandable(self, A: np.ndarray) -> np.ndarray:
        """Π: the projector onto the forces the torques can command, 𝓔 = R(A) ∩ N(A_pᵀ) (R(A) when all actuated;
        default rank rule, as the projection laws' force channel)."""
        E = internal_force_basis(A, self.mask).E
        return E.dot(E.T)

    def _actuation_consistent(self, A: np.ndarray, *channels):
        """Each channel c as c + Aᵀδ, δ = −(A_pᵀ)⁺c_p (module doc), with the passive entries set to 0 (a residual c_p
        that no contact force can take is dropped, as the plant drops it; its largest entry in ``last``)."""
        p = self._passive
        Ap_pinv, _, _ = pinv_rank(A[:, p].T)
        out, resid = [], 0.0
        for c in channels:
            if c is not None:
                c = c - A.T.dot(Ap_pinv.dot(c[p]))
                resid = max(resid, float(np.max(np.abs(c[p]))))
                c[p] = 0.0
            out.append(c)
        self.last["passive_residual"] = resid
        return out


_NO_REFERENCE = Reference()
_REFERENCES = (Reference, CheckedReference)

__all__ = ["ConstrainedOperationalSpaceLaw"]
