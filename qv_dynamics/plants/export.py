"""``qv export-urdf`` and ``qv export-mjcf``: the files the launch files hand to ros2_control, Gazebo and
mujoco_ros2_control, written from a model config (robot, constraints, initial state, scene).

    qv export-urdf --target {mock,gazebo,mujoco} MODEL_CONFIG OUT.urdf [--controllers FILE] [--mjcf FILE]
    qv export-mjcf MODEL_CONFIG OUT.xml

``--controllers`` (a ros2_control controllers YAML such as ``config/controllers.yaml``) supplies the
actuated joints (``effort_controller.joints``) and the F/T sensor (``force_torque_sensor_broadcaster``'s
``sensor_name`` and ``frame_id``); without it every joint is actuated and the sensor is ``tool_ft`` at
the tool frame. The launch files call :func:`target_urdf` / :func:`export_mjcf_file` the same way.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..errors import ModelError, QVError
from ..robots import urdf_next_to
from ..yamlio import load_yaml, read_text
from .urdf_targets import TARGETS, TargetSpec, rewrite_urdf


def load_config(model_config: str):
    """(system, doc, joint names, q0, q̇0) of a model config (a path, or a file in the package's
    ``config/``). The initial state (model joint order, zero when the config has no ``initial``) is
    projected onto the active constraints exactly as the built-in simulator starts (``Stepper.correct``),
    so every path -- one-process bringup, mock, Gazebo, MuJoCo -- starts from the same state."""
    from ..model import ConstrainedSystem
    from ..robots import package_share_dir

    path = Path(model_config)
    if not path.is_file() and (package_share_dir() / "config" / model_config).is_file():
        path = package_share_dir() / "config" / model_config
    doc = load_yaml(path, "model config") or {}
    if not isinstance(doc, dict) or not isinstance(doc.get("robot"), dict):
        raise ModelError(f"model config {path} needs a 'robot' mapping with 'urdf'")
    if isinstance(doc["robot"].get("urdf"), str):  # a relative URDF path: next to the model config
        doc = dict(doc, robot=dict(doc["robot"], urdf=urdf_next_to(doc["robot"]["urdf"], path.resolve().parent)))
    system = ConstrainedSystem.from_yaml(doc)
    model = system.model
    if system.floating_base or model.nq != model.nv:
        raise ModelError("export needs a fixed-base robot with 1-DoF joints (revolute, prismatic)")
    names = [model.names[j] for j in range(1, model.njoints) if model.joints[j].nv == 1]
    init = doc.get("initial") or {}
    q0 = np.asarray(init.get("q", np.zeros(len(names))), float)
    qdot0 = np.asarray(init.get("qdot", np.zeros(len(names))), float)
    for what, v in (("initial.q", q0), ("initial.qdot", qdot0)):
        if v.shape != (len(names),) or not np.all(np.isfinite(v)):
            raise ModelError(f"{what} must be {len(names)} finite numbers (joints {names}), got {v.tolist()}")
    if any(c.active for c in system.constraints):
        from ..sim.stepper import Stepper  # the built-in simulator's start: initial state made consistent

        q0, qdot0 = Stepper(system, "projection").correct(q0, qdot0)
    return system, doc, names, q0, qdot0


def controllers_info(controllers_file: str) -> tuple[list[str] | None, tuple[str, str] | None]:
    """(effort controller joints, (F/T sensor name, frame)) from a controllers YAML ('' -> None, None);
    ModelError naming the file and the entry when it cannot be read or has the wrong shape."""
    if not controllers_file:
        return None, None
    doc = load_yaml(controllers_file, "controllers file") or {}
    if not isinstance(doc, dict):
        raise ModelError(f"controllers file {controllers_file} must be a mapping of controller names")

    def params(name: str) -> dict:
        sec = doc.get(name) or {}
        sec = sec.get("ros__parameters") or {} if isinstance(sec, dict) else sec
        if not isinstance(sec, dict):
            raise ModelError(f"controllers file {controllers_file}: '{name}.ros__parameters' must be a mapping")
        return sec

    if not isinstance(doc, dict):
        raise ModelError(f"controllers file {controllers_file}: expected a mapping of controller names")
    joints = params("effort_controller").get("joints")
    if joints and (not isinstance(joints, list) or not all(isinstance(j, str) for j in joints)):
        raise ModelError(f"controllers file {controllers_file}: effort_controller joints must be a list of "
                         f"names, got {joints!r}")
    ft = params("force_torque_sensor_broadcaster")
    sensor = (str(ft["sensor_name"]), str(ft.get("frame_id", "") or "")) if ft.get("sensor_name") else None
    return (list(joints) if joints else None), sensor


def target_urdf(model_config: str, target: str, controllers_file: str = "", mjcf_file: str = "",
                headless: bool = False, keep_hardware: bool = False) -> str:
    """The URDF of ``model_config``'s robot rewritten for ``target`` (mock | gazebo | mujoco);
    ``keep_hardware`` keeps the URDF's own hardware plugin (a real robot) and adds the rest."""
    from ..robots import resolve_urdf
    from .mjcf_export import tool_frame_of

    system, doc, names, q0, qdot0 = load_config(model_config)
    src = resolve_urdf(doc["robot"]["urdf"])
    xml = src if src.lstrip().startswith("<") else read_text(src, "URDF")
    actuated, sensor = controllers_info(controllers_file)
    tool = tool_frame_of(system, doc)
    if sensor is None:
        sensor = ("tool_ft", tool)
    elif not sensor[1]:
        sensor = (sensor[0], tool)
    frames = [c.frame for c in system.constraints if c.frame] + [c.frame_b for c in system.constraints if c.frame_b]
    spec = TargetSpec(joints=names, q0=dict(zip(names, q0)), qdot0=dict(zip(names, qdot0)), actuated=actuated,
                      locked=list(doc["robot"].get("locked_joints") or _default_locked(doc)),
                      constraint_frames=frames, ft_sensor=sensor, controllers_file=controllers_file,
                      mjcf_file=mjcf_file, headless=headless, keep_hardware=keep_hardware)
    return rewrite_urdf(xml, target, spec)


def _default_locked(doc: dict) -> tuple:
    from ..robots import DEFAULT_LOCKED

    return DEFAULT_LOCKED.get(str(doc["robot"]["urdf"]), ())


def export_mjcf_text(model_config: str) -> str:
    """MJCF (robot + scene + constraints + initial keyframe) of a model config."""
    from .mjcf_export import export_mjcf

    system, doc, _, q0, qdot0 = load_config(model_config)
    return export_mjcf(system, doc, q0, qdot0)


def write_text(path: str, text: str) -> str:
    """Write via a temporary file and rename (no half-written file, and no temporary left, on failure);
    returns the path. A folder at ``path`` is refused (ModelError) before anything is written."""
    from .. import runfiles

    p = _output_file(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        runfiles.write_text(p, text)
    except OSError as exc:
        raise ModelError(f"cannot write '{p}': {exc.strerror or exc}") from None
    return str(p)


def _output_file(path: str) -> Path:
    """``path`` as an output file: ModelError when it is a folder (checked before the export computes)."""
    p = Path(path)
    if p.is_dir():
        raise ModelError(f"output '{p}' is a folder: give a file name (e.g. {p / ('robot' + (p.suffix or '.urdf'))})")
    return p


def main_urdf(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv export-urdf", description="URDF for ros2_control mock, Gazebo or MuJoCo")
    ap.add_argument("--target", required=True, choices=TARGETS)
    ap.add_argument("model_config", help="model YAML (robot, constraints, initial, scene)")
    ap.add_argument("out", help="output URDF path")
    ap.add_argument("--controllers", default="", help="controllers YAML (actuated joints, F/T sensor; Gazebo plugin)")
    ap.add_argument("--mjcf", default="", help="target mujoco: the MJCF file (written next to OUT if absent)")
    ap.add_argument("--headless", action="store_true", help="target mujoco: no viewer window")
    args = ap.parse_args(argv)
    return _run(lambda: _export_urdf(args))


def _export_urdf(args) -> None:
    _output_file(args.out)
    mjcf = args.mjcf
    if args.target == "mujoco" and not mjcf:
        mjcf = str(Path(args.out).with_suffix(".xml").resolve())
        print(f"wrote {write_text(mjcf, export_mjcf_text(args.model_config))}")
    controllers = str(Path(args.controllers).resolve()) if args.controllers else ""
    xml = target_urdf(args.model_config, args.target, controllers, mjcf, args.headless)
    print(f"wrote {write_text(args.out, xml)}")


def main_mjcf(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv export-mjcf", description="MJCF (robot + scene) of a model config")
    ap.add_argument("model_config")
    ap.add_argument("out")
    args = ap.parse_args(argv)
    return _run(lambda: _output_file(args.out) and print(
        f"wrote {write_text(args.out, export_mjcf_text(args.model_config))}"))


def _run(fn) -> int:
    try:
        fn()
    except (QVError, OSError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
