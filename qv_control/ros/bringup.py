"""``qv bringup <config.yaml>``: the simulator, dynamics and controller nodes in one process (SPEC §5).

For machines without ``ros2 launch``. The config is the same ROS 2 parameters file the launch files use
(``config/planar_3link.yaml``, ``config/slider_crank.yaml``: sections ``qv_sim``, ``qv_dynamics``,
``qv_controller``), so what runs here is what ``ros2 launch qv_ros bringup.launch.py`` runs.

The nodes talk through real rclpy publishers and subscribers (one Context, one executor). By default
the simulator runs in lock-step (one step per effort command, as fast as possible), which makes the
closed loop deterministic and equal to the library's ``simulate`` with the same law and stepper;
``--realtime`` paces it by the wall clock instead.

    qv bringup config/planar_3link.yaml --duration 10 --out runs/arm
    python -m qv_control.ros.bringup config/slider_crank.yaml --duration 10

``--out DIR`` writes ``DIR/summary.json`` (force and motion errors of the run, control rate, counts)
and ``DIR/trajectory.npz``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from qv_dynamics.argtypes import int_in, positive_float
from qv_dynamics.jsonutil import jsonable as _jsonable
from qv_dynamics.linalg import limit_blas_threads

from .params_file import load_params_file, to_parameters  # noqa: F401 - re-exported for in-process runs
from .run_checks import (
    FOREIGN_CHECK_STEPS,
    foreign_publishers,
    lockstep_watchdog,
    refuse_unknown_parameters,
    run_failures,
)

NODE_SECTIONS = ("qv_sim", "qv_dynamics", "qv_controller")


# ------------------------------------------------------------------------------------------ errors


def tracking_errors(law, reference, t: np.ndarray, q: np.ndarray, lam: np.ndarray) -> dict[str, float]:
    """Force and motion errors of a closed-loop run (same definitions for the ROS run and the library run).

    Motion: RMS over time of ‖θ(q) − θ_d(t)‖ (θ = the law's minimal coordinates). Force: RMS over time of
    ‖λ − λ_d(t)‖, and relative to the RMS of ‖λ_d‖ when λ_d ≠ 0."""
    th_err, f_err, f_ref = [], [], []
    theta_fn = getattr(law, "theta", None)
    coords = getattr(law, "coords", None)
    if theta_fn is None and coords is not None:
        zero = np.zeros(law.system.nv)
        theta_fn = lambda qq: coords.evaluate(qq, zero).theta  # noqa: E731
    for i in range(len(t)):
        ref = reference(float(t[i])) if callable(reference) else reference
        if ref is not None and ref.theta is not None and theta_fn is not None:
            th_err.append(float(np.linalg.norm(np.asarray(theta_fn(q[i])) - ref.theta)))
        if lam is not None and lam.shape[1] and np.all(np.isfinite(lam[i])):
            lam_d = np.zeros(lam.shape[1]) if ref is None or ref.lambda_ is None else np.asarray(ref.lambda_)
            f_err.append(float(np.linalg.norm(lam[i] - lam_d)))
            f_ref.append(float(np.linalg.norm(lam_d)))
    rms = lambda x: float(np.sqrt(np.mean(np.square(x)))) if len(x) else float("nan")  # noqa: E731
    out = {"motion_rms_error": rms(th_err), "force_rms_error": rms(f_err)}
    out["force_rms_error_rel"] = out["force_rms_error"] / rms(f_ref) if f_ref and rms(f_ref) > 0 else float("nan")
    return out


# ------------------------------------------------------------------------------------------ bringup


class Bringup:
    """The three nodes on one rclpy executor in a private Context.

    ``params``: a parameters-file path or the dict of :func:`load_params_file`. ``law``/``reference``
    (optional) are handed to the controller node in-process (otherwise it builds its law from ``law`` +
    ``law_params.*`` and its reference from topics/parameters)."""

    def __init__(self, params, *, domain_id: int | None = None, lockstep: bool = True, dynamics: bool = True,
                 law=None, reference=None, system=None, record: bool = True):
        import rclpy
        from rclpy.context import Context

        from qv_dynamics.ros.dynamics_node import DynamicsNode
        from qv_dynamics.ros.params import SIM_NODE, validate
        from qv_dynamics.ros.runner import make_executor
        from qv_dynamics.ros.sim_node import SimNode

        from .controller_node import ControllerNode

        self.params = load_params_file(params) if not isinstance(params, dict) else params
        missing = [s for s in ("qv_sim", "qv_controller") if s not in self.params]
        if missing:
            from qv_dynamics.errors import ModelError

            raise ModelError(f"parameters file lacks sections {missing} (need qv_sim, qv_controller, qv_dynamics)")
        self.context = Context()
        if domain_id is None:
            domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
        rclpy.init(context=self.context, domain_id=domain_id, args=[])
        self.domain_id = domain_id
        self.nodes = []
        try:
            sim_p = dict(self.params["qv_sim"])
            validate(SIM_NODE, sim_p)  # the file's own values, before lock-step replaces mode and lockstep_resend
            if lockstep:
                sim_p.update(mode="lockstep", lockstep_resend=0.0)
            sim_p.setdefault("publish_clock", True)
            # each node builds its own model (as separate processes would): no shared Pinocchio data
            self.sim = SimNode("qv_sim", context=self.context, parameter_overrides=to_parameters(sim_p))
            self.nodes.append(self.sim)
            ctrl_p = dict(self.params["qv_controller"])
            sim_time = bool(sim_p.get("publish_clock", True))  # stamps and /clock are simulated time
            ctrl_p.setdefault("use_sim_time", sim_time)
            if lockstep:
                # simulated time stands still while the process is busy or descheduled, and in lock-step
                # every effort command advances the simulator: a wall-clock watchdog that fires on a
                # scheduling hiccup would inject a safe command into the loop. Keep it for real stalls only.
                given = ctrl_p.get("watchdog_timeout", 0.1)
                ctrl_p["watchdog_timeout"] = lockstep_watchdog(given)
                ctrl_p["command_delay"] = 0.0  # a lock-step plant applies each command from the state it answers
            self.controller = ControllerNode("qv_controller", context=self.context, system=system, law=law,
                                             reference=reference, parameter_overrides=to_parameters(ctrl_p))
            self.nodes.append(self.controller)
            if lockstep and ctrl_p["watchdog_timeout"] != given:
                self.controller.get_logger().info(f"lock-step run: watchdog_timeout {given} s raised to "
                                                  f"{ctrl_p['watchdog_timeout']} s (see qv_control.ros.run_checks)")
            self.dynamics = None
            if dynamics and "qv_dynamics" in self.params:
                dyn_p = dict(self.params["qv_dynamics"])
                dyn_p.setdefault("use_sim_time", sim_time)
                # one process, one thread: the dynamics node's time is part of every loop tick, so it evaluates
                # every state (a recording) unless the parameters file asks for a decimation
                dyn_p.setdefault("decimation", 1)
                self.dynamics = DynamicsNode("qv_dynamics", context=self.context,
                                             parameter_overrides=to_parameters(dyn_p))
                self.nodes.append(self.dynamics)
            refuse_unknown_parameters(self.nodes)  # a one-shot run from a file: a misspelling is refused
        except BaseException:
            self.shutdown()
            raise
        self.executor = make_executor(self.context)
        for n in self.nodes:
            self.executor.add_node(n)
        import gc

        gc.collect()
        gc.freeze()  # start-up objects leave the GC's generations: shorter collector pauses in the loop
        self.rec: dict[str, list] = {"t": [], "q": [], "qdot": [], "tau": [], "lam": []}
        if record:
            self.sim.on_step.append(self._record)
        self._rec_initial = record

    def _record(self, sim) -> None:
        # row k: state at t_k, the torque applied over [t_k, t_k+dt] and λ at t_k (as simulate records)
        self.rec["t"].append(self._t_prev)
        self.rec["q"].append(self._q_prev)
        self.rec["qdot"].append(self._v_prev)
        self.rec["tau"].append(sim.tau.copy())
        self.rec["lam"].append(sim.stepper.lam.copy() if sim.stepper.lam is not None else np.zeros(0))
        self._snapshot()

    def _snapshot(self) -> None:
        self._t_prev, self._q_prev, self._v_prev = self.sim.t, self.sim.q.copy(), self.sim.qdot.copy()

    def wait_for_graph(self, timeout: float = 10.0) -> None:
        """Spin until the sim's /joint_states reaches the controller and the commands reach the sim."""
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            if self.sim.pub_js.get_subscription_count() >= 1 + (self.dynamics is not None) \
                    and self.controller.pub_cmd.get_subscription_count() >= 1 + \
                    (self.dynamics is not None and bool(self.dynamics.get_parameter("command_topic").value)):
                return
            self.executor.spin_once(timeout_sec=0.01)
        raise TimeoutError("nodes did not discover each other within "
                           f"{timeout} s (check ROS_DOMAIN_ID / ROS_AUTOMATIC_DISCOVERY_RANGE)")

    def _refuse_foreign(self, own: dict) -> None:
        """ModelError when another process publishes a topic of the run (run_checks.foreign_publishers)."""
        reason = foreign_publishers(self.sim, own, self.domain_id)
        if reason:
            from qv_dynamics.errors import ModelError

            raise ModelError(f"refused to run: {reason}")

    def run(self, duration: float, wall_timeout: float | None = None) -> dict:
        """Run until the simulated time reaches ``duration``; returns run statistics."""
        self.wait_for_graph()
        own = {self.sim.pub_js.topic_name: 1, self.controller.pub_cmd.topic_name: 1}
        if getattr(self.sim, "pub_clock", None) is not None:
            own[self.sim.pub_clock.topic_name] = 1
        self._refuse_foreign(own)
        if self.sim.mode == "paused":  # a previous run() ended: continue from where it stopped
            self.sim.mode = "lockstep"
        steps = int(round(duration / self.sim.dt))
        wall_timeout = wall_timeout if wall_timeout is not None else max(60.0, 50.0 * duration)
        self._snapshot()
        t0 = time.perf_counter()
        start_steps = self.sim.steps
        if self.sim.mode == "lockstep":
            self.sim.publish_state()
        elif self.sim.mode == "realtime":
            self.sim.wall0 = time.monotonic() - self.sim.steps * self.sim.dt / self.sim.rtf  # no catch-up burst
        from rclpy.task import Future

        from qv_dynamics.ros.runner import spin_until_done_or_signal

        done_future = Future()
        target = start_steps + steps

        foreign = []

        def check(sim) -> None:
            if sim.steps % FOREIGN_CHECK_STEPS == 0 and not done_future.done():
                foreign.extend(r for r in [foreign_publishers(sim, own, self.domain_id)] if r)
            if (foreign or sim.steps >= target) and not done_future.done():
                done_future.set_result(True)
                if sim.mode == "lockstep":
                    sim.mode = "paused"  # late commands no longer step the simulator

        def stopped(sim) -> None:
            if not done_future.done():
                done_future.set_result(False)

        self.sim.on_step.append(check)
        self.sim.on_stop.append(stopped)
        try:
            # C++ spin loop of the EventsExecutor: no Python overhead per callback dispatch (a signal ends it)
            spin_until_done_or_signal(self.executor, done_future, timeout_sec=wall_timeout)
        finally:
            self.sim.on_step.remove(check)
            self.sim.on_stop.remove(stopped)
        wall = time.perf_counter() - t0
        done = self.sim.steps - start_steps
        for _ in range(20):  # let the dynamics node drain
            self.executor.spin_once(timeout_sec=0.0)
        if self.sim.mode == "realtime":  # its pacing thread holds the plant (no step) until the next run's first
            self.sim.started = False     # command, as the timer it replaced did while nothing spun
        if foreign:
            from qv_dynamics.errors import ModelError

            raise ModelError(f"run stopped at t = {self.sim.t:.3f} s: {foreign[0]}")
        return {"steps": done, "sim_time_s": done * self.sim.dt, "wall_time_s": wall,
                "control_rate_hz": done / wall if wall > 0 else float("nan"),
                "real_time_factor": done * self.sim.dt / wall if wall > 0 else float("nan"),
                "completed": done >= steps, "sim_stopped": self.sim.mode == "stopped", "sim_error": self.sim.error}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {k: np.array(v) for k, v in self.rec.items() if k != "lam"}
        m = max((len(x) for x in self.rec["lam"]), default=0)
        out["lam"] = np.array([x if len(x) == m else np.full(m, np.nan) for x in self.rec["lam"]]).reshape(-1, m)
        return out

    def summary(self, stats: dict, reference=None) -> dict:
        arr = self.arrays()
        ref = reference if reference is not None else self.controller.reference_at
        err = tracking_errors(self.controller.law, ref, arr["t"], arr["q"], arr["lam"]) if len(arr["t"]) else {}
        c = self.controller
        out = dict(stats)
        out.update(err)
        out.update({
            "robot": self.sim.system.name, "dt": self.sim.dt, "law": type(c.law).__name__,
            "commands": c.stats["commands"], "safe_commands": c.stats["safe_commands"],
            "watchdog_episodes": c.stats["watchdog_episodes"],
            "rejected": {k: dict(v.counts) for k, v in c.rejects.items() if v.total},
            "law_failures": c.rejects["law"].total, "law_error": c.rejects["law"].last_reason,
            "max_abs_torque": float(np.max(np.abs(arr["tau"]))) if len(arr["tau"]) else 0.0,
            "dynamics_messages": self.dynamics.stats["messages"] if self.dynamics else 0,
            "dynamics_basis_reseeds": self.dynamics.stats["reseeds"] if self.dynamics else 0,
        })
        return out

    OUT_FILES = ("trajectory.npz", "summary.json")

    def save(self, directory, summary: dict) -> Path:
        """``trajectory.npz`` and ``summary.json`` in ``directory``, each written atomically."""
        from qv_dynamics import runfiles

        d = runfiles.check_writable(directory)
        runfiles.savez(d / "trajectory.npz", **self.arrays())
        runfiles.write_json(d / "summary.json", _jsonable(summary))
        return d

    def shutdown(self) -> None:
        import gc

        import rclpy

        gc.unfreeze()
        ex = getattr(self, "executor", None)
        if ex is not None:
            try:
                ex.shutdown()
            except Exception:  # noqa: BLE001
                pass
        for n in getattr(self, "nodes", []):
            try:
                n.destroy_node()
            except Exception:  # noqa: BLE001
                pass
        rclpy.try_shutdown(context=self.context)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()


def main(argv: list[str] | None = None) -> int:
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    ap = argparse.ArgumentParser(prog="qv bringup", description=__doc__.split("\n\n")[0])
    ap.add_argument("config", help="ROS 2 parameters file (e.g. config/planar_3link.yaml) or a robot name "
                    "(planar_3link, slider_crank, panda_table)")
    ap.add_argument("--duration", type=positive_float, default=10.0, help="simulated seconds (default 10)")
    ap.add_argument("--out", default=None, help="write summary.json and trajectory.npz here")
    ap.add_argument("--realtime", action="store_true", help="pace the simulator by the wall clock")
    ap.add_argument("--no-dynamics", action="store_true", help="do not start the dynamics node")
    ap.add_argument("--domain-id", type=int_in(0, 232), default=None,
                    help="ROS_DOMAIN_ID for this process's nodes (0-232)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.domain_id is None and os.environ.get("ROS_DOMAIN_ID", "").strip():
        try:  # the environment's domain, checked as --domain-id is (the middleware would raise on it)
            int_in(0, 232)(os.environ["ROS_DOMAIN_ID"].strip())
        except argparse.ArgumentTypeError as exc:
            ap.error(f"environment variable ROS_DOMAIN_ID: {exc}")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    from qv_dynamics import runfiles
    from qv_dynamics.errors import QVError
    from qv_dynamics.ros.params import resolve_config_path

    try:
        if args.out:  # refused before the run, not after it; files of an earlier run removed (and listed)
            runfiles.prepare_out_dir(args.out, Bringup.OUT_FILES)
        path = args.config if os.path.isfile(args.config) else resolve_config_path(args.config)
        with Bringup(path, domain_id=args.domain_id, lockstep=not args.realtime,
                     dynamics=not args.no_dynamics) as b:
            stats = b.run(args.duration)
            summary = b.summary(stats)
            if args.out:
                b.save(args.out, summary)
    except (QVError, TimeoutError) as exc:
        print(f"qv bringup: {exc}", file=sys.stderr)
        return 2
    keys = ("sim_time_s", "wall_time_s", "control_rate_hz", "motion_rms_error", "force_rms_error",
            "force_rms_error_rel", "commands", "safe_commands", "law_failures")
    print(json.dumps({k: _jsonable(summary.get(k)) for k in keys}, indent=2))
    if args.out:
        print(f"wrote {Path(args.out) / 'summary.json'}")
    failure = run_failures(summary)
    if failure:
        print(f"qv bringup: run failed: {failure}", file=sys.stderr)
        return 1
    if not stats["completed"]:
        print(f"qv bringup: run did not complete: {stats.get('sim_error') or 'wall-clock timeout'}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
