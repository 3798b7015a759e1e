"""Entry-point boilerplate shared by the ROS nodes (SPEC §5–§6): rclpy init, construct, spin, shut down.

A node that cannot be built from its parameters (a QVError: bad URDF, unknown frame, ...) is refused with a
one-line message on stderr and exit code 2; so is a ``--params-file`` that rcl would answer with a 25-line
traceback or read wrongly, checked before rcl reads it (:func:`~qv_dynamics.ros.params_file.check_ros_args`,
which also remembers the files so relative paths are found next to the file that names them). SIGINT and
SIGTERM end the process with exit code 0 within a fraction of a second in every state (starting, spinning,
watchdog, stopped simulator), without a traceback.
A node that cannot go on (``node.exit_code`` set, e.g. a simulator that stopped for good) ends the spin
with that code after saying why.

Why the signals are handled here and not by rclpy: rclpy's own handlers (``SignalHandlerOptions.ALL``)
only trigger the guard conditions that the wait-set executors watch and chain to Python's SIGINT handler;
the EventsExecutor watches neither while it sits in C++ (measured: it ignored SIGINT and SIGTERM), and
calling into it from another thread deadlocks (``executor.shutdown`` and the ``wake`` of ``destroy_node``
wait for its spin thread, which waits for the GIL). So rclpy is initialised without signal handlers,
Python handlers record the signal, and the main thread spins with ``spin_once(timeout)``: between two
events (at most ``POLL`` s when idle) the handler has run and the loop ends. Teardown then happens on the
spinning thread itself: no callback can run, or publish on a dead context, after the node is destroyed.

Why a signal ends the process with ``os._exit`` (after the teardown above, or at once while the node is
being built), not by returning through Python:
- While starting, an exception raised from the handler lands at an arbitrary bytecode of the
  construction, and library code there does not let it through (seen under load): a C extension's module
  init (pybind11, scipy.spatial) turned it into ``ImportError: initialization failed`` (traceback, exit
  code 1), and elsewhere it was swallowed and the construction ran on for 2.4 s after SIGTERM. Nothing of
  the node exists yet that a peer would miss, so the handler ends the process right there.
- After the teardown, the interpreter's finalization joins the ~20 DDS and executor threads and runs the
  native destructors (one sleeps 100 ms): 0.15-0.5 s measured on this 2-core machine, 1.0-1.4 s with a
  CPU hog beside it, more than the whole budget. Everything that needs an orderly end (executor, node,
  rclpy context, stdio) is closed before.
A teardown that does not finish within ``TEARDOWN_LIMIT`` is a bug, not a wait: faulthandler's watchdog
(a C thread, it needs no GIL) dumps every thread's stack to stderr and ends the process with code 1.

After a signal the node is destroyed on a helper thread that the main thread waits for at most
``NODE_DESTROY_LIMIT``: on a loaded machine, with the simulator stopping beside it, a controller's
``destroy_node`` can fail to return (the stack ends in rclpy's ``destroy_when_not_in_use``, i.e. in the
middleware's node fini), and the watchdog would end it with code 1 after 3 s. A middleware that does not
release the node in time is reported in one line and the process ends with code 0, as the signal asked
(peers then see the node leave when its participant's lease runs out, not at once). That wait is itself
Python: where the blocked native call holds the GIL (a publisher's fini inside the middleware, seen under
load), the main thread cannot return from it either. So the teardown also arms a C-level backstop
(:func:`_exit_backstop`: a POSIX timer whose expiry calls the C library's ``_exit(0)`` on a thread of its
own, no GIL needed) ``BACKSTOP`` s after it starts; the stop line is written before the teardown, so the
output says why the process ended whichever way it does.
"""
from __future__ import annotations

import ctypes
import faulthandler
import gc
import os
import signal
import sys
import threading
from typing import Callable

import rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from ..errors import QVError
from ..linalg import limit_blas_threads
from .params_file import check_ros_args

POLL = 0.05  # s: longest wait in spin_once, so a signal ends an idle node within this time
# The launch files start the dynamics node (an observer: no loop waits for its output) behind this prefix
# (launch argument ``dynamics_prefix``): a lower CPU priority, so where the cores are busy the 1 kHz control
# loop gets them first and the observer receives fewer states, which it counts (``inputs_lost``) and says in
# /diagnostics. Raising one's own nice value needs no privileges. bench/ros_latency.py starts it the same way.
OBSERVER_PREFIX = "nice -n 10"
TEARDOWN_LIMIT = 3.0  # s from the signal: a teardown still running then is dumped and ended (code 1)
NODE_DESTROY_LIMIT = 0.5  # s: after a signal, the longest wait for the middleware to release the node
BACKSTOP = 1.0  # s from the start of a signal's teardown: the C-level _exit(0) (module doc), < TEARDOWN_LIMIT


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


def _flush() -> None:
    """Flush Python's and C's stdio (rcutils logs through C stdio, which os._exit does not flush). Safe inside
    the signal handler: a flush the signal interrupted (a reentrant call) is given up."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (RuntimeError, OSError, ValueError):  # reentrant, closed pipe, closed file: exit all the same
            pass
    ctypes.CDLL(None).fflush(None)


def _say_stopped(name: str, signum: int) -> None:
    """Flush, then write the stop line (with ``os.write``: safe inside the handler)."""
    _flush()
    try:
        os.write(2, f"{name}: stopped by {signal.Signals(signum).name}\n".encode())
    except OSError:  # nobody reads stderr any more
        pass


def _exit_now(name: str, signum: int | None) -> None:
    """End the process with code 0 after a signal: flush, say so (unless ``signum`` is None: said already),
    skip finalization."""
    if signum is None:
        _flush()
    else:
        _say_stopped(name, signum)
    os._exit(0)


class _SigEvent(ctypes.Structure):
    """``struct sigevent`` for SIGEV_THREAD (Linux: value, signo, notify, then the function and attributes
    in a 48-byte union)."""
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int),
                ("function", ctypes.c_void_p), ("attributes", ctypes.c_void_p), ("_pad", ctypes.c_byte * 32)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("interval_s", ctypes.c_long), ("interval_ns", ctypes.c_long),
                ("value_s", ctypes.c_long), ("value_ns", ctypes.c_long)]


def _exit_backstop(after: float) -> bool:
    """Arm a one-shot POSIX timer (CLOCK_MONOTONIC, SIGEV_THREAD) whose expiry calls the C library's
    ``_exit`` with the timer's value 0 on a thread of its own: the process ends with code 0 ``after`` s from
    now even while a native call holds the GIL (module doc). False where the C library does not offer it
    (then only the teardown watchdog remains)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ev = _SigEvent(value=0, signo=0, notify=2,   # SIGEV_THREAD
                       function=ctypes.cast(libc._exit, ctypes.c_void_p).value, attributes=None)
        timer = ctypes.c_void_p()
        if libc.timer_create(1, ctypes.byref(ev), ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC
            return False
        sec, frac = divmod(after, 1.0)
        spec = _ITimerSpec(0, 0, int(sec), int(frac * 1e9))
        return libc.timer_settime(timer, 0, ctypes.byref(spec), None) == 0
    except (AttributeError, OSError):
        return False


class _Signals:
    """SIGINT/SIGTERM handlers for one run: record the signal and arm the teardown watchdog; while the node
    is being built (construction may take seconds), end the process at once."""

    def __init__(self, name: str):
        self.name = name
        self.received: int | None = None
        self.starting = True
        self._old = {s: signal.signal(s, self._handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def _handler(self, signum, _frame) -> None:
        if self.received is None:
            self.received = signum
            faulthandler.dump_traceback_later(TEARDOWN_LIMIT, exit=True)
        if self.starting:
            _exit_now(self.name, signum)

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)


def _destroy(node: Node, name: str, limit: float | None) -> bool:
    """``node.destroy_node()``; with a ``limit`` [s] on a helper thread waited for that long (module doc).
    False (and one line on stderr) when the middleware has not released the node by then."""
    if limit is None:
        node.destroy_node()
        return True
    done = threading.Event()

    def run() -> None:
        try:
            node.destroy_node()
        finally:
            done.set()

    threading.Thread(target=run, name="qv-node-teardown", daemon=True).start()
    if done.wait(limit):
        return True
    print(f"{name}: the middleware did not release the node within {limit} s; ending without it", file=sys.stderr)
    return False


def _spin(node: Node, ex, sig: _Signals) -> int:
    """Spin until a signal, a node-requested exit (``node.exit_code``) or an external shutdown."""
    context = node.context
    while sig.received is None and context.ok():
        ex.spin_once(timeout_sec=POLL)
        code = getattr(node, "exit_code", None)
        if code is not None:
            return int(code)
    return 0


def run_node(name: str, factory: Callable[[], Node], argv: list[str] | None = None,
             on_start: Callable[[Node], None] | None = None) -> int:
    """Run ``factory()`` under rclpy until shutdown; returns the process exit code (0 on an external
    shutdown, 2 if refused at start, ``node.exit_code`` if the node gave up). On SIGINT/SIGTERM it does not
    return: the process ends with code 0 after the teardown (see the module docstring).

    ``argv`` defaults to ``sys.argv`` (ROS arguments: ``--ros-args --params-file config/...yaml``);
    ``on_start(node)`` runs once before spinning. Start-up objects are moved out of the garbage
    collector's generations (``gc.freeze``): shorter collector pauses in the 1 kHz callbacks."""
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    sig = _Signals(name)
    node = ex = None
    code = 0
    try:
        try:  # the parameters files, before rcl reads them (its errors are 25-line tracebacks)
            check_ros_args(argv if argv is not None else sys.argv)
        except QVError as exc:
            print(f"{name}: refused to start: {exc}", file=sys.stderr)
            return 2
        rclpy.init(args=argv if argv is not None else sys.argv, signal_handler_options=SignalHandlerOptions.NO)
        try:
            node = factory()
        except QVError as exc:
            print(f"{name}: refused to start: {exc}", file=sys.stderr)
            return 2
        ex = make_executor(node.context)
        ex.add_node(node)
        if on_start is not None:
            on_start(node)
        gc.collect()
        gc.freeze()
        sig.starting = False
        if sig.received is None:
            code = _spin(node, ex, sig)
    finally:
        sig.starting = False
        said = sig.received
        if said is not None:   # the stop line first, then a teardown that cannot outlast BACKSTOP
            _say_stopped(name, said)
            _exit_backstop(BACKSTOP)
        # the executor first, then the node (rclpy's order): a node destroyed under a live EventsExecutor
        # left it spinning in an event handler's __exit__ at shutdown (seen once in CI, 100 % CPU, no exit)
        if ex is not None:
            ex.shutdown()
        released = node is None or _destroy(node, name, NODE_DESTROY_LIMIT if sig.received is not None else None)
        if released:  # (a context whose node the middleware still holds is left to the process's end)
            rclpy.try_shutdown()
        if sig.received is None:
            sig.restore()
    if sig.received is not None:   # (a signal that came during the teardown is said here)
        _exit_now(name, None if said is not None else sig.received)
    return code


def spin_until_done_or_signal(executor, future, timeout_sec: float | None = None) -> None:
    """``executor.spin_until_future_complete(future)`` for an in-process run (``qv bringup``): SIGINT/SIGTERM
    complete ``future`` (with False) instead of raising KeyboardInterrupt inside a node's callback, where the
    executor would log it with a traceback; once the spin returned, KeyboardInterrupt(<signal name>) is
    raised from here, for the command's one-line answer (:func:`qv_control.cli.guarded`)."""
    caught: list[int] = []

    def handler(signum, _frame) -> None:
        caught.append(signum)
        if not future.done():
            future.set_result(False)

    old = {}
    if threading.current_thread() is threading.main_thread():
        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        executor.spin_until_future_complete(future, timeout_sec=timeout_sec)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if caught:
        raise KeyboardInterrupt(signal.Signals(caught[0]).name)
