"""The bimanual run (``ours``) through the ROS 2 topic contract, in one process and lock-step:

    qv_loop_plant_node ──/joint_states (the arms' joints), /box/odom (nav_msgs/Odometry),
                         ~/grasp_left/wrench, ~/grasp_right/wrench (WrenchStamped)──▶ qv_controller_node
    qv_loop_plant_node ◀──/effort_controller/commands (Float64MultiArray, one per arm joint)── qv_controller_node

One controller node for the joints of both arms (the passive law injected, θ_d(t) and λ_d(t) from the plan as its
reference callable); the box state reaches it only as Odometry and the grasp forces only as wrenches.
"""
from __future__ import annotations

import os
import time

import rclpy
from rclpy.context import Context

from qv_dynamics.ros.loop_plant_node import LoopPlantNode
from qv_dynamics.ros.runner import make_executor
from qv_dynamics.sim.bimanual import arm_joints

from ..ros.bringup import to_parameters
from ..ros.controller_node import ControllerNode
from .bimanual import BimanualConfig, Recorder, _setup, make_ours

PLANT_NODE = "qv_bimanual_plant"
ODOM = "/box/odom"


def run_ros(cfg: BimanualConfig, domain_id: int | None = None, wall_limit: float = 600.0) -> dict:
    """``run(cfg, "ours")`` through the topics (module doc); same recorded arrays plus ROS statistics."""
    system, q0, mask, plant, plan = _setup(cfg)
    law = make_ours(cfg, system, q0, plan)
    rec = Recorder(plan, system)
    context = Context()
    domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0) if domain_id is None else domain_id
    rclpy.init(context=context, domain_id=domain_id, args=[])
    nodes = []
    try:
        def record(node: LoopPlantNode) -> None:
            t = node.t - cfg.dt                       # the state the command answered
            rec.add(t, q_prev[0], node.tau, lam_prev[0], plan.lambda_d(t), mask)
            q_prev[0] = node.plant.q
            lam_prev[0] = node.plant.lambda_meas(system.constraint_rows(q_prev[0])[1])

        q_prev = [plant.q]
        lam_prev = [plant.lambda_meas(system.constraint_rows(q_prev[0])[1])]
        mj = LoopPlantNode(PLANT_NODE, context=context, system=system, plant=plant, on_step=record,
                           parameter_overrides=to_parameters({"mode": "lockstep", "dt": cfg.dt, "lockstep_resend": 0.5,
                                                              "publish_clock": False, "odom_topic": ODOM,
                                                              "odom_frame": "world", "base_frame": "box"}))
        nodes.append(mj)
        ctrl = ControllerNode("qv_controller", context=context, system=system, law=law, reference=plan.reference,
                              parameter_overrides=to_parameters({
                                  "joints": arm_joints(spec=cfg.system), "watchdog_timeout": 5.0, "odom_topic": ODOM,
                                  "command_delay": 0.0,   # lock-step: each command acts from the state it answers
                                  "wrench_topics": [f"/{PLANT_NODE}/grasp_{s}/wrench" for s in cfg.system.sides],
                                  "wrench_constraints": [f"grasp_{s}" for s in cfg.system.sides]}))
        nodes.append(ctrl)
        executor = make_executor(context)
        for n in nodes:
            executor.add_node(n)
        t_end = time.monotonic() + 10.0
        while mj.pub_js.get_subscription_count() < 1 or mj.pub_odom.get_subscription_count() < 1 or \
                ctrl.pub_cmd.get_subscription_count() < 1:
            if time.monotonic() > t_end:
                raise TimeoutError("bimanual nodes did not discover each other (ROS_DOMAIN_ID?)")
            executor.spin_once(timeout_sec=0.01)
        wall = time.perf_counter()
        mj.publish_state()
        deadline = time.monotonic() + wall_limit
        while mj.t < cfg.t_final - 0.5 * cfg.dt and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.1)
        wall = time.perf_counter() - wall
        st = ctrl.stats
        stats = {"commands": st["commands"], "safe_commands": st["safe_commands"], "plant_steps": mj.steps,
                 "compute_ms_mean": st["compute_ms_sum"] / max(1, st["commands"]),
                 "rejected": {k: dict(v.counts) for k, v in ctrl.rejects.items() if v.total}}
        executor.shutdown()
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=context)
    out = rec.arrays()
    out.update(wall_s=wall, limits=plant.effort_limits, mask=mask, ros=stats)
    return out
