"""``qv formulation --out DIR``: the formulation rows (:mod:`qv_control.demo.cases`) for qv, osc, osc_tool and
impedance, each beside the per-scene choices it needed, into ``DIR/formulation.json``, ``DIR/formulation.md``
and a plot per row.

``--write-table PATH`` also writes the docs' table: PATH (Markdown: the command, the machine, the table and its
legend) and PATH with the suffix ``.json`` (the same figures; the rows' tests compare their runs with them).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from qv_dynamics.jsonutil import jsonable
from qv_dynamics.runfiles import check_writable, machine, write_json, write_text

from .cases import ROWS, run_case, setup_of, write_case_plots
from .cases.common import FIGURES, KINDS, acceptance, setup_text

#: the table's columns: (header, figure, scale, format)
COLUMNS = (("force RMS error %", "force_rms_error_rel", 100, "{:.3g}"),
           ("path RMS error µm", "path_rms_error_m", 1e6, "{:.3g}"),
           ("peak force / commanded", "peak_force_ratio", 1, "{:.2f}"),
           ("settle s", "settle_time_s", 1, "{:.3f}"),
           ("peak abs(τ)/limit", "max_abs_torque_ratio", 1, "{:.2f}"),
           ("lift-offs", "contact_lost", 1, "{:d}"))
COMMAND = ".venv/bin/python -m qv_control.cli formulation --write-table doc/results/generated/formulation.md"
LEGEND = """\
The laws: **qv** the projection laws (`pidc_force`; `passive` with a passive joint); **osc** operational-space
control set up as whole-body OSC (`osc_constrained`: the row's task coordinates, every contact row with its
measured λ, the actuation selection, the projection laws' rank decision); **osc_tool** operational-space control of
one tool frame (`osc`, fed the frame's measured force or wrench); **impedance** Cartesian impedance with a
Jacobian-transpose force. Every law has the same model, closed-loop poles, force PI, effort limits and posture; the
last column lists what else each needed on that scene: the keyword arguments its row builds it with (`SETUP` in
the row's module, `qv_control/demo/cases/`), and their number. MuJoCo measures every figure. Acceptance: force
RMS error ≤ 1 %, path RMS error ≤ 200 µm, no lift-off, not failed ("lost the task": path error above 10 mm or a
contact off for more than 50 ms)."""


def run_rows(rows=ROWS, kinds=KINDS, log=print) -> dict:
    """Every (row, controller) run: ``{row: {kind: {figures..., setup, choices}}, "_meta": {...}}``."""
    doc: dict = {"_meta": {"wall_time_s": 0.0, "kinds": list(kinds)}}
    t0 = time.perf_counter()
    for row in rows:
        doc[row] = {}
        for kind in kinds:
            f = run_case(row, kind)["figures"]
            setup = setup_of(row, kind)
            doc[row][kind] = {**{k: f[k] for k in FIGURES}, "missed": acceptance(f), "setup": setup_text(setup),
                              "choices": _count(setup)}
            log(f"{row:20s} {kind:9s} force {100 * f['force_rms_error_rel']:9.4f} %  path "
                f"{1e6 * f['path_rms_error_m']:9.2f} µm  |τ| {f['max_abs_torque_ratio']:5.2f}  lift-offs "
                f"{f['contact_lost']}  {acceptance(f) or 'accepted'}")
    doc["_meta"]["wall_time_s"] = time.perf_counter() - t0
    return doc


def _count(setup: dict) -> int:
    """The number of per-scene choices: the keyword arguments (each phase's, of a switched row)."""
    if setup and all(isinstance(v, dict) for v in setup.values()):
        return sum(len(v) for v in setup.values())
    return len(setup)


def _cell(value, scale: float, fmt: str) -> str:
    if isinstance(value, float) and value != value:
        return "–"
    return fmt.format(value * scale if scale != 1 or isinstance(value, float) else value)


def markdown_table(doc: dict) -> str:
    """One line per (row, controller): the figures, the failure reason and the per-scene choices."""
    head = ["row", "law", *(c[0] for c in COLUMNS), "accepted (or what misses)", "per-scene choices (number: what)"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * len(COLUMNS) + "---|---|"]
    for row, per in doc.items():
        if row.startswith("_"):
            continue
        for kind, f in per.items():
            cells = [_cell(f[key], sc, fmt) for _, key, sc, fmt in COLUMNS]
            lines.append(f"| {row} | {kind} | " + " | ".join(cells) + f" | {f['missed'] or 'yes'} | "
                         f"{f['choices']}: {f['setup']} |")
    return "\n".join(lines) + "\n"


def docs_table(doc: dict) -> str:
    """The docs' page: the command that reproduces it, the machine, the table, the legend."""
    return "\n".join([f"Reproduce: `{COMMAND}`", "", f"Machine: {machine()}", "", markdown_table(doc).rstrip(), "",
                      LEGEND, ""])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv formulation", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/formulation", help="folder for formulation.json, formulation.md, plots")
    ap.add_argument("--only", nargs="*", default=None, choices=list(ROWS), help="rows (default: all)")
    ap.add_argument("--controllers", nargs="*", default=list(KINDS), choices=list(KINDS))
    ap.add_argument("--write-table", metavar="PATH", help="also write the docs' table (Markdown) to PATH and its "
                    "figures to PATH with the suffix .json")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.write_table:                 # refused before the runs, as ``--out`` is (qv_control.cli)
        check_writable(Path(args.write_table).parent)
    doc = run_rows(args.only or ROWS, args.controllers)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "formulation.json", jsonable(doc))
    write_text(out / "formulation.md", markdown_table(doc))
    write_case_plots(out)
    if args.write_table:
        path = Path(args.write_table)
        write_text(path, docs_table(doc))
        write_json(path.with_suffix(".json"), jsonable({k: v for k, v in doc.items() if not k.startswith("_")}))
    print(f"\nwall time {doc['_meta']['wall_time_s']:.0f} s; {out}/formulation.json, {out}/formulation.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
