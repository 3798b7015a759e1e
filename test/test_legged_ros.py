"""ANYmal C through the ROS topics: the legged MuJoCo node publishes /joint_states and
nav_msgs/Odometry, the legged controller node answers with effort commands, in lock-step.

1. In-process (real rclpy publishers/subscribers, one executor): stance, shift, one foot lift, swing and
   touchdown of the short CI plan; the acceptance figures of the direct run hold through the topics.
2. As separate processes (the console entry points): a bad model config is refused with exit code 2; the
   pair started from config/anymal.yaml in lock-step keeps the robot standing (base height from /odom)
   and both end with exit code 0 on SIGINT.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from qv_control.demo.anymal import AnymalConfig, metrics
from qv_dynamics.errors import NonFiniteError
from qv_dynamics.ros.odometry import base_to_odometry, odometry_to_base

ROOT = Path(__file__).resolve().parent.parent
CFG = AnymalConfig(step_times=(0.85, 1.1, 1.45, 1.7), step_time=2.0)


def test_odometry_round_trip_and_bad_input():
    from builtin_interfaces.msg import Time

    q = np.r_[0.1, -0.2, 0.45, 0.0, 0.0, np.sin(0.2), np.cos(0.2)]
    v = np.arange(6.0)
    msg = base_to_odometry(Time(sec=1), "odom", "base", q, v)
    assert msg.header.frame_id == "odom" and msg.child_frame_id == "base"
    q2, v2 = odometry_to_base(msg)
    assert np.allclose(q2, q, atol=1e-15) and np.array_equal(v2, v)
    msg.pose.pose.orientation.w = float("nan")
    with pytest.raises(NonFiniteError):
        odometry_to_base(msg)


def test_stance_and_foot_lift_through_ros_topics():
    from qv_control.demo.anymal_ros import run_ros

    r = run_ros(CFG, "step", wall_limit=120.0)
    m = metrics(r, CFG.mu)
    assert m["aborted"] is None, m["aborted"]
    assert r["ros"]["commands"] == len(r["t"]) and r["ros"]["law_errors"] == 0
    assert [e[1:] for e in m["contact_events"]] == [("LF_FOOT", "lift-off"), ("LF_FOOT", "touchdown")]
    moved = r["feet"][-1, 0] - r["feet"][0, 0]
    assert abs(moved[0] - 0.10) < 3e-3
    assert m["base_pos_max_m"] < 1e-3 and m["base_drop_max_m"] <= 0.01 and m["foot_slip_max_m"] <= 2e-3
    assert m["min_cone_margin"] > 0 and m["max_abs_torque_ratio"] <= 1.0


def _env():
    env = dict(os.environ, PYTHONPATH=str(ROOT), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    env["ROS_DOMAIN_ID"] = str((int(os.environ.get("ROS_DOMAIN_ID", "0") or 0) + 7) % 100)
    return env


def _node(module, *params):
    cmd = [sys.executable, "-m", module, "--ros-args", "--params-file", str(ROOT / "config/anymal.yaml")]
    for p in params:
        cmd += ["-p", p]
    return subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_bad_config_is_refused_with_exit_code_2():
    p = _node("qv_dynamics.ros.legged_mujoco_node", "model_config:=no_such_file.yaml")
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 2 and "refused to start" in out and "no_such_file.yaml" in out


def test_nodes_as_processes_stand_and_stop_on_sigint():
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.context import Context
    from ros_helpers import stop_processes

    plant = _node("qv_dynamics.ros.legged_mujoco_node", "mode:=lockstep", "publish_clock:=false")
    # lock-step on a loaded machine: a plant step can wait longer than the 0.1 s watchdog, whose zero effort the
    # plant would then step with (8.6 mm of sag seen at load 12); this test checks the standing loop's wiring
    ctrl = _node("qv_control.ros.legged_controller_node", "law_params.plan:='kind: stance'",   # a YAML string
                 "watchdog_timeout:=2.0")
    ctx = Context()
    rclpy.init(context=ctx, domain_id=int(_env()["ROS_DOMAIN_ID"]), args=[])
    heights = []
    try:
        node = rclpy.create_node("legged_probe", context=ctx)
        node.create_subscription(Odometry, "/odom", lambda m: heights.append(odometry_to_base(m)[0][2]), 10)
        from rclpy.executors import SingleThreadedExecutor

        ex = SingleThreadedExecutor(context=ctx)
        ex.add_node(node)
        t_end = time.monotonic() + 60.0
        while len(heights) < 1500 and time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.05)
        node.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
        codes, outs, _ = zip(*stop_processes((ctrl, plant), signal.SIGINT, timeout=30))
    assert len(heights) >= 1500, outs                  # 1.5 s of lock-step control through the topics
    assert np.ptp(heights[100:]) < 1e-3, (min(heights), max(heights))   # stands: height held within 1 mm
    # each process's last output in full (pytest shortens a long tuple's repr in the middle)
    assert codes == (0, 0), "\n---\n".join(f"exit {c}:\n{o[-3000:]}" for c, o in zip(codes, outs))


def test_dynamics_node_floating_base_from_odometry():
    """qv_dynamics_node on ANYmal: base from /odom, joints from /joint_states; it publishes the quasi-variables
    of the whole floating-base system (n = 18, rank 12 on four feet) with the base velocities named."""
    import rclpy
    from rclpy.context import Context
    from sensor_msgs.msg import JointState

    from qv_control.demo.anymal import make_system
    from qv_control.ros.bringup import to_parameters
    from qv_dynamics.plants.mujoco_legged import LeggedMujocoPlant, standing_configuration
    from qv_dynamics.ros.dynamics_node import DynamicsNode
    from qv_dynamics.ros.legged_mujoco_node import LeggedMujocoNode
    from qv_dynamics.ros.runner import make_executor

    system = make_system(CFG)
    q0 = standing_configuration(system, joints=CFG.posture)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=int(_env()["ROS_DOMAIN_ID"]), args=[])
    got = {}
    try:
        mj = LeggedMujocoNode("qv_legged_mujoco", context=ctx, system=make_system(CFG), q0=q0,
                              plant=LeggedMujocoPlant(make_system(CFG)),
                              parameter_overrides=to_parameters({"mode": "lockstep", "publish_clock": False,
                                                                 "lockstep_resend": 0.05}))
        dyn = DynamicsNode("qv_dynamics", context=ctx, system=system,
                           parameter_overrides=to_parameters({"publish_markers": False}))
        probe = rclpy.create_node("probe", context=ctx)
        for k in ("scalars", "v"):
            probe.create_subscription(JointState, f"/qv_dynamics/{k}", lambda m, k=k: got.__setitem__(k, m), 10)
        ex = make_executor(ctx)
        for n in (mj, dyn, probe):
            ex.add_node(n)
        t_end = time.monotonic() + 20.0
        while len(got) < 2 and time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.05)
        ex.shutdown()
        for n in (mj, dyn, probe):
            n.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    scalars = dict(zip(got["scalars"].name, got["scalars"].position))
    assert scalars["n"] == 18 and scalars["m"] == 12 and scalars["rank"] == 12
    assert list(got["v"].name[:6]) == [f"v.root_joint.{a}" for a in ("vx", "vy", "vz", "wx", "wy", "wz")]


def test_builtin_simulator_publishes_the_base_as_odometry():
    """qv_sim_node on ANYmal (four bilateral point feet): /odom carries the simulator's base pose and twist."""
    import rclpy
    from nav_msgs.msg import Odometry
    from rclpy.context import Context

    from qv_control.demo.anymal import make_system
    from qv_control.ros.bringup import to_parameters
    from qv_dynamics.plants.mujoco_legged import standing_configuration
    from qv_dynamics.ros.runner import make_executor
    from qv_dynamics.ros.sim_node import SimNode

    system = make_system(CFG)
    q0 = standing_configuration(system, joints=CFG.posture)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=int(_env()["ROS_DOMAIN_ID"]), args=[])
    got = []
    try:
        sim = SimNode("qv_sim", context=ctx, system=system, q0=q0, qdot0=np.zeros(18),
                      parameter_overrides=to_parameters({"mode": "lockstep", "publish_clock": False,
                                                         "lockstep_resend": 0.05, "publish_wrench": False}))
        probe = rclpy.create_node("probe", context=ctx)
        probe.create_subscription(Odometry, "/odom", got.append, 10)
        ex = make_executor(ctx)
        for n in (sim, probe):
            ex.add_node(n)
        t_end = time.monotonic() + 20.0
        while not got and time.monotonic() < t_end:
            ex.spin_once(timeout_sec=0.05)
        q_sim, v_sim = sim.q.copy(), sim.qdot.copy()
        ex.shutdown()
        for n in (sim, probe):
            n.destroy_node()
    finally:
        rclpy.try_shutdown(context=ctx)
    qb, vb = odometry_to_base(got[0])
    assert got[0].header.frame_id == "odom" and got[0].child_frame_id == "base"
    assert np.allclose(qb, q_sim[:7], atol=1e-12) and np.allclose(vb, v_sim[:6], atol=1e-12)
    assert abs(qb[2] - q0[2]) < 1e-6
