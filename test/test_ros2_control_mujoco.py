"""The contact task of ``config/demo_mujoco.yaml`` end to end behind the real ros2_control stack with a physics
plugin: mujoco_ros2_control's ``ros2_control_node`` (MuJoCo behind controller_manager, the ``mujoco`` wheel's
library) with ``qv export-mjcf`` / ``qv export-urdf --target mujoco`` of the Panda on its table, headless,
``config/controllers_panda.yaml``, joint_state_broadcaster, force_torque_sensor_broadcaster and
forward_command_controller (effort), in ``launch/mujoco_ros2_control.launch.py``'s order. Built by
``scripts/ros2_control_stack.sh``; skipped, with the reason, when it is not.

The qv nodes run the parameters of ``config/demo_mujoco.yaml`` with ``use_sim_time`` and the F/T sensor of the
stack (``/force_torque_sensor_broadcaster/wrench``, the environment's reaction: ``wrench_sign: -1``). Judged from
outside, on /joint_states and the broadcaster's wrench (robot on environment f = −w, tool axes; normal force
f_n = −(R f)_z with R the tool orientation at the joint state of the same controller_manager cycle):

- the task ends ``done`` (no safe hold), the contact made and held (≥ 99 % of the samples between the first
  above ``contact_on`` and the last above it over ``contact_off``, for at least ``release_at`` − 0.2 s);
- touch-down peak (first 0.5 s of contact) ≤ 1.5 × the steady force (the median after it);
- tool travel while in contact ≥ 2 cm;
- the rate the loop holds over the contact phase, from the controller's own /diagnostics count: commands per wall
  second and per second of plant time, beside the joint states the broadcaster published per plant second (on a
  quiet machine, 1-min load < 1, every published state answered: ≥ 99 % of them; ≥ 500 /s asserted on a loaded
  machine, where the figures are printed).

Skipped on a machine loaded above ``control_stack.OVERLOAD`` per core (the plant's physics thread is not a realtime
one).
The controller runs as a realtime process (``chrt -f 30``, as root; controller_manager's own loop runs at
SCHED_FIFO 50) and the dynamics node behind ``nice`` (the launch files' defaults for ``dynamics_prefix``).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy")
pytest.importorskip("mujoco")

from control_stack import (  # noqa: E402  (test/)
    CONTROLLER_PREFIX,
    ROOT,
    Probe,
    Proc,
    Recorder,
    qv_node,
    run_tool,
    skip_if_overloaded,
    stack_or_skip,
    stamp,
    write_yaml,
)

from qv_dynamics.ros.runner import OBSERVER_PREFIX  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 29) % 200
FT = "/force_torque_sensor_broadcaster/wrench"
CONTROLLERS = ["joint_state_broadcaster", "force_torque_sensor_broadcaster", "effort_controller"]
READY = "law '"   # the controller's line once configured
# the simulated plant as a realtime process too (its physics thread sleeps 1 ms between catch-up steps), below
# controller_manager's loop (50) and the controller (30): launch argument plant_prefix
PLANT_PREFIX = CONTROLLER_PREFIX.replace("30", "20")


def sim_service(probe, env, tmp, name: str, srv: str, request: str) -> None:
    """A service of mujoco_ros2_control's simulation (``ros2 service call``), which must answer success."""
    out = run_tool(probe, env, "ros2", ["service", "call", f"/mujoco_ros2_control_node/{name}",
                                        f"mujoco_ros2_control_msgs/srv/{srv}", request], tmp)
    assert "success=True" in out, out


def _files(tmp):
    """(URDF, controllers file, qv parameters file, the controller's parameters) of the Panda in MuJoCo."""
    import pinocchio as pin

    from qv_dynamics.plants.export import export_mjcf_text, target_urdf, write_text

    model, ctrl = ROOT / "config" / "demo_model.yaml", ROOT / "config" / "controllers_panda.yaml"
    mjcf = write_text(str(tmp / "panda.xml"), export_mjcf_text(str(model)))
    urdf = target_urdf(str(model), "mujoco", str(ctrl), mjcf_file=mjcf, headless=True)
    doc = yaml.safe_load((ROOT / "config" / "demo_mujoco.yaml").read_text())
    sensor = {"use_sim_time": True, "wrench_topics": [FT], "wrench_sign": -1.0, "wrench_constraints": ["contact"]}
    params = {k: {"ros__parameters": dict(doc[k]["ros__parameters"], **sensor)}
              for k in ("qv_dynamics", "qv_controller")}
    params["qv_controller"]["ros__parameters"]["managed"] = True   # as the launch files start it
    qv_params = write_yaml(tmp / "qv.yaml", params)
    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.plants.export import load_config

    system, _, _, q0, _ = load_config(str(model))
    hold = pin.computeGeneralizedGravity(system.model, system.data, q0).tolist()   # joints in model order
    return urdf, ctrl, qv_params, load_params_file(str(qv_params))["qv_controller"], hold


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The whole task (module doc), recorded; the processes stopped afterwards."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from sensor_msgs.msg import JointState
    from std_msgs.msg import String

    env = dict(stack_or_skip("mock", "mujoco"), ROS_DOMAIN_ID=str(DOMAIN))
    load0 = skip_if_overloaded("a realtime plant")
    tmp = tmp_path_factory.mktemp("r2c_mujoco")
    urdf, controllers, qv_params, c, hold = _files(tmp)
    procs, probe = [], Probe(DOMAIN, "r2c_mujoco_probe")
    latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    probe.node.create_publisher(String, "/robot_description", latched).publish(String(data=urdf))
    rec = Recorder(probe.node, {"js": (JointState, "/joint_states", 10000), "ft": (WrenchStamped, FT, 10000),
                                "diag": (DiagnosticArray, "/diagnostics", 100),
                                "phase": (String, "/qv_controller/phase", 100)})
    try:
        procs.append(Proc("mujoco_ros2_control", [
            *PLANT_PREFIX.split(), f"{env['QV_R2C_PREFIX']}/lib/mujoco_ros2_control/ros2_control_node", "--ros-args",
            "--params-file", controllers, "-p", "use_sim_time:=true"], env, tmp))
        run_tool(probe, env, "spawner", [*CONTROLLERS, "--param-file", controllers], tmp)
        # mujoco_ros2_control steps from its start with no torque until commands come (plants of this package
        # hold the robot until the first command): paused, reset to the initial keyframe, held by the gravity
        # torque g(q0) (forward_command_controller keeps its last command), resumed once the managed controller
        # is configured; qv_spawner activates it at the pose it finds (launch/mujoco_ros2_control.launch.py)
        sim_service(probe, env, tmp, "set_pause", "SetPause", "{paused: true}")
        sim_service(probe, env, tmp, "reset_world", "ResetWorld", "{keyframe: initial}")
        run_tool(probe, env, "ros2", ["topic", "pub", "--once", "-w", "1", "/effort_controller/commands",
                                      "std_msgs/msg/Float64MultiArray", f"{{data: {hold}}}"], tmp)
        procs += [qv_node("qv_dynamics.ros.dynamics_node", "qv_dynamics", qv_params, env, tmp, OBSERVER_PREFIX),
                  qv_node("qv_control.ros.controller_node", "qv_controller", qv_params, env, tmp, CONTROLLER_PREFIX)]
        spawn_qv = Proc("qv_spawner", [sys.executable, "-m", "qv_control.ros.spawner", "qv_controller"],
                        dict(env, PYTHONPATH=f"{ROOT}:{env.get('PYTHONPATH', '')}"), tmp)
        probe.wait_for(lambda: READY in procs[-1].text(), 120.0, "qv_controller configured", procs)
        sim_service(probe, env, tmp, "set_pause", "SetPause", "{paused: false}")
        probe.wait_for(lambda: spawn_qv.p.poll() is not None, 90.0, "qv_spawner's end", procs)
        assert spawn_qv.stop() == 0, spawn_qv.tail()
        t_run = time.monotonic()   # the reset restarted the plant's clock: samples before this are the start-up's
        probe.wait_for(lambda: any(m.data in ("hold", "done") for m in rec.get("phase")), 240.0, "end of the task",
                       procs)
        yield dict(rec=rec, c=c, t_run=t_run, load0=load0, load1=os.getloadavg()[0],
                   events=[ln for ln in procs[-1].text().splitlines() if "[t=" in ln])
    finally:
        print("exit codes", {p.name: p.stop() for p in reversed(procs)})
        probe.close()

def _samples(rec, c, since: float):
    """(t, f_n, tool x, tool y) rows of the F/T samples, each with the joint state nearest in stamp (within half a
    1 kHz period: the two broadcasters stamp the same controller_manager cycle)."""
    from qv_dynamics.ros.params import load_model_config

    system, _ = load_model_config(c["model_config"])
    names = list(system.velocity_names)
    js = sorted(((stamp(m), m) for m in rec.get("js", since)), key=lambda x: x[0])
    ts = np.array([t for t, _ in js])
    rows = []
    for w in rec.get("ft", since):
        i = int(np.clip(np.searchsorted(ts, stamp(w)), 1, len(ts) - 1))
        i = i if abs(ts[i] - stamp(w)) < abs(ts[i - 1] - stamp(w)) else i - 1
        if abs(ts[i] - stamp(w)) > 5e-4:
            continue
        m = js[i][1]
        q = np.asarray(m.position, float)[[list(m.name).index(n) for n in names]]
        oMf = system.frame_placement(q, c["task.frame"])
        f = -np.array([w.wrench.force.x, w.wrench.force.y, w.wrench.force.z])   # robot on environment
        rows.append((stamp(w), -float((oMf.rotation @ f)[2]), *oMf.translation[:2]))
    return np.array(sorted(rows))


def test_contact_task_end_to_end(run):
    rec, c = run["rec"], run["c"]
    phases = [m.data for m in rec.get("phase")]
    assert phases[-1] == "done", f"task ended in {phases[-1]}: {run['events']}"
    a = _samples(rec, c, run["t_run"])
    assert len(a) > 1000, "too few F/T samples paired with a joint state"
    t, fn, p = a[:, 0], a[:, 1], a[:, 2:4]
    on = np.nonzero(fn > c.get("task.contact_on", 2.0))[0]
    assert on.size, f"no contact (max f_n {fn.max():.2f} N)"
    seg = (t >= t[on[0]]) & (t <= t[on[-1]])
    held = np.mean(fn[seg] > c.get("task.contact_off", 0.5))
    steady = seg & (t >= t[on[0]] + 0.5)
    peak = fn[seg & (t < t[on[0]] + 0.5)].max() / np.median(fn[steady])
    travel = np.sum(np.linalg.norm(np.diff(p[seg], axis=0), axis=1))
    print(f"contact {t[on[-1]] - t[on[0]]:.2f} s, held {100 * held:.2f} %, steady {np.median(fn[steady]):.2f} N, "
          f"touch-down peak {peak:.3f} x steady, travel {100 * travel:.1f} cm")
    assert held >= 0.99 and t[on[-1]] - t[on[0]] >= c["task.release_at"] - 0.2
    assert peak <= 1.5
    assert travel >= 0.02


def test_loop_rate(run):
    """Every state answered (commands per second of plant time, from the stamps of the controller's /diagnostics)
    and the loop's wall-clock rate (commands per second of their arrival), over the contact phase."""
    rows = []
    for t, m in run["rec"].timed("diag"):
        for s in m.status:
            kv = {v.key: v.value for v in s.values}
            if "controller" in s.name and "commands" in kv and kv.get("task_phase") == "contact":
                rows.append((t, stamp(m), int(kv["commands"])))
    assert len(rows) >= 3, "too few /diagnostics of the controller in contact"
    (w0, s0, n0), (w1, s1, n1) = rows[0], rows[-1]
    per_sim, per_wall = (n1 - n0) / (s1 - s0), (n1 - n0) / (w1 - w0)
    states = sum(1 for m in run["rec"].get("js") if s0 <= stamp(m) <= s1) / (s1 - s0)   # as broadcast, received
    last = {v.key: v.value for m in run["rec"].get("diag") for s in m.status if "controller" in s.name
            for v in s.values}
    quiet = max(run["load0"], run["load1"]) < 1.0
    print(f"loop: {per_sim:.1f} commands per plant second, {per_wall:.1f} per wall second (real-time factor "
          f"{(s1 - s0) / (w1 - w0):.2f}) over {s1 - s0:.1f} s of contact, {states:.1f} joint states per plant "
          f"second received beside it, the controller's compute {float(last.get('compute_ms_mean', 'nan')):.3f} ms "
          f"mean / {float(last.get('compute_ms_max', 'nan')):.3f} ms max; controller prefix '{CONTROLLER_PREFIX}'; "
          f"load {run['load0']:.2f} -> {run['load1']:.2f} ({'quiet' if quiet else 'loaded'})")
    # every state the broadcaster published answered; joint_state_broadcaster's realtime publisher itself skips a
    # cycle while its sending thread still sends the previous state (realtime_tools' try_publish): ~7.5 % of the
    # cycles on two cores, so the loop's rate is the broadcaster's (doc/tutorials/plants.md)
    assert per_sim >= 0.99 * states if quiet else per_sim >= 500.0
