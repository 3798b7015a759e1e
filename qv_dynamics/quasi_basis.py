"""The bases V₁ (row space) and V₂ (null space) of Λ = AQ⁻ᵀ (paper `aghili-quasi-velocities` eq. 9–12) in
the continuous gauge of SPEC §2: each new basis is the one closest to the previous one,

    V₁ ← V₁·polar(V₁ᵀV₁_prev),   V₂ ← V₂·polar(V₂ᵀV₂_prev)      (orthogonal Procrustes)

Two ways to the same bases:

- :func:`svd_basis` (the reference, and the seed when there is no previous basis or the rank changed): the
  full SVD Λ = USVᵀ, rank r = #{σᵢ > max(rtol·σ₁, atol)}, then the two Procrustes rotations by SVD.
- :func:`aligned_basis` (the steady state, previous basis of full row rank m): no SVD at all. Λᵀ = ZR
  (thin Householder QR); full rank is certified by σ_min(R) ≥ 1/‖R⁻¹‖_F > max(rtol·‖R‖_F, atol) ≥
  max(rtol·σ₁, atol) (else the SVD path decides); V₁ = Z·polar(ZᵀV₁_prev); and, as V₂·polar(V₂ᵀV₂_prev)
  = Y(YᵀY)^-½ = polar(Y) with Y = (I − ZZᵀ)V₂_prev for *any* orthonormal V₂ of the null space, V₂ needs no
  null-space basis of its own. The polar factors of these nearly orthonormal matrices come from the
  Newton–Schulz iteration X ← X(3I − XᵀX)/2 (quadratic: two steps at a 1 kHz sample rate); W₁ = V₁ᵀΛ⁺
  = (R⁻¹P₁)ᵀ with Λ⁺ = ZR⁻ᵀ. The bases agree with the SVD path's to rounding (test_quasi_fast.py).

Both return ``(Vt, r, W1, U1, S, rank_changed, R)``: Vt = [V₁ᵀ; V₂ᵀ] (n × n), W₁ = V₁ᵀΛ⁺ (r × m), U1/S
the thin SVD factors (None from :func:`aligned_basis`: :class:`~qv_dynamics.quasi.QuasiState` computes them
on first use, S from R (m × m, Λᵀ = ZR: the same singular values, an SVD of m × m instead of m × n)).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg.lapack import dgeqrf, dorgqr, dtrtri

from .linalg import identity, svd_full, svd_thin

_PLUS_ONE = np.ones((1, 1))
_MINUS_ONE = -np.ones((1, 1))
_PLUS_ONE.flags.writeable = _MINUS_ONE.flags.writeable = False

#: Newton–Schulz starts only when ‖XᵀX − I‖_F is below this (else the SVD path: a jump, not a step) …
NS_START = 0.5
#: … and stops one step after ‖XᵀX − I‖_F < NS_DONE (the last step leaves ≈ 0.4·NS_DONE² ≪ eps)
NS_DONE = 1e-8
#: matrices with at most this many entries take their polar factor from a thin SVD instead
SMALL = 64
#: quasi_decompose(gauge="auto") aligns without an SVD from this many velocities on (and for one row)
ALIGNED_MIN_N = 13


_UPPER: dict[int, np.ndarray] = {}


def _upper(m: int) -> np.ndarray:
    """Cached mask of the upper triangle (diagonal included) of an m × m matrix."""
    mask = _UPPER.get(m)
    if mask is None:
        mask = _UPPER[m] = np.triu(np.ones((m, m)))
        mask.flags.writeable = False
    return mask


def polar(X: np.ndarray) -> np.ndarray:
    """Orthogonal polar factor of a square matrix (closest rotation/reflection, Procrustes) by SVD."""
    if X.shape[0] == 1:  # 1×1 (one constraint row): the sign, exactly what the SVD below returns
        x = float(X[0, 0])
        if x > 0.0:
            return _PLUS_ONE
        if x < 0.0:
            return _MINUS_ONE
    W, _, Zt = svd_full(X)
    return W.dot(Zt)


def near_polar(X: np.ndarray, max_iter: int = 8) -> np.ndarray | None:
    """Orthogonal polar factor X(XᵀX)^-½ of a p × k matrix (p ≥ k) with nearly orthonormal columns by the
    Newton–Schulz iteration X ← X − ½X(XᵀX − I); None when ‖XᵀX − I‖_F ≥ NS_START or no convergence.
    At most SMALL entries: by a thin SVD, None when σ_min ≤ 1 − NS_START (far from orthonormal too)."""
    p, k = X.shape
    if p * k <= SMALL:  # a few entries: one small SVD costs less than the iteration's numpy calls
        if p == 1:
            return polar(X) if abs(X[0, 0]) > 1.0 - NS_START else None
        W, s, Zt = svd_thin(X)
        return W.dot(Zt) if s[-1] > 1.0 - NS_START else None
    eye = identity(k)
    for _ in range(max_iter):
        E = X.T.dot(X)
        E -= eye
        ef = E.reshape(-1)
        e = math.sqrt(ef.dot(ef))
        if not e < NS_START:  # also NaN
            return None
        if e == 0.0:
            return X
        X = X - 0.5 * X.dot(E)
        if e < NS_DONE:
            return X
    return None


def svd_basis(Lam: np.ndarray, prev, rtol: float, atol: float):
    """Bases by the full SVD of Λ (module doc), rotated onto ``prev``'s when the rank held."""
    m, n = Lam.shape
    if m:
        U, s, Vt = svd_full(Lam)
        sl = s.tolist()
        thr = max(rtol * sl[0], atol) if sl else atol
        r = sum(1 for x in sl if x > thr)
    else:
        U, s, Vt = np.zeros((0, 0)), np.zeros(0), np.eye(n)
        r = 0
    U1, S = U[:, :r], s[:r]
    W1 = (U1 / S).T if r else np.zeros((0, m))  # V₁ᵀΛ⁺ = S⁻¹U₁ᵀ for the SVD basis (r × m)
    rank_changed = prev is not None and (prev.rank != r or prev.V2.shape[0] != n)
    if prev is not None and not rank_changed:
        # gauge: V₂ ← V₂R₂, V₁ ← V₁R₁ with R = polar(VᵀV_prev), applied to the rows of Vᵀ
        if r < n:  # (Vt is LAPACK's fresh output: updated in place)
            Vt[r:] = polar(Vt[r:].dot(prev.V2)).T.dot(Vt[r:])
        if r:
            R1 = polar(Vt[:r].dot(prev.V1))
            Vt[:r] = R1.T.dot(Vt[:r])
            W1 = R1.T.dot(W1)
    return Vt, r, W1, U1, S, bool(rank_changed), None


def aligned_basis(Lam: np.ndarray, prev, rtol: float, atol: float):
    """Bases aligned to ``prev``'s without an SVD (module doc); None when the SVD path must decide: ``prev``
    not of full row rank m, full rank not certified, or the bases moved too far for Newton–Schulz."""
    m, n = Lam.shape
    V2p = prev.V2
    if prev.rank != m or V2p.shape[0] != n:
        return None
    if m == 1:
        return _aligned_one_row(Lam, prev, rtol, atol)
    V = np.empty((n, n))   # [V₁ V₂]
    if m:
        qr, tau, _, info = dgeqrf(Lam.T)                    # Λᵀ = ZR
        if info != 0:
            return None
        R = qr[:m] * _upper(m)
        Rinv, info = dtrtri(R, lower=0)
        lf, rif = Lam.reshape(-1), Rinv.reshape(-1)
        # σ_min ≥ 1/‖R⁻¹‖_F and σ₁ ≤ ‖R‖_F = ‖Λ‖_F: the SVD path's rank test holds with a margin
        if info != 0 or not 1.0 > math.sqrt(rif.dot(rif)) * max(rtol * math.sqrt(lf.dot(lf)), atol):
            return None
        Z, _, info = dorgqr(qr, tau, overwrite_a=1)
        if info != 0:
            return None
        P1 = near_polar(Z.T.dot(prev.V1))
        if P1 is None:
            return None
        V[:, :m] = Z.dot(P1)
        Y = V2p - Z.dot(Z.T.dot(V2p))                       # (I − ZZᵀ)V₂_prev
        W1 = Rinv.dot(P1).T                                 # V₁ᵀΛ⁺ = P₁ᵀZᵀ·ZR⁻ᵀ
    else:
        Y, W1, R = V2p, np.zeros((0, 0)), None
    if m < n:
        V2 = near_polar(Y)
        if V2 is None:
            return None
        V[:, m:] = V2
    return V.T, m, W1, None, None, False, R if m else None


def _aligned_one_row(Lam: np.ndarray, prev, rtol: float, atol: float):
    """:func:`aligned_basis` for one row (a 1-D contact, the table task) in closed form, no LAPACK call:
    σ = ‖Λ‖, z = Λᵀ/σ, V₁ = ±z (the sign of zᵀV₁_prev), W₁ = ±1/σ; with b = V₂_prevᵀz, Y = V₂_prev − zbᵀ
    has YᵀY = I − bbᵀ, so V₂ = Y(I − bbᵀ)^-½ = Y + (γ/β²)(Yb)bᵀ, β² = bᵀb, γ = (1 − β²)^-½ − 1."""
    lam = Lam[0]
    sig = math.sqrt(lam.dot(lam))
    if not sig > max(rtol * sig, atol):
        return None
    z = lam / sig
    x = float(z.dot(prev.V1[:, 0]))
    if not abs(x) > 1.0 - NS_START:
        return None
    n = z.shape[0]
    V = np.empty((n, n))
    V[:, 0] = z if x > 0.0 else -z
    V2p = prev.V2
    b = z.dot(V2p)
    b2 = float(b.dot(b))
    if not b2 < NS_START:
        return None
    Y = V2p - np.multiply.outer(z, b)
    # γ/β² without cancellation (γ = expm1(−½·log1p(−β²)) ≈ β²/2); the limit ½ at β = 0
    ratio = math.expm1(-0.5 * math.log1p(-b2)) / b2 if b2 > 0.0 else 0.5
    Y += np.multiply.outer(Y.dot(b) * ratio, b)
    V[:, 1:] = Y
    return V.T, 1, np.array([[(1.0 if x > 0.0 else -1.0) / sig]]), None, np.array([sig]), False, None
