"""``qv demo --out DIR``: the Panda presses on a MuJoCo table while it traces a circle (issue 6).

Scenario (one run per controller, all through the ROS 2 topic contract in one process):

1. approach: free motion, the tool descends at ``approach_speed`` towards the table;
2. contact: when MuJoCo's F/T sensor reads more than ``contact_on`` N, the constraint
   ``{type: point_contact, frame: panda_hand_tcp, axes: [z], name: contact}`` is switched on
   (``system.set_active``); the law is rebuilt for the new constraint set so the quasi-velocity basis
   is re-seeded (rank 0 → 1), and the phase change is logged once;
3. press and trace: λ_d ramps to −``force`` (λ is the force the robot applies along z, SPEC sign
   convention M q̈ + h = τ − Aᵀλ), then the tool traces a circle of ``radius`` on the table;
4. force step: the commanded force steps to ``force_step`` N and back (decoupling test);
5. contact loss: the table is lowered by ``lower_by`` (5 mm) through the MuJoCo node's
   ``~/table_height`` topic; the contact is lost (logged once), the tool re-approaches in free motion
   and regains the contact (logged once);
6. release: λ_d ramps to zero, the constraint is switched off, the tool lifts.

Controllers: the quasi-velocity hybrid law of :mod:`qv_control.laws` (tracking of θ = tool x, y, (z),
orientation, panda_joint3; force law with a PI on the measured λ), and the baseline of
:mod:`qv_control.laws.impedance` (Cartesian impedance + Jacobian-transpose force). A third run gives the
quasi-velocity law a model with all link masses (and inertias) 10 % too large.

All figures are measured from MuJoCo: the normal force from ``mj_contactForce``, the tool position from
the MuJoCo site. Report: ``summary.json`` + PNG plots in ``--out``.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Callable

import numpy as np

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import ModelError, QVError
from qv_dynamics.jsonutil import jsonable as _jsonable
from qv_dynamics.plants.mujoco_plant import MujocoPlant, SceneConfig

from qv_dynamics.state import Reference, State

log = logging.getLogger("qv_demo")

CONTACT = "contact"
PHASES = ("approach", "contact", "reacquire", "release", "done")


@dataclass
class DemoConfig:
    """All demo parameters (SI units); ``config/demo.yaml`` overrides any of them."""

    q0: list = field(default_factory=lambda: [0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])
    tool_frame: str = "panda_hand_tcp"
    redundancy_joint: str = "panda_joint3"
    table_height: float = 0.235
    tip_radius: float = 0.01
    friction: float = 0.0
    timestep: float = 0.0005
    contact_timeconst: float = 0.002  # MuJoCo solref time constant (s), critically damped
    dt: float = 0.001                 # control period (1 kHz)
    force: float = 10.0               # commanded normal force (N)
    force_step: float = 15.0          # force after the step (N)
    approach_speed: float = 0.01      # m/s
    hold: float = 0.1                 # s at start before descending
    ramp: float = 0.15                # force ramp after contact (s)
    settle: float = 0.35              # s from contact to circle start
    radius: float = 0.04
    period: float = 4.0
    circle_ramp: float = 0.6          # s to reach full circle speed
    transient: float = 0.5            # s excluded after the circle ramp before measuring
    nominal: float = 4.0              # length of the measuring window (s)
    step_hold: float = 1.0            # s at force_step before stepping back
    step_ramp: float = 0.0            # s: 0 = a true step of the commanded force
    step_window: float = 0.5          # s compared before/after the step
    lower_delay: float = 1.0          # s after stepping back before the table is lowered
    lower_by: float = 0.005
    after_lower: float = 1.6          # s from lowering to release
    release_ramp: float = 0.15
    lift: float = 0.4                 # s of lifting after release
    contact_on: float = 2.0           # N: free -> contact
    contact_off: float = 0.5          # N: contact -> free (after contact_off_time)
    contact_off_time: float = 0.003
    max_approach: float = 3.0         # s without contact -> abort
    mass_error: float = 0.10
    # quasi-velocity law
    qv_kp: float = 60.0
    qv_kd: float = 120.0
    force_kp: float = 0.3
    force_ki: float = 30.0
    # baseline
    bl_kp: float = 3000.0
    bl_kd: float = 150.0
    bl_kp_rot: float = 150.0
    bl_kd_rot: float = 12.0
    bl_force_ki: float = 0.0
    # which runs
    short: bool = False
    phases_after_nominal: bool = True
    stop_after_step: float | None = None   # end the run this long after the force step time

    @classmethod
    def from_dict(cls, d: dict | None) -> "DemoConfig":
        d = dict(d or {})
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ModelError(f"demo config: unknown keys {unknown}")
        return cls(**d)

    def shortened(self) -> "DemoConfig":
        """The CI version: shorter windows, same figures."""
        c = DemoConfig(**asdict(self))
        c.nominal, c.period, c.radius = 1.5, 1.5, 0.02
        c.step_hold, c.lower_delay, c.after_lower, c.lift = 0.6, 0.4, 1.0, 0.2
        c.short = True
        return c


# ---------------------------------------------------------------------------------------------- scenario


def smooth(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3 - 2 * x)


class Scenario:
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

    def update(self, t: float, fn: float, z: float | None = None) -> None:
        """Contact detection from the measured normal force fn (N, ≥ 0 when pressing)."""
        c = self.cfg
        if self.phase in ("approach", "reacquire"):
            if fn > c.contact_on:
                first = self.t_contact is None
                if first:
                    self.t_contact = t
                    self._make_plan(t)
                self.t_active = t
                self.fn_switch = min(fn, c.force)  # ramp from the touch force, not from an impact peak
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


# ---------------------------------------------------------------------------------------------- laws


def qv_coordinates(cfg: DemoConfig, contact: bool, R_ref: np.ndarray) -> list:
    axes = ["x", "y", "rx", "ry", "rz"] if contact else ["x", "y", "z", "rx", "ry", "rz"]
    return [{"frame": cfg.tool_frame, "axes": axes, "rotation_reference": R_ref.tolist()},
            {"joint": cfg.redundancy_joint}]


class SwitchingQVLaw:
    """The quasi-velocity hybrid law for the current constraint set: one law instance per contact
    phase, rebuilt at every switch so the basis and the force integrator are re-seeded (SPEC §2:
    "when the rank changes ... re-seed the basis")."""

    def __init__(self, system, cfg: DemoConfig, R_ref: np.ndarray, q_ref3: float):
        self.system = system
        self.cfg = cfg
        self.R_ref = R_ref
        self.q_ref3 = q_ref3
        self.law = None
        self.law_contact: bool | None = None
        self.rebuilds = 0
        self.peak_ratio = 0.0

    def _build(self, contact: bool):
        c = self.cfg
        params = dict(coordinates=qv_coordinates(c, contact, self.R_ref), kp=c.qv_kp, kd=c.qv_kd)
        if contact:
            params.update(kf=c.force_kp, ki=c.force_ki)
        try:
            from ..laws.registry import make_law
        except ImportError:  # registry incomplete: the class itself
            from ..laws.quasi_tracking import QuasiTrackingLaw

            self.law = QuasiTrackingLaw(self.system, **params)
        else:
            self.law = make_law("quasi_tracking", self.system, **params)
        self.law_contact = contact
        self.rebuilds += 1

    def reset(self) -> None:
        self.law = None

    @property
    def theta_names(self) -> list[str]:
        contact = self.system.constraint(CONTACT).active
        return [f"{self.cfg.tool_frame}.{a}" for a in qv_coordinates(self.cfg, contact, self.R_ref)[0]["axes"]] + \
            [self.cfg.redundancy_joint]

    def compute(self, state: State, reference: Reference) -> np.ndarray:
        contact = self.system.constraint(CONTACT).active
        if self.law is None or contact != self.law_contact:
            self._build(contact)
        tau = self.law.compute(state, reference)
        # the law limits τ to the URDF efforts; keep the unsaturated demand for the torque figures
        self.peak_ratio = float(self.law.saturation.peak_ratio)
        return tau


def reference_for(kind: str, task: dict, q3: float) -> Reference:
    """Reference in the law's own coordinates. qv: θ = (x, y, [z], φ=0, q₃); baseline: θ = p."""
    lam = np.array([task["lambda"]]) if task["contact"] else None
    if kind == "baseline":
        return Reference(theta=task["p"], theta_dot=task["v"], theta_ddot=task["a"], lambda_=lam)
    idx = [0, 1] if task["contact"] else [0, 1, 2]
    z3 = np.zeros(3)
    th = np.concatenate([task["p"][idx], z3, [q3]])
    thd = np.concatenate([task["v"][idx], z3, [0.0]])
    thdd = np.concatenate([task["a"][idx], z3, [0.0]])
    return Reference(theta=th, theta_dot=thd, theta_ddot=thdd, lambda_=lam)


def perturbed_system(cfg: "DemoConfig", factor: float) -> ConstrainedSystem:
    """The demo's controller model with every link mass and rotational inertia scaled by ``factor``
    (centres of mass unchanged): the model error of the robustness run."""
    from ..laws.registry import scale_inertias

    sysm = make_system(cfg)
    scale_inertias(sysm, factor)
    return sysm


def make_system(cfg: DemoConfig) -> ConstrainedSystem:
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": cfg.tool_frame, "axes": ["z"], "name": CONTACT, "active": False}])


# ---------------------------------------------------------------------------------------------- recording


class Recorder:
    """MuJoCo ground truth after every control period (time, state, torques, tool position, forces)."""

    KEYS = ("t", "q", "qdot", "tau_cmd", "tau", "tool", "p_d", "fn", "fn_sensor", "f_d", "contact", "phase",
            "table", "demand_ratio")

    def __init__(self, scenario: Scenario, limits: np.ndarray, law=None):
        self.sc = scenario
        self.limits = limits
        self.law = law
        self.rows: dict[str, list] = {k: [] for k in self.KEYS}

    def record(self, plant: MujocoPlant, tau_cmd: np.ndarray) -> None:
        t = plant.time
        task = self.sc.task(t)
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
        r["f_d"].append(self.sc.commanded_force(t))
        r["contact"].append(bool(task["contact"]))
        r["phase"].append(PHASES.index(self.sc.phase))
        r["table"].append(plant.table_height)
        # peak |τ_i|/limit of the law's demand before any limiter (the plant clips at the limits anyway)
        peak = getattr(self.law, "peak_ratio", None)
        r["demand_ratio"].append(float(peak) if peak is not None else
                                 float(np.max(np.abs(tau_cmd) / self.limits)))

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.array(v) for k, v in self.rows.items()}


# ---------------------------------------------------------------------------------------------- one run


def measured_normal_force(plant: MujocoPlant) -> float:
    """Normal force from the F/T sensor reading (what a real robot would have)."""
    return -float((plant.tool_rotation() @ plant.sensor_wrench()[:3])[2])


def _initial(cfg: DemoConfig):
    system = make_system(cfg)
    q0 = np.asarray(cfg.q0, float)
    oMf = system.frame_placement(q0, cfg.tool_frame)
    return system, q0, oMf.translation.copy(), oMf.rotation.copy()


def _make_plant(cfg: DemoConfig, system) -> MujocoPlant:
    return MujocoPlant(system, SceneConfig(tool_frame=cfg.tool_frame, tip_radius=cfg.tip_radius,
                                           table_height=cfg.table_height, friction=cfg.friction,
                                           timestep=cfg.timestep, solref=(cfg.contact_timeconst, 1.0)))


def _make_law(kind: str, cfg: DemoConfig, ctrl_system, R_ref, q0):
    if kind == "baseline":
        from ..laws.impedance import ImpedanceForceBaseline

        return ImpedanceForceBaseline(ctrl_system, frame=cfg.tool_frame, contact=CONTACT, kp_pos=cfg.bl_kp,
                                      kd_pos=cfg.bl_kd, kp_rot=cfg.bl_kp_rot, kd_rot=cfg.bl_kd_rot,
                                      force_ki=cfg.bl_force_ki, q_null=q0, rotation=R_ref)
    return SwitchingQVLaw(ctrl_system, cfg, R_ref, float(q0[ctrl_system.joint_q_index(cfg.redundancy_joint)]))


def run_direct(cfg: DemoConfig, kind: str = "qv", mass_factor: float = 1.0) -> dict:
    """The scenario without ROS (plant and law called directly): a cross-check of the ROS run."""
    plant_sys, q0, p0, R0 = _initial(cfg)
    ctrl_sys = plant_sys if mass_factor == 1.0 else perturbed_system(cfg, mass_factor)
    plant = _make_plant(cfg, plant_sys)
    plant.reset(q0)
    sc = Scenario(cfg, ctrl_sys, p0, plant.set_table_height)
    law = _make_law(kind, cfg, ctrl_sys, R0, q0)
    rec = Recorder(sc, plant.effort_limits, law)
    q3 = float(q0[ctrl_sys.joint_q_index(cfg.redundancy_joint)])
    t0 = time.perf_counter()
    while sc.phase != "done":
        t = plant.time
        fn = measured_normal_force(plant)
        sc.update(t, fn, plant.tool_position[2])
        if sc.phase == "done":
            break
        task = sc.task(t)
        lam_meas = np.array([-fn]) if task["contact"] else None
        tau = law.compute(State(t=t, q=plant.q, qdot=plant.qdot, lambda_meas=lam_meas), reference_for(kind, task, q3))
        plant.step(tau, cfg.dt)
        rec.record(plant, tau)
    return {"arrays": rec.arrays(), "events": sc.events, "plan": sc.plan, "wall_time_s": time.perf_counter() - t0,
            "aborted": sc.aborted, "kind": kind, "mass_factor": mass_factor, "limits": plant.effort_limits}


def run_ros(cfg: DemoConfig, kind: str = "qv", mass_factor: float = 1.0, domain_id: int | None = None) -> dict:
    """The scenario through the ROS 2 topic contract in one process: MuJoCo node (lock-step) ↔ controller
    node (law injected) ↔ a supervisor node (contact detection from the WrenchStamped, table command)."""
    import rclpy
    from rclpy.context import Context
    from geometry_msgs.msg import WrenchStamped
    from rclpy.node import Node
    from rclpy.qos import qos_profile_sensor_data
    from std_msgs.msg import Float64

    from qv_dynamics.ros.mujoco_node import MujocoNode
    from qv_dynamics.ros.messages import stamp_to_sec, wrench_to_array

    from qv_dynamics.ros.runner import make_executor

    from ..ros.bringup import to_parameters
    from ..ros.controller_node import ControllerNode

    plant_sys, q0, p0, R0 = _initial(cfg)
    ctrl_sys = make_system(cfg) if mass_factor == 1.0 else perturbed_system(cfg, mass_factor)
    plant = _make_plant(cfg, plant_sys)
    context = Context()
    if domain_id is None:
        domain_id = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
    rclpy.init(context=context, domain_id=domain_id, args=[])
    nodes = []
    try:
        sup = Node("qv_demo_supervisor", context=context)
        nodes.append(sup)
        table_pub = sup.create_publisher(Float64, "/qv_mujoco/table_height", 10)
        sc = Scenario(cfg, ctrl_sys, p0, lambda z: table_pub.publish(Float64(data=float(z))), logger=sup.get_logger())
        rec = Recorder(sc, plant.effort_limits)
        mj = MujocoNode("qv_mujoco", context=context, system=plant_sys, plant=plant, q0=q0, parameter_overrides=
                        to_parameters({"mode": "lockstep", "dt": cfg.dt, "lockstep_resend": 0.5,
                                       "publish_clock": True}))
        nodes.append(mj)
        mj.on_step.append(lambda node: rec.record(node.plant, node.tau))
        law = _make_law(kind, cfg, ctrl_sys, R0, q0)
        rec.law = law
        q3 = float(q0[ctrl_sys.joint_q_index(cfg.redundancy_joint)])
        ctrl = ControllerNode("qv_controller", context=context, system=ctrl_sys, law=law,
                              reference=lambda t: reference_for(kind, sc.task(t), q3),
                              parameter_overrides=to_parameters({
                                  "joints": list(plant.joint_names), "watchdog_timeout": 5.0,
                                  "safe_mode": "gravity",
                                  "wrench_topics": ["/qv_mujoco/tool_ft/wrench"], "wrench_constraints": [CONTACT]}))
        nodes.append(ctrl)
        R_tool = {"R": plant.tool_rotation()}

        def on_wrench(msg: WrenchStamped) -> None:
            # contact detection from the sensor message: normal force = −(R f)_z (f: robot on environment)
            w = wrench_to_array(msg)
            fn = -float((R_tool["R"] @ w[:3])[2])
            sc.update(stamp_to_sec(msg.header.stamp), fn, mj.plant.tool_position[2])

        def track_rotation(node) -> None:
            R_tool["R"] = node.plant.tool_rotation()

        mj.on_step.append(track_rotation)
        sup.create_subscription(WrenchStamped, "/qv_mujoco/tool_ft/wrench", on_wrench, qos_profile_sensor_data)
        executor = make_executor(context)
        for n in nodes:
            executor.add_node(n)
        t_end = time.monotonic() + 10.0
        while time.monotonic() < t_end:  # discovery (in-process, fast)
            if mj.pub_js.get_subscription_count() >= 1 and ctrl.pub_cmd.get_subscription_count() >= 1 \
                    and mj.pub_wrench.get_subscription_count() >= 2 and table_pub.get_subscription_count() >= 1:
                break
            executor.spin_once(timeout_sec=0.01)
        else:
            raise TimeoutError("demo nodes did not discover each other (ROS_DOMAIN_ID / discovery range?)")
        t0 = time.perf_counter()
        mj.publish_state()
        wall_limit = time.monotonic() + 600.0
        while sc.phase != "done" and time.monotonic() < wall_limit:
            executor.spin_once(timeout_sec=0.1)
        mj.mode = "paused"
        wall = time.perf_counter() - t0
        stats = {"commands": ctrl.stats["commands"], "safe_commands": ctrl.stats["safe_commands"],
                 "rejected": {k: dict(v.counts) for k, v in ctrl.rejects.items() if v.total},
                 "law_rebuilds": getattr(law, "rebuilds", None)}
        executor.shutdown()
    finally:
        for n in nodes:
            try:
                n.destroy_node()
            except Exception:  # noqa: BLE001
                pass
        rclpy.try_shutdown(context=context)
    return {"arrays": rec.arrays(), "events": sc.events, "plan": sc.plan, "wall_time_s": wall, "aborted": sc.aborted,
            "kind": kind, "mass_factor": mass_factor, "limits": plant.effort_limits, "ros": stats}


# ---------------------------------------------------------------------------------------------- figures


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
    w = (t >= p["t_meas"]) & (t < p["t_meas_end"])
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
        before = (t >= p["t_step"] - h) & (t < p["t_step"])
        after = (t >= p["t_step"]) & (t < p["t_step"] + h)
        out["step_path_rms_before_m"] = _rms(path_err[before])
        out["step_path_rms_after_m"] = _rms(path_err[after])
        settle = after & (t >= p["t_step"] + 0.1)
        out["step_force_rms_error_rel"] = _rms(ferr[settle]) / cfg.force_step if settle.any() else float("nan")
        loss = (t >= p["t_lower"]) & (t < p["t_release"])
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
    w = (t >= p["t_step"]) & (t < p["t_step"] + cfg.step_window)
    pre = t < p["t_step"]
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
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path.name


# ---------------------------------------------------------------------------------------------- driver


def run_demo(cfg: DemoConfig, out: Path | None = None, ros: bool = True, plots: bool = True,
             mass_error_run: bool = True) -> dict:
    """All runs + summary (+ plots and summary.json when ``out`` is given)."""
    t0 = time.perf_counter()
    runner = run_ros if ros else run_direct
    runs = {"qv": runner(cfg, "qv"), "baseline": runner(cfg, "baseline")}
    short = DemoConfig(**asdict(cfg))
    short.phases_after_nominal = False
    if mass_error_run:
        runs["qv_mass_error"] = runner(short, "qv", mass_factor=1.0 + cfg.mass_error)
        nopi = DemoConfig(**asdict(short))
        nopi.force_kp = nopi.force_ki = 0.0
        # supplementary runs call plant and law directly (the lock-step ROS loop is the same closed loop,
        # checked in test/test_demo_short.py); they only shorten the demo
        runs["qv_mass_error_no_pi"] = run_direct(nopi, "qv", mass_factor=1.0 + cfg.mass_error)
    m = {k: metrics(r, cfg if k in ("qv", "baseline") else short) for k, r in runs.items()}
    # decoupling: the same runs without the force step, up to the end of the step window
    nostep = DemoConfig(**asdict(cfg))
    nostep.force_step = cfg.force
    nostep.stop_after_step = cfg.step_window + 0.01
    for k in ("qv", "baseline"):
        counter = run_direct(nostep, k)
        m[k].update(step_effect(runs[k], counter, cfg))
    s = {
        "force_rms_error_rel": m["qv"].get("force_rms_error_rel"),
        "path_rms_error_m": m["qv"].get("path_rms_error_m"),
        "baseline_force_rms_error_rel": m["baseline"].get("force_rms_error_rel"),
        "baseline_path_rms_error_m": m["baseline"].get("path_rms_error_m"),
        "max_abs_torque_ratio": m["qv"].get("max_abs_torque_ratio"),
        "baseline_max_abs_torque_ratio": m["baseline"].get("max_abs_torque_ratio"),
        "mass_error_force_rms_error_rel": m.get("qv_mass_error", {}).get("force_rms_error_rel"),
        "mass_error_path_rms_error_m": m.get("qv_mass_error", {}).get("path_rms_error_m"),
        "mass_error": cfg.mass_error,
        "mass_error_no_pi_force_rms_error_rel": m.get("qv_mass_error_no_pi", {}).get("force_rms_error_rel"),
        "force_step_path_error_change_m": m["qv"].get("step_path_error_change_m"),
        "baseline_force_step_path_error_change_m": m["baseline"].get("step_path_error_change_m"),
        "force_step_path_deviation_rms_m": m["qv"].get("step_path_deviation_rms_m"),
        "baseline_force_step_path_deviation_rms_m": m["baseline"].get("step_path_deviation_rms_m"),
        "force_step_path_deviation_max_m": m["qv"].get("step_path_deviation_max_m"),
        "baseline_force_step_path_deviation_max_m": m["baseline"].get("step_path_deviation_max_m"),
        "force_step_qv_path_deviation_below_baseline": (
            None if m["qv"].get("step_path_deviation_rms_m") is None
            or m["baseline"].get("step_path_deviation_rms_m") is None
            else bool(m["qv"]["step_path_deviation_rms_m"] < m["baseline"]["step_path_deviation_rms_m"])),
        "contact_loss_max_torque_ratio": m["qv"].get("contact_loss_max_torque_ratio"),
        "baseline_contact_loss_max_torque_ratio": m["baseline"].get("contact_loss_max_torque_ratio"),
        "contact_lost_logged": m["qv"].get("contact_lost_logged"),
        "contact_regained_logged": m["qv"].get("contact_regained_logged"),
        "commanded_force_n": cfg.force, "force_step_n": cfg.force_step, "table_lowered_m": cfg.lower_by,
        "through_ros": ros, "runs": m, "config": asdict(cfg),
        "wall_time_s": time.perf_counter() - t0,
    }
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        for k, r in runs.items():
            np.savez_compressed(out / f"{k}_trajectory.npz", **r["arrays"])
        if plots:
            s["plots"] = plot_report(out, runs, cfg)
        (out / "summary.json").write_text(json.dumps(_jsonable(s), indent=2))
    return s


def load_config(path: str | None) -> DemoConfig:
    if not path:
        from qv_dynamics.robots import package_share_dir

        p = package_share_dir() / "config" / "demo.yaml"
        path = str(p) if p.is_file() else None
    if not path:
        return DemoConfig()
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ModelError(f"cannot read demo config {path}: {exc}") from None
    return DemoConfig.from_dict(doc.get("demo", doc))


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="qv demo", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/demo", help="report folder (summary.json + PNG plots)")
    ap.add_argument("--config", default=None, help="demo YAML (default: config/demo.yaml)")
    ap.add_argument("--short", action="store_true", help="the short CI version (a few simulated seconds)")
    ap.add_argument("--no-ros", action="store_true", help="call plant and laws directly (no ROS nodes)")
    ap.add_argument("--no-mass-error", action="store_true", help="skip the 10%% mass-error run")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("MPLBACKEND", "Agg")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        cfg = load_config(args.config)
        if args.short:
            cfg = cfg.shortened()
        s = run_demo(cfg, Path(args.out), ros=not args.no_ros, mass_error_run=not args.no_mass_error)
    except (QVError, TimeoutError) as exc:
        print(f"qv demo: {exc}", file=sys.stderr)
        return 2
    print_table(s)
    print(f"\nwall time {s['wall_time_s']:.1f} s; report in {args.out}/ (summary.json, "
          f"{', '.join(s.get('plots', []))})")
    ok = all(r.get("aborted") is None for r in s["runs"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
