"""A deterministic lock-step loop of the contact task on the demo's MuJoCo Panda, in the controller node's order
per state (task.update from the F/T reading, latency prediction, law), with injected faults:

- ``stall``: (t0, t1) — the controller answers no state stamped in [t0, t1) (the plant holds the last command,
  as a realtime plant does while the controller process is descheduled);
- ``ft_freeze``: (t0, t1) — the F/T reading the controller sees stays at its value at t0 (a paused stream);
- ``lower``: (t, dz) — the table drops by dz at t (contact loss);
- ``delay_steps``: each answer acts that many steps after the state it answers (a latency), held until then;
- ``hold_at``: t — the safe hold commanded at t (as ``~/hold`` or a silent F/T topic does);
- ``predictor``: a :class:`qv_control.latency.StatePredictor` (or its horizon) used as the node uses it, fed
  the effort the plant applied over the last step (``echo=False``: not, as hardware reporting a measured effort).

All figures come from the plant: its contact force (``plant.normal_force``), not the controller's reading."""
from __future__ import annotations

import numpy as np

from qv_control.demo.config import DemoConfig, demo_law, demo_task, initial_state, make_plant, planned_touch_speed
from qv_dynamics.state import State


def run_task(kind: str = "qv", seconds: float = 1.0, stall=None, ft_freeze=None, lower=None, predictor=None,
             task_kw: dict | None = None, cfg: DemoConfig | None = None, hold_at: float | None = None,
             echo: bool = True, delay_steps: int = 0) -> dict:
    cfg = cfg or DemoConfig()
    cfg.phases_after_nominal = False
    sysm, q0, p0, R0 = initial_state(cfg)
    plant = make_plant(cfg, sysm)
    plant.reset(q0)
    task = demo_task(cfg, sysm, p0, planned_touch_speed(cfg, sysm, q0))
    for k, v in (task_kw or {}).items():
        setattr(task.cfg, k, v)
    tl = demo_law(kind, cfg, sysm, R0, q0)
    if predictor is not None and not hasattr(predictor, "predict"):
        from qv_control.latency import StatePredictor
        predictor = StatePredictor(sysm, float(predictor))
    tau, sent = None, None
    t_lower = None if lower is None else lower[0]
    rows = {"t": [], "fn": [], "phase": [], "z": [], "fd": []}
    fn_frozen = None
    queue: list = []        # answers not yet acting (``delay_steps``)
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
        stalled = stall is not None and stall[0] <= t < stall[1]
        if not stalled or tau is None:
            task.update(t, fn_read, plant.tool_position[2])
            if hold_at is not None and t >= hold_at:
                task.hold(t, "commanded")
            q, qd, t_act = plant.q, plant.qdot, t
            if predictor is not None:
                # the plant reports the effort it applied over the last step (a simulator's JointState.effort)
                applied = plant.last_tau.copy() if echo and sent is not None else None
                t_act, q, qd = predictor.predict(t, q, qd, sent, applied)
            point = task.point(t_act)
            lam = np.array([-fn_read]) if point["contact"] else None
            answer = np.asarray(tl.law.compute(State(t=t_act, q=q, qdot=qd, lambda_meas=lam), tl.reference(point)))
            queue.append(answer)
            sent = answer
        tau = queue.pop(0) if len(queue) > delay_steps else (tau if tau is not None else queue[0])
        plant.step(tau, cfg.dt)
        rows["t"].append(plant.time)
        rows["fn"].append(plant.normal_force())
        rows["phase"].append(task.phase)
        rows["z"].append(plant.tool_position[2])
        rows["fd"].append(task.commanded_force(plant.time))
    out = {k: np.array(v) for k, v in rows.items()}
    out.update(task=task, law=tl, plant=plant, cfg=cfg, predictor=predictor)
    return out
