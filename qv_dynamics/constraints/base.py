"""Constraint specifications (SPEC §3) and their evaluation: Φ(q), A(q) and Ȧ(q, q̇)q̇.

Every kind is a mapping, in Python and YAML alike::

    {type: point_contact, frame: tool0, axes: [x, y, z], position: [..]}
    {type: weld, frame: tool0}                           # six rows: x y z rx ry rz
    {type: loop_closure, frame_a: a, frame_b: b, axes: [x, z]}
    {type: custom, function: callable(q, qdot) -> (phi, A, Adot_qdot), rows: k}

Axes are world-aligned at the frame (Pinocchio's LOCAL_WORLD_ALIGNED), so a row of A is the
world-axis velocity of the frame origin (or world angular velocity), and Ȧq̇ is the matching
classical (not spatial) acceleration at q̈ = 0: d/dt(A q̇) = A q̈ + Ȧ q̇.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..errors import ModelError

AXES = ("x", "y", "z", "rx", "ry", "rz")
KINDS = ("point_contact", "weld", "loop_closure", "custom")


@dataclass
class Constraint:
    """One constraint. ``target`` is the anchored value of the measured quantity:
    a world position (point contact), a world pose as (3,) + (3,3) (weld), or an offset (loop closure)."""

    type: str
    frame: str | None = None
    frame_b: str | None = None
    axes: tuple[str, ...] = ("x", "y", "z")
    name: str = ""
    active: bool = True
    position: np.ndarray | None = None
    rotation: np.ndarray | None = None
    function: Callable | None = None
    rows: int = 0
    explicit_target: bool = False  # position/rotation given by the user (never re-anchored)
    # filled in by ConstrainedSystem
    frame_id: int = -1
    frame_b_id: int = -1
    axis_idx: np.ndarray = field(default_factory=lambda: np.arange(3))

    @property
    def size(self) -> int:
        return self.rows if self.type == "custom" else len(self.axes)

    @property
    def row_labels(self) -> list[str]:
        if self.type == "custom":
            return [f"{self.name}[{i}]" for i in range(self.rows)]
        return [f"{self.name}.{a}" for a in self.axes]


def constraint_from_mapping(spec, index: int = 0) -> Constraint:
    """Build a :class:`Constraint` from a dict (YAML/Python); raise ModelError with the reason."""
    if isinstance(spec, Constraint):
        return spec
    if not isinstance(spec, dict):
        raise ModelError(f"constraint #{index}: expected a mapping, got {type(spec).__name__}")
    d = dict(spec)
    kind = d.pop("type", None)
    if kind not in KINDS:
        raise ModelError(f"constraint #{index}: type must be one of {KINDS}, got {kind!r}")
    default_axes = {"point_contact": ("x", "y", "z"), "weld": AXES, "loop_closure": ("x", "y", "z")}
    axes = tuple(d.pop("axes", default_axes.get(kind, ())))
    for a in axes:
        if a not in AXES:
            raise ModelError(f"constraint #{index}: unknown axis {a!r} (allowed {AXES})")
    if kind == "point_contact" and any(a.startswith("r") for a in axes):
        raise ModelError(f"constraint #{index}: a point contact constrains translations only, got {axes}")
    if len(set(axes)) != len(axes):
        raise ModelError(f"constraint #{index}: repeated axis in {axes}")
    c = Constraint(type=kind, axes=axes)
    c.active = bool(d.pop("active", True))
    if kind in ("point_contact", "weld"):
        c.frame = d.pop("frame", None)
        if not c.frame:
            raise ModelError(f"constraint #{index} ({kind}): 'frame' is required")
    elif kind == "loop_closure":
        c.frame = d.pop("frame_a", d.pop("frame", None))
        c.frame_b = d.pop("frame_b", None)
        if not c.frame or not c.frame_b:
            raise ModelError(f"constraint #{index} (loop_closure): 'frame_a' and 'frame_b' are required")
    else:
        c.function = d.pop("function", None)
        if not callable(c.function):
            raise ModelError(f"constraint #{index} (custom): 'function' must be callable (q, qdot) -> (phi, A, Adot_qdot)")
        c.rows = int(d.pop("rows", 0))
        if c.rows <= 0:
            raise ModelError(f"constraint #{index} (custom): 'rows' must be a positive integer")
    c.explicit_target = "position" in d or "rotation" in d
    if "position" in d:
        c.position = np.asarray(d.pop("position"), dtype=float).reshape(3)
    if "offset" in d:
        c.position = np.asarray(d.pop("offset"), dtype=float).reshape(3)
    if "rotation" in d:
        c.rotation = np.asarray(d.pop("rotation"), dtype=float).reshape(3, 3)
    c.name = str(d.pop("name", f"{kind}_{c.frame or index}" if c.frame else f"{kind}_{index}"))
    if d:
        raise ModelError(f"constraint #{index} ({kind}): unknown keys {sorted(d)}")
    c.axis_idx = np.array([AXES.index(a) for a in c.axes], dtype=int)
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
