"""Constraint specifications (SPEC §3): mappings in Python and YAML alike, one class per ``type``::

    {type: point_contact, frame: tool0, axes: [x, y, z], position: [..]}
    {type: weld, frame: tool0}                           # six rows: x y z rx ry rz
    {type: loop_closure, frame_a: a, frame_b: b, axes: [x, z]}
    {type: custom, function: callable(q, qdot) -> (phi, A, Adot_qdot), rows: k}
"""
from __future__ import annotations

from typing import Sequence

from ..errors import ModelError
from .base import Constraint
from .custom import CustomConstraint
from .loop_closure import LoopClosure
from .point_contact import PointContact
from .weld import Weld

CONSTRAINT_TYPES: dict[str, type[Constraint]] = {
    cls.kind: cls for cls in (PointContact, Weld, LoopClosure, CustomConstraint)}
KINDS = tuple(CONSTRAINT_TYPES)


def constraint_from_mapping(spec, index: int = 0) -> Constraint:
    """Build a :class:`Constraint` from a dict (YAML/Python); raise ModelError with the reason."""
    if isinstance(spec, Constraint):
        return spec
    if not isinstance(spec, dict):
        raise ModelError(f"constraint #{index}: expected a mapping, got {type(spec).__name__}")
    d = dict(spec)
    kind = d.pop("type", None)
    if kind not in CONSTRAINT_TYPES:
        raise ModelError(f"constraint #{index}: type must be one of {KINDS}, got {kind!r}")
    c = CONSTRAINT_TYPES[kind].from_mapping(d, index)
    c.name = str(d.pop("name", f"{kind}_{c.frame}" if c.frame else f"{kind}_{index}"))
    if d:
        raise ModelError(f"constraint #{index} ({kind}): unknown keys {sorted(d)}")
    return c


def parse_constraints(specs: Sequence) -> list[Constraint]:
    cons = [constraint_from_mapping(s, i) for i, s in enumerate(specs or [])]
    names = [c.name for c in cons]
    dup = {n for n in names if names.count(n) > 1}
    for n in dup:  # same contact listed twice is legal (redundant constraints): make names unique
        k = 0
        for c in cons:
            if c.name == n:
                c.name = f"{n}#{k}"
                k += 1
    return cons
