"""What the constraint rows share: the closed loop (law ↔ plant at 1 kHz), the failure reasons and the
figures, all measured by the plant.

Figures (the keys of the matrix's rows plus ``failed``): force RMS error of the plant's constraint force (or of
the row's judged wrench, e.g. total force and moment ÷ lever) ÷ |λ_d| and RMS path error over the measuring
window; peak |λ| ÷ |λ_d|, settle time (from the force ramp's end until |λ − λ_d| stays within 5 %), peak
|τ|/limit of the demand, ``contact_lost`` (the plant's force of a contact row leaves the pressing side: a one-
sided contact or guide would lift off) and ``failed``: "" or the reason — ``refused: …`` (the law raised on
construction or on a tick), ``non-finite torque``, or ``lost the task`` (path error above ``LOST_M`` or the
force on the wrong side for longer than ``LOST_S``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from qv_dynamics.state import Reference, State

#: qv (the projection laws), osc (whole-body operational-space control: the row's coordinates, every contact row,
#: the actuation selection; :class:`~qv_control.laws.osc_constrained.ConstrainedOperationalSpaceLaw`), osc_tool
#: (operational-space control of one tool frame, :class:`~qv_control.laws.osc.OperationalSpaceLaw`) and impedance
KINDS = ("qv", "osc", "osc_tool", "impedance")
#: the laws given the row's coordinates θ and λ per contact row (reference and measurement); the others get
#: their frame's position and wrench
PER_ROW = ("qv", "osc")
#: bandwidths (1/s) of every law and the force PI (the matrix's: DemoConfig qv_kp/qv_kd, force_kp/ki); the laws
#: that take the acceleration gains (qv and osc) get G_P = KP·KD, G_D = KP + KD: the same closed-loop poles
KP, KD, KF, KI = 60.0, 120.0, 0.3, 30.0
#: the rows' acceptance: force (wrench) RMS error ≤ ACCEPT_FORCE of |λ_d|, path RMS error ≤ ACCEPT_PATH m, no
#: lift-off, not failed
ACCEPT_FORCE, ACCEPT_PATH = 0.01, 0.2e-3
#: path error (m) beyond which a run has lost the task
LOST_M = 0.01
#: s of force on the wrong side (or path error beyond LOST_M) that count as losing the task
LOST_S = 0.05
FIGURES = ("force_rms_error_rel", "path_rms_error_m", "peak_force_ratio", "settle_time_s",
           "max_abs_torque_ratio", "contact_lost", "failed")


@dataclass
class Tick:
    """What a row's reference gives at time t: the law's reference, λ_d, and the desired path point."""

    reference: Reference
    lambda_d: float
    p_d: np.ndarray


def cosine_stroke(s: float, x0: float, stroke: float, period: float) -> tuple[float, float, float]:
    """x, ẋ, ẍ of x = x0 + ½·stroke·(1 − cos ωs), ω = 2π/period: out and back once a period, at rest at x0
    for s ≤ 0."""
    if s <= 0:
        return x0, 0.0, 0.0
    w = 2 * math.pi / period
    return (x0 + 0.5 * stroke * (1 - math.cos(w * s)), 0.5 * stroke * w * math.sin(w * s),
            0.5 * stroke * w * w * math.cos(w * s))


def smooth_ramp(t: float, t0: float, T: float) -> float:
    """0 → 1 between t0 and t0 + T with zero slope at both ends (½ − ½cos)."""
    s = min(max((t - t0) / T, 0.0), 1.0)
    return 0.5 - 0.5 * math.cos(math.pi * s)


def closed_loop(plant, law, tick: Callable[[float], Tick], measure: Callable, duration: float,
                dt: float = 0.001) -> dict:
    """Run ``law`` on ``plant`` for ``duration`` s at ``dt``: each tick the law sees the plant's q, q̇ and the
    last measurement. ``measure()`` → (what the law is fed as λ_meas, the judged wrench (compared with
    ``Tick.lambda_d``), the tool point, the λ of every contact row); returns the arrays and the failure."""
    lim = np.asarray(plant.effort_limits, float)
    rows: dict[str, list] = {k: [] for k in ("t", "fn", "f_d", "pos", "p_d", "ratio", "q", "rows")}
    failed, lam = "", None
    t_wall = time.perf_counter()
    for _ in range(int(round(duration / dt))):
        t = plant.time
        tk = tick(t)
        try:
            tau = law.compute(State(t=t, q=plant.q, qdot=plant.qdot,
                                    lambda_meas=None if lam is None else np.atleast_1d(lam)), tk.reference)
        except Exception as exc:   # noqa: BLE001 (a law that raises on a tick has refused the case: reported)
            failed = f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            break
        if not np.all(np.isfinite(tau)):
            failed = "non-finite torque"
            break
        plant.step(np.clip(tau, -lim, lim), dt)
        lam, wrench, pos, contact_rows = measure()
        r = rows
        r["t"].append(plant.time), r["fn"].append(wrench), r["f_d"].append(tick(plant.time).lambda_d)
        r["rows"].append(contact_rows)
        r["pos"].append(pos), r["p_d"].append(tick(plant.time).p_d)
        r["ratio"].append(float(np.max(np.abs(tau) / lim))), r["q"].append(plant.q)
    arrays = {k: np.array(v, float) for k, v in rows.items()}
    return {"arrays": arrays, "failed": failed, "wall_time_s": time.perf_counter() - t_wall}


def make_law(kind: str, setup: dict, sysm, q0):
    """The law of ``kind`` with the row's per-scene choices ``setup`` (its keyword arguments; qv's ``law``:
    "pidc_force" (default) or "passive") and the shared gains, force PI and posture q0."""
    setup = dict(setup)
    if kind == "qv":
        from qv_control.laws.registry import make_law as registry_law

        extra = {"q0": q0} if setup.get("law") == "passive" else {}
        return registry_law(setup.pop("law", "pidc_force"), sysm, kp=KP * KD, kd=KP + KD, kf=KF, ki=KI, **extra,
                            **setup)
    if kind == "osc":
        from qv_control.laws.osc_constrained import ConstrainedOperationalSpaceLaw

        return ConstrainedOperationalSpaceLaw(sysm, kp=KP * KD, kd=KP + KD, kf=KF, ki=KI, q_null=q0, **setup)
    if kind == "osc_tool":
        from qv_control.laws.osc import OperationalSpaceLaw

        return OperationalSpaceLaw(sysm, kp=KP, kd=KD, kf=KF, ki=KI, q_null=q0, **setup)
    if kind == "impedance":
        from qv_control.laws.impedance import ImpedanceForceBaseline

        return ImpedanceForceBaseline(sysm, force_ki=KI, q_null=q0, **setup)
    raise ValueError(f"unknown controller {kind!r}; use one of {KINDS}")


def setup_text(setup: dict) -> str:
    """The per-scene choices as one line: ``key value; ...`` (a phase's choices as ``phase: ...``)."""
    def value(v) -> str:
        if isinstance(v, (list, tuple)):
            return " ".join(value(x) for x in v)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {value(x)}" for k, x in v.items() if k != "rotation_reference") + "}"
        return f"{v:g}" if isinstance(v, float) else str(v)

    if setup and all(isinstance(v, dict) for v in setup.values()):
        return "; ".join(f"{phase}: {setup_text(v)}" for phase, v in setup.items())
    return ", ".join(f"{k} {value(v)}" for k, v in setup.items()) or "none"


def run_row(name: str, kind: str, make_law: Callable, plant, tick: Callable, measure: Callable, duration: float,
            force: float, t_ramp_end: float, t_meas: float, path_axes=(0,)) -> dict:
    """Build the law (``make_law()``; an exception there is the law refusing the case), run it on the plant
    (:func:`closed_loop`) and measure (:func:`figures`)."""
    try:
        law = make_law()
    except Exception as exc:   # noqa: BLE001 (a law that cannot be built for the case has refused it)
        out = {"arrays": {k: np.zeros(0) for k in ("t", "fn", "f_d", "pos", "p_d", "ratio", "q", "rows")},
               "failed": f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}", "wall_time_s": 0.0}
    else:
        out = closed_loop(plant, law, tick, measure, duration)
    out["figures"] = figures(out, force, t_ramp_end, t_meas, path_axes)
    out.update(kind=kind, condition=name)
    return out


def acceptance(f: dict) -> str:
    """"" when the figures ``f`` meet the rows' acceptance, else what misses it (the failure reason first)."""
    if f["failed"]:
        return f["failed"]
    miss = []
    if not f["force_rms_error_rel"] <= ACCEPT_FORCE:
        miss.append(f"force {100 * f['force_rms_error_rel']:.3g} % > {100 * ACCEPT_FORCE:g} %")
    if not f["path_rms_error_m"] <= ACCEPT_PATH:
        miss.append(f"path {1e3 * f['path_rms_error_m']:.3g} mm > {1e3 * ACCEPT_PATH:g} mm")
    if f["contact_lost"]:
        miss.append(f"{f['contact_lost']} lift-off(s)")
    return "; ".join(miss)


def _rms(x) -> float:
    x = np.asarray(x, float)
    return float(np.sqrt(np.mean(x * x))) if x.size else float("nan")


def figures(run: dict, force: float, t_ramp_end: float, t_meas: float, path_axes=(0,)) -> dict:
    """The row's figures (module doc); ``force`` = |λ_d| of the plateau, the window from ``t_meas`` on."""
    a = run["arrays"]
    out = {k: float("nan") for k in FIGURES[:5]}
    out.update(contact_lost=0, failed=run["failed"])
    if not len(a["t"]):
        return out
    t = a["t"]
    fn2, fd2 = a["fn"].reshape(len(t), -1), a["f_d"].reshape(len(t), -1)
    err = np.linalg.norm(fn2 - fd2, axis=1)            # the judged wrench's error (the force alone: |λ − λ_d|)
    fn, fd = fn2[:, 0], fd2[:, 0]
    out["max_abs_torque_ratio"] = float(np.max(a["ratio"]))
    path = np.linalg.norm((a["pos"] - a["p_d"])[:, list(path_axes)], axis=1)
    w = t >= t_meas
    after = t >= t_ramp_end
    side = np.sign(fd)
    off = after & np.any(a["rows"].reshape(len(t), -1) * side[:, None] <= 0.0, axis=1)
    out["contact_lost"] = int(np.count_nonzero(off[1:] & ~off[:-1]))
    dt = float(t[1] - t[0]) if len(t) > 1 else 0.001
    bad = (off | (path > LOST_M)) & after
    if not out["failed"] and (np.count_nonzero(bad) * dt > LOST_S):
        out["failed"] = "lost the task"
    if w.any():
        out["force_rms_error_rel"] = _rms(err[w]) / force
        out["path_rms_error_m"] = _rms(path[w])
    if after.any():
        out["peak_force_ratio"] = float(np.max(np.abs(fn[after]))) / force
        badf = np.nonzero(after & (err > 0.05 * force))[0]
        out["settle_time_s"] = 0.0 if not badf.size else float(t[min(badf[-1] + 1, len(t) - 1)] - t_ramp_end)
    if run["failed"]:      # a run cut short is not measured over the window it did not reach
        out["force_rms_error_rel"] = out["path_rms_error_m"] = float("nan")
    return out


__all__ = ["ACCEPT_FORCE", "ACCEPT_PATH", "FIGURES", "KINDS", "LOST_M", "LOST_S", "PER_ROW", "Tick", "acceptance",
           "closed_loop", "figures", "make_law", "run_row", "setup_text", "smooth_ramp"]
