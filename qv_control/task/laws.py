"""The laws a contact task drives, and the reference each expects.

Three controllers of the tool frame with one switchable surface contact (a ``point_contact`` with
``axes: [z]``, λ the force the robot applies along z, pressing is λ = −F < 0):

- ``qv``: the quasi-velocity hybrid law ``quasi_tracking`` with θ = (tool x, y, [z], rx, ry, rz
  [, redundancy joint]) — z only in free motion (k = n − r) — rebuilt at every contact switch by
  :class:`~qv_control.task.switching.SwitchingLaw` (basis re-seeded, integrals carried); the force PI
  (kf, ki) in contact;
- ``osc``: the operational-space hybrid law (:mod:`qv_control.laws.osc`), θ = tool position;
- ``impedance``: Cartesian impedance + Jacobian-transpose force (:mod:`qv_control.laws.impedance`).

:meth:`TaskLaw.reference` maps a task point (p, ṗ, p̈, F_d, in contact) to the law's Reference: for qv
θ_d = (p_x, p_y, [p_z], 0, 0, 0 [, q_r0]) (orientation error about ``rotation``), for the others θ_d = p.
``friction``: wrap in :class:`~qv_control.laws.friction.FrictionCompensation` (μ from the F/T).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qv_dynamics.errors import ModelError
from qv_dynamics.state import Reference, State

from .switching import SwitchingLaw

KINDS = ("qv", "osc", "impedance")


@dataclass
class TaskLawSettings:
    """Gains of the three controllers (bandwidths 1/s for qv/osc; N/m, N s/m for impedance)."""

    kp: float = 60.0
    kd: float = 120.0
    kf: float = 0.3
    ki: float = 30.0
    ki_motion: float = 0.0
    extra: dict = field(default_factory=dict)      # further quasi_tracking parameters (e.g. normal_rate)
    imp_kp: float = 3000.0
    imp_kd: float = 150.0
    imp_kp_rot: float = 150.0
    imp_kd_rot: float = 12.0
    imp_force_ki: float = 0.0


class TaskLaw:
    """One controller of the task (module doc): ``law`` (a :class:`SwitchingLaw`) and ``reference``."""

    def __init__(self, kind: str, system, frame: str, contact: str, q0, rotation, redundancy_joint: str = "",
                 settings: TaskLawSettings | None = None, friction: dict | None = None):
        if kind not in KINDS:
            raise ModelError(f"task controller must be one of {KINDS}, got {kind!r}")
        self.kind, self.system, self.frame, self.contact = kind, system, frame, contact
        self.q0 = np.asarray(q0, float).copy()
        self.R = np.asarray(rotation, float).reshape(3, 3)
        self.s = settings or TaskLawSettings()
        self.redundancy_joint = redundancy_joint
        self.q_r = float(self.q0[system.joint_q_index(redundancy_joint)]) if redundancy_joint else None
        system.constraint(contact)
        self.law = self.switching = SwitchingLaw(system, self._build, rebuild=(kind == "qv"))
        if friction:
            from ..laws.friction import FrictionCompensation

            self.law = FrictionCompensation(self.law, system, frame, contact, **friction)

    def warm(self, q) -> None:
        """Build the law of each constraint set (kept by the switching law, :meth:`SwitchingLaw.prepare`) and run
        it once at ``q``: the one-time costs of a set (construction, kernels, caches: ~5 ms for the first contact
        law) are paid before the task, not at its first touch-down, where every late period pushes on the
        surface with the free-motion command. The switch to a set resets its law first."""
        sysm, was = self.system, self.system.constraint(self.contact).active
        q = np.asarray(q, float)
        p = sysm.frame_placement(q, self.frame).translation
        try:
            for contact in (False, True):
                sysm.set_active(self.contact, contact)
                active = tuple(c.name for c in sysm.active_constraints)
                law = self.switching.prepare(active) if self.switching.rebuild else self._build(active)
                point = {"p": p, "v": np.zeros(3), "a": np.zeros(3), "lambda": 0.0, "contact": contact}
                lam = np.zeros(len(sysm.row_labels)) if contact else None
                law.compute(State(t=0.0, q=q, qdot=np.zeros(sysm.nv), lambda_meas=lam), self.reference(point))
        finally:
            sysm.set_active(self.contact, was)

    def coordinates(self, contact: bool) -> list:
        axes = ["x", "y", "rx", "ry", "rz"] if contact else ["x", "y", "z", "rx", "ry", "rz"]
        coords = [{"frame": self.frame, "axes": axes, "rotation_reference": self.R.tolist()}]
        return coords + ([{"joint": self.redundancy_joint}] if self.redundancy_joint else [])

    def _build(self, active: tuple):
        s, sysm = self.s, self.system
        contact = self.contact in active
        if self.kind == "qv":
            from ..laws.registry import make_law

            params = dict(coordinates=self.coordinates(contact), kp=s.kp, kd=s.kd, **s.extra)
            if s.ki_motion:
                params["ki_motion"] = s.ki_motion
            if contact:
                params.update(kf=s.kf, ki=s.ki)
            return make_law("quasi_tracking", sysm, **params)
        if self.kind == "osc":
            from ..laws.osc import OperationalSpaceLaw

            return OperationalSpaceLaw(sysm, frame=self.frame, contact=self.contact, kp=s.kp, kd=s.kd, kf=s.kf,
                                       ki=s.ki, q_null=self.q0, rotation=self.R, ki_motion=s.ki_motion)
        from ..laws.impedance import ImpedanceForceBaseline

        return ImpedanceForceBaseline(sysm, frame=self.frame, contact=self.contact, kp_pos=s.imp_kp,
                                      kd_pos=s.imp_kd, kp_rot=s.imp_kp_rot, kd_rot=s.imp_kd_rot,
                                      force_ki=s.imp_force_ki, q_null=self.q0, rotation=self.R)

    def reference(self, point: dict) -> Reference:
        """The law's Reference of a task point {p, v, a, lambda, contact[, phase]} (module doc). In the
        re-approach after a lost contact the integrals learned in the lost phase are not carried
        (:class:`SwitchingLaw` ``keep_learned``)."""
        self.switching.keep_learned = point.get("phase") != "reacquire"
        lam = np.array([point["lambda"]]) if point["contact"] else None
        if self.kind != "qv":
            return Reference(theta=point["p"], theta_dot=point["v"], theta_ddot=point["a"], lambda_=lam)
        idx = [0, 1] if point["contact"] else [0, 1, 2]
        tail = [0.0] if self.q_r is not None else []
        z3 = np.zeros(3)
        return Reference(theta=np.concatenate([point["p"][idx], z3, [self.q_r] if tail else []]),
                         theta_dot=np.concatenate([point["v"][idx], z3, tail]),
                         theta_ddot=np.concatenate([point["a"][idx], z3, tail]), lambda_=lam)


__all__ = ["KINDS", "TaskLaw", "TaskLawSettings"]
