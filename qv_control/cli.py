"""The ``qv`` command: ``qv simulate <scenario>``, ``qv bringup <config.yaml>``, ``qv demo``, ``qv inspect``,
``qv export-urdf``, ``qv export-mjcf``, ``qv warm``."""
from __future__ import annotations

import argparse
import importlib
import sys

from qv_dynamics.linalg import limit_blas_threads

# subcommand -> (module, function taking argv); modules are imported only when used
COMMANDS = {
    "simulate": ("qv_dynamics.sim.scenarios", "main", "run a built-in constrained-simulation scenario"),
    "bringup": ("qv_control.ros.bringup", "main", "run sim + dynamics + controller nodes in one process"),
    "demo": ("qv_control.demo.runs", "main", "the main demo: Panda on a MuJoCo table, force + path"),
    "conditions": ("qv_control.demo.conditions_report", "main",
                   "the contact task under real conditions (friction, noise, delay, model error, tool, impacts)"),
    "inspect": ("qv_dynamics.describe", "main", "print the quasi-velocity decomposition of a robot"),
    "export-urdf": ("qv_dynamics.plants.export", "main_urdf", "URDF for ros2_control mock / Gazebo / MuJoCo"),
    "export-mjcf": ("qv_dynamics.plants.export", "main_mjcf", "MJCF (robot + scene) of a model config"),
    "warm": ("qv_dynamics.kernels.loader", "main",
             "compile the numba kernels into their disk cache (once per install)"),
}
# (command, first argument) -> (module, function): demos other than the main one, e.g. ``qv demo bimanual``
SUBCOMMANDS = {
    ("demo", "bimanual"): ("qv_control.demo.bimanual_report", "main"),
}


def main(argv: list[str] | None = None) -> int:
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="qv", description=__doc__)
    parser.add_argument("command", choices=sorted(COMMANDS),
                        help="; ".join(f"{k}: {v[2]}" for k, v in COMMANDS.items()))
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    args = parser.parse_args(argv[:1])
    module, func, _ = COMMANDS[args.command]
    rest = argv[1:]
    if rest and (args.command, rest[0]) in SUBCOMMANDS:
        module, func = SUBCOMMANDS[(args.command, rest[0])]
        rest = rest[1:]
    return int(getattr(importlib.import_module(module), func)(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
