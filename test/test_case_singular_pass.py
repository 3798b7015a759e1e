"""Row ``singular_pass`` (qv_control.demo.cases.singular_pass), the table's full 2.5 s run: the arm presses a
two-prong tool (tip on link 3, finger on link 2) on the table with 10 N in all while the tip traces 0.6 → 0.7 →
0.6 m, through X_STAR = 0.65 m where the prongs meet and the two contact rows become one (rank 2 → 1 → 2, twice).

Every figure is measured by MuJoCo (the two spheres' contact forces), and the per-row reading is checked
against the plant's own generalized constraint force. qv and osc (θ = face_m.x, both prongs' rows, the library's
default rank floor, 1.5 % of the model's reach = 0.0225 m): accepted (total-force RMS ≤ 1 %, path ≤ 0.2 mm, no
lift-off of either prong), |τ| within the limits, within 10 % of the published figures (qv 0.163 %, 45 µm; osc
0.156 %, 53 µm), each prong ≥ 0.5 N throughout. With the bare floor (``rank_atol=0``) both lose the task there.
osc_tool and impedance (tip-only tasks, the finger a disturbance) are reported: both lift the tip off.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco", reason="mujoco not installed (pip install -r requirements.txt)")

from case_figures import check_row, run_all  # noqa: E402

from qv_control.demo.cases import singular_pass as row  # noqa: E402
from qv_control.demo.cases.face import TABLE  # noqa: E402
from qv_control.laws.projection_base import default_rank_atol  # noqa: E402


@pytest.fixture(scope="module")
def sysm():
    return row.fork_system()


@pytest.fixture(scope="module")
def runs():
    return run_all("singular_pass")


def _sigma_min(sysm, q) -> float:
    return float(np.linalg.svd(sysm.constraint_rows(q)[1], compute_uv=False)[-1])


def test_qv_and_osc_meet_the_targets_through_the_rank_drop(runs, sysm):
    assert default_rank_atol(sysm) == pytest.approx(0.0225, abs=1e-4)
    check_row("singular_pass", runs)
    for kind in ("qv", "osc"):
        a = runs[kind]["arrays"]
        sig = np.array([_sigma_min(sysm, q) for q in a["q"]])
        assert sig[0] > 0.03 and sig.min() < 1e-3, kind           # rank 2 at the start, 1 (to 1e-4) on the way
        crossings = np.count_nonzero(np.diff(np.sign(a["pos"][:, 0] - row.X_STAR)) != 0)
        assert crossings == 2, kind                               # through X_STAR and back
        load = -a["rows"][a["t"] >= row.T_RAMP]
        assert load.min() >= 0.5, (kind, load.min())              # both prongs press all along (≥ 1.1 N measured)


@pytest.mark.parametrize("kind", ["qv", "osc"])
def test_the_bare_rank_floor_loses_the_task_there(kind):
    f = row.run(kind, rank_atol=0.0)["figures"]
    print(f"\n[singular_pass, {kind} with the bare floor] force {100 * f['force_rms_error_rel']:.1f} %, path "
          f"{1e3 * f['path_rms_error_m']:.2f} mm, |τ| {f['max_abs_torque_ratio']:.2f}, failed '{f['failed']}'")
    assert f["failed"] == "lost the task"


def test_contact_rows_are_the_plants_constraint_force_at_the_meeting_pose(sysm):
    """At the crossing (t = 1.0 s, σ_min(A) → 0) Σ A_iᵀλ_i from the two spheres = −qfrc_constraint of the
    same MuJoCo state; the total is the commanded 10 N while the split is the plant's (3.1/6.9 N measured)."""
    from qv_dynamics.plants.mujoco_face import MujocoFacePlant
    from qv_dynamics.state import State

    q0 = row.fork_pose(sysm, row.X0)
    plant = MujocoFacePlant(sysm, row.ROWS, TABLE)
    plant.reset(q0)
    law = row.make_law("qv", sysm, q0)
    lam = None
    for k in range(1000):
        tau = law.compute(State(t=plant.time, q=plant.q, qdot=plant.qdot, lambda_meas=lam),
                          row.tick(k * 0.001, "qv").reference)
        plant.step(tau, 0.001)
        lam = plant.forces()
    _, A = sysm.constraint_rows(plant.q)
    gen = -plant.data.qfrc_constraint
    assert _sigma_min(sysm, plant.q) < 0.01
    # 1e-4 of the largest entry: the sphere's contact point sits up to 1e-5 m beside its frame when tilted
    assert np.allclose(A.T @ lam, gen, rtol=1e-5, atol=1e-4 * np.abs(gen).max())
    assert abs(-lam.sum() - row.FORCE) <= 0.1 and np.all(lam < -1.0)


@pytest.mark.parametrize("x", [row.X0, row.X_STAR])
def test_scene_open_loop_holds_a_static_press(sysm, x):
    """No controller: τ = g(q) + Aᵀλ_d − 2q̇ with λ_d = −5 N per prong, 0.3 s, at the start and at the meeting
    pose (rank 1): MuJoCo's frictionless stiff spheres carry 10 N in all (at X_STAR the split is the solver's:
    the rows are one), without a bounce."""
    import pinocchio as pin

    from qv_dynamics.plants.mujoco_face import MujocoFacePlant

    q0 = row.fork_pose(sysm, x)
    plant = MujocoFacePlant(sysm, row.ROWS, TABLE)
    plant.reset(q0)
    totals = []
    for _ in range(300):
        q = plant.q
        _, A = sysm.constraint_rows(q)
        tau = pin.computeGeneralizedGravity(sysm.model, sysm.data, q) + A.T @ np.full(2, -5.0) - 2 * plant.qdot
        plant.step(tau, 0.001)
        totals.append(-plant.forces().sum())
    assert 9.97 <= min(totals[50:]) and max(totals[50:]) <= 10.01
    assert np.all(plant.forces() < -1.0)
