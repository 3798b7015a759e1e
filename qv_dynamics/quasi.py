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
rotated onto the previous one by orthogonal Procrustes, V ← V·polar(VᵀV_prev) (:mod:`.quasi_basis`:
without an SVD in the steady state). When the rank changes the basis is re-seeded and ``rank_changed`` is
set.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg.lapack import dpotrf, dtrtri

from .errors import DimensionError, NotPositiveDefiniteError, StateMismatchError, as_vector
from .kernels.loader import load
from .linalg import ATOL, RTOL, kernel_vector, singular_values, svd_full
from .model import DynamicsTerms
from .quasi_basis import ALIGNED_MIN_N, aligned_basis, svd_basis


@dataclass
class QuasiState:
    """Quasi-variables at one state. Names follow SPEC §4; ``lambda_`` and the u's need ``tau``."""

    Q: np.ndarray
    Qinv: np.ndarray
    Qdot: np.ndarray
    v: np.ndarray
    Lambda: np.ndarray
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
    _U1: np.ndarray | None = field(default=None, repr=False)
    _S: np.ndarray | None = field(default=None, repr=False)
    _R: np.ndarray | None = field(default=None, repr=False)   # Λᵀ = ZR (aligned bases): S from R
    _Vt: np.ndarray | None = field(default=None, repr=False)  # [V₁ᵀ; V₂ᵀ]
    _V: np.ndarray | None = field(default=None, repr=False)   # [V₁ V₂], C-contiguous (the kernel's input)
    _UR: np.ndarray | None = field(default=None, repr=False)  # left singular vectors of R (the kernel's warm start)

    @property
    def S(self) -> np.ndarray:
        """The r non-zero singular values of Λ (eq. 11), descending (computed on first use when the basis
        came from :func:`aligned_basis`)."""
        if self._S is None:
            if self._R is not None:
                self._S = singular_values(self._R)[:self.rank]
            else:
                self._singular()
        return self._S

    @property
    def U1(self) -> np.ndarray:
        """Left singular vectors of Λ for S (m × r, eq. 11; computed on first use, like :attr:`S`)."""
        if self._U1 is None:
            self._singular()
        return self._U1

    def _singular(self) -> None:
        r = self.rank
        if self.Lambda.shape[0]:
            U, s, _ = svd_full(self.Lambda)
            self._U1 = U[:, :r]
            if self._S is None:
                self._S = s[:r]
        else:
            self._U1, self._S = np.zeros((0, 0)), np.zeros(0) if self._S is None else self._S

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
                    rtol: float = RTOL, atol: float = ATOL, gauge: str = "auto") -> QuasiState:
    """Decompose the state of ``terms`` into quasi-velocities and quasi-forces (SPEC §2).

    With X = Q⁻¹CQ⁻ᵀ: Q⁻¹ṀQ⁻ᵀ = X + Xᵀ (Ṁ = C + Cᵀ), Q⁻¹Q̇ = L = Φ(X + Xᵀ), Q̇ = QL,
    Γ = X − Lᵀ (eq. 7b) and Q̇ᵀq̇ = Lᵀv, which saves the explicit Ṁ and Q̇ products.

    ``qdot`` may be omitted (``terms.qdot`` is used); if given it must equal ``terms.qdot``
    (StateMismatchError otherwise: C and Ȧq̇ in ``terms`` belong to that velocity).

    ``gauge``: how V₁, V₂ are aligned to ``prev``'s (:mod:`.quasi_basis`, the same bases to rounding):
    ``"aligned"`` without an SVD (QR + Newton–Schulz) whenever ``prev`` has full row rank, ``"svd"`` by the
    SVD of Λ and SVD polar factors (the reference), ``"auto"`` the first for n ≥ ALIGNED_MIN_N (where the
    (n − r)² polar SVD dominates) or one row (closed form), the second otherwise (a 7-DoF arm with a 3-D
    contact: a few µs either way); and with ``"auto"`` a steady-state sample (``prev`` of full row rank m, the
    same n) goes through one compiled call (:func:`compiled_decompose`: the aligned gauge's equations, the
    quasi-forces and σ(Λ) included) when numba and its cache are usable."""
    M = terms.M
    n = M.shape[0]
    qdot = terms.check_qdot(qdot)
    _require_coriolis(terms)
    if prev is not None and gauge == "auto":
        fast = compiled_decompose(terms, qdot, prev, rtol, atol, tau)
        if fast is not None:
            return fast
    Q, Qinv = cholesky_factor(M)
    QinvT = Qinv.T
    v = qdot.dot(Q)                    # Qᵀq̇ (eq. 6a)
    A = terms.A
    Lam = A.dot(QinvT) if A.shape[0] else np.zeros((0, n))   # Λ = AQ⁻ᵀ (eq. 9)
    basis = None
    if prev is not None and (gauge == "aligned" or gauge == "auto" and (n >= ALIGNED_MIN_N or A.shape[0] == 1)):
        basis = aligned_basis(Lam, prev, rtol, atol)
    elif gauge not in ("auto", "svd", "aligned"):
        raise ValueError(f"gauge: 'auto', 'svd' or 'aligned', got {gauge!r}")
    if basis is None:
        basis = svd_basis(Lam, prev, rtol, atol)
    Vt, r, W1, U1, S, rank_changed, R = basis
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
    qs = QuasiState(Q=Q, Qinv=Qinv, Qdot=Qdot, v=v, Lambda=Lam, V1=V1, V2=V2, rank=r,
                    rank_changed=bool(rank_changed), Gamma=Gamma, Gamma_v=Gamma_v, Gamma_xi_vr=Gamma_xi_vr,
                    v_r=v_r, kinetic_energy=0.5 * float(v.dot(v)), W1=W1,
                    _U1=U1, _S=S, _R=R, _Vt=Vt)
    return _with_forces(qs, terms, tau)


def _with_forces(qs: QuasiState, terms: DynamicsTerms, tau) -> QuasiState:
    """The quasi-forces of ``tau`` (eq. 6b, 18b, 20, 21): u, u_v, u_ξ, ξ, λ, Aᵀλ, v̇_r; ``qs`` unchanged
    when ``tau`` is None."""
    if tau is not None:
        n, r, Vt = qs.Q.shape[0], qs.rank, qs._Vt
        tau = as_vector("tau", tau, n)
        u = qs.Qinv.dot(tau - terms.g)
        Vu = Vt.dot(u)
        Gamma_xi_vr, W1, Q, Gamma_v, v_r = qs.Gamma_xi_vr, qs.W1, qs.Q, qs.Gamma_v, qs.v_r
        xi = Vu[:r] + Gamma_xi_vr
        qs.u = u
        qs.u_xi = Vu[:r]
        qs.u_v = Vu[r:]
        qs.xi = xi
        qs.lambda_ = xi.dot(W1)
        qs.constraint_force = Q.dot(xi.dot(Vt[:r]))
        qs.vr_dot = Vu[r:] - Gamma_v.dot(v_r)
    return qs


_NO_TAU = np.zeros(0)  # the kernel's "no τ" (size 0: nothing is ever written to it)


def compiled_decompose(terms: DynamicsTerms, qdot: np.ndarray, prev: QuasiState, rtol: float, atol: float,
                       tau=None) -> QuasiState | None:
    """The steady-state sample (``prev`` of full row rank m, same n), quasi-forces of ``tau`` included, by
    :func:`.kernels.quasi.decompose`; None when the kernel is unavailable or declines (the numpy path then
    decides, raises or re-seeds)."""
    A = terms.A
    m, n = A.shape
    if prev.rank != m or prev.V2.shape[0] != n:
        return None
    kernel = compiled_kernel()
    if kernel is None:
        return None
    Vp, Up = warm_start(prev)
    t = _NO_TAU if tau is None else kernel_vector(as_vector("tau", tau, n))
    qdot = kernel_vector(qdot)
    out = np.empty((6 * n + 4 * m, n))
    vec = np.empty(6 * n + 2 * m)
    try:
        if kernel(terms.M, terms.C, A, terms.Adot_qdot, qdot, Vp, Up, terms.g, t, m, rtol, atol, out, vec):
            return None
    except TypeError:  # terms built by hand with arrays of another layout or dtype (e.g. a Fortran-ordered M)
        return None
    qs = QuasiState(**state_views(out, vec, n, m))
    qs.kinetic_energy = 0.5 * float(qs.v.dot(qs.v))
    if tau is not None:
        for name, arr in force_views(vec, n, m).items():
            setattr(qs, name, arr)
    return qs


def warm_start(prev: QuasiState) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's warm start from the previous state: [V₁ V₂] (C-ordered) and the left singular vectors of
    its R (or I)."""
    Vp = prev._V
    if Vp is None:
        Vp = prev._V = np.ascontiguousarray(np.hstack((prev.V1, prev.V2)))
    return Vp, (prev._UR if prev._UR is not None else np.eye(prev.rank))


def state_views(out: np.ndarray, vec: np.ndarray, n: int, m: int) -> dict:
    """QuasiState fields (rank m, rank unchanged, kinetic energy to be set) as views of the outputs of
    :func:`.kernels.quasi.decompose` (its docstring gives the layout)."""
    V = out[4 * n:5 * n]
    return dict(Q=out[:n], Qinv=out[n:2 * n], Qdot=out[2 * n:3 * n], v=vec[:n], Lambda=out[6 * n:6 * n + m],
                V1=V[:, :m], V2=V[:, m:], rank=m, rank_changed=False, Gamma=out[3 * n:4 * n],
                Gamma_v=out[5 * n:6 * n - m, :n - m], Gamma_xi_vr=vec[2 * n - m:2 * n], v_r=vec[n:2 * n - m],
                kinetic_energy=0.0, W1=out[6 * n + m:6 * n + 2 * m, :m], _S=vec[6 * n + m:],
                _R=out[6 * n + 2 * m:6 * n + 3 * m, :m], _Vt=V.T, _V=V, _UR=out[6 * n + 3 * m:, :m])


def force_views(vec: np.ndarray, n: int, m: int) -> dict:
    """The quasi-forces of τ (u, u_ξ, u_v, ξ, λ, Aᵀλ, v̇_r) as views of the kernel's ``vec``."""
    return dict(u=vec[2 * n:3 * n], u_xi=vec[3 * n:3 * n + m], u_v=vec[3 * n + m:4 * n], xi=vec[4 * n:4 * n + m],
                lambda_=vec[4 * n + m:4 * n + 2 * m], constraint_force=vec[4 * n + 2 * m:5 * n + 2 * m],
                vr_dot=vec[5 * n + 2 * m:6 * n + m])


def compiled_kernel():
    """The compiled decomposition kernel (:func:`.kernels.quasi.decompose`), or None: numba missing, its cache
    unusable, or ``QV_COMPILED=0`` (:func:`qv_dynamics.kernels.loader.load`; the reason in ``loader.STATUS``)."""
    return load("qv_dynamics.kernels.quasi", "decompose")


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
