"""Console entry points of the installed executables (setup.py ``console_scripts``: the nodes ``ros2 run`` and
``ros2 launch`` start, and ``qv``).

A top-level module on purpose: the console script imports it before any package of the project, and
importing it installs the start-up handlers of SIGINT and SIGTERM as its first instruction, before the
packages' ``__init__`` (:mod:`qv_dynamics`, :mod:`qv_control`), numpy, Pinocchio, rclpy and the numba kernels
are loaded (~0.4 s, seconds under ``nice`` on a loaded machine), where Python's default handler would print a
KeyboardInterrupt traceback. A signal then ends the process with one line: exit code 0 for a node (as once
it runs: :mod:`qv_dynamics.ros.runner`), 128 + the signal's number for ``qv`` (as :func:`qv_control.cli.guarded`).
Once started, the node's runner or the command's guard takes over. Standard library only.
"""
import os
import signal
import sys

_PROG = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "qv_ros", 0]  # (name, exit code)


def _stop(signum, _frame) -> None:
    try:
        os.write(2, f"{_PROG[0]}: stopped by {signal.Signals(signum).name} while starting\n".encode())
    except OSError:  # nobody reads stderr any more
        pass
    os._exit(_PROG[1] if _PROG[1] == 0 else 128 + signum)


for _sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(_sig, _stop)


def run_node(module: str, name: str, mujoco: bool = False) -> int:
    """Import the node ``module`` (signals answered meanwhile: exit 0) and return its ``main()``. ``mujoco``:
    a MuJoCo plant, which never renders: ``MUJOCO_GL=disable`` unless the environment chooses (``import
    mujoco`` would otherwise probe GLFW in a child Python process, which prints a BrokenPipeError traceback
    when this process ends during the probe)."""
    import importlib

    _PROG[:] = [name, 0]
    if mujoco:
        os.environ.setdefault("MUJOCO_GL", "disable")
    return importlib.import_module(module).main()


def dynamics_node() -> int:
    return run_node("qv_dynamics.ros.dynamics_node", "qv_dynamics_node")


def sim_node() -> int:
    return run_node("qv_dynamics.ros.sim_node", "qv_sim_node")


def mujoco_node() -> int:
    return run_node("qv_dynamics.ros.mujoco_node", "qv_mujoco_node", mujoco=True)


def legged_mujoco_node() -> int:
    return run_node("qv_dynamics.ros.legged_mujoco_node", "qv_legged_mujoco_node", mujoco=True)


def loop_plant_node() -> int:
    return run_node("qv_dynamics.ros.loop_plant_node", "qv_loop_plant_node", mujoco=True)


def controller_node() -> int:
    return run_node("qv_control.ros.controller_node", "qv_controller_node")


def legged_controller_node() -> int:
    return run_node("qv_control.ros.legged_controller_node", "qv_legged_controller_node")


def spawner() -> int:
    return run_node("qv_control.ros.spawner", "qv_spawner")


def qv() -> int:
    """``qv``: a signal before the command's guard is in place ends it with one line and 128 + its number."""
    _PROG[:] = ["qv", 1]
    from qv_control.cli import main

    return main()
