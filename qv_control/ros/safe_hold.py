"""The safe output of ``qv_controller_node`` (SPEC §6) and where the node sends it.

The math is :class:`qv_control.safe_output.SafeOutput` (no rclpy); ``safe_mode`` picks it:

- ``hold``: the damped joint hold τ = g(q) + M₀(ω²(q_h ⊖ q) − 2ζω q̇) about the pose latched at the first safe
  state of an episode (q̇ = 0 on the stale-state path, where no velocity is known);
- ``gravity``: τ = g(q_last) (the arm floats and drifts with what momentum and model error it has);
- ``zero``: no effort (a floating base standing on its legs).

With a contact task the safe output is always ``hold``, its pose lifted by ``task.retract`` along the surface
normal at the tool frame: the press stops at the first safe state and the tool comes off the surface; the
task's hold (force limit, approach window, silent F/T, ``~/hold``, a failed law) sends it every state until
``~/reset``.

It is sent on a stale /joint_states (the watchdog; with the last pose and no velocity it floats the arm
where it was last seen, τ = g(q), and a task pressing on the surface goes to its hold), on every state whose
law fails to compute (counted in ``law_failures``; with a task the task goes to its hold), and while a task
holds. A λ_d whose size no longer
matches the active constraint rows (they changed under it) is dropped and counted, never handed to the law.
"""
from __future__ import annotations

import numpy as np

from ..safe_output import SafeOutput


class SafeHoldMixin:
    """The node's safe output (module doc); a mixin of :class:`~.controller_node.ControllerNode`."""

    _safe: SafeOutput | None = None

    def safe_torque(self, qdot: np.ndarray | None = None) -> np.ndarray:
        """The safe output at the last state (``qdot`` None: unknown)."""
        if self._safe is None:
            self._safe = SafeOutput(self.system)
        layer = self.task_layer
        if layer is None:
            return self._safe.torque(self.safe_mode, self.q_last, qdot)
        return self._safe.torque("hold", self.q_last, qdot, layer.task.cfg.retract, layer.frame)

    def publish_safe(self, qdot: np.ndarray | None = None) -> None:
        self.stats["safe_commands"] += 1
        self._tau_sent = self.safe_torque(qdot)
        self.pub_cmd.publish(self.cmd_map.to_message(self._tau_sent))

    def law_failed(self, t: float, reason: str, qdot: np.ndarray | None) -> None:
        """A state the law could not answer (already counted): the task's hold, the safe output."""
        if self.task_layer is not None:
            self.task_layer.safe_hold(t, f"control law failed: {reason}")
        self.publish_safe(qdot)

    def stale_in_contact(self, age: float) -> None:
        """The watchdog fired: a task pressing on the surface goes to its hold (it cannot press on blind; when
        the states return, the hold lifts off from where the tool is)."""
        layer = self.task_layer
        if layer is not None and self.system.constraint(layer.contact).active:
            layer.safe_hold(None, f"joint states stale for {age:.3f} s in contact")

    def law_ok(self) -> None:
        """The law answered: the next safe state latches its pose anew."""
        if self._safe is not None:
            self._safe.release()

    def lambda_d_fits(self) -> bool:
        """λ_d has one value per active constraint row; else it is dropped and counted (module doc)."""
        rows = self.system.row_labels
        if self.lambda_d.size == len(rows):
            return True
        self.rejects["lambda_desired"].reject("size", f"lambda_desired dropped: {self.lambda_d.size} value(s) "
                                              f"for the active rows {list(rows)}")
        self.lambda_d = None
        return False
