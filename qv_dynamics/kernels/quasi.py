"""The quasi-velocity decomposition (:func:`qv_dynamics.quasi.quasi_decompose`) in one compiled (numba) call
for the steady state: the previous basis has full row rank m and the new one is aligned to it
(:func:`qv_dynamics.quasi_basis.aligned_basis`, same equations), so a 1 kHz sample costs one call instead of
~40 numpy/LAPACK calls, for an arm (n = 7) and a humanoid (n = 38) alike:

    M = QQᵀ (Cholesky), v = Qᵀq̇, Λ = AQ⁻ᵀ, Λᵀ = ZR (Gram–Schmidt, twice), V₁ = Z·polar(ZᵀV₁_prev),
    V₂ = polar((I − ZZᵀ)V₂_prev), W₁ = V₁ᵀΛ⁺ = (R⁻¹P₁)ᵀ, X = Q⁻¹CQ⁻ᵀ, L = Φ(X + Xᵀ), Q̇ = QL,
    Γ = X − Lᵀ, Γ_v = V₂ᵀΓV₂, Γ_ξv_r = W₁(Ȧq̇ − ΛLᵀv) − V₁ᵀΓv

and, when τ is given, the quasi-forces u = Q⁻¹(τ − g), [u_ξ; u_v] = [V₁ V₂]ᵀu, ξ = u_ξ + Γ_ξv_r,
λ = W₁ᵀξ, Aᵀλ = QV₁ξ, v̇_r = u_v − Γ_v v_r (eq. 6b, 18b, 20, 21). The polar factors come from the
Newton–Schulz iteration, as ``near_polar``; V₁ = Z·polar(ZᵀV₁_prev) does not depend on which orthonormal Z
spans the row space, so Gram–Schmidt gives the QR path's basis to rounding.

Small triangular work (Cholesky, Q⁻¹, Q⁻¹(τ − g)) runs in loops over contiguous rows; the n³ products
(Q⁻¹CQ⁻ᵀ, QL, V₂ᵀΓV₂, the Newton–Schulz steps) call BLAS dgemm (:func:`.quasi_linalg.mmt`: transposes as
flags, results written in place, no copies): for n = 38 that is where LAPACK's own factorizations lose (dpotrf,
dtrtri and the 12 × 38 SVD cost more in calls and small blocks than these products in arithmetic).

The kernel returns a status instead of raising: OK, or FALLBACK when the numpy path must decide (M not
positive definite, full rank not certified by σ_min(R) ≥ 1/‖R⁻¹‖_F > max(rtol·‖Λ‖_F, atol), or the bases
moved too far for Newton–Schulz); the caller then runs the reference path, which raises or re-seeds.

:func:`sample` is the same decomposition fed straight from Pinocchio's ``Data`` after its Coriolis pass (C, J_w,
J̇_w, the composite inertias and the frame placements read through views; M, g and the constraint rows formed in
the call): one sample of :class:`qv_dynamics.quasi_sampler.QuasiSampler`, evaluate + decompose in one call after
Pinocchio's passes.

Compiled for their one signature into numba's disk cache at install (:func:`qv_dynamics.kernels.loader.warm_all`);
:mod:`qv_dynamics.quasi` and the sampler load them through :func:`qv_dynamics.kernels.loader.load` and keep the numpy
path when numba is missing, its cache unusable or not warmed.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .aligned import _basis
from .crb import mass_gravity
from .frame import constraint_rows
from .loader import kernel
from .quasi_linalg import SMALL_PRODUCT, cholesky_inverse, mmt, mv, singular_values

OK, FALLBACK = 0, 1

_SIG = ("int64(float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[::1], float64[::1], float64[:, ::1], "
        "float64[:, :], float64[::1], float64[::1], int64, float64, float64, float64[:, ::1], float64[::1])")


def vec_size(n: int, m: int) -> int:
    """Length of the kernel's vector output (layout in :func:`decompose`)."""
    return 6 * n + 2 * m


@njit(cache=True)
def _sandwich(Qi, C, W, X) -> None:
    """X = Q⁻¹CQ⁻ᵀ in loops over the triangle of Q⁻¹ (for a small n; W = Q⁻¹C scratch)."""
    n = Qi.shape[0]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for t in range(i + 1):
                s += Qi[i, t] * C[t, j]
            W[i, j] = s
    for i in range(n):
        for j in range(n):
            s = 0.0
            for t in range(j + 1):
                s += W[i, t] * Qi[j, t]
            X[i, j] = s


@njit(cache=True)
def _lower_product(Q, L, Qd) -> None:
    """Qd = QL of two lower-triangular matrices, in loops (for a small n)."""
    n = Q.shape[0]
    for i in range(n):
        for j in range(n):
            s = 0.0
            for t in range(j, i + 1):
                s += Q[i, t] * L[t, j]
            Qd[i, j] = s


@njit(cache=True)
def _gamma(Q, Qi, C, G, Qd):
    """X = Q⁻¹CQ⁻ᵀ, L = Φ(X + Xᵀ) (returned), Γ = X − Lᵀ into G, Q̇ = QL into Qd; for a small n in loops over the
    triangles of Q⁻¹, L and Q (n³/2 + n³/2 + n³/6 multiply-adds), above in BLAS."""
    n = Q.shape[0]
    W, X = np.empty((n, n)), np.empty((n, n))
    small = n * n * n < SMALL_PRODUCT
    if small:
        _sandwich(Qi, C, W, X)
    else:
        mmt(False, False, 1.0, Qi, C, 0.0, W)
        mmt(False, True, 1.0, W, Qi, 0.0, X)                    # Q⁻¹CQ⁻ᵀ
    L = np.zeros((n, n))
    for i in range(n):
        for j in range(i):
            L[i, j] = X[i, j] + X[j, i]
        L[i, i] = X[i, i]
    for i in range(n):
        for j in range(n):
            G[i, j] = X[i, j] - L[j, i]
    if small:
        _lower_product(Q, L, Qd)
    else:
        mmt(False, False, 1.0, Q, L, 0.0, Qd)
    return L


@njit(cache=True)
def _forces(Q, Qi, V, W1, Gv, g, tau, vec, n, m) -> None:
    """u = Q⁻¹(τ − g), [u_ξ; u_v] = Vᵀu, ξ = u_ξ + Γ_ξv_r, λ = W₁ᵀξ, Aᵀλ = QV₁ξ, v̇_r = u_v − Γ_v v_r."""
    k = n - m
    f = tau - g
    u, Vu = vec[2 * n:3 * n], vec[3 * n:4 * n]
    for i in range(n):  # forward substitution with the inverse already at hand
        s = 0.0
        for j in range(i + 1):
            s += Qi[i, j] * f[j]
        u[i] = s
    Vu[:] = mv(V.T, u)
    xi = vec[4 * n:4 * n + m]
    for a in range(m):
        xi[a] = Vu[a] + vec[2 * n - m + a]
    lam, cf, vrd = vec[4 * n + m:4 * n + 2 * m], vec[4 * n + 2 * m:5 * n + 2 * m], vec[5 * n + 2 * m:6 * n + m]
    w = np.zeros(n)
    for a in range(m):
        s = 0.0
        for i in range(m):
            s += xi[i] * W1[i, a]
        lam[a] = s
        for i in range(n):
            w[i] += V[i, a] * xi[a]
    for i in range(n):
        s = 0.0
        for j in range(i + 1):
            s += Q[i, j] * w[j]
        cf[i] = s
    vr = vec[n:2 * n - m]
    for a in range(k):
        s = Vu[m + a]
        for b in range(k):
            s -= Gv[a, b] * vr[b]
        vrd[a] = s


@kernel(_SIG)
def decompose(M, C, A, ad, qdot, Vp, Up, g, tau, m, rtol, atol, out, vec) -> int:
    """:func:`decompose_core` as one compiled entry point."""
    return decompose_core(M, C, A, ad, qdot, Vp, Up, g, tau, m, rtol, atol, out, vec, True)


@njit(cache=True)
def decompose_core(M, C, A, ad, qdot, Vp, Up, g, tau, m, rtol, atol, out, vec, full) -> int:
    """One steady-state sample. In: M, C (n × n), A (m × n), Ȧq̇, q̇, Vp = [V₁ V₂]_prev (n × n, rank m), Up (m × m:
    the previous sample's U of ``singular_values``, or I), g, τ (empty: no forces). Out, by rows of ``out``
    ((6n + 4m) × n): Q, Q⁻¹, Q̇, Γ, V = [V₁ V₂], Γ_v (top-left (n − m)²), Λ (m rows), W₁, R and U (m rows
    each, first m columns); ``vec`` (6n + 2m): v, v_r (n − m),
    Γ_ξv_r (m), u, [u_ξ; u_v], ξ (m), λ (m), Aᵀλ (n), v̇_r (n − m) (these six when τ is given), σ(Λ) = σ(R)
    (m, descending). ``full`` False (a law's tick): neither Γ_v nor σ(Λ) (the law forms Γ_v v_r itself)."""
    n = M.shape[0]
    Q, Qi, Qd, G = out[:n], out[n:2 * n], out[2 * n:3 * n], out[3 * n:4 * n]
    V, Gv_, Lam = out[4 * n:5 * n], out[5 * n:6 * n], out[6 * n:6 * n + m]
    W1, R = out[6 * n + m:6 * n + 2 * m, :m], out[6 * n + 2 * m:6 * n + 3 * m, :m]
    R[:] = 0.0
    if not cholesky_inverse(M, Q, Qi):
        return FALLBACK
    v = vec[:n]
    v[:] = 0.0
    for i in range(n):  # v = Qᵀq̇
        qi = qdot[i]
        for j in range(i + 1):
            v[j] += Q[i, j] * qi
    if m:
        mmt(False, True, 1.0, A, Qi, 0.0, Lam)              # Λ = AQ⁻ᵀ
    ok, V2 = _basis(Lam, Vp, rtol, atol, R, V, W1)
    if not ok:
        return FALLBACK
    L = _gamma(Q, Qi, C, G, Qd)
    k = n - m
    if k and not full:
        vec[n:2 * n - m] = mv(V2.T, v)
    elif k:
        GV2 = np.empty((n, k))
        mmt(False, False, 1.0, G, V2, 0.0, GV2)
        mmt(True, False, 1.0, V2, GV2, 0.0, Gv_[:k, :k])     # Γ_v = V₂ᵀΓV₂
        vec[n:2 * n - m] = mv(V2.T, v)
    if m:
        Gvv = mv(G, v)
        Ltv = mv(L.T, v)
        drift = ad - mv(Lam, Ltv)                           # Ȧq̇ − ΛQ̇ᵀq̇
        for a in range(m):
            s = 0.0
            for i in range(m):
                s += W1[a, i] * drift[i]
            for i in range(n):
                s -= V[i, a] * Gvv[i]
            vec[2 * n - m + a] = s                            # Γ_ξv_r = W₁(...) − V₁ᵀΓv
    if tau.shape[0] == n:
        _forces(Q, Qi, V, W1, Gv_[:k, :k], g, tau, vec, n, m)
    if m and full:
        U = out[6 * n + 3 * m:6 * n + 4 * m, :m]
        U[:] = Up
        singular_values(R, U, vec[6 * n + m:6 * n + 2 * m])
    return OK


#: Pinocchio's Data as the kernels read it (:class:`qv_dynamics.quasi_sampler.QuasiSampler` holds these views):
#: the composite inertias (joints × 10), the joint tree (joints × 3), the armature, g⃗, Cᵀ, J_w, J̇_w, the frame
#: placements; then the constraint plan: frame slots, their supporting columns, the rows
_DATA_SIG = ("float64[:, ::1], int64[:, ::1], float64[::1], float64[::1], float64[:, ::1], float64[::1, :], "
             "float64[::1, :], float64[:, ::1], int64[::1], int64[:, ::1], int64[:, ::1]")
_SAMPLE_SIG = (f"int64({_DATA_SIG}, float64[::1], float64[:, ::1], float64[:, :], float64[::1], float64, float64, "
               "float64[:, ::1], float64[::1], float64[:, ::1], float64[::1])")


@njit(cache=True)
def _fill_terms(Y, tree, armature, grav, Ct, Jw, dJw, oMf, fids, sup, rplan, qdot, T, tv) -> None:
    """The terms by rows of ``T`` ((2n + m) × n): M, C, A; ``tv`` (2n + m + 1): g, h = Cq̇ + g, Ȧq̇, (then ½vᵀv,
    written by :func:`sample`), from Pinocchio's Data after computeCoriolisMatrix and updateFramePlacements,
    read through views: M and g from the composite inertias Y and J_w (:func:`.crb.mass_gravity`),
    Ct = Cᵀ (a C-ordered view of Eigen's column-major ``data.C``), every frame placement (A, Ȧq̇ of the
    frame-constraint rows: :func:`qv_dynamics.kernels.frame.constraint_rows`)."""
    n = qdot.shape[0]
    m = rplan.shape[0]
    M, C, A = T[:n], T[n:2 * n], T[2 * n:]
    g, h, ad = tv[:n], tv[n:2 * n], tv[2 * n:2 * n + m]
    mass_gravity(Y, Jw, tree, armature, grav, M, g)
    for i in range(n):
        s = g[i]
        for j in range(n):
            c = Ct[j, i]
            C[i, j] = c
            s += c * qdot[j]
        h[i] = s
    if m:
        constraint_rows(Jw, dJw, oMf, fids, sup, rplan, qdot, A, ad)


_TERMS_SIG = f"int64({_DATA_SIG}, float64[::1], float64[:, ::1], float64[::1])"


@kernel(_TERMS_SIG)
def terms(Y, tree, armature, grav, Ct, Jw, dJw, oMf, fids, sup, rplan, qdot, T, tv) -> int:
    """:func:`_fill_terms` as one entry point (``ConstrainedSystem.evaluate``'s terms, no decomposition)."""
    _fill_terms(Y, tree, armature, grav, Ct, Jw, dJw, oMf, fids, sup, rplan, qdot, T, tv)
    return OK


@kernel(_SAMPLE_SIG)
def sample(Y, tree, armature, grav, Ct, Jw, dJw, oMf, fids, sup, rplan, qdot, Vp, Up, tau, rtol, atol, T, tv, out,
           vec) -> int:
    """One steady-state sample: the terms (:func:`_fill_terms`), then :func:`decompose` into ``out``, ``vec``
    (its layout) and ½vᵀv into ``tv[-1]``. Returns the decomposition's status."""
    n = qdot.shape[0]
    m = rplan.shape[0]
    _fill_terms(Y, tree, armature, grav, Ct, Jw, dJw, oMf, fids, sup, rplan, qdot, T, tv)
    status = decompose_core(T[:n], T[n:2 * n], T[2 * n:], tv[2 * n:2 * n + m], qdot, Vp, Up, tv[:n], tau, m, rtol,
                            atol, out, vec, True)
    e = 0.0
    for i in range(n):
        e += vec[i] * vec[i]
    tv[2 * n + m] = 0.5 * e
    return status


def warm() -> None:
    """Run the kernel for each row count the laws meet, at two sizes (:func:`qv_dynamics.kernels.loader.warm_all`
    compiles it into numba's disk cache first)."""
    for n in (4, 8):
        for m in (0, 1, 2):
            A = np.zeros((m, n))
            for i in range(m):
                A[i, i] = 1.0
            decompose(2.0 * np.eye(n), np.zeros((n, n)), A, np.zeros(m), np.ones(n), np.eye(n), np.eye(m),
                      np.zeros(n), np.ones(n), m, 1e-9, 1e-9, np.empty((6 * n + 4 * m, n)), np.empty(vec_size(n, m)))
            T, tv = np.zeros((2 * n + m, n)), np.zeros(2 * n + m + 1)
            Y = np.zeros((n + 1, 10))  # a chain of n revolute joints with unit masses
            Y[:, 0] = 1.0
            tree = np.array([[0, 0, 0]] + [[i, 1, i] for i in range(n)], np.int64)
            views = (Y, tree, np.zeros(n), np.array([0.0, 0.0, -9.81]), np.zeros((n, n)),
                     np.ones((6, n)).T.copy().T, np.ones((6, n)).T.copy().T,
                     np.eye(3, 12), np.zeros(1, np.int64), np.ones((1, n), np.int64),
                     np.array([[0, -1, i] for i in range(m)], np.int64).reshape(m, 3), np.ones(n))
            terms(*views, T, tv)
            sample(*views, np.eye(n), np.eye(m), np.ones(n), 1e-9, 1e-9, T, tv, np.empty((6 * n + 4 * m, n)),
                   np.empty(vec_size(n, m)))
