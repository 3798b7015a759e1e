"""Which command acted at each step of a realtime run, and how much of the tracking error that explains
(``bench/deployed_loop.py --schedule``).

The realtime simulator steps [t_k, t_k+1] at the wall-clock deadline of t_k+1 with the latest command it
holds and publishes in the state of t_k+1 the effort it applied. The controller's ``~/command_stamped``
carries each command with the stamp of the state it answers. Matching the two (bit for bit) gives the *age*
of the command applied over every step, in periods: 1 = the answer to the state the step starts from (what
the lock-step run applies), 2 = one period late (held), n = held n − 1 periods (a stalled controller or a
burst of catch-up steps of the simulator).

:func:`replay` then runs the library's lock-step ``simulate`` with the same model, law, gains and reference,
applying the law's answer of the state k − (age − 1) over step k: the tracking error this schedule alone
produces, to set beside the deployed run's. ``command_delay`` runs the same schedule with the controller's
latency compensation (:mod:`qv_control.latency`), as the node runs it.
"""
from __future__ import annotations

import numpy as np


def applied_ages(stamps: np.ndarray, efforts: np.ndarray, cmd_stamps: np.ndarray, cmd_efforts: np.ndarray,
                 dt: float) -> np.ndarray:
    """Age [periods] of the command applied over the step ending at each state (NaN: not one of the
    recorded commands, e.g. before the first or a safe output); states in stamp order, one per stamp."""
    by_tau: dict[bytes, list[float]] = {}
    for t, tau in zip(cmd_stamps, cmd_efforts):
        by_tau.setdefault(np.ascontiguousarray(tau).tobytes(), []).append(float(t))
    ages = np.full(len(stamps), np.nan)
    for i, (s, e) in enumerate(zip(stamps, efforts)):
        src = [t for t in by_tau.get(np.ascontiguousarray(e).tobytes(), ()) if t < s - 0.5 * dt]
        if src:
            ages[i] = round((s - max(src)) / dt)
    return ages


def held_runs(ages: np.ndarray) -> np.ndarray:
    """Lengths of the runs of consecutive steps that applied a held command (age ≥ 2)."""
    runs, n = [], 0
    for a in ages[np.isfinite(ages)]:
        if a >= 2:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    return np.array(runs + ([n] if n else []), int)


def summary(ages: np.ndarray) -> str:
    ok = ages[np.isfinite(ages)]
    runs = held_runs(ages)
    share = lambda m: 100.0 * np.count_nonzero(m) / max(len(ok), 1)  # noqa: E731
    longest = int(runs.max()) if len(runs) else 0
    return (f"applied command age over {len(ok)} steps: 1 period (as lock-step) {share(ok == 1):.2f} %, "
            f"2: {share(ok == 2):.2f} %, 3–5: {share((ok >= 3) & (ok <= 5)):.2f} %, > 5: {share(ok > 5):.2f} %; "
            f"held runs {len(runs)} (longest {longest} steps, {int(runs[runs > 2].sum()) if len(runs) else 0} "
            f"steps in runs > 2); unmatched {int(np.count_nonzero(~np.isfinite(ages)))}")


class _Scheduled:
    """A law whose answer to state k is applied over step k + extra[k] (held until then, as the plant does);
    ``predictor``: the controller's latency compensation, fed the last command it sent."""

    def __init__(self, law, reference, extra: np.ndarray, predictor=None):
        self.law, self.reference, self.extra, self.pred = law, reference, extra, predictor
        self.answers: list[np.ndarray] = []
        self.sent = None

    def compute(self, state, ref):
        from qv_dynamics.state import State

        if self.pred is not None:
            t, q, v = self.pred.predict(state.t, state.q, state.qdot, self.sent)
            state, ref = State(t=t, q=q, qdot=v, lambda_meas=state.lambda_meas), self.reference(t)
        self.sent = np.asarray(self.law.compute(state, ref), float)
        self.answers.append(self.sent)
        k = len(self.answers) - 1
        d = int(self.extra[k]) if k < len(self.extra) else 0
        return self.answers[max(0, k - d)]


def replay(config: str, seconds: float, ages: np.ndarray, stamps: np.ndarray, dt: float,
           command_delay: float = 0.0) -> float:
    """θ RMS (from 1 s) of the lock-step run applying the recorded schedule (module doc)."""
    from loop_setup import controller_setup, theta_rms

    from qv_control.latency import StatePredictor
    from qv_dynamics.sim import simulate

    system, law, ref, coords, q0 = controller_setup(config)
    extra = np.zeros(int(round(seconds / dt)) + 2, int)
    ok = np.isfinite(ages)
    k = np.round(stamps[ok] / dt).astype(int) - 1      # the step ending at state k starts at k − 1
    sel = (k >= 0) & (k < len(extra))
    extra[k[sel]] = np.maximum(ages[ok][sel].astype(int) - 1, 0)
    pred = StatePredictor(system, command_delay) if command_delay else None
    tr = simulate(system, q0, np.zeros(system.nv), _Scheduled(law, ref, extra, pred), seconds, dt, reference=ref)
    return theta_rms(system, coords, ref, tr.t, tr.q, skip=1.0)


def stall_ages(n: int, period: int) -> np.ndarray:
    """Ages over n steps of a controller that answers one state in ``period`` and whose answer acts
    ``period`` − 1 steps later (held until the next one): a process stalled for all but one period of each
    ``period`` (e.g. stopped by a sampling profiler, or starved)."""
    k = np.arange(n)
    j = period * np.floor((k - (period - 1)) / period).astype(int)   # the state whose answer acts over step k
    return (np.maximum(k - j, 0) + 1).astype(float)


def main(argv=None) -> int:
    """Lock-step runs of the deployed task under fixed schedules, with and without latency compensation."""
    import argparse
    import os
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--config", default=str(root / "config" / "panda_table.yaml"))
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--stalls", type=int, nargs="*", default=[2, 3, 5, 8, 10], metavar="P",
                    help="stalled-controller schedules to replay (one answer every P periods); none: skip them")
    args = ap.parse_args(argv)
    n, dt = int(round(args.seconds / 1e-3)), 1e-3
    stamps = dt * np.arange(1, n + 1)
    base = replay(args.config, args.seconds, np.ones(n), stamps, dt)
    print(f"lock-step θ RMS {base:.3e} ({args.config}, {args.seconds:g} s); each schedule without / with "
          f"command_delay = one measured period (x lock-step):")
    for label, age in (("every command from the state it answers (the realtime simulator on time)", 1),
                       ("every command one period later (ros2_control hardware)", 2),
                       ("every command two periods later", 3)):
        ages = np.full(n, float(age))
        plain = replay(args.config, args.seconds, ages, stamps, dt)
        comp = replay(args.config, args.seconds, ages, stamps, dt, command_delay=-1.0)
        print(f"  {label}: {plain:.3e} ({plain / base:.2f}x) / {comp:.3e} ({comp / base:.2f}x)")
    if args.stalls:
        print("a stalled controller, one answer every P periods acting P − 1 periods late (the delay margin of "
              "the task's gains), without / with command_delay:")
    for period in args.stalls:
        ages = stall_ages(n, period)
        plain = replay(args.config, args.seconds, ages, stamps, dt)
        comp = replay(args.config, args.seconds, ages, stamps, dt, command_delay=-1.0)
        print(f"  P = {period}: {plain:.3e} ({plain / base:.2f}x) / {comp:.3e} ({comp / base:.2f}x)")
    print(f"machine load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
