"""Reference generator and contact supervisor of one demo run: the phase state machine (approach, contact,
reacquire, release, done) driven by the measured normal force, and the task reference it commands."""
from __future__ import annotations

import logging
import math
from typing import Callable

import numpy as np

from qv_dynamics import ConstrainedSystem

from .config import CONTACT, DemoConfig

log = logging.getLogger("qv_demo")


def smooth(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3 - 2 * x)


class ContactSupervisor:
    """Reference generator + contact supervisor of one run (event driven, so it is also the 'phase' FSM).

    ``update(t, fn, z)`` takes MuJoCo's measured normal force (F/T sensor) and switches the constraint;
    ``task(t)`` returns the task-space reference (p_d, ṗ_d, p̈_d, λ_d)."""

    def __init__(self, cfg: DemoConfig, system: ConstrainedSystem, p0: np.ndarray,
                 lower_table: Callable[[float], None], logger=None, on_switch: Callable | None = None):
        self.cfg = cfg
        self.system = system
        self.p0 = np.asarray(p0, float).copy()
        self.center = self.p0[:2] - np.array([cfg.radius, 0.0])
        self.lower_table = lower_table
        self.logger = logger
        self.on_switch = on_switch
        self.phase = "approach"
        self.events: list[dict] = []
        self.t_contact: float | None = None
        self.t_active = 0.0            # time of the last switch into contact
        self.fn_switch = 0.0
        self.z_free0 = self.p0[2]      # z_d at the start of the current descent
        self.t_free0 = cfg.hold
        self.off_since: float | None = None
        self.table_lowered = False
        self.plan: dict[str, float] = {}
        self.aborted: str | None = None

    # -- events ---------------------------------------------------------------------------------------
    def _log(self, t: float, what: str, **kw) -> None:
        ev = {"t": round(t, 6), "event": what, **kw}
        self.events.append(ev)
        msg = f"[t={t:.3f} s] {what}" + (" (" + ", ".join(f"{k}={v}" for k, v in kw.items()) + ")" if kw else "")
        if self.logger is not None:
            self.logger.info(msg)
        else:
            log.info(msg)

    def _switch(self, t: float, active: bool, what: str, **kw) -> None:
        self.system.set_active(CONTACT, active)
        if self.on_switch is not None:
            self.on_switch(active)
        self._log(t, what, rank=f"{0 if active else 1}->{1 if active else 0}", basis="re-seeded", **kw)

    def _make_plan(self, tc: float) -> None:
        c = self.cfg
        t_circle = tc + c.settle
        t_meas = t_circle + c.circle_ramp + c.transient
        t_step = t_meas + c.nominal
        t_back = t_step + c.step_hold
        t_lower = t_back + c.lower_delay
        t_release = t_lower + c.after_lower
        if not c.phases_after_nominal:
            t_step = t_back = t_lower = t_release = t_meas + c.nominal
        self.plan = dict(t_contact=tc, t_circle=t_circle, t_meas=t_meas, t_meas_end=t_meas + c.nominal,
                         t_step=t_step, t_back=t_back, t_lower=t_lower, t_release=t_release,
                         t_end=t_release + c.release_ramp + c.lift)

    def update(self, t: float, fn: float, z: float | None = None, fn_start: float | None = None) -> None:
        """Contact detection from the measured normal force fn (N, ≥ 0 when pressing). ``fn_start``: the
        force the ramp after a touch starts from (default fn); with a low-passed F/T reading pass the
        unfiltered one, since the filter's lag makes fn a fraction of the force the impact already applies."""
        c = self.cfg
        if self.phase in ("approach", "reacquire"):
            if fn > c.contact_on:
                first = self.t_contact is None
                if first:
                    self.t_contact = t
                    self._make_plan(t)
                self.t_active = t
                start = fn if fn_start is None else max(0.0, fn_start)
                self.fn_switch = min(start, c.force)  # ramp from the touch force, not from an impact peak
                self.phase = "contact"
                self.off_since = None
                self._switch(t, True, "contact made" if first else "contact regained", normal_force=round(fn, 3))
            elif self.phase == "approach" and t > c.max_approach:
                self.aborted = f"no contact after {c.max_approach} s"
                self.phase = "done"
        elif self.phase == "contact":
            releasing = bool(self.plan) and t >= self.plan["t_release"]
            low = fn < c.contact_off
            if low:
                self.off_since = t if self.off_since is None else self.off_since
            else:
                self.off_since = None
            if releasing and (low or t >= self.plan["t_release"] + c.release_ramp):
                self.phase = "release"
                self.z_free0, self.t_free0 = (z if z is not None else self.p0[2]), t
                self._switch(t, False, "contact released", normal_force=round(fn, 3))
            elif low and t - self.off_since >= c.contact_off_time:
                self.phase = "reacquire"
                self.z_free0, self.t_free0 = (z if z is not None else self.p0[2]), t
                self._switch(t, False, "contact lost", normal_force=round(fn, 3))
        if self.plan and not self.table_lowered and t >= self.plan["t_lower"] and self.cfg.phases_after_nominal:
            self.table_lowered = True
            self.lower_table(self.cfg.table_height - self.cfg.lower_by)
            self._log(t, "table lowered", by_m=self.cfg.lower_by)
        if self.plan and t >= self.plan["t_end"]:
            self.phase = "done"
        if self.plan and c.stop_after_step is not None and t >= self.plan["t_step"] + c.stop_after_step:
            self.phase = "done"

    # -- references -----------------------------------------------------------------------------------
    def commanded_force(self, t: float) -> float:
        """Commanded normal force F_d ≥ 0 (the law gets λ_d = −F_d)."""
        c = self.cfg
        if not self.plan:
            return 0.0
        p = self.plan
        if p["t_step"] <= t < p["t_back"]:
            x = 1.0 if c.step_ramp <= 0 else smooth((t - p["t_step"]) / c.step_ramp)
            target = c.force + (c.force_step - c.force) * x
        elif t >= p["t_back"] and c.step_ramp > 0:
            target = c.force_step + (c.force - c.force_step) * smooth((t - p["t_back"]) / c.step_ramp)
        else:
            target = c.force
        if t >= p["t_release"]:
            return c.force * (1.0 - smooth((t - p["t_release"]) / c.release_ramp))
        if self.phase == "contact":
            s = smooth((t - self.t_active) / c.ramp)
            return self.fn_switch + (target - self.fn_switch) * s if s < 1 else target
        return target

    def xy(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        c = self.cfg
        if not self.plan or t <= self.plan["t_circle"]:
            return self.p0[:2].copy(), np.zeros(2), np.zeros(2)
        w = 2 * math.pi / c.period
        tau = t - self.plan["t_circle"]
        Tr = c.circle_ramp
        if tau < Tr:
            x = tau / Tr
            phi = w * Tr * (x ** 3 - 0.5 * x ** 4)
            phid = w * (3 * x ** 2 - 2 * x ** 3)
            phidd = w * (6 * x - 6 * x ** 2) / Tr
        else:
            phi, phid, phidd = w * (0.5 * Tr + tau - Tr), w, 0.0
        r = c.radius
        cs, sn = math.cos(phi), math.sin(phi)
        p = self.center + r * np.array([cs, sn])
        v = r * phid * np.array([-sn, cs])
        a = r * phidd * np.array([-sn, cs]) - r * phid ** 2 * np.array([cs, sn])
        return p, v, a

    def z(self, t: float) -> tuple[float, float]:
        """z_d, ż_d of the free-motion phases (descend at approach_speed; lift after release)."""
        c = self.cfg
        s = max(0.0, t - self.t_free0)
        if self.phase == "release":
            return self.z_free0 + min(s, c.lift) * c.approach_speed, (c.approach_speed if s < c.lift else 0.0)
        floor = c.table_height - c.lower_by - 0.03
        z = self.z_free0 - s * c.approach_speed
        return (z, -c.approach_speed) if z > floor else (floor, 0.0)

    def task(self, t: float) -> dict:
        p, v, a = self.xy(t)
        zd, vz = self.z(t)
        in_contact = self.system.constraint(CONTACT).active
        return {"p": np.array([p[0], p[1], zd]), "v": np.array([v[0], v[1], vz]), "a": np.array([a[0], a[1], 0.0]),
                "lambda": -self.commanded_force(t), "contact": in_contact}
