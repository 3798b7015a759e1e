"""Closed-loop tests of the projection-operator laws (paper `aghili-projection-operator` section 7):
PIDC (eq. 45–46), weighted minimum norm (eq. 49–50), constraint force PI (eq. 51–52), the hybrid law
(eq. 54) and passive joints (eq. 56–64). Run with ``pytest -s`` to see the measured figures."""
import numpy as np
import pytest
from control_helpers import COORDS, LAMBDA_D, Q0, Recorder, circle_reference, fit_rate, fivebar, panda_pair

from qv_control import (
    PassiveJointLaw,
    Reference,
    TrajectoryReference,
    UncontrollableError,
    check_controllability,
    make_law,
)
from qv_dynamics import simulate
from qv_dynamics.projection import pinv_rank

GP, GD = 25.0, 10.0  # critically damped: ë + 10ė + 25e = 0


def _pidc(model, name="pidc", **kw):
    params = dict(coordinates=COORDS, kp=GP, kd=GD, effort_limits=None)
    params.update(kw)
    law = make_law(name, model, **params)
    law.coords.anchor(Q0)
    return law


def _exact_error(t, e0, ed0):
    """Solution of ë + G_D ė + G_P e = 0 with G_D² = 4G_P (double root −G_D/2)."""
    a = GD / 2.0
    return np.outer(np.exp(-a * t), e0) + np.outer(t * np.exp(-a * t), ed0 + a * e0)


def test_pidc_error_dynamics_and_hybrid_force():
    res = {}
    for name in ("pidc", "pidc_force"):
        plant, model = panda_pair()
        law = _pidc(model, name=name)
        th0 = law.coords.evaluate(Q0, np.zeros(7)).theta.copy()
        ref = circle_reference(th0)
        tr = simulate(plant, Q0, np.zeros(7), law, t_final=1.0, dt=2e-3, reference=ref, hold_torque=False)
        assert tr.ok, tr.error
        th = np.array([law.coords.evaluate(q, v).theta for q, v in zip(tr.q, tr.qdot)])
        thd = np.array([law.coords.evaluate(q, v).theta_dot for q, v in zip(tr.q, tr.qdot)])
        e = th - np.array([ref(t).theta for t in tr.t])
        ed0 = thd[0] - ref(0.0).theta_dot
        dev = float(np.max(np.abs(e - _exact_error(tr.t, e[0], ed0))) / np.max(np.abs(e[0])))
        lam_err = float(np.nanmax(np.abs(tr.lam[:-1, 0] - LAMBDA_D)))
        res[name] = (dev, lam_err, float(np.linalg.norm(e[-1])))
    print(f"\n[PIDC] closed-loop theta error vs the exact solution of e'' + {GD:g}e' + {GP:g}e = 0: max deviation "
          f"{res['pidc'][0]:.2e} of |e(0)| (final |e| {res['pidc'][2]:.1e}); the constraint force is free "
          f"(lambda up to {res['pidc'][1] + abs(LAMBDA_D):.1f} N, not controlled)")
    print(f"[hybrid eq. 54] same motion error deviation {res['pidc_force'][0]:.2e}; |lambda - lambda_d| max "
          f"{res['pidc_force'][1]:.2e} N")
    assert res["pidc"][0] < 1e-4 and res["pidc_force"][0] < 1e-4
    assert res["pidc_force"][1] <= 1e-8
    assert res["pidc"][1] > 1.0


def test_weighted_minimum_norm():
    W = np.diag([4.0, 1.0, 2.0, 0.5, 3.0, 1.5, 0.25])
    out = {}
    for label, w in (("W = I", None), ("W = diag(4,1,2,.5,3,1.5,.25)", W)):
        plant, model = panda_pair()
        law = _pidc(model, W=w)
        th0 = law.coords.evaluate(Q0, np.zeros(7)).theta.copy()
        tr = simulate(plant, Q0, np.zeros(7), law, t_final=0.4, dt=1e-3, reference=circle_reference(th0))
        assert tr.ok, tr.error
        Wm = np.eye(7) if w is None else w
        Wmh = np.diag(1.0 / np.sqrt(np.diag(Wm)))
        gap, gap_other = 0.0, 0.0
        for i in range(0, len(tr.t) - 1, 20):
            terms = plant.evaluate(tr.q[i], tr.qdot[i])
            f = tr.tau[i]
            # every torque f + Aᵀy produces the same motion; brute-force least squares of ‖W^-½(f + Aᵀy)‖
            y = np.linalg.lstsq(Wmh @ terms.A.T, -(Wmh @ f), rcond=None)[0]
            fmin = float(np.linalg.norm(Wmh @ (f + terms.A.T @ y)))
            gap = max(gap, abs(float(np.linalg.norm(Wmh @ f)) - fmin) / fmin)
            other = W if w is None else np.eye(7)       # and in the *other* metric it is not minimal
            Omh = np.diag(1.0 / np.sqrt(np.diag(other)))
            y2 = np.linalg.lstsq(Omh @ terms.A.T, -(Omh @ f), rcond=None)[0]
            gap_other = max(gap_other,
                            float(np.linalg.norm(Omh @ f)) / float(np.linalg.norm(Omh @ (f + terms.A.T @ y2))) - 1)
        out[label] = (gap, gap_other)
    for label, (gap, other) in out.items():
        print(f"\n[PIDC minimum norm] {label}: ||f||_W exceeds the brute-force minimum over f + A^T y by at most "
              f"{gap:.1e} (relative); in the other metric it exceeds its minimum by up to {other:.1e}", end="")
    print()
    for gap, other in out.values():
        assert gap < 1e-10
        assert other > 1e-4


@pytest.mark.parametrize("kf,ki", [(0.5, 20.0), (0.2, 50.0)])
def test_force_pi_error_dynamics(kf, ki):
    """Hold the pose, push with an unmodelled impotent torque Aᵀ(q0)·5 N from t = 0.1 s: the measured force
    error must decay as (G_F + 1)ė + G_I e = 0, i.e. at the rate G_I/(1 + G_F)."""
    plant, model = panda_pair()
    law = _pidc(model, name="pidc_force", kf=kf, ki=ki)
    A0 = plant.evaluate(Q0, np.zeros(7)).A[0]
    rec = Recorder(law, disturbance=lambda t, q: (5.0 if t >= 0.1 else 0.0) * A0)
    th0 = law.coords.evaluate(Q0, np.zeros(7)).theta.copy()
    tr = simulate(plant, Q0, np.zeros(7), rec, t_final=0.8, dt=1e-3,
                  reference=Reference(theta=th0, lambda_=np.array([LAMBDA_D])))
    assert tr.ok, tr.error
    ef = np.abs(tr.lam[:-1, 0] - LAMBDA_D) * np.linalg.norm(A0)    # ‖e_f‖ = ‖Aᵀ(λ_d − λ)‖
    t = tr.t[:-1]
    win = (t > 0.13) & (ef > 1e-9 * ef.max())
    rate = fit_rate(t[win], ef[win])
    expected = ki / (1.0 + kf)
    moved = float(np.max(np.abs(tr.q - Q0)))
    print(f"\n[PIDC + force PI] G_F = {kf}, G_I = {ki}: fitted force-error decay rate {rate:.3f} 1/s vs "
          f"G_I/(G_F + 1) = {expected:.3f} ({abs(rate / expected - 1):.2%}); peak |e_f| {ef.max():.3f} N, "
          f"|e_f| at 0.8 s {ef[-1]:.1e} N; max joint motion caused {moved:.1e} rad")
    assert abs(rate / expected - 1.0) < 0.05
    assert moved < 1e-9


def test_force_pi_rejects_gain_that_destabilises_sampled_loop():
    from qv_control import GainError

    _, model = panda_pair()
    with pytest.raises(GainError, match="kf"):
        _pidc(model, name="pidc_force", kf=1.5, ki=10.0)


def test_passive_fivebar_tracks_tool_path_and_controllability():
    sysp, q0 = fivebar()
    sysm, _ = fivebar()
    coords = ["tip_a.x", "tip_a.z"]
    law = PassiveJointLaw(sysm, coords, actuated=["a1_joint", "b1_joint"], kp=100.0, kd=20.0, q0=q0,
                          effort_limits=None)
    p0 = law.coords.evaluate(q0, np.zeros(4)).theta.copy()
    R, w = 0.03, 3.0
    # a circle below the start (the start is 6 cm under the workspace boundary |tip - base| = l1 + l2)
    off = np.array([0.01, -0.005])  # start 11 mm off the path
    ref = TrajectoryReference(lambda t: p0 + off + R * np.array([np.sin(w * t), np.cos(w * t) - 1]),
                              lambda t: R * w * np.array([np.cos(w * t), -np.sin(w * t)]),
                              lambda t: -R * w * w * np.array([np.sin(w * t), np.cos(w * t)]))
    # velocity_projection="P": the paper's Euclidean q̇ ← Pq̇ (sec. 6); also avoids a slow multi-RHS triangular
    # solve in the kinetic-metric projection under a loaded multi-threaded OpenBLAS (reported to the lead)
    tr = simulate(sysp, q0, np.zeros(4), law, t_final=2.5, dt=1e-3, reference=ref, velocity_projection="P")
    assert tr.ok, tr.error
    e = np.array([np.linalg.norm(law.coords.evaluate(q, v).theta - ref(t).theta)
                  for t, q, v in zip(tr.t, tr.q, tr.qdot)])
    passive_tau = float(np.max(np.abs(tr.tau[:, [1, 3]])))
    # same motion as the fully actuated PIDC: P·τ_passive = P·τ_pidc at the same states
    full = make_law("pidc", fivebar()[0], coordinates=coords, kp=100.0, kd=20.0, effort_limits=None)
    gap = 0.0
    for i in range(0, len(tr.t) - 1, 100):
        st_ref = ref(tr.t[i])
        from qv_control import State

        tau_full = full.compute(State(tr.t[i], tr.q[i], tr.qdot[i]), st_ref)
        _, _, V2 = pinv_rank(sysp.evaluate(tr.q[i], tr.qdot[i]).A)
        gap = max(gap, float(np.linalg.norm(V2.T @ (tr.tau[i] - tau_full)) / np.linalg.norm(tau_full)))
    print(f"\n[passive five-bar] actuated a1, b1; tool circle r = {R * 100:.0f} cm: path error {e[0] * 1e3:.2f} mm "
          f"-> max {e[tr.t > 1.5].max() * 1e3:.2e} mm over the last second; max |tau| on passive joints "
          f"{passive_tau:.1e} N m; potent part equals the fully actuated PIDC's to {gap:.1e}; "
          f"max loop-closure error {tr.stats['max_constraint_error']:.1e} m")
    assert e[tr.t > 1.5].max() < 1e-4
    assert passive_tau < 1e-9
    assert gap < 1e-9
    # controllability (eq. 58/64): one motor cannot drive a 2-DoF mechanism
    with pytest.raises(UncontrollableError, match="a2_joint|b1_joint|b2_joint") as exc:
        check_controllability(sysm, ["a1_joint"], q0)
    with pytest.raises(UncontrollableError):
        PassiveJointLaw(sysm, coords, actuated=["a1_joint"], q0=q0)
    resid = check_controllability(sysm, ["a1_joint", "b1_joint"], q0)
    print(f"[passive five-bar] eq. 58 residual with a1, b1 actuated: {resid:.1e}; a1 alone rejected: {exc.value}")
