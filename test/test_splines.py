"""The waypoint splines of SplineReference (qv_control/splines.py) against scipy's interpolants of the same
conditions: the clamped cubic (``CubicSpline(bc_type="clamped")``) and the quintic with zero end velocity and
acceleration (``make_interp_spline(k=5)``), value and two derivatives, inside and outside the knots."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.interpolate import CubicSpline, make_interp_spline

from qv_control.references import SplineReference
from qv_control.splines import PiecewisePoly, fit_spline

TOL = 1e-11  # relative to the curve's largest value; measured ≤ 1.7e-14, 1.1e-12 with knot spacings 1e-2 .. 1e2 s


def _scipy(t, W, kind):
    if kind == "cubic":
        return CubicSpline(t, W, bc_type="clamped", axis=0)
    bc = [(1, np.zeros(W.shape[1])), (2, np.zeros(W.shape[1]))]
    return make_interp_spline(t, W, k=5, bc_type=(bc, bc), axis=0)


CASES = {
    "two points": np.array([0.0, 2.0]),
    "three": np.array([0.0, 0.7, 2.0]),
    "table task": np.array([0.0, 2.0, 4.0, 6.0, 8.0]),
    "uneven 1e-2..1e2 s": np.array([0.0, 0.01, 0.03, 1.0, 101.0, 101.5]),
    "many": np.cumsum(np.r_[0.0, np.random.default_rng(3).uniform(0.05, 0.5, 60)]),
}


@pytest.mark.parametrize("kind", ["cubic", "quintic"])
@pytest.mark.parametrize("case", list(CASES))
def test_spline_equals_scipy_interpolant(kind, case):
    t = CASES[case]
    if kind == "quintic" and t.size < 3:   # make_interp_spline(k=5) needs 3 knots: a midpoint on the
        ref_t = np.array([t[0], 0.5 * (t[0] + t[1]), t[1]])  # symmetric quintic (the same unique interpolant)
    else:
        ref_t = t
    rng = np.random.default_rng(t.size)
    W = rng.uniform(-2.0, 2.0, (t.size, 3))
    ref_W = W if ref_t is t else np.vstack([W[0], 0.5 * (W[0] + W[1]), W[1]])
    sp = _scipy(ref_t, ref_W, kind)
    pp = PiecewisePoly(t, fit_spline(t, W, {"cubic": 3, "quintic": 5}[kind]))
    ts = np.concatenate([np.linspace(t[0], t[-1], 997), t, [t[0] - 1.0, t[-1] + 1.0]])
    tc = np.clip(ts, t[0], t[-1])
    inside = (ts > t[0]) & (ts < t[-1])
    want = [sp(tc), np.where(inside[:, None], sp(tc, 1), 0.0), np.where(inside[:, None], sp(tc, 2), 0.0)]
    got = np.array([pp(tt) for tt in ts]).transpose(1, 0, 2)   # (derivative, sample, component)
    for j in range(3):
        # relative to the curve's own size: unequal intervals make a C⁴ quintic swing far beyond its waypoints
        scale = max(np.abs(want[j]).max(), np.abs(W).max() if j == 0 else 0.0)
        err = np.abs(got[j] - want[j]).max() / scale
        assert err <= TOL, (kind, case, j, err)
    assert np.allclose(pp(t[0])[0], W[0], rtol=0, atol=TOL * np.abs(want[0]).max())
    assert np.allclose(pp(t[-1])[0], W[-1], rtol=0, atol=TOL * np.abs(want[0]).max())


def test_spline_reference_rejects_an_unknown_kind():
    from qv_dynamics.errors import DimensionError

    with pytest.raises(DimensionError, match="cubic' or 'quintic"):
        SplineReference([0.0, 1.0], [[0.0], [1.0]], kind="linear")


def test_a_node_builds_its_reference_without_scipy_interpolate():
    """The start-up cost this module removes: SplineReference imports no scipy.interpolate (a fresh process)."""
    import subprocess
    import sys

    code = ("import sys; from qv_control.references import SplineReference; "
            "SplineReference([0, 1, 2], [[0.0], [1.0], [0.5]]); print('scipy.interpolate' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
