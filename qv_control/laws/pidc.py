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
- Passive joints (eq. 56–62): f = (I + H)f∥, H = −(I−P)Q⁺(I−B), Q = (I−B)(I−P) (named Qb here), which
  puts zero torque on the passive joints without changing the motion; the controllability condition
  R((I−B)P) ⊆ R((I−B)(I−P)) (eq. 58, i.e. N ∩ B⊥ = {0}, eq. 64) is checked on every call.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from qv_dynamics.errors import RankDeficiencyError, as_vector
from qv_dynamics.projection import coupling, length_metric, pinv_rank, projection, weighted_metric

from ..coordinates import check_reduced_jacobian
from .base import ControlLaw, GainError
from qv_dynamics.state import Reference, State


class UncontrollableError(RankDeficiencyError):
    """The actuated joints cannot realise every admissible motion (eq. 58/64 violated)."""


class _ProjectionLaw(ControlLaw):
    """Shared PIDC motion part (eq. 45–46)."""

    def _pidc(self, state: State, reference):
        t, q, qdot, lam_meas = self._read_state(state)
        terms = self.system.evaluate(q, qdot)
        kin = self.coords.evaluate(q, qdot, data=self.system.data)  # reuses evaluate's kinematics at (q, q̇)
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        pr = projection(terms)                                         # P, A⁺, a⊥ (eq. 15-16)
        P, Apinv, a_perp, r, V2 = pr.P, pr.Apinv, pr.a_perp, pr.rank, pr.V2
        JN = kin.J @ V2
        cond = check_reduced_jacobian(JN, self.coords.labels, terms.n, r, self.cond_max)
        Lam = V2 @ np.linalg.inv(JN)                                   # Λ = ∂ψ/∂θ (eq. 40)
        e = ref.theta - kin.theta
        edot = ref.theta_dot - kin.theta_dot
        acc = ref.theta_ddot + self.kd * edot + self.kp * e
        u_p = a_perp + Lam @ (acc - kin.Jdot_qdot - kin.J @ a_perp)  # eq. 46
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=-e, e_p=e, cond_D=cond, u_p=u_p,
                         lambda_d=ref.lambda_)
        return t, terms, ref, P, Apinv, a_perp, u_p, lam_meas


class PIDCLaw(_ProjectionLaw):
    """Projected inverse-dynamics control, eq. 45–46 (motion only, f = f∥: minimum ‖f‖, eq. 48).

    ``kp``, ``kd`` are G_P (1/s², scalar or k-vector) and G_D (1/s). ``W`` (n-vector = diagonal, or n×n
    p.d.) or ``kappa`` (eq. 50, with ``translational`` = names of prismatic/translational joints) select the
    weighted minimum-norm variant (eq. 49). The constraint force is whatever the motion requires."""

    name = "pidc"

    def __init__(self, system, coordinates, kp=100.0, kd=20.0, W=None, kappa: float | None = None,
                 translational: Sequence[str] = (), effort_limits="urdf", cond_max: float = 1e6):
        super().__init__(system, coordinates, kp=kp, kd=kd, effort_limits=effort_limits, cond_max=cond_max)
        n = system.nv
        if W is None and kappa is not None:
            mask = np.zeros(n, bool)
            for name in translational:
                mask[system.joint_v_index(name)] = True
            W = length_metric(mask, float(kappa))                     # eq. 50
        self.W = None
        if W is not None:
            W = np.asarray(W, float)
            if W.ndim == 1:
                W = np.diag(as_vector("W", W, n))
            if W.shape != (n, n) or not np.all(np.isfinite(W)):
                raise GainError(f"W: expected {n} diagonal entries or a finite {n}x{n} matrix, got shape {W.shape}")
            _, _, self._Wh, self._Wmh = weighted_metric(np.eye(n), np.zeros((0, n)), W)  # checks p.d.
            self.W = 0.5 * (W + W.T)

    def _weighted_parallel(self, A: np.ndarray, P: np.ndarray):
        """The projector x ↦ W^½P_W W^-½x (the identity map onto P x when W is None)."""
        if self.W is None:
            return P
        _, _, V2w = pinv_rank(A @ self._Wmh)
        return self._Wh @ (V2w @ (V2w.T @ self._Wmh))

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        t, terms, ref, P, Apinv, a_perp, u_p, _ = self._pidc(state, reference)
        Pw = self._weighted_parallel(terms.A, P)
        return self._finish(Pw @ terms.h, None, Pw @ (terms.M @ u_p))


class PIDCForceLaw(_ProjectionLaw):
    """Hybrid motion/force control, eq. 54 = PIDC (eq. 45–46) + constraint force control (eq. 51–52).

    ``kf`` (G_F, < 1 because the measured force is one sample old) and ``ki`` (G_I) act on
    e_f = Aᵀ(λ_d − λ_meas); without ``State.lambda_meas`` the force loop is open (F = F_d with an exact
    model). With a measurement the force error obeys (G_F + 1)ė_f + G_I e_f = 0."""

    name = "pidc_force"

    def __init__(self, system, coordinates, kp=100.0, kd=20.0, kf=0.0, ki=0.0, effort_limits="urdf",
                 cond_max: float = 1e6):
        super().__init__(system, coordinates, kp=kp, kd=kd, kf=kf, ki=ki, effort_limits=effort_limits,
                         cond_max=cond_max)

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        t, terms, ref, P, Apinv, a_perp, u_p, lam_meas = self._pidc(state, reference)
        M, A = terms.M, terms.A
        mu = coupling(M, P)                                 # (I−P)MM_c⁻¹ (eq. 32)
        F_d = A.T @ ref.lambda_
        corr = self._force_correction(t, None if lam_meas is None else F_d - A.T @ lam_meas)
        u_F = F_d if corr is None else F_d + corr
        u_F = u_F - P @ u_F                                 # keep it impotent: (I−P)u_F
        PMu = P @ (M @ u_p)
        base = terms.h + mu @ (M @ a_perp)
        motion = PMu + mu @ PMu
        self.last.update(F_d=F_d, u_F=u_F, force_feedback=corr is not None)
        return self._finish(base, u_F, motion)


def passive_projector(A: np.ndarray, actuated_mask: np.ndarray, tol: float = 1e-8, P: np.ndarray | None = None):
    """(I + H, residual) of eq. 61–62 and the eq. 58 range-inclusion residual
    ‖(I − QbQb⁺)(I−B)P‖ / max(‖(I−B)P‖, 1) with Qb = (I−B)(I−P). ``P``: I − A⁺A if already known."""
    n = A.shape[1]
    if P is None:
        _, _, V2 = pinv_rank(A)
        P = V2 @ V2.T
    IB = np.diag((~actuated_mask).astype(float))
    Pp = np.eye(n) - P
    Qb = IB @ Pp
    Qb_pinv, _, _ = pinv_rank(Qb)
    IBP = IB @ P
    resid = float(np.linalg.norm(IBP - Qb @ (Qb_pinv @ IBP), 2) / max(np.linalg.norm(IBP, 2), 1.0))
    H = -Pp @ Qb_pinv @ IB
    return np.eye(n) + H, P, resid


def _uncontrollable_message(system, A: np.ndarray, mask: np.ndarray, resid: float) -> str:
    n = A.shape[1]
    B = np.eye(n)[mask]
    K = np.vstack([A, B]) if B.size else A
    _, _, V2 = pinv_rank(K)
    passive = [nm for nm, a in zip(_velocity_names(system), mask) if not a]
    msg = (f"uncontrollable with actuated joints {[nm for nm, a in zip(_velocity_names(system), mask) if a]}: "
           f"R((I-B)P) is not inside R((I-B)(I-P)) (eq. 58/64, residual {resid:.2e})")
    if V2.shape[1]:
        d = V2[:, 0]
        msg += ("; the passive joints " + str(passive) + " can move with every actuator locked, e.g. along "
                + ", ".join(f"{nm}: {x:+.3f}" for nm, x in zip(_velocity_names(system), d) if abs(x) > 1e-6))
    return msg


def _velocity_names(system) -> list[str]:
    names = [""] * system.nv
    for jn in system.joint_names:
        names[system.joint_v_index(jn)] = jn
    return [nm or f"v{i}" for i, nm in enumerate(names)]


def _actuated_mask(system, actuated) -> np.ndarray:
    mask = np.zeros(system.nv, bool)
    if actuated is None or len(actuated) == 0:
        raise GainError("actuated: list the actuated joint names (the others are passive)")
    for name in actuated:
        mask[system.joint_v_index(name)] = True
    return mask


def check_controllability(system, actuated: Sequence[str], q, tol: float = 1e-8) -> float:
    """Eq. 58/64 at configuration q for the given actuated joints; returns the residual or raises
    :class:`UncontrollableError` naming a passive motion that no actuator can resist."""
    mask = _actuated_mask(system, actuated)
    _, A = system.constraint_rows(q)
    _, _, resid = passive_projector(A, mask, tol)
    if resid > tol:
        raise UncontrollableError(_uncontrollable_message(system, A, mask, resid))
    return resid


class PassiveJointLaw(_ProjectionLaw):
    """PIDC for mechanisms with passive joints, eq. 56–62: f = (I + H)(h∥ + PMu_p), zero on passive joints.

    ``actuated``: names of the actuated joints (B of eq. 55). Raises :class:`UncontrollableError` at
    construction (if ``q0`` is given) and on any call where eq. 58/64 fails."""

    name = "passive"

    def __init__(self, system, coordinates, actuated: Sequence[str] = (), kp=100.0, kd=20.0, q0=None,
                 controllability_tol: float = 1e-8, effort_limits="urdf", cond_max: float = 1e6):
        super().__init__(system, coordinates, kp=kp, kd=kd, effort_limits=effort_limits, cond_max=cond_max)
        self.actuated = list(actuated)
        self.mask = _actuated_mask(system, self.actuated)
        self.tol = float(controllability_tol)
        if self.limits is not None:
            self.limits = np.where(self.mask, self.limits, np.inf)
        if q0 is not None:
            check_controllability(system, self.actuated, q0, self.tol)

    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        t, terms, ref, P, Apinv, a_perp, u_p, _ = self._pidc(state, reference)
        IH, _, resid = passive_projector(terms.A, self.mask, self.tol, P=P)
        if resid > self.tol:
            raise UncontrollableError(_uncontrollable_message(self.system, terms.A, self.mask, resid))
        base = IH @ (P @ terms.h)
        motion = IH @ (P @ (terms.M @ u_p))
        base[~self.mask] = 0.0
        motion[~self.mask] = 0.0
        self.last.update(controllability_residual=resid)
        return self._finish(base, None, motion)


__all__ = ["PIDCLaw", "PIDCForceLaw", "PassiveJointLaw", "UncontrollableError", "check_controllability",
           "passive_projector"]
