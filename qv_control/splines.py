"""Interpolating splines of odd degree through waypoints, one power-basis polynomial per interval
(:class:`qv_control.references.SplineReference`).

Degree d = 2m + 1 (3: cubic, 5: quintic), N ≥ 2 strictly increasing times t_i, P = N − 1 intervals. On
interval i, with c_i its midpoint, h_i its half-width and s = (t − c_i)/h_i ∈ [−1, 1],

    p_i(t) = Σ_j b_ij s^j,  j = 0..d,      p_i^(r)(t) = Σ_{j≥r} b_ij j!/(j−r)! s^(j−r) / h_i^r.

The (d + 1)P coefficients (per component of the waypoints) solve

    p_i(t_i) = W_i,  p_i(t_{i+1}) = W_{i+1}                          2P rows: interpolation
    p_i^(r)(t_{i+1}) = p_{i+1}^(r)(t_{i+1}),  r = 1..d−1              (d−1)(P−1) rows: C^(d−1) at inner knots
    p_0^(r)(t_0) = 0,  p_{P−1}^(r)(t_{N−1}) = 0,  r = 1..m            2m = d − 1 rows: clamped ends

a banded system (a row touches at most two neighbouring intervals), solved by LAPACK's banded LU with partial
pivoting (``scipy.linalg.solve_banded``); a continuity row is scaled by min(h_i, h_{i+1})^r, so neither side's
factors exceed the derivatives' own (j!/(j−r)!) however unequal the intervals. d = 3 gives the clamped cubic
spline (zero end velocity), d = 5 the quintic with zero end velocity and acceleration: the unique
interpolants scipy's ``CubicSpline(bc_type="clamped")`` and ``make_interp_spline(k=5)`` with those end
conditions build (test/test_splines.py compares them); this module spares a node starting the ~0.25 s import
of ``scipy.interpolate`` (and ``scipy.optimize`` under it).
"""
from __future__ import annotations

import bisect
from math import factorial

import numpy as np

DEGREES = {"cubic": 3, "quintic": 5}


def _falling(j: int, r: int) -> float:
    """j!/(j−r)! (0 for r > j): the factor of s^(j−r) in the r-th derivative of s^j."""
    return factorial(j) / factorial(j - r) if r <= j else 0.0


def fit_spline(t: np.ndarray, W: np.ndarray, degree: int) -> np.ndarray:
    """Taylor coefficients a (P, d + 1, k) of the interpolating spline (module doc) about each interval's
    midpoint: p_i(t) = Σ_j a_ij (t − c_i)^j. ``t`` (N,) strictly increasing, ``W`` (N, k)."""
    from scipy.linalg import solve_banded  # (scipy.linalg is imported by qv_dynamics already)

    d, P = int(degree), t.size - 1
    if d < 1 or d % 2 == 0:
        raise ValueError(f"spline degree must be odd, got {d}")
    m, n = d // 2, d + 1
    h = 0.5 * np.diff(t)
    rows: list[tuple[list[tuple[int, float]], np.ndarray | None]] = []  # (column, value) entries, right side
    zero = np.zeros(W.shape[1])

    def derivative_row(i: int, side: float, r: int, scale: float = 1.0) -> list[tuple[int, float]]:
        return [(i * n + j, scale * _falling(j, r) * side ** (j - r)) for j in range(r, n)]

    for r in range(1, m + 1):                      # clamped start: p_0^(r)(t_0) h_0^r = 0
        rows.append((derivative_row(0, -1.0, r), zero))
    for i in range(P):
        rows.append((derivative_row(i, -1.0, 0), W[i]))
        rows.append((derivative_row(i, 1.0, 0), W[i + 1]))
        if i + 1 < P:                               # C^(d−1) at t_{i+1}, the row times min(h_i, h_{i+1})^r
            hmin = min(h[i], h[i + 1])
            for r in range(1, d):
                right = [(c, -v) for c, v in derivative_row(i + 1, -1.0, r, (hmin / h[i + 1]) ** r)]
                rows.append((derivative_row(i, 1.0, r, (hmin / h[i]) ** r) + right, zero))
    for r in range(1, m + 1):                      # clamped end
        rows.append((derivative_row(P - 1, 1.0, r), zero))

    entries = [(k, c, v) for k, (row, _) in enumerate(rows) for c, v in row if v != 0.0]
    lower = max(k - c for k, c, _ in entries)
    upper = max(c - k for k, c, _ in entries)
    ab = np.zeros((lower + upper + 1, n * P))
    for k, c, v in entries:
        ab[upper + k - c, c] = v
    b = solve_banded((lower, upper), ab, np.array([rhs for _, rhs in rows]))  # (n P, k)
    b = b.reshape(P, n, -1)
    return b / (h[:, None, None] ** np.arange(n)[None, :, None])   # a_ij = b_ij / h_i^j


class PiecewisePoly:
    """A spline as one power-basis polynomial per interval about the interval's midpoint: value, first and
    second derivative from one (d+1)-vector of powers times a (d+1) × 3k coefficient matrix. Outside
    [t₀, t_end] the end value is held with zero derivatives."""

    def __init__(self, t: np.ndarray, a: np.ndarray):
        P, n, k = a.shape
        self.deg = n - 1
        self.breaks = t[1:-1].tolist()     # interior breakpoints (bisect)
        self.mid = 0.5 * (t[:-1] + t[1:])
        C = np.zeros((P, n, 3 * k))
        for j in range(n):
            C[:, j, :k] = a[:, j]
            if j + 1 < n:
                C[:, j, k:2 * k] = (j + 1) * a[:, j + 1]
            if j + 2 < n:
                C[:, j, 2 * k:] = (j + 2) * (j + 1) * a[:, j + 2]
        self.C = C
        self.k = k
        self.t0, self.t1 = float(t[0]), float(t[-1])
        # the ends as the polynomials give them (equal to the waypoints to rounding)
        self.start = self._at(0, self.t0)[:k].copy()
        self.end = self._at(P - 1, self.t1)[:k].copy()

    def _at(self, i: int, t: float) -> np.ndarray:
        x = t - self.mid[i]
        p = [1.0]
        for _ in range(self.deg):
            p.append(p[-1] * x)
        return np.array(p).dot(self.C[i])

    def __call__(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(value, first, second derivative) at t."""
        k = self.k
        if t <= self.t0:
            return self.start.copy(), np.zeros(k), np.zeros(k)
        if t >= self.t1:
            return self.end.copy(), np.zeros(k), np.zeros(k)
        out = self._at(bisect.bisect_right(self.breaks, t), t)
        return out[:k], out[k:2 * k], out[2 * k:]


__all__ = ["DEGREES", "PiecewisePoly", "fit_spline"]
