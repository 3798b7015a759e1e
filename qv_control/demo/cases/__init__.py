"""The formulation rows (``qv formulation``): scenes where the constraint itself is the difficulty (closed chains,
singular and redundant constraints, passive joints), one module per row, each with its own scene and the four
controllers (qv, osc, osc_tool, impedance: :data:`.common.KINDS`) set up for it. Each row module declares the
per-scene choices of every controller as ``SETUP`` (the keyword arguments it builds the law with; gains, force PI
and posture are shared), which the table prints (:func:`setup_of`).

A row's run returns the figures plus ``failed`` (:mod:`.common`); :func:`write_case_plots` draws each row's runs
(constraint force and path error against time, one line per controller).
"""
from __future__ import annotations

from importlib import import_module
from pathlib import Path

from qv_dynamics import runfiles

#: row name -> (module in this package, the plant that judges it)
_MODULES = {"redundant_contacts": ("redundant_contacts", "mujoco"),
            "rank_change": ("rank_change", "mujoco"),
            "singular_pass": ("singular_pass", "mujoco"),
            "passive_joint_tool": ("passive_joint_tool", "mujoco"),
            "closed_chain_force": ("closed_chain_force", "mujoco")}
#: row name -> plant
CASE_PLANTS = {name: plant for name, (_, plant) in _MODULES.items()}
#: the rows, in the table's order
ROWS = tuple(_MODULES)
#: the runs of this process, (row, controller) -> run: what write_case_plots draws
LAST_RUNS: dict[tuple[str, str], dict] = {}


def run_case(name: str, kind: str, duration: float | None = None) -> dict:
    """One (row, controller) run: {"figures", "arrays", "failed", "v_touch": None, ...}."""
    run = import_module(f"{__name__}.{_MODULES[name][0]}").run(kind, duration=duration)
    run.setdefault("v_touch", None)
    run.setdefault("aborted", None)
    LAST_RUNS[(name, kind)] = run
    return run


def setup_of(name: str, kind: str) -> dict:
    """The per-scene choices of controller ``kind`` on row ``name`` (the row module's ``SETUP``)."""
    return import_module(f"{__name__}.{_MODULES[name][0]}").SETUP[kind]


def write_case_plots(out: Path) -> list[Path]:
    """``out/<row>.png`` for every row run in this process: the plant's constraint force against λ_d and the
    path error, per controller (failed runs are drawn up to where they stopped)."""
    rows = sorted({name for name, _ in LAST_RUNS})
    if not rows:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name in rows:
        runs = [(kind, run) for (row, kind), run in LAST_RUNS.items() if row == name and len(run["arrays"]["t"])]
        wide = any(run["arrays"]["fn"].ndim == 2 for _, run in runs)     # a judged wrench: force and moment
        fig, axes = plt.subplots(3 if wide else 2, 1, figsize=(8, 8 if wide else 6), sharex=True)
        ax_f, ax_p = axes[0], axes[-1]
        for kind, run in runs:
            a, f = run["arrays"], run["figures"]
            label = f"{kind}" + (f" (failed: {f['failed']})" if f["failed"] else "")
            fn, fd = a["fn"].reshape(len(a["t"]), -1), a["f_d"].reshape(len(a["t"]), -1)
            ax_f.plot(a["t"], -fn[:, 0], label=label)
            if wide:
                axes[1].plot(a["t"], fn[:, 1], label=kind)
            ax_p.plot(a["t"], 1e3 * (a["pos"][:, 0] - a["p_d"][:, 0]), label=kind)
            if kind == "qv":
                ax_f.plot(a["t"], -fd[:, 0], "k--", lw=0.8, label="commanded")
                if wide:
                    axes[1].plot(a["t"], fd[:, 1], "k--", lw=0.8)
        if wide:
            axes[1].set_ylabel("moment ÷ lever (N)")
        ax_f.set_ylabel("pressing force −λ (N)")
        ax_p.set_ylabel("path error (mm)")
        ax_p.set_xlabel("t (s)")
        ax_f.set_title(f"{name} (measured by the plant)")
        ax_f.legend(fontsize=8)
        path = Path(out) / f"{name}.png"
        fig.tight_layout()
        runfiles.savefig(fig, path, dpi=90)
        plt.close(fig)
        paths.append(path)
    return paths


__all__ = ["CASE_PLANTS", "LAST_RUNS", "ROWS", "run_case", "setup_of", "write_case_plots"]
