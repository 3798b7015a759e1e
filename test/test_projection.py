"""Projection-operator formulation (paper `aghili-projection-operator`, eq. 4-32, sec. 7.2) against
independent references: numpy's pinv / Moore-Penrose conditions, Pinocchio's constraintDynamics
(q̈ and Aᵀλ), and a closed-form weighted minimum-norm solution."""
from __future__ import annotations

import numpy as np
import pytest
from models import PinReference, prismatic_arm, rel_err

from qv_dynamics import ConstrainedSystem, NotPositiveDefiniteError
from qv_dynamics.projection import (
    constraint_force_eq32,
    constraint_inertia,
    coupling,
    decoupling_residual,
    is_decoupled,
    length_metric,
    pinv_rank,
    projection,
    weighted_metric,
)


def test_pinv_and_projector_properties():
    """A⁺ satisfies the Moore-Penrose conditions and equals numpy.linalg.pinv; P = I − A⁺A is the
    orthogonal projector onto N(A) (eq. 4, 15), also for rank-deficient A."""
    rng = np.random.default_rng(0)
    for m, n, r in [(3, 7, 3), (6, 7, 4), (9, 7, 5), (1, 2, 1)]:
        A = rng.normal(size=(m, r)) @ rng.normal(size=(r, n))
        Ap, rank, V2 = pinv_rank(A)
        assert rank == r and V2.shape == (n, n - r)
        assert rel_err(Ap, np.linalg.pinv(A, rcond=1e-9)) < 1e-12
        assert np.abs(A @ Ap @ A - A).max() < 1e-12 and np.abs(Ap @ A @ Ap - Ap).max() < 1e-12
        assert np.abs((A @ Ap) - (A @ Ap).T).max() < 1e-12 and np.abs((Ap @ A) - (Ap @ A).T).max() < 1e-12
        P = np.eye(n) - Ap @ A
        assert np.abs(P - V2 @ V2.T).max() < 1e-12 and np.abs(A @ V2).max() < 1e-12
        assert np.abs(V2.T @ V2 - np.eye(n - r)).max() < 1e-12


def test_projected_dynamics_and_eq32_against_pinocchio(panda):
    """With q̈ and F from Pinocchio: PMq̈ = P(τ−h) (eq. 21), (I−P)q̈ = −A⁺Ȧq̇ (eq. 13/16), PF = 0,
    F = eq. 32 (term by term, μ = (I−P)MM_c⁻¹); M_c p.d., M_c' symmetric p.d., M_c'' invertible."""
    ref = PinReference(panda, [("3d", "panda_hand")])
    rng = np.random.default_rng(1)
    worst = dict(eq21=0.0, eq13=0.0, PF=0.0, eq32=0.0)
    for _ in range(20):
        q, qd, tau = panda.random_configuration(rng), rng.normal(size=7), 20 * rng.normal(size=7)
        t = panda.evaluate(q, qd)
        qdd, F, _ = ref(q, qd, tau)
        pr = projection(t)
        worst["eq21"] = max(worst["eq21"], rel_err(pr.P @ t.M @ qdd, pr.P @ (tau - t.h)))
        worst["eq13"] = max(worst["eq13"], rel_err(qdd - pr.P @ qdd, pr.a_perp))
        worst["PF"] = max(worst["PF"], np.linalg.norm(pr.P @ F) / np.linalg.norm(F))
        worst["eq32"] = max(worst["eq32"], rel_err(constraint_force_eq32(t, tau, pr), F))
        Mc, Mc1, Mc2 = (constraint_inertia(t.M, pr.P, k) for k in ("Mc", "Mc_sym", "Mc_gamma"))
        assert np.linalg.eigvalsh(0.5 * (Mc + Mc.T))[0] > 0                      # p.d., not symmetric
        assert np.abs(Mc1 - Mc1.T).max() < 1e-12 and np.linalg.eigvalsh(Mc1)[0] > 0
        assert abs(np.linalg.det(Mc2)) > 1e-12
        # M_c = M iff P commutes with M; the Panda's point contact is not a decoupled system (Prop. 3)
        assert decoupling_residual(t.M, pr.P) > 1e-3 and not is_decoupled(t.M, pr.P)
        mu = coupling(t.M, pr.P, Mc)
        assert np.abs(mu - (np.eye(7) - pr.P) @ t.M @ np.linalg.inv(Mc)).max() < 1e-10
    print("\n" + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    assert max(worst.values()) < 1e-10


def test_weighted_metric_sec72_is_unit_invariant():
    """Sec. 7.2: with W of eq. 50, A_W = AW^-½ gives a dimensionless P_W, and W^-½A_W⁺b is the
    minimiser of q̇ᵀWq̇ subject to Aq̇ = b (closed form W⁻¹Aᵀ(AW⁻¹Aᵀ)⁻¹b); the same in m and mm."""
    S = 1000.0
    D = np.diag([S, 1.0, 1.0, 1.0])
    cons = [{"type": "point_contact", "frame": "tip", "axes": ["x", "z"]}]
    sm = ConstrainedSystem.from_urdf(prismatic_arm(1.0), constraints=cons)
    smm = ConstrainedSystem.from_urdf(prismatic_arm(S), constraints=cons, gravity=[0, 0, -9810.0])
    mask = np.array([True, False, False, False])
    q = np.array([0.2, 0.4, -0.7, 0.3])
    b = np.array([0.1, -0.2])
    out = {}
    for name, sys_, scale, qq in (("m", sm, 1.0, q), ("mm", smm, S, D @ q)):
        t = sys_.evaluate(qq, np.zeros(4))
        W = length_metric(mask, 0.5 * scale)
        M_W, A_W, Wh, Whi = weighted_metric(t.M, t.A, W)
        assert np.abs(M_W - Whi @ t.M @ Whi).max() < 1e-9 * np.abs(M_W).max()
        P_W = np.eye(4) - np.linalg.pinv(A_W) @ A_W
        qd = Whi @ np.linalg.pinv(A_W) @ (scale * b)
        Wi = np.linalg.inv(W)
        assert rel_err(qd, Wi @ t.A.T @ np.linalg.solve(t.A @ Wi @ t.A.T, scale * b)) < 1e-10
        out[name] = (P_W, np.linalg.solve(D, qd) if name == "mm" else qd)
    assert np.abs(out["m"][0] - out["mm"][0]).max() < 1e-10          # P_W dimensionless
    assert rel_err(out["mm"][1], out["m"][1]) < 1e-10                  # same physical joint rate
    with pytest.raises(NotPositiveDefiniteError):
        weighted_metric(np.eye(2), np.ones((1, 2)), np.diag([1.0, -1.0]))


def test_pinv_basis_against_numpy_pinv():
    """pinv_basis (thin SVD; one row: σ = ‖A‖ without an SVD) gives numpy's pinv, the rank, and V₁ with
    I − V₁V₁ᵀ = the projector onto N(A); a zero row has rank 0 and P = I."""
    from qv_dynamics.projection import pinv_basis

    rng = np.random.default_rng(3)
    for m, n, r in [(1, 7, 1), (1, 2, 1), (3, 7, 3), (6, 7, 4), (9, 7, 5)]:
        A = rng.normal(size=(m, r)) @ rng.normal(size=(r, n))
        Ap, V1, rank = pinv_basis(A)
        assert rank == r and V1.shape == (n, r)
        assert rel_err(Ap, np.linalg.pinv(A, rcond=1e-9)) < 1e-12
        assert np.abs(V1.T @ V1 - np.eye(r)).max() < 1e-12
        assert np.abs((np.eye(n) - V1 @ V1.T) - (np.eye(n) - np.linalg.pinv(A) @ A)).max() < 1e-12
    Ap, V1, rank = pinv_basis(np.zeros((1, 3)))
    assert rank == 0 and V1.shape == (3, 0) and np.array_equal(Ap, np.zeros((3, 1)))
