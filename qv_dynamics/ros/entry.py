"""The nodes' entry points under the dynamics package's name (a console script or ``python -c`` that imports
them from here). The installed executables start at the top-level :mod:`qv_entry` instead, which handles
SIGINT and SIGTERM before any package ``__init__`` runs; importing this module installs the same handlers
(after ``qv_dynamics/__init__`` and :mod:`qv_dynamics.lazy`, standard library only, were imported).
"""
from __future__ import annotations

from qv_entry import dynamics_node, legged_mujoco_node, loop_plant_node, mujoco_node, run_node, sim_node


def run_entry(module: str, name: str, mujoco: bool = False) -> int:
    """Import the node ``module`` with the start-up signal handlers in place and return its ``main()``
    (:func:`qv_entry.run_node`)."""
    return run_node(module, name, mujoco)


__all__ = ["run_entry", "dynamics_node", "sim_node", "mujoco_node", "legged_mujoco_node", "loop_plant_node"]
