"""The simulator's compiled path against its numpy reference path.

``Stepper(system)`` evaluates the projection dynamics (eq. 22–25), the kinetic-metric velocity projection
N_c q̇ and the RK4 bookkeeping in numba kernels (qv_dynamics.kernels.sim, its dense algebra in
qv_dynamics.kernels.sim_linalg, driven by qv_dynamics.kernels.sim_fastpath); ``Stepper(system,
compiled=False)`` is the reference (projection.direct_dynamics_rank, impact.m_projection, numpy RK4). Same
equations, rank rule and factorization types, so the two agree to rounding: the tolerances below are a few
times the largest difference measured over the states drawn (stated per assertion). The reference path is
itself checked against Pinocchio and closed forms in test_projection.py, test_sim.py, test_dynamics_*.py.
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import NonFiniteError
from qv_dynamics.impact import m_projection
from qv_dynamics.kernels import sim as kernels
from qv_dynamics.kernels.loader import STATUS, load
from qv_dynamics.projection import direct_dynamics_rank
from qv_dynamics.sim import Stepper
from qv_dynamics.sim.bimanual import bimanual_system, nominal_q
from qv_dynamics.sim.scenarios import PANDA_Q0, slider_crank
from qv_dynamics.sim.stepper import KERNELS

POINT = {"type": "point_contact", "frame": "panda_hand_tcp", "name": "point"}


def _systems():
    """(name, system, q sampler): Panda + 3-D point contact, the same with the contact listed twice (6 rows,
    rank 3: redundant), the free Panda (no row), the slider-crank (1 row through singular poses) and the
    two-arm box (free-flyer, two 6-D welds, nq ≠ nv)."""
    panda = ConstrainedSystem.from_urdf("panda", constraints=[POINT])
    twice = ConstrainedSystem.from_urdf("panda", constraints=[POINT, dict(POINT, name="again")])
    free = ConstrainedSystem.from_urdf("panda")
    arm = lambda rng: PANDA_Q0 + 0.3 * rng.standard_normal(7)  # noqa: E731
    box = bimanual_system()
    q_box = nominal_q(box)
    return [("panda_point", panda, arm), ("panda_redundant", twice, arm), ("panda_free", free, arm),
            ("slider_crank", slider_crank().system, lambda rng: rng.uniform(-np.pi, np.pi, 2)),
            ("bimanual", box, lambda rng: pin.integrate(box.model, q_box, 0.05 * rng.standard_normal(box.nv)))]


@pytest.mark.parametrize("name,system,sample", _systems(), ids=lambda x: x if isinstance(x, str) else "")
def test_kernels_equal_the_reference_formulas(name, system, sample):
    """projection_accel = direct_dynamics_rank (q̈, λ, rank) and m_project = m_projection (N_c q̇) at random
    states; also ‖A N_c q̇‖ and ½q̇ᵀMq̇ of m_project. Largest differences measured over the five systems,
    relative to the largest entry (or 1): q̈ 2.0e-14, λ 2.9e-14, N_c q̇ 1.9e-14, ‖A N_c q̇‖ 6.3e-15 (bimanual,
    nv = 20, 12 rows)."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        q = sample(rng)
        system.anchor(q, force=True)  # the contacts hold where the frames are: Φ(q) = 0
        v = rng.standard_normal(system.nv)
        tau = 10.0 * rng.standard_normal(system.nv)
        t = system.evaluate(q, v, coriolis=False)
        qdd_ref, _, lam_ref, r_ref = direct_dynamics_rank(t, tau)
        qdd, lam = np.empty(system.nv), np.empty(t.A.shape[0])
        status, r = kernels.projection_accel(t.M.copy(), t.h, tau, t.A, t.Adot_qdot, 1e-9, 1e-9, qdd, lam)
        assert status == kernels.OK and r == r_ref
        assert np.abs(qdd - qdd_ref).max() <= 1e-13 * max(1.0, np.abs(qdd_ref).max())
        assert np.abs(lam - lam_ref).max(initial=0.0) <= 1e-13 * max(1.0, np.abs(lam_ref).max(initial=0.0))
        out = np.empty(system.nv)
        status, verr, kinetic = kernels.m_project(t.M.copy(), t.A, v, 1e-9, 1e-9, out)
        ref = m_projection(t.M, t.A, v)[0]
        assert status == kernels.OK
        assert np.abs(out - ref).max() <= 1e-13 * max(1.0, np.abs(v).max())
        assert verr <= 3e-14 * max(1.0, np.abs(v).max())
        assert kinetic == pytest.approx(0.5 * ref @ t.M @ ref, rel=1e-13)


@pytest.mark.parametrize("name,system,sample", _systems(), ids=lambda x: x if isinstance(x, str) else "")
def test_compiled_step_equals_the_reference_step(name, system, sample):
    """One 1 ms RK4 step + correction from the same corrected state, τ held: q, q̇ and the diagnostics of the
    two paths agree (measured over the five systems: q bitwise, q̇ 4.4e-16, λ 1.8e-14, kinetic energy 2.2e-16
    and work 2.9e-15 relative); then 50 steps each on its own: q 8.9e-16, q̇ 8.9e-16."""
    rng = np.random.default_rng(5)
    q0 = sample(rng)
    system.anchor(q0, force=True)
    fast, ref = Stepper(system, compiled=True), Stepper(system, compiled=False)
    q, v = ref.correct(q0, 0.3 * rng.standard_normal(system.nv))
    tau = pin.computeGeneralizedGravity(system.model, system.data, q) + rng.standard_normal(system.nv)
    qf, vf = fast.step(q.copy(), v.copy(), tau, 1e-3)
    qr, vr = ref.step(q, v, tau, 1e-3)
    assert np.abs(qf - qr).max() <= 1e-15 and np.abs(vf - vr).max() <= 2e-15
    assert fast.last.rank == ref.last.rank
    assert np.abs(fast.last.lam - ref.last.lam).max(initial=0.0) <= 1e-13
    assert fast.phi_norm <= 1e-12 and fast.velocity_error <= 1e-12
    assert fast.kinetic == pytest.approx(ref.kinetic, rel=1e-15, abs=1e-300)
    assert fast.work_increment == pytest.approx(ref.work_increment, rel=1e-14, abs=1e-300)
    for _ in range(50):
        qf, vf = fast.step(qf, vf, tau, 1e-3)
        qr, vr = ref.step(qr, vr, tau, 1e-3)
    assert np.abs(qf - qr).max() <= 5e-15 and np.abs(vf - vr).max() <= 5e-15
    assert fast.phi_norm <= 1e-12


def test_start_of_step_reuse_is_bitwise_the_fresh_evaluation():
    """The first RK4 stage reuses M, A, ‖Φ‖ of the previous correction when handed back the same q: the step
    is bitwise the one of a stepper that never corrected (evaluated afresh); a q changed in place after the
    correction is evaluated afresh too."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[POINT])
    tau = pin.computeGeneralizedGravity(system.model, system.data, PANDA_Q0)
    a = Stepper(system, compiled=True)
    q0, v0 = a.correct(PANDA_Q0, np.linspace(-0.3, 0.3, 7))
    qa, va = a.step(q0, v0, tau, 1e-3)                  # reuses the correction's M(q0), A(q0)
    b = Stepper(system, compiled=True)
    qb, vb = b.step(q0.copy(), v0.copy(), tau, 1e-3)    # nothing to reuse
    assert np.array_equal(qa, qb) and np.array_equal(va, vb) and np.array_equal(a.last.lam, b.last.lam)
    assert np.array_equal(a.last.M, b.last.M) and a.last.phi_norm == b.last.phi_norm
    qa[3] += 1e-3                                       # moved in place: the reuse must not apply
    qa2, va2 = a.step(qa, va, tau, 1e-3)
    qb2, vb2 = Stepper(system, compiled=True).step(qa.copy(), va.copy(), tau, 1e-3)
    assert np.array_equal(qa2, qb2) and np.array_equal(va2, vb2)


def test_compiled_path_reports_bad_states():
    """A non-finite state or torque is a NonFiniteError naming it, not a crash in a kernel; a mass matrix
    that is not positive definite and a singular M_c are reported by status."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[POINT])
    st = Stepper(system, compiled=True)
    q, v = st.correct(PANDA_Q0, np.zeros(7))
    with pytest.raises(NonFiniteError, match="qdot"):
        st.step(q, np.full(7, np.nan), np.zeros(7), 1e-3)
    with pytest.raises(NonFiniteError, match="tau"):
        st.step(q, v, np.full(7, np.inf), 1e-3)
    with pytest.raises(NonFiniteError, match="non-finite"), np.errstate(over="ignore", invalid="ignore"):
        st.step(q, v, np.full(7, 1e300), 1e-3)  # finite, but the state overflows inside the step
    M = -np.eye(7)
    A = np.ones((1, 7))
    status, _ = kernels.projection_accel(M, np.zeros(7), np.zeros(7), A, np.zeros(1), 1e-9, 1e-9,
                                         np.empty(7), np.empty(1))
    assert status == kernels.NOT_PD
    assert kernels.m_project(M, A, np.ones(7), 1e-9, 1e-9, np.empty(7))[0] == kernels.NOT_PD


def test_warm_cache_is_detected_and_used_by_default():
    """setup.sh warmed the kernels' disk cache for this checkout: a default Stepper takes the compiled path
    (``compiled`` True); the KKT baseline and compiled=False never do."""
    system = slider_crank().system
    assert load(KERNELS) is kernels, STATUS[KERNELS]  # cold or stale: scripts/setup.sh warms it
    assert Stepper(system).compiled
    assert not Stepper(system, compiled=False).compiled and not Stepper(system, method="kkt_baumgarte").compiled
