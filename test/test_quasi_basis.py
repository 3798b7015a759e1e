"""Null-space basis continuity (SPEC §2: V₂ ← V₂·polar(V₂ᵀV₂_prev)) and rank-change flagging."""
from __future__ import annotations

import numpy as np

from qv_dynamics import ConstrainedSystem, quasi_decompose


def _panda_path():
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    rng = np.random.default_rng(0)
    q0 = system.random_configuration(rng)
    w, ph = rng.normal(size=7), rng.uniform(0, 6, size=7)
    return system, (lambda t: q0 + 0.3 * np.sin(w * t + ph)), (lambda t: 0.3 * w * np.cos(w * t + ph))


def _walk(system, path, vel, dt, T=1.0, use_prev=True):
    """Max ‖V₂(t+dt) − V₂(t)‖_F along the path, min singular value of V₂ᵀV₂_prev, max |Δv_r|."""
    prev = None
    jump = dv_r = 0.0
    min_sv = 1.0
    for k in range(int(round(T / dt)) + 1):
        t = k * dt
        qs = quasi_decompose(system.evaluate(path(t), vel(t)), prev=prev if use_prev else None)
        if prev is not None:
            assert not qs.rank_changed
            jump = max(jump, np.linalg.norm(qs.V2 - prev.V2))
            dv_r = max(dv_r, np.linalg.norm(qs.v_r - prev.v_r))
            min_sv = min(min_sv, np.linalg.svd(qs.V2.T @ prev.V2, compute_uv=False).min())
            # Procrustes gauge: V₂ᵀV₂_prev symmetric positive definite (no rotation, no reflection)
            if use_prev:
                X = qs.V2.T @ prev.V2
                assert np.linalg.norm(X - X.T) < 1e-12 and np.linalg.eigvalsh(0.5 * (X + X.T)).min() > 0
        prev = qs
    return jump, min_sv, dv_r


def test_v2_continuous_with_prev_and_jumps_without():
    system, path, vel = _panda_path()
    dts = [0.02, 0.01, 0.005]
    res = [_walk(system, path, vel, dt) for dt in dts]
    raw = _walk(system, path, vel, 0.005, use_prev=False)
    for dt, (jump, min_sv, dv_r) in zip(dts, res):
        print(f"\ndt={dt}: with prev max‖ΔV₂‖={jump:.3e} (/dt={jump / dt:.3f}), "
              f"min σ(V₂ᵀV₂_prev)={min_sv:.6f}, max‖Δv_r‖={dv_r:.3e}")
    print(f"dt=0.005 without prev: max‖ΔV₂‖={raw[0]:.3f}, max‖Δv_r‖={raw[2]:.3f} (basis re-chosen by each SVD)")
    for i in range(len(dts) - 1):
        ratio = res[i][0] / res[i + 1][0]
        assert 1.8 < ratio < 2.2, f"‖ΔV₂‖ does not scale with dt (ratio {ratio:.2f})"
    assert all(r[0] / dt < 2.0 for r, dt in zip(res, dts))
    assert all(r[1] > 0.999 for r in res)
    # the unaligned SVD basis flips/rotates: O(1) jumps however small dt is — the alignment matters
    assert raw[0] > 0.5 and raw[0] > 100 * res[-1][0]


def test_rank_change_through_singular_pose_is_flagged():
    """UR5 with a point contact at wrist_1_link: rank 3, then 2 at the stretched elbow (q3 = 0), then 3."""
    system = ConstrainedSystem.from_urdf("ur5", constraints=[{"type": "point_contact", "frame": "wrist_1_link"}])
    q = np.array([0.3, -1.0, 0.0, -1.2, 1.0, 0.2])
    prev = None
    ranks, flags = [], []
    for q3 in (0.02, 0.01, 0.0, -0.01, -0.02):
        q[2] = q3
        qs = quasi_decompose(system.evaluate(q, np.zeros(6)), prev=prev)
        ranks.append(qs.rank)
        flags.append(qs.rank_changed)
        assert qs.V2.shape == (6, 6 - qs.rank) and qs.V1.shape == (6, qs.rank)
        prev = qs
    print(f"\nranks {ranks}, rank_changed {flags}")
    assert ranks == [3, 3, 2, 3, 3]
    assert flags == [False, False, True, True, False]


def test_rank_change_on_contact_switch():
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": "panda_hand", "name": "tool"}])
    q = system.neutral()
    qs0 = quasi_decompose(system.evaluate(q, np.zeros(7)))
    system.set_active("tool", False)
    qs1 = quasi_decompose(system.evaluate(q, np.zeros(7)), prev=qs0)
    qs2 = quasi_decompose(system.evaluate(q, np.zeros(7)), prev=qs1)
    system.set_active("tool", True)
    qs3 = quasi_decompose(system.evaluate(q, np.zeros(7)), prev=qs2)
    assert (qs0.rank, qs1.rank, qs2.rank, qs3.rank) == (3, 0, 0, 3)
    assert (qs1.rank_changed, qs2.rank_changed, qs3.rank_changed) == (True, False, True)
    assert qs1.V2.shape == (7, 7) and np.allclose(qs1.V2.T @ qs1.V2, np.eye(7), atol=1e-12)
