"""Refuse parameter overrides a node does not declare (a misspelled ``watchdog_timout``).

rclpy's Node with ``allow_undeclared_parameters=False`` silently ignores an override (``--params-file``,
``-p``, ``parameter_overrides=``) whose name it never declares, so a typo in a safety setting would leave
the default in force without a word. :func:`check_parameter_overrides` compares the overrides the node
received with the parameters it declared and raises a ModelError (the node refuses to start, exit code 2)
naming each unknown name and the closest declared one.
"""
from __future__ import annotations

import difflib
from typing import Iterable

from ..errors import ModelError

IGNORED_PREFIXES = ("qos_overrides.",)  # read by rclpy itself when a publisher/subscription is created


def unknown_parameter_overrides(node, dynamic_prefixes: Iterable[str] = ()) -> list[str]:
    """Names given to ``node`` as overrides but never declared (``dynamic_prefixes``: families the node
    declares on demand, e.g. ``law_params.``)."""
    prefixes = tuple(dynamic_prefixes) + IGNORED_PREFIXES
    given = getattr(node, "_parameter_overrides", {}) or {}
    return sorted(n for n in given if not node.has_parameter(n) and not n.startswith(prefixes))


def check_parameter_overrides(node, dynamic_prefixes: Iterable[str] = ()) -> None:
    """ModelError listing the unknown override names with a "did you mean" each."""
    unknown = unknown_parameter_overrides(node, dynamic_prefixes)
    if not unknown:
        return
    declared = sorted(node._parameters)
    parts = []
    for n in unknown:
        close = difflib.get_close_matches(n, declared, n=1, cutoff=0.6)
        parts.append(f"'{n}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    raise ModelError(f"{node.get_name()}: unknown parameter(s) {', '.join(parts)}; "
                     f"this node declares {declared}")


__all__ = ["unknown_parameter_overrides", "check_parameter_overrides"]
