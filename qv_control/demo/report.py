"""Figures of the demo runs, all measured in MuJoCo: metrics, the force-step effect, plots and the table."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import numpy as np

from qv_dynamics import ConstrainedSystem, runfiles

from ..task.profiles import EPS
from .config import CONTACT, PHASES, DemoConfig, make_system


def _rms(x) -> float:
    x = np.asarray(x, float)
    return float(np.sqrt(np.mean(x * x))) if x.size else float("nan")


def metrics(run: dict, cfg: DemoConfig) -> dict:
    """Figures of one run, all from MuJoCo (contact force via mj_contactForce, tool site position)."""
    a, p = run["arrays"], run["plan"]
    out: dict = {"aborted": run["aborted"], "wall_time_s": run["wall_time_s"], "sim_time_s": float(a["t"][-1])
                 if len(a["t"]) else 0.0}
    if not p or not len(a["t"]):
        return out
    t = a["t"]
    path_err = np.linalg.norm(a["tool"][:, :2] - a["p_d"][:, :2], axis=1)
    ferr = a["fn"] - a["f_d"]
    w = (t >= p["t_meas"] - EPS) & (t < p["t_meas_end"] - EPS)   # EPS: as the task's switching instants
    out["force_rms_error_rel"] = _rms(ferr[w]) / cfg.force
    out["force_rms_error_n"] = _rms(ferr[w])
    out["force_max_error_rel"] = float(np.max(np.abs(ferr[w]))) / cfg.force if w.any() else float("nan")
    out["path_rms_error_m"] = _rms(path_err[w])
    out["path_max_error_m"] = float(np.max(path_err[w])) if w.any() else float("nan")
    out["depth_rms_m"] = _rms(a["tool"][w, 2] - (a["table"][w] + cfg.tip_radius))
    lim = run["limits"]
    ratio = a["demand_ratio"]
    out["max_abs_torque_ratio"] = float(np.max(ratio))
    out["max_commanded_torque_ratio"] = float(np.max(np.abs(a["tau_cmd"]) / lim))
    if cfg.phases_after_nominal and p["t_step"] < p["t_back"]:
        h = cfg.step_window
        ts = p["t_step"] - EPS
        before = (t >= ts - h) & (t < ts)
        after = (t >= ts) & (t < ts + h)
        out["step_path_rms_before_m"] = _rms(path_err[before])
        out["step_path_rms_after_m"] = _rms(path_err[after])
        settle = after & (t >= ts + 0.1)
        out["step_force_rms_error_rel"] = _rms(ferr[settle]) / cfg.force_step if settle.any() else float("nan")
        loss = (t >= p["t_lower"] - EPS) & (t < p["t_release"] - EPS)
        out["contact_loss_max_torque_ratio"] = float(np.max(ratio[loss])) if loss.any() else float("nan")
        out["contact_loss_max_force_n"] = float(np.max(a["fn"][loss])) if loss.any() else float("nan")
    ev = [e["event"] for e in run["events"]]
    out["events"] = run["events"]
    out["contact_lost_logged"] = ev.count("contact lost")
    out["contact_regained_logged"] = ev.count("contact regained")
    out["contact_made_logged"] = ev.count("contact made")
    if "ros" in run:
        out["ros"] = run["ros"]
    out["control_steps"] = int(len(t))
    return out


def step_effect(run_step: dict, run_nostep: dict, cfg: DemoConfig) -> dict:
    """Effect of the force step on the path: the same run without the step is the counterfactual
    (deterministic lock-step runs are identical up to the step). d(t) = e_step(t) − e_nostep(t) with
    e the in-plane error vector of the MuJoCo tool, over [t_step, t_step + step_window]."""
    a, b, p = run_step["arrays"], run_nostep["arrays"], run_step["plan"]
    n = min(len(a["t"]), len(b["t"]))
    if not p or n == 0 or abs(a["t"][n - 1] - b["t"][n - 1]) > 1e-9:
        return {}
    t = a["t"][:n]
    e_a = a["tool"][:n, :2] - a["p_d"][:n, :2]
    e_b = b["tool"][:n, :2] - b["p_d"][:n, :2]
    d = np.linalg.norm(e_a - e_b, axis=1)
    w = (t >= p["t_step"] - EPS) & (t < p["t_step"] - EPS + cfg.step_window)
    pre = t < p["t_step"] - EPS
    if not w.any():
        return {}
    ea, eb = np.linalg.norm(e_a[w], axis=1), np.linalg.norm(e_b[w], axis=1)
    return {"step_path_deviation_rms_m": _rms(d[w]), "step_path_deviation_max_m": float(np.max(d[w])),
            "prestep_path_deviation_max_m": float(np.max(d[pre])) if pre.any() else float("nan"),
            "step_path_error_change_m": _rms(ea) - _rms(eb),
            "step_force_change_n": float(np.mean(a["fn"][:n][w][-100:]) - np.mean(b["fn"][:n][w][-100:]))}


def quasi_velocity_series(run: dict, system: ConstrainedSystem, every: int = 10):
    """v = Qᵀq̇ and (in contact) v_r = V₂ᵀv along the MuJoCo trajectory (controller model, no gauge)."""
    from qv_dynamics import quasi_decompose

    a = run["arrays"]
    ts, V, VR, prev, prev_contact = [], [], [], None, None
    for i in range(0, len(a["t"]), every):
        system.set_active(CONTACT, bool(a["contact"][i]), reanchor=False)
        if system.constraint(CONTACT).position is None:
            system.anchor(a["q"][i])
        terms = system.evaluate(a["q"][i], a["qdot"][i])
        qs = quasi_decompose(terms, prev=prev if prev_contact == bool(a["contact"][i]) else None)
        prev, prev_contact = qs, bool(a["contact"][i])
        ts.append(a["t"][i])
        V.append(qs.v)
        vr = np.full(system.nv, np.nan)
        vr[:qs.v_r.size] = qs.v_r
        VR.append(vr)
    system.set_active(CONTACT, False)
    return np.array(ts), np.array(V), np.array(VR)


def plot_report(out: Path, runs: dict, cfg: DemoConfig) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    qv = runs["qv"]
    colors = {"qv": "C0", "baseline": "C1", "qv_mass_error": "C2", "qv_mass_error_no_pi": "C3"}

    def shade(ax, run):
        a = run["arrays"]
        t, c = a["t"], a["contact"].astype(float)
        ax.fill_between(t, 0, 1, where=c > 0.5, transform=ax.get_xaxis_transform(), color="0.9", zorder=0)

    # 1. normal force
    fig, ax = plt.subplots(figsize=(9, 4))
    shade(ax, qv)
    for name, run in runs.items():
        a = run["arrays"]
        ax.plot(a["t"], a["fn"], color=colors.get(name), lw=0.8, label=f"{name}: MuJoCo contact force")
    ax.plot(qv["arrays"]["t"], qv["arrays"]["f_d"], "k--", lw=1, label="commanded")
    ax.set_xlabel("t [s]"), ax.set_ylabel("normal force [N]"), ax.set_ylim(-1, 3 * cfg.force_step)
    ax.legend(fontsize=7), ax.set_title("Normal force: commanded vs MuJoCo-measured (grey: contact model on)")
    files.append(_save(fig, out / "normal_force.png"))
    # 2. path error
    fig, ax = plt.subplots(figsize=(9, 4))
    shade(ax, qv)
    for name, run in runs.items():
        a = run["arrays"]
        e = np.linalg.norm(a["tool"][:, :2] - a["p_d"][:, :2], axis=1) * 1e3
        ax.plot(a["t"], e, color=colors.get(name), lw=0.8, label=name)
    p = qv["plan"]
    for k in ("t_meas", "t_meas_end", "t_step", "t_back", "t_lower", "t_release"):
        if k in p:
            ax.axvline(p[k], color="0.5", lw=0.5, ls=":")
    ax.set_yscale("log"), ax.set_ylim(1e-4, 50)
    ax.set_xlabel("t [s]"), ax.set_ylabel("tangential path error [mm]"), ax.legend(fontsize=7)
    ax.set_title("Tangential (in-plane) path error of the MuJoCo tool")
    files.append(_save(fig, out / "path_error.png"))
    # 3. path in the plane
    fig, ax = plt.subplots(figsize=(5, 5))
    for name, run in runs.items():
        a = run["arrays"]
        ax.plot(a["tool"][:, 0], a["tool"][:, 1], color=colors.get(name), lw=0.8, label=name)
    ax.plot(qv["arrays"]["p_d"][:, 0], qv["arrays"]["p_d"][:, 1], "k--", lw=0.8, label="reference")
    ax.set_aspect("equal"), ax.legend(fontsize=7), ax.set_xlabel("x [m]"), ax.set_ylabel("y [m]")
    files.append(_save(fig, out / "path_xy.png"))
    # 4. quasi-velocities
    sysm = make_system(cfg)
    ts, V, VR = quasi_velocity_series(qv, sysm)
    fig, axs = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    axs[0].plot(ts, V, lw=0.8)
    axs[0].set_ylabel("v = Qᵀq̇"), axs[0].set_title("Quasi-velocities (qv run)")
    axs[1].plot(ts, VR, lw=0.8)
    axs[1].set_ylabel("v_r = V₂ᵀv"), axs[1].set_xlabel("t [s]")
    files.append(_save(fig, out / "quasi_velocities.png"))
    # 5. contact phases + torque ratio
    fig, axs = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for name, run in runs.items():
        a = run["arrays"]
        axs[0].step(a["t"], a["phase"], where="post", color=colors.get(name), lw=0.8, label=name)
        axs[1].plot(a["t"], a["demand_ratio"], color=colors.get(name), lw=0.6,
                    label=name)
    axs[0].set_yticks(range(len(PHASES))), axs[0].set_yticklabels(PHASES, fontsize=7)
    axs[0].set_title("Contact phases (switches logged once each) and peak |τ|/limit"), axs[0].legend(fontsize=7)
    axs[1].axhline(1.0, color="r", lw=0.8), axs[1].set_ylabel("max |τᵢ|/τ_lim,i"), axs[1].set_xlabel("t [s]")
    files.append(_save(fig, out / "contact_phases.png"))
    return files


def _save(fig, path: Path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    runfiles.savefig(fig, path, dpi=110)  # a temporary renamed into place
    plt.close(fig)
    return path.name


# summary key -> key in the per-run metrics; each is reported for the quasi-velocity law and the baseline
PAIRED = {
    "force_rms_error_rel": "force_rms_error_rel", "path_rms_error_m": "path_rms_error_m",
    "max_abs_torque_ratio": "max_abs_torque_ratio",
    "force_step_path_error_change_m": "step_path_error_change_m",
    "force_step_path_deviation_rms_m": "step_path_deviation_rms_m",
    "force_step_path_deviation_max_m": "step_path_deviation_max_m",
    "contact_loss_max_torque_ratio": "contact_loss_max_torque_ratio",
}


def summarize(m: dict, cfg: DemoConfig, ros: bool) -> dict:
    """The demo's headline figures from the per-run metrics ``m`` (runs qv, baseline, qv_mass_error, ...)."""
    qv, bl = m["qv"], m["baseline"]
    s = {}
    for key, src in PAIRED.items():
        s[key], s[f"baseline_{key}"] = qv.get(src), bl.get(src)
    me, nopi = m.get("qv_mass_error", {}), m.get("qv_mass_error_no_pi", {})
    dev, dev_bl = qv.get("step_path_deviation_rms_m"), bl.get("step_path_deviation_rms_m")
    s.update({
        "mass_error_force_rms_error_rel": me.get("force_rms_error_rel"),
        "mass_error_path_rms_error_m": me.get("path_rms_error_m"), "mass_error": cfg.mass_error,
        "mass_error_no_pi_force_rms_error_rel": nopi.get("force_rms_error_rel"),
        "force_step_qv_path_deviation_below_baseline": None if dev is None or dev_bl is None else bool(dev < dev_bl),
        "contact_lost_logged": qv.get("contact_lost_logged"),
        "contact_regained_logged": qv.get("contact_regained_logged"),
        "commanded_force_n": cfg.force, "force_step_n": cfg.force_step, "table_lowered_m": cfg.lower_by,
        "through_ros": ros, "runs": m, "config": asdict(cfg),
    })
    return s


def print_table(s: dict) -> None:
    def f(x, scale=1.0, fmt="{:10.4f}"):
        return f"{'n/a':>10}" if x is None else fmt.format(x * scale)

    rows = [
        ("force RMS error, % of F_d", "force_rms_error_rel", "baseline_force_rms_error_rel", 100),
        ("path RMS error, mm", "path_rms_error_m", "baseline_path_rms_error_m", 1e3),
        ("force step: path deviation RMS, um", "force_step_path_deviation_rms_m",
         "baseline_force_step_path_deviation_rms_m", 1e6),
        ("force step: path deviation max, um", "force_step_path_deviation_max_m",
         "baseline_force_step_path_deviation_max_m", 1e6),
        ("force step: path RMS error change, um", "force_step_path_error_change_m",
         "baseline_force_step_path_error_change_m", 1e6),
        ("peak |tau|/limit, whole run", "max_abs_torque_ratio", "baseline_max_abs_torque_ratio", 1),
        ("peak |tau|/limit, contact loss+regain", "contact_loss_max_torque_ratio",
         "baseline_contact_loss_max_torque_ratio", 1),
    ]
    print(f"\n{'(MuJoCo measurements)':40s}{'quasi-vel.':>10s}  {'baseline':>10s}")
    for label, k1, k2, sc in rows:
        print(f"{label:40s}{f(s.get(k1), sc)}  {f(s.get(k2), sc)}")
    print(f"with {100 * s['mass_error']:.0f}% link-mass error in the controller model: force RMS error "
          f"{f(s.get('mass_error_force_rms_error_rel'), 100, '{:.3f}')} % with the force PI, "
          f"{f(s.get('mass_error_no_pi_force_rms_error_rel'), 100, '{:.3f}')} % without; path RMS "
          f"{f(s.get('mass_error_path_rms_error_m'), 1e3, '{:.3f}')} mm")
    print(f"phase changes logged: contact lost {s['contact_lost_logged']}x, regained {s['contact_regained_logged']}x "
          "(table lowered once)")
