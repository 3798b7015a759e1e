"""The demo's ground truth: the plant's state, torques, tool position and contact forces after every control
period, beside the task's commanded point and phase."""
from __future__ import annotations

import numpy as np

from qv_dynamics.plants.mujoco_plant import MujocoPlant

from ..task import ContactTask
from .config import PHASES


class Recorder:
    """MuJoCo ground truth after every control period (time, state, torques, tool position, forces)."""

    KEYS = ("t", "q", "qdot", "tau_cmd", "tau", "tool", "p_d", "fn", "fn_sensor", "f_d", "contact", "phase",
            "table", "demand_ratio")

    def __init__(self, task: ContactTask, limits: np.ndarray, law=None):
        self.task = task
        self.limits = limits
        self.law = law
        self.rows: dict[str, list] = {k: [] for k in self.KEYS}

    def record(self, plant: MujocoPlant, tau_cmd: np.ndarray) -> None:
        t = plant.time
        task = self.task.point(t)
        r = self.rows
        r["t"].append(t)
        r["q"].append(plant.q)
        r["qdot"].append(plant.qdot)
        r["tau_cmd"].append(np.asarray(tau_cmd, float).copy())
        r["tau"].append(plant.last_tau.copy())
        r["tool"].append(plant.tool_position)
        r["p_d"].append(task["p"])
        r["fn"].append(plant.normal_force())
        r["fn_sensor"].append(-float((plant.tool_rotation() @ plant.sensor_wrench()[:3])[2]))
        r["f_d"].append(self.task.commanded_force(t))
        r["contact"].append(bool(task["contact"]))
        r["phase"].append(PHASES.index(self.task.phase))
        r["table"].append(plant.table_height)
        # peak |τ_i|/limit of the law's demand before any limiter (the plant clips at the limits anyway)
        peak = getattr(self.law, "peak_ratio", None)
        r["demand_ratio"].append(float(peak) if peak is not None else
                                 float(np.max(np.abs(tau_cmd) / self.limits)))

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.array(v) for k, v in self.rows.items()}
