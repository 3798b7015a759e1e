"""qv_legged_controller_node (the controller core with the legged law) against real rclpy publishers:
/joint_states and nav_msgs/Odometry at 250 Hz with wall-clock stamps, as a robot's drivers and state
estimator publish them.

Targets: when /joint_states or /odom stop, the node publishes the safe output (zero effort) within
``watchdog_timeout`` plus one ``watchdog_period`` (0.1 + 0.02 s: asserted on the node's own watchdog ticks,
the first safe output from the first tick that saw the last state older than the timeout, which a loaded
machine's scheduling cannot break), counted in /diagnostics (``watchdog_episodes``, ``stale``), and computes
commands again when they resume; joint states without an odometry to pair with (none yet, stopped, or stamped
10 ms off) are counted in /diagnostics (``rejected_odometry_sync_missing`` / ``_mismatch``) and logged once
per episode. Measured (loaded machine): the safe output 0.10-0.13 s after the last command.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

rclpy = pytest.importorskip("rclpy")
from diagnostic_msgs.msg import DiagnosticArray  # noqa: E402
from nav_msgs.msg import Odometry  # noqa: E402
from ros_helpers import retire, ros_session, spin_until  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from test_ros_nodes import check_first_safe_tick, watch_ticks  # noqa: E402

from qv_control.demo.anymal_scene import CROUCH  # noqa: E402
from qv_control.ros.bringup import to_parameters  # noqa: E402
from qv_control.ros.legged_controller_node import LeggedControllerNode  # noqa: E402
from qv_dynamics.plants.mujoco_legged import standing_configuration  # noqa: E402
from qv_dynamics.ros.odometry import base_to_odometry  # noqa: E402

DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 31) % 200
TIMEOUT, PERIOD = 0.1, 0.02


class Feed:
    """The probe's publishers: a joint state and an odometry every 4 ms, each switchable, the odometry's
    stamp shifted by ``offset`` seconds."""

    def __init__(self, probe, system, q):
        self.js = probe.create_publisher(JointState, "/wd/joint_states", 10)
        self.odom = probe.create_publisher(Odometry, "/wd/odom", 10)
        self.names = list(system.joint_names)
        self.q = q
        self.send_js = self.send_odom = True
        self.offset = 0.0
        self.t0 = probe.get_clock().now().nanoseconds
        self.k = 0
        self.timer = probe.create_timer(0.004, self.tick)

    def tick(self) -> None:
        """Stamps on a 4 ms grid from the start (a late tick does not shift them): 10 ms off never pairs."""
        self.k += 1
        now = rclpy.time.Time(nanoseconds=self.t0 + self.k * 4_000_000)
        if self.send_js:
            m = JointState(name=self.names, position=list(self.q[7:]), velocity=[0.0] * 12, effort=[0.0] * 12)
            m.header.stamp = now.to_msg()
            self.js.publish(m)
        if self.send_odom:
            t = now.nanoseconds + int(round(self.offset * 1e9))
            stamp = rclpy.time.Time(nanoseconds=t).to_msg()
            self.odom.publish(base_to_odometry(stamp, "odom", "base", self.q[:7], np.zeros(6)))


class LogTee:
    """The node logger, with the warning lines kept (to count how often an episode is logged)."""

    def __init__(self, logger):
        self.logger, self.warnings = logger, []

    def warning(self, text):
        self.warnings.append(text)
        self.logger.warning(text)

    def info(self, text):
        self.logger.info(text)


@pytest.fixture(scope="module")
def legged():
    with ros_session(DOMAIN, "qv_legged_wd_probe") as (ctx, ex, probe):
        node = LeggedControllerNode("qv_legged_wd", context=ctx, parameter_overrides=to_parameters({
            "model_config": "anymal_model.yaml", "odom_topic": "/wd/odom", "joint_states_topic": "/wd/joint_states",
            "controller_name": "wd_ctrl", "joints": list(CROUCH), "command_delay": 0.0,
            "watchdog_timeout": TIMEOUT, "watchdog_period": PERIOD, "law_params.plan": "kind: stance"}))
        ex.add_node(node)
        cmds: list[tuple[float, bool]] = []   # (receipt time, safe output = all zero)
        probe.create_subscription(Float64MultiArray, "/wd_ctrl/commands",
                                  lambda m: cmds.append((time.monotonic(), not any(m.data))), 100)
        diags: list = []
        probe.create_subscription(DiagnosticArray, "/diagnostics", lambda m: diags.extend(
            s for s in m.status if s.name.startswith("qv_legged_wd")), 10)
        q = standing_configuration(node.system, joints=CROUCH)
        feed = Feed(probe, node.system, q)
        feed.send_js = feed.send_odom = False
        try:
            yield node, ex, feed, cmds, diags
        finally:
            retire(ex, node)


def _diag(ex, node, diags) -> dict:
    n = len(diags)
    node.publish_diagnostics()
    assert spin_until(ex, lambda: len(diags) > n), "no /diagnostics from the node"
    return {kv.key: kv.value for kv in diags[-1].values}


def _safe_latency(ex, cmds) -> float:
    """Seconds from the last computed command to the first safe output after it."""
    assert spin_until(ex, lambda: bool(cmds) and cmds[-1][1]), "no safe output"
    first_safe = next(i for i in range(len(cmds) - 1, -1, -1) if not cmds[i][1]) + 1
    return cmds[first_safe][0] - cmds[first_safe - 1][0]


def _computing(ex, cmds, count: int = 20) -> bool:
    n = len(cmds)
    return spin_until(ex, lambda: sum(1 for _, safe in cmds[n:] if not safe) >= count)


def _feeding(feed, js: bool = True, odom: bool = True) -> None:
    """The feed as a test starts it (a test that failed half-way leaves no switch off for the next one)."""
    feed.send_js, feed.send_odom, feed.offset = js, odom, 0.0


def test_missing_odometry_counted_then_control(legged):
    node, ex, feed, cmds, diags = legged
    assert spin_until(ex, lambda: node.pub_cmd.get_subscription_count() >= 1)
    _feeding(feed, odom=False)                              # joint states only: no odometry yet
    assert spin_until(ex, lambda: node.rejects["odometry_sync"].counts.get("missing", 0) >= 10)
    assert not cmds
    feed.send_odom = True
    assert _computing(ex, cmds), "no commands once the odometry arrives"
    d = _diag(ex, node, diags)
    assert int(d["rejected_odometry_sync_missing"]) >= 10 and d["stale"] == "0", d


@pytest.mark.parametrize("stop", ["send_odom", "send_js"])
def test_stopped_input_safe_output_counted_and_recovery(legged, stop):
    node, ex, feed, cmds, diags = legged
    _feeding(feed)
    assert _computing(ex, cmds)
    episodes = node.stats["watchdog_episodes"]
    inner, ticks = node.watchdog_timer.callback, watch_ticks(node)
    setattr(feed, stop, False)
    latency = _safe_latency(ex, cmds)
    node.watchdog_timer.callback = inner
    check_first_safe_tick(ticks, TIMEOUT, PERIOD, node.watchdog_timer)
    print(f"\n[legged watchdog] safe output {1e3 * latency:.0f} ms after the last command (received)")
    d = _diag(ex, node, diags)
    assert d["stale"] == "1" and int(d["watchdog_episodes"]) == episodes + 1, d
    if stop == "send_odom":   # joint states went on: each counted as unpaired (the odometry stopped)
        assert int(d["rejected_odometry_sync_mismatch"]) >= 10, d
    setattr(feed, stop, True)
    assert _computing(ex, cmds), "no commands after the input resumed"
    assert _diag(ex, node, diags)["stale"] == "0"


def test_odometry_10ms_off_counted_and_logged_once(legged):
    node, ex, feed, cmds, diags = legged
    _feeding(feed)
    assert _computing(ex, cmds)
    counter = node.rejects["odometry_sync"]
    tee = counter.logger = LogTee(counter.logger)
    before = counter.counts.get("mismatch", 0)
    inner, ticks = node.watchdog_timer.callback, watch_ticks(node)
    feed.offset = 0.010
    _safe_latency(ex, cmds)                                  # no pair: no command, the watchdog's safe output
    node.watchdog_timer.callback = inner
    check_first_safe_tick(ticks, TIMEOUT, PERIOD, node.watchdog_timer)
    assert spin_until(ex, lambda: counter.counts["mismatch"] - before >= 20)
    n = counter.counts["mismatch"] - before                  # every unpaired joint state counted ...
    lines = [w for w in tee.warnings if "mismatch" in w]
    assert len(lines) == 1 and "+10.000 ms" in lines[0], tee.warnings   # ... and logged once
    feed.offset = 0.0
    assert _computing(ex, cmds)
    d = _diag(ex, node, diags)
    assert int(d["rejected_odometry_sync_mismatch"]) >= before + n and d["stale"] == "0", d
