"""``qv_spawner``: drive a managed ``qv_controller_node`` (``managed: true``) to active, as controller_manager's
``spawner`` drives a ros2_control controller: configure, then activate.

    qv_spawner qv_controller [--inactive] [--service-timeout 120] [--activate-timeout 60]

It waits for the node's lifecycle services (``/<node>/get_state``, ``/<node>/change_state``), configures it
if it is unconfigured (the model, the laws and their kernels: seconds), and activates it. The node refuses to
activate until it has a fresh joint state (the robot or the plant is not up yet, or the node's subscription
not yet matched: always right after configure): the spawner then retries every 20 ms (the first command
follows the first state the node reads) for up to ``--activate-timeout`` s. A refusal the node reports as
final in its /diagnostics (``activation_refused_final``: the robot is not at the task's start pose) ends the
spawner at once with the node's reason. Exit codes: 0 the node is active (or inactive with ``--inactive``),
1 it refused or did not answer in time (one line on stderr), 2 a usage error.

A service answer can be lost: a server that has not yet discovered the client's response reader drops it
(rmw_fastrtps waits 100 ms for the match; likely on a loaded machine, seen as a call never answered). So a
``get_state`` is sent again after each ``RESEND`` s without an answer, and a transition left unanswered that
long is checked against the node's state (a node in the transition's goal state took it).
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable

CONFIGURE, ACTIVATE = 1, 3          # lifecycle_msgs/Transition ids
UNCONFIGURED, INACTIVE, ACTIVE = 1, 2, 3   # lifecycle_msgs/State ids
RETRY = 0.02                         # s between activation attempts (the states come within ms of configure)
REFUSAL_WAIT = 0.25                  # s: longest wait for the /diagnostics of a refusal (module doc)
RESEND = 2.0                         # s without an answer before a query is sent again (module doc)
STATE_TIMEOUT = 10.0                 # s: longest wait for the node's get_state answer


def first_answer(ex, client, request, timeout: float, resend: float | None = None,
                 alive: Callable[[], bool] | None = None):
    """Send ``request`` and spin ``ex`` until it is answered: the first answer, or None once ``timeout`` s pass
    or ``alive()`` turns False. With ``resend`` the request is sent again after each ``resend`` s without an
    answer (queries only, whose repetition changes nothing: module doc)."""
    futures = [client.call_async(request)]
    end = time.monotonic() + timeout
    again = time.monotonic() + resend if resend else float("inf")
    while time.monotonic() < end and (alive is None or alive()):
        for f in futures:
            if f.done():
                return f.result()
        if time.monotonic() >= again:
            futures.append(client.call_async(request))
            again += resend
        ex.spin_once(timeout_sec=0.05)
    return next((f.result() for f in futures if f.done()), None)


class Spawner:
    """The lifecycle client of one node (module doc)."""

    def __init__(self, node, target: str, executor):
        from diagnostic_msgs.msg import DiagnosticArray
        from lifecycle_msgs.srv import ChangeState, GetState

        self.node, self.ex = node, executor
        self.target = target if target.startswith("/") else "/" + target
        self.name = self.target.rsplit("/", 1)[-1]
        self.get_state = node.create_client(GetState, f"{self.target}/get_state")
        self.change = node.create_client(ChangeState, f"{self.target}/change_state")
        self.diag: dict[str, str] = {}
        self.diag_count = 0
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, 10)

    def _on_diag(self, msg) -> None:
        for s in msg.status:
            if s.name == f"{self.name}: controller":
                self.diag = {kv.key: kv.value for kv in s.values}
                self.diag_count += 1

    def wait_services(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.get_state.service_is_ready() and self.change.service_is_ready():
                return True
            self.ex.spin_once(timeout_sec=0.05)
        return False

    def state(self, timeout: float = STATE_TIMEOUT) -> int | None:
        from lifecycle_msgs.srv import GetState

        res = first_answer(self.ex, self.get_state, GetState.Request(), timeout, resend=RESEND)
        return None if res is None else res.current_state.id

    def transition(self, tid: int, goal: int, timeout: float) -> bool | None:
        """True/False: the node's answer; None: no answer within ``timeout`` s. Unanswered for ``RESEND`` s,
        the node's state is asked: in ``goal`` it took the transition (its answer was lost: module doc)."""
        from lifecycle_msgs.srv import ChangeState

        req = ChangeState.Request()
        req.transition.id = tid
        future = self.change.call_async(req)
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            wait = time.monotonic() + min(RESEND, left)
            while not future.done() and time.monotonic() < wait:
                self.ex.spin_once(timeout_sec=0.05)
            if not future.done() and self.state(min(RESEND, max(end - time.monotonic(), 0.05))) == goal:
                return True
            if future.done():
                return bool(future.result().success)
        return None

    def refusal(self, since: int, wait: float = REFUSAL_WAIT) -> tuple[str, bool]:
        """The node's last activation refusal from its /diagnostics (it publishes one at each refusal; right
        after configure this subscription may not be matched to the publisher the node just created: the
        refusal is then read at a later attempt)."""
        end = time.monotonic() + wait
        while self.diag_count <= since and time.monotonic() < end:
            self.ex.spin_once(timeout_sec=0.05)
        return self.diag.get("activation_refused", ""), self.diag.get("activation_refused_final", "0") == "1"


def spawn(sp: Spawner, inactive: bool, service_timeout: float, activate_timeout: float) -> tuple[int, str]:
    """(exit code, message) of the module doc."""
    if not sp.wait_services(service_timeout):
        return 1, f"no lifecycle services of {sp.target} within {service_timeout:g} s (is the node running?)"
    state = sp.state()
    if state is None:
        return 1, f"{sp.target} did not answer get_state within {STATE_TIMEOUT:g} s"
    if state == UNCONFIGURED:
        ok = sp.transition(CONFIGURE, INACTIVE, service_timeout)
        if not ok:
            return 1, (f"{sp.target} refused to configure (its log names the reason)" if ok is False else
                       f"{sp.target} did not answer configure within {service_timeout:g} s")
        state = INACTIVE
    if inactive or state == ACTIVE:
        return 0, f"{sp.target} is {'active' if state == ACTIVE else 'inactive'}"
    end = time.monotonic() + activate_timeout
    reason = ""
    while True:
        seen = sp.diag_count
        ok = sp.transition(ACTIVATE, ACTIVE, 10.0)
        if ok:
            return 0, f"{sp.target} is active"
        reason, final = sp.refusal(seen)
        if final or time.monotonic() >= end:
            return 1, f"{sp.target} refused to activate: {reason or 'no answer'}"
        t = time.monotonic() + RETRY
        while (left := t - time.monotonic()) > 0:
            sp.ex.spin_once(timeout_sec=left)


def main(argv: list[str] | None = None) -> int:
    """Entry point ``qv_spawner`` (module doc)."""
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from rclpy.utilities import remove_ros_args

    from qv_dynamics.ros.runner import make_executor

    args_in = sys.argv if argv is None else ["qv_spawner", *argv]
    ap = argparse.ArgumentParser(prog="qv_spawner", description=__doc__.split("\n\n")[0])
    ap.add_argument("node", help="the managed controller node, e.g. qv_controller or /ns/qv_controller")
    ap.add_argument("--inactive", action="store_true", help="configure only (leave it inactive)")
    ap.add_argument("--service-timeout", type=float, default=120.0, help="wait for the services and configure [s]")
    ap.add_argument("--activate-timeout", type=float, default=60.0, help="retry activation this long [s]")
    args = ap.parse_args(remove_ros_args(args_in)[1:])
    rclpy.init(args=args_in)
    node = rclpy.create_node(f"qv_spawner_{args.node.strip('/').replace('/', '_')}")
    ex = make_executor(node.context)
    ex.add_node(node)
    print(f"qv_spawner: waiting for the lifecycle services of {args.node}", flush=True)
    try:
        code, msg = spawn(Spawner(node, args.node, ex), args.inactive, args.service_timeout, args.activate_timeout)
    except (KeyboardInterrupt, ExternalShutdownException):     # SIGINT / SIGTERM (rclpy's handlers): one line
        code, msg = 1, f"stopped by a signal before {args.node} was active"
    except Exception:  # noqa: BLE001 - rcl calls on a context a signal shut down meanwhile fail with RCLError
        if node.context.ok():
            raise
        code, msg = 1, f"stopped by a signal before {args.node} was active"
    finally:
        ex.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    print(f"qv_spawner: {msg}", file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    sys.exit(main())
