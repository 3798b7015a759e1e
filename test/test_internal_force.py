"""Internal-force channel (qv_control.laws.internal_force) on two Pandas holding a free box.

References: the internal torque AᵀEz must give zero generalized force on the box's (passive) joints; the
constrained dynamics with and without it — our KKT direct dynamics and Pinocchio's constraintDynamics
with two 6-D loop closures — must give the same q̈, and λ must change by exactly E z."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_control.laws.internal_force import InternalForceChannel, NonInternalForceError, internal_force_basis
from qv_dynamics.projection import direct_dynamics
from qv_dynamics.sim.bimanual import arm_joints, bimanual_system, grasp_constraint, nominal_q

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


@pytest.fixture(scope="module")
def setup():
    system = bimanual_system()
    rng = np.random.default_rng(14)
    q = nominal_q(system)
    q = system.integrate(q, 0.05 * rng.standard_normal(system.nv))   # off the nominal pose ...
    for _ in range(20):                                               # ... back onto Φ = 0 (Newton)
        phi, A = system.constraint_rows(q)
        q = system.integrate(q, -np.linalg.pinv(A) @ phi)
    phi, A = system.constraint_rows(q)
    assert np.abs(phi).max() < 1e-12
    qdot = (np.eye(system.nv) - np.linalg.pinv(A) @ A) @ (0.3 * rng.standard_normal(system.nv))
    mask = np.zeros(system.nv, bool)
    for name in arm_joints():
        mask[system.joint_v_index(name)] = True
    return system, q, qdot, mask, rng


def test_basis_of_two_hand_grasp(setup):
    system, q, _, mask, _ = setup
    _, A = system.constraint_rows(q)
    b = internal_force_basis(A, mask)
    assert (b.m, b.rank, b.passive_rank, b.size) == (12, 12, 6, 6)   # six internal wrench components
    assert np.abs(b.E.T @ b.E - np.eye(6)).max() < 1e-13            # orthonormal
    scale = np.linalg.norm(A, 2)
    assert np.abs(A[:, ~mask].T @ b.E).max() < 1e-13 * scale         # A_pᵀE = 0: no force on the box
    lam = setup[4].standard_normal(12)
    lam0, z = b.split(lam)
    assert np.abs(lam0 + b.E @ z - lam).max() < 1e-13 and np.abs(b.E.T @ lam0).max() < 1e-13


def test_redundant_rows_give_the_same_internal_forces(setup):
    system, q, _, mask, _ = setup
    _, A = system.constraint_rows(q)
    red = bimanual_system()
    red.add_constraint(dict(grasp_constraint("left"), name="grasp_left_again"))   # the left grasp twice
    _, Ar = red.constraint_rows(q)
    b, br = internal_force_basis(A, mask), internal_force_basis(Ar, mask)
    assert (br.m, br.rank, br.size) == (18, 12, 6)
    assert np.abs((np.eye(18) - Ar @ np.linalg.pinv(Ar)) @ br.E).max() < 1e-12   # E ⊂ R(A): no N(Aᵀ) part
    # the generalized internal forces AᵀE span the same 6-D subspace of ℝⁿ
    G, Gr = np.linalg.qr(A.T @ b.E)[0], np.linalg.qr(Ar.T @ br.E)[0]
    assert np.linalg.norm(G @ G.T - Gr @ Gr.T, 2) < 1e-12


def _pinocchio_loops(system):
    model = system.model
    cms = []
    for side in ("left", "right"):
        fa = model.frames[model.getFrameId(f"{side}_panda_hand_tcp")]
        fb = model.frames[model.getFrameId(f"box_grasp_{side}")]
        cms.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, model, fa.parentJoint, fa.placement,
                                            fb.parentJoint, fb.placement, LWA))
    return cms


def test_internal_torque_moves_nothing_and_sets_lambda(setup):
    system, q, qdot, mask, rng = setup
    terms = system.evaluate(q, qdot)
    b = internal_force_basis(terms.A, mask)
    tau = np.where(mask, 20.0 * rng.standard_normal(system.nv), 0.0)
    z = 20.0 * rng.standard_normal(b.size)
    f_int = b.generalized_force(z)
    assert np.abs(f_int[~mask]).max() < 1e-12 * np.abs(f_int).max()  # zero on the passive (box) joints
    qdd1, _, lam1 = direct_dynamics(terms, tau=tau, method="kkt")
    qdd2, _, lam2 = direct_dynamics(terms, tau=tau + b.torque(z), method="kkt")
    assert np.abs(qdd2 - qdd1).max() < 1e-9                         # same box (and arm) acceleration
    assert np.abs(b.E.T @ (lam2 - lam1) - z).max() < 1e-9 * np.abs(z).max()
    assert np.abs((lam2 - lam1) - b.E @ z).max() < 1e-9 * np.abs(z).max()
    # independent reference: Pinocchio's constrained dynamics with two 6-D loop closures
    model = system.model
    data = model.createData()
    cms = _pinocchio_loops(system)
    cds = [c.createData() for c in cms]
    pin.initConstraintDynamics(model, data, cms, cds)
    prox = pin.ProximalSettings(1e-14, 0.0, 1)
    pq1 = pin.constraintDynamics(model, data, q, qdot, tau, cms, cds, prox).copy()
    pq2 = pin.constraintDynamics(model, data, q, qdot, tau + b.torque(z), cms, cds, prox).copy()
    assert np.abs(pq2 - pq1).max() < 1e-9
    assert np.abs(pq1 - qdd1).max() < 1e-10 * max(1.0, np.abs(qdd1).max())   # measured 1e-14 relative


def test_non_internal_lambda_d_is_refused(setup):
    system, q, _, mask, _ = setup
    _, A = system.constraint_rows(q)
    b = internal_force_basis(A, mask)
    squeeze = b.E @ np.array([20.0, 0, 0, 0, 0, 0])
    assert np.allclose(b.check(squeeze), [20.0, 0, 0, 0, 0, 0], atol=1e-12)
    lift = np.zeros(12)
    lift[[2, 8]] = -10.0                             # both hands push the box up: it would move
    with pytest.raises(NonInternalForceError, match=r"non-internal part of norm 1\d\.\d"):
        b.check(squeeze + lift, labels=system.row_labels)


def test_channel_sets_target_and_force_pi(setup):
    system, q, qdot, mask, rng = setup
    terms = system.evaluate(q, qdot)
    ch = InternalForceChannel(kf=0.5, ki=40.0, max_dt=0.01)
    b = ch.basis(terms.A, mask)
    tau = np.where(mask, 20.0 * rng.standard_normal(system.nv), 0.0)
    _, _, lam_m = direct_dynamics(terms, tau=tau, method="kkt")
    lam_d = b.E @ (20.0 * rng.standard_normal(b.size))
    cmd = ch.command(0.0, b, lam_m, lambda_d=lam_d)
    _, _, lam = direct_dynamics(terms, tau=tau + cmd.tau, method="kkt")
    assert np.abs(b.E.T @ (lam - lam_d)).max() < 1e-9 * np.abs(lam_d).max()   # open loop, exact model
    # a plant whose internal force is 10 % short plus a bias: the PI removes the error
    bias = b.E @ np.full(b.size, 3.0)
    lam_meas, t = lam_m, 0.0
    for _ in range(400):
        cmd = ch.command(t, b, lam_m, lambda_d=lam_d, lambda_meas=lam_meas)
        lam_meas = lam_m + b.E @ (0.9 * (cmd.z - b.E.T @ lam_m)) - bias   # λ after this command
        t += 1e-3
    assert np.abs(b.E.T @ (lam_meas - lam_d)).max() < 1e-3 * np.abs(lam_d).max()
    frozen = ch.integral.copy()
    ch.command(t + 1e-3, b, lam_m, lambda_d=lam_d, lambda_meas=lam_meas - bias, freeze=True)
    ch.command(t + 1.0, b, lam_m, lambda_d=lam_d, lambda_meas=lam_meas - bias)      # dt > max_dt
    assert np.array_equal(ch.integral, frozen)                      # anti-windup and bounded dt


def test_channel_reseeds_on_release_and_uses_chooser(setup):
    system, q, qdot, mask, _ = setup
    one = bimanual_system(sides=("left",))
    z_want = np.arange(1.0, 7.0)
    ch = InternalForceChannel(chooser=lambda lam0, E: z_want)
    terms = system.evaluate(q, qdot)
    b = ch.basis(terms.A, mask, t=0.0)
    _, _, lam_m = direct_dynamics(terms, tau=np.zeros(system.nv), method="kkt")
    cmd = ch.command(0.0, b, lam_m)
    _, _, lam = direct_dynamics(terms, tau=cmd.tau, method="kkt")
    assert np.abs(b.E.T @ lam - z_want).max() < 1e-9
    b1 = ch.basis(one.constraint_rows(q)[1], mask, t=1.0)           # one hand released
    assert b1.size == 0 and ch.events[-1]["t"] == 1.0
    assert ch.events[-1]["previous"] == {"m": 12, "rank": 12, "internal_dim": 6}
    assert ch.events[-1]["internal_dim"] == 0 and ch.events[-1]["m"] == 6


def test_passive_law_force_channel_sets_the_squeeze(setup):
    from qv_control import Reference, State, make_law

    system, q, qdot, mask, rng = setup
    coords = [{"frame": "box", "axes": ["x", "y", "z", "rx", "ry", "rz"]}, "left_panda_joint3", "right_panda_joint3"]
    law = make_law("passive", system, coordinates=coords, actuated=arm_joints(), kp=400.0, kd=40.0,
                   effort_limits=None)
    theta_d = law.coords.evaluate(q, qdot).theta + 0.01 * rng.standard_normal(8)
    ref0 = Reference(theta=theta_d, theta_dot=0.1 * rng.standard_normal(8))
    tau0 = law.compute(State(0.0, q, qdot), ref0)
    terms = system.evaluate(q, qdot)
    b = internal_force_basis(terms.A, mask)
    lam_d = b.E @ (20.0 * rng.standard_normal(b.size))
    tau1 = law.compute(State(0.0, q, qdot), Reference(ref0.theta, ref0.theta_dot, lambda_=lam_d))
    assert np.all(tau1[~mask] == 0.0)
    qdd0, _, lam0 = direct_dynamics(terms, tau=tau0, method="kkt")
    qdd1, _, lam1 = direct_dynamics(terms, tau=tau1, method="kkt")
    assert np.abs(qdd1 - qdd0).max() < 1e-9                           # same box and arm acceleration
    assert np.abs(b.E.T @ (lam1 - lam_d)).max() < 1e-9 * np.abs(lam_d).max()
    assert np.abs(b.E.T @ lam0).max() < 1e-9                          # λ_d = None: zero internal force
    with pytest.raises(NonInternalForceError):
        lift = np.zeros(12)
        lift[[2, 8]] = -10.0
        law.compute(State(0.0, q, qdot), Reference(ref0.theta, ref0.theta_dot, lambda_=lam_d + lift))
