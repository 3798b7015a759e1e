"""The SVD-free basis alignment (qv_dynamics.quasi_basis.aligned_basis: QR + Newton–Schulz polar factors)
against the reference formulation (full SVD of Λ, Procrustes rotations by SVD, SPEC §2), along smooth
motions sampled at 1 kHz: the bases themselves and everything built on them agree to rounding; rank
changes, redundant rows and jumps fall back to the SVD path."""
from __future__ import annotations

import numpy as np
import pytest

from qv_dynamics import ConstrainedSystem, quasi_decompose
from qv_dynamics.quasi_basis import aligned_basis, near_polar, polar

CASES = {
    "panda_point": ("panda", [{"type": "point_contact", "frame": "panda_hand"}], False),
    "panda_table": ("panda", [{"type": "point_contact", "frame": "panda_hand", "axes": ["z"]}], False),
    "ur5_weld_xyz_rz": ("ur5", [{"type": "weld", "frame": "tool0", "axes": ["x", "y", "z", "rz"]}], False),
    "talos_welds": ("talos", [{"type": "weld", "frame": "left_sole_link"},
                              {"type": "weld", "frame": "right_sole_link"}], True),
}
FIELDS = ("V1", "V2", "W1", "Gamma_v", "Gamma_xi_vr", "v_r", "u_v", "u_xi", "xi", "lambda_", "constraint_force",
          "vr_dot")


def _motion(system, seed=0):
    """q(t), q̇(t) (q̇ in the null space of A) of a smooth joint-space motion."""
    rng = np.random.default_rng(seed)
    q0 = system.random_configuration(rng)
    if system.floating_base:
        q0[7:] = system.neutral()[7:] + 0.2 * rng.normal(size=system.nq - 7)
    n = system.nv
    w, ph = rng.normal(size=n), rng.uniform(0, 6, size=n)

    def at(t):
        q = system.integrate(q0, 0.3 * np.sin(w * t + ph) - 0.3 * np.sin(ph))
        A = system.constraint_rows(q)[1]
        _, s, Vt = np.linalg.svd(A)
        r = int(np.count_nonzero(s > 1e-9 * s[0]))
        return q, Vt[r:].T @ (Vt[r:] @ (0.3 * w * np.cos(w * t + ph)))

    return at, rng


@pytest.mark.parametrize("case", list(CASES))
def test_aligned_gauge_equals_svd_gauge_along_a_motion(case):
    robot, cons, fb = CASES[case]
    system = ConstrainedSystem.from_urdf(robot, constraints=cons, floating_base=fb)
    at, rng = _motion(system)
    prev_a = prev_s = None
    worst = dict.fromkeys(FIELDS, 0.0)
    steps = 40 if system.nv > 20 else 100
    for k in range(steps):
        q, qdot = at(1e-3 * k)
        terms = system.evaluate(q, qdot)
        tau = 10.0 * rng.normal(size=system.nv)
        a = quasi_decompose(terms, tau=tau, prev=prev_a, gauge="aligned")
        s = quasi_decompose(terms, tau=tau, prev=prev_s, gauge="svd")
        assert a.rank == s.rank == system.m and not a.rank_changed and not s.rank_changed
        for f in FIELDS:
            x, y = getattr(a, f), getattr(s, f)
            worst[f] = max(worst[f], float(np.abs(x - y).max() / max(1.0, np.abs(y).max())) if y.size else 0.0)
        prev_a, prev_s = a, s
    print(f"\n{case}: worst relative difference aligned vs svd gauge over {steps} steps: "
          + ", ".join(f"{f} {e:.1e}" for f, e in worst.items()))
    # measured ≤ 7e-14 (Talos, 40 steps), ≤ 5e-15 (Panda, 100 steps): rounding, accumulated along the chain
    assert max(worst.values()) < 3e-13
    # the steady state really took the SVD-free path
    assert aligned_basis(a.Lambda, prev_a, 1e-9, 1e-9) is not None
    # S and U1, computed on first use in the aligned path, are the SVD's
    U, sv, _ = np.linalg.svd(a.Lambda)
    assert np.allclose(a.S, sv[:a.rank], rtol=1e-14, atol=0) and np.allclose(np.abs(a.U1.T @ U[:, :a.rank]),
                                                                                 np.eye(a.rank), atol=1e-12)


def test_rank_change_redundant_rows_and_jumps_take_the_svd_path():
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": "panda_hand", "name": "a"},
        {"type": "point_contact", "frame": "panda_hand", "axes": ["z"], "name": "b", "active": False}])
    at, _ = _motion(system)
    q, qdot = at(0.0)
    p = quasi_decompose(system.evaluate(q, qdot))
    q1, qdot1 = at(1e-3)
    # redundant row (rank 3 of 4): the aligned path declines, the SVD path decides the rank
    system.set_active("b", True)
    t1 = system.evaluate(q1, qdot1)
    a = quasi_decompose(t1, prev=p, gauge="aligned")
    s = quasi_decompose(t1, prev=p, gauge="svd")
    assert a.rank == s.rank == 3 and not a.rank_changed and not s.rank_changed  # same rank: gauge kept
    assert np.array_equal(a.V2, s.V2) and np.array_equal(a.W1, s.W1)
    p2 = a
    q2, qdot2 = at(2e-3)
    t2 = system.evaluate(q2, qdot2)
    assert aligned_basis(t2.A.dot(np.linalg.inv(np.linalg.cholesky(t2.M)).T), p2, 1e-9, 1e-9) is None
    assert np.array_equal(quasi_decompose(t2, prev=p2, gauge="aligned").V2,
                          quasi_decompose(t2, prev=p2, gauge="svd").V2)
    # a jump (previous state far away): no Newton–Schulz from a far start, the SVD polar factors decide
    system.set_active("b", False)
    far, fard = at(0.0)
    pf = quasi_decompose(system.evaluate(far + 1.0, fard))
    tq = system.evaluate(q1, qdot1)
    lam = tq.A.dot(np.linalg.inv(np.linalg.cholesky(tq.M)).T)
    if aligned_basis(lam, pf, 1e-9, 1e-9) is None:
        assert np.array_equal(quasi_decompose(tq, prev=pf, gauge="aligned").V2,
                              quasi_decompose(tq, prev=pf, gauge="svd").V2)
    with pytest.raises(ValueError, match="gauge"):
        quasi_decompose(tq, prev=pf, gauge="qr")


def test_near_polar_is_the_svd_polar_factor():
    rng = np.random.default_rng(3)
    for p, k in [(38, 26), (26, 26), (12, 12), (7, 6), (3, 3), (1, 1)]:
        U = np.linalg.qr(rng.normal(size=(p, k)))[0]
        X = U + 1e-3 * rng.normal(size=(p, k))
        W, _, Zt = np.linalg.svd(X, full_matrices=False)
        P = near_polar(X)
        assert np.abs(P - W @ Zt).max() < 1e-14 and np.abs(P.T @ P - np.eye(k)).max() < 1e-14
        assert near_polar(0.3 * X) is None           # far from orthonormal: declined, not iterated
        if p == k:
            assert np.abs(polar(X) - W @ Zt).max() < 1e-14

