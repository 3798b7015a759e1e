"""The controller nodes' entry points under the control package's name; the installed executables start at
the top-level :mod:`qv_entry`, which handles signals before any package is imported."""
from __future__ import annotations

from qv_entry import controller_node, legged_controller_node

__all__ = ["controller_node", "legged_controller_node"]
