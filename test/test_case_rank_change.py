"""Row ``rank_change`` of ``qv conditions`` (qv_control.demo.cases.rank_change): the tool face rolls from its
edge (1 active row) onto the face (3 rows of rank 2) and back while pressing 10 N, the whole 2.8 s row for
qv (both switches), 1.2 s for the baselines.

Measured by MuJoCo (the three spheres' contact forces). Targets for qv: wrench RMS ≤ 1 %, path ≤ 0.2 mm,
no lift-off, |τ| within the limits, not failed, and the supervisor saw both rank changes from the plant's
forces (measured: 0.37 %, < 1 µm; osc ties at 0.37 %; impedance has no moment channel: failed).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="mujoco not installed (pip install -r requirements.txt)")

from qv_control.demo.cases import rank_change as row  # noqa: E402
from qv_control.demo.cases.common import FIGURES  # noqa: E402


@pytest.fixture(scope="module")
def qv():
    return row.run("qv")


def test_qv_meets_the_targets_through_both_rank_changes(qv):
    f, a = qv["figures"], qv["arrays"]
    print(f"\n[rank_change] qv: wrench {100 * f['force_rms_error_rel']:.3f} %, path "
          f"{1e3 * f['path_rms_error_m']:.4f} mm, events {qv['events']}")
    assert [m for _, m in qv["events"]] == ["face", "edge"]
    t_face, t_edge = qv["events"][0][0], qv["events"][1][0]
    assert row.T_ROLL_END <= t_face < row.T_TRACE and t_edge >= row.T_EDGE
    assert f["failed"] == ""
    assert f["force_rms_error_rel"] <= 0.01
    assert f["path_rms_error_m"] <= 0.2e-3
    assert f["contact_lost"] == 0 and f["max_abs_torque_ratio"] <= 1.0
    mid = (a["t"] > 1.3) & (a["t"] < 1.9)                  # on the face: all three rows carry load
    edges = a["rows"][mid][:, [0, 2]]
    assert np.all(edges < -1.0), edges.max()
    late = a["t"] > 2.6                                        # back on the edge: the face is off the table
    assert np.allclose(a["fn"][late][:, 0], a["fn"][late][:, 1], atol=0.05)   # all load on face_a


def test_baselines_are_reported():
    for k in ("osc", "impedance"):
        f = row.run(k, duration=1.2)["figures"]
        assert list(f) == list(FIGURES)
        assert f["failed"] or np.isfinite(f["force_rms_error_rel"]), k
