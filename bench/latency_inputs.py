"""What bench/ros_latency.py drives a controller with, read from a parameters file: the controller's section
(node name, module), its measured inputs besides /joint_states (``odom_topic``, ``wrench_topics``) and the
states replayed when the file has no ``qv_sim`` section (the library simulator's closed loop needs one):
the model config's initial pose held still (``initial.q``, or ``initial.posture`` standing on the floor).

:class:`InputMessages` publishes, before each joint state and with its stamp, the odometry of the free body
(the state's first 7 + 6 entries, REP 105) and one constant wrench per sensor topic: the controller and the
echo node with the same topics (bench/echo_node.py ``--config``) then receive the same four (or two) messages
per state, as from the plants.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

CONTROLLERS = {"qv_controller": "qv_control.ros.controller_node",
               "qv_legged_controller": "qv_control.ros.legged_controller_node"}


@dataclass
class Setup:
    """The controller of a parameters file (module doc)."""

    config: str
    section: str
    module: str
    params: dict
    odom_topic: str = ""
    wrench_topics: list = field(default_factory=list)
    simulator: bool = False      # a qv_sim section: closed-loop states from the library simulator
    dynamics: bool = False       # a qv_dynamics section: the dynamics node runs beside the controller


def setup(config: str) -> Setup:
    from qv_control.ros.bringup import load_params_file

    P = load_params_file(config)
    section = next((k for k in CONTROLLERS if k in P), None)
    if section is None:
        raise SystemExit(f"{config}: no controller section ({', '.join(CONTROLLERS)})")
    c = P[section]
    return Setup(config, section, CONTROLLERS[section], c, c.get("odom_topic") or "",
                 [t for t in (c.get("wrench_topics") or []) if t], "qv_sim" in P, "qv_dynamics" in P)


def still_states(s: Setup, seconds: float):
    """(system, t, q, q̇) of the model config's initial pose held for ``seconds`` at 1 kHz."""
    from qv_dynamics.ros.params import load_model_config

    system, doc = load_model_config(s.params["model_config"], floating=bool(s.odom_topic))
    init = doc.get("initial") or {}
    if "q" in init:
        q0 = np.asarray(init["q"], float)
    else:
        from qv_dynamics.plants.mujoco_legged import standing_configuration

        q0 = standing_configuration(system, joints=init.get("posture") or {},
                                    penetration=float(init.get("penetration", 0.0)))
    n = int(seconds * 1000)
    return system, 1e-3 * np.arange(n), np.tile(q0, (n, 1)), np.zeros((n, system.nv))


class InputMessages:
    """The odometry and wrench messages sent with each joint state (module doc)."""

    def __init__(self, node, s: Setup, q: np.ndarray, qdot: np.ndarray):
        from builtin_interfaces.msg import Time
        from geometry_msgs.msg import WrenchStamped
        from nav_msgs.msg import Odometry

        from qv_dynamics.ros.odometry import base_to_odometry

        self.odom = [base_to_odometry(Time(), "world", "body", qi[:7], vi[:6]) for qi, vi in zip(q, qdot)] \
            if s.odom_topic else []
        self.pub_odom = node.create_publisher(Odometry, s.odom_topic, 10) if s.odom_topic else None
        self.wrench = WrenchStamped()
        self.wrench.wrench.force.z = 1.0
        self.pub_wrench = [node.create_publisher(WrenchStamped, t, 10) for t in s.wrench_topics]

    def publish(self, k: int, stamp) -> None:
        """The inputs of state ``k`` (of the replayed list) stamped ``stamp``."""
        self.wrench.header.stamp = stamp
        for pub in self.pub_wrench:
            pub.publish(self.wrench)
        if self.pub_odom is not None:
            msg = self.odom[k]
            msg.header.stamp = stamp
            self.pub_odom.publish(msg)

    def subscribers(self) -> bool:
        """Whether every input publisher has a reader."""
        pubs = self.pub_wrench + ([self.pub_odom] if self.pub_odom is not None else [])
        return all(p.get_subscription_count() >= 1 for p in pubs)
