"""Demo configuration (``config/demo.yaml``) and the models it builds: the Panda with the switchable table
contact ``contact`` and its MuJoCo plant."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import ModelError
from qv_dynamics.plants.mujoco_plant import MujocoPlant
from qv_dynamics.plants.mujoco_scene import SceneConfig
from qv_dynamics.robots import scale_inertias

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
