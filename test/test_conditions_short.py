"""The combined real condition (``all``: Drake, μ = 0.8, F/T and joint-velocity noise with the
model-based q̇ observer, one-sample delay, controller masses +10 %, 0.5 kg tool below a flange sensor,
stiff table) for qv and OSC, over the conditions table's 2 s measuring window (the same run as its row).

Every figure is measured by the Drake plant (contact force from its contact solver, tool position), never
by the controller. Thresholds are the acceptance targets: force RMS error ≤ 2 %, path RMS error ≤ 0.5 mm,
peak contact force ≤ 1.5 × commanded at the planned approach, no lift-off after contact, peak |τ| within
the limits. Measured (seed 0): force RMS 0.975 % (qv) / 0.975 % (osc) (seeds 0-3: 0.88-1.02 % for
both; with a 200 Hz low-pass on q̇ instead of the observer 1.86 %), peak 1.10x / 1.10x, no lift-off,
path 0.023 / 0.023 mm, |τ| 0.56. The integral actions are carried across the contact switch: with
controller masses +10 % on Drake, a motion integral that learned the 6 N model error and was dropped at
touch-down would give a force error of ~80 % with ~90 lift-offs; that is checked on its own below (0.8 s).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("pydrake", reason="pydrake not installed (pip install -r requirements.txt)")

from qv_control.demo.conditions import CONDITIONS, Condition, conditions_config  # noqa: E402
from qv_control.demo.conditions_runs import run_condition  # noqa: E402

CFG = replace(conditions_config(), nominal=0.8)


@pytest.fixture(scope="module")
def runs():
    return {kind: run_condition(CONDITIONS["all"], kind, conditions_config()) for kind in ("qv", "osc")}


def _show(runs):
    for kind, r in runs.items():
        f = r["figures"]
        print(f"\n[all] {kind}: force {100 * f['force_rms_error_rel']:.3f} %, "
              f"path {1e3 * f['path_rms_error_m']:.4f} mm, "
              f"peak {f['peak_force_ratio']:.2f}x, settle {f['settle_time_s']:.3f} s, |tau| "
              f"{f['max_abs_torque_ratio']:.2f}, lift-offs {f['contact_lost']}", end="")


def test_all_path_and_torque(runs):
    _show(runs)
    for kind, r in runs.items():
        f = r["figures"]
        assert r["aborted"] is None, kind
        assert f["path_rms_error_m"] <= 0.5e-3, kind
        assert f["max_abs_torque_ratio"] <= 1.0, kind


def test_all_force_peak_and_contact(runs):
    for kind, r in runs.items():
        f = r["figures"]
        assert f["force_rms_error_rel"] <= 0.02, kind      # measured 0.975 % / 0.975 %
        assert f["peak_force_ratio"] <= 1.5, kind          # measured 1.10x / 1.10x
        assert f["contact_lost"] == 0, kind


@pytest.mark.parametrize("kind", ["qv", "osc"])
def test_model_error_survives_touch_down(kind):
    """Drake, controller masses +10 % (6 N of excess lift at the tool): the integral actions are carried across
    the contact switch, so the tool stays down. Before: force RMS 78.6 % and 108 lift-offs for both laws;
    now 0.15 %, none."""
    r = run_condition(Condition("mass_drake", plant="drake", mass_factor=1.1), kind, CFG)
    f = r["figures"]
    print(f"\n[mass_+10% drake] {kind}: force {100 * f['force_rms_error_rel']:.3f} %, lift-offs {f['contact_lost']}")
    assert f["force_rms_error_rel"] <= 0.005
    assert f["contact_lost"] == 0 and f["peak_force_ratio"] <= 1.1


def test_friction_alone_meets_the_single_condition_targets():
    """Drake, μ = 0.8 only: force RMS ≤ 1 %, path ≤ 0.2 mm, normal force within ±10 % after the transient.
    The force settles within 5 % 0.020 s after the touch and stays there through the breakaway when the
    circle starts (compensation along the reference direction from a prior μ̂ = 0.5; 0.51 s before)."""
    r = run_condition(CONDITIONS["friction_0.8"], "qv", CFG)
    f = r["figures"]
    print(f"\n[friction_0.8] qv: force {100 * f['force_rms_error_rel']:.3f} %, path "
          f"{1e3 * f['path_rms_error_m']:.4f} mm, band {f['force_band_rel']}, peak {f['peak_force_ratio']:.2f}x, "
          f"settle {f['settle_time_s']:.3f} s")
    assert f["force_rms_error_rel"] <= 0.01
    assert f["path_rms_error_m"] <= 0.2e-3
    assert 0.9 <= f["force_band_rel"][0] and f["force_band_rel"][1] <= 1.1
    assert f["contact_lost"] == 0 and f["peak_force_ratio"] <= 1.5
    assert f["settle_time_s"] <= 0.05


def test_conditions_document_reports_the_fixed_20cm_s_touch_down():
    """conditions.json keys (each controller, each figure) and the 20 cm/s fixed-speed peak reported as
    measured (52x for qv and osc, 74x for impedance in the README run; the peak is set before the window)."""
    from qv_control.demo.conditions_report import FIGURES, markdown_table, run_matrix
    from qv_control.demo.conditions_runs import KINDS

    doc = run_matrix(["approach_20cm_s"], cfg=replace(conditions_config(), nominal=0.3), log=lambda s: None)
    row = doc["approach_20cm_s"]
    assert list(row) == list(KINDS) and all(list(row[k]) == list(FIGURES) for k in KINDS)
    print("\n[approach_20cm_s] peak " + " / ".join(f"{row[k]['peak_force_ratio']:.1f}x" for k in KINDS))
    assert all(row[k]["peak_force_ratio"] > 10 for k in KINDS)          # a spike, not hidden
    assert "| approach_20cm_s |" in markdown_table(doc)


def test_open_loop_band_tells_the_mujoco_artifact_from_the_controller():
    """The same open-loop torques (frozen 10 N press + a Jacobian-transpose push of 1.1μF, μ = 0.3, no
    controller): Drake's lagged contact slides at ~9.8 N, MuJoCo's soft contact bounces (0-56 N measured);
    a dynamically consistent push slides quietly in both (10.1-10.6 N)."""
    from qv_control.demo.conditions import open_loop_sliding_band

    bands = {(p, push): open_loop_sliding_band(p, 0.3, push=push) for p in ("drake", "mujoco")
             for push in ("consistent", "jacobian")}
    print(f"\nopen-loop bands (N): {bands}")
    for key in (("drake", "consistent"), ("mujoco", "consistent"), ("drake", "jacobian")):
        assert 9.0 <= bands[key][0] and bands[key][1] <= 11.0, key
    lo, hi = bands[("mujoco", "jacobian")]
    assert lo < 1.0 and hi > 30.0      # the scene's own bounce, with no controller in the loop
