"""Unit invariance (quasi-velocity paper, sec. 2: quasi-variables live in the kinetic-energy metric).

The same 4-DoF arm (prismatic + 3 revolute joints) is written as a URDF in metres and in millimetres
(lengths ×1000, inertias in kg·mm², gravity −9810 mm/s²). A physical state maps as q̇_mm = D q̇_m with
D = diag(1000, 1, 1, 1), τ_mm = 10⁶ D⁻¹ τ_m (N → kg·mm/s², N·m → kg·mm²/s²), point forces ×1000.

Quasi quantities change only by the unit of √energy (one common factor 1000, K by 10⁶; Λ and Γ are
invariant), and the M⁻¹-weighted minimum-norm joint rate / torque convert back to the same SI values.
The Euclidean pseudo-inverse answers (A⁺ẋ, (AM⁻¹)⁺a) do not: they depend on the length unit.
"""
from __future__ import annotations

import numpy as np
from models import prismatic_arm

from qv_dynamics import ConstrainedSystem, quasi_decompose, torque_from_quasi_forces

S = 1000.0
D = np.diag([S, 1.0, 1.0, 1.0])          # q̇_mm = D q̇_m
DT = S * S * np.linalg.inv(D)            # τ_mm = DT τ_m


def _systems():
    cons = [{"type": "point_contact", "frame": "tip", "axes": ["x", "z"]}]
    sm = ConstrainedSystem.from_urdf(prismatic_arm(1.0), constraints=cons, gravity=[0, 0, -9.81])
    smm = ConstrainedSystem.from_urdf(prismatic_arm(S), constraints=cons, gravity=[0, 0, -9810.0])
    return sm, smm


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)) / np.linalg.norm(b))


def test_quasi_quantities_are_unit_invariant_and_euclidean_ones_are_not():
    sm, smm = _systems()
    rng = np.random.default_rng(3)
    worst_inv = 0.0
    min_euclid = np.inf
    for trial in range(10):
        q_m = np.array([rng.uniform(-0.5, 0.5), *rng.uniform(-1.5, 1.5, 3)])
        q_mm = D @ q_m
        A_m = sm.constraint_rows(q_m)[1]
        _, _, Vt = np.linalg.svd(A_m)
        qd_m = Vt[2:].T @ rng.normal(size=2)              # A q̇ = 0
        qd_mm = D @ qd_m
        tau_m = rng.normal(size=4) * np.array([20.0, 5.0, 3.0, 1.0])
        tau_mm = DT @ tau_m
        tm, tmm = sm.evaluate(q_m, qd_m), smm.evaluate(q_mm, qd_mm)
        qm, qmm = quasi_decompose(tm, tau=tau_m), quasi_decompose(tmm, tau=tau_mm)

        inv = {  # SI value vs the millimetre value brought back by the common √energy factor
            "v": _rel(qmm.v / S, qm.v),
            "u": _rel(qmm.u / S, qm.u),
            "|v_r|": abs(np.linalg.norm(qmm.v_r) / S / np.linalg.norm(qm.v_r) - 1),
            "|xi|": abs(np.linalg.norm(qmm.xi) / S / np.linalg.norm(qm.xi) - 1),
            "K": abs(qmm.kinetic_energy / S ** 2 / qm.kinetic_energy - 1),
            "Lambda": _rel(qmm.Lambda, qm.Lambda),
            "Gamma": _rel(qmm.Gamma, qm.Gamma),
            "lambda": _rel(qmm.lambda_ / S, qm.lambda_),
        }
        # M-weighted (quasi-velocity) minimum-norm answers, converted back to SI
        xd_m = np.array([0.1, -0.05])                        # desired tip velocity, m/s
        a_m = np.array([0.3, 0.2])                           # desired tip acceleration at q̇ = 0, m/s²
        qdot_qv_m = np.linalg.solve(qm.Q.T, np.linalg.pinv(qm.Lambda) @ xd_m)        # min ‖v‖ = min K
        qdot_qv_mm = np.linalg.solve(qmm.Q.T, np.linalg.pinv(qmm.Lambda) @ (S * xd_m))
        inv["qdot_minK"] = _rel(np.linalg.solve(D, qdot_qv_mm), qdot_qv_m)
        # min τᵀM⁻¹τ with A M⁻¹ τ = a: u = Λ⁺a, the torque τ = Q u (via the quasi-force map, u_v = V₂ᵀu)
        u_m = np.linalg.pinv(qm.Lambda) @ a_m
        u_mm = np.linalg.pinv(qmm.Lambda) @ (S * a_m)
        tau_w_m = torque_from_quasi_forces(tm, qm, qm.V2.T @ u_m, qm.V1.T @ u_m) - tm.g
        tau_w_mm = torque_from_quasi_forces(tmm, qmm, qmm.V2.T @ u_mm, qmm.V1.T @ u_mm) - tmm.g
        inv["tau_minMinv"] = _rel(np.linalg.solve(DT, tau_w_mm), tau_w_m)
        # Euclidean pseudo-inverse answers, converted back to SI
        euc = {
            "qdot_A+": _rel(np.linalg.solve(D, np.linalg.pinv(tmm.A) @ (S * xd_m)), np.linalg.pinv(tm.A) @ xd_m),
            "tau_(AM^-1)+": _rel(np.linalg.solve(DT, np.linalg.pinv(tmm.A @ np.linalg.inv(tmm.M)) @ (S * a_m)),
                                 np.linalg.pinv(tm.A @ np.linalg.inv(tm.M)) @ a_m),
            "cond(A)": abs(np.linalg.cond(tmm.A) / np.linalg.cond(tm.A) - 1),
        }
        worst_inv = max(worst_inv, max(inv.values()))
        min_euclid = min(min_euclid, min(euc.values()))
        if trial == 0:
            print("\nunit change m -> mm, relative change after converting back to SI:")
            print("  quasi / M-weighted: " + ", ".join(f"{k} {v:.1e}" for k, v in inv.items()))
            print("  Euclidean pinv:     " + ", ".join(f"{k} {v:.1e}" for k, v in euc.items()))
            print(f"  e.g. ‖v‖ = {np.linalg.norm(qm.v):.6f} √J vs {np.linalg.norm(qmm.v) / S:.6f} (mm model / 1000);"
                  f" A⁺ẋ: {np.round(np.linalg.pinv(tm.A) @ xd_m, 6)} vs "
                  f"{np.round(np.linalg.solve(D, np.linalg.pinv(tmm.A) @ (S * xd_m)), 6)}")
    print(f"worst relative change of the invariant quantities {worst_inv:.1e}; "
          f"smallest change of a Euclidean one {min_euclid:.1e}")
    assert worst_inv < 1e-9
    assert min_euclid > 1e-2
