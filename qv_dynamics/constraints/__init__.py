"""Constraint kinds (SPEC §3): one class per kind, each giving Φ(q), A(q) and Ȧq̇."""
from .base import AXES, KINDS, Constraint, constraint_from_mapping, parse_constraints

__all__ = ["AXES", "KINDS", "Constraint", "constraint_from_mapping", "parse_constraints"]
