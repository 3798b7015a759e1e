"""One stall of the controller at the start of the descent, replayed exactly: the deployed contact task's
parameters in one process with the MuJoCo plant in lock-step, except that at the first state answered at or
after ``--at`` s into the descent the plant runs ``--gap`` ms on (the controller's last command held, as a
realtime plant does while the controller is descheduled) before it publishes the next state.

The start of the descent is where the realtime runs on a loaded machine struck the table (start pose 1.2 cm
above it): the command answering a state of the descent's first 5 ms carries the profile's acceleration
(2 m/s²); held open loop for 100 ms it takes the tool 1 cm down at 0.2 m/s. Printed per gap: the table's
largest normal force on the tool (MuJoCo's contact force, every control period) with the drives' hold after
``command_timeout`` (the plant's default, 20 ms) and without it (1 s: the command held throughout, as
ros2_control's forward controller and the simulated hardware interfaces do), and the force limit.

    PYTHONPATH=. .venv/bin/python bench/startup_gap.py [--config config/demo_mujoco.yaml] [--gap 50 100 200 320]
        [--at 0.002] [--in-contact]     # the stall --at s after the first touch instead
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")


def run(config: str, gap_ms: float, at: float, timeout: float, domain_id: int,
        contact: bool = False, command_delay: float = 0.0) -> tuple[float, float]:
    """(peak normal force [N], the descent's start [s]) of one lock-step run with one stall (module doc)."""
    import rclpy
    from contact_task import kick, lockstep_nodes
    from rclpy.context import Context

    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.ros.mujoco_node import MujocoNode

    class StallingPlant(MujocoNode):
        """The plant of one run: after its step for the first command answering a state ``at`` s into the
        descent, ``gap_ms`` more steps under that command (the controller's stall, seen from the plant)."""

        task, stalled = None, False

        def on_command(self, msg) -> None:
            super().on_command(msg)
            task = self.task
            if task is None or self.stalled:
                return
            if (not contact and task.phase == "approach" and self.t >= task.t_descent + task.cfg.hold + at) or \
                    (contact and task.t_contact is not None and self.t >= task.t_contact + at):
                self.stalled = True
                self._advance(int(round(gap_ms * 1e-3 / self.dt)))
                self.publish_state()

    P = load_params_file(config)
    ctx = Context()
    rclpy.init(context=ctx, domain_id=domain_id, args=[])
    nodes = []
    try:
        plant, ctrl, ex = lockstep_nodes(ctx, P, StallingPlant, command_delay, command_timeout=timeout)
        nodes += [plant, ctrl]
        task = plant.task = ctrl.task_layer.task
        kick(ex, plant)
        end = time.monotonic() + 120.0
        while time.monotonic() < end and (task.t_contact is None or plant.t < task.t_contact + 0.3 + contact * (
                at + 1e-3 * gap_ms + 0.5)) and task.phase != "hold" and plant.t < 8.0:
            ex.spin_once(timeout_sec=0.1)
        ex.shutdown()
        return plant.contact_peak, task.t_descent + task.cfg.hold
    finally:
        for n in nodes:
            n.destroy_node()
        rclpy.try_shutdown(context=ctx)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", default=str(ROOT / "config" / "demo_mujoco.yaml"))
    ap.add_argument("--gap", type=float, nargs="+", default=[50.0, 100.0, 200.0, 320.0], help="stall lengths [ms]")
    ap.add_argument("--at", type=float, default=0.002, help="the stall's start after the descent's start [s]")
    ap.add_argument("--in-contact", action="store_true", help="--at counts from the first touch instead")
    ap.add_argument("--command-delay", type=float, default=0.0, help="the controller's command_delay (-1: as "
                    "deployed, one measured period while the plant does not report the command as applied)")
    ap.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0") or 0))
    args = ap.parse_args(argv)
    from qv_control.ros.bringup import load_params_file

    c = load_params_file(args.config)["qv_controller"]
    limit = float(c.get("task.force_limit", 3.0)) * float(c.get("task.force", 10.0))
    where = "after the first touch" if args.in_contact else "into the descent"
    print(f"{args.config}: one stall {1e3 * args.at:.0f} ms {where}; force limit {limit:.0f} N; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'stall [ms]':>12s}{'drives hold at 20 ms [N]':>28s}{'command held [N]':>20s}")
    for gap in args.gap:
        hold, _ = run(args.config, gap, args.at, 0.02, args.domain, args.in_contact, args.command_delay)
        held, _ = run(args.config, gap, args.at, 1.0, args.domain, args.in_contact, args.command_delay)
        print(f"{gap:12.0f}{hold:28.1f}{held:20.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
