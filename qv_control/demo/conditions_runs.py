"""One run of the contact task under a :class:`~qv_control.demo.conditions.Condition`, and its figures.

The loop is the demo's direct loop (plant and law called directly) with what a real set-up adds between
them: measurement noise and the user's filters (F/T low-pass; q̇ low-pass or velocity observer), the
tool-weight compensation of a flange F/T sensor (from the model's documented tool mass), and a command
delay applied at the physics rate.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import replace

import numpy as np
import pinocchio as pin

from qv_dynamics.observer import VelocityObserver
from qv_dynamics.state import State

from ..task import TERMINAL, LowPass
from .conditions import CONDITIONS, Condition, conditions_config, controller_system, make_plant
from .config import DemoConfig, demo_law, demo_task, make_system, planned_touch_speed

KINDS = ("qv", "osc", "impedance")
#: integral action on motion of qv and OSC (1/s²): k_I = k_d²/4 puts a double pole at −k_d/2 (= −60/s)
KI_MOTION = 3600.0
#: friction compensation of qv and OSC: "measured" (F/T tangential force while sliding), "model" or ""
FRICTION_COMPENSATION = "measured"
#: low-pass of the sliding direction in the friction compensation (Hz; see laws/friction.py): with q̇ noise a
#: raw direction injects the noise into the tangential force (Drake μ = 0.8 + q̇ noise: 1.9 % -> 0.97 %)
FRICTION_DIRECTION_HZ = 5.0
#: the friction compensation's sliding direction: "reference" (the desired tool velocity: no noise, no lag,
#: compensates while the tool still sticks when the circle starts) or "measured" (laws/friction.py)
FRICTION_DIRECTION = "reference"
#: μ̂ before the tool first slides: a user's prior for a surface known to have friction, the same for every
#: such surface (neither condition's true μ: 0.3 / 0.8), and 0 on the frictionless scenes (there 0.5 pushes
#: 5 N ahead for the ~3 ms until the tool slides: +6.6 % normal force, settle 0.003 -> 0.399 s on table_-5mm).
#: Drake μ = 0.8, settle 0.51 s -> 0.020 s; prior 0.8 on μ = 0.3: 0.40 s, 0.3 on μ = 0.8: 0.48 s
FRICTION_PRIOR = 0.5
G = 9.81
#: surface estimates for the touch-down plan (stiffness N/m, damping factor c of :func:`touch_speed`), what a
#: user would measure once by a static press: MuJoCo solref 0.002 s and 0.02 s (critically damped, c = 2),
#: Drake's point stiffness (Hunt–Crossley d = 200 s/m: d·ṙ ≈ 1 at touch-down adds about half the spring's
#: peak, c = 1.5; measured 1.47-1.49x with c = 1)
SURFACE = {("mujoco", 0.002): (2.0e6, 2.0), ("mujoco", 0.02): (2.0e4, 2.0), ("drake", 0.002): (1.0e6, 1.5)}


def make_controller(kind: str, cfg: DemoConfig, cond: Condition, system, R0, q0):
    """qv (quasi-velocity hybrid law), osc (operational-space hybrid law, same bandwidths and force PI) or
    impedance (the demo's Cartesian impedance baseline) as a :class:`~qv_control.task.TaskLaw`; qv and osc
    with the motion integral and the friction compensation."""
    if kind not in KINDS:
        raise ValueError(f"unknown controller {kind!r}; use one of {KINDS}")
    friction = None
    if kind in ("qv", "osc") and FRICTION_COMPENSATION:
        friction = dict(mode=FRICTION_COMPENSATION, direction_hz=FRICTION_DIRECTION_HZ, direction=FRICTION_DIRECTION,
                        mu=FRICTION_PRIOR if cond.friction > 0 else 0.0)
    # qv: the backward difference of the normal rate (Gv_n)˙ is off: it amplifies q̇ noise, and on a stiff
    # contact with sticking friction it excites a bounce (Drake, μ = 0.3: 201 contact losses with it)
    return demo_law(kind, cfg, system, R0, q0, ki_motion=KI_MOTION if kind != "impedance" else 0.0,
                    extra={"normal_rate": False} if kind == "qv" else None, friction=friction)


class _Sensors:
    """Noisy, filtered measurements: q̇ (low-pass, or the model-based observer of the controller's model
    fed with the last command and the F/T force) and the F/T force turned into the contact force on the tool."""

    def __init__(self, cond: Condition, dt: float, seed: int, system, frame: str):
        self.cond = cond
        self.rng = np.random.default_rng(seed)
        self.f_qd = LowPass(cond.qdot_filter_hz, dt)
        self.f_ft = LowPass(cond.ft_filter_hz, dt)
        self.system, self.fid = system, system.frame_id(frame)
        self.observer = VelocityObserver(system, cond.qdot_observer_hz) if cond.qdot_observer_hz > 0 else None

    def qdot(self, plant, tau_cmd: np.ndarray | None, f_contact: np.ndarray) -> np.ndarray:
        qd = plant.qdot
        if self.cond.qdot_noise > 0:
            qd = qd + self.rng.normal(0.0, self.cond.qdot_noise, qd.size)
        qd = self.f_qd(qd)
        if self.observer is None:
            return qd
        q, model, data = plant.q, self.system.model, self.system.data
        Jp = pin.computeFrameJacobian(model, data, q, self.fid, pin.LOCAL_WORLD_ALIGNED)[:3]
        tau = np.zeros(qd.size) if tau_cmd is None else tau_cmd
        return self.observer.update(plant.time, q, qd, tau, Jp.T @ f_contact)

    def contact_force(self, plant, acc: np.ndarray) -> np.ndarray:
        """Contact force on the tool (world) from the F/T sensor: the sensor reads F_c + m(g − a) for a
        tool of mass m below it, so F_c = F_s − m(g − a) with the model's tool mass and the planned tool
        acceleration ``acc`` (the reference p̈_d) standing for a."""
        f = plant.tool_wrench_world()[:3]
        if self.cond.ft_noise > 0:
            f = f + self.rng.normal(0.0, self.cond.ft_noise, 3)
        weight = self.cond.tool_mass * (np.array([0.0, 0.0, -G]) - acc)
        self.raw = f - weight            # unfiltered (no filter lag): where the force ramp after a touch starts
        return self.f_ft(f) - weight


def run_condition(cond: Condition | str, kind: str = "qv", cfg: DemoConfig | None = None, seed: int = 0) -> dict:
    """Run one condition with one controller; returns arrays, events, plan and the figures."""
    cond = CONDITIONS[cond] if isinstance(cond, str) else cond
    cfg = replace(cfg or conditions_config(), approach_speed=cond.approach_speed)
    plant_sys = make_system(cfg)
    q0 = np.asarray(cfg.q0, float)
    oMf = plant_sys.frame_placement(q0, cfg.tool_frame)
    p0, R0 = oMf.translation.copy(), oMf.rotation.copy()
    ctrl = controller_system(cfg, cond)
    plant = make_plant(cfg, cond, plant_sys)
    plant.reset(q0)
    # the arm holds its start pose for one period (the plant's own gravity torque, tool included) before the
    # task starts, so a flange sensor reads the tool's weight from the first sample on
    true_model = controller_system(cfg, Condition("plant", tool_mass=cond.tool_mass)).model
    hold = pin.computeGeneralizedGravity(true_model, true_model.createData(), q0)
    plant.step(hold, cfg.dt)
    k, c = SURFACE[(cond.plant, cond.contact_timeconst if cond.plant == "mujoco" else 0.002)]
    v_touch = planned_touch_speed(replace(cfg, planned=cond.planned), ctrl, q0, k, c)
    sc = demo_task(cfg, ctrl, p0, v_touch, logger=_Quiet())
    tl = make_controller(kind, cfg, cond, ctrl, R0, q0)
    law = tl.law
    sensors = _Sensors(cond, cfg.dt, seed, ctrl, cfg.tool_frame)
    lim = plant.effort_limits
    sub = max(1, int(round(cfg.dt / cfg.timestep)))
    pending: deque = deque()
    tau_applied = tau = None
    rows: dict[str, list] = {k: [] for k in ("t", "tool", "p_d", "fn", "f_d", "contact", "ratio")}
    t_wall = time.perf_counter()
    while sc.phase not in TERMINAL:
        t = plant.time
        f_meas = sensors.contact_force(plant, sc.point(t)["a"])
        fn_meas = float(f_meas[2])
        sc.update(t, fn_meas, plant.tool_position[2], fn_start=float(sensors.raw[2]))
        if sc.phase in TERMINAL:
            break
        task = sc.point(t)
        if hasattr(law, "measure"):
            law.measure(f_meas)
        lam = np.array([-fn_meas]) if task["contact"] else None
        tau = law.compute(State(t=t, q=plant.q, qdot=sensors.qdot(plant, tau, f_meas), lambda_meas=lam),
                          tl.reference(task))
        pending.append((t + cond.delay * cfg.dt - 1e-9, tau))
        if tau_applied is None:
            tau_applied = pending[0][1]
        for _ in range(sub):
            while pending and pending[0][0] <= plant.time:
                tau_applied = pending.popleft()[1]
            plant.step(tau_applied, cfg.timestep)
        peak = getattr(law, "peak_ratio", None)
        r = rows
        r["t"].append(plant.time), r["tool"].append(plant.tool_position), r["p_d"].append(sc.point(plant.time)["p"])
        r["fn"].append(plant.normal_force()), r["f_d"].append(sc.commanded_force(plant.time))
        r["contact"].append(bool(task["contact"]))
        r["ratio"].append(float(peak) if peak is not None else float(np.max(np.abs(tau) / lim)))
    run = {"arrays": {k: np.array(v) for k, v in rows.items()}, "events": sc.events, "plan": sc.plan,
           "aborted": sc.reason, "wall_time_s": time.perf_counter() - t_wall, "v_touch": v_touch,
           "condition": cond.name, "kind": kind}
    run["figures"] = figures(run, cfg)
    return run


class _Quiet:
    def info(self, msg: str) -> None:  # the matrix runs dozens of scenarios: events are kept, not printed
        pass


def _rms(x) -> float:
    x = np.asarray(x, float)
    return float(np.sqrt(np.mean(x * x))) if x.size else float("nan")


def figures(run: dict, cfg: DemoConfig) -> dict:
    """The matrix's figures, all measured by the plant: force RMS error (÷ commanded) and in-plane path RMS
    error over the measuring window; peak contact force ÷ commanded from the first contact on; time from
    the first contact until the force stays within 5 % of the commanded; peak |τ|/limit of the demand;
    number of lift-offs (the plant's contact force drops to zero) from the first contact to the end of the
window (no table drop in these runs: every loss is a bounce or a lift-off)."""
    a, p = run["arrays"], run["plan"]
    out = {"force_rms_error_rel": float("nan"), "path_rms_error_m": float("nan"), "peak_force_ratio": float("nan"),
           "settle_time_s": float("nan"), "max_abs_torque_ratio": float(np.max(a["ratio"])) if len(a["t"]) else
           float("nan"), "contact_lost": sum(e["event"] == "contact lost" for e in run["events"]),
           "failed": "aborted" if run["aborted"] else ""}
    if not p or run["aborted"]:
        return out
    t, fn, fd = a["t"], a["fn"], a["f_d"]
    w = (t >= p["t_meas"]) & (t < p["t_meas_end"])
    path = np.linalg.norm(a["tool"][:, :2] - a["p_d"][:, :2], axis=1)
    out["force_rms_error_rel"] = _rms(fn[w] - fd[w]) / cfg.force
    out["path_rms_error_m"] = _rms(path[w])
    after = (t >= p["t_contact"]) & (t < p["t_meas_end"])
    out["peak_force_ratio"] = float(np.max(fn[after])) / cfg.force
    bad = np.nonzero(after & (np.abs(fn - fd) > 0.05 * cfg.force))[0]
    out["settle_time_s"] = 0.0 if not bad.size else float(t[min(bad[-1] + 1, len(t) - 1)] - p["t_contact"])
    out["force_band_rel"] = [float(np.min(fn[w])) / cfg.force, float(np.max(fn[w])) / cfg.force]
    # lift-offs measured by the plant (zero contact force) after the first touch, whatever the task detected
    off = (fn <= 0.0) & (t >= p["t_contact"]) & (t < p["t_meas_end"])
    out["contact_lost"] = int(np.count_nonzero(off[1:] & ~off[:-1]))
    return out


__all__ = ["KINDS", "SURFACE", "figures", "make_controller", "run_condition"]
