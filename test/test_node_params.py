"""Node parameters as data: the docs' parameter tables are generated from the tables, the shipped configs
only use declared names, and a node told a misspelled name warns and counts it.

After changing a table, regenerate the docs' tables with ``PYTHONPATH=. .venv/bin/python doc/generate.py``."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.parameter import Parameter  # noqa: E402

from qv_control.ros import params as control_params  # noqa: E402
from qv_control.ros.bringup import load_params_file, to_parameters  # noqa: E402
from qv_dynamics.ros import params as dynamics_params  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# the node names used in config/*.yaml -> their tables
SECTIONS = {"qv_dynamics": dynamics_params.DYNAMICS_NODE, "qv_sim": dynamics_params.SIM_NODE,
            "qv_mujoco": dynamics_params.MUJOCO_NODE, "qv_controller": control_params.CONTROLLER_NODE,
            "qv_legged_mujoco": dynamics_params.LEGGED_MUJOCO_NODE,
            "qv_legged_controller": control_params.CONTROLLER_NODE}
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 13) % 200


def test_docs_parameter_tables_match_the_parameter_tables():
    """doc/reference/generated/parameters.md is generated from the tables (doc/generate.py), never edited."""
    sys.path.insert(0, str(ROOT / "doc"))
    import generate

    assert generate.PARAMETERS.read_text() == generate.parameters_page(), \
        "the docs' parameter tables are out of date: run doc/generate.py"


def test_shipped_configs_use_declared_names_only():
    checked = 0
    for path in sorted((ROOT / "config").glob("*.yaml")):
        try:
            nodes = load_params_file(path)
        except Exception:  # noqa: BLE001 - model/demo YAMLs are not ROS parameter files
            continue
        for node, values in nodes.items():
            table = SECTIONS.get(node)
            if table is None:
                continue
            names = {p.name for p in table}
            unknown = [k for k in values if k not in names and not k.startswith(control_params.LAW_PREFIX)]
            assert unknown == [], f"{path.name}: {node} does not declare {unknown}"
            checked += 1
    assert checked >= 5  # planar_3link + slider_crank (three nodes each) and demo_mujoco


def test_misspelled_parameter_warned_and_counted_read_only_refused():
    from rclpy.context import Context

    from qv_dynamics.ros.dynamics_node import DynamicsNode

    ctx = Context()
    rclpy.init(context=ctx, domain_id=DOMAIN, args=[])
    try:
        node = DynamicsNode("qv_dyn_params", context=ctx, parameter_overrides=to_parameters(
            {"model_config": "planar_3link_model.yaml", "decimaton": 2, "force_scale": 0.02}))
        try:
            assert node.unknown_parameters == ["decimaton (did you mean decimation?)"]
            assert node.force_scale == 0.02
            desc = node.describe_parameter("force_scale")
            assert desc.read_only and "newton" in desc.description
            res = node.set_parameters([Parameter("force_scale", value=0.5)])
            assert not res[0].successful and "read-only" in res[0].reason
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
