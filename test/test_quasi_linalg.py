"""The compiled kernel's small dense linear algebra (qv_dynamics.kernels.quasi_linalg) against numpy/LAPACK: blocked
Cholesky with the triangular inverse, Jacobi singular values (cold and warm-started), the products; the borrowed
(uncounted) arrays of the kernels."""
from __future__ import annotations

import numpy as np
import pytest

from qv_dynamics.kernels.quasi_linalg import BLOCKED_N, cholesky_inverse, mm, mv, singular_values


def _spd(rng, n, cond):
    """A symmetric positive definite matrix with condition number ``cond``."""
    U = np.linalg.qr(rng.normal(size=(n, n)))[0]
    return (U * np.logspace(0, np.log10(cond), n)) @ U.T


@pytest.mark.parametrize("n", [1, 2, 7, BLOCKED_N - 1, BLOCKED_N, 38, 51])
def test_cholesky_inverse_is_lapacks(n):
    rng = np.random.default_rng(n)
    for cond in (1e1, 1e6):
        M = _spd(rng, n, cond)
        upper_only = np.triu(M) + np.tril(np.full((n, n), np.nan), -1)  # reads the upper triangle only (CRBA's)
        Q, Qi = np.empty((n, n)), np.empty((n, n))
        assert cholesky_inverse(upper_only, Q, Qi)
        L = np.linalg.cholesky(M)
        # backward error (measured ≤ 3.9e-16), the difference to LAPACK's factor (both backward stable: ≤ eps·cond;
        # measured ≤ 2.1e-17·cond) and the inverse (measured ≤ 1.4e-16·√cond), relative to the largest entries
        assert np.abs(Q @ Q.T - M).max() <= 1.2e-15 * np.abs(M).max()
        assert np.abs(Q - L).max() <= 1e-16 * cond * np.abs(L).max()
        assert np.array_equal(np.triu(Q, 1), np.zeros((n, n))) and np.array_equal(np.triu(Qi, 1), np.zeros((n, n)))
        assert np.abs(Qi @ Q - np.eye(n)).max() <= 5e-16 * np.sqrt(cond)
    not_pd = _spd(rng, n, 10.0) - 2.0 * np.eye(n)
    assert not cholesky_inverse(not_pd, Q, Qi)


@pytest.mark.parametrize("m", [1, 3, 6, 12])
def test_singular_values_cold_and_warm(m):
    rng = np.random.default_rng(m)
    for cond in (1.0, 1e3, 1e9):
        s = np.logspace(0, -np.log10(cond), m)
        R = np.linalg.qr(((np.linalg.qr(rng.normal(size=(m, m)))[0] * s) @ np.linalg.qr(rng.normal(size=(m, m)))[0]))[1]
        ref = np.linalg.svd(R, compute_uv=False)
        U, S = np.eye(m), np.empty(m)
        singular_values(R, U, S)
        # dgesdd's own accuracy is eps·σ₁: measured differences ≤ 1.2e-15·σ₁, UᵀU − I ≤ 2e-15
        assert np.abs(S - ref).max() <= 4e-15 * ref[0]
        assert np.abs(U.T @ U - np.eye(m)).max() < 6e-15
        # warm start: the next sample's R (1 ms later) from this U
        R2 = R + 1e-3 * np.triu(rng.normal(size=(m, m))) * s[-1]
        S2 = np.empty(m)
        singular_values(R2, U, S2)
        assert np.abs(S2 - np.linalg.svd(R2, compute_uv=False)).max() <= 4e-15 * S2[0]   # measured ≤ 1.8e-15


def test_products_small_and_blas():
    rng = np.random.default_rng(0)
    for p, r, c in [(3, 7, 4), (38, 38, 26), (12, 38, 12)]:  # loops below SMALL_PRODUCT, BLAS above
        A, B = rng.normal(size=(p, r)), rng.normal(size=(r, c))
        assert np.allclose(mm(A, B), A @ B, rtol=0, atol=1e-13)
        assert np.allclose(mm(B.T, A.T), B.T @ A.T, rtol=0, atol=1e-13)   # transposed (strided) views
        x = rng.normal(size=r)
        assert np.allclose(mv(A, x), A @ x, rtol=0, atol=1e-13)
        assert np.allclose(mv(B.T, x), B.T @ x, rtol=0, atol=1e-13)


def test_borrowed_arrays_are_views_without_a_reference_count():
    """borrowed(a) is a itself (the same memory, shape and strides: a write through it is seen in a, of a C, an F and
    a strided array) without numba's memory-info and parent pointers: boxed back to Python it is a bare view of a's
    memory owning nothing (a counted array boxes back to a itself); alive(a) keeps an array made in the kernel to its
    last line, so a borrowed scratch reads back what was written into it."""
    from numba import njit

    from qv_dynamics.kernels.quasi_linalg import alive, borrowed

    @njit
    def write_through(a):
        b = borrowed(a)
        b[1, 0] = 7.0
        return b.shape[0] * 100 + b.shape[1], b.strides[0], b.strides[1]

    @njit
    def boxed(a, borrow):
        return borrowed(a) if borrow else a

    @njit
    def scratch_sum(n):
        owner = np.empty(n)
        w = borrowed(owner)
        for i in range(n):
            w[i] = i
        s = 0.0
        for i in range(n):
            s += w[i]
        return s * alive(owner)

    base = np.zeros((5, 6))
    for a in (base, np.asfortranarray(base), base[::2, 1:4]):
        a[...] = 0.0
        shape, s0, s1 = write_through(a)
        assert a[1, 0] == 7.0 and np.count_nonzero(a) == 1
        assert shape == a.shape[0] * 100 + a.shape[1] and (s0, s1) == a.strides
    a = np.arange(6.0).reshape(2, 3)
    assert boxed(a, False) is a
    b = boxed(a, True)
    assert b is not a and b.base is None and not b.flags.owndata and np.shares_memory(a, b) and np.array_equal(a, b)
    assert scratch_sum(1000) == 999 * 1000 / 2
