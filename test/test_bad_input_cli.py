"""Bad input to the command line (issue 10, items 1, 4, 6): usage errors with exit code 2, refusals before a
run starts, failures reported as failures, and result files that are atomic and never stale.

The commands run in this process through ``qv_control.cli.main`` (its return value is the exit code), one
of them as a real process (exit code and stderr of the executable); each run is a fraction of a simulated
second.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from qv_dynamics import runfiles

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 29) % 200


def qv(capfd, *args) -> SimpleNamespace:
    """``qv <args>`` in this process: returncode (main's return value or SystemExit code), stdout, stderr."""
    from qv_control.cli import main

    argv = list(args) + (["--domain-id", str(DOMAIN)] if args[0] == "bringup" else [])
    cwd = os.getcwd()
    os.chdir(ROOT)  # relative config paths, as from a shell in the checkout
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    finally:
        os.chdir(cwd)
    out, err = capfd.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


# ------------------------------------------------------------------ item 6: numeric CLI values
@pytest.mark.parametrize("args", [
    ("simulate", "particle_circle", "--dt", "-1"),
    ("simulate", "particle_circle", "--dt", "0"),
    ("simulate", "particle_circle", "--t-final", "nan"),
    ("simulate", "particle_circle", "--t-final", "-1"),
    ("simulate", "particle_circle", "--record-every", "0"),
    ("simulate", "particle_circle", "--baumgarte", "inf", "1"),
    ("bringup", "config/planar_3link.yaml", "--duration", "nan"),
    ("bringup", "config/planar_3link.yaml", "--duration", "-1"),
    ("bringup", "config/planar_3link.yaml", "--duration", "0"),
])
def test_bad_numbers_are_usage_errors(args):
    from qv_control.cli import main

    with pytest.raises(SystemExit) as ei:
        main(list(args))
    assert ei.value.code == 2  # argparse's usage error, before anything runs


def test_bad_number_exit_code_and_message_from_a_process():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "qv_control.cli", "simulate", "particle_circle", "--dt", "-1"],
                          capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert proc.returncode == 2 and "--dt" in proc.stderr and "must be > 0" in proc.stderr
    assert "Traceback" not in proc.stderr


# ------------------------------------------------------------------ items 1, 6: bringup refuses or reports failure
def _arm_config(tmp_path: Path, **controller) -> Path:
    doc = yaml.safe_load((ROOT / "config" / "planar_3link.yaml").read_text())
    for sec in doc.values():
        sec["ros__parameters"]["model_config"] = str(ROOT / "config" / "planar_3link_model.yaml")
    doc["qv_controller"]["ros__parameters"].update(controller)
    p = tmp_path / "arm.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


@pytest.mark.parametrize("change, words", [
    ({"lambda_desired": [5.0, 1.0]}, "wall.x"),
    ({"watchdog_timeout": -1.0}, "watchdog_timeout"),
    ({"watchdog_timout": 0.5}, "watchdog_timout (did you mean watchdog_timeout?)"),
])
def test_bringup_refuses_bad_controller_parameters(capfd, tmp_path, change, words):
    proc = qv(capfd, "bringup", str(_arm_config(tmp_path, **change)), "--duration", "0.05")
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert words in proc.stderr and "Traceback" not in proc.stderr


def test_bringup_reports_a_controller_that_cannot_compute_as_failure(capfd, tmp_path):
    law_params = yaml.safe_load((ROOT / "config" / "planar_3link.yaml").read_text())["qv_controller"][
        "ros__parameters"]["law_params"]
    cfg = _arm_config(tmp_path, law_params=dict(law_params, cond_max=1.0))  # cond(D) > 1: every tick fails
    proc = qv(capfd, "bringup", str(cfg), "--duration", "0.05")
    assert proc.returncode == 1, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "the control law failed" in proc.stderr and "cond" in proc.stderr


def test_bringup_good_run_still_succeeds(capfd, tmp_path):
    proc = qv(capfd, "bringup", str(_arm_config(tmp_path)), "--duration", "0.05", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").is_file()


# ------------------------------------------------------------------ item 4: result files
def test_rerun_clears_its_own_files_and_says_so(capfd, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # not a file of the run: left alone
    proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"notes.txt", "summary.json", "trajectory.npz", "figure.png"}
    proc = qv(capfd, "simulate", "particle_circle", "--t-final", "0.02", "--out", str(out), "--no-plot")
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"notes.txt", "summary.json", "trajectory.npz"}  # no stale figure
    assert "removed" in proc.stdout and "figure.png" in proc.stdout


@pytest.mark.parametrize("args", [
    ("simulate", "particle_circle", "--t-final", "0.02"),
    ("bringup", "config/planar_3link.yaml", "--duration", "0.05"),
    ("demo", "--short"),
])
def test_unwritable_out_refused_before_the_run(capfd, tmp_path, args):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    proc = qv(capfd, *args, "--out", str(blocker / "sub"))
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "not writable" in proc.stderr and "Traceback" not in proc.stderr
    assert "wall_time" not in proc.stdout  # nothing ran


def test_failed_write_leaves_previous_file_and_no_partial_file(tmp_path):
    target = tmp_path / "trajectory.npz"
    runfiles.savez(target, t=np.arange(3.0))
    good = target.read_bytes()

    class Unpicklable:
        def __reduce__(self):
            raise RuntimeError("disk full (simulated by an object numpy cannot store)")

    with pytest.raises(RuntimeError):
        runfiles.savez(target, t=np.arange(5.0), bad=np.array([Unpicklable()], dtype=object))
    assert target.read_bytes() == good  # the earlier complete file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["trajectory.npz"]  # no temporary left behind
    np.testing.assert_array_equal(np.load(target)["t"], np.arange(3.0))
    runfiles.write_json(tmp_path / "summary.json", {"ok": True})
    assert yaml.safe_load((tmp_path / "summary.json").read_text()) == {"ok": True}
