"""Projection-operator formulation (paper `aghili-projection-operator`, SPEC §2).

P = I − A⁺A projects onto N(A) (eq. 4, 15); (I−P)q̈ = −A⁺Ȧq̇ (eq. 13, 16); the projected inverse
dynamics PMq̈ = P(f−h) (eq. 21) and (13) combine into the direct dynamics

    M_c q̈ = P(f−h) + M(I−P)q̈,   M_c = M + PM − MP            (eq. 22–25)
    M_c' = PMP + (I−P)M(I−P)  (eq. 28),   M_c'' = PM + γ(I−P)  (eq. 29)

and the generalized constraint force F = Aᵀλ = (f−h)⊥ − μ(f−h)∥ − μMa⊥ (eq. 32), μ = (I−P)MM_c⁻¹.
All pseudo-inverses use an SVD with the rank rule σᵢ > max(rtol·σ₁, atol), so redundant constraints
and singular poses need no special case.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.lapack import dgesdd, dgesv, dpotrs

from .errors import NonFiniteError, NotPositiveDefiniteError, RankDeficiencyError, as_vector
from .linalg import ATOL, RTOL, cholesky_lower, identity, svd_full
from .model import DynamicsTerms


def pinv_rank(A: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> tuple[np.ndarray, int, np.ndarray]:
    """A⁺, its numerical rank r, and V₂ (orthonormal basis of N(A)) from one SVD."""
    m, n = A.shape
    if m == 0:
        return np.zeros((n, 0)), 0, np.eye(n)
    U, s, Vt = svd_full(A)
    r = int(np.count_nonzero(s > max(rtol * s[0], atol)))
    Apinv = (Vt[:r].T / s[:r]).dot(U[:, :r].T)
    return Apinv, r, Vt[r:].T


def pinv_basis(A: np.ndarray, rtol: float = RTOL, atol: float = ATOL) -> tuple[np.ndarray, np.ndarray, int]:
    """A⁺, V₁ (orthonormal basis of the row space of A, so P = I − V₁V₁ᵀ, eq. 15) and the rank r, from a
    thin SVD; one row needs none: σ = ‖A‖, A⁺ = Aᵀ/σ², V₁ = Aᵀ/σ (plane contact, slider-crank)."""
    m, n = A.shape
    if m == 1:
        sig = math.sqrt(float(A[0] @ A[0]))
        if sig > atol:
            return A.T / (sig * sig), A.T / sig, 1
        return np.zeros((n, 1)), np.zeros((n, 0)), 0
    if m == 0:
        return np.zeros((n, 0)), np.zeros((n, 0)), 0
    U, s, Vt, info = dgesdd(A, compute_uv=1, full_matrices=0)
    if info != 0:
        if not np.all(np.isfinite(A)):
            raise NonFiniteError("constraint Jacobian is non-finite")
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
    r = int(np.count_nonzero(s > max(rtol * s[0], atol)))
    V1 = Vt[:r].T
    return (V1 / s[:r]).dot(U[:, :r].T), V1, r


@dataclass
class Projection:
    """P, A⁺, the normal acceleration a⊥ = (I−P)q̈ = −A⁺Ȧq̇, and the rank of A."""

    P: np.ndarray
    Apinv: np.ndarray
    a_perp: np.ndarray
    rank: int
    V2: np.ndarray

    @property
    def P_perp(self) -> np.ndarray:
        return np.eye(self.P.shape[0]) - self.P

    def split(self, f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """f = f∥ ⊕ f⊥: the potent (moves the system) and impotent (only loads the constraints) parts."""
        fp = self.P @ f
        return fp, f - fp


def projection(terms: DynamicsTerms, rtol: float = RTOL, atol: float = ATOL) -> Projection:
    Apinv, r, V2 = pinv_rank(terms.A, rtol, atol)
    P = V2.dot(V2.T)
    return Projection(P=P, Apinv=Apinv, a_perp=-Apinv.dot(terms.Adot_qdot), rank=r, V2=V2)


def constraint_inertia(M: np.ndarray, P: np.ndarray, kind: str = "Mc", gamma: float | None = None) -> np.ndarray:
    """Constraint inertia matrix: ``Mc`` (eq. 23, p.d., not symmetric), ``Mc_sym`` (eq. 28, s.p.d.)
    or ``Mc_gamma`` (eq. 29, invertible; γ defaults to ‖M‖₂)."""
    if kind == "Mc":
        PM = P.dot(M)
        return M + PM - PM.T
    Pp = np.eye(M.shape[0]) - P
    if kind == "Mc_sym":
        return P @ M @ P + Pp @ M @ Pp
    if kind == "Mc_gamma":
        gamma = float(np.linalg.norm(M, 2)) if gamma is None else float(gamma)
        return P @ M + gamma * Pp
    raise ValueError(f"unknown constraint inertia kind {kind!r} (Mc, Mc_sym, Mc_gamma)")


def constraint_inertia_rhs(M: np.ndarray, P: np.ndarray, a_perp: np.ndarray, kind: str = "Mc",
                           gamma: float | None = None) -> np.ndarray:
    """The velocity term that goes with each M_c: M a⊥, (I−2P)M a⊥ (eq. 27), γ a⊥ (eq. 29)."""
    if kind == "Mc":
        return M.dot(a_perp)
    if kind == "Mc_sym":
        Ma = M @ a_perp
        return Ma - 2.0 * (P @ Ma)
    if kind == "Mc_gamma":
        gamma = float(np.linalg.norm(M, 2)) if gamma is None else float(gamma)
        return gamma * a_perp
    raise ValueError(f"unknown constraint inertia kind {kind!r}")


def coupling(M: np.ndarray, P: np.ndarray, Mc: np.ndarray | None = None) -> np.ndarray:
    """μ = (I−P) M M_c⁻¹ (eq. 32): how the potent force leaks into the constraint force."""
    Mc = constraint_inertia(M, P) if Mc is None else Mc
    return (identity(M.shape[0]) - P).dot(_solve(Mc.T, M.T).T)


def decoupling_residual(M: np.ndarray, P: np.ndarray) -> float:
    """‖(I−P)MP‖ / ‖M‖ — zero iff N(A) is invariant under M (Proposition 3, decoupled system)."""
    Pp = np.eye(M.shape[0]) - P
    return float(np.linalg.norm(Pp @ M @ P, 2) / np.linalg.norm(M, 2))


def is_decoupled(M: np.ndarray, P: np.ndarray, tol: float = 1e-10) -> bool:
    return decoupling_residual(M, P) <= tol


def weighted_metric(M: np.ndarray, A: np.ndarray, W: np.ndarray):
    """Change of coordinates of sec. 7.2: q̇_W = W^½q̇, f_W = W^-½f.

    Returns (M_W, A_W, W_half, W_half_inv) with M_W = W^-½MW^-½ and A_W = AW^-½, so that the
    projection P_W = I − A_W⁺A_W is dimensionless and a minimum ‖f_W‖ is the minimum of fᵀW⁻¹f (eq. 49)."""
    w, E = np.linalg.eigh(0.5 * (W + W.T))
    if w[0] <= 0:
        raise NotPositiveDefiniteError(f"metric W must be positive definite (smallest eigenvalue {w[0]:.3g})")
    W_half = (E * np.sqrt(w)) @ E.T
    W_half_inv = (E / np.sqrt(w)) @ E.T
    return W_half_inv @ M @ W_half_inv, A @ W_half_inv, W_half, W_half_inv


def length_metric(n_translational_mask: np.ndarray, kappa: float) -> np.ndarray:
    """W of eq. 50: κ⁻² on translational coordinates, 1 on rotational ones (κ a characteristic length)."""
    mask = np.asarray(n_translational_mask, bool)
    return np.diag(np.where(mask, kappa ** -2, 1.0))


def direct_dynamics(terms: DynamicsTerms, qdot=None, tau=None, method: str = "projection",
                    inertia: str = "Mc", gamma: float | None = None,
                    rtol: float = RTOL, atol: float = ATOL):
    """Constrained forward dynamics: returns (q̈, F = Aᵀλ, λ).

    ``method="projection"`` solves M_c q̈ = P(τ−h) + (velocity term) (eq. 22/25, 27 or 29 by ``inertia``)
    and is valid for redundant constraints and singular poses (λ is then the minimum-norm multiplier).
    ``method="kkt"`` solves [[M, Aᵀ],[A, 0]][q̈; λ] = [τ−h; −Ȧq̇] and raises RankDeficiencyError when
    A loses rank (the classical method's failure mode). Both raise NotPositiveDefiniteError when M is
    not symmetric positive definite. ``qdot`` defaults to ``terms.qdot`` and must equal it if given.
    """
    terms.check_qdot(qdot)
    return direct_dynamics_rank(terms, tau, method, inertia, gamma, rtol, atol)[:3]


def direct_dynamics_rank(terms: DynamicsTerms, tau=None, method: str = "projection", inertia: str = "Mc",
                         gamma: float | None = None, rtol: float = RTOL, atol: float = ATOL):
    """:func:`direct_dynamics` at ``terms.qdot``, plus the numerical rank r of A: (q̈, F = Aᵀλ, λ, r).

    The constrained simulator calls it at every integrator stage (its KKT + Baumgarte baseline passes
    terms whose ``Adot_qdot`` holds Ȧq̇ + 2αAq̇ + β²Φ)."""
    M = terms.M
    n = M.shape[0]
    h = terms.h
    f_h = -h if tau is None else as_vector("tau", tau, n) - h
    L = cholesky_lower(M, "mass matrix is not positive definite; check link masses/inertias in the URDF", clean=False)
    A = terms.A
    m = A.shape[0]
    if m == 0:
        qdd = dpotrs(L, f_h, lower=1)[0]
        return qdd, np.zeros(n), np.zeros(0), 0
    if method == "kkt":
        s = dgesdd(A, compute_uv=0)[1]
        r = int(np.count_nonzero(s > max(rtol * s[0], atol)))
        if r < m:
            raise RankDeficiencyError(
                f"KKT matrix is singular: rank(A) = {r} < {m} constraint rows (smallest singular value "
                f"{s[-1]:.2e}; redundant constraints or a singular pose) — method='projection' handles it")
        K = np.zeros((n + m, n + m))
        K[:n, :n] = M
        K[:n, n:] = A.T
        K[n:, :n] = A
        rhs = np.empty(n + m)
        rhs[:n] = f_h
        np.negative(terms.Adot_qdot, out=rhs[n:])
        try:
            sol = _solve(K, rhs)
        except np.linalg.LinAlgError:
            raise RankDeficiencyError(f"KKT matrix is singular (rank(A) = {np.linalg.matrix_rank(A)} < {m} rows): "
                                      "redundant constraints or a singular pose; method='projection' "
                                      "handles it") from None
        qdd, lam = sol[:n], sol[n:]
        return qdd, A.T.dot(lam), lam, r
    if method != "projection":
        raise ValueError(f"unknown method {method!r} (projection, kkt)")
    Apinv, V1, r = pinv_basis(A, rtol, atol)
    P = identity(n) - V1.dot(V1.T)             # eq. 15
    a_perp = -Apinv.dot(terms.Adot_qdot)  # eq. 16
    Mc = constraint_inertia(M, P, inertia, gamma)
    rhs = P.dot(f_h) + constraint_inertia_rhs(M, P, a_perp, inertia, gamma)
    try:
        qdd = _solve(Mc, rhs)
    except np.linalg.LinAlgError:
        raise NotPositiveDefiniteError("constraint inertia M_c is singular (M not positive definite?)") from None
    F = f_h - M.dot(qdd)
    F = V1.dot(V1.T.dot(F))    # (I−P)(f−h−Mq̈): the constraint force Aᵀλ
    lam = F.dot(Apinv)         # minimum-norm λ = A⁺ᵀF (Remark 4)
    return qdd, F, lam, r


def _solve(K: np.ndarray, b: np.ndarray) -> np.ndarray:
    """LU solve (LAPACK dgesv, as numpy.linalg.solve) without the wrapper overhead."""
    _, _, x, info = dgesv(K, b)
    if info != 0:
        raise np.linalg.LinAlgError("Singular matrix")
    return x


def _solve_spd(M: np.ndarray, b: np.ndarray) -> np.ndarray:
    L = cholesky_lower(M, "mass matrix is not positive definite; check link masses/inertias in the URDF", clean=False)
    return dpotrs(L, b, lower=1)[0]


def constraint_force_eq32(terms: DynamicsTerms, tau: np.ndarray, pr: Projection | None = None) -> np.ndarray:
    """F = (f⊥ − h⊥) − μ(f∥ − h∥) − μ M a⊥ (eq. 32), written out term by term."""
    pr = projection(terms) if pr is None else pr
    f_par, f_perp = pr.split(tau)
    h_par, h_perp = pr.split(terms.h)
    mu = coupling(terms.M, pr.P)
    return (f_perp - h_perp) - mu @ (f_par - h_par) - mu @ (terms.M @ pr.a_perp)
