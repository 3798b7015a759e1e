"""Control laws of the projection-operator formulation (paper `aghili-projection-operator` section 7).

Sign convention (SPEC): M q̈ + h = f − F, F = Aᵀλ; P = I − A⁺A; a⊥ = (I−P)q̈ = −A⁺Ȧq̇ (eq. 13/16).

- PIDC (eq. 45–46): f∥ = h∥ + PMu_p, u_p = Λ̇θ̇ + Λ(θ̈_d + G_D ė + G_P e), e = θ_d − θ, where
  Λ = ∂ψ/∂θ = N(JN)⁻¹ (N a basis of N(A), J = ∂θ/∂q: the unique right inverse of J inside N(A), eq. 40
  and 43) and Λ̇θ̇ = a⊥ − Λ(J̇q̇ + Ja⊥) (the unique a with Aa = −Ȧq̇, Ja = −J̇q̇). Closed loop:
  ë + G_D ė + G_P e = 0 (proof of Theorem 4), with the minimum-norm torque f = f∥ (eq. 48).
- Weighted minimum norm (eq. 49–50): with a p.d. W, f = W^½ P_W W^-½ (h + Mu_p), P_W = I − A_W⁺A_W,
  A_W = AW^-½: the same motion (Pf is unchanged) with the least fᵀW⁻¹f.
- Constraint force control (eq. 51–52): f⊥ = h⊥ + μ(f∥ − h∥ + Ma⊥) + u_F, u_F = (I−P)(F_d + G_F e_f +
  G_I∫e_f), e_f = F_d − F, F_d = Aᵀλ_d, μ = (I−P)MM_c⁻¹. (The paper prints μ(f∥ − h∥ + Cq̇) with its C =
  Ṗ; by eq. 32 the term is μC_c q̇ = μMa⊥ — an acceleration needs M to be a force.) With an exact model
  F = u_F, hence (G_F + 1)ė_f + G_I e_f = 0 for the measured F.
- Hybrid (eq. 54): f = h + μMa⊥ + (I + μ)PMu_p + u_F.
- Rank: A's singular values count when σ > max(RTOL·σ₁, ``rank_atol``). Near a pose where A loses rank (a row
  vanishes, or rows become dependent), the normal acceleration a⊥ = −A⁺Ȧq̇ grows like |Ȧq̇|/σ (for one row
  σ₁ = ‖A‖ itself, so no relative rule removes it). ``rank_atol`` is absolute, in A's units (m for a position
  row), and its default is at the model's scale: RANK_FLOOR_REL (1.5 %) of the model's reach ℓ (the longest
  chain of joint and frame offsets from the root, :func:`model_reach`; ℓ = 1.5 m for the planar 3-link arm,
  0.6 m for the slider-crank); ``rank_atol=0`` keeps the bare floor ATOL. The motion channel drops the rows
  whose σ is below it: N(A) then has more dimensions than θ has coordinates, and the law moves along the tangent T
  carried over from the last tick with every row (T = orth(V₂V₂ᵀT_prev), transported tick by tick), Λ =
  T(JT)⁺, with the damping acceleration −G_D NNᵀq̇ along the rest N of N(A) in place of a⊥ (so the motion
  stays on the path it came along instead of taking another branch through the pose); P, A⁺ and the force
  channel keep every row of A (default floor). At a pose below ATOL itself (no earlier full-rank tick): Λ =
  V₂(JN)⁺, the minimum-norm acceleration for θ̈.
- Passive joints (eq. 56–62): f = (I + H)f∥, H = −(I−P)Q⁺(I−B), Q = (I−B)(I−P) (named Qb here), which
  puts zero torque on the passive joints without changing the motion; the controllability condition
  R((I−B)P) ⊆ R((I−B)(I−P)) (eq. 58, i.e. N ∩ B⊥ = {0}, eq. 64) is checked on every call.
"""
from __future__ import annotations

import numpy as np

from qv_dynamics.errors import RankDeficiencyError
from qv_dynamics.linalg import ATOL, RTOL, inv
from qv_dynamics.projection import pinv_rank, projection
from qv_dynamics.state import State

from ..coordinates import check_reduced_jacobian
from ..kernels import layout as L
from .base import ControlLaw, GainError
from .lazy_kernel import LazyKernel

#: the default rank floor of the motion channel, relative to the model's reach (module doc): measured on the
#: singular pass of qv_control.demo.cases (two contact rows becoming one, ℓ = 1.5 m), where the projection law
#: keeps both prongs pressing for floors of 0.015-0.03 m (1.0-2.0 % of ℓ) and loses the task below 0.015 m
RANK_FLOOR_REL = 0.015


def model_reach(model) -> float:
    """ℓ: the longest chain of offsets from the root, max over frames of Σ‖joint placement‖ + ‖frame placement‖
    (m; independent of the configuration)."""
    depth = [0.0] * model.njoints
    for j in range(1, model.njoints):
        depth[j] = depth[model.parents[j]] + float(np.linalg.norm(model.jointPlacements[j].translation))
    return max([*depth, *(depth[f.parentJoint] + float(np.linalg.norm(f.placement.translation))
                          for f in model.frames)])


def default_rank_atol(system) -> float:
    """RANK_FLOOR_REL·ℓ (at least ATOL): the default floor of A's rank decision (module doc)."""
    return max(RANK_FLOOR_REL * model_reach(system.model), ATOL)


def checked_rank_atol(system, rank_atol: float | None) -> float:
    """The absolute floor of A's rank decision (module doc): ``rank_atol`` checked (finite, >= 0; at least
    ATOL), or the model-scale default when None."""
    if rank_atol is None:
        return default_rank_atol(system)
    rank_atol = float(rank_atol)
    if not (np.isfinite(rank_atol) and rank_atol >= 0.0):
        raise GainError(f"rank_atol: expected a finite value >= 0, got {rank_atol}")
    return max(rank_atol, ATOL)


class UncontrollableError(RankDeficiencyError):
    """The actuated joints cannot realise every admissible motion (eq. 58/64 violated)."""


class ProjectionLawBase(ControlLaw):
    """Shared PIDC motion part (eq. 45–46)."""

    uses_terms = True
    #: absolute singular-value floor of A's rank decision (module doc): ``rank_atol=``, default_rank_atol(system)
    rank_atol: float = ATOL

    #: the compiled tick's channels (qv_control.kernels.tick ``mode``): 0 PIDC, 1 hybrid, 2 passive; None: none
    tick_mode: int | None = None
    # the projection and u_p of the numpy-side path in one compiled call (qv_control.kernels.laws.pidc)
    _kernel = LazyKernel("pidc")

    def __init__(self, system, coordinates, rank_atol: float | None = None, **kw):
        super().__init__(system, coordinates, **kw)
        self.rank_atol = checked_rank_atol(system, rank_atol)
        if self.tick_mode is not None:
            self.tick_kernel = "qv_control.kernels.tick.projection_law_tick"
        self._start_compiled_tick()

    def reset(self) -> None:
        """As :meth:`ControlLaw.reset`, and forget the tangent carried through lost rows."""
        super().reset()
        self._A_full = self._T_lost = None

    #: τ of this state and reference: the compiled tick, or the numpy path (:meth:`_compute`) (one call, no wrapper)
    compute = ControlLaw._compiled_compute

    # ------------------------------------------------------------------ the compiled tick's state
    def _tick_mode(self) -> int:
        return self.tick_mode

    def _tolerances(self) -> tuple[float, float]:
        return RTOL, self.rank_atol

    def _export_state(self, ct) -> None:
        st = ct.state
        if st[L.S_HOLD]:
            self._theta_hold = ct.vector(L.F_HOLD).copy()
        if st[L.S_TAUI]:   # (a compiled tick since the state was taken back)
            self._A_full, self._T_lost = ct.block(L.F_AFULL).copy(), None

    def _import_state(self, ct) -> bool:
        st = ct.state
        st[L.S_HOLD] = self._theta_hold is not None
        if self._theta_hold is not None:
            ct.vector(L.F_HOLD)[:] = self._theta_hold
        ct.block(L.F_UC)[:] = np.eye(self.k)
        st[L.S_COND_CALLS] = st[L.S_TAUI] = 0.0
        sat = self.saturation
        st[L.S_FORCE_FROZEN], st[L.S_MOTION_FROZEN] = sat.force_frozen, sat.motion_frozen
        return self._theta_hold is not None

    def _diagnostics(self, ct) -> dict:
        D = ct.block(L.F_DIAG)
        sc, k, n, m = D[L.D_SCALARS], ct.k, self.system.nv, ct.m
        e = D[L.D_E, :k].copy()
        return dict(t=float(sc[L.DS_T]), theta=D[L.D_THETA, :k].copy(), theta_d=D[L.D_THETA_D, :k].copy(),
                    e_theta=-e, e_p=e, cond_D=ct.cond(), u_p=D[L.D_UP, :n].copy(),
                    lambda_d=D[L.D_LAMBDA_D, :m].copy(), saturation=self.saturation)

    def _pidc(self, state: State, reference):
        t, q, qdot, lam_meas = self._read_state(state)
        terms = self._terms(q, qdot)
        kin = self.coords.evaluate(q, qdot, data=self.system.data)  # reuses evaluate's kinematics at (q, q̇)
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        e = ref.theta - kin.theta
        edot = ref.theta_dot - kin.theta_dot
        acc = ref.theta_ddot + self.kd * edot + self.kp * e
        fast = self._compiled_motion(terms, kin, acc)
        if fast is not None:
            P, Apinv, a_perp, u_p, cond = fast
            self._A_full, self._T_lost = terms.A, None
        else:
            pr = projection(terms, atol=self.rank_atol)                # P, A⁺, a⊥ (eq. 15-16)
            P, Apinv, a_perp, r, V2 = pr.P, pr.Apinv, pr.a_perp, pr.rank, pr.V2
            JN = kin.J.dot(V2)
            if r < terms.m and JN.shape[0] < JN.shape[1]:
                a_perp, V2 = self._lost_rows_motion(V2, qdot)
                JN = kin.J.dot(V2)
                Lam, cond = self._lost_rows_map(V2, JN)
                if self.rank_atol > ATOL:        # P (the force channel, the projected motion) keeps A's rows
                    full = projection(terms)
                    P, Apinv = full.P, full.Apinv
            else:
                cond = check_reduced_jacobian(JN, self.coords.labels, terms.n, r, self.cond_max)
                Lam = V2.dot(inv(JN))                               # Λ = ∂ψ/∂θ (eq. 40)
                self._A_full, self._T_lost = terms.A, None
            u_p = a_perp + Lam.dot(acc - kin.Jdot_qdot - kin.J.dot(a_perp))  # eq. 46
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=-e, e_p=e, cond_D=cond, u_p=u_p,
                         lambda_d=ref.lambda_)
        return t, terms, ref, P, Apinv, a_perp, u_p, lam_meas

    #: A of the last tick with every row kept (the compiled paths' and the numpy path's)
    _A_full: np.ndarray | None = None
    #: the tangent carried through the ticks with rows lost (None outside them)
    _T_lost: np.ndarray | None = None

    def _lost_rows_motion(self, V2: np.ndarray, qdot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """While rows are lost: the tangent carried over from the last full-rank tick, T = orth(V₂V₂ᵀV₂_last)
        (the constrained motion's direction, continuous along the path through the pose), and the damping
        acceleration −G_D N Nᵀq̇ along the rest N of the enlarged N(A) (no drift off the path there).
        Returns (that acceleration in place of a⊥, T); (0, V₂) without a full-rank tick before."""
        last = self._T_lost
        if last is None and self._A_full is not None and self._A_full.shape[1] == V2.shape[0]:
            last = pinv_rank(self._A_full)[2]            # N(A) of that tick (default floor: its own rank)
        if last is None:
            return np.zeros(V2.shape[0]), V2
        T, s, _ = np.linalg.svd(V2.dot(V2.T.dot(last)), full_matrices=False)
        if s.size == 0 or s[-1] < 0.5:
            return np.zeros(V2.shape[0]), V2
        self._T_lost = T
        N = V2 - T.dot(T.T.dot(V2))
        return -float(np.max(self.kd)) * N.dot(N.T.dot(qdot)), T

    def _lost_rows_map(self, V2: np.ndarray, JN: np.ndarray) -> tuple[np.ndarray, float]:
        """Λ = V₂(JN)⁺ and cond(JN) while rows of A are lost (k < n − r; V₂: the carried tangent, module doc);
        raises as :func:`check_reduced_jacobian` when θ does not reach the motion (cond(JN) > cond_max)."""
        U, s, Vt = np.linalg.svd(JN, full_matrices=False)
        cond = float(s[0] / s[-1]) if s.size and s[-1] > 0 else np.inf
        if not cond <= self.cond_max:
            raise RankDeficiencyError(
                f"minimal coordinates ({', '.join(self.coords.labels)}) are singular here: cond(JN) = {cond:.3g} > "
                f"{self.cond_max:.3g} while constraint rows are below rank_atol = {self.rank_atol:.3g}")
        return V2.dot((Vt.T / s).dot(U.T)), cond

    def _compiled_motion(self, terms, kin, acc):
        """(P, A⁺, a⊥, u_p, cond D) by :func:`qv_control.kernels.laws.pidc` when A has full row rank and θ has
        n − m coordinates; None for the numpy path (which decides the rank and raises on a bad θ)."""
        m, n = terms.A.shape
        if self._kernel is None or kin.J.shape[0] != n - m:
            return None
        k = n - m
        mats = np.empty((n + m + k, n))
        vecs = np.empty((3, n))
        if not self._kernel(terms.A, terms.Adot_qdot, kin.J, kin.Jdot_qdot, acc, RTOL, self.rank_atol, mats, vecs):
            return None
        cond = float(vecs[2, 0])
        if not cond <= self.cond_max:
            check_reduced_jacobian(mats[n + m:, :k], self.coords.labels, n, m, self.cond_max)  # raises
            return None  # (rounding let the SVD's cond pass: the numpy path decides)
        return mats[:n], mats[n:n + m].T, vecs[1], vecs[0], cond
