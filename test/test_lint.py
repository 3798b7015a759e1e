"""ruff (configured in ruff.toml: pycodestyle, pyflakes, import order, complexity) is clean on the tree."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("qv_dynamics", "qv_control", "test", "bench", "launch")


def ruff_command() -> list[str] | None:
    exe = Path(sys.executable).with_name("ruff")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("ruff")
    return [found] if found else None


def test_ruff_clean():
    cmd = ruff_command()
    if cmd is None:
        pytest.fail("ruff is not installed (it is in requirements.txt: run scripts/setup.sh)")
    proc = subprocess.run(cmd + ["check", "--no-cache", *TARGETS], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
