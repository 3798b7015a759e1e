"""Locate robot descriptions: the package's own ``urdf/`` folder and ``example-robot-data``."""
from __future__ import annotations

import os
import site
import sys
from pathlib import Path

#: Short names for robots shipped by example-robot-data (path below its ``robots/`` folder).
EXAMPLE_ROBOTS = {
    "panda": "panda_description/urdf/panda.urdf",
    "panda_hand": "panda_description/urdf/panda.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "ur10": "ur_description/urdf/ur10_robot.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "anymal": "anymal_b_simple_description/robots/anymal.urdf",      # ANYmal B (kept for old configs)
    "anymal_b": "anymal_b_simple_description/robots/anymal.urdf",
    "anymal_c": "anymal_c_simple_description/urdf/anymal.urdf",      # the floating-base lecture's robot
    "talos": "talos_data/robots/talos_reduced.urdf",
    "talos_full": "talos_data/robots/talos_full_v2.urdf",
}


#: Joints locked by default for a short name (the Panda's fingers: "panda" is the 7-DoF arm).
DEFAULT_LOCKED = {"panda": ("panda_finger_joint1", "panda_finger_joint2")}


def example_robot_data_dir() -> Path:
    """The ``robots/`` folder of example-robot-data (pip ``example-robot-data`` or /opt/openrobots)."""
    candidates = []
    env = os.environ.get("EXAMPLE_ROBOT_DATA_DIR")
    if env:
        candidates.append(Path(env))
    for base in list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path:
        candidates.append(Path(base) / "cmeel.prefix/share/example-robot-data/robots")
    candidates.append(Path("/opt/openrobots/share/example-robot-data/robots"))
    for c in candidates:
        if c.is_dir():
            return c
    raise FileNotFoundError(
        "example-robot-data not found: `pip install example-robot-data` or set EXAMPLE_ROBOT_DATA_DIR")


def package_share_dir() -> Path:
    """The folder holding ``urdf/``, ``config/`` and ``launch/``: the source tree or the ament share dir."""
    here = Path(__file__).resolve().parent.parent
    if (here / "urdf").is_dir():
        return here
    try:  # installed with colcon: share/qv_ros
        from ament_index_python.packages import get_package_share_directory

        return Path(get_package_share_directory("qv_ros"))
    except Exception:  # noqa: BLE001 - ament_index is optional outside ROS
        prefix = Path(sys.prefix) / "share" / "qv_ros"
        return prefix


def resolve_urdf(name_or_path: str, base: str | os.PathLike | None = None) -> str:
    """Turn ``panda`` / ``urdf/slider_crank.urdf`` / an absolute path into an existing file path.

    A string holding XML (starts with ``<``) is returned unchanged. A relative path is looked for next to
    the file that names it (``base``: that file's folder, e.g. the model config's), or in the working folder
    when ``base`` is None (named on the command line or in-process), then among the package's and
    example-robot-data's names.
    """
    s = str(name_or_path).strip()
    if s.startswith("<"):
        return s
    if s in EXAMPLE_ROBOTS:
        return str(example_robot_data_dir() / EXAMPLE_ROBOTS[s])
    p = Path(s).expanduser()
    if not p.is_absolute() and base is not None:
        p = Path(base) / p
    if p.is_file():
        return str(p)
    for share in (package_share_dir(), package_share_dir() / "urdf"):
        if (share / s).is_file():
            return str(share / s)
        if (share / f"{s}.urdf").is_file():
            return str(share / f"{s}.urdf")
    where = f"next to the file naming it ({base}), " if base is not None and not Path(s).is_absolute() else ""
    raise FileNotFoundError(f"robot description '{s}' not found ({where}not a file, not one of "
                            f"{sorted(EXAMPLE_ROBOTS)})")


def urdf_next_to(urdf: str, folder) -> str:
    """``robot.urdf`` of a model config in ``folder``: the file next to it when it is a relative path that
    exists there, else as written (XML, an example-robot-data or package name)."""
    if urdf.lstrip().startswith("<") or Path(urdf).expanduser().is_absolute():
        return urdf
    local = Path(folder) / urdf
    return str(local) if local.is_file() else urdf


def scale_inertias(system, mass_scale: float = 1.1, inertia_scale: float | None = None) -> None:
    """Model error for robustness studies and plant/model mismatch: multiply every body's mass (and rotational
    inertia, by ``inertia_scale``, default = ``mass_scale``) of ``system.model`` in place; centres of mass
    unchanged. ``system.data`` is rebuilt."""
    import pinocchio as pin

    s_m = float(mass_scale)
    s_i = s_m if inertia_scale is None else float(inertia_scale)
    model = system.model
    for i in range(1, model.njoints):
        Y = model.inertias[i]
        model.inertias[i] = pin.Inertia(Y.mass * s_m, Y.lever.copy(), Y.inertia * s_i)
    system.data = model.createData()
