"""The bench scripts stay runnable: a tiny run of each must finish and print its comparison with Pinocchio.

(Speed figures are not asserted here: they live in bench/ and are read by people, not by CI.)
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *args: str, timeout: float = 240.0) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_bench_dynamics_small_run_matches_pinocchio():
    text = run("dynamics.py", "--states", "3", "--reps", "3")
    assert "pin.constraintDynamics" in text and "arm target" in text
    # the bench checks its own q̈ against Pinocchio before timing: the printed worst error is tiny
    errs = [float(line.split("worst relative error")[1].split()[0]) for line in text.splitlines()
            if "worst relative error" in line]
    assert errs and max(errs) < 1e-8


def test_bench_simulate_small_run():
    text = run("simulate.py", "--repeats", "1", "--horizon", "0.05", "--skip-full")
    assert "Stepper.step cost" in text


@pytest.mark.parametrize("script, option", [("ros_latency.py", "--seconds"), ("contact_task.py", "--seconds"),
                                            ("first_command.py", "--runs")])
def test_bench_ros_latency_parses_its_arguments(script, option):
    assert option in run(script, "--help", timeout=60.0)


def test_bench_legged_small_run():
    text = run("legged.py", "--states", "2", "--reps", "2")
    assert "pin.constraintDynamics" in text and "LeggedLaw.compute" in text


def test_bench_command_schedule_small_run():
    """The schedule replay applies the answer of the state each step starts from as lock-step does (same θ
    RMS to the printed digits), and a late command changes the figure."""
    text = run("command_schedule.py", "--seconds", "1.3", "--stalls", "3")  # one stall schedule of the five
    lines = [ln for ln in text.splitlines() if ln.startswith("  every")]
    assert len(lines) == 3 and "(1.00x) /" in lines[0] and "(1.00x) /" not in lines[1], text
    stall = [ln for ln in text.splitlines() if ln.startswith("  P = ")]
    assert len(stall) == 1 and stall[0].startswith("  P = 3:") and "(1.00x) /" not in stall[0], text
