"""Constraint kinds (SPEC §3): an abstract :class:`Constraint` (Φ, A, Ȧq̇) and one class per kind."""
from .base import AXES, Constraint, FrameConstraint
from .custom import CustomConstraint
from .loop_closure import LoopClosure
from .parse import CONSTRAINT_TYPES, KINDS, constraint_from_mapping, parse_constraints
from .point_contact import PointContact
from .weld import Weld

__all__ = ["AXES", "KINDS", "CONSTRAINT_TYPES", "Constraint", "FrameConstraint", "PointContact", "Weld",
           "LoopClosure", "CustomConstraint", "constraint_from_mapping", "parse_constraints"]
