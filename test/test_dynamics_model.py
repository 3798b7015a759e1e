"""ConstrainedSystem: URDF/YAML loading, evaluate() against Pinocchio's own algorithms, anchoring and
contact switching (set_active)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import yaml
from models import prismatic_arm

from qv_dynamics import ConstrainedSystem, ModelError


def test_evaluate_against_rnea_crba_and_frames():
    """M (full symmetric) = CRBA, h = RNEA(q, q̇, 0), g = RNEA(q, 0, 0), C q̇ = h − g; A and Φ of a point
    contact from the frame placement/Jacobian, on fresh Pinocchio data."""
    system = ConstrainedSystem.from_urdf("solo12", floating_base=True, constraints=[
        {"type": "point_contact", "frame": "FL_FOOT", "name": "fl"},
        {"type": "point_contact", "frame": "HR_FOOT", "axes": ["z"], "position": [0.0, 0.0, -0.3]}])
    model = system.model
    data = model.createData()
    rng = np.random.default_rng(0)
    for _ in range(10):
        q, qd = system.random_configuration(rng), rng.normal(size=system.nv)
        t = system.evaluate(q, qd)
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        assert np.abs(t.M - M).max() < 1e-12 and np.array_equal(t.M, t.M.T)
        assert np.abs(t.h - pin.rnea(model, data, q, qd, np.zeros(system.nv))).max() < 1e-10
        assert np.abs(t.g - pin.rnea(model, data, q, np.zeros(system.nv), np.zeros(system.nv))).max() < 1e-10
        assert np.abs(t.C @ qd - (t.h - t.g)).max() < 1e-10
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        fid = model.getFrameId("HR_FOOT")
        J = pin.getFrameJacobian(model, data, fid, pin.LOCAL_WORLD_ALIGNED)
        assert np.abs(t.A[3] - J[2]).max() < 1e-12
        assert abs(t.phi[3] - (data.oMf[fid].translation[2] + 0.3)) < 1e-12
        assert t.row_labels == ["fl.x", "fl.y", "fl.z", "point_contact_HR_FOOT.z"]


def test_simulator_fast_path_contract_matches_evaluate():
    """_stack after forwardKinematics(q, q̇, 0) + computeJointJacobians + frames (used by the simulator)
    returns the same Φ, A, Ȧq̇ as evaluate (which takes J̇q̇ from computeCoriolisMatrix)."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": "panda_hand"},
        {"type": "weld", "frame": "panda_link5", "axes": ["y", "rx", "rz"]},
        {"type": "loop_closure", "frame_a": "panda_hand", "frame_b": "panda_link3", "axes": ["x", "ry"]}])
    rng = np.random.default_rng(1)
    for _ in range(5):
        q, qd = system.random_configuration(rng), rng.normal(size=7)
        t = system.evaluate(q, qd)
        pin.forwardKinematics(system.model, system.data, q, qd, np.zeros(7))
        pin.computeJointJacobians(system.model, system.data, q)
        pin.updateFramePlacements(system.model, system.data)
        phi, A, ad = system._stack(q, qd)
        assert np.abs(phi - t.phi).max() < 1e-14 and np.abs(A - t.A).max() < 1e-14
        assert np.abs(ad - t.Adot_qdot).max() < 1e-12
        phi2, A2 = system.constraint_rows(q)
        assert np.abs(phi2 - t.phi).max() < 1e-14 and np.abs(A2 - t.A).max() < 1e-14


def test_from_yaml_file_and_dict(tmp_path):
    doc = {"robot": {"urdf": prismatic_arm(1000.0), "gravity": [0, 0, -9810.0]},
           "constraints": [{"type": "point_contact", "frame": "tip", "axes": ["z"], "name": "table"},
                           {"type": "weld", "frame": "hand", "axes": ["rz"], "active": False}]}
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(doc))
    for src in (path, doc):
        system = ConstrainedSystem.from_yaml(src)
        assert system.nv == 4 and system.m == 1 and system.row_labels == ["table.z"]
        assert np.allclose(system.model.gravity.linear, [0, 0, -9810.0])
        assert [c.name for c in system.constraints] == ["table", "weld_hand"]
        assert system.joint_names == ["slide_x", "shoulder", "elbow", "wrist"]
        assert system.joint_v_index("elbow") == 2
    panda = ConstrainedSystem.from_yaml({"robot": {"urdf": "panda"}, "constraints": []})
    assert panda.nv == 7 and panda.m == 0
    with pytest.raises(ModelError, match="'robot' mapping"):
        ConstrainedSystem.from_yaml({"constraints": []})
    with pytest.raises(ModelError, match="robot.urdf is required"):
        ConstrainedSystem.from_yaml({"robot": {"floating_base": True}})
    bad = tmp_path / "bad.yaml"
    bad.write_text("robot: [unclosed")
    with pytest.raises(ModelError, match="does not parse as YAML"):
        ConstrainedSystem.from_yaml(bad)
    with pytest.raises(ModelError, match="cannot read"):
        ConstrainedSystem.from_yaml(tmp_path / "missing.yaml")


def test_set_active_switches_rows_and_reanchors():
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": "panda_hand", "name": "tool"},
        {"type": "point_contact", "frame": "panda_link4", "axes": ["z"], "name": "fixed",
         "position": [0.0, 0.0, 0.5]}])
    rng = np.random.default_rng(2)
    q0, q1 = system.random_configuration(rng), system.random_configuration(rng)
    t0 = system.evaluate(q0, np.zeros(7))
    assert t0.m == 4 and np.abs(t0.phi[:3]).max() == 0.0            # anchored at the first evaluation
    p0 = system.frame_placement(q0, "panda_hand").translation
    t1 = system.evaluate(q1, np.zeros(7))
    p1 = system.frame_placement(q1, "panda_hand").translation
    assert np.abs(t1.phi[:3] - (p1 - p0)).max() < 1e-14              # anchor kept while active
    system.set_active("tool", False)
    t2 = system.evaluate(q1, np.zeros(7))
    assert t2.m == 1 and t2.row_labels == ["fixed.z"] and system.m == 1
    assert [c.name for c in system.active_constraints] == ["fixed"]
    system.set_active("tool", True)                                   # contact made again at q1
    t3 = system.evaluate(q1, np.zeros(7))
    assert t3.m == 4 and np.abs(t3.phi[:3]).max() == 0.0
    assert t3.row_labels == ["tool.x", "tool.y", "tool.z", "fixed.z"]
    # explicit positions are never re-anchored
    system.set_active("fixed", False)
    system.set_active("fixed", True)
    z4 = system.frame_placement(q1, "panda_link4").translation[2]
    assert abs(system.evaluate(q1, np.zeros(7)).phi[3] - (z4 - 0.5)) < 1e-14
    # reanchor=False keeps the old anchor
    system.set_active("tool", False)
    system.set_active("tool", True, reanchor=False)
    t5 = system.evaluate(q0, np.zeros(7))
    p0b = system.frame_placement(q0, "panda_hand").translation
    assert np.abs(t5.phi[:3] - (p0b - p1)).max() < 1e-14


def test_weld_anchor_and_orientation_error():
    system = ConstrainedSystem.from_urdf("ur5", constraints=[{"type": "weld", "frame": "tool0"}])
    rng = np.random.default_rng(3)
    q0 = system.random_configuration(rng)
    assert np.abs(system.evaluate(q0, np.zeros(6)).phi).max() < 1e-14
    q1 = q0.copy()
    q1[5] += 0.2                                   # rotate the last joint: orientation error of 0.2 rad
    phi = system.evaluate(q1, np.zeros(6)).phi
    assert abs(np.linalg.norm(phi[3:]) - 0.2) < 1e-12 and np.linalg.norm(phi[:3]) < 1e-12
    system.anchor(q1, force=True)
    assert np.abs(system.evaluate(q1, np.zeros(6)).phi).max() < 1e-14


def _urdf_effort_limits(name: str) -> dict[str, float]:
    """<limit effort> of every joint, read from the URDF file with an XML parser (not Pinocchio)."""
    import xml.etree.ElementTree as ET

    from qv_dynamics.robots import resolve_urdf

    root = ET.parse(resolve_urdf(name)).getroot()
    return {j.get("name"): float(j.find("limit").get("effort")) for j in root.iter("joint")
            if j.find("limit") is not None and j.get("type") in ("revolute", "prismatic", "continuous")}


def test_locked_joints_and_effort_limits():
    arm, hand = ConstrainedSystem.from_urdf("panda"), ConstrainedSystem.from_urdf("panda_hand")
    assert (arm.nv, hand.nv) == (7, 9)
    urdf = _urdf_effort_limits("panda")
    # the arm keeps the seven arm joints' URDF limits, in velocity order (fingers locked away)
    np.testing.assert_array_equal(arm.effort_limits(), [urdf[j] for j in arm.joint_names])
    np.testing.assert_array_equal(hand.effort_limits(), [urdf[j] for j in hand.joint_names])
    assert arm.joint_names == [f"panda_joint{i}" for i in range(1, 8)]
    solo = ConstrainedSystem.from_urdf("solo12", floating_base=True)
    lim = solo.effort_limits()
    assert solo.nq == 19 and solo.nv == 18 and np.all(lim[:6] == 0) and len(solo.joint_names) == 12
    solo_urdf = _urdf_effort_limits("solo12")
    np.testing.assert_array_equal(lim[6:], [solo_urdf[j] if solo_urdf.get(j, 0) > 0 else np.inf
                                            for j in solo.joint_names])


def test_qv_inspect_cli(capsys):
    """`qv inspect` prints the decomposition; its λ equals Pinocchio's for the same state."""
    from models import PinReference

    from qv_control.cli import main as qv_main
    from qv_dynamics import describe as inspect

    assert qv_main(["inspect", "panda", "--contact", "panda_hand", "--random", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "rank 3 of 3 rows" in out and "null-space dimension 4" in out and "λ " in out
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    rep = inspect.report(system, random_q=True, seed=4)
    _, _, lam_ref = PinReference(system, [("3d", "panda_hand")])(rep["q"], rep["qdot"], rep["tau"])
    assert np.linalg.norm(rep["lambda"] - lam_ref) < 1e-10 * np.linalg.norm(lam_ref)
    assert abs(0.5 * rep["v_r"] @ rep["v_r"] - 0.5 * rep["qdot"] @ system.evaluate(rep["q"], rep["qdot"]).M
               @ rep["qdot"]) < 1e-12
    assert inspect.main(["panda", "--contact", "no_such_frame"]) == 2
    assert "UnknownNameError" in capsys.readouterr().err


def test_evaluate_without_coriolis_matches_evaluate():
    """``evaluate(q, q̇, coriolis=False)`` (h by RNEA, Ȧq̇ from the classical frame accelerations: the
    simulator's path) gives the M, h, A, Ȧq̇, Φ of the Coriolis-matrix path and the same direct dynamics;
    C and g are left out; without active rows A, Ȧq̇, Φ are empty."""
    from qv_dynamics import direct_dynamics

    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": "panda_hand"},
        {"type": "loop_closure", "frame_a": "panda_hand", "frame_b": "panda_link3", "axes": ["x", "ry"]}])
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, qd, tau = system.random_configuration(rng), rng.normal(size=7), 10 * rng.normal(size=7)
        full, fast = system.evaluate(q, qd), system.evaluate(q, qd, coriolis=False)
        assert fast.C is None and fast.g is None and fast.row_labels == full.row_labels
        assert np.array_equal(fast.M, full.M) and np.abs(fast.h - full.h).max() < 1e-10
        assert np.abs(fast.A - full.A).max() < 1e-14 and np.abs(fast.phi - full.phi).max() < 1e-14
        assert np.abs(fast.Adot_qdot - full.Adot_qdot).max() < 1e-12
        for method in ("projection", "kkt"):
            qdd, F, lam = direct_dynamics(full, tau=tau, method=method)
            qdd2, F2, lam2 = direct_dynamics(fast, tau=tau, method=method)
            assert np.abs(qdd2 - qdd).max() < 1e-10 * max(1.0, np.abs(qdd).max())
            assert np.abs(F2 - F).max() < 1e-10 * max(1.0, np.abs(F).max())
    free = ConstrainedSystem.from_urdf("panda")
    q, qd = free.random_configuration(rng), rng.normal(size=7)
    t = free.evaluate(q, qd, coriolis=False)
    assert t.A.shape == (0, 7) and t.phi.shape == (0,) and t.Adot_qdot.shape == (0,)
    assert np.abs(t.h - free.evaluate(q, qd).h).max() < 1e-10
    assert np.array_equal(free.mass_matrix(q), t.M)
