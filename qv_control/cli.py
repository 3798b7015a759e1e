"""The ``qv`` command: ``qv simulate <scenario>``, ``qv bringup <config.yaml>``, ``qv demo``, ``qv inspect``,
``qv conditions``, ``qv formulation``, ``qv export-urdf``, ``qv export-mjcf``, ``qv warm``.

Every command runs under one guard: Ctrl-C (SIGINT) or SIGTERM ends it with one line and exit code 130 / 143,
a bad-input error of the library (:class:`qv_dynamics.errors.QVError`) with one line and exit code 2, and an
``--out`` folder is proved writable (and reserved for this run, :func:`qv_dynamics.runfiles.check_writable`)
before the command computes anything. Standard library only at import: the numeric stack is loaded inside
the guard."""
from __future__ import annotations

import argparse
import importlib
import signal
import sys

# subcommand -> (module, function taking argv); modules are imported only when used
COMMANDS = {
    "simulate": ("qv_dynamics.sim.scenarios", "main", "run a built-in constrained-simulation scenario"),
    "bringup": ("qv_control.ros.bringup", "main", "run sim + dynamics + controller nodes in one process"),
    "demo": ("qv_control.demo.runs", "main", "the main demo: Panda on a MuJoCo table, force + path"),
    "conditions": ("qv_control.demo.conditions_report", "main",
                   "the contact task under real conditions (friction, noise, delay, model error, tool, impacts)"),
    "formulation": ("qv_control.demo.formulation", "main",
                    "the formulation rows: closed chain, passive joint, redundant and singular contacts, per law"),
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
# the report folder of the commands whose ``--out`` default is their module's (checked here when not given)
OUT_DEFAULTS = {
    "demo": "out/demo", "demo anymal": "out/anymal", "demo bimanual": "bimanual_out", "conditions": "out/conditions",
    "formulation": "out/formulation",
}
# commands that write into an ``--out`` folder (the others take ``--out`` never, or as a file: export-*)
OUT_COMMANDS = ("simulate", "bringup", *OUT_DEFAULTS)
# errors that mean a run failed, not that its input was bad: exit code 1
RUN_FAILURES = ("ConvergenceError", "RankDeficiencyError", "NotPositiveDefiniteError")


def out_folder(command: str, rest: list[str]) -> str | None:
    """The ``--out`` folder of ``qv <command> <rest>`` (``--out DIR`` or ``--out=DIR``; the command's default
    when absent), None when the command writes none or is asked for its help. (A scenario name after an
    option taking a value is not recognised: then only an explicit ``--out`` is reserved.)"""
    if command not in OUT_COMMANDS or any(a in ("-h", "--help") for a in rest):
        return None
    out = OUT_DEFAULTS.get(command)
    if command == "simulate":  # sim_out/<scenario>
        names = [a for i, a in enumerate(rest) if not a.startswith("-") and (i == 0 or not rest[i - 1].startswith("-"))]
        out = f"sim_out/{names[0]}" if names else None
    for i, a in enumerate(rest):
        if a == "--out" and i + 1 < len(rest):
            out = rest[i + 1]
        elif a.startswith("--out="):
            out = a[len("--out="):]
    return out or None


DEFER_LIMIT = 0.5  # s: the longest a signal waits for the main thread to leave a ROS node's callback
_state: dict = {"prog": "qv", "first": {}}


def _interrupted(signum, frame):
    """SIGINT/SIGTERM → KeyboardInterrupt(<name>), raised where the main thread is. Inside a callback an
    executor's spin called (a ROS node's subscription in ``qv demo``) the executor would log the exception
    with a traceback: there the signal is sent again 5 ms later until it lands outside the callbacks; after
    0.5 s the process ends at once with the same one line and exit code (the run is abandoned either way).
    Inside an import (a module body running) it ends at once too: an exception there leaves the module
    half-initialized in ``sys.modules``."""
    import os
    import time

    first = _state["first"].setdefault(signum, time.monotonic())
    if _inside_import(frame):  # an exception would leave a module half-initialized (numpy: a recursion at exit)
        _mark_reports(signal.Signals(signum).name)
        sys.stdout.flush()
        print(_interrupted_line(_state["prog"], signal.Signals(signum).name), file=sys.stderr, flush=True)
        os._exit(128 + signum)
    if _inside_spin(frame):
        if time.monotonic() - first < DEFER_LIMIT:
            import threading

            threading.Timer(0.005, os.kill, (os.getpid(), signum)).start()
            return
        _mark_reports(signal.Signals(signum).name)
        sys.stdout.flush()
        print(_interrupted_line(_state["prog"], signal.Signals(signum).name), file=sys.stderr, flush=True)
        os._exit(128 + signum)
    _state["first"].clear()
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _mark_reports(name: str) -> None:
    """The reports this run wrote, marked incomplete (:func:`qv_dynamics.runfiles.mark_interrupted`); nothing to
    do when the module was never imported (no report written)."""
    runfiles = sys.modules.get("qv_dynamics.runfiles")
    if runfiles is not None:
        runfiles.mark_interrupted(name)


def _interrupted_line(prog: str, name: str) -> str:
    return f"{prog}: interrupted ({name}); results of this run are incomplete"


def _inside_import(frame) -> bool:
    """True when ``frame`` or a frame further out runs the import machinery (a module body being executed)."""
    f = frame
    while f is not None:
        if f.f_code.co_filename.startswith("<frozen importlib"):
            return True
        f = f.f_back
    return False


def _inside_spin(frame) -> bool:
    """True when a frame further out than ``frame`` is at a source line that calls an executor's spin
    (``spin_once``, ``spin_until_future_complete``, ``spin``): ``frame`` then runs in a callback it called."""
    import linecache

    f = frame.f_back if frame is not None else None
    while f is not None:
        if ".spin" in linecache.getline(f.f_code.co_filename, f.f_lineno):
            return True
        f = f.f_back
    return False


def main(argv: list[str] | None = None) -> int:
    return guarded("qv", lambda: _main(list(sys.argv[1:] if argv is None else argv)))


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="qv", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=sorted(COMMANDS),
                        help="; ".join(f"{k}: {v[2]}" for k, v in COMMANDS.items()))
    if not argv or argv[0] in ("-h", "--help"):
        parser.print_help()
        return 0
    args = parser.parse_args(argv[:1])
    module, func, _ = COMMANDS[args.command]
    rest = argv[1:]
    command = args.command
    if rest and (command, rest[0]) in SUBCOMMANDS:
        module, func = SUBCOMMANDS[(command, rest[0])]
        command, rest = f"{command} {rest[0]}", rest[1:]
    elif command == "demo" and rest[:1] == ["anymal"]:  # `qv demo` hands it to the legged demo
        command = "demo anymal"
    return guarded(f"qv {command}", lambda: _dispatch(command, module, func, rest))


def _dispatch(command: str, module: str, func: str, rest: list[str]) -> int:
    from qv_dynamics import runfiles
    from qv_dynamics.linalg import limit_blas_threads

    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    runfiles.begin_run()  # the reports this run writes (marked incomplete if a signal ends it)
    out = out_folder(command, rest)
    try:
        if out is not None:  # before any compute: an unwritable or busy folder is refused now
            runfiles.reserve(runfiles.check_writable(out))
        return int(getattr(importlib.import_module(module), func)(rest) or 0)
    finally:
        runfiles.release()  # the folders this command reserved


def guarded(prog: str, run) -> int:
    """``run()``'s exit code; a signal (SIGINT, SIGTERM) → one line, 128 + its number; a bad-input
    :class:`~qv_dynamics.errors.QVError` → one line, 2 (a failed run's: 1)."""
    previous = {}
    _state["prog"] = prog
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, _interrupted)
        except ValueError:  # not the main thread: the caller's handlers stay
            pass
    try:
        return run()
    except KeyboardInterrupt as exc:
        name = str(exc) if str(exc) in ("SIGINT", "SIGTERM") else "SIGINT"
        _mark_reports(name)
        print(_interrupted_line(prog, name), file=sys.stderr)
        return 128 + int(signal.Signals[name])
    except Exception as exc:  # noqa: BLE001 -- only the library's input errors are answered here
        from qv_dynamics.errors import QVError

        if not isinstance(exc, QVError):
            raise
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1 if type(exc).__name__ in RUN_FAILURES else 2
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    sys.exit(main())
