"""The qv nodes behind the ros2_control stack built by ``scripts/ros2_control_stack.sh``: runs its two integration
tests (test/test_ros2_control_mock.py, test/test_ros2_control_mujoco.py) and prints their figures — the delay from
the last joint state (or the deactivation request) to the safe output at the effort interfaces, the contact task's
hold, touch-down peak and travel through mujoco_ros2_control, the loop's commands per plant and per wall second —
with the machine's load before and after. Exit code: pytest's (5 when the stack is not built: every test skipped).

    PYTHONPATH=. .venv/bin/python bench/ros2_control_stack.py [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ["test/test_ros2_control_mock.py", "test/test_ros2_control_mujoco.py"]
FIGURES = ("->", "contact ", "loop:", "skipped", "passed", "failed")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="repeat the tests (figures of every run)")
    args = ap.parse_args(argv)
    code = 0
    for k in range(args.runs):
        load0 = os.getloadavg()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-rs", "-p", "no:cacheprovider", *TESTS],
                              cwd=ROOT, capture_output=True, text=True)
        print(f"run {k + 1}: load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f} (2-core machine: {os.cpu_count()} cpus)")
        for line in proc.stdout.splitlines():
            if any(f in line for f in FIGURES):
                print("  " + line.strip().lstrip(".sF"))
        code = code or proc.returncode
    return code


if __name__ == "__main__":
    sys.exit(main())
