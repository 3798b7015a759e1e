"""Per-call timing shared by the benches: every call timed on its own (``time.perf_counter``), candidates
interleaved by the caller state by state, medians over all calls (robust to the preemptions of a shared
machine)."""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from qv_dynamics.runfiles import machine  # noqa: F401  (the tables' machine line, re-exported)


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


def median_table(times: dict[str, list[float]], label: str = "", width: int = 42, base: str = "pin.constraintDynamics",
                 extra: tuple[str, dict] | None = None) -> dict[str, float]:
    """Print each candidate's median (µs) and its ratio to ``base``'s median, a row each (``extra``: a column
    name and its value per row, 0 where missing); returns the medians."""
    med = medians_us(times)
    p = med[base]
    name, column = extra or ("", None)
    print(f"  {label:{width}s} {'median µs':>10s} {'x pin':>7s}" + (f" {name:>10s}" if extra else ""))
    for k, t in med.items():
        print(f"  {k:{width}s} {t:10.1f} {t / p:7.1f}" + (f" {column.get(k, 0):>10}" if extra else ""))
    return med


def write_table(path: str, title: str, command: str, header: list[str], rows: list[list[str]],
                notes: str = "") -> None:
    """A Markdown table for the docs (doc/ includes it): the title, the command that reproduces it, the machine
    it ran on, the table, then ``notes``."""
    from pathlib import Path

    from qv_dynamics import runfiles

    lines = [f"**{title}**", "", f"Reproduce: `{command}`", "", f"Machine: {machine()}", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    Path(path).parent.mkdir(parents=True, exist_ok=True)  # renamed into place: a run ended early writes no table
    runfiles.write_text(path, "\n".join(lines) + ("\n\n" + notes if notes else "") + "\n")
