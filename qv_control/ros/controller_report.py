"""The /diagnostics report of ``qv_controller_node`` (:class:`ControllerReport`, mixed into
:class:`~qv_control.ros.controller_node.ControllerNode`): counts, timing, latency compensation, the
lifecycle (:mod:`.lifecycle`), the task layer's and the law's counters, rejected inputs by kind; the level
(WARN on rejects, a stale input or an inactive node refused for good; ERROR while the law cannot compute)
and one line of text."""
from __future__ import annotations

from diagnostic_msgs.msg import DiagnosticStatus

from qv_dynamics.ros.health import diagnostic_array


class ControllerReport:
    """``publish_diagnostics`` (a 1 s timer of the configured node) and ``rejected`` (counts by input)."""

    def publish_diagnostics(self) -> None:
        st = self.stats
        values = {"commands": st["commands"], "duplicate_states": st["duplicates"], "stale": int(self.stale),
                  "safe_commands": st["safe_commands"], "watchdog_episodes": st["watchdog_episodes"],
                  "compute_ms_mean": st["compute_ms_sum"] / st["commands"] if st["commands"] else 0.0,
                  "compute_cpu_ms_mean": st["compute_cpu_ms_sum"] / st["commands"] if st["commands"] else 0.0,
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
