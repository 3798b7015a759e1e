"""The floating-base lecture's equations on ANYmal C (`hutter-floating-base-lecture`), checked against
independent references.

1. Support-consistent dynamics N_cᵀ(M q̈ + h) = N_cᵀSᵀτ, N_c = I − M⁻¹J_cᵀ(J_cM⁻¹J_cᵀ)⁻¹J_c, together
   with the contact acceleration J_c q̈ + J̇_c q̇ = 0, solved on its own (stacked least squares), equals
   qv_dynamics' projection and KKT direct dynamics and ``pin.constraintDynamics`` in four-, three- and
   two-foot stances; the contact force F_c = Λ_c(J_cM⁻¹(Sᵀτ − h) + J̇_c q̇) equals their λ.
2. Impact map u⁺ = N_c u⁻ and E_loss = ½ ṙ_c⁻ᵀΛ_c ṙ_c⁻ equal qv_dynamics.impact and
   ``pin.impulseDynamics`` (machine precision), and MuJoCo's velocity jump at touchdown within the
   soft-contact tolerance measured here (scene of :mod:`qv_dynamics.plants.mujoco_legged`, gravity off so
   the contact alone acts): at the end of MuJoCo's compression phase (contact normal velocity back to
   ≥ 0, 3.5 ms) ‖u_mj − N_c u⁻‖/‖u⁻ − N_c u⁻‖ measured 1.6 % (four feet) and 1.1 % (one foot), the
   energy loss 0.5 % and 0.3 %: asserted at 4 % and 1.5 %.
"""
import numpy as np
import pinocchio as pin
import pytest
from models import PinReference, pin_constraints, rel_err

from qv_dynamics import ConstrainedSystem, direct_dynamics
from qv_dynamics.impact import impact

FEET = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]
STANCES = {"four": FEET, "three": ["LF_FOOT", "RF_FOOT", "LH_FOOT"], "two": ["LF_FOOT", "RH_FOOT"]}


def anymal(feet):
    return ConstrainedSystem.from_urdf("anymal_c", floating_base=True,
                                       constraints=[{"type": "point_contact", "frame": f, "name": f} for f in feet])


def standing_state(system, rng):
    from qv_dynamics.plants.mujoco_legged import ANYMAL_C_STANDING, standing_configuration

    q = standing_configuration(system, joints=ANYMAL_C_STANDING)
    q[7:] += 0.1 * rng.standard_normal(12)
    R = pin.rpy.rpyToMatrix(*(0.1 * rng.standard_normal(3)))
    q[3:7] = pin.Quaternion(R).coeffs()
    v = rng.standard_normal(18)
    terms = system.evaluate(q, v)
    _, _, Vt = np.linalg.svd(terms.A)
    N = Vt[np.linalg.matrix_rank(terms.A):].T
    return q, N @ (N.T @ v)          # J_c u = 0: a velocity the stance admits


def lecture_forward_dynamics(terms, tau):
    """q̈ and F_c from the lecture alone: N_cᵀMq̈ = N_cᵀ(Sᵀτ − h) stacked with J_c q̈ = −J̇_c q̇."""
    M, h, J = terms.M, terms.h, terms.A
    Minv = np.linalg.inv(M)
    Lam = np.linalg.inv(J @ Minv @ J.T)                       # Λ_c = (J_cM⁻¹J_cᵀ)⁻¹
    Nc = np.eye(M.shape[0]) - Minv @ J.T @ Lam @ J
    lhs = np.vstack([Nc.T @ M, J])
    rhs = np.concatenate([Nc.T @ (tau - h), -terms.Adot_qdot])
    qdd = np.linalg.lstsq(lhs, rhs, rcond=None)[0]
    F_c = Lam @ (J @ Minv @ (tau - h) + terms.Adot_qdot)        # force exerted by the robot on the ground
    return qdd, F_c, Nc


@pytest.mark.parametrize("stance", sorted(STANCES))
def test_support_consistent_dynamics_equals_projection_kkt_and_pinocchio(stance):
    feet = STANCES[stance]
    system = anymal(feet)
    ref = PinReference(system, [("3d", f) for f in feet])
    rng = np.random.default_rng(13)
    for _ in range(3):
        q, v = standing_state(system, rng)
        tau = np.concatenate([np.zeros(6), 40.0 * rng.standard_normal(12)])   # Sᵀτ: the base is passive
        terms = system.evaluate(q, v)
        qdd_lec, F_c, Nc = lecture_forward_dynamics(terms, tau)
        assert np.linalg.norm(terms.A @ Nc) < 1e-10 * np.linalg.norm(terms.A)   # J_cN_c = 0
        qdd_p, _, lam_p = direct_dynamics(terms, tau=tau, method="projection")
        qdd_k, _, lam_k = direct_dynamics(terms, tau=tau, method="kkt")
        qdd_pin, _, lam_pin = ref(q, v, tau)
        for qdd, lam in ((qdd_p, lam_p), (qdd_k, lam_k), (qdd_pin, lam_pin)):
            assert rel_err(qdd_lec, qdd) < 1e-9
            assert rel_err(F_c, lam) < 1e-9                     # SPEC: M q̈ + h = τ − Aᵀλ, so λ = F_c
        # the lecture's equation itself holds for the projection result (residual ~ round-off)
        res = Nc.T @ (terms.M @ qdd_p + terms.h - tau)
        assert np.linalg.norm(res) < 1e-9 * np.linalg.norm(tau - terms.h)


@pytest.mark.parametrize("stance", ["four", "two"])
def test_impact_map_equals_impact_module_and_pinocchio(stance):
    feet = STANCES[stance]
    system = anymal(feet)
    rng = np.random.default_rng(7)
    q, _ = standing_state(system, rng)
    u_minus = rng.standard_normal(18)
    terms = system.evaluate(q, u_minus)
    M, J = terms.M, terms.A
    Minv = np.linalg.inv(M)
    Lam = np.linalg.inv(J @ Minv @ J.T)
    Nc = np.eye(18) - Minv @ J.T @ Lam @ J
    u_plus = Nc @ u_minus                                      # lecture: u⁺ = N_c u⁻
    rd = J @ u_minus
    E_loss = 0.5 * rd @ Lam @ rd                               # ½ ṙ_c⁻ᵀΛ_c ṙ_c⁻
    res = impact(M, J, u_minus)
    assert rel_err(res.qdot_plus, u_plus) < 1e-10
    assert abs(res.energy_loss - E_loss) < 1e-10 * E_loss
    assert rel_err(res.impulse, Lam @ rd) < 1e-10               # 𝓕_c = Λ_c ṙ_c⁻
    cms = pin_constraints(system, [("3d", f) for f in feet])
    cds = [c.createData() for c in cms]
    data = system.model.createData()
    pin.initConstraintDynamics(system.model, data, cms, cds)
    v_pin = pin.impulseDynamics(system.model, data, q, u_minus, cms, cds, 0.0, pin.ProximalSettings(1e-14, 0.0, 1))
    assert rel_err(u_plus, v_pin) < 1e-9


@pytest.mark.parametrize("case", ["four", "one"])
def test_impact_map_equals_mujoco_touchdown(case):
    """Touchdown of the free robot (no gravity, no torque, pure translation u⁻) in MuJoCo: the velocity
    at the end of the compression phase against N_c u⁻ and the energy lost against ½ṙ⁻ᵀΛ_cṙ⁻."""
    import mujoco

    from qv_dynamics.plants.mujoco_legged import (
        ANYMAL_C_STANDING,
        FloorScene,
        LeggedMujocoPlant,
        standing_configuration,
    )

    system = anymal(FEET)
    plant = LeggedMujocoPlant(system, FloorScene(gravity=(0.0, 0.0, 0.0)))
    q = standing_configuration(system, joints=ANYMAL_C_STANDING)
    if case == "one":   # tilt so that one foot is the lowest, then lower that foot onto the floor
        q[3:7] = pin.Quaternion(pin.rpy.rpyToMatrix(0.05, 0.05, 0.0)).coeffs()
    pin.framesForwardKinematics(system.model, system.data, q)
    z = np.array([system.data.oMf[system.model.getFrameId(f)].translation[2] for f in FEET])
    q[2] += plant.scene.foot_radius - z.min() + 1e-4
    touching = np.flatnonzero(z - z.min() < 1e-9)
    assert len(touching) == (4 if case == "four" else 1)
    R = pin.Quaternion(q[6], q[3], q[4], q[5]).matrix()
    u = np.zeros(18)
    u[:3] = R.T @ np.array([0.1, 0.05, -0.3])                 # base frame linear velocity: a pure translation
    plant.reset(q, u)
    while not plant.in_contact().any():
        q_minus, u_minus = plant.q, plant.qdot
        mujoco.mj_step(plant.model, plant.data)
    for i, f in enumerate(FEET):
        system.set_active(f, i in touching)
    terms = system.evaluate(q_minus, u_minus)
    res = impact(terms.M, terms.A, u_minus)
    for _ in range(200):                                       # until the contact stops compressing
        mujoco.mj_step(plant.model, plant.data)
        mujoco.mj_forward(plant.model, plant.data)
        q_mj, u_mj = plant.q, plant.qdot
        if (system.evaluate(q_mj, u_mj).A @ u_mj)[2::3].max() >= 0.0:
            break
    err = np.linalg.norm(u_mj - res.qdot_plus) / np.linalg.norm(u_minus - res.qdot_plus)
    kin = lambda qq, uu: 0.5 * uu @ system.mass_matrix(qq) @ uu  # noqa: E731
    loss_mj = kin(q_minus, u_minus) - kin(q_mj, u_mj)
    assert err < 0.04
    assert abs(loss_mj - res.energy_loss) < 0.015 * res.energy_loss
