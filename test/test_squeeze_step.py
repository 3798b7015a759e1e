"""A squeeze step 20 → 40 N through the internal-force PI of the passive-joint law, on the simulator's rigid
closed chain (two Pandas holding a free box, the multiplier handed to the law one sample old as a wrist
force sensor does). The figure is the squeeze s = σᵀλ of the simulator's own λ (σ: half the difference of
the two grasp forces along the grasp line), against the target."""
from __future__ import annotations

import numpy as np

from qv_control.demo.bimanual import BimanualConfig, BoxPlan, coordinates, squeeze_weights
from qv_control.laws import make_law
from qv_control.references import TrajectoryReference
from qv_dynamics import simulate
from qv_dynamics.sim.bimanual import arm_joints, bimanual_system, nominal_q

T_STEP, T_END = 0.05, 0.1


def test_squeeze_step_without_overshoot():
    """k_f = 0.05, k_i = 30 (the demo's gains): comparing the new target with a reading taken under the old
    command added k_f·20 + k_i·dt·20 = 1.6 N for one sample; the error against the previous target does not."""
    system = bimanual_system()
    q0 = nominal_q(system)
    mask = np.zeros(system.nv, bool)
    mask[[system.joint_v_index(j) for j in arm_joints()]] = True
    cfg = BimanualConfig(conditions="ideal")
    plan = BoxPlan(cfg, system, q0, mask)
    law = make_law("passive", system, coordinates=coordinates(plan.R0), actuated=arm_joints(), kp=cfg.kp,
                   kd=cfg.kd, kf=cfg.kf, ki=cfg.ki, q0=q0, internal_tol=cfg.internal_tol)
    theta0 = plan.reference(0.0).theta
    k = theta0.size
    ref = TrajectoryReference(lambda t: theta0, lambda t: np.zeros(k), lambda t: np.zeros(k),
                              lambda_=lambda t: (20.0 if t < T_STEP else 40.0) * plan.lam_hat, size=k,
                              lambda_size=12)
    tr = simulate(system, q0, np.zeros(system.nv), law, t_final=T_END, dt=1e-3, reference=ref)
    assert tr.ok, tr.error
    sq = np.array([squeeze_weights(system, q) @ lam for q, lam in zip(tr.q[:-1], tr.lam[:-1])])
    t = tr.t[:-1]
    before, after = sq[(t > T_STEP - 0.02) & (t < T_STEP)], sq[t >= T_STEP]
    overshoot = float(after.max() - 40.0)
    print(f"\nsqueeze 20 -> 40 N (rigid closed chain): before {before.mean():.4f} N, overshoot {overshoot:.2e} N, "
          f"after 2 samples max |s - 40| {np.abs(after[2:] - 40.0).max():.1e} N")
    assert np.abs(before - 20.0).max() < 0.05        # the squeeze holds its first target
    assert overshoot <= 0.2                          # was kf·20 + ki·dt·20 = 1.6 N
    assert np.abs(after[2:] - 40.0).max() < 0.05
