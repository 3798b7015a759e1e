"""Entry-point boilerplate shared by the ROS nodes (SPEC §5–§6): rclpy init, construct, spin, shut down.

A node that cannot be built from its parameters (a QVError: bad URDF, unknown frame, ...) is refused with a
one-line message on stderr and exit code 2; Ctrl-C or an external shutdown ends the spin cleanly (exit 0).
"""
from __future__ import annotations

import gc
import sys
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node

from ..errors import QVError
from ..linalg import limit_blas_threads


def make_executor(context=None):
    """rclpy's EventsExecutor when present (~10x lower latency than SingleThreadedExecutor), else the latter."""
    try:
        from rclpy.experimental import EventsExecutor

        return EventsExecutor(context=context)
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)


def publish_if_lockstep(node: Node) -> None:
    """A lock-step plant publishes its initial state, so the controller's first command can step it."""
    if node.mode == "lockstep":
        node.publish_state()


def run_node(name: str, factory: Callable[[], Node], argv: list[str] | None = None,
             on_start: Callable[[Node], None] | None = None) -> int:
    """Run ``factory()`` under rclpy until shutdown; returns the process exit code (0, or 2 if refused).

    ``argv`` defaults to ``sys.argv`` (ROS arguments: ``--ros-args --params-file config/...yaml``);
    ``on_start(node)`` runs once before spinning. Start-up objects are moved out of the garbage
    collector's generations (``gc.freeze``): shorter collector pauses in the 1 kHz callbacks."""
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    rclpy.init(args=argv if argv is not None else sys.argv)
    try:
        node = factory()
    except QVError as exc:
        print(f"{name}: refused to start: {exc}", file=sys.stderr)
        rclpy.try_shutdown()
        return 2
    if on_start is not None:
        on_start(node)
    gc.collect()
    gc.freeze()
    try:
        # rclpy.spin's default executor: it ends cleanly on SIGINT/SIGTERM, which rclpy's EventsExecutor
        # (used by the in-process bringup) did not do here (measured: it kept spinning after SIGTERM)
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
