"""Bad node parameters and launch-time input (issue: bad input round three, node items), real rclpy, bounded.

Each test feeds the bad input and asserts the refusal (one line, exit code 2 for a process; ModelError in
process; a refused parameter change with the reason), the count (/diagnostics) or the value taken; the
good path is checked against the library on the same state, so a refusal cannot pass by doing nothing.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from geometry_msgs.msg import WrenchStamped  # noqa: E402
from rcl_interfaces.msg import Parameter as ParameterMsg  # noqa: E402
from rcl_interfaces.msg import ParameterType, ParameterValue  # noqa: E402
from rcl_interfaces.srv import GetParameters, SetParameters  # noqa: E402
from rclpy.parameter import Parameter  # noqa: E402
from ros_helpers import call, retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from test_ros_nodes import LAW_PARAMS, Wire, arm_params, arm_state, joint_state  # noqa: E402

from qv_control.laws import make_law  # noqa: E402
from qv_control.ros.bringup import Bringup, load_params_file, to_parameters  # noqa: E402
from qv_control.ros.controller_node import ControllerNode  # noqa: E402
from qv_dynamics.errors import ModelError, QVError  # noqa: E402
from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.ros.messages import sec_to_stamp  # noqa: E402
from qv_dynamics.ros.odometry import base_to_odometry  # noqa: E402
from qv_dynamics.ros.sim_node import SimNode  # noqa: E402
from qv_dynamics.state import Reference, State  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "config" / "planar_3link.yaml"
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 41) % 200
JOINTS = ["joint1", "joint2", "joint3"]


@pytest.fixture(scope="module")
def ros():
    with ros_session(DOMAIN, "qv_params_probe") as ros:
        yield ros


def _env() -> dict:
    return dict(os.environ, ROS_DOMAIN_ID=str(DOMAIN), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST",
                PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), PYTHONUNBUFFERED="1")


def _node_process(module: str, *ros_args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, "--ros-args", *ros_args], cwd=str(ROOT), env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _params_file(tmp_path: Path, name: str, sections: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({k: {"ros__parameters": v} for k, v in sections.items()}))
    return str(path)


def _arm_section(node: str, **extra) -> dict:
    doc = yaml.safe_load(ARM.read_text())[node]["ros__parameters"]
    doc.update(extra)
    return doc


def _service(ex, probe, srv_type, name: str, request, timeout: float = 60.0):
    """A query (get_parameters) is sent again while unanswered (ros_helpers.call); a change once: a repeated
    refused change would be counted twice."""
    client = probe.create_client(srv_type, name)
    try:
        if srv_type is GetParameters:
            answer = call(ex, client, request, timeout)
            assert answer is not None, f"{name}: no answer"
            return answer
        assert spin_until(ex, client.service_is_ready, timeout), f"{name} not available"
        future = client.call_async(request)
        assert spin_until(ex, future.done, timeout), f"{name}: no answer"
        return future.result()
    finally:
        probe.destroy_client(client)


def _double_array(name: str, values) -> ParameterMsg:
    return ParameterMsg(name=name, value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE_ARRAY,
                                                        double_array_value=[float(v) for v in values]))


def _integer(name: str, value: int) -> ParameterMsg:
    return ParameterMsg(name=name, value=ParameterValue(type=ParameterType.PARAMETER_INTEGER, integer_value=value))


# ------------------------------------------------------------------ integers for doubles; bad types and topics
def test_node_processes_take_integers_for_doubles_and_refuse_bad_types_and_topics(ros, tmp_path):
    """A params file with ``watchdog_timeout: 1`` (controller) and ``mass_scale: 1`` (simulator): both processes start
    and hold the doubles 1.0 (read back through the parameter service). A string for a double, an invalid
    controller_name / joint_states_topic: one line on stderr, exit code 2, no traceback."""
    _, ex, probe = ros
    good = _params_file(tmp_path, "ints.yaml", {"qv_controller": _arm_section("qv_controller", watchdog_timeout=1),
                                                 "qv_sim": _arm_section("qv_sim", mass_scale=1,
                                                                                controller_name="ints_ctrl")})
    bad = _params_file(tmp_path, "bad.yaml", {"qv_controller": _arm_section("qv_controller", watchdog_timeout="fast")})
    procs = {"ctrl": _node_process("qv_control.ros.controller_node", "--params-file", good),
             "sim": _node_process("qv_dynamics.ros.sim_node", "--params-file", good),
             "type": _node_process("qv_control.ros.controller_node", "--params-file", bad),
             "name": _node_process("qv_control.ros.controller_node", "--params-file", good,
                                   "-p", "controller_name:=bad name!"),
             "topic": _node_process("qv_control.ros.controller_node", "--params-file", good,
                                    "-p", "joint_states_topic:=/joint states")}
    try:
        for key, words in (("type", ("watchdog_timeout", "double", "string")), ("name", ("controller_name",)),
                           ("topic", ("joint_states_topic", "/joint states"))):
            out, _ = procs[key].communicate(timeout=60.0)
            lines = [ln for ln in out.splitlines() if ln.strip()]
            assert procs[key].returncode == 2, (key, out)
            assert "Traceback" not in out and len(lines) == 1 and "refused to start" in lines[0], (key, out)
            assert all(w in lines[0] for w in words), (key, lines[0])
        for node, name, value in (("qv_controller", "watchdog_timeout", 1.0), ("qv_sim", "mass_scale", 1.0)):
            res = _service(ex, probe, GetParameters, f"/{node}/get_parameters", GetParameters.Request(names=[name]),
                           timeout=60.0)
            assert res.values[0].type == ParameterType.PARAMETER_DOUBLE and res.values[0].double_value == value
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs.values():
            try:
                p.communicate(timeout=10.0)
            except subprocess.TimeoutExpired:
                p.kill()
                p.communicate()
    assert procs["ctrl"].returncode == 0 and procs["sim"].returncode == 0


def test_invalid_topic_names_refused_in_process_every_node(ros):
    """The topic parameters of every node kind are checked where they are declared (ModelError naming the
    parameter); an empty odom_topic where a node publishes or reads odometry is refused too."""
    ctx, _, _ = ros
    model = Parameter("model_config", value="planar_3link_model.yaml")
    cases = [
        (ControllerNode, arm_params(controller_name="bad name!"), "controller_name"),
        (ControllerNode, arm_params(joint_states_topic="/joint states"), "joint_states_topic"),
        (ControllerNode, arm_params(odom_topic="/box odom"), "odom_topic"),
        (ControllerNode, arm_params(wrench_topics=["/ok", "/not ok"], wrench_constraints=["wall", "wall"]),
         "wrench_topics"),
        (DynamicsNode, [model, Parameter("command_topic", value="cmd#")], "command_topic"),
        (DynamicsNode, [model, Parameter("odom_topic", value="")], "odom_topic"),
        (SimNode, [model, Parameter("joints", value=JOINTS), Parameter("odom_topic", value="")], "odom_topic"),
        (SimNode, [model, Parameter("joints", value=JOINTS), Parameter("controller_name", value="a//b")],
         "controller_name"),
    ]
    from qv_dynamics.ros.loop_plant_node import LoopPlantNode

    cases.append((LoopPlantNode, [Parameter("model_config", value="bimanual_model.yaml"),
                                  Parameter("odom_topic", value="")], "odom_topic"))
    for k, (cls, params, name) in enumerate(cases):
        with pytest.raises(ModelError, match=name):
            cls(f"qv_topic_{k}", context=ctx, parameter_overrides=params)


# ------------------------------------------------------------------ array.array through the parameter service
def test_set_parameters_service_arrays_and_integers_accepted(ros):
    """``ros2 param set`` goes through the SetParameters service, where rclpy hands double arrays to the node as
    array.array: λ_d and θ_d are accepted and used (command = the library law with them), an integer for a
    double is taken as that double, a non-finite λ_d is refused with the name."""
    ctx, ex, probe = ros
    node = ControllerNode("qv_arr", context=ctx, parameter_overrides=arm_params(controller_name="arr_ctrl"))
    ex.add_node(node)
    try:
        req = SetParameters.Request(parameters=[_double_array("lambda_desired", [6.0]),
                                                _double_array("theta_desired", [0.1, -0.8]),
                                                _integer("watchdog_timeout", 2)])
        res = _service(ex, probe, SetParameters, "/qv_arr/set_parameters", req)
        assert [r.successful for r in res.results] == [True] * 3, [r.reason for r in res.results]
        assert node.lambda_d.tolist() == [6.0] and node.theta_d.tolist() == [0.1, -0.8]
        assert node.watchdog_timeout == 2.0 and node.get_parameter("watchdog_timeout").type_ == Parameter.Type.DOUBLE
        res = _service(ex, probe, SetParameters, "/qv_arr/set_parameters",
                       SetParameters.Request(parameters=[_double_array("lambda_desired", [float("nan")])]))
        assert not res.results[0].successful and "lambda_desired" in res.results[0].reason
        assert node.lambda_d.tolist() == [6.0]
        wire = Wire(probe, ex, "/joint_states", JointState, "/arr_ctrl/commands", Float64MultiArray)
        wire.connect()
        q, qdot = arm_state(node.system, np.random.default_rng(3))
        out = wire.send(joint_state(JOINTS, q, qdot, t=1.0), expect=1)
        tau = make_law("quasi_tracking", node.system, **LAW_PARAMS).compute(
            State(1.0, q, qdot), Reference(theta=np.array([0.1, -0.8]), lambda_=np.array([6.0])))
        np.testing.assert_allclose(out[-1].data, tau, rtol=1e-9, atol=1e-9)
    finally:
        retire(ex, node)


# ------------------------------------------------------------------ bounds
def test_out_of_range_values_refused_at_start_and_on_change(ros):
    """command_delay beyond 0.1 s (the predictor would extrapolate for that long), watchdog_timeout beyond
    10 s (a watchdog in name only), a queue depth of 0, negative diagnostics_period / lockstep_resend, a
    condition_warn that every condition number exceeds: refused where they enter, naming the parameter."""
    ctx, _, _ = ros
    model = Parameter("model_config", value="planar_3link_model.yaml")
    for name, value in (("command_delay", 1e9), ("command_delay", 0.2), ("watchdog_timeout", 1e308),
                        ("watchdog_timeout", 0.0), ("joint_states_queue", 0), ("joint_states_queue", 10**6)):
        with pytest.raises(ModelError, match=name):
            ControllerNode("qv_bound", context=ctx, parameter_overrides=arm_params(**{name: value}))
    for name, value in (("joint_states_queue", 0), ("diagnostics_period", -1.0), ("condition_warn", 0.5),
                        ("condition_warn", float("inf"))):
        with pytest.raises(ModelError, match=name):
            DynamicsNode("qv_bound_d", context=ctx, parameter_overrides=[model, Parameter(name, value=value)])
    for name, value in (("lockstep_resend", -0.5), ("diagnostics_period", -1.0), ("diagnostics_period", 1e9)):
        with pytest.raises(ModelError, match=name):
            SimNode("qv_bound_s", context=ctx, parameter_overrides=[model, Parameter("joints", value=JOINTS),
                                                                     Parameter(name, value=value)])
    node = ControllerNode("qv_bound_ok", context=ctx, parameter_overrides=arm_params(command_delay=0.1))
    try:
        assert node.predictor.horizon == 0.1  # the largest accepted horizon
        for name, value in (("command_delay", 1e9), ("watchdog_timeout", 1e308), ("watchdog_timeout", -1.0)):
            res = node.set_parameters([Parameter(name, value=value)])[0]
            assert not res.successful and name in res.reason, res.reason
        assert node.predictor.horizon == 0.1 and node.watchdog_timeout == 0.1
        assert node.set_parameters([Parameter("watchdog_timeout", value=10.0)])[0].successful
    finally:
        node.destroy_node()


# ------------------------------------------------------------------ joints the law actuates
def test_joints_leaving_out_an_actuated_joint_refused(ros):
    """joints [joint1, joint2] under a law actuating all three: refused at start and on change, naming joint3;
    a passive-joint law actuating only the listed joints (the slider-crank's crank) is accepted."""
    ctx, _, _ = ros
    with pytest.raises(ModelError, match="joint3"):
        ControllerNode("qv_cover", context=ctx, parameter_overrides=arm_params(joints=["joint1", "joint2"]))
    node = ControllerNode("qv_cover_ok", context=ctx, parameter_overrides=arm_params())
    try:
        res = node.set_parameters([Parameter("joints", value=["joint1", "joint2"])])[0]
        assert not res.successful and "joint3" in res.reason, res.reason
        assert node.cmd_map.joints == JOINTS
        assert node.set_parameters([Parameter("joints", value=["joint3", "joint1", "joint2"])])[0].successful
    finally:
        node.destroy_node()
    crank = load_params_file(ROOT / "config" / "slider_crank.yaml")["qv_controller"]
    node = ControllerNode("qv_cover_crank", context=ctx, parameter_overrides=to_parameters(crank))
    try:
        assert node.cmd_map.joints == ["crank_joint"]
    finally:
        node.destroy_node()


# ------------------------------------------------------------------ free body: odometry off the joint states
def test_odometry_out_of_sync_counted_and_named(ros):
    """The two-arm controller with /box/odom stamped 10 ms off the joint states: no command from an unpaired
    state (safe output from the watchdog), each unpaired joint state counted under its own key, and the
    watchdog / diagnostics name the mismatch instead of 'no valid joint_states'."""
    ctx, ex, probe = ros
    params = load_params_file(ROOT / "config" / "bimanual_ros.yaml")["qv_controller"]
    params.update(odom_topic="/sync/box/odom", joint_states_topic="/sync/joint_states", controller_name="sync_ctrl",
                  watchdog_timeout=0.2, wrench_topics=[""], wrench_constraints=[""])
    node = ControllerNode("qv_sync", context=ctx, parameter_overrides=to_parameters(params))
    ex.add_node(node)
    got, diags = [], []
    sub = probe.create_subscription(Float64MultiArray, "/sync_ctrl/commands", got.append, 10)
    dsub = probe.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diags.extend(
        s for s in m.status if s.name.startswith("qv_sync")), 10)
    js_pub = probe.create_publisher(JointState, "/sync/joint_states", 10)
    from nav_msgs.msg import Odometry

    odom_pub = probe.create_publisher(Odometry, "/sync/box/odom", 10)
    try:
        assert spin_until(ex, lambda: js_pub.get_subscription_count() >= 1 and odom_pub.get_subscription_count() >= 1
                          and sub.get_publisher_count() >= 1 and dsub.get_publisher_count() >= 1)
        system = node.system
        q = np.asarray(yaml.safe_load((ROOT / "config" / "bimanual_model.yaml").read_text())["initial"]["q"], float)
        names = node.cmd_map.joints
        idx = [system.model.joints[system.model.getJointId(n)].idx_q for n in names]

        def send(t_js: float, t_odom: float) -> None:
            odom_pub.publish(base_to_odometry(sec_to_stamp(t_odom), "world", "box", q[:7], np.zeros(6)))
            msg = joint_state(names, q[idx], np.zeros(len(names)), t=t_js)
            js_pub.publish(msg)

        send(1.0, 1.0)  # in sync: one command
        assert spin_until(ex, lambda: node.stats["commands"] == 1), (node.rejects["law"].last_reason, node.stats)
        for k in range(1, 11):  # joint states every 1 ms, the odometry 10 ms behind: nothing pairs
            send(1.0 + 0.001 * k, 1.0 + 0.001 * k - 0.01)
            spin_until(ex, lambda: False, 0.01)
        # the sync keeps 3 unpaired joint states (an odometry may come two states late): the 7 of the 10 pushed
        # out of that history are counted, the last against the odometry nearest to it (7 ms before)
        assert spin_until(ex, lambda: node.rejected("odometry_sync") >= 7), node.rejects["odometry_sync"].counts
        assert node.stats["commands"] == 1 and node.rejected("joint_states") == 0
        assert spin_until(ex, lambda: node.stale)
        assert "odometry" in node._stale_what() and "-7.000 ms" in node._stale_what(), node._stale_what()
        diags.clear()
        node.publish_diagnostics()
        assert spin_until(ex, lambda: bool(diags))
        values = {kv.key: kv.value for kv in diags[-1].values}
        assert int(values["rejected_odometry_sync_mismatch"]) >= 7
        assert "paired with an odometry" in diags[-1].message, diags[-1].message
        assert node.stats["safe_commands"] >= 1
    finally:
        for ent in (sub, dsub):
            probe.destroy_subscription(ent)
        for ent in (js_pub, odom_pub):
            probe.destroy_publisher(ent)
        retire(ex, node)


# ------------------------------------------------------------------ lambda_measured: published where advertised
def test_lambda_measured_published_with_the_bringup_config_and_not_advertised_without(ros):
    """config/planar_3link.yaml's dynamics node reads the wall's wrench and publishes ~/lambda_measured: the
    world-x component of the sensor force (reference: the tip frame's rotation from Pinocchio); a dynamics
    node without wrench_topics does not advertise the topic."""
    ctx, ex, probe = ros
    dyn_p = load_params_file(ARM)["qv_dynamics"]
    dyn_p.update(joint_states_topic="/lam/joint_states", decimation=1)
    node = DynamicsNode("qv_lam", context=ctx, parameter_overrides=to_parameters(dyn_p))
    bare = DynamicsNode("qv_lam_bare", context=ctx, parameter_overrides=[
        Parameter("model_config", value="planar_3link_model.yaml")])
    for n in (node, bare):
        ex.add_node(n)
    got = []
    sub = probe.create_subscription(JointState, "/qv_lam/lambda_measured", got.append, 10)
    wpub = probe.create_publisher(WrenchStamped, dyn_p["wrench_topics"][0], 10)
    jpub = probe.create_publisher(JointState, "/lam/joint_states", 10)
    try:
        assert spin_until(ex, lambda: sub.get_publisher_count() == 1 and wpub.get_subscription_count() >= 1
                          and jpub.get_subscription_count() >= 1)
        assert probe.count_publishers("/qv_lam_bare/lambda_measured") == 0
        assert probe.count_publishers("/qv_lam_bare/lambda") == 1  # the node is there, the topic is not
        w = WrenchStamped()
        w.wrench.force.x, w.wrench.force.y, w.wrench.force.z = 3.0, -2.0, 0.5
        wpub.publish(w)
        assert spin_until(ex, lambda: "wall" in node.lam_meas)
        q, qdot = arm_state(node.system, np.random.default_rng(4))
        jpub.publish(joint_state(JOINTS, q, qdot, [0.0] * 3, t=1.0))
        assert spin_until(ex, lambda: bool(got))
        model = node.system.model
        data = model.createData()
        pin.framesForwardKinematics(model, data, q)
        R = data.oMf[model.getFrameId("tip")].rotation
        assert list(got[-1].name) == ["wall.x"]
        np.testing.assert_allclose(got[-1].position, [(R @ [3.0, -2.0, 0.5])[0]], rtol=1e-12, atol=1e-12)
    finally:
        probe.destroy_subscription(sub)
        for p in (wpub, jpub):
            probe.destroy_publisher(p)
        retire(ex, node, bare)


# ------------------------------------------------------------------ two runs in one domain
def test_bringup_refuses_a_domain_shared_with_another_publisher(ros, capfd):
    """A qv bringup run alone completes (its params file with integers for doubles); with another process's
    /joint_states publisher in the domain (a second run) it is refused before it starts and stopped when one
    appears during the run; ``qv bringup`` then exits with code 2 and one line."""
    from rclpy.context import Context

    from qv_control.ros import bringup

    sections = load_params_file(ARM)
    sections["qv_controller"]["watchdog_timeout"] = 1
    sections["qv_sim"]["mass_scale"] = 1
    with Bringup(sections, domain_id=DOMAIN + 1, dynamics=False) as b:
        assert b.sim.get_parameter("mass_scale").value == 1.0
        stats = b.run(0.25)
        assert stats["completed"] and b.controller.stats["commands"] >= 200
        other = Context()
        rclpy.init(context=other, domain_id=DOMAIN + 1, args=[])
        foreign = rclpy.create_node("qv_other_run", context=other)
        try:
            pub = [None]

            t_before = b.sim.t

            def appear() -> None:  # once the second run is under way (the handshake: the simulator stepped on)
                end = time.monotonic() + 120.0
                while b.sim.t < t_before + 0.05 and time.monotonic() < end:
                    time.sleep(0.001)
                pub[0] = foreign.create_publisher(JointState, "/joint_states", 10)

            th = threading.Thread(target=appear)
            th.start()
            with pytest.raises(QVError, match=r"stopped at t = .*/joint_states"):
                b.run(20.0)
            th.join()
            assert b.sim.t < 20.0
            with pytest.raises(QVError, match="refused to run: another process in ROS domain"):
                b.run(0.25)
            capfd.readouterr()
            code = bringup.main([str(ARM), "--duration", "20", "--domain-id", str(DOMAIN + 1), "--no-dynamics"])
            err = capfd.readouterr().err
            lines = [ln for ln in err.splitlines() if ln.startswith("qv bringup")]  # (rclpy's log lines aside)
            assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
            assert "/joint_states" in lines[0] and "--domain-id" in lines[0], lines
        finally:
            foreign.destroy_node()
            rclpy.try_shutdown(context=other)
