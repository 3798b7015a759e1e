"""The compiled steady-state decomposition (qv_dynamics.kernels.quasi via quasi_decompose(gauge="auto"), its
bases by qv_dynamics.kernels.aligned) against the reference formulation (gauge="svd": full SVD of Λ, Procrustes
rotations by SVD, SPEC §2) along smooth 1 kHz motions, and the numpy path it falls back to when the kernel is
unavailable or declines."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_quasi_fast import CASES, FIELDS, _motion

from qv_dynamics import ConstrainedSystem, quasi_decompose
from qv_dynamics.kernels.loader import STATUS
from qv_dynamics.quasi import compiled_kernel

ROOT = Path(__file__).resolve().parent.parent
ALL = FIELDS + ("Q", "Qinv", "Qdot", "Gamma", "Lambda", "v", "u", "S")


@pytest.mark.parametrize("case", ["panda_point", "panda_table", "ur5_weld_xyz_rz", "talos_welds"])
def test_compiled_equals_svd_gauge_along_a_motion(case):
    assert compiled_kernel() is not None, STATUS
    robot, cons, fb = CASES[case]
    system = ConstrainedSystem.from_urdf(robot, constraints=cons, floating_base=fb)
    at, rng = _motion(system, seed=3)
    prev_c = prev_s = None
    worst = dict.fromkeys(ALL, 0.0)
    for k in range(60):
        q, qdot = at(1e-3 * k)
        terms = system.evaluate(q, qdot)
        tau = 10.0 * rng.normal(size=system.nv)
        c = quasi_decompose(terms, tau=tau, prev=prev_c)
        s = quasi_decompose(terms, tau=tau, prev=prev_s, gauge="svd")
        assert (c._V is not None) == (k > 0)  # every sample after the seed went through the kernel
        assert c.rank == s.rank == system.m and not c.rank_changed
        for f in ALL:
            x, y = np.asarray(getattr(c, f)), np.asarray(getattr(s, f))
            worst[f] = max(worst[f], float(np.abs(x - y).max() / max(1.0, np.abs(y).max())) if y.size else 0.0)
        assert c.condition == pytest.approx(s.condition, rel=1e-12)
        prev_c, prev_s = c, s
    print(f"\n{case}: worst relative difference compiled vs svd gauge {max(worst.values()):.1e}")
    assert max(worst.values()) < 1e-13, worst  # measured ≤ 3.2e-14 (the arms), 6.6e-14 (Talos)


def test_compiled_declines_a_rank_change_and_a_jump():
    """A contact switched on (rank 0 → 3) and a jump of the state go to the numpy path, which re-seeds."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand",
                                                                "name": "contact"}])
    at, rng = _motion(system, seed=4)
    q, qdot = at(0.0)
    system.set_active("contact", False)
    free = quasi_decompose(system.evaluate(q, qdot))
    system.set_active("contact", True)
    on = quasi_decompose(system.evaluate(q, qdot), prev=free)
    assert on.rank_changed and on._V is None
    q2 = system.random_configuration(rng)
    far = quasi_decompose(system.evaluate(q2, np.zeros(system.nv)), prev=on)
    ref = quasi_decompose(system.evaluate(q2, np.zeros(system.nv)), prev=on, gauge="svd")
    assert far._V is None and np.allclose(far.V2, ref.V2, atol=1e-13)


def test_strided_or_read_only_inputs_and_hand_built_terms():
    """A strided or read-only τ or q̇ (e.g. read from a message's bytes) is copied for the kernel: the same
    sample; terms built by hand with arrays the kernel's signature does not take (a Fortran-ordered M) go to
    the numpy path instead of raising."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
    at, rng = _motion(system, seed=5)
    p = quasi_decompose(system.evaluate(*at(0.0)))
    q, qdot = at(1e-3)
    terms = system.evaluate(q, qdot)
    tau = 10.0 * rng.normal(size=system.nv)
    ref = quasi_decompose(terms, tau=tau, prev=p)
    frozen = tau.copy()
    frozen.flags.writeable = False
    for t in (np.repeat(tau, 2)[::2], frozen):
        qs = quasi_decompose(terms, tau=t, prev=p)
        assert qs._V is not None and np.array_equal(qs.lambda_, ref.lambda_) and np.array_equal(qs.V2, ref.V2)
    frozen_qdot = qdot.copy()
    frozen_qdot.flags.writeable = False
    qs = quasi_decompose(system.evaluate(q, frozen_qdot), tau=tau, prev=p)
    assert qs._V is not None and np.array_equal(qs.xi, ref.xi)
    hand = dataclasses.replace(terms, M=np.asfortranarray(terms.M))
    qs = quasi_decompose(hand, tau=tau, prev=p)
    assert qs._V is None and np.abs(qs.lambda_ - ref.lambda_).max() <= 1e-12 * np.abs(ref.lambda_).max()


_FALLBACK = """
import numpy as np
from qv_dynamics import ConstrainedSystem, quasi_decompose
from qv_dynamics.kernels.loader import STATUS
s = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": "panda_hand"}])
q = s.random_configuration(np.random.default_rng(0))
t = s.evaluate(q, np.zeros(7))
qs = quasi_decompose(t, prev=quasi_decompose(t))
print(qs._V is None, STATUS["qv_dynamics.kernels.quasi"])
"""


def test_numpy_path_when_the_kernel_is_switched_off():
    env = dict(os.environ, QV_COMPILED="0", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", _FALLBACK], env=env, capture_output=True, text=True, timeout=60,
                         check=True).stdout.split(maxsplit=1)
    assert out == ["True", "disabled by QV_COMPILED=0\n"]
