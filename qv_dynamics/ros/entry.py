"""Console entry points of the nodes (setup.py ``console_scripts``; ``ros2 run`` / ``ros2 launch`` start these).

SIGINT and SIGTERM end a node with exit code 0 from its first instruction on: also while its module (numpy,
Pinocchio, rclpy, the numba kernels: ~0.4 s) is still being imported, where Python's default SIGINT handler
would print a KeyboardInterrupt traceback and exit with 1. Once the node runs, the runner's handlers take over
(:mod:`qv_dynamics.ros.runner`: teardown, then exit 0). Standard library only, as the package ``__init__`` it
imports (:mod:`qv_dynamics.lazy`).
"""
from __future__ import annotations

import importlib
import os
import signal


def run_entry(module: str, name: str, mujoco: bool = False) -> int:
    """Install the start-up signal handlers, import ``module`` and return its ``main()``. ``mujoco``: a MuJoCo
    plant, which never renders: ``MUJOCO_GL=disable`` unless the environment chooses (``import mujoco`` would
    otherwise probe GLFW in a child Python process, which prints a BrokenPipeError traceback when this
    process ends during the probe)."""
    if mujoco:
        os.environ.setdefault("MUJOCO_GL", "disable")

    def stop(signum, _frame) -> None:
        try:
            os.write(2, f"{name}: stopped by {signal.Signals(signum).name} while starting\n".encode())
        except OSError:  # nobody reads stderr any more
            pass
        os._exit(0)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    return importlib.import_module(module).main()


def dynamics_node() -> int:
    return run_entry("qv_dynamics.ros.dynamics_node", "qv_dynamics_node")


def sim_node() -> int:
    return run_entry("qv_dynamics.ros.sim_node", "qv_sim_node")


def mujoco_node() -> int:
    return run_entry("qv_dynamics.ros.mujoco_node", "qv_mujoco_node", mujoco=True)


def legged_mujoco_node() -> int:
    return run_entry("qv_dynamics.ros.legged_mujoco_node", "qv_legged_mujoco_node", mujoco=True)


def loop_plant_node() -> int:
    return run_entry("qv_dynamics.ros.loop_plant_node", "qv_loop_plant_node", mujoco=True)
