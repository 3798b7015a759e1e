"""``qv_legged_controller_node``: ``qv_controller_node`` configured for a legged robot.

The node is :class:`~qv_control.ros.controller_node.ControllerNode` (the same watchdog and safe output, stamp
checks, joint-state/odometry pairing with counts, ``/diagnostics``, parameter table and validation) with two
defaults of its own:

* ``law`` empty means ``legged`` (:class:`~qv_control.laws.legged.LeggedLaw` through
  :func:`qv_control.make_law`; its parameters as ``law_params.*``: ``feet``, ``plan`` (YAML text of
  :func:`qv_control.gait.plan_from_spec`), ``kp``, ``kd``, ``ki``, ``kp_swing``, ``mu``, ``f_min``,
  ``rotation_reference``, ``joint_friction`` ...);
* without ``law_params.plan`` the law follows the ``plan`` mapping of the model config (``model_config``).

The base comes from ``odom_topic`` (nav_msgs/Odometry, REP 105: pose in the world frame, twist in the base
frame), paired with ``/joint_states`` within ``sync_tolerance``. ``qv_controller_node`` with ``law: legged``
and the same parameters runs the same law (the plan then from ``law_params.plan`` only).
"""
from __future__ import annotations

import sys

from qv_dynamics.ros.params import resolve_config_path
from qv_dynamics.ros.params_file import named_path
from qv_dynamics.yamlio import load_yaml

from .controller_node import ControllerNode

LEGGED = "legged"


class LeggedControllerNode(ControllerNode):
    """:class:`ControllerNode` with the legged defaults of the module doc; ``system`` and ``law`` may be
    given in-process as there."""

    def __init__(self, node_name: str = "qv_legged_controller", **kwargs):
        super().__init__(node_name, **kwargs)

    def _build_law(self, law_changes: dict | None = None, name: str | None = None):
        name = self.get_parameter("law").value if name is None else name
        return super()._build_law(law_changes, name or LEGGED)

    def _law_params(self, overrides: dict | None = None) -> dict:
        params = super()._law_params(overrides)
        if "plan" not in params and (self.get_parameter("law").value or LEGGED) == LEGGED:
            plan = self._model_plan()
            if plan is not None:
                params["plan"] = plan
        return params

    def _model_plan(self):
        """The ``plan`` mapping of the model config (found as the node found it), or None."""
        path, base = named_path(self, "model_config")
        if not path:
            return None
        doc = load_yaml(resolve_config_path(path, base), "model config")
        return doc.get("plan") if isinstance(doc, dict) else None


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_legged_controller_node`` (``--ros-args --params-file config/anymal.yaml``)."""
    from qv_dynamics.ros.runner import run_node

    return run_node("qv_legged_controller_node",
                    lambda: LeggedControllerNode(automatically_declare_parameters_from_overrides=False), argv)


if __name__ == "__main__":
    sys.exit(main())
