"""What the constraint rows share: the closed loop (law ↔ plant at 1 kHz), the failure reasons and the
figures, all measured by the plant.

Figures (the keys of the matrix's rows plus ``failed``): force RMS error of the plant's constraint force
÷ |λ_d| and RMS path error over the measuring window; peak |λ| ÷ |λ_d|, settle time (from the force ramp's
end until |λ − λ_d| stays within 5 %), peak |τ|/limit of the demand, ``contact_lost`` (the plant's force
leaves the pressing side: a one-sided contact or guide would lift off) and ``failed``: "" or the reason —
``refused: …`` (the law raised on construction or on a tick), ``non-finite torque``, or ``lost the task``
(path error above ``LOST_M`` or the force on the wrong side for longer than ``LOST_S``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from qv_dynamics.state import Reference, State

KINDS = ("qv", "osc", "impedance")
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


def smooth_ramp(t: float, t0: float, T: float) -> float:
    """0 → 1 between t0 and t0 + T with zero slope at both ends (½ − ½cos)."""
    s = min(max((t - t0) / T, 0.0), 1.0)
    return 0.5 - 0.5 * math.cos(math.pi * s)


def closed_loop(plant, law, tick: Callable[[float], Tick], measure: Callable[[], tuple[float, np.ndarray]],
                duration: float, dt: float = 0.001, lam_of_state: Callable | None = None) -> dict:
    """Run ``law`` on ``plant`` for ``duration`` s at ``dt``: each tick the law sees the plant's q, q̇ and the
    last measured λ (``measure()`` → (λ, tool point)); returns the arrays and the failure reason."""
    lim = np.asarray(plant.effort_limits, float)
    rows: dict[str, list] = {k: [] for k in ("t", "fn", "f_d", "pos", "p_d", "ratio", "q")}
    failed, lam = "", None
    t_wall = time.perf_counter()
    for _ in range(int(round(duration / dt))):
        t = plant.time
        tk = tick(t)
        try:
            tau = law.compute(State(t=t, q=plant.q, qdot=plant.qdot,
                                    lambda_meas=None if lam is None else np.array([lam])), tk.reference)
        except Exception as exc:   # noqa: BLE001 (a law that raises on a tick has refused the case: reported)
            failed = f"refused: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}"
            break
        if not np.all(np.isfinite(tau)):
            failed = "non-finite torque"
            break
        plant.step(np.clip(tau, -lim, lim), dt)
        lam, pos = measure()
        r = rows
        r["t"].append(plant.time), r["fn"].append(lam), r["f_d"].append(tick(plant.time).lambda_d)
        r["pos"].append(pos), r["p_d"].append(tick(plant.time).p_d)
        r["ratio"].append(float(np.max(np.abs(tau) / lim))), r["q"].append(plant.q)
    arrays = {k: np.array(v, float) for k, v in rows.items()}
    return {"arrays": arrays, "failed": failed, "wall_time_s": time.perf_counter() - t_wall}


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
    t, fn, fd = a["t"], a["fn"], a["f_d"]
    out["max_abs_torque_ratio"] = float(np.max(a["ratio"]))
    path = np.linalg.norm((a["pos"] - a["p_d"])[:, list(path_axes)], axis=1)
    w = t >= t_meas
    after = t >= t_ramp_end
    side = np.sign(fd)
    off = after & (fn * side <= 0.0)
    out["contact_lost"] = int(np.count_nonzero(off[1:] & ~off[:-1]))
    dt = float(t[1] - t[0]) if len(t) > 1 else 0.001
    bad = (off | (path > LOST_M)) & after
    if not out["failed"] and (np.count_nonzero(bad) * dt > LOST_S):
        out["failed"] = "lost the task"
    if w.any():
        out["force_rms_error_rel"] = _rms(fn[w] - fd[w]) / force
        out["path_rms_error_m"] = _rms(path[w])
    if after.any():
        out["peak_force_ratio"] = float(np.max(np.abs(fn[after]))) / force
        badf = np.nonzero(after & (np.abs(fn - fd) > 0.05 * force))[0]
        out["settle_time_s"] = 0.0 if not badf.size else float(t[min(badf[-1] + 1, len(t) - 1)] - t_ramp_end)
    if run["failed"]:      # a run cut short is not measured over the window it did not reach
        out["force_rms_error_rel"] = out["path_rms_error_m"] = float("nan")
    return out


__all__ = ["FIGURES", "KINDS", "LOST_M", "LOST_S", "Tick", "closed_loop", "figures", "smooth_ramp"]
