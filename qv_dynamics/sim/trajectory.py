"""The record of a simulated run: :class:`Trajectory` (what :func:`~qv_dynamics.sim.simulate` returns) and the
preallocated :class:`TrajectoryRecorder` that fills it."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import runfiles
from ..errors import QVError
from ..jsonutil import jsonable as _jsonable

ROW_ARRAYS = ("q", "qdot", "tau", "lam")
SCALAR_ARRAYS = ("t", "phi_norm", "phi_pre", "velocity_error", "energy", "kinetic", "potential", "work",
                 "impact_loss", "rank", "nr_iters")


@dataclass
class Trajectory:
    """Recorded run. Arrays have one row per recorded sample; ``lam`` has one column per row of every
    constraint of the system (``lam_labels``), NaN while that constraint is inactive."""

    t: np.ndarray
    q: np.ndarray
    qdot: np.ndarray
    tau: np.ndarray
    lam: np.ndarray
    phi_norm: np.ndarray
    phi_pre: np.ndarray
    velocity_error: np.ndarray
    energy: np.ndarray
    kinetic: np.ndarray
    potential: np.ndarray
    work: np.ndarray
    impact_loss: np.ndarray
    rank: np.ndarray
    nr_iters: np.ndarray
    lam_labels: list
    events: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    ok: bool = True
    error: str | None = None

    ARRAYS = ("t", "q", "qdot", "tau", "lam", "phi_norm", "phi_pre", "velocity_error", "energy", "kinetic",
              "potential", "work", "impact_loss", "rank", "nr_iters")

    def save(self, directory, name: str = "trajectory") -> Path:
        """Write ``<name>.npz`` (arrays, labels, events as JSON) and ``summary.json`` (stats, ok, error), each
        to a temporary file renamed into place (a failed write never leaves a partial file)."""
        d = runfiles.check_writable(directory)
        arrays = {k: getattr(self, k) for k in self.ARRAYS}
        runfiles.savez(d / f"{name}.npz", lam_labels=np.array(self.lam_labels, dtype=str),
                       events=np.array(json.dumps(_jsonable(self.events))), **arrays)
        summary = dict(_jsonable(self.stats))
        summary.update(ok=self.ok, error=self.error, events=_jsonable(self.events))
        runfiles.write_json(d / "summary.json", summary)
        return d


class RecordSizeError(QVError):
    """A run whose recorded samples would not fit in memory (t_final/dt/record_every too large)."""


def record_budget() -> int:
    """Bytes a run may record into: half the physical memory (64 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 64 * 2**30


class TrajectoryRecorder:
    """NaN-filled arrays for every ``record_every``-th sample of a run of ``steps`` steps; ``k`` rows are valid."""

    def __init__(self, steps: int, record_every: int, widths: dict[str, int]):
        self.every = record_every
        n_rec = steps // record_every + 1
        need = 8 * n_rec * (sum(widths[k] for k in ROW_ARRAYS) + len(SCALAR_ARRAYS))
        if need > record_budget():
            raise RecordSizeError(
                f"recording {steps} steps (t_final/dt) every {record_every} needs {need / 2**30:.3g} GiB, more than "
                f"half the memory ({record_budget() / 2**30:.3g} GiB): shorten t_final, enlarge dt or record_every")
        self.rows = {k: np.full((n_rec, widths[k]), np.nan) for k in ROW_ARRAYS}
        self.scalars = {k: np.full(n_rec, np.nan) for k in SCALAR_ARRAYS}
        self.k = 0

    def slot(self, i: int) -> int | None:
        """Row of step ``i``, None when step ``i`` is not recorded."""
        return None if i % self.every else i // self.every

    def state(self, i: int, t: float, q: np.ndarray, qdot: np.ndarray) -> None:
        j = self.slot(i)
        if j is not None:
            self.rows["q"][j], self.rows["qdot"][j], self.scalars["t"][j] = q, qdot, t
            self.k = j + 1

    def inputs(self, i: int, tau: np.ndarray, lam_row: np.ndarray, rank: int) -> None:
        j = self.slot(i)
        if j is not None:
            self.rows["tau"][j], self.rows["lam"][j], self.scalars["rank"][j] = tau, lam_row, rank

    def scalars_at(self, i: int, **values: float) -> None:
        j = self.slot(i)
        if j is not None:
            for key, v in values.items():
                self.scalars[key][j] = v

    def arrays(self) -> dict[str, np.ndarray]:
        out = {key: v[:self.k] for key, v in self.rows.items()}
        out.update({key: v[:self.k] for key, v in self.scalars.items()})
        return out
