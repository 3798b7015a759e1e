"""Per-call timing shared by the benches: every call timed on its own (``time.perf_counter``), candidates
interleaved by the caller state by state, medians over all calls (robust to the preemptions of a shared
machine)."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np


def time_calls(fn: Callable, reps: int, *args) -> list[float]:
    """Seconds of ``reps`` back-to-back calls ``fn(*args)``, each timed on its own."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        out.append(time.perf_counter() - t0)
    return out


def medians_us(times: dict[str, list[float]]) -> dict[str, float]:
    """The median of each list of seconds, in µs."""
    return {k: 1e6 * float(np.median(t)) for k, t in times.items()}
