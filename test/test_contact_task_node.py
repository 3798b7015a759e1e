"""The contact task inside qv_controller_node, driven through real rclpy: task.* parameters, the Trigger
services, the latched ~/phase and ~/active_constraints topics, a run-time contact switch from the measured
wrench, the safe hold after a silent F/T topic and after an approach window without a touch, and the
refusals at start (unreachable waypoints, a force beyond the effort limits). Bounded in time (seconds)."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")

from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rclpy.qos import DurabilityPolicy, QoSProfile  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import String  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from qv_control.ros.bringup import to_parameters  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_control.task import TaskRefused  # noqa: E402
from qv_dynamics.errors import ModelError  # noqa: E402
from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 7) % 200
Q0 = [0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785]
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
FRAME = "panda_hand_tcp"


def params(**task) -> dict:
    base = {"model_config": "demo_model.yaml", "joints": JOINTS, "watchdog_timeout": 5.0, "safe_mode": "gravity",
            "command_delay": 0.0, "wrench_topics": ["/qv_test/ft"], "wrench_constraints": ["contact"],
            "task.enabled": True, "task.frame": FRAME, "task.redundancy_joint": "panda_joint3", "task.start_q": Q0,
            "task.surface_height": 0.245, "task.stiffness": 2.0e6, "task.ft_timeout": 0.3}
    base.update({f"task.{k}": v for k, v in task.items()})
    return base


@pytest.fixture(scope="module")
def session():
    with ros_session(DOMAIN, "qv_test_task_probe") as s:
        yield s


def test_refusals_at_start_name_the_target_and_the_joint():
    system, _ = load_model_config("demo_model.yaml")
    ctx_args = {"automatically_declare_parameters_from_overrides": False}
    with ros_session(DOMAIN, "qv_test_task_refusal") as (ctx, ex, probe):
        with pytest.raises(TaskRefused, match=r"target \d+ at \(2.000, 0.000, 0.245\) m is unreachable"):
            ControllerNode("qv_refused", context=ctx, parameter_overrides=to_parameters(
                params(trace="waypoints", waypoints=[0.6, 0.0, 2.0, 0.0], segment_time=6.0, release_at=1.0)),
                **ctx_args)
        # the Panda's joint 2 holds about 87 N m: 2 kN on the table is beyond it
        with pytest.raises(TaskRefused, match="exceeds the effort limit"):
            ControllerNode("qv_refused2", context=ctx, parameter_overrides=to_parameters(params(force=2000.0)),
                           **ctx_args)
    assert system.nv == 7


def test_run_time_contact_switch_phase_topic_and_silent_ft(session):
    ctx, ex, probe = session
    node = ControllerNode("qv_task_ctrl", context=ctx, parameter_overrides=to_parameters(params(approach_window=30.0)))
    dyn = DynamicsNode("qv_task_dyn", context=ctx, parameter_overrides=to_parameters(
        {"model_config": "demo_model.yaml", "active_constraints_topic": "/qv_task_ctrl/active_constraints",
         "diagnostics_period": 0.0}), automatically_declare_parameters_from_overrides=False)
    ex.add_node(node)
    ex.add_node(dyn)
    system = node.system
    R = system.frame_placement(np.asarray(Q0), FRAME).rotation
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    phases, active = [], []
    probe.create_subscription(String, "/qv_task_ctrl/phase", lambda m: phases.append(m.data), latched)
    probe.create_subscription(String, "/qv_task_ctrl/active_constraints", lambda m: active.append(m.data), latched)
    pub_js = probe.create_publisher(JointState, "/joint_states", 10)
    pub_ft = probe.create_publisher(WrenchStamped, "/qv_test/ft", 10)
    start = probe.create_client(Trigger, "/qv_task_ctrl/start")
    t, ft_sent = [0.0], [0.0]

    def send(fn: float | None) -> None:
        t[0] += 0.001
        stamp = rclpy.time.Time(seconds=t[0]).to_msg()
        if fn is not None:   # robot on environment, sensor axes: world force (0, 0, -fn)
            ft_sent[0] = time.monotonic()
            f = R.T @ np.array([0.0, 0.0, -fn])
            w = WrenchStamped()
            w.header.stamp = stamp
            w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = map(float, f)
            pub_ft.publish(w)
        js = JointState(name=JOINTS, position=Q0, velocity=[0.0] * 7, effort=[0.0] * 7)
        js.header.stamp = stamp
        pub_js.publish(js)
        ex.spin_once(timeout_sec=0.005)

    try:
        assert spin_until(ex, lambda: phases == ["free"] and active == [""])
        assert spin_until(ex, lambda: start.service_is_ready())
        fut = start.call_async(Trigger.Request())
        for _ in range(20):
            send(0.0)
        assert spin_until(ex, fut.done) and fut.result().success
        assert spin_until(ex, lambda: phases[-1] == "approach")
        assert not system.constraint("contact").active
        for _ in range(30):    # 5 N > contact_on (2 N): the node switches the constraint on
            send(5.0)
        assert spin_until(ex, lambda: phases[-1] == "contact" and active[-1] == "contact")
        assert system.constraint("contact").active and len(system.row_labels) == 1
        # the dynamics node (its own model) follows the controller's switch
        assert spin_until(ex, lambda: dyn.system.constraint("contact").active)
        safe0 = node.stats["safe_commands"]
        t_stop = time.monotonic()           # the F/T topic stops; states keep coming until the node holds
        while node.task_layer.task.phase != "hold" and time.monotonic() < t_stop + 60.0:
            send(None)
        # task.ft_timeout counts from the node's last F/T reception: never sooner after the last publish
        assert time.monotonic() - ft_sent[0] > 0.3
        assert spin_until(ex, lambda: phases[-1] == "hold" and active[-1] == "")
        assert node.task_layer.stats["ft_stale_episodes"] == 1 and node.stats["safe_commands"] > safe0
        assert "F/T topic silent" in node.task_layer.task.reason
        assert spin_until(ex, lambda: not dyn.system.constraint("contact").active)
    finally:
        retire(ex, node, dyn)


def test_no_touch_down_within_the_window_ends_in_a_safe_hold(session):
    ctx, ex, probe = session
    node = ControllerNode("qv_task_window", context=ctx, parameter_overrides=to_parameters(  # start at once
        dict(params(approach_window=0.05, autostart=True, hold=0.0), start_steady_states=1)))
    ex.add_node(node)
    pub_js = probe.create_publisher(JointState, "/joint_states", 10)
    try:
        for k in range(120):
            js = JointState(name=JOINTS, position=Q0, velocity=[0.0] * 7, effort=[0.0] * 7)
            js.header.stamp = rclpy.time.Time(seconds=0.001 * (k + 1)).to_msg()
            pub_js.publish(js)
            ex.spin_once(timeout_sec=0.005)
        assert spin_until(ex, lambda: node.task_layer.task.phase == "hold")
        assert "no touch-down within the approach window" in node.task_layer.task.reason
        assert not node.system.constraint("contact").active
    finally:
        retire(ex, node)


def test_refused_task_ends_the_process_with_one_line_and_exit_2():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    args = [f"task.{k}:={v}" for k, v in (("enabled", "true"), ("frame", FRAME), ("start_q", str(Q0)),
                                           ("surface_height", 0.245), ("force", 2000.0))]
    cmd = [sys.executable, "-m", "qv_control.ros.controller_node", "--ros-args", "-p", "model_config:=demo_model.yaml",
           "-p", f"joints:={JOINTS}".replace("'", '"')]
    for a in args:
        cmd += ["-p", a]
    env = dict(os.environ, PYTHONPATH=str(root), ROS_DOMAIN_ID=str(DOMAIN))
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert any("exceeds the effort limit" in ln for ln in lines) and "Traceback" not in r.stderr


def _state_with_wrench(ex, node, pub_js, pub_ft, k: int, fn: float) -> None:
    """The wrench reading fn (N pressing, sensor axes at Q0) and then the joint state at Q0, both stamped k ms;
    returns when the node has answered the state (a command or a safe output)."""
    R = node.system.frame_placement(np.asarray(Q0), FRAME).rotation
    stamp = rclpy.time.Time(seconds=0.001 * k).to_msg()
    w = WrenchStamped()
    w.header.stamp = stamp
    w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = map(float, R.T @ np.array([0.0, 0.0, -fn]))
    pub_ft.publish(w)
    spin_until(ex, lambda: node.task_layer.wrench_rx is not None, 1.0)
    js = JointState(name=JOINTS, position=Q0, velocity=[0.0] * 7, effort=[0.0] * 7)
    js.header.stamp = stamp
    pub_js.publish(js)
    n0 = node.stats["commands"] + node.stats["safe_commands"]
    spin_until(ex, lambda: node.stats["commands"] + node.stats["safe_commands"] > n0, 1.0)


def test_force_limit_trips_the_hold_and_lifts_off(session):
    """task.force_limit (default 3 × the commanded force): a wrench reading 35 N while pressing for 10 N sends
    the task to its safe hold, constraint off, counted in the diagnostics values; the held reference lifts the
    tool task.retract above its measured height (forward kinematics at the state's q)."""
    ctx, ex, probe = session
    node = ControllerNode("qv_task_limit", context=ctx, parameter_overrides=to_parameters(  # start at once
        dict(params(approach_window=30.0, autostart=True, hold=0.0), start_steady_states=1)))
    ex.add_node(node)
    system = node.system
    z0 = system.frame_placement(np.asarray(Q0), FRAME).translation[2]
    pub_js = probe.create_publisher(JointState, "/joint_states", 10)
    pub_ft = probe.create_publisher(WrenchStamped, "/qv_test/ft", 10)
    layer = node.task_layer
    try:
        assert spin_until(ex, lambda: pub_js.get_subscription_count() >= 1 and pub_ft.get_subscription_count() >= 1,
                          5.0)
        for k, fn in enumerate([5.0] * 20 + [35.0] * 5):
            _state_with_wrench(ex, node, pub_js, pub_ft, k + 1, fn)
        task = layer.task
        assert task.phase == "hold" and "above the limit 30.0 N" in task.reason
        assert layer.diagnostics()["force_limit_trips"] == 1 and not system.constraint("contact").active
        assert task.point(100.0)["p"][2] == pytest.approx(z0 + 0.003, abs=1e-9)
        assert [e["event"] for e in task.events][-3:] == ["contact made", "contact switched off for the hold",
                                                           "safe hold"]
    finally:
        retire(ex, node)


def test_stale_joint_states_in_contact_send_the_task_to_its_hold(session):
    """Pressing (contact switched on from the wrench), the joint states stop: the watchdog sends the safe output
    and the task goes to its hold ("joint states stale ... in contact"; ~/phase says so); when the states return
    the node keeps sending the safe output (the hold), not the law."""
    ctx, ex, probe = session
    node = ControllerNode("qv_task_stale", context=ctx, parameter_overrides=to_parameters(
        {**params(approach_window=30.0, autostart=True, hold=0.0), "watchdog_timeout": 0.05, "watchdog_period": 0.01,
             "start_steady_states": 1}))
    ex.add_node(node)
    system = node.system
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    phases = []
    probe.create_subscription(String, "/qv_task_stale/phase", lambda m: phases.append(m.data), latched)
    pub_js = probe.create_publisher(JointState, "/joint_states", 10)
    pub_ft = probe.create_publisher(WrenchStamped, "/qv_test/ft", 10)
    layer = node.task_layer

    def send(k: int) -> None:
        _state_with_wrench(ex, node, pub_js, pub_ft, k, 5.0)

    try:
        assert spin_until(ex, lambda: pub_js.get_subscription_count() >= 1 and pub_ft.get_subscription_count() >= 1)
        for k in range(1, 11):
            send(k)
        assert layer.task.phase == "contact" and system.constraint("contact").active
        assert spin_until(ex, lambda: layer.task.phase == "hold" and phases[-1:] == ["hold"], 5.0)
        assert "joint states stale" in layer.task.reason and node.stats["watchdog_episodes"] >= 1
        commands = node.stats["commands"]
        for k in range(11, 16):
            send(k)
        assert node.stats["commands"] == commands and not system.constraint("contact").active
    finally:
        retire(ex, node)


@pytest.mark.parametrize("extra", [{"theta_desired": [0.5] * 8}, {"lambda_desired": [-20.0]},
                                   {"reference.times": [0.0, 1.0], "reference.waypoints": [0.0] * 16}])
def test_references_given_with_a_task_are_refused_at_start(extra):
    """theta_desired at start replaced the task's motion from the first state on; with task.enabled it (and
    lambda_desired, a reference spline) is refused at start, naming it."""
    with ros_session(DOMAIN, "qv_test_task_refs") as (ctx, ex, probe):
        with pytest.raises(ModelError, match="cannot be given with task.enabled"):
            ControllerNode("qv_task_refs", context=ctx, parameter_overrides=to_parameters({**params(), **extra}),
                           automatically_declare_parameters_from_overrides=False)
