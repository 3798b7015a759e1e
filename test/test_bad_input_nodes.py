"""Bad input to the controller and dynamics nodes (SPEC §6), real rclpy, bounded.

Each test feeds the bad input and asserts the refusal (start, parameter change), the count (dropped
messages, in /diagnostics too) or the ERROR state; the good path is checked against the library
(``make_law(...).compute`` on the same state) so a refusal cannot pass by publishing nothing.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, MultiArrayDimension  # noqa: E402
from test_ros_nodes import (  # noqa: E402
    LAMBDA_D,
    LAW_PARAMS,
    THETA_D,
    Wire,
    arm_controller,
    arm_params,
    arm_state,
    joint_state,
)

from qv_control.laws import make_law  # noqa: E402
from qv_control.laws.base import ForcePI  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_dynamics.errors import DimensionError  # noqa: E402
from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402
from qv_dynamics.state import Reference, State  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 23) % 200
JOINTS = ["joint1", "joint2", "joint3"]


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_bad_input_probe") as ros:
        yield ros


def _now(node) -> float:
    return node.get_clock().now().nanoseconds * 1e-9


def _diag(ex, probe, node) -> dict:
    """The node's next DiagnosticStatus (published on demand, received over /diagnostics)."""
    got = []
    sub = probe.create_subscription(DiagnosticArray, "/diagnostics",
                                    lambda m: got.extend(s for s in m.status if s.name.startswith(node.get_name())), 10)
    try:
        assert spin_until(ex, lambda: sub.get_publisher_count() >= 1)
        node.publish_diagnostics()
        assert spin_until(ex, lambda: bool(got)), "no /diagnostics from the node"
    finally:
        probe.destroy_subscription(sub)
    st = got[-1]
    return {"level": st.level, "message": st.message, **{kv.key: kv.value for kv in st.values}}


# ------------------------------------------------------------------ item 1: sizes and labels where they enter
def test_wrong_length_lambda_and_theta_desired_refused_at_start(ros):
    ctx, _, _ = ros
    with pytest.raises(DimensionError) as ei:
        ControllerNode("qv_bad_lam", context=ctx, parameter_overrides=arm_params(lambda_desired=[5.0, 1.0]))
    assert "lambda_desired" in str(ei.value) and "wall.x" in str(ei.value)
    with pytest.raises(DimensionError) as ei:
        ControllerNode("qv_bad_theta", context=ctx, parameter_overrides=arm_params(theta_desired=[0.1]))
    assert "theta_desired" in str(ei.value) and "tip.z" in str(ei.value) and "joint3" in str(ei.value)


def test_wrong_length_references_refused_on_parameter_change_old_value_kept(ros):
    ctx, ex, probe = ros
    node = ControllerNode("qv_bad_set", context=ctx, parameter_overrides=arm_params(controller_name="bad_set"))
    ex.add_node(node)
    try:
        for name, value, labels in (("lambda_desired", [1.0, 2.0, 3.0], ["wall.x"]),
                                    ("theta_desired", [0.1], ["tip.z", "joint3"])):
            before = list(node.get_parameter(name).value)
            res = node.set_parameters([Parameter(name, value=value)])[0]
            assert not res.successful
            assert name in res.reason and all(lab in res.reason for lab in labels), res.reason
            assert list(node.get_parameter(name).value) == before  # the old value stays, and is used
        assert node.lambda_d.tolist() == [4.0] and node.theta_d.tolist() == [0.05, -0.9]
        # a law change to coordinates of another size makes the held θ_d the wrong size: refused too
        res = node.set_parameters([Parameter("law_params.coordinates", value=["tip.z", "joint2", "joint3"])])[0]
        assert not res.successful
        # and a right-sized change is accepted and used
        assert node.set_parameters([Parameter("lambda_desired", value=[6.0])])[0].successful
        wire = Wire(probe, ex, "/joint_states", JointState, "/bad_set/commands", Float64MultiArray)
        wire.connect()
        system, _ = load_model_config("planar_3link_model.yaml")
        q, qdot = arm_state(system, np.random.default_rng(2))
        out = wire.send(joint_state(JOINTS, q, qdot, t=1.0), expect=1)
        tau = make_law("quasi_tracking", system, **LAW_PARAMS).compute(
            State(1.0, q, qdot), Reference(theta=np.array([0.05, -0.9]), lambda_=np.array([6.0])))
        np.testing.assert_allclose(out[-1].data, tau, rtol=1e-9, atol=1e-9)
    finally:
        retire(ex, node)


def test_law_with_too_few_coordinates_refused_at_construction(ros):
    system, _ = load_model_config("planar_3link_model.yaml")  # n = 3, one wall row: n − r = 2
    with pytest.raises(DimensionError, match="n - r|n − r"):
        make_law("quasi_tracking", system, coordinates=["joint3"])
    with pytest.raises(DimensionError, match="n - r|n − r"):
        make_law("pidc", system, coordinates=["joint3"])
    ctx, _, _ = ros
    with pytest.raises(DimensionError):
        p = [x for x in arm_params() if x.name != "law_params.coordinates"]
        ControllerNode("qv_few", context=ctx, parameter_overrides=p + [Parameter("law_params.coordinates",
                                                                               value=["joint3"])])


def test_lambda_desired_labels_matched_by_row_and_unknown_row_refused(ros):
    """Two rows (tip on a wall and a floor: x and z), λ_d sent with the rows in reverse order: the command
    equals the library law with λ_d in the model's row order; a row that does not exist is refused."""
    from qv_dynamics import ConstrainedSystem

    ctx, ex, probe = ros
    system = ConstrainedSystem.from_urdf(str(ROOT / "urdf" / "planar_3link.urdf"), [
        {"type": "point_contact", "name": "corner", "frame": "tip", "axes": ["x", "z"]}])
    params = {"coordinates": ["joint3"], "kp": 50.0, "kd": 10.0}
    node = ControllerNode("qv_lab", context=ctx, system=system,
                          law=make_law("quasi_tracking", system, **params),
                          parameter_overrides=[Parameter("joints", value=JOINTS),
                                               Parameter("controller_name", value="lab_ctrl")])
    ex.add_node(node)
    try:
        assert system.row_labels == ["corner.x", "corner.z"]
        lpub = probe.create_publisher(Float64MultiArray, "/qv_lab/lambda_desired", 10)
        wire = Wire(probe, ex, "/joint_states", JointState, "/lab_ctrl/commands", Float64MultiArray)
        wire.connect()
        assert spin_until(ex, lambda: lpub.get_subscription_count() >= 1)
        msg = Float64MultiArray(data=[-3.0, 8.0])
        msg.layout.dim = [MultiArrayDimension(label="corner.z,corner.x", size=2, stride=2)]
        lpub.publish(msg)
        assert spin_until(ex, lambda: node.lambda_d is not None)
        np.testing.assert_array_equal(node.lambda_d, [8.0, -3.0])
        bad = Float64MultiArray(data=[5.0, 1.0])  # right size, but a row that does not exist
        bad.layout.dim = [MultiArrayDimension(label="corner.x,floor.z", size=2, stride=2)]
        lpub.publish(bad)
        assert spin_until(ex, lambda: node.rejected("lambda_desired") == 1)
        assert "names" in node.rejects["lambda_desired"].counts
        np.testing.assert_array_equal(node.lambda_d, [8.0, -3.0])  # unchanged
        q = np.array([1.0, -1.0, -1.0])
        out = wire.send(joint_state(JOINTS, q, [0.0, 0.0, 0.0], t=2.0), expect=1)
        ref_law = make_law("quasi_tracking", system, **params)
        tau = ref_law.compute(State(2.0, q, np.zeros(3)), Reference(lambda_=np.array([8.0, -3.0])))
        np.testing.assert_allclose(out[-1].data, tau, rtol=1e-9, atol=1e-9)
        swapped = ref_law.compute(State(2.0, q, np.zeros(3)), Reference(lambda_=np.array([-3.0, 8.0])))
        assert np.linalg.norm(tau - swapped) > 1.0  # the row order matters: the check has teeth
    finally:
        retire(ex, node)


def test_lambda_desired_of_a_constraint_set_that_changed_never_reaches_the_law(ros):
    """λ_d = [] accepted while no constraint is active (0 rows), then the contact switched on (as a task's
    touch-down does): the empty λ_d no longer fits the one active row; it is dropped and counted once, the law
    computes with its own λ (without the check the impedance baseline raised IndexError on every state), and the
    command equals the library law's on the same state."""
    from qv_control.laws.impedance import ImpedanceForceBaseline

    ctx, ex, probe = ros
    system, _ = load_model_config("demo_model.yaml")
    law = ImpedanceForceBaseline(system, frame="panda_hand_tcp", contact="contact")
    joints = [f"panda_joint{i}" for i in range(1, 8)]
    node = ControllerNode("qv_lam_set", context=ctx, system=system, law=law, parameter_overrides=[
        Parameter("joints", value=joints), Parameter("controller_name", value="lam_set_ctrl"),
        Parameter("watchdog_timeout", value=5.0)])
    ex.add_node(node)
    try:
        lpub = probe.create_publisher(Float64MultiArray, "/qv_lam_set/lambda_desired", 10)
        wire = Wire(probe, ex, "/joint_states", JointState, "/lam_set_ctrl/commands", Float64MultiArray)
        wire.connect()
        assert spin_until(ex, lambda: lpub.get_subscription_count() >= 1)
        lpub.publish(Float64MultiArray(data=[]))
        assert spin_until(ex, lambda: node.lambda_d is not None) and node.lambda_d.size == 0
        system.set_active("contact", True)
        q = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])
        out = wire.send(joint_state(joints, q, [0.0] * 7, t=1.0), expect=1)
        assert node.rejects["lambda_desired"].counts == {"size": 1} and node.lambda_d is None
        assert node.rejects["law"].total == 0 and node.stats["commands"] == 1
        wire.send(joint_state(joints, q, [0.0] * 7, t=1.001), expect=1)
        assert node.rejects["lambda_desired"].counts == {"size": 1}        # counted once
        ref = ImpedanceForceBaseline(system, frame="panda_hand_tcp", contact="contact")
        np.testing.assert_allclose(out[-1].data, ref.compute(State(1.0, q, np.zeros(7)), Reference()), atol=1e-9)
    finally:
        system.set_active("contact", False)
        retire(ex, node)


def test_law_that_cannot_compute_is_an_error_state_in_diagnostics(ros):
    ctx, ex, probe = ros
    node = ControllerNode("qv_fail", context=ctx, parameter_overrides=arm_params(
        controller_name="fail_ctrl", watchdog_timeout=5.0,  # a loaded machine must not add watchdog outputs
        **{"law_params.cond_max": 1.0}))  # cond(D) > 1 everywhere: every tick fails
    ex.add_node(node)
    try:
        wire = Wire(probe, ex, "/joint_states", JointState, "/fail_ctrl/commands", Float64MultiArray)
        wire.connect()
        q, qdot = arm_state(node.system, np.random.default_rng(5))
        for k in range(3):
            wire.send(joint_state(JOINTS, q, qdot, t=1.0 + k), expect=1)
        assert node.stats["commands"] == 0 and node.stats["safe_commands"] == 3
        d = _diag(ex, probe, node)
        assert d["level"] == DiagnosticStatus.ERROR, d
        assert "cond" in d["message"] and int(d["law_failures"]) == 3, d
    finally:
        retire(ex, node)


# ------------------------------------------------------------------ item 3: stamps
def test_old_and_future_stamps_dropped_and_counted_controller(ros):
    _, ex, probe = ros
    with arm_controller(ros, "qv_stamp", "stamp_ctrl", stamp_future_tolerance=0.5) as (node, wire):
        q, qdot = arm_state(node.system, np.random.default_rng(6))
        wire.send(joint_state(JOINTS, q, qdot, t=10.0), expect=1)
        wire.pub.publish(joint_state(JOINTS, q, qdot, t=9.0))  # older than the last accepted
        assert spin_until(ex, lambda: node.rejected("joint_states") == 1)  # (depth 1: one message at a time)
        wire.pub.publish(joint_state(JOINTS, q, qdot, t=_now(node) + 100.0))  # far ahead of the node clock
        assert spin_until(ex, lambda: node.rejected("joint_states") == 2)
        assert node.rejects["joint_states"].counts == {"old_stamp": 1, "future_stamp": 1}
        assert node.stats["commands"] == 1
        wire.send(joint_state(JOINTS, q, qdot, t=10.001), expect=1)  # the stream goes on
        assert node.stats["commands"] == 2
        d = _diag(ex, probe, node)
        assert d["rejected_joint_states_old_stamp"] == "1" and d["rejected_joint_states_future_stamp"] == "1"
        assert d["reference_t0_s"] == "10.000000000"  # the first accepted state's stamp: the reference's t = 0
        assert d["level"] == DiagnosticStatus.WARN
        res = node.set_parameters([Parameter("stamp_future_tolerance", value=-1.0)])[0]
        assert not res.successful and "stamp_future_tolerance" in res.reason


def test_old_and_future_stamps_dropped_and_counted_dynamics(ros):
    from rclpy.parameter import Parameter as P

    ctx, ex, probe = ros
    node = DynamicsNode("qv_dyn_stamp", context=ctx, parameter_overrides=[
        P("model_config", value="planar_3link_model.yaml"), P("joint_states_topic", value="/stamp/joint_states")])
    ex.add_node(node)
    try:
        got = []
        sub = probe.create_subscription(JointState, "/qv_dyn_stamp/v", got.append, 10)
        pub = probe.create_publisher(JointState, "/stamp/joint_states", 10)
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1 and sub.get_publisher_count() >= 1)
        q, qdot = arm_state(node.system, np.random.default_rng(8))
        pub.publish(joint_state(JOINTS, q, qdot, [1.0, 2.0, 3.0], t=5.0))
        assert spin_until(ex, lambda: len(got) == 1)
        pub.publish(joint_state(JOINTS, q, qdot, [1.0, 2.0, 3.0], t=4.0))
        pub.publish(joint_state(JOINTS, q, qdot, [1.0, 2.0, 3.0], t=_now(node) + 100.0))
        assert spin_until(ex, lambda: node.rejects.total == 2)
        assert node.rejects.counts == {"old_stamp": 1, "future_stamp": 1} and len(got) == 1
        d = _diag(ex, probe, node)
        assert d["rejected_old_stamp"] == "1" and d["rejected_future_stamp"] == "1"
        probe.destroy_subscription(sub)
        probe.destroy_publisher(pub)
    finally:
        retire(ex, node)


def test_force_integral_uses_bounded_non_negative_dt():
    """A stamp far ahead must not freeze the integral for good, nor integrate the gap: dt is clipped to
    [0, min(max_dt, 2 sample periods)] (the period: the smallest step seen) and the integrator follows the
    stamps again afterwards (reference: the integral of a constant error)."""
    pi = ForcePI(kf=0.0, ki=1.0, max_dt=0.1)
    e = np.array([2.0])
    pi.update(0.0, e)
    pi.update(0.01, e)
    np.testing.assert_allclose(pi.z, [0.02], rtol=1e-12)
    pi.update(1e9, e)  # a corrupted stamp (or a stall): at most two periods of integration
    np.testing.assert_allclose(pi.z, [0.02 + 2 * 0.02], rtol=1e-12)
    pi.update(0.02, e)  # back to the true time: dt < 0 integrates nothing
    np.testing.assert_allclose(pi.z, [0.06], rtol=1e-12)
    pi.update(0.03, e)  # and integrates again
    np.testing.assert_allclose(pi.z, [0.08], rtol=1e-12)
    slow = ForcePI(kf=0.0, ki=1.0, max_dt=0.1)   # a slow loop: max_dt bounds before two periods do
    for t in (0.0, 0.08, 1e9):
        slow.update(t, e)
    np.testing.assert_allclose(slow.z, [2.0 * (0.08 + 0.1)], rtol=1e-12)


def test_normal_rate_estimate_recovers_after_a_future_stamp():
    """The backward difference of G v_n (quasi_tracking, normal_rate) restarts after a stamp far ahead
    instead of staying off for good; checked against the difference quotient of the law's own G v_n."""
    system, _ = load_model_config("planar_3link_model.yaml")
    law = make_law("quasi_tracking", system, **LAW_PARAMS)
    rng = np.random.default_rng(11)
    q, _ = arm_state(system, rng)
    qdot = 0.3 * rng.standard_normal(3)  # a normal velocity component too (a compliant contact)
    sync = law._ct.sync if law._ct is not None else (lambda: None)   # (a compiled tick's state into the law)
    for t in (0.0, 0.001, 1e9, 0.002):
        law.compute(State(t, q, qdot), Reference(theta=np.array(THETA_D), lambda_=np.array(LAMBDA_D)))
    sync()
    g_prev = law._gvn_prev[1].copy()
    q2 = q + 1e-3 * qdot
    law.compute(State(0.003, q2, qdot), Reference(theta=np.array(THETA_D), lambda_=np.array(LAMBDA_D)))
    sync()
    assert law._gvn_rate is not None and law._gvn_prev[0] == 0.003
    np.testing.assert_allclose(law._gvn_rate, (law._gvn_prev[1] - g_prev) / 0.001, rtol=1e-12)


# ------------------------------------------------------------------ item 6: parameters, bursts
def test_misspelled_parameter_reported_and_counted(ros):
    """rclpy silently ignores an override for a name the node never declares: the nodes warn with the closest
    declared name and count it in /diagnostics (level WARN)."""
    ctx, ex, probe = ros
    node = ControllerNode("qv_typo", context=ctx, parameter_overrides=arm_params(watchdog_timout=0.5))
    dyn = DynamicsNode("qv_dyn_typo", context=ctx, parameter_overrides=[
        Parameter("model_config", value="planar_3link_model.yaml"), Parameter("decimaton", value=2)])
    for n in (node, dyn):
        ex.add_node(n)
    try:
        assert node.unknown_parameters == ["watchdog_timout (did you mean watchdog_timeout?)"]
        assert node.watchdog_timeout == 0.1  # the default stayed in force: that is why it must be reported
        assert dyn.unknown_parameters == ["decimaton (did you mean decimation?)"]
        for n in (node, dyn):
            d = _diag(ex, probe, n)
            assert d["unknown_parameters"] == "1" and d["level"] == DiagnosticStatus.WARN, d
    finally:
        retire(ex, node, dyn)


@pytest.mark.parametrize("which", ["controller", "dynamics"])
def test_burst_of_bad_messages_every_one_counted(ros, which):
    ctx, ex, probe = ros
    burst = 10
    if which == "controller":
        # the controller keeps depth 1 by default (freshest state; a re-sent lock-step state is not answered
        # twice): a queue as deep as the burst makes it count every message
        node = ControllerNode("qv_burst_c", context=ctx, parameter_overrides=arm_params(
            controller_name="burst_ctrl", joint_states_topic="/burst/joint_states", joint_states_queue=burst))
        counter = node.rejects["joint_states"]
    else:
        node = DynamicsNode("qv_burst_d", context=ctx, parameter_overrides=[
            Parameter("model_config", value="planar_3link_model.yaml"),
            Parameter("joint_states_topic", value="/burst/joint_states"), Parameter("decimation", value=5)])
        counter = node.rejects
    ex.add_node(node)
    try:
        pub = probe.create_publisher(JointState, "/burst/joint_states", burst)
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1)
        for k in range(burst):  # published back to back, before the node runs once
            pub.publish(joint_state(JOINTS, [np.nan, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0] * 3, t=1.0 + k))
        assert spin_until(ex, lambda: counter.total == burst), counter.counts
        d = _diag(ex, probe, node)
        key = "rejected_joint_states_nonfinite" if which == "controller" else "rejected_nonfinite"
        assert d[key] == str(burst)
        probe.destroy_publisher(pub)
    finally:
        retire(ex, node)
