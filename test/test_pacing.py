"""Self-decimation and deadline accounting of the dynamics node: :class:`Pacer` on a stream of
known timing, and the node's /diagnostics over real rclpy topics."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from qv_dynamics.ros.pacing import Pacer

ROOT = Path(__file__).resolve().parent.parent


def _feed(p: Pacer, n: int, period: float, cost: float, t0: float = 0.0) -> float:
    t = t0
    for _ in range(n):
        t += period
        if p.arrive(t):
            p.done(cost)
    return t


def test_pacer_decimates_to_fit_the_budget_and_says_so():
    changes = []
    p = Pacer(0, budget=0.5, on_change=lambda *a: changes.append(a))
    t = _feed(p, 600, 1e-3, 0.8e-3)        # 0.8 ms per callback at 1 kHz: over half a core
    assert p.k == 2 and changes[0][:2] == (1, 2)  # ⌈0.8 / 0.5⌉
    assert p.missed == 0 and p.skipped > 0
    _feed(p, 1600, 1e-3, 1.2e-3, t)         # now longer than the period itself: deadlines missed
    assert p.k == 3 and p.missed > 0        # ⌈1.2 / 0.5⌉
    v = p.values()
    assert v["decimation"] == 3 and v["missed_deadlines"] == p.missed
    assert v["tick_time_ms_max"] == pytest.approx(1.2) and v["input_period_ms"] == pytest.approx(1.0)


def test_pacer_fixed_decimation_and_recovery():
    p = Pacer(4)
    _feed(p, 1000, 1e-3, 3e-3)
    assert p.k == 4 and p.processed == 250 and p.skipped == 750  # fixed: never adapted
    changes = []
    q = Pacer(0, on_change=lambda *a: changes.append(a[:2]))
    t = _feed(q, 600, 1e-3, 1.4e-3)
    _feed(q, 6000, 1e-3, 0.1e-3, t)         # load gone: back to every message
    assert changes[0] == (1, 3) and q.k == 1 and changes[-1][1] == 1
    with pytest.raises(ValueError):
        Pacer(-1)


def test_pacer_counts_states_the_stream_lost():
    """Stamps 1 ms apart with ±0.3 ms jitter (none lost) and gaps of 3 and 10 periods (2 + 9 states never
    received), then a stream restarted at an earlier stamp (starts over, nothing counted)."""
    p = Pacer(1)
    stamps = [1.000, 1.001, 1.002, 1.005, 1.006, 1.0073, 1.008, 1.018, 1.019, 0.5, 0.501]
    for k, s in enumerate(stamps):
        p.arrive(1e-3 * k, s)
    assert p.lost == 2 + 9 and p.values()["inputs_lost"] == 11
    assert p.stamp_period == pytest.approx(1e-3, rel=0.05)


rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from qv_dynamics.ros.dynamics_node import DynamicsNode  # noqa: E402
from qv_dynamics.ros.messages import sec_to_stamp  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 13) % 200


def test_dynamics_node_reports_tick_time_and_deadlines():
    from rclpy.parameter import Parameter

    params = [Parameter("model_config", value=str(ROOT / "config" / "planar_3link_model.yaml")),
              Parameter("diagnostics_period", value=0.0)]
    with ros_session(DOMAIN, "pacing_probe") as (ctx, ex, probe):
        node = DynamicsNode(context=ctx, parameter_overrides=params)
        ex.add_node(node)
        got = []
        probe.create_subscription(DiagnosticArray, "/diagnostics", got.append, 10)
        pub = probe.create_publisher(JointState, "/joint_states", 10)
        assert spin_until(ex, lambda: pub.get_subscription_count() >= 1)
        for k in list(range(20)) + [24]:  # the last one 5 periods on: 4 states lost on the way
            msg = JointState(name=["joint1", "joint2", "joint3"], position=[1.0, -1.0, -1.0],
                             velocity=[0.1, 0.0, 0.0], effort=[0.0, 0.0, 0.0])
            msg.header.stamp = sec_to_stamp(1.0 + 1e-3 * k)
            pub.publish(msg)
            assert spin_until(ex, lambda: node.pacer.received > min(k, 20))  # the handshake: the node got it
        assert node.pacer.processed == node.stats["messages"] >= 15
        node.publish_diagnostics()
        assert spin_until(ex, lambda: got)
        values = {kv.key: kv.value for kv in got[-1].status[0].values}
        assert float(values["tick_time_ms_mean"]) > 0.0 and float(values["tick_time_ms_max"]) > 0.0
        assert values["decimation"] == "1" and values["decimation_auto"] == "1"
        assert int(values["missed_deadlines"]) == node.pacer.missed
        # states the stream carried but the node never received (here: never sent) are counted and said
        assert int(values["inputs_lost"]) >= 4 and "not received" in got[-1].status[0].message
        assert 0.0 < float(values["process_cpu_share"]) < 4.0
        # the callback time includes evaluate + quasi_decompose (eval_time) and the publishing
        assert float(values["tick_time_ms_max"]) >= float(values["eval_time_ms_max"]) > 0.0
        retire(ex, node)


def test_dynamics_node_logs_decimation_both_ways():
    """Up (warning) and down (info) from one node: rclpy refuses two severities at one call site, which
    once killed the node on its first step down."""
    from rclpy.parameter import Parameter

    params = [Parameter("model_config", value=str(ROOT / "config" / "planar_3link_model.yaml"))]
    with ros_session(DOMAIN, "pacing_log_probe") as (ctx, ex, probe):
        node = DynamicsNode(context=ctx, parameter_overrides=params)
        node._decimation_changed(1, 3, 1e-3, 1e-3)
        node._decimation_changed(3, 1, 1e-4, 1e-3)
        node.destroy_node()
