"""The Panda table task of the built-in simulator: ``qv bringup panda_table`` resolves the robot
name to config/panda_table.yaml and runs sim + dynamics + controller lock-step; the tool stays on the table
and presses the commanded force (reference: the config's λ_d and the rigid constraint itself)."""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("rclpy")

from qv_control.ros.bringup import main  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 14) % 200


def test_bringup_panda_table_by_name(capfd):
    assert main(["panda_table", "--duration", "0.5", "--domain-id", str(DOMAIN)]) == 0
    text = capfd.readouterr().out
    out = json.loads(text[text.index("{"):text.rindex("}") + 1])
    assert out["commands"] >= 500 and out["safe_commands"] == 0
    assert out["force_rms_error_rel"] < 1e-12       # measured 1e-15: λ = λ_d exactly (rigid contact)
    assert out["motion_rms_error"] < 1e-4           # measured 6e-7 over 10 s (square path)
