"""Quasi-velocity decomposition of constrained dynamics (paper `aghili-quasi-velocities`, SPEC §2).

With M = QQᵀ (Cholesky), v = Qᵀq̇ (eq. 6a), u = Q⁻¹(τ_a − g) (eq. 6b), Λ = AQ⁻ᵀ = U₁SV₁ᵀ (eq. 9, 11)::

    v̇ = −Γv + u − Λᵀλ                         (eq. 7a, Γ = Q⁻¹CQ⁻ᵀ − Q̇ᵀQ⁻ᵀ)
    v_r = V₂ᵀv,   K = ½‖v_r‖²                  (eq. 13, 22)
    v̇_r = −Γ_v v_r + u_v,   Γ_v = V₂ᵀΓV₂        (eq. 17/18a with the SPEC's sign; V₂ kept in the
                                                 parallel-transport gauge V₂ᵀV̇₂ = 0)
    ξ = V₁ᵀΛᵀλ = u_ξ + Γ_ξ v_r                  (eq. 20/21)
    Γ_ξ v_r = −V₁ᵀΓv + V₁ᵀΛ⁺(Ȧq̇ − ΛQ̇ᵀq̇)         (from Λv̇ = −Λ̇v; valid for any basis V₁ of the row space)

Rank: σᵢ counts as non-zero when σᵢ > max(rtol·σ₁, atol) (defaults 1e-9 and 1e-9 in the units of Λ,
i.e. of A/√mass). Pass ``prev`` (the previous QuasiState) to keep V₁, V₂ continuous: each new basis is
rotated onto the previous one by orthogonal Procrustes, V ← V·polar(VᵀV_prev). When the rank changes the
basis is re-seeded and ``rank_changed`` is set.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dpotrf, dtrtri

from .errors import DimensionError, NotPositiveDefiniteError, StateMismatchError, as_vector
from .linalg import ATOL, RTOL, svd_full
from .model import DynamicsTerms


@dataclass
class QuasiState:
    """Quasi-variables at one state. Names follow SPEC §4; ``lambda_`` and the u's need ``tau``."""

    Q: np.ndarray
    Qinv: np.ndarray
    Qdot: np.ndarray
    v: np.ndarray
    Lambda: np.ndarray
    U1: np.ndarray
    S: np.ndarray
    V1: np.ndarray
    V2: np.ndarray
    rank: int
    rank_changed: bool
    Gamma: np.ndarray
    Gamma_v: np.ndarray
    Gamma_xi_vr: np.ndarray
    v_r: np.ndarray
    kinetic_energy: float
    W1: np.ndarray  # V₁ᵀΛ⁺ (r × m): maps constraint-space vectors to ξ-space
    u: np.ndarray | None = None
    u_v: np.ndarray | None = None
    u_xi: np.ndarray | None = None
    xi: np.ndarray | None = None
    lambda_: np.ndarray | None = None
    constraint_force: np.ndarray | None = None  # Aᵀλ = Q V₁ ξ
    vr_dot: np.ndarray | None = None             # −Γ_v v_r + u_v

    @property
    def condition(self) -> float:
        """σ₁/σ_r of Λ (1 when unconstrained): how close the constraints are to a singular pose."""
        return float(self.S[0] / self.S[-1]) if self.rank else 1.0

    def xi_from_lambda(self, lam: np.ndarray) -> np.ndarray:
        """ξ = V₁ᵀΛᵀλ for a given multiplier (e.g. the desired λ_d of the force law, eq. 42)."""
        return self.Lambda.T.dot(lam).dot(self.V1)

    def lambda_from_xi(self, xi: np.ndarray) -> np.ndarray:
        """Minimum-norm λ with V₁ᵀΛᵀλ = ξ: λ = (Λᵀ)⁺V₁ξ = W₁ᵀξ."""
        return xi.dot(self.W1)


_PLUS_ONE = np.ones((1, 1))
_MINUS_ONE = -np.ones((1, 1))
_PLUS_ONE.flags.writeable = _MINUS_ONE.flags.writeable = False


def _polar(X: np.ndarray) -> np.ndarray:
    """Orthogonal polar factor of a square matrix (closest rotation/reflection, Procrustes)."""
    if X.shape[0] == 1:  # 1×1 (one constraint row): the sign, exactly what the SVD below returns
        x = float(X[0, 0])
        if x > 0.0:
            return _PLUS_ONE
        if x < 0.0:
            return _MINUS_ONE
    W, _, Zt = svd_full(X)
    return W.dot(Zt)


def cholesky_factor(M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q (lower, M = QQᵀ, eq. 2) and Q⁻¹; NotPositiveDefiniteError if M is not SPD."""
    Q, info = dpotrf(M, lower=1, clean=1)
    if info != 0 or not math.isfinite(Q[-1, -1]):
        if not np.all(np.isfinite(M)):
            raise NotPositiveDefiniteError("mass matrix has non-finite entries")
        w = np.linalg.eigvalsh(0.5 * (M + M.T))
        raise NotPositiveDefiniteError(
            f"mass matrix is not positive definite (smallest eigenvalue {w[0]:.3g}); "
            "check link masses/inertias in the URDF") from None
    Qinv, info = dtrtri(Q, lower=1)
    if info != 0:
        raise NotPositiveDefiniteError("Cholesky factor is singular")
    return Q, Qinv


def phi_lower(X: np.ndarray) -> np.ndarray:
    """Φ(X): strict lower triangle of X plus half its diagonal (so Q⁻¹Q̇ = Φ(Q⁻¹ṀQ⁻ᵀ))."""
    return X * _phi_mask(X.shape[0])


_MASKS: dict[int, np.ndarray] = {}


def _phi_mask(n: int) -> np.ndarray:
    mask = _MASKS.get(n)
    if mask is None:
        mask = np.tril(np.ones((n, n)), -1) + 0.5 * np.eye(n)
        _MASKS[n] = mask
    return mask


def quasi_decompose(terms: DynamicsTerms, qdot=None, tau=None, prev: QuasiState | None = None,
                    rtol: float = RTOL, atol: float = ATOL) -> QuasiState:
    """Decompose the state of ``terms`` into quasi-velocities and quasi-forces (SPEC §2).

    With X = Q⁻¹CQ⁻ᵀ: Q⁻¹ṀQ⁻ᵀ = X + Xᵀ (Ṁ = C + Cᵀ), Q⁻¹Q̇ = L = Φ(X + Xᵀ), Q̇ = QL,
    Γ = X − Lᵀ (eq. 7b) and Q̇ᵀq̇ = Lᵀv, which saves the explicit Ṁ and Q̇ products.

    ``qdot`` may be omitted (``terms.qdot`` is used); if given it must equal ``terms.qdot``
    (StateMismatchError otherwise: C and Ȧq̇ in ``terms`` belong to that velocity)."""
    M = terms.M
    n = M.shape[0]
    qdot = terms.check_qdot(qdot)
    _require_coriolis(terms)
    Q, Qinv = cholesky_factor(M)
    QinvT = Qinv.T
    v = qdot.dot(Q)                    # Qᵀq̇ (eq. 6a)
    A = terms.A
    m = A.shape[0]
    if m:
        Lam = A.dot(QinvT)             # Λ = AQ⁻ᵀ (eq. 9)
        U, s, Vt = svd_full(Lam)
        sl = s.tolist()
        thr = max(rtol * sl[0], atol) if sl else atol
        r = sum(1 for x in sl if x > thr)
    else:
        Lam = np.zeros((0, n))
        U, s, Vt = np.zeros((0, 0)), np.zeros(0), np.eye(n)
        r = 0
    U1, S = U[:, :r], s[:r]
    W1 = (U1 / S).T if r else np.zeros((0, m))  # V₁ᵀΛ⁺ = S⁻¹U₁ᵀ for the SVD basis (r × m)
    rank_changed = prev is not None and (prev.rank != r or prev.V2.shape[0] != n)
    if prev is not None and not rank_changed:
        # gauge: keep the bases continuous (no sign flips / in-space rotations between calls):
        # V₂ ← V₂R₂, V₁ ← V₁R₁ with R = polar(VᵀV_prev), applied to the rows of Vᵀ
        if r < n:  # (Vt is LAPACK's fresh output: updated in place)
            Vt[r:] = _polar(Vt[r:].dot(prev.V2)).T.dot(Vt[r:])
        if r:
            R1 = _polar(Vt[:r].dot(prev.V1))
            Vt[:r] = R1.T.dot(Vt[:r])
            W1 = R1.T.dot(W1)
    V1, V2 = Vt[:r].T, Vt[r:].T
    X = Qinv.dot(terms.C).dot(QinvT)
    L = X + X.T
    L *= _phi_mask(n)                # L = Q⁻¹Q̇ = Φ(Q⁻¹ṀQ⁻ᵀ)
    Qdot = Q.dot(L)
    Gamma = X - L.T                  # Q⁻¹CQ⁻ᵀ − Q̇ᵀQ⁻ᵀ
    v_r = Vt[r:].dot(v)
    VG = Vt.dot(Gamma)               # [V₁ᵀΓ; V₂ᵀΓ]
    Gamma_v = VG[r:].dot(V2)
    if r:
        drift = terms.Adot_qdot - Lam.dot(v.dot(L))         # Ȧq̇ − ΛQ̇ᵀq̇
        Gamma_xi_vr = W1.dot(drift) - VG[:r].dot(v)          # −V₁ᵀΓv + V₁ᵀΛ⁺(...)
    else:
        Gamma_xi_vr = np.zeros(0)
    qs = QuasiState(Q=Q, Qinv=Qinv, Qdot=Qdot, v=v, Lambda=Lam, U1=U1, S=S, V1=V1, V2=V2, rank=r,
                    rank_changed=bool(rank_changed), Gamma=Gamma, Gamma_v=Gamma_v, Gamma_xi_vr=Gamma_xi_vr,
                    v_r=v_r, kinetic_energy=0.5 * float(v.dot(v)), W1=W1)
    if tau is not None:
        tau = as_vector("tau", tau, n)
        u = Qinv.dot(tau - terms.g)
        Vu = Vt.dot(u)
        xi = Vu[:r] + Gamma_xi_vr
        qs.u = u
        qs.u_xi = Vu[:r]
        qs.u_v = Vu[r:]
        qs.xi = xi
        qs.lambda_ = xi.dot(W1)
        qs.constraint_force = Q.dot(xi.dot(Vt[:r]))
        qs.vr_dot = Vu[r:] - Gamma_v.dot(v_r)
    return qs


def torque_from_quasi_forces(terms: DynamicsTerms, qs: QuasiState, u_v: np.ndarray,
                             u_xi: np.ndarray | None = None) -> np.ndarray:
    """τ_a = g + Q(V₁u_ξ + V₂u_v) (SPEC §2, inverse of eq. 18b/21c)."""
    if u_v.shape != (qs.V2.shape[1],):
        raise DimensionError(f"u_v: expected length {qs.V2.shape[1]}, got {u_v.shape}")
    w = qs.V2 @ u_v
    if u_xi is not None and qs.rank:
        if u_xi.shape != (qs.rank,):
            raise DimensionError(f"u_xi: expected length {qs.rank}, got {u_xi.shape}")
        w = w + qs.V1 @ u_xi
    _require_coriolis(terms)
    return terms.g + qs.Q @ w


def _require_coriolis(terms: DynamicsTerms) -> None:
    if terms.C is None or terms.g is None:
        raise StateMismatchError("these dynamics terms have no Coriolis matrix C / gravity g (evaluated with "
                                 "coriolis=False): call system.evaluate(q, qdot) for the quasi-velocities")
