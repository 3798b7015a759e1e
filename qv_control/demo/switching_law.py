"""The demo's controllers: the quasi-velocity law rebuilt at every contact switch (:class:`SwitchingQVLaw`),
the impedance baseline, and the reference each expects."""
from __future__ import annotations

import numpy as np

from qv_dynamics.state import Reference, State

from ..laws.impedance import ImpedanceForceBaseline
from ..laws.registry import make_law
from .config import CONTACT, DemoConfig


def qv_coordinates(cfg: DemoConfig, contact: bool, R_ref: np.ndarray) -> list:
    axes = ["x", "y", "rx", "ry", "rz"] if contact else ["x", "y", "z", "rx", "ry", "rz"]
    return [{"frame": cfg.tool_frame, "axes": axes, "rotation_reference": R_ref.tolist()},
            {"joint": cfg.redundancy_joint}]


class SwitchingQVLaw:
    """The quasi-velocity hybrid law for the current constraint set: one law instance per contact
    phase, rebuilt at every switch so the basis and the force integrator are re-seeded (SPEC §2:
    "when the rank changes ... re-seed the basis")."""

    def __init__(self, system, cfg: DemoConfig, R_ref: np.ndarray, q_ref3: float, extra: dict | None = None):
        self.system = system
        self.extra = dict(extra or {})   # further quasi_tracking parameters (e.g. ki_motion, normal_rate)
        self.cfg = cfg
        self.R_ref = R_ref
        self.q_ref3 = q_ref3
        self.law = None
        self.law_contact: bool | None = None
        self.rebuilds = 0
        self.peak_ratio = 0.0

    def _build(self, contact: bool):
        c = self.cfg
        params = dict(coordinates=qv_coordinates(c, contact, self.R_ref), kp=c.qv_kp, kd=c.qv_kd, **self.extra)
        if contact:
            params.update(kf=c.force_kp, ki=c.force_ki)
        carried = getattr(self.law, "integral_torque", None)   # bumpless transfer of the integral actions
        self.law = make_law("quasi_tracking", self.system, **params)
        if carried is not None and hasattr(self.law, "carry"):
            self.law.carry(carried)
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


def make_demo_law(kind: str, cfg: DemoConfig, ctrl_system, R_ref, q0):
    """The law of a run: ``baseline`` (impedance + force) or the switching quasi-velocity law."""
    if kind == "baseline":
        return ImpedanceForceBaseline(ctrl_system, frame=cfg.tool_frame, contact=CONTACT, kp_pos=cfg.bl_kp,
                                      kd_pos=cfg.bl_kd, kp_rot=cfg.bl_kp_rot, kd_rot=cfg.bl_kd_rot,
                                      force_ki=cfg.bl_force_ki, q_null=q0, rotation=R_ref)
    return SwitchingQVLaw(ctrl_system, cfg, R_ref, float(q0[ctrl_system.joint_q_index(cfg.redundancy_joint)]))
