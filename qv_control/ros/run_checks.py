"""When a ``qv bringup`` run is refused before it starts, and when a finished run is a failure.

Refused (exit code 2): a controller ``watchdog_timeout`` that is not a positive number (a lock-step run
raises a valid one to :data:`LOCKSTEP_WATCHDOG`, never an invalid one), a parameter no node declares (a
misspelling that a node would only warn about), and a run that is not alone in its ROS domain: another
process publishing its joint states, commands or clock (a second ``qv bringup`` in the same domain: the two
would feed each other) stops the run, checked before it and every ``FOREIGN_CHECK_STEPS`` steps. Failed
(exit code 1): the control law could not compute on some ticks (the controller held its safe output
instead), or no command came from the law at all.
"""
from __future__ import annotations

import math

from qv_dynamics.errors import ModelError

LOCKSTEP_WATCHDOG = 5.0  # s: controller watchdog in lock-step runs (see Bringup)
FOREIGN_CHECK_STEPS = 100  # simulator steps between two looks for publishers outside the run


def lockstep_watchdog(timeout) -> float:
    """The controller's watchdog in a lock-step run: the configured timeout, raised to LOCKSTEP_WATCHDOG
    (simulated time stands still while the process is descheduled). An invalid timeout is refused."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) \
            or timeout <= 0:
        raise ModelError(f"qv_controller: watchdog_timeout must be a positive number of seconds, got {timeout!r}")
    return max(float(timeout), LOCKSTEP_WATCHDOG)


def refuse_unknown_parameters(nodes) -> None:
    """ModelError naming every parameter of the file that its node does not declare (with the closest name)."""
    unknown = {n.get_name(): n.unknown_parameters for n in nodes if getattr(n, "unknown_parameters", None)}
    if unknown:
        raise ModelError("unknown parameter(s) " + "; ".join(f"{k}: {', '.join(v)}" for k, v in unknown.items()))


def foreign_publishers(node, own: dict[str, int], domain_id: int) -> str | None:
    """Why a run is not alone: a topic of ``own`` ({topic: publishers the run itself has}) with more
    publishers in the ROS graph than that, or None."""
    extra = {t: node.count_publishers(t) - n for t, n in own.items()}
    extra = {t: k for t, k in extra.items() if k > 0}
    if not extra:
        return None
    return (f"another process in ROS domain {domain_id} publishes " +
            ", ".join(f"{t} ({k} publisher{'s' if k > 1 else ''})" for t, k in extra.items()) +
            ": the run would take its messages (a second qv bringup?); give each run its own --domain-id")


def run_failures(summary: dict) -> str | None:
    """Why a finished run is a failure (the control law failed on some ticks, or never commanded), or None."""
    failed = summary.get("law_failures", 0)
    if failed:
        return (f"the control law failed on {failed} of {failed + summary.get('commands', 0)} ticks (safe output "
                f"published instead): {summary.get('law_error', '')}")
    if not summary.get("commands"):
        return "the controller sent no command computed by its law"
    return None


__all__ = ["FOREIGN_CHECK_STEPS", "LOCKSTEP_WATCHDOG", "foreign_publishers", "lockstep_watchdog",
           "refuse_unknown_parameters", "run_failures"]
