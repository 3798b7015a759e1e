"""``qv conditions --out DIR``: the conditions matrix for qv, OSC and impedance → conditions.json + table.

``conditions.json``: for each condition name ``{qv|osc|impedance: {force_rms_error_rel, path_rms_error_m,
peak_force_ratio, settle_time_s, max_abs_torque_ratio, contact_lost}}`` (the combined case is ``all``),
plus ``_meta`` (the conditions' parameters, the touch-down speeds, the open-loop sliding band of every
friction row's scene, wall time). ``conditions.md``: the same figures as markdown tables (cells:
qv / osc / impedance), the judged conditions first, then the reference rows (a condition with a
``reference`` note: MuJoCo's friction scenes, whose soft contact bounces a sliding tool open loop, and
ablations), each friction row with its scene's open-loop sliding band beside it.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict

from qv_dynamics import runfiles
from qv_dynamics.jsonutil import jsonable

from .conditions import CONDITIONS, conditions_config, open_loop_sliding_band
from .conditions_runs import KINDS, run_condition

PUSHES = ("consistent", "jacobian")
FIGURES = ("force_rms_error_rel", "path_rms_error_m", "peak_force_ratio", "settle_time_s",
           "max_abs_torque_ratio", "contact_lost", "failed")


def run_matrix(names=None, kinds=KINDS, cfg=None, log=print) -> dict:
    """Every (condition, controller) run; returns the conditions.json document."""
    cfg = cfg or conditions_config()
    names = list(CONDITIONS) if not names else list(names)
    doc: dict = {"_meta": {"conditions": {}, "v_touch_m_s": {}, "force_band_rel": {}, "wall_time_s": 0.0}}
    t0 = time.perf_counter()
    for name in names:
        cond = CONDITIONS[name]
        doc[name] = {}
        meta = doc["_meta"]
        meta["conditions"][name] = asdict(cond)
        for kind in kinds:
            run = run_condition(cond, kind, cfg)
            f = run["figures"]
            doc[name][kind] = {k: f[k] for k in FIGURES}
            meta["v_touch_m_s"][name] = run["v_touch"]
            meta["force_band_rel"].setdefault(name, {})[kind] = f.get("force_band_rel")
            log(f"{name:26s} {kind:9s} " + row_text(f))
    bands = doc["_meta"]["open_loop_sliding_band_n"] = {}
    for name in names:
        cond = CONDITIONS[name]
        if cond.friction > 0:
            bands[name] = {push: open_loop_sliding_band(cond.plant, cond.friction, cfg, push=push)
                           for push in PUSHES}
            log(f"{name:26s} open-loop sliding band (N, 10 N press): {bands[name]}")
    doc["_meta"]["wall_time_s"] = time.perf_counter() - t0
    return doc


def row_text(f: dict) -> str:
    return (f"force {100 * f['force_rms_error_rel']:8.3f} %  path {1e3 * f['path_rms_error_m']:8.4f} mm  "
            f"peak {f['peak_force_ratio']:6.2f}x  settle {f['settle_time_s']:6.3f} s  "
            f"|tau| {f['max_abs_torque_ratio']:5.2f}  lost {f['contact_lost']}")


def markdown_table(doc: dict) -> str:
    """The judged conditions, then the reference rows; each cell ``qv / osc / impedance``; friction rows
    with their scene's open-loop sliding band (N: dynamically consistent push, Jacobian-transpose push)."""
    cols = [("force RMS error %", "force_rms_error_rel", 100, "{:.3g}"), ("path RMS error µm", "path_rms_error_m",
            1e6, "{:.3g}"), ("peak force / commanded", "peak_force_ratio", 1, "{:.2f}"),
            ("settle s", "settle_time_s", 1, "{:.3f}"), ("peak abs(τ)/limit", "max_abs_torque_ratio", 1, "{:.2f}"),
            ("lift-offs", "contact_lost", 1, "{:d}"), ("failed", "failed", 1, "{}")]
    bands = doc.get("_meta", {}).get("open_loop_sliding_band_n", {})
    head = ["| condition | " + " | ".join(c[0] for c in cols) + " | open-loop sliding band N |",
            "|---" + "|---:" * len(cols) + "|---|"]
    judged, reference = list(head), list(head)
    for name, per in doc.items():
        if name.startswith("_"):
            continue
        cells = [" / ".join(fmt.format(per[k][key] * sc if key not in ("contact_lost", "failed") else per[k][key] or
                                       ("–" if key == "failed" else 0)) for k in per)
                 for _, key, sc, fmt in cols]
        band = " ; ".join(f"{lo:.1f}–{hi:.1f}" for lo, hi in (bands[name][p] for p in PUSHES)) \
            if name in bands else ""
        row = f"| {name} | " + " | ".join(cells) + f" | {band} |"
        (reference if name in CONDITIONS and CONDITIONS[name].reference else judged).append(row)
    out = "\n".join(judged) + "\n"
    if len(reference) > 2:
        out += "\nReference rows (not judged):\n\n" + "\n".join(reference) + "\n"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv conditions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/conditions", help="folder for conditions.json and conditions.md")
    names = ", ".join(CONDITIONS).replace("%", "%%")     # argparse %-formats help ("mass_+10%")
    ap.add_argument("--only", nargs="*", default=None, help=f"condition names (default: all): {names}")
    ap.add_argument("--controllers", nargs="*", default=list(KINDS), choices=list(KINDS))
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    unknown = sorted(set(args.only or ()) - set(CONDITIONS))
    if unknown:
        print(f"qv conditions: unknown condition(s) {unknown}; available: {list(CONDITIONS)}", file=sys.stderr)
        return 2
    print(f"computing {len(args.only or CONDITIONS)} conditions", flush=True)  # (the signal tests wait for it)
    doc = run_matrix(args.only, args.controllers)
    out = runfiles.check_writable(args.out)     # every file renamed into place, conditions.json last
    runfiles.write_text(out / "conditions.md", markdown_table(doc))
    runfiles.write_json(out / "conditions.json", jsonable(doc))
    print(f"\nwall time {doc['_meta']['wall_time_s']:.0f} s; {out}/conditions.json, {out}/conditions.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
