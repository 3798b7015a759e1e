"""The foot-force QP (qv_control.laws.contact_qp) on ANYmal C standing: the forces it picks balance the
robot (same base wrench as any λ of the motion), lie inside the inscribed friction pyramid with normal
force ≥ f_min, and equal an independent solution of the same QP by scipy's SLSQP; an impossible
request (unloading a foot the centre of mass needs) is reported as infeasible with its slack.

Its compiled twin (qv_control.kernels.contact_qp: the rows in the tick, a Goldfarb–Idnani dual active set with
QR updates) equals quadprog within 1e-9 on random strictly convex QPs, feasible and inconsistent (then the slack
QP, cond ~1e12, as the law solves it), and on the legged scene's QPs, feasible and infeasible."""
import numpy as np
import pytest
from scipy.optimize import minimize

from qv_control.laws.contact_qp import ContactForceQP, cone_margins
from qv_control.laws.internal_force import internal_force_basis
from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import DimensionError, QVError
from qv_dynamics.plants.mujoco_legged import ANYMAL_C_STANDING, standing_configuration

FEET = ["LF_FOOT", "RF_FOOT", "LH_FOOT", "RH_FOOT"]


@pytest.fixture(scope="module")
def stance():
    system = ConstrainedSystem.from_urdf("anymal_c", floating_base=True,
                                         constraints=[{"type": "point_contact", "frame": f, "name": f} for f in FEET])
    q = standing_configuration(system, joints=ANYMAL_C_STANDING)
    q[0] += 0.03                                   # body shifted forward: uneven load
    terms = system.evaluate(q, np.zeros(18))
    mask = np.r_[np.zeros(6, bool), np.ones(12, bool)]
    basis = internal_force_basis(terms.A, mask)
    # a λ of the static motion (q̈ = 0): the passive rows A_pᵀλ = −h_p, min-norm particular solution
    lam_p = np.linalg.lstsq(terms.A[:, :6].T, -terms.h[:6], rcond=None)[0]
    lam0, _ = basis.split(lam_p)
    return terms, basis, lam0


def _scipy_reference(qp, lam0, E):
    """The same QP (cost and pyramid rows written out again) solved by SLSQP."""
    W = np.diag([qp.w_t, qp.w_t, qp.w_n])
    mu = qp.cone_safety * qp.mu / np.sqrt(2)

    def forces(z):
        return -(lam0 + E @ z).reshape(-1, 3)

    def cost(z):
        f = forces(z)
        return 0.5 * np.einsum("ij,jk,ik->", f, W, f) + 0.5 * qp.eps * z @ z

    def ineq(z):
        f = forces(z)
        return np.concatenate([f[:, 2] - qp.f_min, mu * f[:, 2] - f[:, 0], mu * f[:, 2] + f[:, 0],
                               mu * f[:, 2] - f[:, 1], mu * f[:, 2] + f[:, 1]])

    r = minimize(cost, np.zeros(E.shape[1]), constraints=[{"type": "ineq", "fun": ineq}], method="SLSQP",
                 options={"ftol": 1e-14, "maxiter": 500})
    assert r.success
    return r.x


def test_qp_balances_and_respects_cones(stance):
    terms, basis, lam0 = stance
    qp = ContactForceQP(mu=0.8, f_min=10.0)
    res = qp.solve(lam0, basis.E)
    assert res.feasible
    # same base wrench as the particular λ: only internal forces changed
    assert np.allclose(terms.A[:, :6].T @ res.lam, terms.A[:, :6].T @ lam0, atol=1e-9)
    assert np.all(res.normal >= 10.0 - 1e-9)
    assert np.all(np.abs(res.forces[:, :2]) <= 0.9 * 0.8 / np.sqrt(2) * res.normal[:, None] + 1e-9)
    assert np.all(res.margins >= 0.1 * 0.8 * res.normal - 1e-9)        # (1 − s)μ f_n at least
    assert np.allclose(res.margins, cone_margins(res.forces, np.tile([0, 0, 1.0], (4, 1)), 0.8))
    weight = 9.81 * sum(Y.mass for Y in ConstrainedSystem.from_urdf("anymal_c").model.inertias)
    assert abs(res.normal.sum() - weight) < 1e-6 * weight      # static: the feet carry the weight
    z_ref = _scipy_reference(qp, lam0, basis.E)
    assert np.abs(res.z - z_ref).max() < 1e-4 * max(1.0, np.abs(z_ref).max())
    # minimum-norm λ (z = 0) had large tangential forces; the QP removes most of them
    ft0 = np.linalg.norm(lam0.reshape(4, 3)[:, :2], axis=1)
    ft = np.linalg.norm(res.forces[:, :2], axis=1)
    assert ft.max() < 0.5 * ft0.max()


def test_unloading_ramp_and_infeasible_report(stance):
    terms, basis, lam0 = stance
    qp = ContactForceQP(mu=0.8, f_min=10.0)
    res = qp.solve(lam0, basis.E, f_max=[np.inf, np.inf, np.inf, 60.0])
    assert res.feasible and res.normal[3] <= 60.0 + 1e-9
    res = qp.solve(lam0, basis.E, f_max=[np.inf, np.inf, np.inf, 0.0])   # RH lifted, CoM not over LF-RF-LH
    assert not res.feasible and res.slack > 1.0 and qp.infeasible == 1


def test_bad_input():
    with pytest.raises(QVError, match="mu"):
        ContactForceQP(mu=-1)
    with pytest.raises(DimensionError, match="three per foot"):
        ContactForceQP().solve(np.zeros(4), np.zeros((4, 1)))


def _compiled(name):
    from qv_dynamics.kernels.loader import STATUS, load

    fn = load("qv_control.kernels.contact_qp", name)
    if fn is None:
        pytest.skip(f"compiled kernels not available: {STATUS}")
    return fn


def _slack_qp(G, a, C, b, weight=1e6):
    """The law's slack QP of an inconsistent set (qv_control.laws.contact_qp): one slack on every row, s ≥ 0."""
    s = G.shape[0]
    G2 = np.zeros((s + 1, s + 1))
    G2[:s, :s], G2[s, s] = G, weight
    C2 = np.vstack([np.hstack([C, np.ones((C.shape[0], 1))]), np.eye(1, s + 1, s)])
    return G2, np.append(a, 0.0), C2, np.append(b, 0.0)


def test_compiled_solver_equals_quadprog_on_random_problems():
    """200 random QPs min ½xᵀGx − aᵀx, Cx ≥ b (2–8 variables, up to 24 rows): where quadprog solves, the compiled
    solver reports consistent constraints and the same x within 1e-9 (relative to max(1, |x|)); where quadprog
    finds them inconsistent, so does it, and both solve the slack QP to the same x."""
    import quadprog

    solve = _compiled("solve_qp")
    rng = np.random.default_rng(11)
    worst, counts = {"feasible": 0.0, "inconsistent": 0.0}, {"feasible": 0, "inconsistent": 0}
    for trial in range(200):
        n, p = int(rng.integers(2, 9)), int(rng.integers(1, 25))
        B = rng.standard_normal((n, n))
        G = B.T @ B + 0.1 * np.eye(n)      # cond(G) up to ~1e3; the slack QP's up to ~1e7
        a, C = rng.standard_normal(n), rng.standard_normal((p, n))
        x0 = rng.standard_normal(n)
        b = C @ x0 - rng.uniform(0.0, 1.0, p) if trial % 2 == 0 else rng.uniform(0.5, 2.0, p)
        if trial % 2:   # opposite rows c·x ≥ b₁ > 0, −c·x ≥ b₂ > 0: inconsistent (with two rows or more)
            h = p // 2
            C[h:2 * h] = -C[:h]
        x = np.empty(n)
        try:
            ref = quadprog.solve_qp(G, a, C.T, b, 0)[0]
        except ValueError:
            ref = None
        ok = solve(G, a, np.ascontiguousarray(C), b, x)
        assert ok == (ref is not None), trial
        kind = "feasible" if ref is not None else "inconsistent"
        if ref is None:
            G2, a2, C2, b2 = _slack_qp(G, a, C, b)
            ref = quadprog.solve_qp(G2, a2, C2.T, b2, 0)[0]
            x = np.empty(n + 1)
            assert solve(G2, a2, C2, b2, x)
        counts[kind] += 1
        worst[kind] = max(worst[kind], float(np.abs(x - ref).max() / max(1.0, np.abs(ref).max())))
    print(f"\ncompiled Goldfarb–Idnani vs quadprog, {counts}: worst {worst}")
    assert counts["feasible"] > 50 and counts["inconsistent"] > 20
    assert max(worst.values()) < 1e-9


@pytest.mark.parametrize("f_max", [None, [np.inf, np.inf, np.inf, 60.0], [np.inf, np.inf, np.inf, 0.0],
                                   [50.0, np.inf, 80.0, 5.0]])
def test_compiled_foot_force_qp_equals_the_law_s(stance, f_max):
    """The tick's QP (rows and cost from E, the slack QP when inconsistent) against ContactForceQP.solve on the
    same λ₀ and E: z within 1e-9 (relative), the same feasibility and slack."""
    from qv_control.kernels import layout

    foot_forces = _compiled("foot_forces")
    terms, basis, lam0 = stance
    qp = ContactForceQP(mu=0.8, f_min=10.0)
    res = qp.solve(lam0, basis.E, f_max=f_max)
    faces, W = qp._faces(np.tile([0.0, 0.0, 1.0], (4, 1)))
    par = np.zeros(layout.NPAR)
    par[[layout.P_QP_FMIN, layout.P_QP_EPS, layout.P_QP_SLACK]] = qp.f_min, qp.eps, qp.slack_weight
    f_hi = np.full(4, np.inf) if f_max is None else np.asarray(f_max, float)
    z = np.empty(basis.size)
    feasible, slack = foot_forces(lam0, np.ascontiguousarray(basis.E), np.hstack([faces.reshape(4, 18),
                                  W.reshape(4, 9)]), f_hi, par, z)
    assert bool(feasible) == res.feasible
    assert np.abs(z - res.z).max() <= 1e-9 * max(1.0, np.abs(res.z).max())
    assert abs(slack - res.slack) <= 1e-9 * max(1.0, res.slack)
