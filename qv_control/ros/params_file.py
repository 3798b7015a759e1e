"""ROS 2 parameters files as the launch files use them (``node: {ros__parameters: ..}``, ``/**`` for every
node), read into flat parameter dictionaries and rclpy ``Parameter`` lists for in-process nodes."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def load_params_file(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """{node_name: {flat.param.name: value}} from a ROS 2 parameters YAML (``node: {ros__parameters: ..}``;
    ``/**`` applies to every node), checked as rcl would read it
    (:func:`qv_dynamics.ros.params_file.check_params_file`: one ModelError naming the file). A relative
    ``model_config`` is made absolute next to the file (or found among the package's names), the rule the
    nodes follow (:func:`qv_dynamics.ros.params_file.named_path`)."""
    from qv_dynamics.ros.params import resolve_config_path
    from qv_dynamics.ros.params_file import check_params_file, node_sections

    p = Path(path)
    sections = node_sections(check_params_file(p))
    common: dict[str, Any] = {}
    for key, params in sections:
        if key.strip("/") == "**":
            common.update(_flatten(params))
    out: dict[str, dict[str, Any]] = {}
    for key, params in sections:
        if key.strip("/") == "**":
            continue
        flat = dict(common)
        flat.update(_flatten(params))
        mc = flat.get("model_config")
        if isinstance(mc, str) and mc and not os.path.isabs(os.path.expanduser(mc)):
            flat["model_config"] = str(Path(resolve_config_path(mc, str(p.resolve().parent))).resolve())
        out[key.strip("/").split("/")[-1]] = flat
    return out


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def to_parameters(flat: dict[str, Any]) -> list:
    """rclpy Parameters for ``parameter_overrides`` (numeric lists with ints and floats become doubles)."""
    from rclpy.parameter import Parameter

    params = []
    for k, v in flat.items():
        if isinstance(v, (list, tuple)):
            if v and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v) \
                    and any(isinstance(x, float) for x in v):
                v = [float(x) for x in v]
            v = list(v)
        params.append(Parameter(k, value=v))
    return params
