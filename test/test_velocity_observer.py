"""The model-based joint-velocity observer (qv_dynamics.observer) against independent references.

- its model acceleration q̈_m against Pinocchio's constrained dynamics (pin.constraintDynamics, a 3-D
  point contact of the Panda's tool) and ABA in free motion;
- its touch-down jump against the impulse map solved as the KKT system [M Aᵀ; A 0][q̇⁺; P] = [Mq̇⁻; 0];
- its noise gain against the closed form: on a point mass (exactly linear dynamics) the estimation error
  e = q̇ − v̂ and the disturbance estimate d̂ follow s' = F s + G n per axis (module doc, g₁ = l₁Δt,
  g₂ = l₂Δt), so the steady variance of e is P₀₀ of P = F P Fᵀ + σ² G Gᵀ (discrete Lyapunov equation);
- a constant model error (mass +10 % under a constant push) leaves no steady velocity error (d̂).
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
from models import PinReference, particle_xy, rel_err
from scipy.linalg import solve_discrete_lyapunov

from qv_dynamics import ConstrainedSystem
from qv_dynamics.observer import VelocityObserver

FRAME = "panda_hand_tcp"
DT = 1e-3


def _panda(axes=("x", "y", "z")):
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": FRAME, "axes": list(axes), "name": "contact", "active": False}])


def test_model_acceleration_matches_pinocchio_constrained_dynamics():
    rng = np.random.default_rng(5)
    sysm = _panda()
    obs = VelocityObserver(sysm)
    ref = PinReference(sysm, [("3d", FRAME)])
    worst = {"free": 0.0, "contact": 0.0}
    for _ in range(5):
        q = sysm.random_configuration(rng) * 0.6
        v, tau = rng.normal(size=sysm.nv) * 0.5, rng.normal(size=sysm.nv) * 5
        sysm.set_active("contact", False)
        qdd_free = pin.aba(sysm.model, sysm.model.createData(), q, v, tau)
        worst["free"] = max(worst["free"], rel_err(obs.acceleration(q, v, tau, None), qdd_free))
        sysm.set_active("contact", True)
        worst["contact"] = max(worst["contact"], rel_err(obs.acceleration(q, v, tau, None), ref(q, v, tau)[0]))
    print(f"\nq̈_m vs Pinocchio: free {worst['free']:.1e}, 3-D contact {worst['contact']:.1e}")
    assert worst["free"] < 1e-12 and worst["contact"] < 1e-12    # measured 8.8e-16 / 2.6e-15


def test_touch_down_applies_the_impulse_map():
    """At a touch-down v̂ jumps to N_c v̂⁻ (KKT reference); without the jump the estimate would keep
    (1 − g₁) of the normal velocity the plant has just lost."""
    rng = np.random.default_rng(2)
    sysm = _panda(("z",))
    q = sysm.random_configuration(rng) * 0.5
    v = rng.normal(size=sysm.nv) * 0.3
    tau = pin.computeGeneralizedGravity(sysm.model, sysm.model.createData(), q)
    obs = VelocityObserver(sysm, bandwidth_hz=5.0)
    obs.update(0.0, q, v, tau)
    sysm.set_active("contact", True)
    terms = sysm.evaluate(q, v)
    M, A = terms.M, terms.A
    K = np.block([[M, A.T], [A, np.zeros((1, 1))]])
    v_plus = np.linalg.solve(K, np.concatenate([M @ v, [0.0]]))[:sysm.nv]   # the plant's post-impact q̇
    vp = obs.update(DT, q, v_plus, tau)
    print(f"\nimpact: A v̂⁺ = {float((A @ vp)[0]):.1e} (A q̇⁻ = {float((A @ v)[0]):.2e}), "
          f"v̂⁺ vs KKT {rel_err(vp, v_plus):.1e}")
    assert obs.impacts == 1
    # measured 2.5e-4 and 1.9e-4: one sample of the model's prediction (the drift −Ȧq̇Δt), nothing else
    assert abs(float((A @ vp)[0])) < 1e-3 * abs(float((A @ v)[0]))
    assert rel_err(vp, v_plus) < 1e-3


def _particle(mass=2.0):
    return ConstrainedSystem.from_urdf(particle_xy(mass), gravity=[0, 0, -9.81])


def test_noise_gain_matches_the_discrete_lyapunov_closed_form():
    f_o, sigma, n = 5.0, 0.01, 40000
    sysm = _particle()
    obs = VelocityObserver(sysm, bandwidth_hz=f_o)
    rng = np.random.default_rng(0)
    v, q, err = np.array([0.1, -0.05]), np.zeros(2), []
    for k in range(n):
        tau = np.array([math.sin(7 * k * DT), math.cos(3 * k * DT)])   # the true (exact-model) push
        v = v + DT * tau / 2.0
        q = q + DT * v
        vh = obs.update(k * DT, q, v + rng.normal(0, sigma, 2), tau)
        if k > 2000:
            err.append(v - vh)
    w = 2 * math.pi * f_o
    g1, g2 = 2 * w * DT, w * w * DT
    F = np.array([[1 - g1, -(1 - g1) * DT], [g2, 1 - g2 * DT]])
    G = np.array([[-g1], [g2]])
    var = solve_discrete_lyapunov(F, sigma ** 2 * G @ G.T)[0, 0]
    measured = float(np.std(np.array(err)))
    print(f"\nobserver noise (5 Hz, σ = 0.01): std {measured:.3e} vs closed form {math.sqrt(var):.3e} "
          f"(raw σ {sigma})")
    assert abs(measured / math.sqrt(var) - 1) < 0.08   # ~600 independent samples: ±3 % sampling error
    assert measured < 0.25 * sigma


def test_constant_model_error_leaves_no_steady_velocity_error():
    """Plant 2.2 kg, model 2.0 kg (+10 %) under a constant push: the prediction is off by a constant
    acceleration, which d̂ absorbs (without it the error stays at δ(1 − g₁)/l₁, δ = 1/m − 1/m̂)."""
    res = {}
    for dist in (True, False):
        obs = VelocityObserver(_particle(2.0), bandwidth_hz=5.0, disturbance=dist)
        v, tau = np.zeros(2), np.array([1.0, 0.0])
        for k in range(3000):
            v = v + DT * tau / 2.2
            vh = obs.update(k * DT, np.zeros(2), v, tau)
        res[dist] = abs(float(v[0] - vh[0]))
    l1 = 4 * math.pi * 5.0
    e_ss = (1.0 / 2.0 - 1.0 / 2.2) * (1 - l1 * DT) / l1       # discrete: e = (1 − g₁)(e + δΔt)
    print(f"\nconstant model error: |e| with d̂ {res[True]:.1e}, without {res[False]:.3e} (closed form "
          f"δ(1 − g₁)/l₁ = {e_ss:.3e})")
    assert res[True] < 1e-6
    assert abs(res[False] / e_ss - 1) < 1e-3
