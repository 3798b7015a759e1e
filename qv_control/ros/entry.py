"""Console entry points of the controller nodes: signals handled from the first instruction on, as for the
dynamics package's nodes (:mod:`qv_dynamics.ros.entry`)."""
from __future__ import annotations

from qv_dynamics.ros.entry import run_entry


def controller_node() -> int:
    return run_entry("qv_control.ros.controller_node", "qv_controller_node")


def legged_controller_node() -> int:
    return run_entry("qv_control.ros.legged_controller_node", "qv_legged_controller_node")
