"""The demo through the ROS 2 topic contract in one process: MuJoCo node (lock-step) ↔ controller node running
the contact task (:mod:`qv_control.ros.task_layer`: contact detection from the WrenchStamped, constraint
switches, phase) ↔ a scenario node (the table command)."""
from __future__ import annotations

import os
import time

import rclpy
from rclpy.context import Context
from rclpy.node import Node
from std_msgs.msg import Float64

from qv_dynamics.ros.mujoco_node import MujocoNode
from qv_dynamics.ros.runner import make_executor

from ..ros.bringup import to_parameters
from ..ros.controller_node import ControllerNode
from .config import (
    CONTACT,
    DemoConfig,
    Scenario,
    demo_law,
    demo_task,
    initial_state,
    make_plant,
    make_system,
    perturbed_system,
    planned_touch_speed,
)
from .recorder import Recorder


class DemoGraph:
    """The three nodes of one ROS demo run, in one context, wired as deployed (``nodes`` lists what was built,
    so a failure half-way still destroys them)."""

    def __init__(self, cfg: DemoConfig, kind: str, mass_factor: float, context: Context):
        self.cfg, self.kind, self.context = cfg, kind, context
        self.plant_sys, self.q0, self.p0, self.R0 = initial_state(cfg)
        self.ctrl_sys = make_system(cfg) if mass_factor == 1.0 else perturbed_system(cfg, mass_factor)
        self.plant = make_plant(cfg, self.plant_sys)
        self.nodes: list[Node] = []
        self.finished = False

    def build(self) -> None:
        cfg, context, plant = self.cfg, self.context, self.plant
        sup = self.sup = Node("qv_demo_scenario", context=context)
        self.nodes.append(sup)
        self.table_pub = sup.create_publisher(Float64, "/qv_mujoco/table_height", 10)
        self.task = demo_task(cfg, self.ctrl_sys, self.p0, planned_touch_speed(cfg, self.ctrl_sys, self.q0))
        self.scenario = Scenario(cfg, self.task, lambda z: self.table_pub.publish(Float64(data=float(z))))
        self.rec = Recorder(self.task, plant.effort_limits)
        self.mj = MujocoNode("qv_mujoco", context=context, system=self.plant_sys, plant=plant, q0=self.q0,
                             parameter_overrides=to_parameters({"mode": "lockstep", "dt": cfg.dt,
                                                                "lockstep_resend": 0.5, "publish_clock": True}))
        self.nodes.append(self.mj)
        self.mj.on_step.append(lambda node: self.rec.record(node.plant, node.tau))
        task_law = demo_law(self.kind, cfg, self.ctrl_sys, self.R0, self.q0)
        self.law = task_law.law
        self.rec.law = self.law
        self.ctrl = ControllerNode(
            "qv_controller", context=context, system=self.ctrl_sys, task=(self.task, task_law, cfg.tool_frame),
            parameter_overrides=to_parameters({
                "joints": list(plant.joint_names), "watchdog_timeout": 5.0, "safe_mode": "gravity",
                "command_delay": 0.0,   # lock-step: each command acts from the state it answers
                "wrench_topics": ["/qv_mujoco/tool_ft/wrench"], "wrench_constraints": [CONTACT],
                "task.ft_timeout": 5.0}))   # lock-step: the wall time between states is the machine's, not the plant's
        self.nodes.append(self.ctrl)
        self.mj.on_step.append(self.on_step)

    def on_step(self, node) -> None:
        if self.scenario.step(node.plant.time):
            self.finished = True

    def wait_for_discovery(self, executor, timeout: float = 10.0) -> None:
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:  # discovery (in-process, fast)
            if self.mj.pub_js.get_subscription_count() >= 1 and self.ctrl.pub_cmd.get_subscription_count() >= 1 \
                    and self.mj.pub_wrench.get_subscription_count() >= 1 \
                    and self.table_pub.get_subscription_count() >= 1:
                return
            executor.spin_once(timeout_sec=0.01)
        raise TimeoutError("demo nodes did not discover each other (ROS_DOMAIN_ID / discovery range?)")

    def destroy(self) -> None:
        for n in self.nodes:
            try:
                n.destroy_node()
            except Exception:  # noqa: BLE001 - best effort at teardown
                pass


def run_ros(cfg: DemoConfig, kind: str = "qv", mass_factor: float = 1.0, domain_id: int | None = None) -> dict:
    """The scenario through the ROS 2 topic contract in one process (see the module docstring)."""
    context = Context()
    if domain_id is None:
        domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
    graph = DemoGraph(cfg, kind, mass_factor, context)
    rclpy.init(context=context, domain_id=domain_id, args=[])
    try:
        graph.build()
        executor = make_executor(context)
        for n in graph.nodes:
            executor.add_node(n)
        graph.wait_for_discovery(executor)
        t0 = time.perf_counter()
        graph.mj.publish_state()
        wall_limit = time.monotonic() + 600.0
        while not graph.finished and time.monotonic() < wall_limit:
            executor.spin_once(timeout_sec=0.1)
        graph.mj.mode = "paused"
        wall = time.perf_counter() - t0
        ctrl = graph.ctrl
        stats = {"commands": ctrl.stats["commands"], "safe_commands": ctrl.stats["safe_commands"],
                 "rejected": {k: dict(v.counts) for k, v in ctrl.rejects.items() if v.total},
                 "law_rebuilds": getattr(graph.law, "rebuilds", None), **ctrl.task_layer.stats}
        executor.shutdown()
    finally:
        graph.destroy()
        rclpy.try_shutdown(context=context)
    task = graph.task
    return {"arrays": graph.rec.arrays(), "events": task.events, "plan": task.plan, "wall_time_s": wall,
            "aborted": task.reason, "kind": kind, "mass_factor": mass_factor, "limits": graph.plant.effort_limits,
            "ros": stats}
