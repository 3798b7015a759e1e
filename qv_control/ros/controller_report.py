"""The /diagnostics report of ``qv_controller_node`` (:class:`ControllerReport`, mixed into
:class:`~qv_control.ros.controller_node.ControllerNode`): counts, timing, latency compensation, the
lifecycle (:mod:`.lifecycle`), the task layer's and the law's counters, rejected inputs by kind; the level
(WARN on rejects, a stale input or an inactive node refused for good; ERROR while the law cannot compute)
and one line of text."""
from __future__ import annotations

import os
import time

from diagnostic_msgs.msg import DiagnosticStatus

from qv_dynamics.ros.health import diagnostic_array


def process_age() -> float | None:
    """Seconds since this process started (Linux: /proc, to the clock tick, 10 ms), None where unknown."""
    try:
        with open("/proc/self/stat") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])   # field 22, starttime [clock ticks after boot]
        with open("/proc/uptime") as f:
            return float(f.read().split()[0]) - start / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class ControllerReport:
    """``publish_diagnostics`` (a 1 s timer of the configured node), ``rejected`` (counts by input) and the
    start-up report (``first_command_report``). The compute figures: ``compute_ms_mean`` / ``compute_ms_max``
    the law's wall time per command (observer, measured λ, latency prediction, law); ``compute_cpu_ms_mean``
    its thread CPU time, sampled every 16th command; ``process_cpu_ms_per_command`` the whole process's CPU
    time (executor and middleware threads included) per command sent over the last diagnostics period and
    ``process_cpu_share`` that CPU time per wall second (1.0: one core)."""

    _first_command_s: float | None = None
    _cpu_mark: tuple[float, float, int] | None = None

    def first_command_report(self) -> None:
        """The first command was sent: how long after the process started (log line and /diagnostics)."""
        age = process_age()
        self._first_command_s = age
        self.get_logger().info("first command sent" + (f" {age:.2f} s after the process started" if age else ""))

    def _process_cpu(self, commands: int) -> dict:
        """Process CPU per command and share of a core since the last call (module doc)."""
        now = (time.monotonic(), time.process_time(), commands)
        mark, self._cpu_mark = self._cpu_mark, now
        if mark is None or now[0] <= mark[0]:
            return {}
        cpu, n = now[1] - mark[1], now[2] - mark[2]
        return {"process_cpu_ms_per_command": 1e3 * cpu / n if n else 0.0,
                "process_cpu_share": cpu / (now[0] - mark[0])}

    def publish_diagnostics(self) -> None:
        st = self.stats
        values = {"commands": st["commands"], "duplicate_states": st["duplicates"], "stale": int(self.stale),
                  "safe_commands": st["safe_commands"], "watchdog_episodes": st["watchdog_episodes"],
                  "compute_ms_mean": st["compute_ms_sum"] / st["commands"] if st["commands"] else 0.0,
                  "compute_cpu_ms_mean": st["compute_cpu_ms_sum"] / st["compute_cpu_samples"]
                  if st["compute_cpu_samples"] else 0.0, "compute_cpu_samples": st["compute_cpu_samples"],
                  **self._process_cpu(st["commands"] + st["safe_commands"]),
                  "first_command_s": "nan" if self._first_command_s is None else f"{self._first_command_s:.2f}",
                  "compute_ms_max": st["compute_ms_max"], "unknown_parameters": len(self.unknown_parameters),
                  "command_delay_ms": 1e3 * self.predictor.lead_now if self.predictor is not None else 0.0,
                  "commands_acted_at_once": getattr(self.predictor, "at_once", 0), "latency_prediction_stopped":
                  int(getattr(self.predictor, "stopped", False)),
                  # the stamp the reference's time counts from (its first state), to the ns: logs align on it
                  "reference_t0_s": "nan" if self.t_first is None else f"{self.t_first:.9f}"}
        values.update(self.lifecycle_values())
        if self.task_layer is not None:
            values.update(self.task_layer.diagnostics())
        values.update(self.law.counters() if callable(getattr(self.law, "counters", None)) else {})  # λ_d projected
        law = self.rejects["law"]
        values["law_failures"] = law.total
        for k, c in self.rejects.items():
            for kind, n in c.counts.items():
                values[f"rejected_{k}_{kind}"] = n
        level = DiagnosticStatus.WARN if (self.stale or self.unknown_parameters
                                          or any(c.total for c in self.rejects.values())) else DiagnosticStatus.OK
        text = f"stale: {self._stale_what()}" if self.stale else "ok"
        level, text = self.lifecycle_status(level, text)
        if law.failing:  # the last compute failed: the node holds the safe output, it is not controlling
            level, text = DiagnosticStatus.ERROR, f"control law cannot compute (safe output): {law.last_reason}"
        self.pub_diag.publish(diagnostic_array(self.get_clock().now().to_msg(), level, f"{self.get_name()}: controller",
                                               text, self.system.name, values))
        st["compute_ms_max"] = 0.0

    def rejected(self, topic: str = "joint_states", kind: str | None = None) -> int:
        return self.rejects[topic].total if kind is None else self.rejects[topic].counts.get(kind, 0)


__all__ = ["ControllerReport"]
