"""Quasi-velocity decomposition (SPEC §2, paper `aghili-quasi-velocities` eq. 6-22) against independent
references: finite differences along the true constrained motion, M⁻¹ solves, and the constrained
dynamics that matched Pinocchio (test_dynamics_pinocchio.py).
"""
from __future__ import annotations

import numpy as np
import pytest
from models import null_space_qdot, rel_err

from qv_dynamics import ConstrainedSystem, direct_dynamics, quasi_decompose, torque_from_quasi_forces

N_STATES = 50
CASES = {
    "panda_point": ("panda", [{"type": "point_contact", "frame": "panda_hand"}], False),
    "ur5_weld_xyz_rz": ("ur5", [{"type": "weld", "frame": "tool0", "axes": ["x", "y", "z", "rz"]}], False),
    "solo12_feet": ("solo12", [{"type": "point_contact", "frame": f} for f in
                               ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")], True),
}


def _system(case):
    robot, cons, fb = CASES[case]
    return ConstrainedSystem.from_urdf(robot, constraints=cons, floating_base=fb)


def _tau(system, rng):
    tau = 20.0 * rng.normal(size=system.nv)
    if system.floating_base:
        tau[:6] = 0.0
    return tau


def _rk4_step(system, q, qdot, tau, h):
    """One RK4 step of the constrained motion (q̈ from the projection method), in the tangent space at q."""
    n = system.nv

    def acc(dq, v):
        qq = system.integrate(q, dq)
        return direct_dynamics(system.evaluate(qq, v), tau=tau)[0]

    d0 = np.zeros(n)
    k1v, k1a = qdot, acc(d0, qdot)
    k2v, k2a = qdot + 0.5 * h * k1a, acc(0.5 * h * k1v, qdot + 0.5 * h * k1a)
    k3v, k3a = qdot + 0.5 * h * k2a, acc(0.5 * h * k2v, qdot + 0.5 * h * k2a)
    k4v, k4a = qdot + h * k3a, acc(h * k3v, qdot + h * k3a)
    dq = h / 6.0 * (k1v + 2 * k2v + 2 * k3v + k4v)
    return system.integrate(q, dq), qdot + h / 6.0 * (k1a + 2 * k2a + 2 * k3a + k4a)


@pytest.mark.parametrize("case", ["panda_point", "ur5_weld_xyz_rz", "solo12_feet"])
def test_vdot_and_vr_dot_match_finite_differences_along_motion(case):
    """v̇ = −Γv + u − Λᵀλ (eq. 7a) and v̇_r = −Γ_v v_r + u_v (eq. 17, SPEC sign) vs forward differences
    of v = Qᵀq̇ and v_r = V₂ᵀv along the RK4-integrated constrained motion: relative error O(h)."""
    system = _system(case)
    rng = np.random.default_rng(21)
    hs = [1e-4, 5e-5, 2.5e-5]
    for trial in range(3):
        q0 = system.random_configuration(rng)
        qdot0 = null_space_qdot(system, q0, rng)
        tau = _tau(system, rng) * (0.1 if system.floating_base else 1.0)  # Solo's legs weigh ~0.1 kg
        terms0 = system.evaluate(q0, qdot0)
        qs0 = quasi_decompose(terms0, tau=tau)
        _, _, lam = direct_dynamics(terms0, tau=tau)
        vdot_pred = -qs0.Gamma @ qs0.v + qs0.u - qs0.Lambda.T @ lam
        err_v, err_vr = [], []
        for h in hs:
            q1, qdot1 = _rk4_step(system, q0, qdot0, tau, h)
            qs1 = quasi_decompose(system.evaluate(q1, qdot1), tau=tau, prev=qs0)
            assert not qs1.rank_changed
            err_v.append(rel_err((qs1.v - qs0.v) / h, vdot_pred))
            err_vr.append(rel_err((qs1.v_r - qs0.v_r) / h, qs0.vr_dot))
        rates_v = [err_v[i] / err_v[i + 1] for i in range(len(hs) - 1)]
        rates_vr = [err_vr[i] / err_vr[i + 1] for i in range(len(hs) - 1)]
        print(f"\n{case} trial {trial}: h={hs} rel err v̇ {['%.2e' % e for e in err_v]} (halving ratios "
              f"{['%.2f' % r for r in rates_v]}), v̇_r {['%.2e' % e for e in err_vr]} "
              f"(ratios {['%.2f' % r for r in rates_vr]})")
        assert err_v[-1] < 1e-3 and err_vr[-1] < 1e-3
        for r in rates_v + rates_vr:
            assert 1.7 < r < 2.3, "finite-difference error is not O(h)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_structure_identities(case):
    """Γ skew (vᵀΓv = 0, v_rᵀΓ_v v_r = 0), K = ½q̇ᵀMq̇ = ½‖v_r‖² for Aq̇ = 0, ‖u‖² = τᵀM⁻¹τ,
    ξ = V₁ᵀΛᵀλ, Aᵀλ = QV₁ξ and λ equal to the projection method's, and decoupling (u_v leaves λ)."""
    system = _system(case)
    rng = np.random.default_rng(5)
    worst = dict(vGv=0.0, vrGvr=0.0, K=0.0, u2=0.0, xi=0.0, F=0.0, lam=0.0, decouple=0.0, tau_rt=0.0)
    for _ in range(N_STATES):
        q = system.random_configuration(rng)
        qdot = null_space_qdot(system, q, rng)
        tau_a = _tau(system, rng)
        terms = system.evaluate(q, qdot)
        qs = quasi_decompose(terms, tau=tau_a)
        nG = np.linalg.norm(qs.Gamma, 2)
        worst["vGv"] = max(worst["vGv"], abs(qs.v @ qs.Gamma @ qs.v) / (nG * (qs.v @ qs.v)))
        worst["vrGvr"] = max(worst["vrGvr"], abs(qs.v_r @ qs.Gamma_v @ qs.v_r) / (nG * (qs.v_r @ qs.v_r)))
        K_ref = 0.5 * qdot @ terms.M @ qdot
        worst["K"] = max(worst["K"], abs(0.5 * qs.v_r @ qs.v_r - K_ref) / K_ref,
                         abs(qs.kinetic_energy - K_ref) / K_ref)
        tau = tau_a - terms.g
        u2_ref = tau @ np.linalg.solve(terms.M, tau)
        worst["u2"] = max(worst["u2"], abs(qs.u @ qs.u - u2_ref) / u2_ref)
        qdd, F, lam = direct_dynamics(terms, tau=tau_a)
        worst["xi"] = max(worst["xi"], rel_err(qs.xi, qs.V1.T @ (qs.Lambda.T @ lam)))
        worst["F"] = max(worst["F"], rel_err(qs.constraint_force, F))
        worst["lam"] = max(worst["lam"], rel_err(qs.lambda_, lam))
        # decoupling: a different u_v (same u_ξ) changes the motion but not λ
        du_v = 10.0 * rng.normal(size=qs.u_v.shape)
        tau2 = torque_from_quasi_forces(terms, qs, qs.u_v + du_v, qs.u_xi)
        worst["tau_rt"] = max(worst["tau_rt"],
                              rel_err(torque_from_quasi_forces(terms, qs, qs.u_v, qs.u_xi), tau_a))
        qdd2, _, lam2 = direct_dynamics(terms, tau=tau2)
        assert rel_err(qdd2, qdd) > 1e-3
        worst["decouple"] = max(worst["decouple"], rel_err(lam2, lam))
    print(f"\n{case}: " + ", ".join(f"{k}={v:.1e}" for k, v in worst.items()))
    assert worst["vGv"] < 1e-10 and worst["vrGvr"] < 1e-10
    assert worst["K"] < 1e-10 and worst["u2"] < 1e-10
    assert worst["xi"] < 1e-9 and worst["F"] < 1e-9 and worst["lam"] < 1e-9
    assert worst["decouple"] < 1e-10 and worst["tau_rt"] < 1e-12


@pytest.mark.parametrize("case", sorted(CASES))
def test_mdot_and_drift_by_finite_differences(case):
    """Ṁ = C + Cᵀ and Ȧq̇ = d/dt(A(q)q̇)|_{q̈=0} by central differences along q ⊕ t q̇ (error O(h²))."""
    system = _system(case)
    rng = np.random.default_rng(9)
    h = 1e-5
    worst_M = worst_A = 0.0
    for _ in range(10):
        q = system.random_configuration(rng)
        qdot = rng.normal(size=system.nv)
        terms = system.evaluate(q, qdot)
        tp = system.evaluate(system.integrate(q, h * qdot), qdot)
        tm = system.evaluate(system.integrate(q, -h * qdot), qdot)
        Mdot_fd = (tp.M - tm.M) / (2 * h)
        worst_M = max(worst_M, np.linalg.norm(terms.C + terms.C.T - Mdot_fd) / np.linalg.norm(Mdot_fd))
        drift_fd = (tp.A @ qdot - tm.A @ qdot) / (2 * h)
        worst_A = max(worst_A, rel_err(terms.Adot_qdot, drift_fd))
    print(f"\n{case}: Ṁ vs C+Cᵀ {worst_M:.1e}, Ȧq̇ vs FD {worst_A:.1e} (h={h})")
    assert worst_M < 1e-7 and worst_A < 1e-7


def test_loop_closure_rows_are_the_jacobian_of_phi():
    """A loop closure's A is ∂Φ/∂q (central differences near Φ = 0) and its drift matches FD of A q̇."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "loop_closure", "frame_a": "panda_hand", "frame_b": "panda_link5", "axes": ["x", "z", "ry"]}])
    rng = np.random.default_rng(2)
    q = system.random_configuration(rng)
    pa, pb = system.frame_placement(q, "panda_hand"), system.frame_placement(q, "panda_link5")
    c = system.constraints[0]
    c.position = pa.translation - pb.translation           # Φ(q) = 0 here
    c.rotation = pb.rotation.T @ pa.rotation
    qdot = rng.normal(size=7)
    terms = system.evaluate(q, qdot)
    assert np.linalg.norm(terms.phi) < 1e-12
    h = 1e-6
    phi_p = system.constraint_rows(q + h * qdot)[0]
    phi_m = system.constraint_rows(q - h * qdot)[0]
    assert rel_err(terms.A @ qdot, (phi_p - phi_m) / (2 * h)) < 1e-7
    tp, tm = system.evaluate(q + h * qdot, qdot), system.evaluate(q - h * qdot, qdot)
    assert rel_err(terms.Adot_qdot, (tp.A @ qdot - tm.A @ qdot) / (2 * h)) < 1e-6


@pytest.mark.parametrize("case", ["panda_point", "solo12_feet"])
def test_qdot_gamma_against_cholesky_finite_difference_and_spec_formula(case):
    """Q̇ vs central differences of numpy's Cholesky factor along q ⊕ tq̇ (O(h²)); Γ vs the SPEC formula
    Q⁻¹CQ⁻ᵀ − Q̇ᵀQ⁻ᵀ with Q̇ = QΦ(Q⁻¹ṀQ⁻ᵀ) written out with numpy.linalg (guards the optimised path)."""
    system = _system(case)
    rng = np.random.default_rng(13)
    h = 1e-5
    worst_fd = worst_formula = 0.0
    for _ in range(10):
        q, qdot = system.random_configuration(rng), rng.normal(size=system.nv)
        terms = system.evaluate(q, qdot)
        qs = quasi_decompose(terms)
        chol = lambda qq: np.linalg.cholesky(system.evaluate(qq, qdot).M)  # noqa: E731
        Qdot_fd = (chol(system.integrate(q, h * qdot)) - chol(system.integrate(q, -h * qdot))) / (2 * h)
        worst_fd = max(worst_fd, rel_err(qs.Qdot, Qdot_fd))
        Q = np.linalg.cholesky(terms.M)
        Qi = np.linalg.inv(Q)
        X = Qi @ (terms.C + terms.C.T) @ Qi.T
        Phi = np.tril(X, -1) + 0.5 * np.diag(np.diag(X))
        Qdot = Q @ Phi
        Gamma = Qi @ terms.C @ Qi.T - Qdot.T @ Qi.T
        worst_formula = max(worst_formula, rel_err(qs.Qdot, Qdot), rel_err(qs.Gamma, Gamma),
                            rel_err(qs.Q, Q), rel_err(qs.v, Q.T @ qdot))
    print(f"\n{case}: Q̇ vs FD of chol(M) {worst_fd:.1e}; Q, v, Q̇, Γ vs SPEC formula {worst_formula:.1e}")
    assert worst_fd < 1e-7 and worst_formula < 1e-12
