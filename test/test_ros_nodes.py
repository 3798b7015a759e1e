"""ROS 2 nodes over real rclpy publishers/subscribers (SPEC §5, §6), bounded in time.

References: the library itself on the same state (qv_control.make_law / quasi_decompose) and, for λ, an
independent KKT solve (direct_dynamics method="kkt"); joint order by construction of shuffled names.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

rclpy = pytest.importorskip("rclpy")
from rclpy.parameter import Parameter  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402

from qv_control.laws.registry import make_law  # noqa: E402
from qv_control.ros.bringup import load_params_file, to_parameters  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_dynamics import direct_dynamics, quasi_decompose  # noqa: E402
from qv_dynamics.errors import UnknownNameError  # noqa: E402
from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.ros.messages import sec_to_stamp  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402
from qv_dynamics.ros.sim_node import SimNode  # noqa: E402
from qv_dynamics.state import Reference, State  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ARM = str(ROOT / "config" / "planar_3link.yaml")
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 3) % 200  # this module's own domain
LAW_PARAMS = {"coordinates": ["tip.z", "joint3"], "kp": 80.0, "kd": 15.0}
THETA_D = [0.05, -0.9]
LAMBDA_D = [4.0]


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_test_probe") as ros:
        yield ros


def arm_params(**extra) -> list:
    p = load_params_file(ARM)["qv_controller"]
    p = {k: v for k, v in p.items() if not k.startswith(("law_params.", "reference.", "wrench_"))}
    p.update({f"law_params.{k}": v for k, v in LAW_PARAMS.items()})
    p.update(theta_desired=THETA_D, lambda_desired=LAMBDA_D)
    p.update(extra)
    return to_parameters(p)


def joint_state(names, q, qdot, effort=None, t=1.0) -> JointState:
    msg = JointState()
    msg.header.stamp = sec_to_stamp(t)
    msg.name = list(names)
    msg.position = [float(x) for x in q]
    msg.velocity = [float(x) for x in qdot]
    if effort is not None:
        msg.effort = [float(x) for x in effort]
    return msg


def arm_state(system, rng):
    """A state on the wall (tip x = 1): q from the model config projected, q̇ in N(A)."""
    from qv_dynamics.sim.stepper import Stepper

    q0 = np.array([1.0, -1.0, -1.0]) + 0.05 * rng.standard_normal(3)
    q, _ = Stepper(system).correct(q0, np.zeros(3))
    _, A = system.constraint_rows(q)
    V2 = np.linalg.svd(A)[2][1:].T
    qdot = V2 @ rng.standard_normal(2)
    return q, qdot


def watch_ticks(node) -> list:
    """Record every watchdog tick of ``node`` as (monotonic time, age of the last valid state, safe command
    published by this tick); the node's own callback still does the work."""
    ticks, inner = [], node.watchdog_timer.callback

    def tick():
        t, n0 = time.monotonic(), node.stats["safe_commands"]
        age = None if node.last_rx is None else t - node.last_rx
        inner()
        ticks.append((t, age, node.stats["safe_commands"] > n0))

    node.watchdog_timer.callback = tick
    return ticks


def check_first_safe_tick(ticks, timeout: float, period: float, timer) -> float:
    """The watchdog's first safe command comes from the first tick at which the last state is older than
    the timeout: every earlier tick saw a younger state (a watchdog that waits longer, e.g. 2x its timeout,
    fails here whatever the machine's load), and the timer is set to its period (``timer``: the node's watchdog
    timer; the intervals between ticks are the machine's: a load stretches them, and rcl then fires the next
    tick at its phase, sooner). Returns the age at detection."""
    armed = [(t, age, safe) for t, age, safe in ticks if age is not None]
    k = next(i for i, (_, _, safe) in enumerate(armed) if safe)
    assert all(age <= timeout for _, age, _ in armed[:k]), [round(a, 4) for _, a, _ in armed[:k + 1]]
    assert armed[k][1] > timeout
    assert timer.timer_period_ns == round(period * 1e9), timer.timer_period_ns
    return armed[k][1]


class Wire:
    """A publisher into the node under test and a recorder of what comes out (with arrival times)."""

    def __init__(self, probe, ex, in_topic, in_type, out_topic, out_type):
        self.pub = probe.create_publisher(in_type, in_topic, 10)
        self.got = []
        self.times = []
        self.sub = probe.create_subscription(out_type, out_topic, self._record, 10)
        self.ex = ex

    def _record(self, msg) -> None:
        self.times.append(time.monotonic())
        self.got.append(msg)

    def connect(self, n_pub=1, n_sub=1):
        assert spin_until(self.ex, lambda: self.pub.get_subscription_count() >= n_pub
                          and self.sub.get_publisher_count() >= n_sub), "graph did not connect"

    def send(self, msg, expect: int | None = None, timeout: float = 60.0):
        before = len(self.got)
        self.pub.publish(msg)
        if expect is not None:
            assert spin_until(self.ex, lambda: len(self.got) >= before + expect, timeout), "no output"
        return self.got[before:]


@contextmanager
def arm_controller(ros, name: str, controller_name: str, **params):
    """The planar arm's controller node in the probe's executor, wired (/joint_states in,
    /<controller_name>/commands out): yields (node, wire), retires the node at exit."""
    ctx, ex, probe = ros
    node = ControllerNode(name, context=ctx, parameter_overrides=arm_params(controller_name=controller_name,
                                                                              **params))
    ex.add_node(node)
    try:
        wire = Wire(probe, ex, "/joint_states", JointState, f"/{controller_name}/commands", Float64MultiArray)
        wire.connect()
        yield node, wire
    finally:
        retire(ex, node)


def test_joint_states_in_effort_out_in_controller_joint_order(ros):
    ctx, ex, probe = ros
    node = ControllerNode("qv_ctrl_order", context=ctx, parameter_overrides=arm_params(
        joints=["joint3", "joint1", "joint2"], controller_name="order_ctrl"))
    ex.add_node(node)
    try:
        wire = Wire(probe, ex, "/joint_states", JointState, "/order_ctrl/commands", Float64MultiArray)
        wire.connect()
        system, _ = load_model_config("planar_3link_model.yaml")
        ref_law = make_law("quasi_tracking", system, **LAW_PARAMS)
        rng = np.random.default_rng(1)
        for k in range(3):
            q, qdot = arm_state(system, rng)
            names = ["joint2", "gripper", "joint3", "joint1"]  # any order, extra joints ignored
            by = {"joint1": 0, "joint2": 1, "joint3": 2}
            pos = [q[by[n]] if n in by else 0.7 for n in names]
            vel = [qdot[by[n]] if n in by else 0.0 for n in names]
            out = wire.send(joint_state(names, pos, vel, t=0.1 * k), expect=1)
            tau = ref_law.compute(State(0.1 * k, q, qdot), Reference(theta=np.array(THETA_D),
                                                                    lambda_=np.array(LAMBDA_D)))
            cmd = np.array(out[-1].data)
            assert cmd.shape == (3,)
            np.testing.assert_allclose(cmd, tau[[2, 0, 1]], rtol=1e-9, atol=1e-9)
            assert np.linalg.norm(tau) > 1.0  # a real torque (gravity + force), not zeros
    finally:
        retire(ex, node)


@pytest.mark.parametrize("model", ["planar_3link_model.yaml", "slider_crank_model.yaml"])
def test_dynamics_node_xi_lambda_equal_library(ros, model):
    ctx, ex, probe = ros
    tag = model.split("_")[0]
    node = DynamicsNode(f"qv_dyn_{tag}", context=ctx, parameter_overrides=to_parameters(
        {"model_config": model, "joint_states_topic": f"/{tag}/joint_states"}))
    ex.add_node(node)
    try:
        outs = {}
        subs = [probe.create_subscription(JointState, f"/qv_dyn_{tag}/{k}",
                                          lambda m, k=k: outs.setdefault(k, []).append(m), 10)
                for k in ("xi", "lambda", "v", "v_r", "scalars", "u_v", "u_xi")]
        pub = probe.create_publisher(JointState, f"/{tag}/joint_states", 10)
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1 and all(s.get_publisher_count() for s in subs))
        system, doc = load_model_config(model)
        rng = np.random.default_rng(7)
        from qv_dynamics.sim.stepper import Stepper

        prev = None
        for k in range(4):
            q, _ = Stepper(system).correct(np.array(doc["initial"]["q"]) + 0.1 * rng.standard_normal(system.nq),
                                           np.zeros(system.nv))
            _, A = system.constraint_rows(q)
            qdot = np.linalg.svd(A)[2][A.shape[0]:].T @ rng.standard_normal(system.nv - A.shape[0])
            tau = 3.0 * rng.standard_normal(system.nv)
            n_before = len(outs.get("xi", []))
            pub.publish(joint_state(system.joint_names[::-1], q[::-1], qdot[::-1], tau[::-1], t=1.0 + k))
            assert spin_until(ex, lambda: len(outs.get("xi", [])) > n_before and len(outs.get("scalars", [])) > k)
            terms = system.evaluate(q, qdot)
            qs = quasi_decompose(terms, qdot, tau, prev=prev)  # the node keeps the basis continuous too
            prev = qs
            assert spin_until(ex, lambda: all(len(outs.get(key, [])) > k for key in ("v", "v_r", "u_v", "u_xi")))
            xi = np.array(outs["xi"][-1].position)
            lam = np.array(outs["lambda"][-1].position)
            np.testing.assert_allclose(xi, qs.xi, rtol=1e-10, atol=1e-10)
            np.testing.assert_allclose(lam, qs.lambda_, rtol=1e-10, atol=1e-10)
            # every published quasi-variable equals the library's on the same state (signs included)
            for key, ref in (("v", qs.v), ("v_r", qs.v_r), ("u_v", qs.u_v), ("u_xi", qs.u_xi)):
                got = np.array(outs[key][-1].position)
                assert got.shape == ref.shape, key
                np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10, err_msg=key)
            assert np.linalg.norm(qs.v_r) > 1e-3 and np.linalg.norm(qs.u_v) > 1e-3  # non-trivial values
            # v = Qᵀq̇ with QQᵀ = M: ‖v‖² = q̇ᵀMq̇ whatever the factor (independent of the library's Q)
            assert np.linalg.norm(outs["v"][-1].position) ** 2 == pytest.approx(qdot @ terms.M @ qdot, rel=1e-9)
            # independent reference for λ: the KKT system [[M, Aᵀ],[A, 0]]
            _, _, lam_kkt = direct_dynamics(terms, qdot, tau, method="kkt")
            np.testing.assert_allclose(lam, lam_kkt, rtol=1e-7, atol=1e-7)
            assert list(outs["lambda"][-1].name) == system.row_labels
            assert outs["xi"][-1].header.stamp.sec == 1 + k  # stamped with the input's stamp
            sc = dict(zip(outs["scalars"][-1].name, outs["scalars"][-1].position))
            assert sc["rank"] == qs.rank == 1 == np.linalg.matrix_rank(terms.A)
            # K = ½‖v_r‖² = ½ q̇ᵀMq̇ on the constraint manifold
            assert sc["kinetic_energy"] == pytest.approx(0.5 * qdot @ terms.M @ qdot, rel=1e-9)
            # condition σ₁/σ_r of Λ = AQ⁻ᵀ, from numpy's Cholesky factor of M (any factor gives the same σ)
            L = np.linalg.cholesky(terms.M)
            sv = np.linalg.svd(np.linalg.solve(L, terms.A.T).T, compute_uv=False)
            assert sc["condition"] == pytest.approx(sv[0] / sv[qs.rank - 1], rel=1e-9)
            assert sc["condition"] == pytest.approx(qs.condition, rel=1e-12)
            assert sc["m"] == terms.m and sc["n"] == system.nv
            assert sc["phi_norm"] == pytest.approx(np.linalg.norm(terms.phi), abs=1e-12)
        for s in subs:
            probe.destroy_subscription(s)
        probe.destroy_publisher(pub)
    finally:
        retire(ex, node)


def test_watchdog_fires_within_timeout_and_logs_once(ros):
    ctx, ex, probe = ros
    timeout = 0.15
    node = ControllerNode("qv_ctrl_wd", context=ctx, parameter_overrides=arm_params(
        controller_name="wd_ctrl", watchdog_timeout=timeout, watchdog_period=0.01, safe_mode="gravity"))
    ex.add_node(node)
    try:
        wire = Wire(probe, ex, "/joint_states", JointState, "/wd_ctrl/commands", Float64MultiArray)
        wire.connect()
        system = node.system
        q, qdot = arm_state(system, np.random.default_rng(3))
        for k in range(5):
            wire.send(joint_state(["joint1", "joint2", "joint3"], q, qdot, t=0.01 * k), expect=1)
        n0 = len(wire.got)
        assert not node.stale
        ticks = watch_ticks(node)
        assert spin_until(ex, lambda: node.stale and len(wire.got) > n0 + 3)
        check_first_safe_tick(ticks, timeout, 0.01, node.watchdog_timer)  # stale at the first tick after the timeout
        safe = np.array(wire.got[-1].data)
        g = pin.computeGeneralizedGravity(system.model, system.model.createData(), q)
        np.testing.assert_allclose(safe, g, rtol=1e-12, atol=1e-12)  # gravity hold, joint order 1-2-3
        assert node.stats["watchdog_episodes"] == 1 and node.stats["safe_commands"] >= 3
        spin_until(ex, lambda: False, 0.1)  # keep stale a while: more safe commands, same episode
        assert node.stats["watchdog_episodes"] == 1  # still one episode, one log line
        # states resume -> law output again, then a second episode is counted
        c0 = node.stats["commands"]
        wire.pub.publish(joint_state(["joint1", "joint2", "joint3"], q, qdot, t=1.0))
        assert spin_until(ex, lambda: not node.stale and node.stats["commands"] == c0 + 1)
        assert spin_until(ex, lambda: node.stats["watchdog_episodes"] == 2)
        # zero-effort mode
        res = node.set_parameters([Parameter("safe_mode", value="zero")])
        assert res[0].successful
        n1 = len(wire.got)
        assert spin_until(ex, lambda: len(wire.got) > n1 + 1)
        assert np.all(np.array(wire.got[-1].data) == 0.0)
    finally:
        retire(ex, node)


def test_watchdog_timing(ros):
    """Stale detection time: the first safe command comes from the first watchdog tick after the timeout."""
    ctx, ex, probe = ros
    timeout, period = 0.1, 0.01
    node = ControllerNode("qv_ctrl_wdt", context=ctx, parameter_overrides=arm_params(
        controller_name="wdt_ctrl", watchdog_timeout=timeout, watchdog_period=period, safe_mode="zero"))
    ex.add_node(node)
    try:
        stamps = []
        sub = probe.create_subscription(Float64MultiArray, "/wdt_ctrl/commands",
                                        lambda m: stamps.append((time.monotonic(), list(m.data))), 10)
        pub = probe.create_publisher(JointState, "/joint_states", 10)
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1 and sub.get_publisher_count() >= 1)
        q, qdot = arm_state(node.system, np.random.default_rng(4))
        ticks = watch_ticks(node)
        pub.publish(joint_state(["joint1", "joint2", "joint3"], q, qdot))
        assert spin_until(ex, lambda: len(stamps) >= 1)
        t_rx = node.last_rx
        assert spin_until(ex, lambda: sum(all(x == 0.0 for x in d) for _, d in stamps) > 5)
        age = check_first_safe_tick(ticks, timeout, period, node.watchdog_timer)
        t_safe = next(t for t, d in stamps if all(x == 0.0 for x in d))
        print(f"\n[watchdog] stale detected at age {1e3 * age:.1f} ms (timeout {1e3 * timeout:.0f} ms, period "
              f"{1e3 * period:.0f} ms); first safe command received {1e3 * (t_safe - t_rx):.1f} ms after the state")
        assert t_safe - t_rx >= timeout  # never early
        probe.destroy_subscription(sub)
        probe.destroy_publisher(pub)
    finally:
        retire(ex, node)


def test_bad_messages_dropped_and_counted_node_stays_alive(ros):
    ctx, ex, probe = ros
    node = ControllerNode("qv_ctrl_bad", context=ctx, parameter_overrides=arm_params(controller_name="bad_ctrl"))
    dyn = DynamicsNode("qv_dyn_bad", context=ctx, parameter_overrides=to_parameters(
        {"model_config": "planar_3link_model.yaml", "joint_states_topic": "/bad/joint_states"}))
    sim = SimNode("qv_sim_bad", context=ctx, parameter_overrides=to_parameters(
        {"model_config": "planar_3link_model.yaml", "controller_name": "bad_sim_ctrl", "mode": "lockstep",
         "lockstep_resend": 0.0, "joint_states_topic": "/bad_sim/joint_states", "publish_clock": False}))
    for n in (node, dyn, sim):
        ex.add_node(n)
    try:
        wire = Wire(probe, ex, "/joint_states", JointState, "/bad_ctrl/commands", Float64MultiArray)
        wire.connect()
        names = ["joint1", "joint2", "joint3"]
        q, qdot = arm_state(node.system, np.random.default_rng(5))
        bad = [
            joint_state(names, [q[0], np.nan, q[2]], qdot),               # NaN position
            joint_state(names, q, [qdot[0], np.inf, qdot[2]]),            # Inf velocity
            joint_state(names, q[:2], qdot),                              # wrong length
            joint_state(names[:2], q[:2], qdot[:2]),                      # missing joint3
        ]
        for i, msg in enumerate(bad):  # one at a time: the controller keeps only the freshest state
            wire.send(msg)
            assert spin_until(ex, lambda: node.rejected() == i + 1)
        c = node.rejects["joint_states"].counts
        assert c == {"nonfinite": 2, "size": 1, "names": 1}
        assert node.stats["commands"] == 0 and len(wire.got) == 0  # nothing published for bad input
        out = wire.send(joint_state(names, q, qdot), expect=1)   # alive: a good message is served
        assert len(out[-1].data) == 3 and np.all(np.isfinite(out[-1].data))
        # λ_d of the wrong size / NaN on ~/lambda_desired
        lpub = probe.create_publisher(Float64MultiArray, "/qv_ctrl_bad/lambda_desired", 10)
        assert spin_until(ex, lambda: lpub.get_subscription_count() >= 1)
        lpub.publish(Float64MultiArray(data=[1.0, 2.0]))
        assert spin_until(ex, lambda: node.rejected("lambda_desired") == 1)
        lpub.publish(Float64MultiArray(data=[float("nan")]))
        assert spin_until(ex, lambda: node.rejected("lambda_desired") == 2)
        assert node.lambda_d.tolist() == LAMBDA_D  # unchanged
        # the dynamics node drops the same way
        dpub = probe.create_publisher(JointState, "/bad/joint_states", 10)
        assert spin_until(ex, lambda: dpub.get_subscription_count() >= 1)
        for i, msg in enumerate(bad):
            dpub.publish(msg)
            assert spin_until(ex, lambda: dyn.rejects.total == i + 1)
        dpub.publish(joint_state(names, q, qdot, np.zeros(3)))
        assert spin_until(ex, lambda: dyn.stats["messages"] == 1)
        # the simulator drops wrong-sized / NaN effort commands and keeps its state
        cpub = probe.create_publisher(Float64MultiArray, "/bad_sim_ctrl/commands", 10)
        assert spin_until(ex, lambda: cpub.get_subscription_count() >= 1)
        cpub.publish(Float64MultiArray(data=[1.0, 2.0]))
        assert spin_until(ex, lambda: sim.rejects.total == 1)
        cpub.publish(Float64MultiArray(data=[1.0, float("nan"), 0.0]))
        assert spin_until(ex, lambda: sim.rejects.total == 2)
        assert sim.steps == 0
        cpub.publish(Float64MultiArray(data=[0.0, 0.0, 0.0]))
        assert spin_until(ex, lambda: sim.steps == 1)
        # parameter validation on change: unknown joint / bad timeout refused with the reason
        res = node.set_parameters([Parameter("joints", value=["joint1", "elbow"])])
        assert not res[0].successful and "elbow" in res[0].reason
        res = node.set_parameters([Parameter("watchdog_timeout", value=-1.0)])
        assert not res[0].successful and "watchdog_timeout" in res[0].reason
        res = node.set_parameters([Parameter("law_params.kp", value=float("nan"))])
        assert not res[0].successful
        res = node.set_parameters([Parameter("law_params.kp", value=50.0)])
        assert res[0].successful and node.law.kp.tolist() == [50.0, 50.0]
        res = node.set_parameters([Parameter("joints", value=["joint2", "joint3", "joint1"])])
        assert res[0].successful and node.cmd_map.joints == ["joint2", "joint3", "joint1"]
    finally:
        retire(ex, node, dyn, sim)


def test_unknown_joint_in_config_refused_at_start(ros, tmp_path):
    ctx, _, _ = ros
    with pytest.raises(UnknownNameError) as ei:
        ControllerNode("qv_ctrl_unknown", context=ctx, parameter_overrides=arm_params(
            joints=["joint1", "joint2", "wrist_joint"]))
    msg = str(ei.value)
    assert "wrist_joint" in msg and "joint1" in msg  # names the culprit and what the model has
    # the real executable: exit code 2 and the reason on stderr, no traceback
    params = tmp_path / "bad.yaml"
    params.write_text(
        "qv_controller:\n  ros__parameters:\n"
        f"    model_config: {ROOT / 'config' / 'planar_3link_model.yaml'}\n"
        "    joints: [joint1, joint2, wrist_joint]\n    law: quasi_tracking\n"
        "    law_params:\n      coordinates: [tip.z, joint3]\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(DOMAIN))
    proc = subprocess.run([sys.executable, "-m", "qv_control.ros.controller_node", "--ros-args", "-r",
                           "__node:=qv_controller", "--params-file", str(params)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "wrist_joint" in proc.stderr and "Traceback" not in proc.stderr


def test_reference_topics_trajectory_and_lambda_desired(ros):
    """θ_d from trajectory_msgs/JointTrajectory (names in any order, absolute stamp) and λ_d from
    ~/lambda_desired (named rows) reach the law: at a knot time the Hermite reference equals the knot."""
    from builtin_interfaces.msg import Duration
    from std_msgs.msg import MultiArrayDimension
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    ctx, ex, probe = ros
    node = ControllerNode("qv_ctrl_ref", context=ctx, parameter_overrides=arm_params(controller_name="ref_ctrl"))
    ex.add_node(node)
    try:
        wire = Wire(probe, ex, "/joint_states", JointState, "/ref_ctrl/commands", Float64MultiArray)
        wire.connect()
        tpub = probe.create_publisher(JointTrajectory, "/qv_ctrl_ref/reference", 10)
        lpub = probe.create_publisher(Float64MultiArray, "/qv_ctrl_ref/lambda_desired", 10)
        assert spin_until(ex, lambda: tpub.get_subscription_count() >= 1 and lpub.get_subscription_count() >= 1)
        traj = JointTrajectory()
        traj.header.stamp = sec_to_stamp(10.0)
        traj.joint_names = ["joint3", "tip.z"]  # the law's coordinates are [tip.z, joint3]
        knots = [([-1.0, 0.0], [0.0, 0.0], [0.0, 0.0]), ([-0.9, 0.1], [0.2, -0.1], [0.5, 0.3]),
                 ([-0.8, 0.05], [0.0, 0.0], [0.0, 0.0])]
        for i, (p, v, a) in enumerate(knots):
            traj.points.append(JointTrajectoryPoint(positions=p, velocities=v, accelerations=a,
                                                    time_from_start=Duration(sec=i)))
        tpub.publish(traj)
        lam_msg = Float64MultiArray(data=[7.5])
        lam_msg.layout.dim = [MultiArrayDimension(label="wall.x", size=1, stride=1)]
        lpub.publish(lam_msg)
        assert spin_until(ex, lambda: node.traj is not None and node.lambda_d is not None
                          and node.lambda_d.tolist() == [7.5])
        system, _ = load_model_config("planar_3link_model.yaml")
        q, qdot = arm_state(system, np.random.default_rng(9))
        out = wire.send(joint_state(["joint1", "joint2", "joint3"], q, qdot, t=11.0), expect=1)
        law = make_law("quasi_tracking", system, **LAW_PARAMS)
        tau = law.compute(State(11.0, q, qdot), Reference(theta=np.array([0.1, -0.9]), theta_dot=np.array([-0.1, 0.2]),
                                                          theta_ddot=np.array([0.3, 0.5]), lambda_=np.array([7.5])))
        np.testing.assert_allclose(np.array(out[-1].data), tau, rtol=1e-9, atol=1e-9)
        # a trajectory naming an unknown coordinate is rejected and counted; the previous one stays
        bad = JointTrajectory(joint_names=["joint3", "elbow"], points=traj.points)
        tpub.publish(bad)
        assert spin_until(ex, lambda: node.rejected("reference", "names") == 1)
        assert node.traj is not None
    finally:
        retire(ex, node)


def test_conversions_continuous_joint():
    """Name mapping of a continuous joint (Pinocchio q = (cos θ, sin θ)); the URDF rewriting of the launch
    files is tested in test_urdf_targets.py."""
    from qv_dynamics import ConstrainedSystem
    from qv_dynamics.ros.messages import JointLayout, arrays_to_joint_state, joint_state_to_arrays

    inertial = ('<inertial><mass value="1"/><origin xyz="0.1 0 0"/>'
                '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>')
    xml = (f'<robot name="r"><link name="b"/><joint name="c" type="continuous"><parent link="b"/><child link="l"/>'
           f'<axis xyz="0 0 1"/></joint><link name="l">{inertial}</link><joint name="p" type="prismatic">'
           f'<parent link="l"/><child link="m"/><axis xyz="1 0 0"/><limit effort="1" velocity="1" lower="-1" '
           f'upper="1"/></joint><link name="m">{inertial}</link></robot>')
    lay = JointLayout.from_system(ConstrainedSystem.from_urdf(xml))
    assert lay.names == ["c", "p"] and lay.nq == 3 and lay.nv == 2
    msg = joint_state(["p", "c"], [0.3, 2.0], [0.2, 0.1], [2.0, 1.0])
    q, qdot, tau = joint_state_to_arrays(msg, lay)
    np.testing.assert_allclose(q, [np.cos(2.0), np.sin(2.0), 0.3], rtol=0, atol=1e-15)
    np.testing.assert_allclose(qdot, [0.1, 0.2])
    np.testing.assert_allclose(tau, [1.0, 2.0])
    back = arrays_to_joint_state(msg.header.stamp, lay, q, qdot, tau)
    assert list(back.name) == ["c", "p"]
    np.testing.assert_allclose(back.position, [2.0, 0.3], atol=1e-15)

