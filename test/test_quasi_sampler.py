"""QuasiSampler (Pinocchio's passes + one compiled call) against the reference path it replaces,
``system.evaluate`` + ``quasi_decompose(prev)``, sample by sample along a trajectory.

Tolerances: the sampler's rows A, Ȧq̇ come from the compiled frame Jacobians (J_w, J̇_w of ``data``, instead of
``pin.getFrameJacobian*``: qv_dynamics.kernels.frame), M and g from the composite inertias
of the Coriolis pass (CRBA's sums in another order, ``qv_dynamics.kernels.crb``) instead of ``crba`` and
``computeGeneralizedGravity``, and h = Cq̇ + g is summed in another order, so terms agree to rounding
(measured ≤ 1.1e-15 relative on the Panda and Talos); the
decomposition is the same kernel, so the state agrees to the terms' differences times their conditioning:
measured ≤ 4.0e-15 relative on the Panda, 1.2e-14 on Talos (Γ: M's last-bit differences, e.g. the total mass
summed in another order, through Q⁻¹ with cond(M) ≈ 9e4; fed the same M, the two agree exactly).
"""
from __future__ import annotations

import numpy as np
import pytest

from qv_dynamics import ConstrainedSystem, quasi_decompose
from qv_dynamics.errors import DimensionError
from qv_dynamics.kernels.loader import load
from qv_dynamics.quasi_sampler import QuasiSampler, SampledTerms

pytestmark = pytest.mark.skipif(load("qv_dynamics.kernels.quasi", "sample") is None,
                                reason="compiled kernels not cached (run qv warm)")

TERMS = ("M", "C", "g", "h", "A", "Adot_qdot", "phi")
STATE = ("Q", "Qinv", "Qdot", "v", "Lambda", "V1", "V2", "Gamma", "Gamma_v", "Gamma_xi_vr", "v_r", "W1",
         "u", "u_v", "u_xi", "xi", "lambda_", "constraint_force", "vr_dot", "kinetic_energy")
TOL_TERMS, TOL_STATE = 5e-15, 2e-14  # ~5x the measured worst


def _rel(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max(initial=0.0) / max(1.0, np.abs(b).max(initial=0.0)))


def _walk(system, steps=12, seed=0, switch=None):
    """Sampler and reference side by side along a 1 kHz walk; returns the worst relative errors and how many
    samples went through the kernel. ``switch(k, system)`` may change the active constraints at step k."""
    rng = np.random.default_rng(seed)
    q = system.random_configuration(rng)
    qd = rng.standard_normal(system.nv)
    system.anchor(q)
    sampler, ref_prev, worst, fast = QuasiSampler(system), None, {}, 0
    for k in range(steps):
        if switch is not None:
            switch(k, system)
        q = system.integrate(q, 1e-3 * qd)
        qd = qd + 1e-3 * rng.standard_normal(system.nv)
        tau = rng.standard_normal(system.nv)
        terms, qs = sampler.sample(q, qd, tau)
        fast += isinstance(terms, SampledTerms)
        ref_terms = system.evaluate(q, qd)
        ref = ref_prev = quasi_decompose(ref_terms, tau=tau, prev=ref_prev)
        assert qs.rank == ref.rank and qs.rank_changed == ref.rank_changed
        for name in TERMS:
            worst[name] = max(worst.get(name, 0.0), _rel(getattr(terms, name), getattr(ref_terms, name)))
        for name in STATE:
            worst[name] = max(worst.get(name, 0.0), _rel(getattr(qs, name), getattr(ref, name)))
        worst["condition"] = max(worst.get("condition", 0.0), abs(qs.condition / ref.condition - 1.0))
    return worst, fast


def _check(worst):
    bad = {k: v for k, v in worst.items() if v > (TOL_TERMS if k in TERMS else TOL_STATE)}
    assert not bad, bad


@pytest.mark.parametrize("name, floating, cons", [
    ("panda", False, [{"type": "point_contact", "frame": "panda_hand"}]),
    ("panda", False, [{"type": "weld", "frame": "panda_hand", "axes": ["z", "rx"]},
                      {"type": "loop_closure", "frame_a": "panda_link7", "frame_b": "panda_link3", "axes": ["x"]}]),
    ("panda", False, []),
    ("talos", True, [{"type": "weld", "frame": "left_sole_link"}, {"type": "weld", "frame": "right_sole_link"}]),
])
def test_sampler_equals_evaluate_and_quasi_decompose(name, floating, cons):
    system = ConstrainedSystem.from_urdf(name, floating_base=floating, constraints=cons)
    worst, fast = _walk(system)
    _check(worst)
    assert fast == 11  # every sample but the first (no previous basis) through the kernel


def test_custom_constraint_takes_the_reference_path():
    custom = {"type": "custom", "rows": 1, "name": "c",
              "function": lambda q, qd: (np.array([np.sin(q[0]) * q[1]]),
                                         np.array([[np.cos(q[0]) * q[1], np.sin(q[0]), 0, 0, 0, 0, 0]]),
                                         np.array([-np.sin(q[0]) * q[1] * qd[0] ** 2
                                                   + 2 * np.cos(q[0]) * qd[0] * qd[1]]))}
    system = ConstrainedSystem.from_urdf("panda", constraints=[custom])
    worst, fast = _walk(system, steps=4)
    _check(worst)
    assert fast == 0


def test_a_contact_switch_reseeds_then_returns_to_the_kernel():
    def switch(k, system):
        if k == 5:
            system.set_active("contact", False)
        if k == 8:
            system.set_active("contact", True)

    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": "panda_hand", "name": "contact"}])
    worst, fast = _walk(system, switch=switch)
    _check(worst)
    assert fast == 12 - 3  # the first sample and the two after a switch take the reference path


def test_the_previous_state_survives_the_next_sample():
    """A law reads the previous sample's state during the next one (prev, a carried integral torque)."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    rng = np.random.default_rng(1)
    q, qd = system.random_configuration(rng), rng.standard_normal(7)
    sampler = QuasiSampler(system)
    sampler.sample(q, qd)
    _, qs1 = sampler.sample(q, qd)
    keep = {k: np.copy(getattr(qs1, k)) for k in ("Q", "V2", "Gamma_v", "v_r")}
    terms2, qs2 = sampler.sample(system.integrate(q, 1e-3 * qd), qd + 0.1)
    assert qs2 is not qs1 and isinstance(terms2, SampledTerms)
    for k, v in keep.items():
        assert np.array_equal(getattr(qs1, k), v), k


def test_bad_tau_is_refused_where_it_enters():
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    q, qd = system.neutral(), np.zeros(7)
    sampler = QuasiSampler(system)
    sampler.sample(q, qd)
    with pytest.raises(DimensionError, match="tau"):
        sampler.sample(q, qd, np.zeros(6))


def test_a_frame_constraint_with_rows_of_its_own_takes_the_reference_path():
    """A subclass that changes A (here: the point contact's rows scaled by 2) is not served by the kernel's frame
    rows; the sampler's result equals the two-call path's (which uses the subclass's rows)."""
    from qv_dynamics.constraints.point_contact import PointContact

    class Scaled(PointContact):
        def jacobian(self, model, data, q):
            return 2.0 * super().jacobian(model, data, q)

        def drift(self, model, data, q, qdot, mode):
            return 2.0 * super().drift(model, data, q, qdot, mode)

    system = ConstrainedSystem.from_urdf("panda")
    c = Scaled(frame="panda_hand")
    c.name = "scaled"
    system.add_constraint(c)
    worst, fast = _walk(system, steps=4)
    _check(worst)
    assert fast == 0


@pytest.mark.parametrize("name, floating, cons", [
    ("panda", False, [{"type": "point_contact", "frame": "panda_hand"}]),
    ("talos", True, [{"type": "weld", "frame": "left_sole_link"}, {"type": "weld", "frame": "right_sole_link"}]),
])
def test_terms_alone_equal_evaluate_and_anchor_as_it_does(name, floating, cons):
    """``QuasiSampler.evaluate`` (the projection laws' sample) against ``system.evaluate`` on a twin system;
    the first call anchors the constraints (Φ = 0 there), as ``evaluate`` does."""
    system = ConstrainedSystem.from_urdf(name, floating_base=floating, constraints=cons)
    twin = ConstrainedSystem.from_urdf(name, floating_base=floating, constraints=cons)
    rng = np.random.default_rng(2)
    q, qd = system.random_configuration(rng), rng.standard_normal(system.nv)
    sampler = QuasiSampler(system)
    for k in range(4):
        terms, ref = sampler.evaluate(q, qd), twin.evaluate(q, qd)
        assert isinstance(terms, SampledTerms)
        if k == 0:
            assert np.abs(terms.phi).max() < 1e-15  # anchored here (a weld's log3(RRᵀ) rounds to ~3e-16)
        worst = {n: _rel(getattr(terms, n), getattr(ref, n)) for n in TERMS}
        assert max(worst.values()) <= TOL_TERMS, worst
        q, qd = system.integrate(q, 1e-3 * qd), qd + 1e-3 * rng.standard_normal(system.nv)
