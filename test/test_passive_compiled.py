"""The laws with passive joints on their whole compiled tick (qv_control.kernels.tick; the projector and the
internal-force basis of qv_control.kernels.internal, no SVD; the foot-force QP of qv_control.kernels.contact_qp)
against their numpy reference path (``compiled=False``: SVDs, quadprog): two Pandas holding a free box (its six
joints passive, the internal-force PI on a one-sample-old λ) and ANYmal C on its feet (the base passive, the
friction-cone QP), on closed-loop states, random states with resets and a plan that lifts a foot. The internal
forces are compared as E z and the commanded λ (each path has its own basis E of the internal forces)."""
from __future__ import annotations

import numpy as np
import pytest
from control_helpers import numpy_ticks

from qv_control.laws import make_law
from qv_dynamics.kernels.loader import STATUS, load
from qv_dynamics.state import Reference, State


@pytest.fixture(scope="module", autouse=True)
def compiled():
    if load("qv_control.kernels.tick", "projection_law_tick") is None:
        pytest.skip(f"compiled kernels not available: {STATUS}")


def _bimanual(non_internal="raise", **extra):
    from qv_control.demo.bimanual import BimanualConfig, BoxPlan, coordinates
    from qv_dynamics.sim.bimanual import arm_joints, bimanual_system, nominal_q

    system = bimanual_system()
    q0 = nominal_q(system)
    mask = np.zeros(system.nv, bool)
    mask[[system.joint_v_index(j) for j in arm_joints()]] = True
    cfg = BimanualConfig(conditions="ideal")
    plan = BoxPlan(cfg, system, q0, mask)
    gains = dict(coordinates=coordinates(plan.R0), actuated=arm_joints(), kp=cfg.kp, kd=cfg.kd, kf=cfg.kf,
                 ki=cfg.ki, internal_tol=cfg.internal_tol, non_internal=non_internal, **extra)
    return system, q0, plan, make_law("passive", system, **gains), make_law("passive", system, compiled=False,
                                                                               **gains)


def _compare(fast, slow, states, refs, resets=()):
    worst = {"tau": 0.0, "internal_force": 0.0, "lambda_motion": 0.0}
    for k, (s, r) in enumerate(zip(states, refs)):
        if k in resets:
            fast.reset()
            slow.reset()
        a, b = fast.compute(s, r), slow.compute(s, r)
        worst["tau"] = max(worst["tau"], float(np.abs(a - b).max() / np.abs(b).max()))
        for f in ("internal_force", "lambda_motion"):
            x, y = fast.last[f], slow.last[f]
            worst[f] = max(worst[f], float(np.abs(x - y).max() / max(1.0, np.abs(y).max())))
    return worst


def test_two_arms_compiled_equals_reference_on_a_closed_loop_and_random_states():
    """Two Pandas and a box: the simulator's closed loop (the reference law, λ read one sample late), replayed
    through both paths, then random states around it with resets; τ, E z and λ_m within 1e-9."""
    from qv_dynamics import simulate

    system, q0, plan, fast, slow = _bimanual()
    calls = numpy_ticks(fast)
    tr = simulate(system, q0, np.zeros(system.nv), slow, t_final=0.05, dt=1e-3, reference=plan.reference)
    assert tr.ok, tr.error
    slow.reset()
    states = [State(t=float(tr.t[i]), q=tr.q[i], qdot=tr.qdot[i], lambda_meas=tr.lam[i - 1] if i else None)
              for i in range(len(tr.t) - 1)]
    rng = np.random.default_rng(2)
    for k in range(20):
        s = states[k]
        states.append(State(t=1.0 + 1e-3 * k, q=system.integrate(s.q, 0.01 * rng.standard_normal(system.nv)),
                            qdot=0.1 * rng.standard_normal(system.nv), lambda_meas=s.lambda_meas))
    refs = [plan.reference(min(s.t, 0.05)) for s in states]
    worst = _compare(fast, slow, states, refs, resets=(len(tr.t) - 1 + 10,))
    print(f"\ntwo arms: {worst}, numpy ticks {calls[0]} of {len(states)}")
    assert max(worst.values()) < 1e-9
    assert calls[0] <= 3


def test_two_arms_projected_lambda_d_is_counted_alike():
    """non_internal="project": a λ_d with a non-internal part (lifting the box) is projected and counted the same
    on both paths, with the same torques."""
    system, q0, plan, fast, slow = _bimanual(non_internal="project")
    rng = np.random.default_rng(5)
    states = [State(t=1e-3 * k, q=q0, qdot=np.zeros(system.nv)) for k in range(12)]
    refs = []
    for k in range(12):
        r = plan.reference(0.0)
        refs.append(Reference(theta=r.theta, theta_dot=r.theta_dot, theta_ddot=r.theta_ddot,
                              lambda_=r.lambda_ + (3.0 * rng.standard_normal(12) if k % 3 else 0.0)))
    worst = _compare(fast, slow, states, refs)
    assert max(worst.values()) < 1e-9
    assert fast.counters() == pytest.approx(slow.counters(), rel=1e-9) and fast.counters()["lambda_d_projected"] >= 7


def _anymal(plan=None):
    from qv_control.demo.anymal import AnymalConfig, make_system
    from qv_dynamics.plants.mujoco_legged import standing_configuration

    cfg = AnymalConfig()
    laws = []
    for compiled in (True, False):
        system = make_system(cfg)
        laws.append(make_law("legged", system, plan=plan, compiled=compiled))
    return system, standing_configuration(system, joints=cfg.posture), laws


def test_legged_compiled_equals_reference_standing_with_resets():
    """ANYmal C on four feet (hold-still plan), states perturbed 0.02 rad and 0.01 rad/s, a reset every 15 ticks:
    τ and the commanded λ within 1e-9; the QP's feasibility and the solve counts alike."""
    system, q0, (fast, slow) = _anymal()
    calls = numpy_ticks(fast)
    rng = np.random.default_rng(0)
    worst = 0.0
    for k in range(60):
        if k and k % 15 == 0:
            fast.reset()
            slow.reset()
        q = q0.copy()
        q[7:] += 0.02 * rng.standard_normal(12)
        s = State(t=1e-3 * k, q=q, qdot=0.01 * rng.standard_normal(18))
        a, b = fast.compute(s), slow.compute(s)
        worst = max(worst, float(np.abs(a - b).max() / np.abs(b).max()),
                    float(np.abs(fast.last["lambda_cmd"] - slow.last["lambda_cmd"]).max()
                          / np.abs(slow.last["lambda_cmd"]).max()))
        assert fast.last["qp_feasible"] == slow.last["qp_feasible"]
    print(f"\nlegged standing: worst {worst:.1e}, numpy ticks {calls[0]} of 60")
    assert worst < 1e-9
    assert calls[0] <= 5
    fast._ct.sync()
    assert (fast.qp.solves, fast.qp.infeasible) == (slow.qp.solves, slow.qp.infeasible)


def _slack_precision(law) -> float:
    """The precision (N) to which the slack QP of an infeasible tick determines the commanded λ: its cost is
    ~1e6·slack² (~1e11 here) while the cost's curvature along the free directions of z is the force weights'
    (≥ w_n = 0.05), so x moves by √(ε·cost/w_n) without the cost changing in double precision; quadprog and any
    other solver are held to that, not to rounding."""
    cost = 0.5 * law.qp.slack_weight * law.last["qp_slack"] ** 2
    return float(np.sqrt(np.finfo(float).eps * cost / law.qp.w_n))


def test_legged_compiled_equals_reference_through_a_step():
    """The model's plan (a front foot lifted and set down 10 cm ahead, its load ramped out and in): the contact
    switches take the numpy path, the ticks between them the compiled one (the plan's caps and reference handed
    in per tick). τ and the commanded λ within 1e-9 of the reference path at every feasible tick; where the QP is
    infeasible (the load ramped out of a foot the centre of mass still needs: the slack QP), the same slack within
    1e-9 and λ within the precision of that QP (:func:`_slack_precision`; the solver itself equals quadprog within
    1e-9 on the same inputs: test_contact_qp.py)."""
    from pathlib import Path

    import yaml

    spec = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "anymal_model.yaml").read_text())["plan"]
    system, q0, (fast, slow) = _anymal(plan=spec)
    calls = numpy_ticks(fast)
    T = max(s.t_loaded for s in fast.plan.steps) + 0.05
    rng = np.random.default_rng(1)
    worst, n, infeasible = 0.0, 0, 0
    for t in np.arange(0.0, T, 0.004):
        q = q0.copy()
        q[7:] += 0.01 * rng.standard_normal(12)
        s = State(t=float(t), q=q, qdot=0.01 * rng.standard_normal(18))
        a, b = fast.compute(s), slow.compute(s)
        gap = max(float(np.abs(a - b).max() / np.abs(b).max()),
                  float(np.abs(fast.last["lambda_cmd"] - slow.last["lambda_cmd"]).max()
                        / np.abs(slow.last["lambda_cmd"]).max()))
        assert fast.last.get("qp_feasible") == slow.last.get("qp_feasible")
        if slow.last.get("qp_feasible", True):
            worst = max(worst, gap)
        else:
            infeasible += 1
            dlam = float(np.abs(fast.last["lambda_cmd"] - slow.last["lambda_cmd"]).max())
            assert abs(fast.last["qp_slack"] - slow.last["qp_slack"]) <= 1e-9 * slow.last["qp_slack"]
            assert dlam <= max(1e-9 * np.abs(slow.last["lambda_cmd"]).max(), _slack_precision(slow)), (t, dlam)
        n += 1
    print(f"\nlegged step: worst {worst:.1e} on feasible ticks, {infeasible} infeasible, numpy ticks {calls[0]} of {n}")
    assert infeasible > 0
    assert worst < 1e-9
    assert calls[0] <= 8
