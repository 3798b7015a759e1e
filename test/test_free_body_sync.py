"""FreeBodySync pairs a joint state with the odometry of its stamp when the odometry comes late (after the
next joint state, as at 1 kHz under load), answers each state at most once and never an older one after a
newer, and reports a state that leaves its history unanswered."""
from __future__ import annotations

import numpy as np

from qv_dynamics.ros.free_body import FreeBodySync
from qv_dynamics.sim.bimanual import bimanual_system, nominal_q


class Counter:
    """The two calls FreeBodySync makes on the node's EpisodeCounter, recorded."""

    def __init__(self):
        self.rejects, self.oks = [], 0

    def reject(self, kind, reason):
        self.rejects.append((kind, reason))

    def ok(self):
        self.oks += 1


def test_late_odometry_pairs_and_lost_states_are_reported():
    system = bimanual_system()
    q0, v0 = nominal_q(system), np.zeros(system.nv)
    sync = FreeBodySync(system, tolerance=5e-4)
    body = lambda k: (np.array([0.1 * k, 0, 0, 0, 0, 0, 1.0]), np.full(6, float(k)))  # noqa: E731
    counter = Counter()
    sync.counter = counter
    sync.joint_state = (0.001, q0, v0, "s1")
    sync.joint_state = (0.002, q0, v0, "s2")
    assert sync.ready() is None                               # no odometry yet
    sync.odometry = (0.001, *body(1))                         # the first state's odometry, after the second state
    t, q, qdot, stamp = sync.ready()
    assert (t, stamp) == (0.001, "s1") and q[0] == 0.1 and qdot[0] == 1.0
    assert sync.ready() is None                               # answered once
    sync.odometry = (0.002, *body(2))
    assert sync.ready()[3] == "s2"
    # no odometry for four states: the one pushed out of the 3-state history is reported, naming the nearest
    for k in range(3, 6):
        sync.joint_state = (0.001 * k, q0, v0, f"s{k}")
    assert counter.rejects == []
    sync.joint_state = (0.006, q0, v0, "s6")
    (kind, reason), = counter.rejects
    assert kind == "mismatch" and "t = 0.003000 s" in reason and "-1.000 ms" in reason, reason
    sync.odometry = (0.006, *body(6))
    sync.odometry = (0.004, *body(4))                          # older than the newest pair: not answered after it
    assert sync.ready()[3] == "s6" and sync.ready() is None and sync.skipped == 2 and counter.oks == 3


def test_a_repeated_state_pairs_again_once_it_was_paired():
    """A plant repeating its state while it waits for a first command: the repeat of a paired state pairs again
    (the node's duplicate check decides whether to answer), an older one does not, nor does a repeat before the
    first pairing add a second pair."""
    system = bimanual_system()
    q0, v0 = nominal_q(system), np.zeros(system.nv)
    sync = FreeBodySync(system, tolerance=5e-4)
    body = (np.array([0.0, 0, 0, 0, 0, 0, 1.0]), np.zeros(6))
    sync.joint_state = (0.0, q0, v0, "s0")
    sync.joint_state = (0.0, q0, v0, "s0")                   # repeated before any pairing: one state
    sync.odometry = (0.0, *body)
    assert sync.ready()[3] == "s0" and sync.ready() is None
    sync.joint_state = (0.0, q0, v0, "s0")                   # the repeat after its pairing
    assert sync.ready()[0] == 0.0 and sync.ready() is None
    sync.joint_state = (0.001, q0, v0, "s1")
    sync.odometry = (0.001, *body)
    assert sync.ready()[3] == "s1"
    sync.joint_state = (0.0, q0, v0, "s0")                   # older than the latest: ignored
    assert sync.ready() is None and sync.skipped == 0
