"""Contact switching schedules of :func:`~qv_dynamics.sim.simulate`: timed switches and edge-triggered guards.

A schedule entry is ``(t, name, active)``, ``(guard, name, active)`` with ``guard(t, q, qdot) -> float | bool``
(fires when the float crosses from > 0 to ≤ 0, or when the bool turns True, only while the constraint is not
yet in the requested state), or a bare callable ``guard(t, q, qdot) -> [(name, active), ...]``. Guards may take
a 4th argument, the dict ``{row_label: λ}`` of the last step.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import DimensionError, NonFiniteError, QVError


class UserCallableError(QVError):
    """A user callable (controller, torque function, guard) raised: the run stops and keeps its data."""


@dataclass
class SwitchEvent:
    """One schedule entry: ``kind`` is "time", "guard" (one constraint) or "multi" (a list of switches)."""

    kind: str
    name: str | None
    active: bool | None
    t: float = math.inf
    fn: Callable | None = None
    nargs: int = 3
    done: bool = False
    last_value: float | None = None
    armed: bool = False

    def call(self, t: float, q: np.ndarray, qdot: np.ndarray, lam_dict: dict):
        """The guard's raw value; any exception becomes a :class:`UserCallableError` naming the guard."""
        try:
            args = (t, q.copy(), qdot.copy()) + ((dict(lam_dict),) if self.nargs == 4 else ())
            return self.fn(*args)
        except Exception as exc:  # noqa: BLE001 - a user callable failed: report it, keep the data
            who = f"guard for '{self.name}'" if self.name else "guard"
            raise UserCallableError(f"{who} raised {type(exc).__name__} at t = {t:.6g} s: {exc}") from exc

    def value(self, t: float, q: np.ndarray, qdot: np.ndarray, lam_dict: dict) -> tuple[float | None, bool]:
        """(guard value or None for a bool guard, hit): hit when the value is ≤ 0 or the bool is True."""
        val = self.call(t, q, qdot, lam_dict)
        if isinstance(val, (bool, np.bool_)):
            return None, bool(val)
        try:
            f = float(val)
        except (TypeError, ValueError):
            raise UserCallableError(f"guard for '{self.name}' returned {val!r}; expected a float or a bool") from None
        if not math.isfinite(f):
            raise NonFiniteError(f"guard for '{self.name}' returned {f} at t = {t:.6g} s")
        return f, f <= 0.0


def parse_schedule(system, schedule) -> list[SwitchEvent]:
    """The :class:`SwitchEvent` list of a schedule; unknown constraint names and non-finite times raise here."""
    events: list[SwitchEvent] = []
    for i, item in enumerate(schedule or []):
        if callable(item):
            events.append(SwitchEvent("multi", None, None, fn=item, nargs=positional_arity(item)))
            continue
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise DimensionError(f"schedule[{i}]: expected (t | guard, constraint_name, active) or a callable")
        when, name, active = item
        system.constraint(name)  # UnknownNameError early
        if callable(when):
            events.append(SwitchEvent("guard", name, bool(active), fn=when, nargs=positional_arity(when)))
        else:
            tt = float(when)
            if not math.isfinite(tt):
                raise NonFiniteError(f"schedule[{i}]: switching time must be finite")
            events.append(SwitchEvent("time", name, bool(active), t=tt))
    return events


def positional_arity(fn: Callable) -> int:
    """4 when a guard takes the λ dict as 4th positional argument (or *args), else 3."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 3
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return 4
    return 4 if len([p for p in params if p.default is p.empty]) >= 4 else 3
