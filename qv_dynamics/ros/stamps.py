"""Admission of stamped messages by their header stamp (SPEC §6).

A message older than the last accepted one (reordered, replayed, a second publisher) or stamped ahead of
the node's clock by more than a tolerance (a wrong clock, a corrupted stamp) is dropped and counted: one
future stamp must not become the reference every later message is measured against. The gate restarts
when the node's clock jumps back behind the last accepted stamp (a simulator or a bag replay restarted).
"""
from __future__ import annotations

import math

OLD = "old_stamp"
FUTURE = "future_stamp"


class StampGate:
    """``check(t_msg, t_now)`` -> None (accept) or the reject kind (:data:`OLD`, :data:`FUTURE`).

    ``future_tolerance`` [s]: how far ahead of ``t_now`` a stamp may be (transport and clock offsets);
    ``t_now <= 0`` (a simulated clock that has not started) skips that test."""

    def __init__(self, future_tolerance: float = 0.5):
        if not (isinstance(future_tolerance, (int, float)) and math.isfinite(future_tolerance)
                and future_tolerance >= 0.0):
            from ..errors import ModelError

            raise ModelError(f"stamp_future_tolerance must be a number of seconds >= 0, got {future_tolerance!r}")
        self.future_tolerance = float(future_tolerance)
        self.t_last: float | None = None

    def check(self, t_msg: float, t_now: float) -> str | None:
        if not math.isfinite(t_msg):
            return FUTURE
        if t_now > 0.0 and t_msg > t_now + self.future_tolerance:
            return FUTURE
        last = self.t_last
        if last is not None and t_msg < last:
            if t_now > 0.0 and t_now < last - self.future_tolerance:
                self.t_last = None  # the clock itself went back: a restarted simulation
            else:
                return OLD
        self.t_last = t_msg
        return None

    def reset(self) -> None:
        self.t_last = None


def stamp_reason(kind: str, t_msg: float, t_now: float, t_last: float | None, tol: float) -> str:
    """One log line for a dropped stamp."""
    if kind == OLD:
        return f"stamp {t_msg:.6f} s is older than the last accepted {t_last:.6f} s"
    return f"stamp {t_msg:.6f} s is ahead of the node clock {t_now:.6f} s by more than {tol:g} s"


__all__ = ["StampGate", "OLD", "FUTURE", "stamp_reason"]
