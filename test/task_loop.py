"""A deterministic lock-step loop of the contact task on the demo's MuJoCo Panda, in the controller node's order
per state (task.update from the F/T reading, latency prediction, law; in the task's hold, or on a failed law
tick, the node's safe output :class:`qv_control.safe_output.SafeOutput` instead of the law), with injected faults:

- ``stall``: (t0, t1) — the controller answers no state stamped in [t0, t1) (the plant holds the last command,
  as a realtime plant does while the controller process is descheduled);
- ``plant_hold``: s — with ``stall``, a plant-side command timeout: a command older than this is replaced by
  the plant's own brake (a stiff damped joint hold about the pose at the timeout, with MuJoCo's gravity);
- ``blind``: (t0, t1) — as ``stall``, but once the node's watchdog timeout (0.1 s) has passed it sends the safe
  output computed from the last state it had (that pose, no velocity), as the node does when the states stop
  reaching it while the plant runs on;
- ``ft_freeze``: (t0, t1) — the F/T reading the controller sees stays at its value at t0 (a paused stream);
- ``lower``: (t, dz) — the table drops by dz at t (contact loss);
- ``delay_steps``: each answer acts that many steps after the state it answers (a latency), held until then;
- ``hold_at``: t — the safe hold commanded at t (as ``~/hold`` or a silent F/T topic does);
- ``fail``: (t0, t1) — the law raises on every state in [t0, t1) (the node: counted, the task's hold, the safe
  output from that tick on);
- ``commands``: {t: name} — a task command (``lift_off``, ``reset``, ``start`` ...) at the first state at or
  after t; the answers are returned in ``answers`` as (t, name, acted, why);
- ``predictor``: a :class:`qv_control.latency.StatePredictor` (or its horizon) used as the node uses it, fed
  the effort the plant applied over the last step (``echo=False``: not, as hardware reporting a measured effort).

All figures come from the plant: its contact force (``plant.normal_force``), not the controller's reading."""
from __future__ import annotations

import numpy as np

from qv_control.demo.config import DemoConfig, demo_law, demo_task, initial_state, make_plant, planned_touch_speed
from qv_control.safe_output import SafeOutput
from qv_control.task import ForceProfile
from qv_dynamics.state import State


class PlantBrake:
    """The plant-side hold of a command timeout: τ = g(q) + M₀(ω²(q_b − q) − 2ω q̇), MuJoCo's own g and M,
    latched when the timeout strikes (20 Hz: a brake, stiffer than the controller's safe output)."""

    def __init__(self, plant, hz: float = 20.0):
        self.plant, self.w, self.q_b = plant, 2 * np.pi * hz, None

    def torque(self) -> np.ndarray:
        p = self.plant
        if self.q_b is None:
            self.q_b, self.M = p.q.copy(), p.mass_matrix(p.q)
        return p.bias_forces(p.q, np.zeros_like(p.q)) + self.M @ (self.w ** 2 * (self.q_b - p.q) - 2 * self.w * p.qdot)


def _tick(task, tl, safe, t, plant, predictor, sent, echo, fail, fn_read):
    """One answer of the controller (the node's order): the task, then the law or the safe output."""
    q, qd, t_act = plant.q, plant.qdot, t
    if task.phase != "hold" and fail is not None and fail[0] <= t < fail[1]:
        task.hold(t, "control law failed")
    if task.phase == "hold":
        return safe.torque("hold", q, qd, lift=task.cfg.retract, frame=tl.frame)
    safe.release()
    if predictor is not None:
        # the plant reports the effort it applied over the last step (a simulator's JointState.effort)
        applied = plant.last_tau.copy() if echo and sent is not None else None
        t_act, q, qd = predictor.predict(t, q, qd, sent, applied)
    point = task.point(t_act)
    lam = np.array([-fn_read]) if point["contact"] else None
    return np.asarray(tl.law.compute(State(t=t_act, q=q, qdot=qd, lambda_meas=lam), tl.reference(point)))


def run_task(kind: str = "qv", seconds: float = 1.0, stall=None, ft_freeze=None, lower=None, predictor=None,
             task_kw: dict | None = None, cfg: DemoConfig | None = None, hold_at: float | None = None,
             echo: bool = True, delay_steps: int = 0, plant_hold: float | None = None, fail=None,
             commands: dict | None = None, blind=None) -> dict:
    cfg = cfg or DemoConfig()
    cfg.phases_after_nominal = False
    sysm, q0, p0, R0 = initial_state(cfg)
    plant = make_plant(cfg, sysm)
    plant.reset(q0)
    task = demo_task(cfg, sysm, p0, planned_touch_speed(cfg, sysm, q0))
    for k, v in (task_kw or {}).items():
        setattr(task.cfg, k, v)
    task.force = ForceProfile(task.cfg.force, task.cfg.force_steps, task.cfg.step_ramp)
    tl = demo_law(kind, cfg, sysm, R0, q0)
    safe, brake = SafeOutput(sysm), PlantBrake(plant)
    if predictor is not None and not hasattr(predictor, "predict"):
        from qv_control.latency import StatePredictor
        predictor = StatePredictor(sysm, float(predictor))
    tau, sent = None, None
    t_lower = None if lower is None else lower[0]
    rows = {"t": [], "fn": [], "phase": [], "z": [], "fd": [], "p": []}
    fn_frozen = None
    queue: list = []        # answers not yet acting (``delay_steps``)
    pending = sorted((commands or {}).items())
    answers = []
    n = int(round(seconds / cfg.dt))
    for _ in range(n):
        t = plant.time
        if t_lower is not None and t >= t_lower:
            plant.set_table_height(cfg.table_height - lower[1])
            t_lower = None
        fn_read = -float((plant.tool_rotation() @ plant.sensor_wrench()[:3])[2])
        if ft_freeze is not None and ft_freeze[0] <= t < ft_freeze[1]:
            fn_frozen = fn_read if fn_frozen is None else fn_frozen
            fn_read = fn_frozen
        watchdog = blind is not None and blind[0] <= t < blind[1]
        stalled = watchdog or (stall is not None and stall[0] <= t < stall[1])
        if not stalled or tau is None:
            brake.q_b = None
            task.update(t, fn_read, plant.tool_position[2])
            while pending and t >= pending[0][0] - 1e-9:
                name = pending.pop(0)[1]
                acted = task.hold(t, "commanded") if name == "hold" else \
                    task.reset(t, plant.tool_position) if name == "reset" else getattr(task, name)(t)
                answers.append((t, name, acted, task.why))
            if hold_at is not None and t >= hold_at:
                task.hold(t, "commanded")
            answer = _tick(task, tl, safe, t, plant, predictor, sent, echo, fail, fn_read)
            queue.append(answer)
            sent = answer
            t_sent, q_sent = t, plant.q.copy()
        tau = queue.pop(0) if len(queue) > delay_steps else (tau if tau is not None else queue[0])
        held = tau if plant_hold is None or not stalled or t - t_sent < plant_hold else brake.torque()
        if watchdog and t - t_sent >= 0.1:      # the node's watchdog: a task pressing goes to its hold
            if sysm.constraint(task.cfg.contact).active:
                task.hold(t_sent, "joint states stale in contact")
            held = safe.torque("hold", q_sent, None, lift=task.cfg.retract, frame=tl.frame)
        plant.step(held, cfg.dt)
        rows["t"].append(plant.time)
        rows["fn"].append(plant.normal_force())
        rows["phase"].append(task.phase)
        rows["z"].append(plant.tool_position[2])
        rows["p"].append(plant.tool_position.copy())
        rows["fd"].append(task.commanded_force(plant.time))
    out = {k: np.array(v) for k, v in rows.items()}
    out.update(task=task, law=tl, plant=plant, cfg=cfg, predictor=predictor, safe=safe, answers=answers)
    return out
