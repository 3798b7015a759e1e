"""Force PI after a step of λ_d, and integral action on motion, on the simulator's rigid contact.

The Panda's hand slides on a frictionless plane (test/control_helpers.py); the simulator hands the law the
multiplier of the previous step (one sample old), as a force sensor does. Figures are the simulator's λ
and the hand position recomputed from the trajectory.
"""
from __future__ import annotations

import numpy as np
from control_helpers import COORDS, Q0, panda_pair

from qv_control import ForcePI, TrajectoryReference, make_law, scale_inertias
from qv_dynamics import simulate


def _hold_reference(theta0, lam_fn):
    k = theta0.size
    return TrajectoryReference(lambda t: theta0, lambda t: np.zeros(k), lambda t: np.zeros(k),
                               lambda_=lam_fn, size=k, lambda_size=1)


def test_force_pi_error_uses_the_previous_command():
    pi = ForcePI(kf=0.5)
    e0 = pi.error(0.0, np.array([-12.0]), np.array([-12.0]))
    e1 = pi.error(0.001, np.array([-20.0]), np.array([-12.0]))   # reading made under the −12 command
    e1b = pi.error(0.001, np.array([-20.0]), np.array([-12.0]))  # same sample again: idempotent
    e2 = pi.error(0.002, np.array([-20.0]), np.array([-20.0]))
    assert e0[0] == 0.0 and e1[0] == 0.0 and e1b[0] == 0.0 and e2[0] == 0.0
    assert pi.error(0.003, np.array([-20.0]), np.array([-19.0]))[0] == -1.0


def test_lambda_step_without_overshoot():
    """12 → 20 N with k_f = 0.5, k_i = 30: λ follows the step without overshoot (a PI adding k_f·8 N on top of
    the feedforward for one sample would overshoot by 21.6 %)."""
    plant, model = panda_pair()
    law = make_law("quasi_tracking", model, coordinates=COORDS, kp=10.0, kd=40.0, kf=0.5, ki=30.0,
                   effort_limits=None)
    law.coords.anchor(Q0)
    th0 = law.coords.evaluate(Q0, np.zeros(7)).theta.copy()
    t_step = 0.2
    ref = _hold_reference(th0, lambda t: np.array([-12.0 if t < t_step else -20.0]))
    tr = simulate(plant, Q0, np.zeros(7), law, t_final=0.3, dt=1e-3, reference=ref)
    assert tr.ok, tr.error
    lam = tr.lam[:-1, 0]
    after = tr.t[:-1] >= t_step
    overshoot = float(np.max(-lam[after])) / 20.0 - 1.0
    settled = float(np.max(np.abs(lam[after][2:] + 20.0)))
    print(f"\nλ_d step 12 -> 20 N: overshoot {overshoot:.2e} (21.2 % with the error against the new λ_d), "
          "max |λ + 20| after 2 samples "
          f"{settled:.1e} N")
    assert overshoot < 1e-6
    assert settled < 1e-6


def test_motion_integral_removes_the_model_error_offset():
    """Controller model with link masses +10 %: the tool's final x-y error without and with ki_motion."""
    res = {}
    for ki_motion in (0.0, 400.0):
        plant, model = panda_pair()
        scale_inertias(model, 1.1)
        law = make_law("quasi_tracking", model, coordinates=COORDS, kp=10.0, kd=40.0, kf=0.5, ki=30.0,
                       ki_motion=ki_motion, effort_limits=None)
        law.coords.anchor(Q0)
        th0 = law.coords.evaluate(Q0, np.zeros(7)).theta.copy()
        tr = simulate(plant, Q0, np.zeros(7), law, t_final=1.0, dt=1e-3,
                      reference=_hold_reference(th0, lambda t: np.array([-10.0])))
        assert tr.ok, tr.error
        res[ki_motion] = max(np.linalg.norm(law.coords.evaluate(q, v).theta[:2] - th0[:2])
                             for q, v in zip(tr.q[-3:], tr.qdot[-3:]))
    print(f"\nmodel masses +10 %: final tool x-y error {res[0.0] * 1e3:.3f} mm without, "
          f"{res[400.0] * 1e6:.3f} µm with integral action")
    assert res[0.0] > 1e-4
    assert res[400.0] < 0.05 * res[0.0]
