"""Small dense linear algebra compiled with numba for the quasi-velocity kernel (:mod:`qv_dynamics.kernels.quasi`),
sized for n ≤ ~40: loops where a BLAS call through numba (~0.3 µs) would cost more than the arithmetic, BLAS
dgemm for the larger products (:func:`mmt`: transposes as flags, results into their blocks; :func:`mm` where a
fresh array is wanted), and Cholesky with the triangular inverse in 2 × 2 blocks above
BLOCKED_N, so that the n³ work runs in BLAS and the loops stay short. Same algorithms as LAPACK's (dpotf2,
forward substitution, one-sided Jacobi for singular values): results equal LAPACK's to rounding. And
:func:`borrowed` / :func:`alive`: arrays whose views are not reference-counted, for the kernels' hot paths.

numba keys the kernel's disk cache on :mod:`qv_dynamics.kernels.quasi`'s source only; the loader
(:func:`qv_dynamics.kernels.loader.kernel_sources`) also watches this file, so after editing it the laws take the numpy
path until ``qv warm`` recompiles.
"""
from __future__ import annotations

import math

import numba.np.linalg  # noqa: F401  (numba's BLAS helpers, which numba_xxgemm below is one of)
import numpy as np
from numba import njit, types
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

#: products with fewer multiply-adds than this run in loops (a BLAS call through numba costs ~0.3 µs)
SMALL_PRODUCT = 4096

#: numba's own dgemm entry (what its ``np.dot`` calls: scipy's BLAS), resolved by name when a kernel loads, so the
#: kernels that call it cache like any other
_XXGEMM = types.ExternalFunction("numba_xxgemm", types.intc(
    types.char, types.char, types.char, types.intp, types.intp, types.intp, types.voidptr, types.voidptr,
    types.intp, types.voidptr, types.intp, types.voidptr, types.voidptr, types.intp))


@njit(cache=True)
def mm(A, B):
    """A·B: loops for a small product, BLAS (numba's ``np.dot``) otherwise."""
    p, r = A.shape
    c = B.shape[1]
    if p * r * c >= SMALL_PRODUCT:
        return np.dot(np.ascontiguousarray(A), np.ascontiguousarray(B))
    out = np.zeros((p, c))
    for i in range(p):
        for k in range(r):
            a = A[i, k]
            for j in range(c):
                out[i, j] += a * B[k, j]
    return out


@njit(cache=True)
def gemm(ta, tb, alpha, A, B, beta, C) -> None:
    """C ← α·op(A)·op(B) + β·C in place, op(X) = Xᵀ when ``ta`` / ``tb``: BLAS dgemm as numba's ``np.dot`` calls it,
    but with the transpositions as flags and the result written where it belongs (no transposed copy, no result
    array). For products above SMALL_PRODUCT; A, B, C are 2-D views whose rows are contiguous (a block of a
    larger C-ordered array serves, through its row stride); C must not overlap A or B."""
    m, n = C.shape
    k = A.shape[0] if ta else A.shape[1]
    ab = np.empty(2)
    ab[0], ab[1] = alpha, beta
    # row-major C = op(A)op(B) is column-major Cᵀ = op(B)ᵀop(A)ᵀ: BLAS gets (B, A) and sees each as transposed
    _XXGEMM(np.int8(100), np.int8(116 if tb else 110), np.int8(116 if ta else 110), n, m, k, ab[0:].ctypes,
            B.ctypes, B.strides[0] // 8, A.ctypes, A.strides[0] // 8, ab[1:].ctypes, C.ctypes, C.strides[0] // 8)


@njit(cache=True)
def mmt(ta, tb, alpha, A, B, beta, C) -> None:
    """C ← α·op(A)·op(B) + β·C (as :func:`gemm`): BLAS above SMALL_PRODUCT when every row is contiguous, else
    loops (β = 0 overwrites C, whatever it held)."""
    m, n = C.shape
    k = A.shape[0] if ta else A.shape[1]
    if m * n * k >= SMALL_PRODUCT and A.strides[1] == 8 and B.strides[1] == 8 and C.strides[1] == 8:
        gemm(ta, tb, alpha, A, B, beta, C)
        return
    for i in range(m):
        ci = C[i]
        for j in range(n):
            ci[j] = beta * ci[j] if beta != 0.0 else 0.0
        for p in range(k):
            a = alpha * (A[p, i] if ta else A[i, p])
            for j in range(n):
                ci[j] += a * (B[j, p] if tb else B[p, j])


@intrinsic
def borrowed(typingctx, arr):
    """``arr`` without its memory-info pointer: the same data, shape and strides, not reference-counted, nor is any
    view of it. numba counts the references to an array's memory with an atomic add and subtract for every view made
    and dropped (a law's whole tick makes hundreds: a quarter of its time went to them). Safe while the array it
    borrows from lives: a kernel's arguments (held by the caller for the whole call), or an array the kernel made and
    keeps alive to the end with :func:`alive` (numba frees an array after its last use)."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, sig, args):
        src = context.make_array(arr)(context, builder, value=args[0])
        dst = context.make_array(arr)(context, builder)
        populate_array(dst, data=src.data, shape=src.shape, strides=src.strides, itemsize=src.itemsize,
                       meminfo=None, parent=None)
        return dst._getvalue()
    return arr(arr), codegen


@njit(cache=True)
def alive(owner) -> int:
    """1, after a use of ``owner``: the array a :func:`borrowed` copy was made from lives up to this call."""
    return 1 if owner.shape[0] >= 0 else 0


@njit(cache=True, fastmath={"reassoc", "contract"})
def dot(a, b) -> float:
    """aᵀb of two contiguous vectors, summed in SIMD lanes (reassociated: rounding differs from a loop's by
    ~eps·|a||b|); for the Gram–Schmidt of the row space, whose dot products are the loop's long dependency
    chains (n = 38: 8.1 → 6.5 µs)."""
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j] * b[j]
    return s


@njit(cache=True)
def mv_into(A, x, y) -> None:
    """y = A·x in loops, into ``y`` (no allocation; y must not be x)."""
    p, r = A.shape
    for i in range(p):
        s = 0.0
        for k in range(r):
            s += A[i, k] * x[k]
        y[i] = s


@njit(cache=True)
def mtv_into(A, x, y) -> None:
    """y = Aᵀ·x in loops, into ``y`` (no allocation; y must not be x)."""
    p, r = A.shape
    for j in range(r):
        y[j] = 0.0
    for i in range(p):
        xi = x[i]
        for j in range(r):
            y[j] += A[i, j] * xi


@njit(cache=True)
def mv(A, x):
    """A·x in loops (rows of A; Aᵀ·x as ``mv(A.T, x)``)."""
    p, r = A.shape
    y = np.zeros(p)
    for i in range(p):
        s = 0.0
        for k in range(r):
            s += A[i, k] * x[k]
        y[i] = s
    return y


#: below this size Cholesky and the triangular inverse run in plain loops; above, in 2 × 2 blocks
BLOCKED_N = 24


@njit(cache=True)
def cholesky(M, Q) -> bool:
    """Q lower with M = QQᵀ from the upper triangle of M (row-oriented dpotf2: each entry's sums in LAPACK's
    order); False when not positive definite. The one compiled Cholesky (the simulator's stages use it too)."""
    n = M.shape[0]
    for i in range(n):
        qi = Q[i]
        for j in range(i + 1):
            qj = Q[j]
            s = M[j, i]
            for k in range(j):
                s -= qi[k] * qj[k]
            if i == j:
                if not s > 0.0:
                    return False
                qi[i] = math.sqrt(s)
            else:
                qi[j] = s / qj[j]
        for j in range(i + 1, n):
            qi[j] = 0.0
    return True


@njit(cache=True)
def _inv_loops(Q, Qi) -> None:
    """Qi = Q⁻¹ of a lower-triangular Q, row by row: Qi[i, :i] = −Q[i, i]⁻¹ Σ_{k<i} Q[i, k] Qi[k, :i] (each term
    an axpy over a contiguous row of Qi, which vectorizes; the column-wise dot products of forward substitution
    do not: n = 38, blocked, 13.7 → 12.0 µs)."""
    n = Q.shape[0]
    for i in range(n):
        qi = Qi[i]
        for j in range(n):
            qi[j] = 0.0
        for k in range(i):
            a = Q[i, k]
            qk = Qi[k]
            for j in range(k + 1):
                qi[j] += a * qk[j]
        d = 1.0 / Q[i, i]
        for j in range(i):
            qi[j] = -qi[j] * d
        qi[i] = d


@njit(cache=True)
def cholesky_inverse(M, Q, Qi) -> bool:
    """Q lower with M = QQᵀ (read from the upper triangle of M) and Qi = Q⁻¹; False when M is not positive
    definite. Above BLOCKED_N in 2 × 2 blocks, recursively: Q₁₁ = chol(M₁₁), Q₂₁ = M₂₁Q₁₁⁻ᵀ,
    Q₂₂ = chol(M₂₂ − Q₂₁Q₂₁ᵀ), (Q⁻¹)₂₁ = −Q₂₂⁻¹Q₂₁Q₁₁⁻¹ (the products in BLAS)."""
    n = M.shape[0]
    if n < BLOCKED_N:
        if not cholesky(M, Q):
            return False
        _inv_loops(Q, Qi)
        return True
    h = n // 2
    Q11, I11 = np.empty((h, h)), np.empty((h, h))
    if not cholesky_inverse(np.ascontiguousarray(M[:h, :h]), Q11, I11):
        return False
    Q21 = Q[h:, :h]
    mmt(True, True, 1.0, M[:h, h:], I11, 0.0, Q21)          # M₂₁Q₁₁⁻ᵀ (M₂₁ = M₁₂ᵀ: the upper triangle)
    S = np.ascontiguousarray(M[h:, h:])
    mmt(False, True, -1.0, Q21, Q21, 1.0, S)                # M₂₂ − Q₂₁Q₂₁ᵀ
    Q22, I22 = np.empty((n - h, n - h)), np.empty((n - h, n - h))
    if not cholesky_inverse(S, Q22, I22):
        return False
    Q[:h, :h] = Q11
    Q[:h, h:] = 0.0
    Q[h:, h:] = Q22
    Qi[:h, :h] = I11
    Qi[:h, h:] = 0.0
    Qi[h:, h:] = I22
    W = np.empty((n - h, h))
    mmt(False, False, 1.0, I22, Q21, 0.0, W)
    mmt(False, False, -1.0, W, I11, 0.0, Qi[h:, :h])        # −Q₂₂⁻¹Q₂₁Q₁₁⁻¹
    return True


@njit(cache=True)
def full_rank(R, Ri, frob, rtol, atol) -> bool:
    """R⁻¹ of an upper-triangular m × m R into Ri (back substitution) and the full-rank certificate of the
    matrix whose R it is: σ_min ≥ 1/‖R⁻¹‖_F > max(rtol·‖·‖_F, atol) ≥ max(rtol·σ₁, atol), ``frob`` = ‖·‖_F."""
    m = R.shape[0]
    rf = 0.0
    for j in range(m - 1, -1, -1):
        if R[j, j] == 0.0:
            return False
        Ri[j, j] = 1.0 / R[j, j]
        for i in range(j - 1, -1, -1):
            s = 0.0
            for k in range(i + 1, j + 1):
                s += R[i, k] * Ri[k, j]
            Ri[i, j] = -s / R[i, i]
        for i in range(j + 1):
            rf += Ri[i, j] * Ri[i, j]
    return 1.0 > math.sqrt(rf) * max(rtol * frob, atol)


@njit(cache=True)
def _orthogonal_rows(B, tol) -> bool:
    """Whether every two rows of B have |cos| < tol (no square roots: c² < tol²·‖bᵢ‖²‖bⱼ‖²)."""
    m = B.shape[0]
    nrm = np.empty(m)
    for i in range(m):
        s = 0.0
        for k in range(B.shape[1]):
            s += B[i, k] * B[i, k]
        nrm[i] = s
    t2 = tol * tol
    for i in range(m - 1):
        bi = B[i]
        for j in range(i + 1, m):
            bj = B[j]
            c = 0.0
            for k in range(B.shape[1]):
                c += bi[k] * bj[k]
            if not c * c < t2 * nrm[i] * nrm[j]:
                return False
    return True


@njit(cache=True)
def _rotation(c, a, b):
    """(cos, sin, t) of the Jacobi rotation that makes two rows with squared norms a, b and dot product c
    orthogonal (the rotated rows' squared norms are a − tc and b + tc)."""
    zeta = (b - a) / (2.0 * c)
    t = math.copysign(1.0, zeta) / (abs(zeta) + math.sqrt(1.0 + zeta * zeta))
    cs = 1.0 / math.sqrt(1.0 + t * t)
    return cs, cs * t, t


@njit(cache=True)
def singular_values(R, U, S) -> None:
    """Singular values of a square R into S, descending: one-sided Jacobi (Hestenes) rotations of the rows of
    B = UᵀR until they are orthogonal to working precision (as accurate as LAPACK's dgesdd), then their norms.
    U (orthogonal) is updated in place so that B = UᵀR still holds: started from the previous sample's U,
    B's rows are nearly orthogonal already (cosines ~1e-3 at 1 kHz) and two sweeps suffice instead of ~6.
    Convergence is quadratic: a sweep whose largest cosine is below 1e-8 leaves them below ~1e-16, so it is
    the last (no sweep only to confirm); after one whose largest was below 1e-4, the rows' cosines are
    measured (dot products only, no rotation): all below 1e-8 and the row norms are the singular values to
    ~cos² ≤ 1e-16 relative, so that sweep was the last too.

    The pairs go in round-robin (tournament) order, as parallel Jacobi does: each of a sweep's m − 1 rounds
    pairs every row once, so its dot products, rotation angles and rotations are independent and the CPU
    overlaps their long sqrt/division chains (Talos' 12 × 12: ~1.5x faster than the cyclic order, the same
    quadratic convergence)."""
    m = R.shape[0]
    B = mm(U.T, R)
    Ut = np.ascontiguousarray(U.T)  # rows of Uᵀ rotate like rows of B (contiguous)
    nrm = np.empty(m)
    mp = m + (m & 1)                # an odd m plays a bye each round
    seats = np.arange(mp)
    half = mp // 2
    pi, pj = np.empty(half, np.int64), np.empty(half, np.int64)
    rot = np.empty((half, 3))       # dot product, then cos, sin of each pair's rotation
    for _ in range(60):
        for i in range(m):          # squared row norms, exact at each sweep's start, then updated per rotation
            nrm[i] = dot(B[i], B[i])
        worst2 = 0.0
        for _round in range(mp - 1):
            k = 0
            for p in range(half):
                a, b = seats[p], seats[mp - 1 - p]
                if a < m and b < m:
                    pi[k], pj[k] = min(a, b), max(a, b)
                    k += 1
            for p in range(k):
                rot[p, 0] = dot(B[pi[p]], B[pj[p]])
            for p in range(k):
                i, j, c = pi[p], pj[p], rot[p, 0]
                a, b = nrm[i], nrm[j]
                if c * c <= 4.930380657631324e-32 * a * b:   # |cos| ≤ eps: already orthogonal
                    rot[p, 1], rot[p, 2] = 1.0, 0.0
                    continue
                worst2 = max(worst2, c * c / (a * b))
                cs, sn, t = _rotation(c, a, b)
                rot[p, 1], rot[p, 2] = cs, sn
                nrm[i], nrm[j] = a - t * c, b + t * c
            for p in range(k):
                cs, sn = rot[p, 1], rot[p, 2]
                if sn == 0.0:
                    continue
                bi, bj, ui, uj = B[pi[p]], B[pj[p]], Ut[pi[p]], Ut[pj[p]]
                for q in range(m):
                    x, y = bi[q], bj[q]
                    bi[q] = cs * x - sn * y
                    bj[q] = sn * x + cs * y
                    x, y = ui[q], uj[q]
                    ui[q] = cs * x - sn * y
                    uj[q] = sn * x + cs * y
            last = seats[mp - 1]    # next round: seat 0 stays, the others move on by one
            for p in range(mp - 1, 1, -1):
                seats[p] = seats[p - 1]
            seats[1] = last
        worst = math.sqrt(worst2)
        if worst2 == 0.0 or worst < 1e-8 or (worst < 1e-4 and _orthogonal_rows(B, 1e-8)):
            break
    U[:] = Ut.T
    for i in range(m):
        S[i] = math.sqrt(dot(B[i], B[i]))
    S.sort()
    S[:] = S[::-1].copy()
