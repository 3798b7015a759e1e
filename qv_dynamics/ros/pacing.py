"""Tick time, missed deadlines and self-decimation of a node fed by a periodic stream.

A node that evaluates every message of a 1 kHz /joint_states stream must finish each callback within the
stream period, and on a shared machine it must leave time to the other nodes. :class:`Pacer` measures the
period between arrivals (exponential average), the cost of each processed callback, counts a *missed
deadline* when a callback took longer than the period, and — with ``decimation=0`` (automatic) — processes
only every k-th message with k = ⌈cost / (budget · period)⌉, so the node uses at most ``budget`` of a core.
Every change of k is reported through ``on_change`` (the node logs it): never a silent decimation.
States the node never received (the middleware's queue overflowed while the node was descheduled, e.g. at a
lower CPU priority than the control loop) are counted from the gaps of the input stamps: ``inputs_lost``.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable

ALPHA = 0.05     # weight of the newest sample in the averages (~20-sample memory)
ADAPT_EVERY = 250  # processed messages between two decisions on k
HYSTERESIS = 0.7   # k steps down only when the load fits k − 1 with this margin


class Pacer:
    """``arrive(now)`` for every message (True: process it), ``done(cost)`` after a processed one."""

    def __init__(self, decimation: int = 0, budget: float = 0.5, max_decimation: int = 100,
                 on_change: Callable[[int, int, float, float], None] | None = None):
        if decimation < 0 or not (0.0 < budget <= 1.0) or max_decimation < 1:
            raise ValueError(f"decimation >= 0 (0: automatic), 0 < budget <= 1, max_decimation >= 1; got "
                             f"{decimation}, {budget}, {max_decimation}")
        self.auto = decimation == 0
        self.k = max(1, decimation)
        self.budget = float(budget)
        self.max_k = int(max_decimation)
        self.on_change = on_change
        self.period = 0.0          # s between arrivals (average)
        self.cost = 0.0            # s per processed callback (average)
        self.cost_max = 0.0        # s, largest since the last window reset
        self.received = 0
        self.processed = 0
        self.skipped = 0           # messages left out by the decimation
        self.missed = 0            # processed callbacks that took longer than the period
        self.lost = 0              # states of the stream never received (from the gaps of their stamps)
        self.stamp_period = math.inf  # the stream's period from its stamps (_count_lost)
        self._t_prev: float | None = None
        self._stamp_prev: float | None = None

    def arrive(self, now: float, stamp: float | None = None) -> bool:
        """A message arrived at ``now`` (wall clock); ``stamp``: its header stamp (counts lost states)."""
        if stamp is not None:
            self._count_lost(stamp)
        if self._t_prev is not None:
            gap = now - self._t_prev
            self.period = gap if self.period == 0.0 else self.period + ALPHA * (gap - self.period)
        self._t_prev = now
        self.received += 1
        if (self.received - 1) % self.k:
            self.skipped += 1
            return False
        return True

    def _count_lost(self, stamp: float) -> None:
        """A stamp step of j stream periods means j − 1 states never arrived. The period: the average of
        the steps within 1.5 periods (jitter averages out), restarted from any step under half of it (a
        faster stream, or the first step was a gap); a step back (a restarted stream) starts over."""
        prev, self._stamp_prev = self._stamp_prev, stamp
        if prev is None or stamp <= prev:
            return
        step, period = stamp - prev, self.stamp_period
        if step < 0.5 * period:
            self.stamp_period = step
        elif step <= 1.5 * period:
            self.stamp_period = period + ALPHA * (step - period)
        else:
            self.lost += round(step / period) - 1

    def done(self, cost: float) -> None:
        self.processed += 1
        self.cost = cost if self.processed == 1 else self.cost + ALPHA * (cost - self.cost)
        if cost > self.cost_max:
            self.cost_max = cost
        if self.period > 0.0 and cost > self.period:
            self.missed += 1
        if self.auto and self.processed % ADAPT_EVERY == 0 and self.period > 0.0:
            load = self.cost / (self.budget * self.period)  # cores-of-budget needed at k = 1
            need = min(self.max_k, max(1, math.ceil(load)))
            if need < self.k and load > HYSTERESIS * (self.k - 1):
                need = self.k  # only step down with a margin: no flapping between k and k - 1
            if need != self.k:
                old, self.k = self.k, need
                if self.on_change is not None:
                    self.on_change(old, need, self.cost, self.period)

    def values(self) -> dict:
        """Figures for /diagnostics (times in ms); resets the window maximum."""
        out = {"tick_time_ms_mean": 1e3 * self.cost, "tick_time_ms_max": 1e3 * self.cost_max,
               "input_period_ms": 1e3 * self.period, "missed_deadlines": self.missed, "decimation": self.k,
               "decimation_auto": int(self.auto), "skipped_by_decimation": self.skipped, "inputs_lost": self.lost}
        self.cost_max = 0.0
        return out


class DeadlineLoop:
    """Calls ``tick()`` on its own thread at absolute wall-clock deadlines (``time.monotonic``): ``next_due()``
    gives the next one, the thread sleeps until it (the last ``spin`` seconds busy-waited, 0: none), then
    ticks; ``stop()`` wakes and joins it at once. Absolute deadlines do not drift with the wake-up latency
    the way a periodic timer's re-armed period does, and the thread does not wait behind the executor's
    other callbacks (under load rclpy's timer at a 1 ms period can fire well below 1000 times/s)."""

    def __init__(self, tick: Callable[[], None], next_due: Callable[[], float], name: str = "realtime",
                 spin: float = 0.0):
        self.tick = tick
        self.next_due = next_due
        self.spin = float(spin)
        self.late = 0.0                 # s, wake-up latency past the deadline (exponential average)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def _run(self) -> None:
        stop, clock = self._stop, time.monotonic
        while not stop.is_set():
            due = self.next_due()
            delay = due - clock() - self.spin
            if delay > 0.0 and stop.wait(delay):
                return
            while clock() < due:  # the last ``spin`` seconds (and nothing when the sleep overslept)
                pass
            self.late += ALPHA * (clock() - due - self.late)
            self.tick()
