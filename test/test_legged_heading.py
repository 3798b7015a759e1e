"""LeggedLaw as a user starts it: any heading, joint friction the law does not know, on the MuJoCo floor.

ANYmal C (example-robot-data) on :class:`~qv_dynamics.plants.mujoco_legged.LeggedMujocoPlant`, built with
``make_law("legged", ...)`` and its defaults (hold-still plan; the base rotation reference is the first
state's). The figures are the plant's own: the base pose against the start pose, and the horizontal travel
of each foot sphere from its position after settling (50 ms). Targets: at yaw 30°, base RMS ≤ 5 mm / 1°,
foot slip ≤ 2 mm; at yaw 180° the same (rotation-vector coordinates are singular at π from the reference);
with 0.2 N·m Coulomb friction on every joint in the plant only (the URDF's ``<dynamics friction>``, as MuJoCo
``frictionloss``): base rotation RMS ≤ 1°, slip ≤ 2 mm while the body sways (joints moving, so the
friction acts). Measured (loaded machine): hold at 30° and 180°: 1e-6 mm / 2e-7° / 1e-8 mm; sway with
friction: rotation tracking RMS 0.21° (0.26° without the integral), slip 0.38 mm.
"""
import numpy as np
import pinocchio as pin
import pytest

from qv_control.demo.anymal import AnymalConfig, Recorder, make_system, metrics, plan_spec
from qv_control.laws import make_law
from qv_control.laws.legged import JointFriction, rotation_matrix
from qv_dynamics.errors import ModelError, RankDeficiencyError
from qv_dynamics.plants.mujoco_legged import LeggedMujocoPlant, standing_configuration
from qv_dynamics.state import State

CFG = AnymalConfig()
SETTLE = 50   # samples (50 ms): the feet sink 0.05 mm into the soft floor first


def _start(yaw_deg: float, friction: float = 0.0):
    plant_sys, law_sys = make_system(CFG), make_system(CFG)
    plant_sys.model.friction[6:] = friction          # the plant's joints only: unknown to the law
    q0 = standing_configuration(plant_sys, joints=CFG.posture, feet=CFG.feet, penetration=CFG.penetration)
    y = np.deg2rad(yaw_deg)
    q0[3:7] = [0.0, 0.0, np.sin(y / 2), np.cos(y / 2)]
    plant = LeggedMujocoPlant(plant_sys)
    plant.reset(q0)
    return plant, law_sys, q0


def _hold(yaw_deg: float, seconds: float = 1.0, **law_kw) -> dict:
    plant, law_sys, q0 = _start(yaw_deg)
    law = make_law("legged", law_sys, **law_kw)
    R0 = pin.Quaternion(q0[6], *q0[3:6]).toRotationMatrix()
    pos, rot, feet, ratio = [], [], [], 0.0
    for _ in range(int(round(seconds / 1e-3))):
        tau = law.compute(State(t=plant.time, q=plant.q, qdot=plant.qdot))
        ratio = max(ratio, float(np.max(np.abs(tau[6:]) / plant.effort_limits)))
        plant.step(tau, 1e-3)
        q = plant.q
        pos.append(q[:3] - q0[:3])
        rot.append(pin.log3(pin.Quaternion(q[6], *q[3:6]).toRotationMatrix() @ R0.T))
        feet.append(plant.foot_positions()[:, :2])
    feet = np.array(feet)

    def rms(x):
        return float(np.sqrt(np.mean(np.sum(np.asarray(x) ** 2, axis=1))))

    return {"pos_rms": rms(pos), "rot_rms": rms(rot), "ratio": ratio,
            "slip": float(np.max(np.linalg.norm(feet[SETTLE:] - feet[SETTLE], axis=-1)))}


@pytest.mark.parametrize("yaw", [30.0, 180.0])
def test_holds_its_start_pose_at_any_heading(yaw):
    m = _hold(yaw)
    assert m["pos_rms"] <= 5e-3 and m["rot_rms"] <= np.deg2rad(1.0), m
    assert m["slip"] <= 2e-3 and m["ratio"] <= 1.0, m


def test_identity_reference_is_still_available_and_refuses_near_pi():
    """rotation_reference set explicitly: at yaw 180° from it the coordinates are singular (named error)."""
    with pytest.raises(RankDeficiencyError):
        _hold(180.0, seconds=0.01, rotation_reference=np.eye(3))
    y = np.deg2rad(30.0)
    R = rotation_matrix([0.0, 0.0, np.sin(y / 2), np.cos(y / 2)])
    assert np.allclose(R, pin.utils.rpyToMatrix(0.0, 0.0, y), atol=1e-15)
    m = _hold(30.0, seconds=0.3, rotation_reference=R.ravel().tolist())   # 9 values, as a node parameter
    assert m["rot_rms"] <= np.deg2rad(1.0) and m["slip"] <= 2e-3, m
    with pytest.raises(ModelError, match="rotation_reference"):
        rotation_matrix([1.0, 2.0, 3.0])


def test_sway_with_joint_friction_unknown_to_the_law():
    plant, law_sys, _ = _start(30.0, friction=0.2)
    spec, _ = plan_spec(CFG.shortened(), "sway")
    law = make_law("legged", law_sys, plan=spec)
    rec = Recorder()
    for _ in range(2000):
        tau = law.compute(State(t=plant.time, q=plant.q, qdot=plant.qdot))
        rec.add(plant.time, law, plant, tau)
        plant.step(tau, 1e-3)
    out = rec.arrays()
    out.update(events=law.events, aborted=None, wall_s=0.0, limits=plant.effort_limits, qp_infeasible=0)
    m = metrics(out, CFG.mu)
    assert m["base_rot_rms_rad"] <= np.deg2rad(1.0) and m["foot_slip_max_m"] <= 2e-3, m
    assert np.abs(law.last["base_integral"]).max() > 0      # the integral acted


def test_joint_friction_term_is_the_urdf_damping_and_friction():
    system = make_system(CFG)
    system.model.damping[6:] = 0.5
    system.model.friction[6:] = 0.2
    law = make_law("legged", system, joint_friction=True, friction_velocity=0.01)
    qdot = np.r_[np.full(6, 3.0), np.linspace(-1.0, 1.0, 12)]
    tau_f = law.friction.torque(qdot)
    assert np.all(tau_f[:6] == 0.0)                                      # the base is passive
    assert np.allclose(tau_f[6:], 0.5 * qdot[6:] + 0.2 * np.tanh(qdot[6:] / 0.01), atol=1e-15)
    # through compute: τ with the term minus τ without it is the term (same state, same plan)
    q = standing_configuration(system, joints=CFG.posture)
    plain = make_law("legged", make_system(CFG))
    st = State(t=0.0, q=q, qdot=np.r_[np.zeros(6), 1e-3 * np.arange(12)])
    diff = law.compute(st) - plain.compute(st)
    assert np.allclose(diff, JointFriction(system.model, law._law_for(()).mask).torque(st.qdot), atol=1e-9)


def test_plan_as_yaml_text_and_default_feet():
    law = make_law("legged", make_system(CFG), plan="kind: stance")
    assert law.feet == list(CFG.feet) and not law.plan.steps
    with pytest.raises(ModelError, match="plan"):
        make_law("legged", make_system(CFG), plan="kind: [unclosed")
