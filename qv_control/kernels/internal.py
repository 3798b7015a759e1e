"""The passive-joint projector and the internal-force basis in compiled (numba) code, without an SVD: both reuse
a rank decision that holds while the contact set does, certified each tick by a factorization
(paper `aghili-projection-operator` eq. 56–64; numpy twins :func:`qv_control.laws.passive.passive_projector` and
:func:`qv_control.laws.internal_force.internal_force_basis`).

- **Passive projector.** With Y = (I − P)_p (the passive rows of I − P), the numpy path forms I + H = I −
  (I − P)Y⁺S_p from an SVD of Y and checks R((I−B)P) ⊆ R((I−B)(I−P)). When Y has full row rank, YYᵀ = (I − P)_pp
  =: G (I − P is a symmetric projector), Y⁺ = YᵀG⁻¹, (I − P)Y⁺ = YᵀG⁻¹ and the range inclusion holds exactly
  (YY⁺ = I): :func:`passive_apply` applies x ↦ x − YᵀG⁻¹x_p by a Cholesky factor G = LLᵀ, whose
  σ_min(L) = σ_min(Y) ≥ 1/‖L⁻¹‖_F > max(rtol·‖Y‖_F, atol) certifies the rank (else the numpy path decides, and
  raises when the joints cannot be controlled).
- **Internal forces.** With A of full row rank m (certified by the projection's QR), R(A) = ℝᵐ and
  𝓔 = N(A_pᵀ): a Householder QR A_p = Q_f[R_p; 0] whose R_p is certified of full column rank
  (1/‖R_p⁻¹‖_F > max(rtol·‖A‖_F, atol), the numpy path's rule relative to σ₁(A)) gives E = the last m − n_p
  columns of Q_f (every joint actuated: E = I). E is another orthonormal basis of 𝓔 than the numpy path's SVD
  one: EEᵀ, λ = λ₀ + Ez and the torque AᵀE(z − Eᵀλ_m) are the same; z itself is in its own coordinates.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from qv_dynamics.kernels.quasi_linalg import cholesky, full_rank
from qv_dynamics.kernels.sim_linalg import chol_solve

from .laws import householder


@njit(cache=True)
def passive_apply(P, pas, rtol, atol, base, motion) -> bool:
    """base ← (I + H)base, motion ← (I + H)motion, their passive entries zero (module doc); False (nothing
    changed) when Y is not certified of full row rank."""
    npas = pas.shape[0]
    if npas == 0:
        return True
    G = np.empty((npas, npas))
    tr = 0.0
    for a in range(npas):
        for b in range(npas):
            G[a, b] = (1.0 if a == b else 0.0) - P[pas[a], pas[b]]
        tr += G[a, a]
    Lc = np.zeros((npas, npas))
    if not cholesky(G, Lc):
        return False
    Ri = np.zeros((npas, npas))
    if not full_rank(np.ascontiguousarray(Lc.T), Ri, math.sqrt(max(tr, 0.0)), rtol, atol):
        return False
    n = P.shape[0]
    xp = np.empty(npas)
    for x in (base, motion):
        for a in range(npas):
            xp[a] = x[pas[a]]
        y = chol_solve(Lc, xp)
        for j in range(n):
            s = 0.0
            for a in range(npas):
                s += ((1.0 if pas[a] == j else 0.0) - P[pas[a], j]) * y[a]
            x[j] -= s
        for a in range(npas):
            x[pas[a]] = 0.0
    return True


@njit(cache=True)
def internal_basis(A, pas, rtol, atol):
    """(ok, E): the internal-force basis of the module doc (m × (m − n_p)); not ok when A_p is not certified of
    full column rank (the numpy path decides)."""
    m, n = A.shape
    npas = pas.shape[0]
    if npas == 0:
        return True, np.eye(m)
    if m < npas:
        return False, np.zeros((m, 0))
    Ap = np.empty((m, npas))
    af = 0.0
    for i in range(m):
        for j in range(n):
            af += A[i, j] * A[i, j]
        for a in range(npas):
            Ap[i, a] = A[i, pas[a]]
    Qf = np.empty((m, m))
    R = np.zeros((npas, npas))
    householder(Ap, Qf, R)
    Ri = np.zeros((npas, npas))
    if not full_rank(R, Ri, math.sqrt(af), rtol, atol):
        return False, np.zeros((m, 0))
    return True, np.ascontiguousarray(Qf[:, npas:])


def warm() -> None:
    """Nothing to run: the helpers compile inside the tick kernels."""
