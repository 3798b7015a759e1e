"""The joint-state driver of bench/ros_latency.py: it publishes states (with their odometry and wrenches,
bench/latency_inputs.py) at a rate or in ping-pong, and timestamps the controller's answers; the latency
statistics of a run and of several runs pooled."""
from __future__ import annotations

import time

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from latency_inputs import InputMessages, Setup
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from qv_dynamics.ros.messages import arrays_to_joint_state, sec_to_stamp

PINGPONG_LOST = 0.1  # [s] a ping-pong state unanswered this long counts as lost


class Driver:
    """Publishes joint states and timestamps the controller's answers. Each answer is matched to the state it
    answers by the stamp of ``~/command_stamped`` (the controller acts on the freshest state only, so under
    overload states are skipped instead of queued); ``commands`` counts the effort commands themselves, and
    each command is paired with its stamped copy by its values (the same τ bytes), which gives the latency
    of the command itself (``lat_cmd``; the stamped copy is published after it)."""

    def __init__(self, node, layout, t, q, qdot, stamped_topic="/qv_controller/command_stamped",
                 topic="/effort_controller/commands", inputs: Setup | None = None):
        self.node, self.layout = node, layout
        self.msgs = [arrays_to_joint_state(sec_to_stamp(float(t[i])), layout, q[i], qdot[i]) for i in range(len(t))]
        self.inputs = InputMessages(node, inputs, q, qdot) if inputs is not None else None  # odometry, wrenches
        self.pub = node.create_publisher(JointState, "/joint_states", 10)
        self.sub = node.create_subscription(JointState, stamped_topic, self.on_answer, 100)
        self.cmd_sub = node.create_subscription(Float64MultiArray, topic, self.on_cmd, 100)
        self.diag_sub = node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 10)
        self.diag: tuple[float, dict] | None = None  # (arrival, values) of the controller's last diagnostics
        self.dyn_diag: dict = {}  # the dynamics node's last diagnostics
        self.seq = 0  # never reset: the nodes drop a state stamped older than the last one they accepted
        self.reset()

    def reset(self) -> None:
        self.sent: dict[int, float] = {}
        self.lat: list[float] = []
        self.lat_cmd: list[float] = []
        self._cmd_at: dict[bytes, float] = {}      # command values -> arrival (its stamped copy not yet in)
        self._cmd_sent: dict[bytes, float] = {}    # stamped values -> the state's publish time (command not yet in)
        self.recv_times: list[float] = []
        self.pub_times: list[float] = []
        self.commands = 0

    def on_answer(self, msg) -> None:
        now = time.perf_counter()
        key = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        t_sent = self.sent.pop(key, None)
        if t_sent is not None:
            self.lat.append(now - t_sent)
            self.recv_times.append(now)
            self._pair(msg.effort.tobytes(), t_sent=t_sent)

    def _pair(self, values: bytes, t_sent: float | None = None, t_cmd: float | None = None) -> None:
        """A command (``t_cmd``: its arrival) and its stamped copy (``t_sent``: its state's publish time) meet
        by their τ bytes, in either order; the second of the two adds ``t_cmd - t_sent`` to ``lat_cmd``."""
        if t_sent is None:
            t_sent = self._cmd_sent.pop(values, None)
            if t_sent is None:
                self._cmd_at[values] = t_cmd
                return
        else:
            t_cmd = self._cmd_at.pop(values, None)
            if t_cmd is None:
                self._cmd_sent[values] = t_sent
                return
        self.lat_cmd.append(t_cmd - t_sent)

    def on_diag(self, msg) -> None:
        for st in msg.status:
            if st.name.endswith(": controller"):
                self.diag = (time.perf_counter(), {kv.key: _number(kv.value) for kv in st.values})
            elif st.name.endswith(": constrained model"):
                self.dyn_diag = {kv.key: kv.value for kv in st.values}

    def fresh_diag(self, ex, timeout: float = 2.5) -> dict | None:
        """The controller's next /diagnostics (published every second); None without one (the echo)."""
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            ex.spin_once(timeout_sec=0.01)
            if self.diag is not None and self.diag[0] > t0:
                return self.diag[1]
        return None

    def on_cmd(self, msg) -> None:
        now = time.perf_counter()
        self.commands += 1
        self._pair(msg.data.tobytes(), t_cmd=now)

    def publish(self) -> None:
        # the state of the closed loop at the stamp's time: the node's reference counts from its first state
        # (stamp 1.0, seq 0), so state and reference stay on one timeline (replayed states that drift off it
        # are tracking errors the law saturates on: more work per state than the loop it stands for)
        k = self.seq % len(self.msgs)
        msg = self.msgs[k]
        msg.header.stamp = sec_to_stamp(1.0 + 1e-3 * self.seq)  # unique stamp per publish
        self.seq += 1
        if self.inputs is not None:   # the odometry and wrenches of the state, with its stamp, before it
            self.inputs.publish(k, msg.header.stamp)
        now = time.perf_counter()
        self.sent[msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec] = now
        self.pub_times.append(now)
        self.pub.publish(msg)


def _number(text: str):
    """A diagnostics value as a float where it is a number (the lifecycle state, the task phase are words)."""
    try:
        return float(text)
    except ValueError:
        return text


def _stats(driver: "Driver", n_sent: int) -> dict:
    lat = np.array(driver.lat) * 1e3
    lat = lat[int(0.05 * lat.size):]  # drop warm-up
    rt = driver.recv_times
    gaps = np.diff(driver.pub_times) * 1e3  # the driver's own timing: publish intervals
    lat_cmd = np.array(driver.lat_cmd) * 1e3
    lat_cmd = lat_cmd[int(0.05 * lat_cmd.size):]
    return {"sent": n_sent, "answered": len(driver.lat), "lat_ms": lat, "median_ms": float(np.median(lat)),
            "lat_cmd_ms": lat_cmd, "cmd_p99_ms": float(np.percentile(lat_cmd, 99)) if lat_cmd.size else float("nan"),
            "cmd_median_ms": float(np.median(lat_cmd)) if lat_cmd.size else float("nan"),
            "p99_ms": float(np.percentile(lat, 99)), "max_ms": float(np.max(lat)),
            "command_rate_hz": (len(rt) - 1) / (rt[-1] - rt[0]) if len(rt) > 1 else float("nan"),
            "gap_p99_ms": float(np.percentile(gaps, 99)) if gaps.size else float("nan")}


def pooled(runs: list[dict]) -> dict:
    """Several runs of one kind as one: latencies pooled, counts summed, rates averaged."""
    lat = np.concatenate([r["lat_ms"] for r in runs])
    lat_cmd = np.concatenate([r["lat_cmd_ms"] for r in runs])
    out = {"lat_cmd_ms": lat_cmd, "cmd_p99_ms": float(np.percentile(lat_cmd, 99)) if lat_cmd.size else float("nan"),
           "cmd_median_ms": float(np.median(lat_cmd)) if lat_cmd.size else float("nan"),
           "sent": sum(r["sent"] for r in runs), "answered": sum(r["answered"] for r in runs), "lat_ms": lat,
           "median_ms": float(np.median(lat)), "p99_ms": float(np.percentile(lat, 99)), "max_ms": float(lat.max()),
           "command_rate_hz": float(np.mean([r["command_rate_hz"] for r in runs])),
           "gap_p99_ms": max(r["gap_p99_ms"] for r in runs), "driver_late": sum(r.get("driver_late", 0) for r in runs),
           "cpu_us_per_state": float(np.mean([r.get("cpu_us_per_state", np.nan) for r in runs])),
           "cpu_us_per_command": float(np.mean([r.get("cpu_us_per_command", np.nan) for r in runs])),
           "compute_ms_mean": float(np.mean([r.get("compute_ms_mean", np.nan) for r in runs])),
           "compute_cpu_ms_mean": float(np.mean([r.get("compute_cpu_ms_mean", np.nan) for r in runs])),
           "dynamics_diag": [d for r in runs for d in r.get("dynamics_diag", [])]}
    if "pingpong" in runs[0]:
        out["pingpong"] = pooled([r["pingpong"] for r in runs])
        out["pingpong"]["cpu_us_per_state"] = float("nan")
        out["exit_codes"] = [c for r in runs for c in r.get("exit_codes", [])]
    return out


def run_stream(ex, driver: Driver, rate: float, seconds: float) -> dict:
    """Publish at ``rate`` for ``seconds`` (schedule kept on the executor thread), then drain. A publish that
    comes late (the driver was descheduled) is not followed by a catch-up burst: the next one waits at
    least half a period, as a sensor or a plant that missed a tick would (two states 0.1 ms apart are what
    a depth-1 subscriber rightly drops: the bench would count its own lateness as unanswered states)."""
    period = 1.0 / rate
    n = int(rate * seconds)
    due = time.perf_counter()
    late = 0
    for i in range(n):
        while True:  # serve callbacks until the next publish is due
            now = time.perf_counter()
            if now >= due:
                break
            ex.spin_once(timeout_sec=min(due - now, 0.001))
        driver.publish()
        due += period
        if due < now + 0.5 * period:
            due, late = now + 0.5 * period, late + 1
    end = time.perf_counter() + 0.5
    while time.perf_counter() < end:
        ex.spin_once(timeout_sec=0.01)
    out = _stats(driver, n)
    out["driver_late"] = late
    return out


def run_pingpong(ex, driver: Driver, seconds: float) -> dict:
    """Next state published as soon as the previous answer is back: latency without queueing and the
    highest rate the node sustains."""
    n = 0
    t_end = time.perf_counter() + seconds
    driver.publish()
    t_pub = time.perf_counter()
    while (now := time.perf_counter()) < t_end:
        # answered, or lost (a best-effort state dropped, e.g. the first one while the graph settles):
        # the next state, so one lost sample does not stall the round
        if not driver.sent or now - t_pub > PINGPONG_LOST:
            driver.sent.clear()
            n += 1
            driver.publish()
            t_pub = time.perf_counter()
        else:
            ex.spin_once(timeout_sec=0.01)
    end = time.perf_counter() + 0.5
    while driver.sent and time.perf_counter() < end:
        ex.spin_once(timeout_sec=0.01)
    return _stats(driver, n + 1)


def wait_graph(ex, driver: Driver, timeout=20.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if driver.pub.get_subscription_count() >= 1 and driver.sub.get_publisher_count() >= 1 \
                and driver.cmd_sub.get_publisher_count() >= 1 \
                and (driver.inputs is None or driver.inputs.subscribers()):
            for _ in range(50):
                ex.spin_once(timeout_sec=0.01)
            return
        ex.spin_once(timeout_sec=0.05)
    raise TimeoutError("graph did not connect")


def wait_answering(ex, driver: Driver, timeout: float = 60.0) -> None:
    """Probe states every 50 ms until the node answers one (a process can be matched in the graph before it
    spins: on a loaded machine its start-up outlasts a short ping-pong), then forget the probes."""
    end = time.monotonic() + timeout
    n = 0
    while not driver.lat and time.monotonic() < end:
        driver.publish()
        n += 1
        t_next = time.monotonic() + 0.05
        while not driver.lat and time.monotonic() < t_next:
            ex.spin_once(timeout_sec=0.01)
    if not driver.lat:
        raise TimeoutError("the node did not answer")
    driver.reset()
