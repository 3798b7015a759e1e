"""Contact impacts: the impulse map q̇⁺ = N_c q̇⁻ and the kinetic energy it removes.

Floating-base lecture (`hutter-floating-base-lecture`, "Contact Dynamics"): integrating the equations of
motion over the impact instant gives M(q̇⁺ − q̇⁻) + Aᵀ𝓕 = 0 with A q̇⁺ = 0, hence

    𝓕 = (A M⁻¹ Aᵀ)⁻¹ A q̇⁻ = Λ_c ṙ⁻,        q̇⁺ = N_c q̇⁻,   N_c = I − M⁻¹Aᵀ(A M⁻¹ Aᵀ)⁻¹A
    E_loss = ½ q̇⁻ᵀ Aᵀ (A M⁻¹ Aᵀ)⁻¹ A q̇⁻ = ½ ṙ⁻ᵀ Λ_c ṙ⁻

N_c is the M-orthogonal projection onto N(A): of all velocities with A q̇ = 0 it is the one closest to q̇⁻
in the kinetic-energy metric. The same map is used by the simulator to project q̇ onto N(A) after each
step (it changes the energy least). It is computed through the Cholesky factor M = LLᵀ and an SVD of
Λ = A L⁻ᵀ, so redundant or singular A (rank r < m) use the pseudo-inverse (minimum-norm impulse).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import lapack as _lapack

from .linalg import ATOL, RTOL, cholesky_lower


@dataclass
class ImpactResult:
    """Post-impact velocity, the impulse 𝓕 (per constraint row), the energy lost and the rank used."""

    qdot_plus: np.ndarray
    impulse: np.ndarray
    energy_loss: float
    kinetic_before: float
    kinetic_after: float
    rank: int


_ONE = np.ones((1, 1))
_ONE.flags.writeable = False


def m_projection(M: np.ndarray, A: np.ndarray, qdot: np.ndarray, rtol: float = RTOL, atol: float = ATOL,
                 L: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """q̇⁺ = N_c q̇ = q̇ − M⁻¹Aᵀ(AM⁻¹Aᵀ)⁺Aq̇ and the impulse 𝓕 = (AM⁻¹Aᵀ)⁺Aq̇ (lecture "Contact Dynamics").

    Returns (q̇⁺, 𝓕, rank). With L = chol(M), Λ = AL⁻ᵀ: M⁻¹Aᵀ(AM⁻¹Aᵀ)⁺ = L⁻ᵀΛ⁺, (AM⁻¹Aᵀ)⁺ = (ΛΛᵀ)⁺."""
    m = A.shape[0]
    if m == 0:
        return qdot.copy(), np.zeros(0), 0
    L = cholesky_lower(M, "mass matrix is not positive definite (impulse map)") if L is None else L
    X, _ = _lapack.dtrtrs(L, A.T, lower=1)     # L⁻¹Aᵀ = Λᵀ
    Lam = X.T                                   # Λ = A L⁻ᵀ  (m × n)
    if m == 1:
        sig = math.sqrt(float(Lam[0].dot(Lam[0])))
        U, s, Vt = _ONE, np.array([sig]), Lam / sig if sig > 0 else Lam
    else:
        U, s, Vt, info = _lapack.dgesdd(Lam, full_matrices=0)
        if info != 0:
            U, s, Vt = np.linalg.svd(Lam, full_matrices=False)
    r = int(np.count_nonzero(s > max(rtol * s[0], atol))) if s.size else 0
    if r == 0:
        return qdot.copy(), np.zeros(m), 0
    c = A.dot(qdot).dot(U[:, :r])                # coordinates of A q̇ in the range of Λ
    dv = (c / s[:r]).dot(Vt[:r])                # Λ⁺ A q̇
    qdot_plus = qdot - _lapack.dtrtrs(L, dv, lower=1, trans=1)[0]  # q̇ − L⁻ᵀ Λ⁺ A q̇
    impulse = U[:, :r].dot(c / s[:r] ** 2)      # (ΛΛᵀ)⁺ A q̇
    return qdot_plus, impulse, r


def impact(M: np.ndarray, A: np.ndarray, qdot_minus: np.ndarray, rtol: float = RTOL,
           atol: float = ATOL) -> ImpactResult:
    """Apply the impulse map q̇⁺ = N_c q̇⁻ and report the kinetic energy lost (equal, up to round-off,
    to ½ q̇⁻ᵀAᵀ(AM⁻¹Aᵀ)⁻¹Aq̇⁻ when A has full row rank)."""
    qp, imp, r = m_projection(M, A, qdot_minus, rtol, atol)
    k0 = 0.5 * float(qdot_minus @ M @ qdot_minus)
    k1 = 0.5 * float(qp @ M @ qp)
    return ImpactResult(qdot_plus=qp, impulse=imp, energy_loss=k0 - k1, kinetic_before=k0,
                        kinetic_after=k1, rank=r)


def predicted_energy_loss(M: np.ndarray, A: np.ndarray, qdot_minus: np.ndarray) -> float:
    """½ q̇⁻ᵀAᵀ(AM⁻¹Aᵀ)⁺Aq̇⁻ (lecture "Contact Dynamics", energy loss), via the pseudo-inverse."""
    if A.shape[0] == 0:
        return 0.0
    Wm = A @ np.linalg.solve(M, A.T)
    rd = A @ qdot_minus
    return 0.5 * float(rd @ np.linalg.pinv(Wm, rcond=1e-12, hermitian=True) @ rd)
