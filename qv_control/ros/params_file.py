"""ROS 2 parameters files as the launch files use them (``node: {ros__parameters: ..}``, ``/**`` for every
node), read into flat parameter dictionaries and rclpy ``Parameter`` lists for in-process nodes."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


def load_params_file(path: str | os.PathLike) -> dict[str, dict[str, Any]]:
    """{node_name: {flat.param.name: value}} from a ROS 2 parameters YAML (``node: {ros__parameters: ..}``;
    ``/**`` applies to every node). Relative ``model_config`` paths are made absolute against the file's
    folder when they exist there."""
    from qv_dynamics.errors import ModelError

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ModelError(f"cannot read parameters file {p}: {exc}") from None
    if not isinstance(doc, dict):
        raise ModelError(f"{p}: a ROS 2 parameters file is a mapping of node names")
    common = _flatten(((doc.get("/**") or {}).get("ros__parameters")) or {})
    out: dict[str, dict[str, Any]] = {}
    for key, sec in doc.items():
        if key == "/**":
            continue
        name = key.strip("/").split("/")[-1]
        if not isinstance(sec, dict) or "ros__parameters" not in sec:
            raise ModelError(f"{p}: section '{key}' has no ros__parameters")
        flat = dict(common)
        flat.update(_flatten(sec["ros__parameters"] or {}))
        mc = flat.get("model_config")
        if isinstance(mc, str) and mc and not os.path.isabs(mc) and (p.parent / mc).is_file():
            flat["model_config"] = str((p.parent / mc).resolve())
        out[name] = flat
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
