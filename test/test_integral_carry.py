"""IntegralCarry (qv_control/laws/carry.py): b ← b + τ_I at a contact switch, only after a phase of min_time."""
from __future__ import annotations

import numpy as np

from qv_control.laws.carry import IntegralCarry


def test_carry_keeps_a_learned_bias_and_drops_a_bounce():
    c = IntegralCarry(3, min_time=0.05)
    tau = np.array([1.0, -2.0, 0.5])
    for k in range(100):                 # a 0.1 s phase: its integral is an estimate
        c.tick(k * 1e-3)
        c.tau_int = tau
    c.switch()
    assert np.array_equal(c.bias, tau) and c.tau_int is None
    for k in range(5):                   # a 5 ms bounce: its integral is a transient
        c.tick(0.1 + k * 1e-3)
        c.tau_int = np.array([100.0, 0.0, 0.0])
    c.switch()
    assert np.array_equal(c.bias, tau)
    assert np.array_equal(c.total, tau)
    c.reset()
    assert np.array_equal(c.total, np.zeros(3))
