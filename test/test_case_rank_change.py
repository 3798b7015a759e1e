"""Row ``rank_change`` (qv_control.demo.cases.rank_change), the table's full 2.8 s run: the tool face rolls from
its edge (1 active row) onto the face (3 rows of rank 2) and back while pressing 10 N.

Measured by MuJoCo (the three spheres' contact forces). qv and osc (the same coordinates on each phase, λ per
row): accepted (wrench RMS ≤ 1 %, path ≤ 0.2 mm, no lift-off), |τ| within the limits, within 10 % of the
published figures (both 0.37 %, 3.1 µm), and the supervisor saw both rank changes from the plant's forces.
osc_tool ties; impedance has no moment channel (failed).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="mujoco not installed (pip install -r requirements.txt)")

from case_figures import check_row, run_all  # noqa: E402

from qv_control.demo.cases import rank_change as row  # noqa: E402


@pytest.fixture(scope="module")
def runs():
    return run_all("rank_change")


def test_qv_and_osc_meet_the_targets_through_both_rank_changes(runs):
    check_row("rank_change", runs)
    for kind in ("qv", "osc"):
        r = runs[kind]
        a = r["arrays"]
        assert [m for _, m in r["events"]] == ["face", "edge"], kind
        t_face, t_edge = r["events"][0][0], r["events"][1][0]
        assert row.T_ROLL_END <= t_face < row.T_TRACE and t_edge >= row.T_EDGE, kind
        mid = (a["t"] > 1.3) & (a["t"] < 1.9)                  # on the face: all three rows carry load
        edges = a["rows"][mid][:, [0, 2]]
        assert np.all(edges < -1.0), (kind, edges.max())
        late = a["t"] > 2.6                                        # back on the edge: the face is off the table
        assert np.allclose(a["fn"][late][:, 0], a["fn"][late][:, 1], atol=0.05), kind   # all load on face_a
