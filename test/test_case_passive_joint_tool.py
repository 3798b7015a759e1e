"""Row ``passive_joint_tool`` of ``qv conditions`` (qv_control.demo.cases.passive_joint_tool), short: the
planar arm's tool face on a passive pivot (no motor on joint3) pressed with 10 N while it starts to trace
(1.2 s of the 2.5 s row).

Measured by MuJoCo (the face's three contact forces; the pivot has no actuator in the plant). Targets for
qv: force RMS ≤ 1 %, path ≤ 0.2 mm, no lift-off of any contact, |τ| within the limits, not failed (full
row: 0.018 %, < 1 µm); the pivot is governed through the constraint: the face stays level (the plant's
q₁ + q₂ + q₃ = −π/2 within 1 mrad) with zero torque commanded on it. osc (a motor on every joint in its
model: the pivot's command is dropped) and impedance are reported (full row: osc 39 %, 50 mm, lost the
task; impedance 0.74 %, 0.10 mm).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="mujoco not installed (pip install -r requirements.txt)")

from qv_control.demo.cases import passive_joint_tool as row  # noqa: E402
from qv_control.demo.cases.common import FIGURES  # noqa: E402

DURATION = 1.2


@pytest.fixture(scope="module")
def runs():
    return {k: row.run(k, duration=DURATION) for k in ("qv", "osc", "impedance")}


def test_qv_meets_the_targets_with_a_passive_pivot(runs):
    print(f"\n[passive_joint_tool, {DURATION} s] " + "; ".join(
        f"{k}: force {100 * x['figures']['force_rms_error_rel']:.3f} %, path "
        f"{1e3 * x['figures']['path_rms_error_m']:.4f} mm, failed '{x['figures']['failed']}'" for k, x in runs.items()))
    f, a = runs["qv"]["figures"], runs["qv"]["arrays"]
    assert f["failed"] == ""
    assert f["force_rms_error_rel"] <= 0.01
    assert f["path_rms_error_m"] <= 0.2e-3
    assert f["contact_lost"] == 0 and f["max_abs_torque_ratio"] <= 1.0
    tilt = a["q"].sum(axis=1) + math.pi / 2
    assert np.max(np.abs(tilt)) <= 1e-3                       # the face stays level on the passive pivot
    assert np.ptp(a["q"][:, 2]) > 0.02                        # while the pivot turns with the trace


def test_qv_commands_no_torque_on_the_pivot():
    from qv_control.demo.cases.face import face_pose, face_system
    from qv_dynamics.state import State

    sysm = face_system()
    q0 = face_pose(sysm, row.X0)
    law = row.make_law("qv", sysm, q0)
    tau = law.compute(State(t=0.0, q=q0, qdot=np.zeros(3)), row.tick(0.4, "qv").reference)
    assert tau[2] == 0.0 and np.all(np.isfinite(tau))


def test_baselines_are_reported(runs):
    for k in ("osc", "impedance"):
        f = runs[k]["figures"]
        assert list(f) == list(FIGURES)
        assert f["failed"] or np.isfinite(f["force_rms_error_rel"]), k
