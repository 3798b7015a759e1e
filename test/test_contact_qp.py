"""The foot-force QP (qv_control.laws.contact_qp) on ANYmal C standing: the forces it picks balance the
robot (same base wrench as any λ of the motion), lie inside the inscribed friction pyramid with normal
force ≥ f_min, and equal an independent solution of the same QP by scipy's SLSQP; an impossible
request (unloading a foot the centre of mass needs) is reported as infeasible with its slack."""
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
