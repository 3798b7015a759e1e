"""The demo through the ROS 2 topic contract in one process: MuJoCo node (lock-step) ↔ controller node (law
injected) ↔ a supervisor node (contact detection from the WrenchStamped, table command)."""
from __future__ import annotations

import os
import time

import rclpy
from geometry_msgs.msg import WrenchStamped
from rclpy.context import Context
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from std_msgs.msg import Float64

from qv_dynamics.ros.messages import stamp_to_sec, wrench_to_array
from qv_dynamics.ros.mujoco_node import MujocoNode
from qv_dynamics.ros.runner import make_executor

from ..ros.bringup import to_parameters
from ..ros.controller_node import ControllerNode
from .config import CONTACT, DemoConfig, initial_state, make_plant, make_system, perturbed_system
from .runs import Recorder
from .supervisor import ContactSupervisor
from .switching_law import make_demo_law, reference_for


class DemoGraph:
    """The three nodes of one ROS demo run, in one context, wired as deployed (``nodes`` lists what was built,
    so a failure half-way still destroys them)."""

    def __init__(self, cfg: DemoConfig, kind: str, mass_factor: float, context: Context):
        self.cfg, self.kind, self.context = cfg, kind, context
        self.plant_sys, self.q0, self.p0, self.R0 = initial_state(cfg)
        self.ctrl_sys = make_system(cfg) if mass_factor == 1.0 else perturbed_system(cfg, mass_factor)
        self.plant = make_plant(cfg, self.plant_sys)
        self.nodes: list[Node] = []
        self.R_tool = self.plant.tool_rotation()

    def build(self) -> None:
        cfg, context, plant = self.cfg, self.context, self.plant
        sup = self.sup = Node("qv_demo_supervisor", context=context)
        self.nodes.append(sup)
        self.table_pub = sup.create_publisher(Float64, "/qv_mujoco/table_height", 10)
        self.sc = ContactSupervisor(cfg, self.ctrl_sys, self.p0,
                                    lambda z: self.table_pub.publish(Float64(data=float(z))), logger=sup.get_logger())
        self.rec = Recorder(self.sc, plant.effort_limits)
        self.mj = MujocoNode("qv_mujoco", context=context, system=self.plant_sys, plant=plant, q0=self.q0,
                             parameter_overrides=to_parameters({"mode": "lockstep", "dt": cfg.dt,
                                                                "lockstep_resend": 0.5, "publish_clock": True}))
        self.nodes.append(self.mj)
        self.mj.on_step.append(lambda node: self.rec.record(node.plant, node.tau))
        self.law = make_demo_law(self.kind, cfg, self.ctrl_sys, self.R0, self.q0)
        self.rec.law = self.law
        q3 = float(self.q0[self.ctrl_sys.joint_q_index(cfg.redundancy_joint)])
        self.ctrl = ControllerNode(
            "qv_controller", context=context, system=self.ctrl_sys, law=self.law,
            reference=lambda t: reference_for(self.kind, self.sc.task(t), q3),
            parameter_overrides=to_parameters({
                "joints": list(plant.joint_names), "watchdog_timeout": 5.0, "safe_mode": "gravity",
                "command_delay": 0.0,   # lock-step: each command acts from the state it answers
                "wrench_topics": ["/qv_mujoco/tool_ft/wrench"], "wrench_constraints": [CONTACT]}))
        self.nodes.append(self.ctrl)
        self.mj.on_step.append(self.track_rotation)
        sup.create_subscription(WrenchStamped, "/qv_mujoco/tool_ft/wrench", self.on_wrench, qos_profile_sensor_data)

    def on_wrench(self, msg: WrenchStamped) -> None:
        """Contact detection from the sensor message: normal force = −(R f)_z (f: robot on environment)."""
        w = wrench_to_array(msg)
        fn = -float((self.R_tool @ w[:3])[2])
        self.sc.update(stamp_to_sec(msg.header.stamp), fn, self.mj.plant.tool_position[2])

    def track_rotation(self, node) -> None:
        self.R_tool = node.plant.tool_rotation()

    def wait_for_discovery(self, executor, timeout: float = 10.0) -> None:
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:  # discovery (in-process, fast)
            if self.mj.pub_js.get_subscription_count() >= 1 and self.ctrl.pub_cmd.get_subscription_count() >= 1 \
                    and self.mj.pub_wrench.get_subscription_count() >= 2 \
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
        while graph.sc.phase != "done" and time.monotonic() < wall_limit:
            executor.spin_once(timeout_sec=0.1)
        graph.mj.mode = "paused"
        wall = time.perf_counter() - t0
        ctrl = graph.ctrl
        stats = {"commands": ctrl.stats["commands"], "safe_commands": ctrl.stats["safe_commands"],
                 "rejected": {k: dict(v.counts) for k, v in ctrl.rejects.items() if v.total},
                 "law_rebuilds": getattr(graph.law, "rebuilds", None)}
        executor.shutdown()
    finally:
        graph.destroy()
        rclpy.try_shutdown(context=context)
    sc = graph.sc
    return {"arrays": graph.rec.arrays(), "events": sc.events, "plan": sc.plan, "wall_time_s": wall,
            "aborted": sc.aborted, "kind": kind, "mass_factor": mass_factor, "limits": graph.plant.effort_limits,
            "ros": stats}
