"""``qv demo bimanual``: run the three bimanual runs (:mod:`qv_control.demo.bimanual`), write ``summary.json``,
``runs.npz`` and the figures ``box_error.png``, ``internal_force.png``, ``release.png``.

    qv demo bimanual [--out DIR] [--config config/bimanual.yaml] [--short] [--conditions ideal|realistic]
                     [--ros] [--no-plot]

``--ros`` runs ours through the ROS topic contract (:mod:`qv_control.demo.bimanual_ros`); otherwise the
law is called directly and ``through_ros`` is false in the summary.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from qv_dynamics import runfiles
from qv_dynamics.errors import QVError
from qv_dynamics.jsonutil import jsonable
from qv_dynamics.yamlio import load_yaml

from .bimanual import BimanualConfig, metrics, run
from .bimanual_release import release_metrics, run_release


def summarize(runs: dict, cfg: BimanualConfig, through_ros: bool) -> dict:
    ours, base = metrics(runs["ours"], cfg), metrics(runs["baseline"], cfg)
    rel = release_metrics(runs["release"])
    return {
        "object_pos_rms_m": ours["object_pos_rms_m"],
        "object_rot_rms_rad": ours["object_rot_rms_rad"],
        "internal_force_rms_error_rel": ours["internal_force_rms_error_rel"],
        "internal_force_change_n": ours["internal_force_change_n"],
        "baseline_object_pos_rms_m": base["object_pos_rms_m"],
        "baseline_object_rot_rms_rad": base["object_rot_rms_rad"],
        "baseline_internal_force_rms_error_rel": base["internal_force_rms_error_rel"],
        "baseline_internal_force_change_n": base["internal_force_change_n"],
        "max_abs_torque_ratio": max(ours["max_abs_torque_ratio"], rel["release_max_abs_torque_ratio"]),
        "squeeze_step_box_move_m": ours["squeeze_step_box_move_m"],
        "squeeze_step_overshoot_n": ours["squeeze_step_overshoot_n"],
        "through_ros": bool(through_ros),
        "conditions": cfg.conditions,
        "ours": ours, "baseline": base, "release": rel,
        "config": {k: v for k, v in cfg.__dict__.items() if k != "system"},
        "system": {"arms": [a.__dict__ for a in cfg.system.arms], "object": cfg.system.object.__dict__},
    }


def _fig(rows: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(rows, 1, figsize=(8, 2.6 * rows), sharex=True)


def _save(fig, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    runfiles.savefig(fig, path, dpi=110)
    plt.close(fig)
    return path.name


def plot(out: Path, runs: dict, cfg: BimanualConfig) -> list[str]:
    names = []
    fig, ax = _fig(2)
    for key, style in (("ours", "-"), ("baseline", "--")):
        r = runs[key]
        ax[0].plot(r["t"], 1e3 * np.linalg.norm(r["e_pos"], axis=1), style, label=key)
        ax[1].plot(r["t"], np.rad2deg(np.linalg.norm(r["e_rot"], axis=1)), style, label=key)
    ax[0].set_ylabel("box position error [mm]")
    ax[1].set_ylabel("box orientation error [deg]")
    ax[1].set_xlabel("t [s]")
    for a in ax:
        a.axvspan(cfg.t_settle, cfg.t_settle + cfg.t_move, color="0.9")
        a.legend()
    ax[0].set_title(f"box {100 * np.linalg.norm(cfg.move):.3g} cm / {cfg.turn_deg:g} deg in {cfg.t_move:g} s "
                    f"({cfg.conditions})")
    names.append(_save(fig, out / "box_error.png"))
    fig, ax = _fig(2)
    for key, style in (("ours", "-"), ("baseline", "--")):
        r = runs[key]
        ax[0].plot(r["t"], r["squeeze"], style, label=key)
        ax[1].plot(r["t"], r["internal_err"], style, label=key)
    ax[0].plot(runs["ours"]["t"], runs["ours"]["squeeze_d"], ":k", label="desired")
    ax[0].set_ylabel("squeeze s [N]")
    ax[1].set_ylabel("|E^T(lambda - lambda_d)| [N, N m]")
    ax[1].set_xlabel("t [s]")
    for a in ax:
        a.legend()
    names.append(_save(fig, out / "internal_force.png"))
    r = runs["release"]
    fig, ax = _fig(3)
    ax[0].plot(r["t"], 1e3 * np.linalg.norm(r["e_pos"], axis=1))
    ax[0].set_ylabel("box position error [mm]")
    ax[1].plot(r["t"], r["squeeze"], label="squeeze")
    ax[1].set_ylabel("squeeze [N] (NaN: one hand)")
    tau = r["tau"][:, r["mask"].astype(bool)]
    ax[2].plot(r["t"], tau / r["limits"])
    ax[2].set_ylabel("tau / limit")
    ax[2].set_xlabel("t [s]")
    for k in r["switches"]:
        for a in ax:
            a.axvline(r["t"][k], color="r", lw=0.8)
    ax[0].set_title("right hand: hand over, release, away and back, re-grasp")
    names.append(_save(fig, out / "release.png"))
    return names


def run_all(cfg: BimanualConfig, out: Path | None = None, ros: bool = False, plots: bool = True,
            domain_id: int | None = None) -> dict:
    """The three runs (ours through ROS on ``domain_id``, default ROS_DOMAIN_ID, when ``ros``) + summary."""
    t0 = time.perf_counter()
    if ros:
        from .bimanual_ros import run_ros

        ours = run_ros(cfg, domain_id=domain_id)
    else:
        ours = run(cfg, "ours")
    runs = {"ours": ours, "baseline": run(cfg, "baseline"), "release": run_release(cfg)}
    summary = summarize(runs, cfg, through_ros=ros)
    summary["wall_time_s"] = time.perf_counter() - t0
    if out is not None:  # every file renamed into place, summary.json last
        out = runfiles.check_writable(out)
        if plots:
            summary["figures"] = plot(out, runs, cfg)
        runfiles.savez(out / "runs.npz", **{f"{k}_{f}": v for k, r in runs.items() for f, v in r.items()
                                            if isinstance(v, np.ndarray)})
        runfiles.write_json(out / "summary.json", jsonable(summary))
    return summary


def load_config(path: str | None) -> BimanualConfig:
    """The ``bimanual:`` mapping of a YAML file (or the whole file) as a checked :class:`BimanualConfig`; the
    shipped defaults (the Panda pair) without a file."""
    if not path:
        return BimanualConfig()
    doc = load_yaml(path, "two-arm config")
    if isinstance(doc, dict) and "bimanual" in doc:
        return BimanualConfig.from_dict(doc["bimanual"], "bimanual")
    return BimanualConfig.from_dict(doc, "config")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv demo bimanual", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bimanual_out")
    ap.add_argument("--config", default=None, help="YAML with a 'bimanual:' mapping (config/bimanual.yaml; the arms "
                    "and the box under its 'system:', e.g. config/bimanual_ur5.yaml)")
    ap.add_argument("--short", action="store_true", help="the CI variant (1 s move)")
    ap.add_argument("--conditions", choices=("ideal", "realistic"), default=None)
    ap.add_argument("--ros", action="store_true", help="run ours through the ROS topics")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except (OSError, QVError) as exc:
        print(f"qv demo bimanual: {args.config}: {exc}".replace("\n", " "), file=sys.stderr)
        return 2
    if args.conditions:
        cfg.conditions = args.conditions
    if args.short:
        cfg = cfg.shortened()
    s = run_all(cfg, Path(args.out), ros=args.ros, plots=not args.no_plot)
    keys = ("object_pos_rms_m", "object_rot_rms_rad", "internal_force_rms_error_rel", "internal_force_change_n",
            "baseline_object_pos_rms_m", "baseline_internal_force_rms_error_rel", "squeeze_step_box_move_m",
            "squeeze_step_overshoot_n",
            "max_abs_torque_ratio", "through_ros")
    for k in keys:
        print(f"{k:42s} {s[k]}")
    print(f"release: box held {s['release']['release_box_held']}, torque step at switches "
          f"{s['release']['release_torque_step_at_switch_nm']:.2f} N m (elsewhere "
          f"{s['release']['release_torque_step_elsewhere_nm']:.2f}); wrote {args.out}/summary.json")
    return 0
