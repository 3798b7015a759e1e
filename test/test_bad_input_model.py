"""Bad models refused where they enter (SPEC §6): ConstrainedSystem.from_urdf checks every
moving body's mass and inertia, the numbers of the URDF and M(q₀) positive definite; constraint mappings
are validated completely; the dynamics and controller nodes refuse such a URDF at start with exit code 2.

References: the physical conditions themselves (mass ≥ 0, I_c ⪰ 0 with the triangle inequality, M ≻ 0
checked by an independent eigen-decomposition), and the unmodified URDF loading fine.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import ModelError

ROOT = Path(__file__).resolve().parent.parent
ARM_URDF = (ROOT / "urdf" / "planar_3link.urdf").read_text()
LINK2_MASS = '<mass value="0.8"/>'
LINK2_INERTIA = 'ixx="0.0004" ixy="0" ixz="0" iyy="0.016667" iyz="0" izz="0.016667"'
WALL = {"type": "point_contact", "frame": "tip", "axes": ["x"], "position": [1.0, 0.0, 0.0]}


def _without_last_inertial(xml: str) -> str:
    i = xml.rfind("<inertial>")
    j = xml.find("</inertial>", i) + len("</inertial>")
    return xml[:i] + xml[j:]


BAD_URDFS = {
    "negative mass": (ARM_URDF.replace(LINK2_MASS, '<mass value="-5"/>'), "mass must be >= 0"),
    "NaN mass": (ARM_URDF.replace(LINK2_MASS, '<mass value="nan"/>'), "link 'link2'"),
    "Inf mass": (ARM_URDF.replace(LINK2_MASS, '<mass value="inf"/>'), "link 'link2'"),
    "text mass": (ARM_URDF.replace(LINK2_MASS, '<mass value="heavy"/>'), "not a number"),
    "indefinite inertia": (ARM_URDF.replace(LINK2_INERTIA, LINK2_INERTIA.replace('iyy="0.016667"', 'iyy="-0.016667"')),
                           "not positive semi-definite"),
    "triangle inequality": (ARM_URDF.replace(LINK2_INERTIA, LINK2_INERTIA.replace('iyy="0.016667"', 'iyy="0.5"')),
                            "triangle inequality"),
    "leaf link without inertial": (_without_last_inertial(ARM_URDF), "not positive definite"),
}


def test_original_urdf_loads_and_is_physical():
    sys_ = ConstrainedSystem.from_urdf(ARM_URDF, [WALL])
    M = sys_.mass_matrix(sys_.neutral())
    assert np.linalg.eigvalsh(M)[0] > 1e-4  # independent check of what from_urdf accepted


@pytest.mark.parametrize("case", sorted(BAD_URDFS))
def test_unphysical_urdf_refused_at_load(case):
    xml, words = BAD_URDFS[case]
    with pytest.raises(ModelError) as ei:
        ConstrainedSystem.from_urdf(xml, [WALL])
    assert words in str(ei.value), str(ei.value)


def test_unphysical_urdf_from_file_and_yaml_refused(tmp_path):
    p = tmp_path / "neg.urdf"
    p.write_text(BAD_URDFS["negative mass"][0])
    with pytest.raises(ModelError, match="link2|joint2"):
        ConstrainedSystem.from_urdf(str(p))
    with pytest.raises(ModelError, match="link2"):
        ConstrainedSystem.from_yaml({"robot": {"urdf": BAD_URDFS["NaN mass"][0]}, "constraints": []})


# ---------------------------------------------------------------------------------------------- constraints
BAD_CONSTRAINTS = {
    "NaN position": ([dict(WALL, position=[float("nan"), 0.0, 0.0])], "position"),
    "length-2 position": ([dict(WALL, position=[1.0, 0.0])], "position"),
    "text position": ([dict(WALL, position="far")], "position"),
    "Inf offset": ([{"type": "loop_closure", "frame_a": "tip", "frame_b": "base_link", "offset": [0, 0, float("inf")]}],
                   "offset"),
    "non-rotation": ([dict(WALL, rotation=[[1, 0, 0], [0, 1, 0], [0, 0, 2]])], "rotation"),
    "duplicate names": ([dict(WALL, name="wall"), dict(WALL, name="wall", axes=["z"])], "wall"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONSTRAINTS))
def test_bad_constraint_mapping_refused(case):
    cons, words = BAD_CONSTRAINTS[case]
    with pytest.raises(ModelError) as ei:
        ConstrainedSystem.from_urdf(ARM_URDF, cons)
    assert words in str(ei.value), str(ei.value)


def test_duplicate_name_refused_by_add_constraint_and_unnamed_repeats_stay_legal():
    sys_ = ConstrainedSystem.from_urdf(ARM_URDF, [dict(WALL, name="wall")])
    with pytest.raises(ModelError, match="wall"):
        sys_.add_constraint(dict(WALL, name="wall", axes=["z"]))
    assert [c.name for c in sys_.constraints] == ["wall"]
    sys_.set_active("wall", False)  # still addressable by its name
    # the same contact listed twice without names (redundant rows) gets distinct generated names
    red = ConstrainedSystem.from_urdf(ARM_URDF, [WALL, WALL])
    names = [c.name for c in red.constraints]
    assert len(set(names)) == 2 and red.m == 2


# ---------------------------------------------------------------------------------------------- nodes
@pytest.mark.parametrize("module", ["qv_dynamics.ros.dynamics_node", "qv_control.ros.controller_node"])
def test_nodes_refuse_unphysical_urdf_with_exit_2(tmp_path, module):
    urdf = tmp_path / "neg.urdf"
    urdf.write_text(BAD_URDFS["negative mass"][0])
    model = tmp_path / "model.yaml"
    model.write_text(f"robot: {{urdf: {urdf}}}\nconstraints:\n"
                     "  - {type: point_contact, name: wall, frame: tip, axes: [x], position: [1.0, 0.0, 0.0]}\n")
    params = tmp_path / "params.yaml"
    extra = ("    joints: [joint1, joint2, joint3]\n    law: quasi_tracking\n"
             "    law_params:\n      coordinates: [tip.z, joint3]\n") if "controller" in module else ""
    params.write_text(f"qv_under_test:\n  ros__parameters:\n    model_config: {model}\n" + extra)
    domain = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 17) % 200
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(domain))
    proc = subprocess.run([sys.executable, "-m", module, "--ros-args", "-r", "__node:=qv_under_test",
                           "--params-file", str(params)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "refused to start" in proc.stderr and "mass must be >= 0" in proc.stderr
    assert "Traceback" not in proc.stderr
