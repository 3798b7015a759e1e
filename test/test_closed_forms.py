"""Closed forms of the papers, against the same systems built as URDFs and evaluated through Pinocchio.

- particle on a circle: projection paper sec. 5.4, eq. 33-37 and the force/acceleration split;
- slider-crank: projection paper sec. 8.1, eq. 68-71 (M, h, A, P and M_c'' with γ = ml², the singular pose);
- cart-pendulum: floating-base lecture (Hutter), contact Jacobian ranks and null spaces for three cases.

Note on eq. 70-71: the paper labels the two cases of P the wrong way round. A⁺ = 0 (hence P = I) when
|c₁| < ε/(l√5); the matrix [[1/5, −2/5], [−2/5, 4/5]] is P for the regular constraint, and eq. 71 is
M_c'' for that regular P (at the singular pose M_c'' = M, as the text after eq. 71 says of M_c').
"""
from __future__ import annotations

import numpy as np
import pytest
from models import cart_pendulum, particle_xy, two_link_point_masses

from qv_dynamics import ConstrainedSystem, RankDeficiencyError, direct_dynamics, quasi_decompose
from qv_dynamics.projection import (
    ATOL,
    constraint_force_eq32,
    constraint_inertia,
    coupling,
    decoupling_residual,
    projection,
)

TOL = 1e-12


# ------------------------------------------------------------------------------------- particle on a circle
def _circle(q, qdot, rho):
    """Φ = ‖q‖ − ρ, A = qᵀ/‖q‖, Ȧq̇ = (‖q̇‖² − (qᵀq̇)²/‖q‖²)/‖q‖ (paper: A = [q1/ρ q2/ρ], Ȧ = [q̇1/ρ q̇2/ρ])."""
    r = np.linalg.norm(q)
    return np.array([r - rho]), (q / r)[None, :], np.array([(qdot @ qdot - (q @ qdot) ** 2 / r ** 2) / r])


@pytest.mark.parametrize("scale", [1.0, 3.7])
def test_particle_on_circle_eq33_37(scale):
    """Φ = ‖q‖ − ρ as a custom constraint (scale 3.7: the same constraint written as 3.7Φ — P, F and q̈
    must not depend on how the constraint row is scaled)."""
    m, rho = 2.0, 0.8
    rng = np.random.default_rng(1)
    cons = [{"type": "custom", "rows": 1,
             "function": lambda q, qd: tuple(scale * x for x in _circle(q, qd, rho))}]
    system = ConstrainedSystem.from_urdf(particle_xy(m), constraints=cons, gravity=[0, 0, -9.81])
    for _ in range(20):
        th, thdot = rng.uniform(-np.pi, np.pi), rng.normal()
        e_par, e_perp = np.array([-np.sin(th), np.cos(th)]), np.array([np.cos(th), np.sin(th)])
        q, qdot = rho * e_perp, rho * thdot * e_par
        f = 5.0 * rng.normal(size=2)
        terms = system.evaluate(q, qdot)
        assert np.allclose(terms.M, m * np.eye(2), atol=TOL) and np.allclose(terms.h, 0.0, atol=TOL)
        pr = projection(terms)
        P33 = np.array([[np.sin(th) ** 2, -np.sin(th) * np.cos(th)], [-np.sin(th) * np.cos(th), np.cos(th) ** 2]])
        assert np.abs(pr.P - P33).max() < TOL                                       # eq. 33
        assert np.abs(pr.P - np.outer(e_par, e_par)).max() < TOL                    # P = ε∥ε∥ᵀ
        assert np.abs(pr.P_perp - np.outer(e_perp, e_perp)).max() < TOL             # I − P = ε⊥ε⊥ᵀ
        a_perp = -(qdot @ qdot) / rho * e_perp                                     # eq. 36-37
        assert np.abs(pr.a_perp - a_perp).max() < TOL
        # independent reference: the acceleration of the uniform circular motion q(t) = ρ e⊥(θ + θ̇t) that
        # has this (q, q̇) (θ̈ = 0: all of it is normal), by a central second difference in t
        h = 1e-4
        q_t = [rho * np.array([np.cos(th + thdot * t), np.sin(th + thdot * t)]) for t in (-h, 0.0, h)]
        assert np.abs(pr.a_perp - (q_t[0] - 2 * q_t[1] + q_t[2]) / h ** 2).max() < 1e-6 * (1 + thdot ** 2)
        f_par, f_perp = pr.split(f)
        qdd, F, lam = direct_dynamics(terms, tau=f)
        assert np.abs(pr.P @ (m * qdd) - f_par).max() < TOL                         # m q̈∥ = f∥
        F_closed = f_perp + m * (qdot @ qdot) / rho * e_perp                       # F = f⊥ + m‖q̇‖²/ρ ε⊥
        assert np.abs(F - F_closed).max() < 1e-11
        assert np.abs(constraint_force_eq32(terms, f) - F_closed).max() < 1e-11    # eq. 32 term by term
        qdd_k, F_k, _ = direct_dynamics(terms, tau=f, method="kkt")
        assert np.abs(qdd_k - qdd).max() < 1e-11 and np.abs(F_k - F_closed).max() < 1e-11
        # M = mI leaves N(A) invariant: a decoupled system (Proposition 3), the cross-coupling channel
        # μ f∥ (eq. 32) vanishes: μP = 0 (μ itself is I − P here, acting on f⊥ only)
        assert decoupling_residual(terms.M, pr.P) < TOL
        assert np.abs(coupling(terms.M, pr.P) @ pr.P).max() < TOL


# ------------------------------------------------------------------------------------------- slider-crank
M_LINK, L, G = 1.5, 0.7, 9.81


def _slider_crank():
    return ConstrainedSystem.from_urdf(
        two_link_point_masses(M_LINK, L), gravity=[0, -G, 0],
        constraints=[{"type": "point_contact", "frame": "C", "axes": ["y"], "position": [0, 0, 0], "name": "C"}])


def test_slider_crank_model_eq68_69():
    system = _slider_crank()
    rng = np.random.default_rng(4)
    m, l, g = M_LINK, L, G
    for _ in range(20):
        q, qd = rng.uniform(-np.pi, np.pi, 2), rng.normal(size=2)
        c1, c2, s1, s2 = np.cos(q[0]), np.cos(q[1]), np.sin(q[0]), np.sin(q[1])
        c12, s12 = np.cos(q.sum()), np.sin(q.sum())
        terms = system.evaluate(q, qd)
        M68 = m * l ** 2 * np.array([[3 + 2 * c2, 1 + c2], [1 + c2, 1.0]])
        h68 = np.array([-m * l ** 2 * s2 * (qd[1] ** 2 + 2 * qd[0] * qd[1]) + m * l * g * (c12 + 2 * c1),
                        m * l ** 2 * s2 * qd[0] ** 2 + m * l * g * c12])
        assert np.abs(terms.M - M68).max() < 1e-12 * np.abs(M68).max()
        assert np.abs(terms.h - h68).max() < 1e-12 * max(1.0, np.abs(h68).max())
        assert np.abs(terms.A - l * np.array([[c1 + c12, c12]])).max() < 1e-14           # eq. 69
        assert abs(terms.phi[0] - l * (s1 + s12)) < 1e-14                                 # eq. 66-67


def test_slider_crank_projection_eq70_71_and_singular_pose():
    system = _slider_crank()
    m, l = M_LINK, L
    gamma = m * l ** 2
    P_reg = np.array([[1 / 5, -2 / 5], [-2 / 5, 4 / 5]])
    threshold = ATOL / (l * np.sqrt(5.0))      # |c1| below which σ(A) = √5 l|c1| counts as zero
    rng = np.random.default_rng(8)
    cases = [(float(rng.uniform(0.1, 1.4)), "regular") for _ in range(5)]
    cases += [(np.pi / 2 + 2.0 * threshold, "near-singular, still regular"),
              (np.pi / 2 + 0.5 * threshold, "singular (A⁺ = 0)"), (np.pi / 2, "singular (A⁺ = 0)")]
    for q1, label in cases:
        q = np.array([q1, 2 * np.pi - 2 * q1])       # on the constraint manifold y_C = 0
        c1, c2 = np.cos(q[0]), np.cos(q[1])
        terms = system.evaluate(q, np.zeros(2))
        assert abs(terms.phi[0]) < 1e-14
        assert np.abs(terms.A - l * c1 * np.array([[2.0, 1.0]])).max() < 1e-14
        pr = projection(terms)
        Mc2 = constraint_inertia(terms.M, pr.P, "Mc_gamma", gamma)
        Mc1 = constraint_inertia(terms.M, pr.P, "Mc_sym")
        if abs(c1) * l * np.sqrt(5.0) > ATOL:
            # the direction of A = l c1 [2 1] is known to ~1e-16/|c1| only (round-off in c1 + c12, c12)
            tol = max(1e-12, 1e-15 / abs(c1))
            assert pr.rank == 1, label
            assert np.abs(pr.P - P_reg).max() < tol, label                              # eq. 70 (regular P)
            Mc71 = m * l ** 2 * np.array([[1.0, (1 + c2) / 5], [0.0, (3 - 2 * c2) / 5]])
            assert np.abs(Mc2 - Mc71).max() < tol, label                                # eq. 71
            assert abs(np.linalg.det(Mc2) - m ** 2 * l ** 4 * (3 - 2 * c2) / 5) < tol
        else:
            assert pr.rank == 0, label
            assert np.abs(pr.P - np.eye(2)).max() < 1e-15, label                        # eq. 70 (A⁺ = 0)
            assert np.abs(Mc2 - terms.M).max() < 1e-15 and np.abs(Mc1 - terms.M).max() < 1e-15
            tau = np.array([0.3, -0.2])
            qdd, F, lam = direct_dynamics(terms, tau=tau)
            assert np.abs(qdd - np.linalg.solve(terms.M, tau - terms.h)).max() < 1e-12  # constraint removed
            assert np.abs(F).max() < 1e-12
            with pytest.raises(RankDeficiencyError):
                direct_dynamics(terms, tau=tau, method="kkt")
            qs = quasi_decompose(terms, tau=tau)
            assert qs.rank == 0 and qs.V2.shape == (2, 2)
        print(f"\nq1={q1:.12f} ({label}): |c1|={abs(c1):.2e}, rank {pr.rank}, P={pr.P.round(6).tolist()}")


# ------------------------------------------------------------------------------------------ cart-pendulum
MC, MP, LP, THP = 3.0, 0.8, 0.4, 0.05
CART_CASES = {  # axes of P locked -> (rank J_c, rank J_c,b, null-space direction or None, N_cᵀSᵀ)
    "1_fixed": (["x", "z"], 2, 1),
    "2_vertical_locked": (["z"], 1, 0),
    "3_horizontal_locked": (["x"], 1, 1),
}


@pytest.mark.parametrize("case", sorted(CART_CASES))
def test_cart_pendulum_contact_jacobian_cases(case):
    axes, rank_c, rank_cb = CART_CASES[case]
    system = ConstrainedSystem.from_urdf(cart_pendulum(MC, MP, LP, THP), gravity=[0, 0, -9.81],
                                         constraints=[{"type": "point_contact", "frame": "P", "axes": axes}])
    rng = np.random.default_rng(12)
    S_T = np.array([0.0, 1.0])  # only the pendulum joint is actuated
    for _ in range(10):
        phi, phid = rng.uniform(0.2, 1.3) * rng.choice([-1, 1]), rng.normal()
        q = np.array([rng.normal(), phi])
        c, s = np.cos(phi), np.sin(phi)
        J_full = np.array([[1.0, 2 * LP * c], [0.0, 2 * LP * s]])                  # lecture: J_c for P
        J = J_full[[{"x": 0, "z": 1}[a] for a in axes]]
        qdot = np.linalg.svd(J)[2][rank_c:].T @ rng.normal(size=2 - rank_c) if rank_c < 2 else np.zeros(2)
        qdot = qdot * phid
        terms = system.evaluate(q, qdot)
        assert np.abs(terms.A - J).max() < 1e-14
        Mlec = np.array([[MC + MP, LP * MP * c], [LP * MP * c, MP * LP ** 2 + THP]])
        b = np.array([-qdot[1] ** 2 * LP * MP * s, 0.0])
        g = np.array([0.0, MP * 9.81 * LP * s])
        assert np.abs(terms.M - Mlec).max() < 1e-12 and np.abs(terms.h - (b + g)).max() < 1e-12
        pr = projection(terms)
        assert pr.rank == rank_c == np.linalg.matrix_rank(J)
        assert projection(type(terms)(**{**terms.__dict__, "A": terms.A[:, :1]})).rank == rank_cb
        qs = quasi_decompose(terms)
        assert qs.rank == rank_c and qs.V2.shape == (2, 2 - rank_c)
        qdd0, F0, _ = direct_dynamics(terms, tau=0 * S_T)
        qdd1, F1, _ = direct_dynamics(terms, tau=5.0 * S_T)
        if case == "1_fixed":   # N(J_c) = {0}: motion fixed by the constraints, τ_a only changes F_c
            assert np.abs(qdd1 - qdd0).max() < 1e-12 and np.abs(F1 - F0).max() > 1.0
        else:
            N = np.array([1.0, 0.0]) if case == "2_vertical_locked" else np.array([2 * LP * c, -1.0])
            N = N / np.linalg.norm(N)
            assert abs(abs(pr.V2[:, 0] @ N) - 1.0) < 1e-12                          # null space of J_c
            assert np.abs(pr.P - np.outer(N, N)).max() < 1e-12
            # support-consistent dynamics N_cᵀ(Mq̈ + b + g) = N_cᵀSᵀτ
            assert abs(N @ (terms.M @ qdd1 + b + g - 5.0 * S_T)) < 1e-12
            # N_cᵀSᵀ from the library's null-space basis V₂ (unit length) against the lecture's closed form
            NtSt = abs(pr.V2[:, 0] @ S_T)
            if case == "2_vertical_locked":  # N_cᵀSᵀ = 0: τ_a cannot move the system, only load P
                assert NtSt < 1e-12
                assert np.abs(qdd1 - qdd0).max() < 1e-12 and np.abs(F1 - F0).max() > 1.0
            else:                            # N_c ∝ (2l cos φ, −1): |N_cᵀSᵀ| = 1/‖N_c‖ ≠ 0
                assert abs(NtSt - 1.0 / np.hypot(2 * LP * c, 1.0)) < 1e-12
                # every τ_a changes the motion, along N_c: q̈₁ − q̈₀ = N_c (N_cᵀM N_c)⁻¹ N_cᵀ Sᵀτ_a
                dqdd = N * (N @ (5.0 * S_T)) / (N @ Mlec @ N)
                assert np.abs((qdd1 - qdd0) - dqdd).max() < 1e-10
