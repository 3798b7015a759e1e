"""Constrained forward dynamics against Pinocchio's constraintDynamics (independent reference).

Both methods of ``direct_dynamics`` ("projection", eq. 22-25 of the projection paper, and the plain
KKT solve) must return q̈ and the generalized constraint force Aᵀλ equal to
``pin.constraintDynamics`` with RigidConstraintModel CONTACT_3D/6D, LOCAL_WORLD_ALIGNED, to 1e-8
relative, on three example-robot-data robots at >= 50 random states each.
"""
from __future__ import annotations

import numpy as np
import pytest
from models import PinReference, null_space_qdot, rel_err

from qv_dynamics import ConstrainedSystem, RankDeficiencyError, direct_dynamics

TOL = 1e-8          # relative, q̈ and Aᵀλ vs Pinocchio (regular constraints)
TOL_REDUNDANT = 1e-6  # relative, q̈ vs Pinocchio's proximal solver (redundant / singular constraints)
N_STATES = 50

ROBOTS = {
    "panda": dict(frames=["panda_hand"], floating_base=False),
    "ur5": dict(frames=["tool0"], floating_base=False),
    "solo12": dict(frames=["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT"], floating_base=True),
}


def _worst_error_both_methods(system, ref, rng, n_states: int, unactuated_base: bool = False) -> float:
    """Worst relative error of q̈ and Aᵀλ, projection and KKT methods, against Pinocchio over random states
    with q̇ in the constraints' null space (τ on the floating base zero with ``unactuated_base``)."""
    worst = 0.0
    for _ in range(n_states):
        q = system.random_configuration(rng)
        qdot = null_space_qdot(system, q, rng)  # A q̇ = 0: Pinocchio's drift convention for 6D constraints differs
        tau = 20.0 * rng.normal(size=system.nv)
        if unactuated_base:
            tau[:6] = 0.0
        terms = system.evaluate(q, qdot)
        qdd_ref, F_ref, _ = ref(q, qdot, tau)
        for method in ("projection", "kkt"):
            qdd, F, _ = direct_dynamics(terms, tau=tau, method=method)
            worst = max(worst, rel_err(qdd, qdd_ref), rel_err(F, F_ref))
    return worst


@pytest.mark.parametrize("robot", sorted(ROBOTS))
def test_point_contacts_match_pinocchio(robot):
    cfg = ROBOTS[robot]
    cons = [{"type": "point_contact", "frame": f} for f in cfg["frames"]]
    system = ConstrainedSystem.from_urdf(robot, constraints=cons, floating_base=cfg["floating_base"])
    ref = PinReference(system, [("3d", f) for f in cfg["frames"]])
    rng = np.random.default_rng(sorted(ROBOTS).index(robot) + 100)
    worst = {"proj_qdd": 0.0, "proj_F": 0.0, "kkt_qdd": 0.0, "kkt_F": 0.0, "lam": 0.0}
    for _ in range(N_STATES):
        q = system.random_configuration(rng)
        qdot = rng.normal(size=system.nv)
        tau = 20.0 * rng.normal(size=system.nv)
        if cfg["floating_base"]:
            tau[:6] = 0.0
        terms = system.evaluate(q, qdot)
        qdd_ref, F_ref, lam_ref = ref(q, qdot, tau)
        for method in ("projection", "kkt"):
            qdd, F, lam = direct_dynamics(terms, tau=tau, method=method)
            key = "proj" if method == "projection" else "kkt"
            worst[f"{key}_qdd"] = max(worst[f"{key}_qdd"], rel_err(qdd, qdd_ref))
            worst[f"{key}_F"] = max(worst[f"{key}_F"], rel_err(F, F_ref))
            worst["lam"] = max(worst["lam"], rel_err(lam, lam_ref))
    print(f"\n{robot} ({system.nv} dof, m={system.m}), worst relative error over {N_STATES} states: "
          + ", ".join(f"{k}={v:.2e}" for k, v in worst.items()))
    for k, v in worst.items():
        assert v < TOL, f"{robot}: {k} relative error {v:.3e} > {TOL}"


def test_weld_matches_pinocchio_in_null_space():
    """6D weld (CONTACT_6D, LWA) on the Panda hand with A q̇ = 0 (frame at rest, drift conventions agree)."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "weld", "frame": "panda_hand"}])
    ref = PinReference(system, [("6d", "panda_hand")])
    worst = _worst_error_both_methods(system, ref, np.random.default_rng(7), N_STATES)
    print(f"\npanda weld: worst relative error (q̈, Aᵀλ, both methods) {worst:.2e}")
    assert worst < TOL


REDUNDANT = {
    "same_contact_twice": ([("3d", "panda_hand"), ("3d", "panda_hand")],
                           [{"type": "point_contact", "frame": "panda_hand"}] * 2),
    "weld_plus_point": ([("6d", "panda_hand"), ("3d", "panda_hand")],
                        [{"type": "weld", "frame": "panda_hand"}, {"type": "point_contact", "frame": "panda_hand"}]),
}


@pytest.mark.parametrize("case", sorted(REDUNDANT))
def test_redundant_constraints_match_proximal_solver(case):
    specs, cons = REDUNDANT[case]
    system = ConstrainedSystem.from_urdf("panda", constraints=cons)
    ref = PinReference(system, specs, mu=1e-12, max_iter=1000, accuracy=1e-13)
    rng = np.random.default_rng(11)
    worst_qdd = worst_F = 0.0
    for _ in range(20):
        q = system.random_configuration(rng)
        qdot = null_space_qdot(system, q, rng)
        tau = 20.0 * rng.normal(size=system.nv)
        terms = system.evaluate(q, qdot)
        assert np.linalg.matrix_rank(terms.A) < terms.m  # really redundant
        qdd_ref, F_ref, _ = ref(q, qdot, tau)
        qdd, F, lam = direct_dynamics(terms, tau=tau, method="projection")
        worst_qdd = max(worst_qdd, rel_err(qdd, qdd_ref))
        worst_F = max(worst_F, rel_err(F, F_ref))
        # λ is the minimum-norm multiplier: it lies in the row space of A (orthogonal to N(Aᵀ))
        _, _, Wt = np.linalg.svd(terms.A.T)
        r = np.linalg.matrix_rank(terms.A)
        assert np.linalg.norm(Wt[r:] @ lam) <= 1e-9 * max(1.0, np.linalg.norm(lam))
        with pytest.raises(RankDeficiencyError):
            direct_dynamics(terms, tau=tau, method="kkt")
    print(f"\n{case}: projection vs Pinocchio proximal (mu=1e-12): q̈ {worst_qdd:.2e}, Aᵀλ {worst_F:.2e}")
    assert worst_qdd < TOL_REDUNDANT and worst_F < TOL_REDUNDANT


def test_singular_pose_matches_proximal_solver():
    """UR5 stretched elbow (q3 = 0): the point contact at wrist_1_link loses one rank."""
    system = ConstrainedSystem.from_urdf("ur5", constraints=[{"type": "point_contact", "frame": "wrist_1_link"}])
    ref = PinReference(system, [("3d", "wrist_1_link")], mu=1e-12, max_iter=1000, accuracy=1e-13)
    rng = np.random.default_rng(5)
    worst = 0.0
    for _ in range(20):
        q = rng.uniform(-2.0, 2.0, size=6)
        q_reg = q.copy()
        q[2] = 0.0
        qdot = np.zeros(6)  # Ȧq̇ = 0: the constraint equations stay consistent at the singular pose
        tau = 20.0 * rng.normal(size=6)
        terms = system.evaluate(q, qdot)
        assert np.linalg.matrix_rank(terms.A, tol=1e-9) == 2
        q_reg[2] = 0.5
        assert np.linalg.matrix_rank(system.evaluate(q_reg, qdot).A, tol=1e-9) == 3
        qdd_ref, _, _ = ref(q, qdot, tau)
        qdd, _, _ = direct_dynamics(terms, tau=tau, method="projection")
        worst = max(worst, rel_err(qdd, qdd_ref))
        assert np.linalg.norm(terms.A @ qdd) < 1e-10 * np.linalg.norm(qdd)
        with pytest.raises(RankDeficiencyError):
            direct_dynamics(terms, tau=tau, method="kkt")
    print(f"\nUR5 singular pose: projection vs Pinocchio proximal, worst q̈ relative error {worst:.2e}")
    assert worst < TOL_REDUNDANT


@pytest.mark.parametrize("inertia", ["Mc", "Mc_sym", "Mc_gamma"])
def test_three_constraint_inertias_agree(inertia):
    """M_c (eq. 23), M_c' (eq. 28) and M_c'' (eq. 29) give the same q̈ (Pinocchio reference)."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    ref = PinReference(system, [("3d", "panda_hand")])
    rng = np.random.default_rng(3)
    for _ in range(10):
        q = system.random_configuration(rng)
        qdot = rng.normal(size=7)
        tau = 20.0 * rng.normal(size=7)
        qdd, F, _ = direct_dynamics(system.evaluate(q, qdot), tau=tau, inertia=inertia, gamma=None)
        qdd_ref, F_ref, _ = ref(q, qdot, tau)
        assert rel_err(qdd, qdd_ref) < TOL and rel_err(F, F_ref) < TOL


def test_humanoid_two_foot_welds_match_pinocchio():
    """Talos (floating base, 38 DoF), 6D welds on both soles (CONTACT_6D, A q̇ = 0), both methods."""
    system = ConstrainedSystem.from_urdf("talos", floating_base=True, constraints=[
        {"type": "weld", "frame": "left_sole_link"}, {"type": "weld", "frame": "right_sole_link"}])
    ref = PinReference(system, [("6d", "left_sole_link"), ("6d", "right_sole_link")])
    worst = _worst_error_both_methods(system, ref, np.random.default_rng(17), 20, unactuated_base=True)
    print(f"\ntalos two welds (nv={system.nv}, m={system.m}): worst relative error {worst:.2e}")
    assert worst < TOL
