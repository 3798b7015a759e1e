"""``qv demo anymal --ros``: the same runs with the plant and the controller as ROS nodes in lock-step.

The legged MuJoCo node publishes ``/joint_states`` and ``/odom`` (nav_msgs/Odometry) once per control
period; the legged controller node answers each pair with one ``/effort_controller/commands`` message;
the plant steps 1 ms per command. Both nodes run in this process on one executor, talking through real
rclpy topics; the recorder reads MuJoCo's ground truth after each step.
"""
from __future__ import annotations

import os
import time

import numpy as np
import rclpy
from rclpy.context import Context

from qv_dynamics.plants.mujoco_legged import LeggedMujocoPlant, standing_configuration
from qv_dynamics.ros.legged_mujoco_node import LeggedMujocoNode
from qv_dynamics.ros.runner import make_executor

from ..ros.bringup import to_parameters
from ..ros.legged_controller_node import LeggedControllerNode
from .anymal_scene import AnymalConfig, Recorder, make_law, make_plan, make_system


def run_ros(cfg: AnymalConfig, kind: str, mass_scale: float = 1.0, domain_id: int | None = None,
            wall_limit: float = 600.0) -> dict:
    """One run through the ROS topics (module doc); same record as :func:`~qv_control.demo.anymal.run_direct`
    plus ``ros`` (commands, law errors, rejected messages)."""
    plant_sys, ctrl_sys = make_system(cfg), make_system(cfg, mass_scale)
    q0 = standing_configuration(plant_sys, joints=cfg.posture, feet=cfg.feet, penetration=cfg.penetration)
    plant = LeggedMujocoPlant(plant_sys)
    plan, T = make_plan(cfg, kind, plant_sys, q0)
    law = make_law(cfg, ctrl_sys, plan)
    rec = Recorder()
    context = Context()
    if domain_id is None:
        domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
    rclpy.init(context=context, domain_id=domain_id, args=[])
    nodes = []
    try:
        mj = LeggedMujocoNode("qv_legged_mujoco", context=context, system=plant_sys, plant=plant, q0=q0,
                              parameter_overrides=to_parameters({"mode": "lockstep", "dt": cfg.dt,
                                                                 "lockstep_resend": 0.5, "publish_clock": False}))
        nodes.append(mj)
        ctrl = LeggedControllerNode("qv_legged_controller", context=context, system=ctrl_sys, law=law,
                                    parameter_overrides=to_parameters({"joints": list(plant.joint_names),
                                                                       "odom_topic": "/odom", "command_delay": 0.0,
                                                                       # lock-step in one executor: a stall of
                                                                       # the loaded machine is no lost input
                                                                       "watchdog_timeout": 10.0}))
        nodes.append(ctrl)
        mj.on_step.append(lambda node: rec.add(node.t - cfg.dt, law, node.plant, node.plant.last_tau))
        executor = make_executor(context)
        for n in nodes:
            executor.add_node(n)
        t_end = time.monotonic() + 10.0
        while time.monotonic() < t_end:   # discovery (in-process, fast)
            if mj.pub_js.get_subscription_count() >= 1 and mj.pub_odom.get_subscription_count() >= 1 \
                    and ctrl.pub_cmd.get_subscription_count() >= 1:
                break
            executor.spin_once(timeout_sec=0.01)
        else:
            raise TimeoutError("legged demo nodes did not discover each other (ROS_DOMAIN_ID / discovery range?)")
        wall = time.perf_counter()
        mj.publish_state()
        limit = time.monotonic() + wall_limit
        while plant.time < T - 1e-9 and time.monotonic() < limit and ctrl.rejects["law"].total == 0:
            executor.spin_once(timeout_sec=0.1)
        mj.mode = "paused"
        wall = time.perf_counter() - wall
        stats = {"commands": ctrl.stats["commands"], "law_errors": ctrl.rejects["law"].total,
                 "rejected_commands": mj.rejects.total, "rejected_joint_states": ctrl.rejects["joint_states"].total,
                 "rejected_odometry": ctrl.rejects["odometry"].total,
                 "unpaired_joint_states": ctrl.rejects["odometry_sync"].total,
                 "watchdog_episodes": ctrl.stats["watchdog_episodes"]}
        executor.shutdown()
    finally:
        for n in nodes:
            try:
                n.destroy_node()
            except Exception:  # noqa: BLE001 - best-effort teardown
                pass
        rclpy.try_shutdown(context=context)
    out = rec.arrays()
    aborted = None if plant.time >= T - 1e-9 else f"stopped at t={plant.time:.3f} s ({stats})"
    out.update(events=law.events, aborted=aborted, wall_s=wall, limits=plant.effort_limits, ros=stats,
               qp_infeasible=law.qp.infeasible, qp_solves=law.qp.solves, kind=kind, mass_scale=mass_scale)
    if len(out["t"]) == 0:
        out["e_pos"] = out["e_rot"] = np.zeros((0, 3))
    return out


__all__ = ["run_ros"]
