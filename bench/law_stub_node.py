"""The controller node of a module (``qv_control.ros.controller_node`` or ``.legged_controller_node``) with its
law's compute replaced by a constant zero torque and no latency prediction: everything the node does per state
(inputs, stamps, pairing, λ rotation, lifecycle, reference, outputs) but the law. bench/ros_latency.py
``--law-stub`` runs it beside the echo node with the same inputs: the ratio of their CPU per command is what
the node contributes.

    python bench/law_stub_node.py qv_control.ros.controller_node --ros-args ...
"""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def stub(node_class) -> None:
    """``node_class.configure_core`` then the law's compute made a constant zero torque, the predictor off."""
    configure = node_class.configure_core

    def configure_core(self, *args, **kwargs):
        configure(self, *args, **kwargs)
        tau = np.zeros(self.system.nv)
        self.law.compute = lambda state, reference: tau
        self.predictor = None

    node_class.configure_core = configure_core


if __name__ == "__main__":
    module = importlib.import_module(sys.argv[1])
    from qv_control.ros.controller_node import ControllerNode

    stub(ControllerNode)
    sys.argv[1:2] = []       # the node's own arguments: --ros-args ...
    sys.exit(module.main())
