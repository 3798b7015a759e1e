"""The projection method's per-stage work with the least overhead: Pinocchio's CRBA and RNEA plus
one kinematic pass for A and Ȧq̇, then one compiled kernel (:mod:`qv_dynamics.kernels.sim`) for the projection
direct dynamics (eq. 22–25) and the RK4 bookkeeping, or for the kinetic-metric velocity projection N_c q̇.
The Newton–Raphson increment (eq. 39), needed only when ‖Φ‖ > nr_tol after a step, stays on the reference
path (:func:`~qv_dynamics.projection.pinv_basis`).

Same equations and rank rule as the reference path (``Stepper(..., compiled=False)``:
:func:`~qv_dynamics.projection.direct_dynamics_rank`, :func:`~qv_dynamics.impact.m_projection`), so the
results agree to rounding (test_sim_compiled.py). What it leaves out: re-validating q and q̇ at every RK4 stage
(the stepper checks the state once per step and the kernels check every input for finiteness), the copies
and symmetrization of M in Python (the kernel mirrors CRBA's upper triangle in place), the
:class:`~qv_dynamics.model.DynamicsTerms` container, Φ at the stages, and M(q), A(q) at the start of a step
when they were just computed at the same q by the previous step's correction.
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from ..constraints.base import Constraint
from ..errors import NonFiniteError, NotPositiveDefiniteError, as_vector
from ..linalg import kernel_vector
from ..model import ConstrainedSystem
from . import sim as K

_ERRORS = {
    K.NONFINITE: (NonFiniteError, "state became non-finite (the integration blew up)"),
    K.NOT_PD: (NotPositiveDefiniteError, "mass matrix is not positive definite; check link masses/inertias in "
                                         "the URDF"),
    K.SINGULAR: (NotPositiveDefiniteError, "constraint inertia M_c is singular (M not positive definite?)"),
}


def _raise(status: int):
    cls, msg = _ERRORS[status]
    raise cls(msg)


class CompiledProjection:
    """Projection dynamics, NR increment and velocity projection of one :class:`ConstrainedSystem` through the
    compiled kernels; rank decisions σ > max(rtol·σ₁, atol) as everywhere in the package."""

    def __init__(self, system: ConstrainedSystem, rtol: float, atol: float):
        self.system = system
        self.model, self.data = system.model, system.data
        self.rtol, self.atol = float(rtol), float(atol)
        self.n = system.nv
        self._fixed = system.nq == system.nv  # q ⊕ dq = q + dq
        self._W = W = np.zeros((8, system.nq))  # RK4 workspace, rows kernels.Q0 … kernels.QDD
        nv = system.nv  # views made once: q₀, q̇₀, the stage q and q̇, the tangent displacement, q̈
        self._q0, self._v0, self._qn, self._vn = W[K.Q0], W[K.V0, :nv], W[K.QN], W[K.VN, :nv]
        self._dq, self._qdd = W[K.DQ, :nv], W[K.QDD, :nv]
        self._prm = np.array([self.rtol, self.atol, 0.0, float(self._fixed)])
        self._zero = np.zeros(system.nv)
        self._end: tuple | None = None  # (q's bytes, plan, M, A, ‖Φ‖) of the last velocity projection
        self._plan, self._separable = None, False  # active set seen last, and whether its kinds are generic

    def tau(self, tau) -> np.ndarray:
        """τ as a finite vector of length n (DimensionError / NonFiniteError naming it otherwise)."""
        return kernel_vector(as_vector("tau", tau, self.n))

    def accel(self, q: np.ndarray, qdot: np.ndarray, tau) -> tuple:
        """(q̈, λ, rank, M, ‖Φ‖, A) at (q, q̇, τ): eq. 25 with M_c = M + PM − MP."""
        tau = self.tau(tau)
        M = pin.crba(self.model, self.data, q)  # a fresh array: the kernel mirrors its upper triangle in place
        h = pin.nonLinearEffects(self.model, self.data, q, qdot)
        phi, A, ad = self.system.rows_at(q, qdot)
        qdd, lam, r = self._eq25(M, h, tau, A, ad)
        return qdd, lam, r, M, math.sqrt(phi.dot(phi)), A

    def accel_terms(self, terms, tau) -> np.ndarray:
        """q̈ of eq. 25 at dynamics terms already evaluated (M, h, A, Ȧq̇ of a
        :class:`~qv_dynamics.model.DynamicsTerms`, e.g. a QuasiSampler's), τ checked as in :meth:`accel`.
        M's lower triangle is rewritten from its upper one (the same numbers for a symmetric M)."""
        return self._eq25(terms.M, terms.h, self.tau(tau), terms.A, terms.Adot_qdot)[0]

    def _eq25(self, M, h, tau, A, ad) -> tuple[np.ndarray, np.ndarray, int]:
        """(q̈, λ, rank) from the compiled stage; a refused input raises what the kernel's status names."""
        qdd, lam = np.empty(self.n), np.empty(A.shape[0])
        status, r = K.projection_accel(M, h, tau, A, ad, self.rtol, self.atol, qdd, lam)
        if status:
            _raise(status)
        return qdd, lam, r

    def rk4(self, q: np.ndarray, qdot: np.ndarray, tau, tau_fn, dt: float, t: float):
        """One classical RK4 step of (q, q̇) without correction, τ held over the step (``tau_fn`` None) or
        τ = tau_fn(t, q, q̇) at every stage. Returns (q, q̇, (q̈, λ, rank, M, ‖Φ‖, A) at the start, ∫τᵀq̇dt);
        (None, None, …) when the step blew up (non-finite)."""
        model, W, prm = self.model, self._W, self._prm
        q0, qn, vn, dq = self._q0, self._qn, self._vn, self._dq
        prm[2] = dt
        q0[:] = q
        self._v0[:] = qdot
        qi, vi, work, first = q, qdot, 0.0, None
        plan = self.system.constraint_plan()  # the active set cannot change inside a step
        if tau_fn is None:
            tau = self.tau(tau)  # held over the step: checked once
        for i, ti in ((0, t), (1, t + 0.5 * dt), (2, t + 0.5 * dt), (3, t + dt)):
            if i:
                if not self._fixed:
                    qn[:] = pin.integrate(model, q0, dq)
                qi, vi = qn, vn
            if tau_fn is not None:  # the stage state is the workspace's: the callable gets copies
                tau = self.tau(tau_fn(ti, qi.copy(), vi.copy()) if i else tau_fn(ti, qi, vi))
            M, h, A, ad, pn = self._stage_terms(qi, vi, plan) if i else self._start_terms(q, qdot, plan)
            lam = np.empty(A.shape[0])
            status, r, w = K.rk4_stage(i, M, h, tau, A, ad, W, lam, prm)
            if status == K.NONFINITE and i == 3:
                return None, None, first, work
            if status:
                _raise(status)
            work += w
            if i == 0:
                first = (self._qdd.copy(), lam, r, M, pn, A)
        return qn.copy() if self._fixed else pin.integrate(model, q0, dq), vn.copy(), first, (dt / 6.0) * work

    def _stage_terms(self, q: np.ndarray, qdot: np.ndarray, plan) -> tuple:
        """(M (upper triangle), h, A, Ȧq̇, None) at an RK4 stage: CRBA, RNEA at q̈ = 0, one kinematic pass.
        A stage needs no Φ: kinds whose rows are the generic residual/jacobian/drift triple
        (:meth:`Constraint.rows`) are asked for A and Ȧq̇ only (no frame placements, no residual; the frame
        Jacobian and classical acceleration are the same numbers); the others through
        :meth:`ConstrainedSystem.rows_at`."""
        model, data = self.model, self.data
        M = pin.crba(model, data, q)
        h = pin.nonLinearEffects(model, data, q, qdot)
        if plan is not self._plan:
            self._plan = plan
            self._separable = all(type(c).rows is Constraint.rows for c, _, _ in plan.items)
        if not self._separable:
            _, A, ad = self.system.rows_at(q, qdot)
            return M, h, A, ad, None
        A, ad = np.empty((plan.m, self.n)), np.empty(plan.m)
        if plan.m:
            pin.forwardKinematics(model, data, q, qdot, self._zero)
            pin.computeJointJacobians(model, data, q)
            for c, rows, sel in plan.items:
                A[rows] = c.jacobian(model, data, q)[sel]
                ad[rows] = c.drift(model, data, q, qdot, "classical")[sel]
        return M, h, A, ad, None

    def _start_terms(self, q: np.ndarray, qdot: np.ndarray, plan) -> tuple:
        """(M, h, A, Ȧq̇, ‖Φ‖) at the start of a step. When q is bitwise the position this object last corrected
        and the active set is the same, M(q), A(q) and ‖Φ(q)‖ of the correction are reused (what CRBA and the
        kinematics give again at the same q, unless the model or an anchor was changed in between); only h
        and Ȧq̇, which depend on q̇, are evaluated."""
        end = self._end
        if end is None or end[1] is not plan or end[0] != q.tobytes():
            M = pin.crba(self.model, self.data, q)
            h = pin.nonLinearEffects(self.model, self.data, q, qdot)
            phi, A, ad = self.system.rows_at(q, qdot)  # anchors recorded here after a switch
            return M, h, A, ad, math.sqrt(phi.dot(phi))
        model, data = self.model, self.data
        h = pin.nonLinearEffects(model, data, q, qdot)
        ad = np.empty(plan.m)
        if plan.m:
            pin.forwardKinematics(model, data, q, qdot, self._zero)  # v, a at q̈ = 0: the classical drift
            for c, rows, sel in plan.items:
                ad[rows] = c.drift(model, data, q, qdot, "classical")[sel]
        return end[2], h, end[3], ad, end[4]

    def rows(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Φ(q), A(q) (kinematics only) at a validated q."""
        phi, A, _ = self.system.rows_at(q)
        return phi, A

    def project(self, q: np.ndarray, qdot: np.ndarray, A: np.ndarray, phi_norm: float) -> tuple:
        """(N_c q̇, ‖A N_c q̇‖, ½(N_c q̇)ᵀM(N_c q̇), M) at the corrected q (where A(q) and ‖Φ(q)‖ were
        evaluated): the kinetic-metric velocity projection. M, A, ‖Φ‖ are kept for the next step's start."""
        M = pin.crba(self.model, self.data, q)
        out = np.empty(self.n)
        status, verr, kinetic = K.m_project(M, A, kernel_vector(qdot), self.rtol, self.atol, out)
        if status:
            _raise(status)
        self._end = (q.tobytes(), self.system.constraint_plan(), M, A, phi_norm)
        return out, verr, kinetic, M
