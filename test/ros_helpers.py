"""rclpy utilities shared by the ROS test modules (and bench/ros_latency.py): an isolated context with a probe
node, bounded spinning, node processes stopped.

Import after ``pytest.importorskip("rclpy")``.
"""
from __future__ import annotations

import signal
import subprocess
import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

import rclpy
from rclpy.context import Context

from qv_dynamics.ros.runner import make_executor


@contextmanager
def ros_session(domain_id: int, probe_name: str) -> Iterator[tuple]:
    """An rclpy context of its own on ``domain_id``, an executor and a probe node added to it.

    Yields (context, executor, probe); shuts the three down afterwards."""
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    ex = make_executor(ctx)
    probe = rclpy.create_node(probe_name, context=ctx)
    ex.add_node(probe)
    try:
        yield ctx, ex, probe
    finally:
        ex.shutdown()
        probe.destroy_node()
        rclpy.try_shutdown(context=ctx)


def spin_until(ex, cond: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Spin ``ex`` until ``cond()`` holds or ``timeout`` seconds pass; returns the final ``cond()``. The default
    is a cap for a handshake that fails (a loaded machine may take seconds), not a duration: a wait that
    must last use ``lambda: False`` with its own timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        ex.spin_once(timeout_sec=0.01)
    return cond()


def call(ex, client, request, timeout: float = 120.0, resend: float = 5.0,
         alive: Callable[[], bool] = lambda: True):
    """Call a query service (one whose repeated request changes nothing: get_parameters, get_state, ...) once
    it is ready, spinning ``ex`` until answered; the request is sent again after each ``resend`` s without an
    answer (:func:`qv_control.ros.spawner.first_answer`). The reason: a server that has not yet discovered the
    client's response reader drops its answer (rmw_fastrtps waits 100 ms for the match,
    ros2/rmw_fastrtps#390/#467), which a loaded machine makes likely; ``service_is_ready`` only says the client
    found the server. Returns the response, or None when ``timeout`` s pass or ``alive()`` turns False (the
    serving process ended)."""
    from qv_control.ros.spawner import first_answer

    end = time.monotonic() + timeout
    if not spin_until(ex, lambda: client.service_is_ready() or not alive(), timeout) or not alive():
        return None
    return first_answer(ex, client, request, max(end - time.monotonic(), 0.0), resend, alive)


def retire(ex, *nodes) -> None:
    """Take nodes out of a running executor for good: cancel their timers, let already-queued timer events
    drain (rclpy's EventsExecutor may still deliver one after remove_node), then remove and destroy."""
    for n in nodes:
        for t in list(n.timers):
            t.cancel()
    end = time.monotonic() + 0.05
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.005)
    for n in nodes:
        ex.remove_node(n)
        n.destroy_node()


def stop_processes(procs: Iterable[subprocess.Popen], sig: int = signal.SIGINT, timeout: float = 30.0) -> list[tuple]:
    """Send ``sig`` to every process first (they shut down side by side), then reap each within ``timeout`` s,
    killing it after that (never left running): (exit code, or "killed", stdout, stderr) per process, the
    outputs None where not piped."""
    procs = list(procs)
    for p in procs:
        p.send_signal(sig)
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
            out.append((p.returncode, o, e))
        except subprocess.TimeoutExpired:
            p.kill()
            out.append(("killed", *p.communicate()))
    return out


def catches(pid: int, *signals: int) -> bool:
    """True when process ``pid`` has its own handler for every one of ``signals`` (SigCgt of /proc/<pid>/status):
    the kernel's word that the process got as far as installing them (a handshake, no guessed delay)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            mask = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("SigCgt:"))
    except (OSError, StopIteration, ValueError):
        return False
    return all(mask >> (s - 1) & 1 for s in signals)


def wait_until_catching(proc: subprocess.Popen, *signals: int, timeout: float = 120.0) -> None:
    """Block until ``proc`` handles ``signals`` itself (:func:`catches`); AssertionError if it ends first or
    ``timeout`` s pass (polled every millisecond: the handshake, not a delay)."""
    end = time.monotonic() + timeout
    while not catches(proc.pid, *signals):
        assert proc.poll() is None, f"process ended (code {proc.returncode}) before handling {signals}"
        assert time.monotonic() < end, f"process did not handle {signals} within {timeout} s"
        time.sleep(0.001)
