"""Input health of the nodes (SPEC §6): rejected inputs counted by kind and logged once per episode, and
diagnostic_msgs/DiagnosticArray status messages."""
from __future__ import annotations

from typing import Callable

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from ..errors import DimensionError, NonFiniteError, QVError, UnknownNameError


class EpisodeCounter:
    """Counts rejected inputs by kind and logs one line per *episode* (a run of consecutive rejects of
    that kind, ended by a good input) — SPEC §6 "logged once per episode, never crashes"."""

    def __init__(self, logger, what: str):
        self.logger = logger
        self.what = what
        self.counts: dict[str, int] = {}
        self._open: set[str] = set()
        self.last_reason = ""

    def reject(self, kind: str, reason: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self.last_reason = reason
        if kind not in self._open:
            self._open.add(kind)
            self.logger.warning(f"{self.what}: dropped ({kind}): {reason} [logged once until a good message]")

    def ok(self) -> None:
        if self._open:
            self.logger.info(f"{self.what}: good input again after {sorted(self._open)}")
            self._open.clear()

    def accept(self, parse: Callable, *args):
        """``parse(*args)`` of an incoming message, counted good; None when it raises a QVError (counted as
        a reject of its kind, logged once per episode)."""
        try:
            value = parse(*args)
        except QVError as exc:
            self.reject(reject_kind(exc), str(exc))
            return None
        self.ok()
        return value

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def failing(self) -> bool:
        """True while an episode is open: the last input of this kind was rejected."""
        return bool(self._open)


def reject_kind(exc: Exception) -> str:
    """Short counter name for a rejected input: nonfinite, size, names, model."""
    if isinstance(exc, NonFiniteError):
        return "nonfinite"
    if isinstance(exc, DimensionError):
        return "size"
    if isinstance(exc, UnknownNameError):
        return "names"
    return "model"



def diagnostic_array(stamp: Time, level: int, name: str, message: str, hardware_id: str,
                     values: dict) -> DiagnosticArray:
    """One DiagnosticStatus (floats printed with 6 significant digits) in a stamped DiagnosticArray."""
    status = DiagnosticStatus(level=level, name=name, message=message, hardware_id=hardware_id,
                              values=[KeyValue(key=k, value=f"{v:.6g}" if isinstance(v, float) else str(v))
                                      for k, v in values.items()])
    out = DiagnosticArray()
    out.header.stamp = stamp
    out.status = [status]
    return out

