"""Constraint specifications (SPEC §3): mappings in Python and YAML alike, one class per ``type``::

    {type: point_contact, frame: tool0, axes: [x, y, z], position: [..]}
    {type: weld, frame: tool0}                           # six rows: x y z rx ry rz
    {type: loop_closure, frame_a: a, frame_b: b, axes: [x, z]}
    {type: custom, function: callable(q, qdot) -> (phi, A, Adot_qdot), rows: k}
"""
from __future__ import annotations

from typing import Sequence

from ..errors import ModelError, check_keys
from .base import COMMON_KEYS, Constraint
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
    cls = CONSTRAINT_TYPES[kind]
    check_keys(f"constraint #{index} ({kind})", d, [k for k in COMMON_KEYS + cls.keys if k != "type"])
    c = cls.from_mapping(d, index)
    c.explicit_name = "name" in d
    c.name = str(d.pop("name", f"{kind}_{c.frame}" if c.frame else f"{kind}_{index}"))
    if not c.name.strip() or "," in c.name:
        raise ModelError(f"constraint #{index} ({kind}): name {c.name!r} must be non-empty and without ',' (row "
                         "labels are '<name>.<axis>', listed comma-separated in λ_d messages)")
    if d:
        raise ModelError(f"constraint #{index} ({kind}): unknown keys {sorted(d)}")
    return c


def parse_constraints(specs: Sequence) -> list[Constraint]:
    """Constraints from mappings. Names given by the user must be unique (ModelError: they address
    ``set_active``, ``wrench_constraints`` and λ_d labels); a generated name repeated (the same contact
    listed twice without names: redundant rows) gets a suffix ``#k``."""
    cons = [constraint_from_mapping(s, i) for i, s in enumerate(specs or [])]
    names = [c.name for c in cons]
    dup = sorted({c.name for c in cons if c.explicit_name and names.count(c.name) > 1})
    if dup:
        raise ModelError(f"constraint name(s) {dup} used twice (names must be unique: they address set_active, "
                         "wrench_constraints and λ_d labels)")
    for n in {n for n in names if names.count(n) > 1}:
        k = 0
        for c in cons:
            if c.name == n:
                c.name = f"{n}#{k}"
                k += 1
    return cons
