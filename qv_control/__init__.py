"""qv_control: hybrid force/motion control laws (pure numpy) and the controller ROS node.

Each law is a class with ``compute(state, reference) -> tau`` (SPEC §4).
"""
from .state import Reference, State

__all__ = ["State", "Reference"]
