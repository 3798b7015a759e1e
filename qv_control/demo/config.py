"""Demo configuration (``config/demo.yaml``) and what it builds: the Panda with the switchable table contact
``contact``, its MuJoCo plant, and the contact task of :mod:`qv_control.task` the scenario runs
(:func:`demo_task`, :func:`demo_law`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

import numpy as np

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import ModelError
from qv_dynamics.plants.mujoco_plant import MujocoPlant
from qv_dynamics.plants.mujoco_scene import SceneConfig
from qv_dynamics.robots import scale_inertias

from ..task import (
    PHASES,  # noqa: F401 - the phases of the recorded runs (report)
    ContactTask,
    ContactTaskConfig,
    TaskLaw,
    TaskLawSettings,
    contact_inertia,
    touch_speed,
)

CONTACT = "contact"

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
    after_lower: float = 2.8          # s from lowering to release (the re-approach runs at the touch speed)
    release_ramp: float = 0.15
    lift: float = 0.4                 # s of lifting after release
    contact_on: float = 2.0           # N: free -> contact
    contact_off: float = 0.5          # N: contact -> free (after contact_off_time)
    contact_off_time: float = 0.003
    max_approach: float = 3.0         # s without contact -> safe hold
    planned: bool = True              # touch-down speed planned from Λ_c and the surface (False: approach_speed)
    surface_stiffness: float = 2.0e6  # N/m of the table (MuJoCo solref 0.002 s), measured by a static press
    surface_damping_factor: float = 2.0   # c of qv_control.task.touch_speed (critically damped contact)
    peak_ratio: float = 1.5           # touch-down peak the plan allows, × force
    height_uncertainty: float = 0.001     # m the table may be higher than told
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
        c.step_hold, c.lower_delay, c.after_lower, c.lift = 0.6, 0.4, 2.8, 0.2
        c.short = True
        return c


def load_config(path: str | None) -> DemoConfig:
    if not path:
        from qv_dynamics.robots import package_share_dir

        p = package_share_dir() / "config" / "demo.yaml"
        path = str(p) if p.is_file() else None
    if not path:
        return DemoConfig()
    from qv_dynamics.yamlio import load_yaml

    doc = load_yaml(path, "demo config") or {}
    if not isinstance(doc, dict):
        raise ModelError(f"demo config {path} must be a mapping ('demo:' or the DemoConfig keys)")
    return DemoConfig.from_dict(doc.get("demo", doc))


def make_system(cfg: DemoConfig) -> ConstrainedSystem:
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": cfg.tool_frame, "axes": ["z"], "name": CONTACT, "active": False}])


def perturbed_system(cfg: "DemoConfig", factor: float) -> ConstrainedSystem:
    """The demo's controller model with every link mass and rotational inertia scaled by ``factor``
    (centres of mass unchanged): the model error of the robustness run."""
    sysm = make_system(cfg)
    scale_inertias(sysm, factor)
    return sysm


def initial_state(cfg: DemoConfig):
    """(plant model, q0, tool position, tool rotation) at the start of a run."""
    system = make_system(cfg)
    q0 = np.asarray(cfg.q0, float)
    oMf = system.frame_placement(q0, cfg.tool_frame)
    return system, q0, oMf.translation.copy(), oMf.rotation.copy()


def make_plant(cfg: DemoConfig, system) -> MujocoPlant:
    return MujocoPlant(system, SceneConfig(tool_frame=cfg.tool_frame, tip_radius=cfg.tip_radius,
                                           table_height=cfg.table_height, friction=cfg.friction,
                                           timestep=cfg.timestep, solref=(cfg.contact_timeconst, 1.0)))


def timeline(cfg: DemoConfig) -> dict[str, float]:
    """The scenario's marks in s from the first touch: trace start, measuring window, force step and back,
    table drop, release."""
    t_meas = cfg.settle + cfg.circle_ramp + cfg.transient
    t_step = t_meas + cfg.nominal
    t_back = t_step + cfg.step_hold
    t_lower = t_back + cfg.lower_delay
    t_release = t_lower + cfg.after_lower
    if not cfg.phases_after_nominal:
        t_step = t_back = t_lower = t_release = t_meas + cfg.nominal
    return dict(t_circle=cfg.settle, t_meas=t_meas, t_meas_end=t_meas + cfg.nominal, t_step=t_step, t_back=t_back,
                t_lower=t_lower, t_release=t_release)


def planned_touch_speed(cfg: DemoConfig, system, q0, stiffness: float | None = None,
                        damping_factor: float | None = None) -> float | None:
    """The touch-down speed of :func:`qv_control.task.touch_speed` for the demo's force (None: not planned)."""
    if not cfg.planned:
        return None
    return touch_speed(cfg.force, contact_inertia(system, q0, cfg.tool_frame),
                       cfg.surface_stiffness if stiffness is None else stiffness, cfg.peak_ratio,
                       cfg.surface_damping_factor if damping_factor is None else damping_factor)


def demo_task(cfg: DemoConfig, system, p0, v_touch: float | None, logger=None,
              height_uncertainty: float | None = None) -> ContactTask:
    """The scenario as a :class:`~qv_control.task.ContactTask` (started at t = 0)."""
    marks = timeline(cfg)
    steps = [(marks["t_step"], cfg.force_step), (marks["t_back"], cfg.force)] \
        if cfg.phases_after_nominal and marks["t_step"] < marks["t_back"] else []
    tc = ContactTaskConfig(
        contact=CONTACT, surface_height=cfg.table_height + cfg.tip_radius, force=cfg.force, force_steps=steps,
        step_ramp=cfg.step_ramp, ramp=cfg.ramp, approach_speed=cfg.approach_speed, touch_speed=v_touch,
        height_uncertainty=cfg.height_uncertainty if height_uncertainty is None else height_uncertainty,
        approach_window=cfg.max_approach, hold=cfg.hold, contact_on=cfg.contact_on, contact_off=cfg.contact_off,
        contact_off_time=cfg.contact_off_time, trace="circle", settle=cfg.settle, radius=cfg.radius,
        period=cfg.period, circle_ramp=cfg.circle_ramp, release_at=marks.pop("t_release"),
        release_ramp=cfg.release_ramp, lift=cfg.lift, lift_speed=min(cfg.approach_speed, 0.01), marks=marks)
    task = ContactTask(tc, system, p0, logger=logger)
    task.start(0.0)
    task.events.clear()
    return task


def demo_law(kind: str, cfg: DemoConfig, system, R0, q0, ki_motion: float = 0.0, extra: dict | None = None,
             friction: dict | None = None) -> TaskLaw:
    """The demo's controllers through :class:`~qv_control.task.TaskLaw`: ``qv``, ``osc`` or ``impedance``
    (``baseline`` is the impedance law)."""
    settings = TaskLawSettings(kp=cfg.qv_kp, kd=cfg.qv_kd, kf=cfg.force_kp, ki=cfg.force_ki, ki_motion=ki_motion,
                               extra=dict(extra or {}), imp_kp=cfg.bl_kp, imp_kd=cfg.bl_kd, imp_kp_rot=cfg.bl_kp_rot,
                               imp_kd_rot=cfg.bl_kd_rot, imp_force_ki=cfg.bl_force_ki)
    return TaskLaw("impedance" if kind == "baseline" else kind, system, cfg.tool_frame, CONTACT, q0, R0,
                   redundancy_joint=cfg.redundancy_joint, settings=settings, friction=friction)


class Scenario:
    """What the demo adds around the task: the table drop at ``t_lower`` (once) and the end of a run (the
    task done or held, or ``stop_after_step`` s after the force step time)."""

    def __init__(self, cfg: DemoConfig, task: ContactTask, lower_table):
        self.cfg, self.task, self.lower_table = cfg, task, lower_table
        self.table_lowered = False

    def step(self, t: float) -> bool:
        """After ``task.update``: apply the scenario's events at t; True when the run ends."""
        c, task, plan = self.cfg, self.task, self.task.plan
        if plan and not self.table_lowered and c.phases_after_nominal and t >= plan["t_lower"]:
            self.table_lowered = True
            self.lower_table(c.table_height - c.lower_by)
            task._log(t, "table lowered", by_m=c.lower_by)
        if plan and c.stop_after_step is not None and t >= plan["t_step"] + c.stop_after_step:
            return True
        return task.phase in ("hold", "done")
