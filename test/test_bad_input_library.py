"""Bad input to the library refused where it enters, with a named exception that names the input.

Model YAML keys (a misspelled key refused with the closest known one), constraint specs that would give
all-zero rows or read a string as a boolean, gains of every law, states whose finite entries overflow the
dynamics, a zero quaternion of a mid-tree free joint, and simulations that would take no step or not fit in
memory. References: the unmodified inputs accepted (so each refusal is caused by the one bad value), the
physical meaning of the refused value (a frame no joint moves has Jacobian rows of zeros: checked on the
Jacobian itself) and float64's range (x·x overflows for |x| > ~1.34e154).
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from qv_dynamics import ConstrainedSystem, simulate
from qv_dynamics.errors import DimensionError, ModelError, NonFiniteError, QVError

ROOT = Path(__file__).resolve().parent.parent
ARM_URDF = (ROOT / "urdf" / "planar_3link.urdf").read_text()
WALL = {"type": "point_contact", "name": "wall", "frame": "tip", "axes": ["x"], "position": [1.0, 0.0, 0.0]}
Q0 = np.array([0.3, 0.6, -0.9])


# ------------------------------------------------------------------ model YAML keys (item 9)
ROBOT = {"urdf": ARM_URDF}


@pytest.mark.parametrize("doc, words", [
    ({"robot": ROBOT, "constrants": [WALL]}, "constrants (did you mean constraints?)"),
    ({"robot": dict(ROBOT, floting_base=True), "constraints": [WALL]}, "floting_base (did you mean floating_base?)"),
    ({"robot": ROBOT, "constraints": [WALL], "intial": {"q": [0, 0, 0]}}, "intial (did you mean initial?)"),
    ({"robot": ROBOT, "constraints": [WALL], "initial": {"qdto": [0, 0, 0]}}, "qdto (did you mean qdot?)"),
    ({"robot": ROBOT, "constraints": [dict(WALL, postion=[1, 0, 0])]}, "postion (did you mean position?)"),
])
def test_misspelled_model_key_refused_with_the_closest_name(doc, words):
    good = ConstrainedSystem.from_yaml({"robot": {"urdf": ARM_URDF}, "constraints": [WALL], "initial": {"q": [0] * 3}})
    assert good.m == 1
    with pytest.raises(ModelError) as ei:
        ConstrainedSystem.from_yaml(doc)
    assert words in str(ei.value), str(ei.value)


def test_misspelled_key_refused_by_the_export_and_the_nodes_model_loader(tmp_path):
    from qv_dynamics.plants.export import load_config
    from qv_dynamics.ros.params import load_model_config

    doc = yaml.safe_load((ROOT / "config" / "planar_3link_model.yaml").read_text())
    doc["robot"]["urdf"] = str(ROOT / "urdf" / "planar_3link.urdf")
    doc["constrants"] = doc.pop("constraints")
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(doc))
    for load in (load_config, load_model_config):
        with pytest.raises(ModelError, match="did you mean constraints"):
            load(str(path))


# ------------------------------------------------------------------ constraints without rows, YAML booleans (item 16)
@pytest.mark.parametrize("spec, words", [
    ({"type": "weld", "frame": "base_link"}, "fixed to the world"),
    ({"type": "weld", "frame": "universe"}, "fixed to the world"),
    ({"type": "point_contact", "frame": "base_link", "axes": ["z"]}, "fixed to the world"),
    (dict(WALL, axes=[]), "'axes' is empty"),
    (dict(WALL, axes="x"), "'axes' must be a list"),
    ({"type": "loop_closure", "frame_a": "link3", "frame_b": "tip"}, "one rigid body"),
    (dict(WALL, active="no"), "'active': expected true or false, got 'no'"),
    (dict(WALL, active=1), "'active': expected true or false"),
])
def test_constraint_without_rows_or_with_a_string_boolean_refused(spec, words):
    with pytest.raises(ModelError) as ei:
        ConstrainedSystem.from_urdf(ARM_URDF, [spec])
    assert words in str(ei.value), str(ei.value)


def test_frames_refused_as_fixed_have_all_zero_jacobian_rows_and_moving_ones_do_not():
    """The reason of the refusal, checked on the kinematics: base_link's Jacobian is zero at random q."""
    sys_ = ConstrainedSystem.from_urdf(ARM_URDF)
    model, data = sys_.model, sys_.model.createData()
    for q in np.random.default_rng(3).uniform(-2, 2, (5, 3)):
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        for frame, zero in (("base_link", True), ("universe", True), ("tip", False)):
            J = pin.getFrameJacobian(model, data, model.getFrameId(frame), pin.LOCAL_WORLD_ALIGNED)
            assert (np.abs(J).max() == 0.0) == zero, frame
    with pytest.raises(ModelError, match="floating_base: expected true or false"):
        ConstrainedSystem.from_yaml({"robot": {"urdf": ARM_URDF, "floating_base": "no"}})


# ------------------------------------------------------------------ gains of every law (item 10)
GAIN = re.compile(r"^(k[a-z]*(_[a-z]+)?|W|kappa|cond_max|integral_limit|carry_min_time)$")


def _law_args(name: str) -> dict:
    if name in ("osc", "impedance"):
        return dict(frame="tip", contact="wall")
    return dict(coordinates=["tip.z", "joint3"], **({"actuated": ["joint1", "joint2", "joint3"]}
                                                     if name == "passive" else {}))


def _gain_names(cls) -> list[str]:
    """The gain parameters make_law accepts for ``cls`` (its __init__ and those it forwards **kw to)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        sig = inspect.signature(klass.__init__).parameters
        names |= {p for p, v in sig.items() if GAIN.match(p) and v.kind != v.VAR_KEYWORD}
        if not any(v.kind == v.VAR_KEYWORD for v in sig.values()):
            break
    return sorted(names)


@pytest.mark.parametrize("law", ["quasi_tracking", "quasi_setpoint", "pidc", "pidc_force", "passive", "osc",
                                 "osc_constrained", "impedance"])
def test_every_gain_of_every_law_refuses_nan_inf_negative_and_text(law):
    from qv_control import make_law
    from qv_control.laws import LAWS
    from qv_control.laws.base import GainError

    system = ConstrainedSystem.from_urdf(ARM_URDF, [WALL])
    make_law(law, system, **_law_args(law))  # the defaults are accepted
    gains = _gain_names(LAWS[law])
    assert len(gains) >= 5, gains
    for gain in gains:
        for bad in (float("nan"), float("inf"), -100.0, "abc"):
            with pytest.raises(GainError) as ei:
                make_law(law, system, **_law_args(law), **{gain: bad})
            assert gain in str(ei.value), (gain, bad, str(ei.value))


def test_impedance_gains_refused_and_its_torque_finite_with_good_ones():
    from qv_control import State, make_law
    from qv_control.laws.base import GainError

    system = ConstrainedSystem.from_urdf(ARM_URDF, [WALL])
    for kw in ({"kp_pos": float("nan")}, {"kp_pos": float("inf")}, {"kp_pos": -100.0}, {"kd_pos": float("nan")},
               {"kp_rot": -1.0}, {"kd_rot": float("nan")}):
        with pytest.raises(GainError, match=next(iter(kw))):
            make_law("impedance", system, frame="tip", contact="wall", **kw)
    law = make_law("impedance", system, frame="tip", contact="wall", kp_pos=300.0)
    assert np.all(np.isfinite(law.compute(State(0.0, Q0, np.zeros(3)), None)))
    # rotation left free (kp_rot = kd_rot = 0, as the formulation cases' tool points): accepted, finite
    free = make_law("impedance", system, frame="tip", contact="wall", kp_pos=300.0, kp_rot=0.0, kd_rot=0.0)
    assert np.all(np.isfinite(free.compute(State(0.0, Q0, np.zeros(3)), None)))


# ------------------------------------------------------------------ states beyond float64's range (item 12)
@pytest.mark.parametrize("law", ["quasi_tracking", "quasi_setpoint", "pidc", "pidc_force", "passive"])
def test_overflowing_state_refused_and_large_finite_one_still_computed(law):
    from qv_control import State, make_law

    law_ = make_law(law, ConstrainedSystem.from_urdf(ARM_URDF, [WALL]), **_law_args(law))
    tau = law_.compute(State(0.0, Q0, np.array([1e153, 0.0, 0.0])), None)  # x·x = 1e306: finite
    assert np.all(np.isfinite(tau))
    for v in (1e155, 1e200, -1e300):  # x·x overflows: these gave NaN torques
        with np.errstate(over="ignore"), pytest.raises(NonFiniteError, match="state.qdot: entries too large"):
            law_.compute(State(0.0, Q0, np.array([v, 0.0, 0.0])), None)
    with np.errstate(over="ignore"), pytest.raises(NonFiniteError, match="state.q: entries too large"):
        law_.compute(State(0.0, [1e160, 0.0, 0.0], [0.0, 0.0, 0.0]), None)


def test_zero_quaternion_of_the_two_arm_models_box_refused():
    from qv_control import State, make_law

    system = ConstrainedSystem.from_yaml(str(ROOT / "config" / "bimanual_model.yaml"))
    q = np.array(yaml.safe_load((ROOT / "config" / "bimanual_model.yaml").read_text())["initial"]["q"], float)
    assert system.unit_norm_parts() == [("box_joint", 3, 7)] and not system.floating_base
    system.check_q(q)  # the config's own q: unit quaternion
    law = make_law("passive", system, coordinates=[f"{s}_panda_joint{i}" for s in ("left", "right")
                                                   for i in range(1, 8)][:system.nv - system.m],
                   actuated=[n for n in system.joint_names if "panda" in n])
    for quat in ([0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]):
        bad = q.copy()
        bad[3:7] = quat
        with pytest.raises(DimensionError, match="box_joint' quaternion"):
            system.check_q(bad)
        with pytest.raises(DimensionError, match="box_joint' quaternion"):
            law.compute(State(0.0, bad, np.zeros(system.nv)), None)


# ------------------------------------------------------------------ simulations (items 5, 14)
def test_simulation_without_a_step_or_beyond_memory_or_negative_baumgarte_refused():
    from qv_dynamics.sim.trajectory import RecordSizeError, record_budget

    system = ConstrainedSystem.from_urdf(ARM_URDF, [WALL])
    with pytest.raises(QVError, match="no step"):
        simulate(system, Q0, np.zeros(3), t_final=5.0, dt=1e9)
    steps = int(2 * record_budget() / (8 * (3 + 3 + 3 + 1 + 10))) + 1  # more than the memory can hold
    with pytest.raises(RecordSizeError, match="GiB"):
        simulate(system, Q0, np.zeros(3), t_final=steps * 1e-3, dt=1e-3)
    with pytest.raises(QVError, match="baumgarte"):
        simulate(system, Q0, np.zeros(3), t_final=0.01, dt=1e-3, method="kkt_baumgarte", baumgarte=(-5.0, -5.0))
    tr = simulate(system, Q0, np.zeros(3), t_final=0.01, dt=1e-3, method="kkt_baumgarte", baumgarte=(0.0, 20.0))
    assert tr.ok and tr.stats["steps"] == 10
