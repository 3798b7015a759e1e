"""The qv nodes behind the real ros2_control stack with mock hardware: controller_manager, mock_components,
joint_state_broadcaster and forward_command_controller (effort), built by ``scripts/ros2_control_stack.sh``
(skipped, with the reason, when it is not built: CI does not build it).

Set-up, in ``launch/ros2_control.launch.py``'s order: ``ros2_control_node`` with ``qv export-urdf --target mock``
of the Panda (``config/demo_model.yaml``, published on /robot_description as robot_state_publisher does) and
``config/controllers_panda.yaml``, plus ``hw_monitor``, a second joint_state_broadcaster on its own topic
(``use_local_topics``) that reports the hardware's interfaces whatever happens to the first; the spawner
activates both broadcasters; the dynamics and controller nodes start; once the controller answers, the spawner
activates ``effort_controller``. The controller runs ``quasi_setpoint`` on the joint angles with
θ_d = q0 + δ (δ distinct per joint) and no latency compensation: at the mock's standing joints (it does not
integrate effort) it commands τ* = g(q0) − k_p(q0 − θ_d) = g(q0) + k_p δ, seven distinct values. mock_components
mirrors each effort command into the effort state interface of the same joint, which the broadcasters read.

Asserted:
- every command value reaches the right interface: the effort interfaces (via hw_monitor) equal τ* computed
  here with Pinocchio, joint by joint name (1e-9 N m), and equal the controller's own last command;
- states round-trip: /joint_states carries the exported ``initial_value`` q0 and q̇ = 0; every command the
  controller sends (``~/command_stamped``) and every dynamics output (``/qv_dynamics/v``, = Qᵀq̇ = 0) answers a
  /joint_states stamp of joint_state_broadcaster;
- the broadcaster deactivated (``unspawner``): the controller's watchdog puts the safe output g(q0) on the
  effort interfaces within watchdog_timeout + watchdog_period of the last /joint_states stamp (+ 50 ms for a
  loaded machine), and it stays there (skipped above ``control_stack.OVERLOAD`` load per core, as the next);
- the controller deactivated (its lifecycle ``~/change_state``, where the node is a managed one): the safe
  output on the interfaces within one watchdog period (watchdog_timeout) of the request, held.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy")

from control_stack import (  # noqa: E402  (test/)
    CONTROLLER_PREFIX,
    PANDA_JOINTS,
    ROOT,
    Probe,
    Proc,
    Recorder,
    by_name,
    qv_node,
    run_tool,
    skip_if_overloaded,
    stack_or_skip,
    stamp,
    write_yaml,
)

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 23) % 200
DELTA = np.array([0.05, -0.025, -0.05, 0.025, 0.075, -0.025, 0.125])   # θ_d − q0 [rad]: k_p δ 0.5 N m apart
KP, WATCHDOG, WATCHDOG_PERIOD, MARGIN = 20.0, 0.1, 0.02, 0.05


def _files(tmp):
    """(URDF, controllers file, qv parameters file, q0, g(q0)) of the Panda on mock hardware."""
    import pinocchio as pin

    from qv_dynamics.plants.export import load_config, target_urdf

    model, ctrl = ROOT / "config" / "demo_model.yaml", ROOT / "config" / "controllers_panda.yaml"
    system, _, names, q0, _ = load_config(str(model))
    assert names == PANDA_JOINTS
    g = pin.computeGeneralizedGravity(system.model, system.data, q0).copy()
    doc = yaml.safe_load(ctrl.read_text())
    jsb = "joint_state_broadcaster/JointStateBroadcaster"
    doc["controller_manager"]["ros__parameters"]["hw_monitor"] = {"type": jsb}
    doc["hw_monitor"] = {"ros__parameters": {"joints": PANDA_JOINTS, "interfaces": ["position", "velocity", "effort"],
                                             "use_local_topics": True}}
    controllers = write_yaml(tmp / "controllers.yaml", doc)
    common = {"model_config": str(model), "wrench_topics": [""], "wrench_constraints": [""]}
    params = {
        "qv_dynamics": {"ros__parameters": dict(common, diagnostics_period=1.0)},
        "qv_controller": {"ros__parameters": dict(
            common, joints=PANDA_JOINTS, controller_name="effort_controller", law="quasi_setpoint",
            law_params={"coordinates": PANDA_JOINTS, "kp": KP, "kd": 5.0}, theta_desired=(q0 + DELTA).tolist(),
            command_delay=0.0, watchdog_timeout=WATCHDOG, watchdog_period=WATCHDOG_PERIOD, safe_mode="gravity")},
    }
    qv_params = write_yaml(tmp / "qv.yaml", params)
    return target_urdf(str(model), "mock", str(ctrl)), controllers, qv_params, q0, g


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    """The running stack (module doc) and a recorder of its topics."""
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray, String

    env = dict(stack_or_skip("mock"), ROS_DOMAIN_ID=str(DOMAIN))
    tmp = tmp_path_factory.mktemp("r2c_mock")
    urdf, controllers, qv_params, q0, g = _files(tmp)
    procs, probe = [], Probe(DOMAIN, "r2c_mock_probe")
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    probe.node.create_publisher(String, "/robot_description", latched).publish(String(data=urdf))
    rec = Recorder(probe.node, {"js": (JointState, "/joint_states", 10000),
                                "hw": (JointState, "/hw_monitor/joint_states", 10000),
                                "cmd": (JointState, "/qv_controller/command_stamped", 10000),
                                "cmd_raw": (Float64MultiArray, "/effort_controller/commands", 1),
                                "v": (JointState, "/qv_dynamics/v", 1000)})
    try:
        procs.append(Proc("ros2_control_node", [f"{env['QV_R2C_PREFIX']}/lib/controller_manager/ros2_control_node",
                                                "--ros-args", "--params-file", controllers,
                                                "-r", "~/robot_description:=/robot_description"], env, tmp))
        run_tool(probe, env, "spawner", ["joint_state_broadcaster", "hw_monitor", "--param-file", controllers], tmp)
        procs += [qv_node("qv_dynamics.ros.dynamics_node", "qv_dynamics", qv_params, env, tmp),
                  qv_node("qv_control.ros.controller_node", "qv_controller", qv_params, env, tmp, CONTROLLER_PREFIX)]
        probe.wait_for(lambda: rec.get("cmd"), 90.0, "command from qv_controller", procs)
        run_tool(probe, env, "spawner", ["effort_controller", "--param-file", controllers], tmp)
        yield type("Rig", (), dict(env=env, tmp=tmp, rec=rec, probe=probe, procs=procs, q0=q0, g=g,
                                   tau=g + KP * DELTA, controllers=controllers))
    finally:
        print("exit codes", {p.name: p.stop() for p in reversed(procs)})
        probe.close()

def _hw_effort_is(rig, target, since=0.0, tol=1e-9, stamped_after=-np.inf):
    """The first hw_monitor message (arrived after ``since``, stamped at or after ``stamped_after``) whose efforts
    equal ``target``, or None."""
    for m in rig.rec.get("hw", since):
        if stamp(m) >= stamped_after and np.max(np.abs(by_name(m, "effort", PANDA_JOINTS) - target)) <= tol:
            return m
    return None


def test_every_command_value_reaches_its_interface(rig):
    rig.probe.wait_for(lambda: _hw_effort_is(rig, rig.tau), 30.0, "τ* on the effort interfaces")
    assert np.min(np.abs(np.subtract.outer(rig.tau, rig.tau)) + np.eye(7)) > 0.1   # seven distinct values
    t0 = time.monotonic()
    rig.probe.wait_for(lambda: len(rig.rec.get("hw", t0)) >= 200, 30.0, "200 hw_monitor messages")
    hw = np.array([by_name(m, "effort", PANDA_JOINTS) for m in rig.rec.get("hw", t0)])
    assert np.max(np.abs(hw - rig.tau)) <= 1e-9, "an effort interface holds another value than τ*"
    last_cmd = rig.rec.get("cmd")[-1]
    assert list(last_cmd.name) == PANDA_JOINTS
    np.testing.assert_allclose(np.asarray(last_cmd.effort), rig.tau, rtol=0, atol=1e-9)
    np.testing.assert_allclose(np.asarray(rig.rec.get("cmd_raw")[-1].data), rig.tau, rtol=0, atol=1e-9)


def test_states_round_trip_through_the_broadcaster(rig):
    t0 = time.monotonic()
    rig.probe.wait_for(lambda: len(rig.rec.get("cmd", t0)) >= 100 and len(rig.rec.get("v", t0)) >= 20, 30.0,
             "100 commands and 20 dynamics outputs")
    js = rig.rec.get("js")
    for m in js[-100:]:
        np.testing.assert_allclose(by_name(m, "position", PANDA_JOINTS), rig.q0, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(by_name(m, "velocity", PANDA_JOINTS), 0.0)
    js_stamps = {stamp(m) for m in js}
    last = max(js_stamps)   # answers to states the recorder had not yet received when it took ``js`` are left out
    answered = [stamp(m) for m in rig.rec.get("cmd", t0) if stamp(m) <= last]
    assert len(answered) >= 20
    assert set(answered) <= js_stamps, "a command answers a state joint_state_broadcaster never published"
    assert len(set(answered)) == len(answered), "a state answered twice"
    v = [m for m in rig.rec.get("v", t0) if stamp(m) <= last]
    assert v and {stamp(m) for m in v} <= js_stamps   # (the dynamics node decimates on a loaded machine)
    assert all(np.all(np.asarray(m.position) == 0.0) for m in v), "v = Qᵀq̇ is not 0 at q̇ = 0"


def test_broadcaster_deactivated_safe_output_within_one_watchdog_period(rig):
    skip_if_overloaded("the watchdog")
    t = time.monotonic()
    rig.probe.wait_for(lambda: _hw_effort_is(rig, rig.tau, t), 30.0, "τ* on the interfaces")
    t_req = time.monotonic()
    run_tool(rig.probe, rig.env, "unspawner", ["joint_state_broadcaster"], rig.tmp)
    try:
        t_last = stamp(rig.rec.get("js")[-1])
        safe = rig.probe.wait_for(lambda: _hw_effort_is(rig, rig.g, t_req, stamped_after=t_last), 10.0,
                                  "safe output g(q0) at the interfaces")
        delay = stamp(safe) - t_last
        print(f"last /joint_states -> safe output at the effort interfaces: {1e3 * delay:.1f} ms "
              f"(watchdog {1e3 * WATCHDOG:.0f} ms + period {1e3 * WATCHDOG_PERIOD:.0f} ms); load {os.getloadavg()}")
        assert 0 <= delay <= WATCHDOG + WATCHDOG_PERIOD + MARGIN
        t1 = time.monotonic()
        rig.probe.wait_for(lambda: len(rig.rec.get("hw", t1)) >= 100, 10.0, "100 hw_monitor messages")
        held = np.array([by_name(m, "effort", PANDA_JOINTS) for m in rig.rec.get("hw", t1)])
        assert np.max(np.abs(held - rig.g)) <= 1e-9, "the safe output is not held"
    finally:   # the broadcaster back for the next test, whatever this one found
        run_tool(rig.probe, rig.env, "spawner", ["joint_state_broadcaster", "--param-file", rig.controllers],
                 rig.tmp)
    t = time.monotonic()
    rig.probe.wait_for(lambda: _hw_effort_is(rig, rig.tau, t), 30.0, "τ* again once states resume")


def test_controller_deactivated_safe_output_within_one_watchdog_period(rig):
    skip_if_overloaded("the deactivation")
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    client = rig.probe.node.create_client(ChangeState, "/qv_controller/change_state")
    try:
        rig.probe.wait_for(client.service_is_ready, 5.0, "~/change_state service")
    except AssertionError:
        pytest.skip("qv_controller has no lifecycle interface (~/change_state)")
    t = time.monotonic()
    rig.probe.wait_for(lambda: _hw_effort_is(rig, rig.tau, t), 30.0, "τ* on the interfaces")
    t_req, w_req = time.monotonic(), time.time()
    fut = client.call_async(ChangeState.Request(transition=Transition(id=Transition.TRANSITION_DEACTIVATE)))
    assert rig.probe.wait_for(lambda: fut.done() and fut.result(), 10.0, "deactivate response").success
    safe = rig.probe.wait_for(lambda: _hw_effort_is(rig, rig.g, t_req), 10.0, "safe output g(q0) at the interfaces")
    delay = stamp(safe) - w_req
    print(f"deactivate request -> safe output at the effort interfaces: {1e3 * delay:.1f} ms; load {os.getloadavg()}")
    assert delay <= WATCHDOG
    t1 = time.monotonic()
    rig.probe.wait_for(lambda: len(rig.rec.get("hw", t1)) >= 100, 10.0, "100 hw_monitor messages")
    held = np.array([by_name(m, "effort", PANDA_JOINTS) for m in rig.rec.get("hw", t1)])
    assert np.max(np.abs(held - rig.g)) <= 1e-9, "the safe output is not held"
