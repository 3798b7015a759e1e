"""The formulation rows' published figures (doc/results/generated/formulation.json, written with the docs' table
by ``qv formulation --write-table``) and the check every row's test makes against them: qv and osc meet the
rows' acceptance and neither regresses by more than 10 % (plus a floor) from the figure the docs print."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from qv_control.demo.cases import run_case
from qv_control.demo.cases.common import FIGURES, KINDS, acceptance

PUBLISHED = Path(__file__).resolve().parent.parent / "doc" / "results" / "generated" / "formulation.json"
#: a run may exceed its published figure by 10 % plus these floors (force relative to |λ_d|; path m)
SLACK, FORCE_FLOOR, PATH_FLOOR = 1.10, 2e-5, 0.2e-6
JUDGED = ("qv", "osc")


def published(row: str) -> dict:
    return json.loads(PUBLISHED.read_text(encoding="utf-8"))[row]


def run_all(row: str) -> dict:
    """Every controller's full run of ``row`` (the table's runs)."""
    return {k: run_case(row, k) for k in KINDS}


def check_row(row: str, runs: dict) -> None:
    """qv and osc: accepted, |τ| within the limits, force and path within 10 % (+ floor) of the published
    figures; every controller: every figure reported, the published failure reason and verdict kept."""
    pub = published(row)
    print(f"\n[{row}] " + "; ".join(
        f"{k}: force {100 * r['figures']['force_rms_error_rel']:.4f} % (published "
        f"{100 * pub[k]['force_rms_error_rel']:.4f}), path {1e6 * r['figures']['path_rms_error_m']:.2f} µm "
        f"(published {1e6 * pub[k]['path_rms_error_m']:.2f}), {acceptance(r['figures']) or 'accepted'}"
        for k, r in runs.items()))
    for kind in JUDGED:
        f, p = runs[kind]["figures"], pub[kind]
        assert acceptance(f) == "", (kind, acceptance(f))
        assert f["max_abs_torque_ratio"] <= 1.0, kind
        assert f["force_rms_error_rel"] <= SLACK * p["force_rms_error_rel"] + FORCE_FLOOR, kind
        assert f["path_rms_error_m"] <= SLACK * p["path_rms_error_m"] + PATH_FLOOR, kind
    for kind in KINDS:
        f = runs[kind]["figures"]
        assert list(f) == list(FIGURES), kind
        assert f["failed"] or np.isfinite(f["force_rms_error_rel"]), kind
        assert f["failed"] == pub[kind]["failed"], kind
        assert bool(acceptance(f)) == bool(pub[kind]["missed"]), kind
