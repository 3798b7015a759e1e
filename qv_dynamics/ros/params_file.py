"""ROS 2 parameters files: checked before rclpy reads them, and the folder a relative path is resolved in.

:func:`check_params_file` reads a file the way rcl's parser will (``node: {ros__parameters: {..}}``,
``/**`` for every node, namespaces as nested mappings) and refuses, in one line naming the file, what rcl
would answer with a 25-line RCLError traceback or what it would take silently and wrongly: a file that does
not exist, is not UTF-8 or is binary, a YAML error (tabs in the indentation, ...), anchors and aliases, a
list or a scalar at the top, a section without ``ros__parameters`` or with other keys beside it, a list
mixing types (``[1, 2.5]``: rcl refuses it) or holding lists or mappings, a key twice, a list longer than
:data:`~qv_dynamics.yamlio.MAX_LIST`. :func:`check_ros_args` does it for every ``--params-file`` of a
process's arguments (the nodes' runner calls it before ``rclpy.init``) and remembers them.

One rule for relative paths: **next to the file that names them**. A path parameter (``model_config``)
given in a parameters file is looked for in that file's folder (:func:`named_path`), then among the
package's names (``config/``); one given on the command line (``-p``) or in-process is relative to the
working folder. So ``ros2 launch ... params_file:=my/arm.yaml`` finds ``my/arm_model.yaml`` from any folder.
The model config itself is read here too (:func:`load_model_config`, :func:`node_model_config`): its relative
``robot.urdf`` is found next to it, by the same rule.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..errors import ModelError
from ..robots import package_share_dir, urdf_next_to
from ..yamlio import load_yaml

PARAMS_KEY = "ros__parameters"
_SCALARS = (bool, int, float, str)
# the parameters files of this process (path, document), in the order rcl applies them (set by check_ros_args)
_PROCESS_FILES: list[tuple[str, dict]] = []


def _type_name(v) -> str:
    return {bool: "boolean", int: "integer", float: "double", str: "string"}.get(type(v), type(v).__name__)


def _check_value(where: str, name: str, value) -> None:
    if value is None or isinstance(value, _SCALARS):
        return
    if not isinstance(value, list):
        raise ModelError(f"{where}: parameter '{name}' has a value of type {type(value).__name__}")
    kinds = {_type_name(x) for x in value}
    if any(not isinstance(x, _SCALARS) for x in value):
        bad = next(x for x in value if not isinstance(x, _SCALARS))
        what = "null" if bad is None else type(bad).__name__
        raise ModelError(f"{where}: parameter '{name}' is a list holding a {what} (a parameter list holds "
                         "numbers, booleans or strings only)")
    if len(kinds) > 1:
        hint = " (write every number with a decimal point: 1.0)" if kinds == {"integer", "double"} else ""
        raise ModelError(f"{where}: parameter '{name}' mixes {' and '.join(sorted(kinds))} values in one list; "
                         f"rcl reads only lists of one type{hint}")


def _check_params(where: str, params: dict, prefix: str = "") -> None:
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            _check_params(where, value, name + ".")
        else:
            _check_value(where, name, value)


def _sections(where: str, doc: dict, ns: str = "") -> list[tuple[str, dict]]:
    """(node key with its namespace, its parameters) of every node section."""
    out = []
    for key, sec in doc.items():
        full = f"{ns}/{str(key).strip('/')}" if ns else str(key)
        if not isinstance(sec, dict):
            raise ModelError(f"{where}: section '{full}' must be a mapping with '{PARAMS_KEY}', got "
                             f"{type(sec).__name__}")
        if PARAMS_KEY in sec:
            if len(sec) > 1:
                raise ModelError(f"{where}: section '{full}' has {sorted(str(k) for k in sec if k != PARAMS_KEY)} "
                                 f"beside '{PARAMS_KEY}' (parameters go inside it)")
            params = sec[PARAMS_KEY]
            if not isinstance(params, dict):
                raise ModelError(f"{where}: '{full}/{PARAMS_KEY}' must be a mapping of parameter names, got "
                                 f"{'nothing' if params is None else type(params).__name__}")
            _check_params(f"{where} [{full}]", params)
            out.append((full, params))
        else:
            if not sec or not all(isinstance(v, dict) for v in sec.values()):
                raise ModelError(f"{where}: section '{full}' has no '{PARAMS_KEY}' (write {full}: "
                                 f"{{{PARAMS_KEY}: {{..}}}})")
            out.extend(_sections(where, sec, full))
    return out


def check_params_file(path) -> dict:
    """The document of a ROS 2 parameters file, checked as in the module doc ({} for an empty file);
    ModelError naming the file and the reason."""
    where = f"parameters file {path}"
    doc = load_yaml(path, "parameters file", aliases=False)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ModelError(f"{where}: a ROS 2 parameters file is a mapping of node names "
                         f"({{node: {{{PARAMS_KEY}: {{..}}}}}}), got a {type(doc).__name__} at the top")
    _sections(where, doc)
    return doc


def node_sections(doc: dict) -> list[tuple[str, dict]]:
    """(key, flat-or-nested parameters) of every node section of a checked document."""
    return _sections("", doc)


def params_files(argv) -> list[str]:
    """The ``--params-file`` arguments inside the ``--ros-args`` parts of ``argv``, in order."""
    out, ros, args = [], False, list(argv or [])
    for i, a in enumerate(args):
        if a == "--ros-args":
            ros = True
        elif a == "--":
            ros = False
        elif ros and a == "--params-file" and i + 1 < len(args):
            out.append(args[i + 1])
    return out


def check_ros_args(argv) -> list[str]:
    """Check every ``--params-file`` of ``argv`` (:func:`check_params_file`) and remember them for
    :func:`named_path`; returns their paths. ModelError on the first bad one."""
    files = [(str(Path(p).expanduser().resolve()), check_params_file(p)) for p in params_files(argv)]
    _PROCESS_FILES[:] = files
    return [f for f, _ in files]


def _matches(key: str, fqn: str) -> bool:
    """rcl's node-name match of a section key (``/**``, ``/*``, exact, with or without the leading '/')."""
    pat = "/" + key.strip("/")
    rx = re.escape(pat).replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
    return re.fullmatch(rx, fqn) is not None


def _flat_get(params: dict, name: str) -> Any:
    node: Any = params
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def naming_file(fqn: str, name: str, value) -> str | None:
    """The last of this process's parameters files whose section for node ``fqn`` sets ``name`` to
    ``value`` (None: the value was named elsewhere: the command line, in-process, a default)."""
    for path, doc in reversed(_PROCESS_FILES):
        for key, params in reversed(node_sections(doc)):
            if _matches(key, fqn) and _flat_get(params, name) == value:
                return path
    return None


def named_path(node, name: str) -> tuple[str, str | None]:
    """(value, folder it is relative to) of the path parameter ``name`` of ``node``: the folder of the
    parameters file that named it (module doc), or None (the working folder)."""
    value = node.get_parameter(name).value
    if not isinstance(value, str) or not value or os.path.isabs(os.path.expanduser(value)):
        return value, None
    path = naming_file(node.get_fully_qualified_name(), name, value)
    return value, (os.path.dirname(path) if path else None)


# ------------------------------------------------------------------ the model config a node loads
def resolve_config_path(path: str, base: str | None = None) -> str:
    """A config file path: next to the file that names it (``base``: that file's folder) or, with ``base``
    None, as given (the working folder); else a name in the package's ``config/`` folder (source tree or
    colcon share directory); a bare robot name (``panda_table``) means ``config/<name>.yaml``."""
    p = Path(path).expanduser()
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    if p.is_file():
        return str(p)
    for share in (package_share_dir() / "config", package_share_dir()):
        for name in (path, f"{path}.yaml"):
            if (share / name).is_file():
                return str(share / name)
    where = f"next to the parameters file naming it ({base}), " if base is not None else ""
    raise ModelError(f"config file '{path}' not found ({where}neither a file nor in "
                     f"{package_share_dir() / 'config'})")


def load_model_config(model_config: str, robot_description: str = "", floating: bool = False,
                      base: str | None = None) -> tuple[object, dict]:
    """(ConstrainedSystem, document) from a model YAML ``{robot: {urdf: ..}, constraints: [..], ...}``;
    ``base``: the folder of the parameters file that named ``model_config`` (:func:`resolve_config_path`).
    A relative ``robot.urdf`` is looked for next to the model config first.

    A non-empty ``robot_description`` (URDF XML, as the ROS parameter of that name) replaces
    ``robot.urdf``. Raises ModelError / UnknownNameError with the reason (bad URDF, missing frame)."""
    from ..model import ConstrainedSystem
    from .messages import JointLayout

    doc: dict = {}
    folder = None
    if model_config:
        path = resolve_config_path(model_config, base)
        doc = load_yaml(path, "model config") or {}
        if not isinstance(doc, dict):
            raise ModelError(f"model config {path} must be a mapping")
        folder = str(Path(path).resolve().parent)
    doc = dict(doc)
    robot = dict(doc.get("robot") or {})
    if robot_description.strip():
        robot["urdf"] = robot_description
    elif folder is not None and isinstance(robot.get("urdf"), str):
        robot["urdf"] = urdf_next_to(robot["urdf"], folder)
    if "urdf" not in robot:
        raise ModelError("no robot: set 'model_config' (YAML with robot.urdf) or 'robot_description'")
    doc["robot"] = robot
    system = ConstrainedSystem.from_yaml(doc)  # (an unknown key of the document refused with the closest name)
    JointLayout.from_system(system, floating)  # 1-DoF joints only (+ a free-flyer root if floating)
    return system, doc


def node_model_config(node, floating: bool = False) -> tuple[object, dict]:
    """:func:`load_model_config` of a node's ``model_config`` and ``robot_description`` parameters, a
    relative ``model_config`` found next to the parameters file that named it
    (:func:`~qv_dynamics.ros.params_file.named_path`)."""
    value, base = named_path(node, "model_config")
    return load_model_config(value, node.get_parameter("robot_description").value, floating, base)


__all__ = ["check_params_file", "check_ros_args", "load_model_config", "named_path", "naming_file", "node_model_config",
           "node_sections", "params_files", "resolve_config_path"]
