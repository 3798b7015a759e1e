"""Inputs while a contact task runs, and the task services as a state machine, through real rclpy: the demo's
graph in one process (the MuJoCo node in lock-step ↔ qv_controller_node running the task, qv_control.demo.ros_run)
with a probe node that sets parameters through the parameter services, publishes on the node's input topics,
calls the std_srvs/Trigger services and reads /diagnostics. Every force is MuJoCo's own contact force (the
demo's recorder); every wait is a condition on the plant's time or a message, bounded in wall time."""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
pytest.importorskip("mujoco")

from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from rclpy.context import Context  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from rclpy.parameter_client import AsyncParameterClient  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint  # noqa: E402

from qv_control.demo.config import DemoConfig  # noqa: E402
from qv_control.demo.ros_run import DemoGraph  # noqa: E402
from qv_dynamics.ros.runner import make_executor  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 13) % 200
F = 10.0
WALL = 120.0     # s: the bound of every wait (the lock-step plant runs as fast as the machine answers)


class Graph:
    """The demo graph, a probe, an executor; waits on the plant's time or on a condition."""

    def __init__(self, started: bool = True):
        """``started``: the demo's task as the demo runs it (started at t = 0) and the plant stepping; else
        the task in free motion and no state sent yet."""
        self.ctx = Context()
        rclpy.init(context=self.ctx, domain_id=DOMAIN, args=[])
        cfg = DemoConfig()
        cfg.phases_after_nominal = False
        self.g = DemoGraph(cfg, "qv", 1.0, self.ctx)
        self.g.build()
        self.ex = make_executor(self.ctx)
        self.probe = rclpy.create_node("qv_inputs_probe", context=self.ctx)
        for n in self.g.nodes + [self.probe]:
            self.ex.add_node(n)
        self.g.wait_for_discovery(self.ex)
        self.ctrl, self.task, self.plant = self.g.ctrl, self.g.task, self.g.plant
        self.diag: dict = {}
        self.probe.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)
        if started:
            self.g.mj.publish_state()
        else:
            self.task.phase, self.task.profile, self.task.clock = "free", None, None

    def _on_diag(self, msg: DiagnosticArray) -> None:
        for st in msg.status:
            if "controller" in st.name:
                self.diag = {kv.key: kv.value for kv in st.values}

    def until(self, cond, what: str) -> None:
        end = time.monotonic() + WALL
        while not cond():
            assert time.monotonic() < end, f"timed out waiting for {what} (plant t = {self.plant.time:.3f} s)"
            self.ex.spin_once(timeout_sec=0.05)

    def run_to(self, t: float) -> None:
        self.until(lambda: self.plant.time >= t, f"plant time {t}")

    def call(self, service: str):
        cli = self.probe.create_client(Trigger, f"/qv_controller/{service}")
        self.until(cli.service_is_ready, f"service {service}")
        fut = cli.call_async(Trigger.Request())
        self.until(fut.done, f"answer of {service}")
        return fut.result()

    def fn(self, t0: float, t1: float = np.inf) -> np.ndarray:
        a = self.g.rec.rows
        t, fn = np.array(a["t"]), np.array(a["fn"])
        return fn[(t >= t0) & (t < t1)]

    def close(self) -> None:
        self.g.mj.mode = "paused"
        self.ex.shutdown()
        self.probe.destroy_node()
        self.g.destroy()
        rclpy.try_shutdown(context=self.ctx)


@pytest.fixture
def graph():
    g = Graph()
    try:
        yield g
    finally:
        g.close()


def test_inputs_that_would_change_a_running_task_are_refused_and_counted(graph):
    """In contact at 10 N: lambda_desired [-20] (pressed 20 N, uncounted), [-40] on ~/lambda_desired (tripped the
    force limit, then every state failed), theta_desired, law osc (failed every state), task.force, law_params.kp
    as parameters, and one point on ~/reference (lifted the tool, 87 N m): each parameter set answers unsuccessful,
    each message is dropped; /diagnostics counts them (inputs_refused, refused_<input>); the law never fails
    and the plant's force stays at 10 N ± 5 % for the next 0.5 s."""
    g = graph
    g.until(lambda: g.task.t_contact is not None, "the first touch")
    tc = g.task.t_contact
    g.run_to(tc + 0.5)
    params = AsyncParameterClient(g.probe, "qv_controller")
    g.until(lambda: params.services_are_ready(), "the parameter services")
    for p in (Parameter("lambda_desired", value=[-20.0]), Parameter("theta_desired", value=[0.5] * 8),
              Parameter("law", value="osc")):
        fut = params.set_parameters([p])
        g.until(fut.done, f"the answer to {p.name}")
        res = fut.result().results[0]
        assert not res.successful and "contact task owns" in res.reason, (p.name, res.reason)
    for p in (Parameter("task.force", value=30.0), Parameter("law_params.kp", value=10.0)):
        fut = params.set_parameters([p])     # read at start / not this node's: refused by the parameter services
        g.until(fut.done, f"the answer to {p.name}")
        assert not fut.result().results[0].successful, p.name
    lam = g.probe.create_publisher(Float64MultiArray, "/qv_controller/lambda_desired", 10)
    ref = g.probe.create_publisher(JointTrajectory, "/qv_controller/reference", 10)
    g.until(lambda: lam.get_subscription_count() >= 1 and ref.get_subscription_count() >= 1, "the input topics")
    lam.publish(Float64MultiArray(data=[-40.0]))
    traj = JointTrajectory(joint_names=list(g.ctrl.theta_names))
    traj.points = [JointTrajectoryPoint(positions=[0.6] * len(traj.joint_names))]
    ref.publish(traj)
    t_in = g.plant.time
    g.until(lambda: int(g.diag.get("inputs_refused", 0)) >= 7, "the refusals in /diagnostics")
    names = ("lambda_desired", "theta_desired", "law", "reference", "task.force", "law_params.kp")
    assert {k: int(g.diag[f"refused_{k}"]) for k in names} == dict(zip(names, [2, 1, 1, 1, 1, 1]))
    g.run_to(t_in + 0.5)
    press = g.fn(t_in)
    assert g.task.phase == "contact" and g.ctrl.rejects["law"].total == 0 and g.ctrl.stats["safe_commands"] == 0
    assert float(np.abs(press - F).max()) <= 0.05 * F, (press.min(), press.max())


def test_task_services_are_a_state_machine(graph):
    """lift_off in contact acts; a second one in the force ramp is refused (it restarted the ramp from the full
    force) and the force keeps falling; after done, reset acts and start is refused while the tool moves back
    to the start pose, then acts; the second run touches down within the plan; hold while pressing acts (the
    force falls to 0 within 5 ms: the node's safe output, not the law), a second hold is refused, and reset
    clears it."""
    g = graph
    g.until(lambda: g.task.t_contact is not None, "the first touch")
    g.run_to(g.task.t_contact + 0.4)
    first = g.call("lift_off")
    t1 = g.plant.time
    second = g.call("lift_off")
    assert first.success and not second.success and "already ramps to zero" in second.message
    g.until(lambda: g.task.phase == "done", "done")
    assert float(g.fn(t1 + 0.01).max()) <= float(g.fn(t1, t1 + 0.01).max()) + 1e-6
    reset = g.call("reset")
    early = g.call("start")
    assert reset.success and not early.success and "moving back to the start pose" in early.message
    p_from, t_from, dur = g.task.homing
    g.run_to(t_from + dur + 0.01)
    again = g.call("start")
    assert again.success, again.message
    t_start = g.plant.time
    g.until(lambda: g.task.t_contact is not None and g.task.t_contact > t_start, "the second touch")
    tc = g.task.t_contact
    g.run_to(tc + 0.4)
    assert float(g.fn(tc - 0.01, tc + 0.1).max()) <= 1.5 * F + 1.0
    safe0 = g.ctrl.stats["safe_commands"]
    hold = g.call("hold")
    t_hold = g.plant.time
    hold2 = g.call("hold")
    assert hold.success and not hold2.success and "already holding" in hold2.message
    g.run_to(t_hold + 0.2)
    assert float(g.fn(t_hold + 0.005).max()) == 0.0 and g.ctrl.stats["safe_commands"] > safe0 + 100
    assert g.call("reset").success and g.task.phase == "free"
    assert int(g.ctrl.task_layer.stats["commands_refused"]) == 3


def test_start_before_the_first_state_is_armed_then_runs():
    """~/start before any joint state: answered "armed" (it started the task at once and held it: "no touch-down
    within the approach window"); a second start is refused; the first state starts the approach."""
    g = Graph(started=False)
    try:
        first, second = g.call("start"), g.call("start")
        assert first.success and "armed" in first.message
        assert not second.success and "already armed" in second.message
        assert g.task.phase == "free" and g.ctrl.stats["commands"] == 0
        g.g.mj.publish_state()
        g.until(lambda: g.task.phase == "approach", "the approach")
        g.run_to(0.5)
        assert g.task.phase == "approach" and g.task.reason is None
    finally:
        g.close()
