"""qv_controller_node as a managed controller (qv_control.ros.lifecycle), driven through its real lifecycle
services (lifecycle_msgs ~/change_state, ~/get_state) and real topics, bounded in time; timing by handshakes
(the node's own counters, and the order of one publisher's messages), never by sleeps.

References: Pinocchio's generalized gravity at the measured pose (the command that holds a pose at rest,
computed here independently of the node's law), the start pose's θ from the task law's coordinates.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from lifecycle_msgs.srv import ChangeState, GetState  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray, String  # noqa: E402

from qv_control.ros.bringup import to_parameters  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_control.ros.lifecycle import StartBlend, SteadyLoop  # noqa: E402
from qv_dynamics.state import Reference  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 11) % 200
Q0 = [0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785]
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
FRAME = "panda_hand_tcp"
CONFIGURE, CLEANUP, ACTIVATE, DEACTIVATE = 1, 2, 3, 4


def params(name: str, **extra) -> list:
    p = {"model_config": "demo_model.yaml", "joints": JOINTS, "watchdog_timeout": 5.0, "safe_mode": "gravity",
         "command_delay": 0.0, "managed": True, "controller_name": f"{name}_effort",
         "wrench_topics": [f"/{name}/ft"], "wrench_constraints": ["contact"], "task.enabled": True,
         "task.frame": FRAME, "task.redundancy_joint": "panda_joint3", "task.start_q": Q0,
         "task.surface_height": 0.245, "task.stiffness": 2.0e6, "task.ft_timeout": 0.3}
    p.update(extra)
    return to_parameters(p)


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_test_lifecycle_probe") as s:
        yield s


class Client:
    """The lifecycle services of one node, a /joint_states publisher and a recorder of its commands."""

    def __init__(self, ros, node_name: str):
        _, self.ex, probe = ros
        self.probe = probe
        self.change = probe.create_client(ChangeState, f"/{node_name}/change_state")
        self.get = probe.create_client(GetState, f"/{node_name}/get_state")
        self.pub = probe.create_publisher(JointState, "/joint_states", 10)
        self.cmds: list[np.ndarray] = []
        self.sub = probe.create_subscription(Float64MultiArray, f"/{node_name}_effort/commands",
                                             lambda m: self.cmds.append(np.array(m.data)), 100)
        self.t = 0.0
        assert spin_until(self.ex, lambda: self.change.service_is_ready() and self.get.service_is_ready(), 10.0)

    def transition(self, tid: int) -> bool:
        req = ChangeState.Request()
        req.transition.id = tid
        fut = self.change.call_async(req)
        assert spin_until(self.ex, fut.done, 60.0), "no answer"
        return fut.result().success

    def state(self) -> str:
        fut = self.get.call_async(GetState.Request())
        assert spin_until(self.ex, fut.done, 10.0)
        return fut.result().current_state.label

    def send(self, q, dt: float = 0.001) -> None:
        self.t += dt
        js = JointState(name=JOINTS, position=[float(x) for x in q], velocity=[0.0] * 7, effort=[0.0] * 7)
        js.header.stamp = rclpy.time.Time(seconds=self.t).to_msg()
        self.pub.publish(js)


def feed_inactive(c: Client, node, q, n: int) -> None:
    """``n`` states to an inactive node, each once the previous one was read (its subscription keeps one)."""
    for _ in range(n):
        k = node.lifecycle_stats["inactive_states"]
        c.send(q)
        assert spin_until(c.ex, lambda: node.lifecycle_stats["inactive_states"] > k)


def gravity(system, q) -> np.ndarray:
    return pin.computeGeneralizedGravity(system.model, system.model.createData(), np.asarray(q, float))


def test_transitions_first_command_holds_the_pose_found_deactivate_then_silence(ros):
    """unconfigured → configure → inactive: states are read, nothing is commanded → activate: the first
    command holds the pose found (the pose 0.05 rad off task.start_q at joint 2): Pinocchio's g(q) there (at
    rest, the law's θ_d is the θ it found) and the reference then moves to the start pose in the bounded
    time; deactivate: the safe output (gravity hold at the last pose) once, then silence (no message between
    it and the first command after a re-activation, on the same ordered publisher)."""
    ctx, ex, _ = ros
    node = ControllerNode("qv_life", context=ctx, parameter_overrides=params("qv_life"))
    ex.add_node(node)
    try:
        c = Client(ros, "qv_life")
        assert c.state() == "unconfigured" and not node.configured
        assert c.transition(CONFIGURE) and c.state() == "inactive"
        assert spin_until(ex, lambda: c.pub.get_subscription_count() >= 1 and c.sub.get_publisher_count() >= 1)
        q = np.array(Q0)
        q[1] += 0.05                               # found 0.05 rad from task.start_q (within 0.1 rad)
        feed_inactive(c, node, q, 20)
        assert c.transition(ACTIVATE) and c.state() == "active"
        c.send(q)
        assert spin_until(ex, lambda: len(c.cmds) >= 1)
        assert len(c.cmds) == 1                    # nothing was commanded while inactive (same publisher, in order)
        g = gravity(node.system, q)
        np.testing.assert_allclose(c.cmds[0], g, rtol=1e-6, atol=1e-6 * np.abs(g).max())
        # the move to the start pose: θ_d reaches the start pose's θ in the bounded time T, with zero rate
        blend = node._blend
        assert blend is not None and 0.2 <= blend.T <= 1.875 * 0.1 / 0.1 + 1e-9
        theta_start = node.law.current().coords.evaluate(np.array(Q0), np.zeros(7), compiled=False).theta
        end = node.reference_at(blend.t0 + blend.T)
        np.testing.assert_allclose(end.theta, theta_start, atol=1e-9)
        np.testing.assert_allclose(end.theta_dot, 0.0, atol=1e-12)
        # deactivate: the safe output at the last pose, then nothing
        assert c.transition(DEACTIVATE) and c.state() == "inactive"
        assert spin_until(ex, lambda: len(c.cmds) >= 2)
        np.testing.assert_allclose(c.cmds[1], g, rtol=1e-6, atol=1e-6 * np.abs(g).max())
        feed_inactive(c, node, q, 30)
        assert c.transition(ACTIVATE)
        c.send(q)
        assert spin_until(ex, lambda: len(c.cmds) >= 3)
        assert len(c.cmds) == 3                    # silence between the safe output and the re-activation
        # cleanup: what configure made is gone (the command publisher among it)
        assert c.transition(DEACTIVATE) and c.transition(CLEANUP) and c.state() == "unconfigured"
        assert spin_until(ex, lambda: c.sub.get_publisher_count() == 0)
        assert c.transition(CONFIGURE) and c.state() == "inactive"   # and configured again
    finally:
        retire(ex, node)


def test_activation_refused_far_from_the_start_pose_and_without_a_state(ros):
    """No state yet: refused (waiting, not final); a pose 0.3 rad from task.start_q at joint 4: refused for
    good with the joint and the distance in /diagnostics; the node stays inactive and commands nothing."""
    ctx, ex, probe = ros
    node = ControllerNode("qv_life_far", context=ctx, parameter_overrides=params("qv_life_far"))
    ex.add_node(node)
    diags = []
    sub = probe.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diags.extend(
        {kv.key: kv.value for kv in s.values} for s in m.status if s.name == "qv_life_far: controller"), 10)
    try:
        c = Client(ros, "qv_life_far")
        assert c.transition(CONFIGURE)
        assert not c.transition(ACTIVATE) and c.state() == "inactive"
        assert spin_until(ex, lambda: diags and "no valid joint state" in diags[-1]["activation_refused"])
        assert diags[-1]["activation_refused_final"] == "0"
        assert spin_until(ex, lambda: c.pub.get_subscription_count() >= 1)
        q = np.array(Q0)
        q[3] += 0.3
        feed_inactive(c, node, q, 1)
        assert not c.transition(ACTIVATE) and c.state() == "inactive"
        assert spin_until(ex, lambda: diags and diags[-1]["activation_refused_final"] == "1")
        reason = diags[-1]["activation_refused"]
        assert "0.3 rad from task.start_q at panda_joint4" in reason and "task.start_tolerance 0.1" in reason
        assert not c.cmds and node.stats["commands"] == 0
    finally:
        probe.destroy_subscription(sub)
        retire(ex, node)


def test_unmanaged_task_starts_after_the_steady_loop(ros):
    """managed false: configured at construction, activated by the first state; the task (autostart) starts
    only once start_steady_states consecutive states came on time: a late state (10 periods) restarts the
    count, and the approach starts at the state that completes it. Deactivated on request, the node stays
    inactive until activated on request."""
    ctx, ex, probe = ros
    node = ControllerNode("qv_life_steady", context=ctx, parameter_overrides=params(
        "qv_life_steady", managed=False, start_steady_states=50, **{"task.autostart": True}))
    ex.add_node(node)
    phases = []
    from rclpy.qos import DurabilityPolicy, QoSProfile

    sub = probe.create_subscription(String, "/qv_life_steady/phase", lambda m: phases.append(m.data),
                                    QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))
    try:
        assert node.configured and not node.active
        c = Client(ros, "qv_life_steady")
        assert spin_until(ex, lambda: c.pub.get_subscription_count() >= 1 and c.sub.get_publisher_count() >= 1)

        def send(n: int, dt: float = 0.001) -> None:
            for _ in range(n):
                k = len(c.cmds)
                c.send(Q0, dt)
                assert spin_until(ex, lambda: len(c.cmds) > k)

        send(30)
        assert node.active and c.state() == "active" and node.steady_loop.run == 30
        send(1, dt=0.010)                         # late: 10 periods after the previous state
        assert node.steady_loop.run == 1 and node.steady_loop.late == 1
        send(48)
        assert node.task_layer.task.phase == "free" and not node.steady_loop.steady
        send(1)
        assert node.steady_loop.steady and node.task_layer.task.phase == "approach"
        assert spin_until(ex, lambda: phases and phases[-1] == "approach")
        # deactivated on request, it stays inactive (no self-activation at the next states); the task holds
        n = len(c.cmds)
        assert c.transition(DEACTIVATE) and spin_until(ex, lambda: len(c.cmds) == n + 1)   # the safe output
        assert node.task_layer.task.phase == "hold" and node.task_layer.task.reason == "controller deactivated"
        feed_inactive(c, node, Q0, 5)
        assert c.state() == "inactive" and not node.active
        assert c.transition(ACTIVATE)
        send(1)
        assert len(c.cmds) == n + 2                # nothing between the safe output and the re-activation
    finally:
        probe.destroy_subscription(sub)
        retire(ex, node)


def test_steady_loop_and_start_blend_closed_forms():
    """SteadyLoop: the period is the smallest stamp step, a step beyond gap periods restarts the run. StartBlend:
    Δ(t0) = Δ0 with zero rate and acceleration at both ends, peak rate 1.875 Δ0/T at the middle."""
    sl = SteadyLoop(3, 4.0)
    assert not sl.answered(0.0) and not sl.answered(0.002) and sl.period == 0.002
    assert sl.answered(0.004) and sl.t_steady == 0.004
    sl2 = SteadyLoop(3, 4.0)
    for t in (0.0, 0.001, 0.0051):             # 4.1 periods: late
        sl2.answered(t)
    assert sl2.run == 1 and sl2.late == 1
    b = StartBlend(np.array([0.1, -0.2]), 1.0, 2.0)
    ref = Reference(theta=np.zeros(2), theta_dot=np.zeros(2), theta_ddot=np.zeros(2))
    r0, r1, rm = b.apply(1.0, ref), b.apply(3.0, ref), b.apply(2.0, ref)
    np.testing.assert_allclose(r0.theta, [0.1, -0.2])
    np.testing.assert_allclose([r0.theta_dot, r0.theta_ddot, r1.theta, r1.theta_dot, r1.theta_ddot], 0.0, atol=1e-15)
    np.testing.assert_allclose(rm.theta_dot, -1.875 * np.array([0.1, -0.2]) / 2.0, rtol=1e-12)
    h = 1e-6                                   # the rate is the derivative of the offset (central difference)
    fd = (b.apply(1.7 + h, ref).theta - b.apply(1.7 - h, ref).theta) / (2 * h)
    np.testing.assert_allclose(b.apply(1.7, ref).theta_dot, fd, rtol=1e-6)


def test_spawner_activates_a_managed_node_and_stops_at_a_final_refusal(ros, tmp_path):
    """qv_spawner (a real process) configures and activates a managed node once it has a joint state, exit 0;
    against a pose far from task.start_q it stops at once with the node's reason, exit 1."""
    ctx, ex, _ = ros
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(DOMAIN))
    for name, offset, code, text in (("qv_life_sp", 0.0, 0, "is active"),
                                     ("qv_life_sp_far", 0.3, 1, "from task.start_q at panda_joint4")):
        node = ControllerNode(name, context=ctx, parameter_overrides=params(name))
        ex.add_node(node)
        try:
            c = Client(ros, name)
            q = np.array(Q0)
            q[3] += offset
            proc = subprocess.Popen([sys.executable, "-m", "qv_control.ros.spawner", name, "--activate-timeout",
                                     "30"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            while proc.poll() is None:            # states at ~100 Hz while the spawner works
                c.send(q, 0.01)
                spin_until(ex, lambda: proc.poll() is not None, 0.01)
            out, err = proc.communicate(timeout=30)
            assert proc.returncode == code and text in out + err, (out, err)
            assert node.active == (code == 0)
        finally:
            retire(ex, node)


def test_spawner_recovers_answers_the_middleware_dropped(ros, monkeypatch):
    """The first answer of each lifecycle service is dropped on the spawner's side (its request reaches the node,
    which acts on it, as when the node had not yet discovered the response reader): the spawner asks again
    (get_state) or reads the node's state (configure, activate) and brings the node to active all the same."""
    from rclpy.task import Future

    from qv_control.ros import spawner

    monkeypatch.setattr(spawner, "RESEND", 0.2)
    ctx, ex, _ = ros
    name = "qv_life_lost"
    node = ControllerNode(name, context=ctx, parameter_overrides=params(name))
    ex.add_node(node)
    sp_node = rclpy.create_node("qv_life_lost_spawner", context=ctx)
    ex.add_node(sp_node)
    try:
        c = Client(ros, name)
        sp = spawner.Spawner(sp_node, name, ex)
        dropped = []

        def drop_first(client):
            send = client.call_async

            def call_async(request):
                future = send(request)
                if client not in dropped:
                    dropped.append(client)
                    return Future()        # the request went out; its answer never arrives here
                return future
            client.call_async = call_async

        drop_first(sp.get_state)
        drop_first(sp.change)
        sp_node.create_timer(0.01, lambda: c.send(np.array(Q0), 0.01))   # the robot's states meanwhile
        code, msg = spawner.spawn(sp, inactive=False, service_timeout=60.0, activate_timeout=30.0)
        assert (code, msg) == (0, f"/{name} is active") and node.active
        assert dropped == [sp.get_state, sp.change]
    finally:
        retire(ex, sp_node, node)


def test_configure_takes_the_model_built_while_waiting_unless_its_file_changed(ros, tmp_path):
    """A managed node builds its model while unconfigured; configure takes that model object while the parameters
    and the file naming it are as they were, and builds a new one once the model file was rewritten."""
    import shutil
    import time

    ctx, ex, _ = ros
    model = tmp_path / "demo_model.yaml"
    shutil.copy(ROOT / "config" / "demo_model.yaml", model)
    node = ControllerNode("qv_life_model", context=ctx,
                          parameter_overrides=params("qv_life_model", model_config=str(model)))
    ex.add_node(node)
    try:
        c = Client(ros, "qv_life_model")
        prepared = node._prepared_model[1]
        assert c.transition(CONFIGURE) and node.system is prepared
        assert c.transition(CLEANUP) and c.state() == "unconfigured"
        node._prepared_model = (node._model_key(), prepared)       # as prepared again; then the file rewritten
        model.write_text(model.read_text() + "\n")
        os.utime(model, ns=(time.time_ns(), time.time_ns() + 10**9))
        assert c.transition(CONFIGURE) and node.system is not prepared and node.system.nv == prepared.nv
    finally:
        ex.remove_node(node)
        node.destroy_node()


def test_spawner_stopped_by_a_signal_says_so_in_one_line(tmp_path):
    """qv_spawner waiting for a node that never comes, stopped by SIGTERM (as ros2 launch stops it) once it
    reports it waits: exit 1 and one line naming the signal, no traceback."""
    import signal

    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_DOMAIN_ID=str(DOMAIN))
    proc = subprocess.Popen([sys.executable, "-m", "qv_control.ros.spawner", "qv_nobody_here"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()                 # the handshake: rclpy (and its signal handlers) is up
        assert "waiting for the lifecycle services of qv_nobody_here" in first, first
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, (proc.returncode, out, err)
    assert "Traceback" not in out + err and err.strip().splitlines() == [
        "qv_spawner: stopped by a signal before qv_nobody_here was active"], (out, err)
