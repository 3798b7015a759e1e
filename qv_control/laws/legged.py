"""Legged robot with a passive floating base: projected inverse dynamics with passive joints (paper
`aghili-projection-operator` §7.4) + a friction-cone force channel, following its contact plan (issue 13).

Per call at time t, with the plan's phases (:class:`qv_control.gait.GaitPlan`):

1. **Contact set.** A foot in swing has its ``point_contact`` switched off, a foot in stance on (re-anchored
   where it touched down); each change is logged once in :attr:`LeggedLaw.events`. The coordinates θ are
   the 6 base coordinates (world position, rotation vector of R·R₀ᵀ) plus x y z of every swing foot, so
   k = n − r holds in every stance (4 feet: 6; 3 feet: 9; 2 feet: 12).
2. **Motion** (eq. 45–46, 56–62): f_m = (I + H)P(h + Mu_p), zero on the six base velocities; with an
   exact model q̈ = u_p and the multiplier is λ_m with Aᵀλ_m = f_m − h − Mu_p.
3. **Force channel** (:mod:`qv_control.laws.internal_force`, :mod:`qv_control.laws.contact_qp`): λ = λ₀ +
   E z with E a basis of the internal forces (A_pᵀE = 0); the QP picks z so that every foot force is
   unilateral, inside its (inscribed-pyramid) friction cone, with least tangential force, and a loaded or
   unloading foot's normal force is capped at w·``f_nominal`` (the plan's load ramp). The torque AᵀE(z −
   Eᵀλ_m) changes the foot forces and nothing else (no base torque, no motion).
4. Torque limits (URDF) by :func:`qv_control.saturation.saturate`: motion channel first, force channel last.

Diagnostics in :attr:`last`: ``foot_forces`` (k × 3, on the robot, world axes, model prediction),
``cone_margins`` (μf_n − ‖f_t‖, N), ``qp_feasible``, ``active_feet``; ``qp`` counts solves/infeasible.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from qv_dynamics.errors import ModelError
from qv_dynamics.state import Reference, State

from ..gait import GaitPlan
from .base import ControlLaw, vector_gain
from .contact_qp import ContactForceQP
from .internal_force import InternalForceChannel
from .passive import PassiveJointLaw

BASE_AXES = ("x", "y", "z", "rx", "ry", "rz")


class LeggedLaw(ControlLaw):
    """Body-pose control of a legged robot through its feet (module doc).

    ``feet``: foot frames, each with a ``point_contact`` constraint of the same name in ``system``;
    ``plan``: the :class:`GaitPlan` (stance only by default); ``kp`` (6 base gains, 1/s²), ``kp_swing``
    (swing-foot gain), ``kd`` (1/s, all coordinates); ``mu``, ``f_min`` (N), ``f_nominal`` (N, the cap at load factor 1;
    default: the robot's weight); ``base_frame``; ``actuated``: the actuated joints (default: every 1-DoF
    joint, the root free-flyer passive)."""

    name = "legged"

    def __init__(self, system, feet: Sequence[str], plan: GaitPlan | None = None, base_frame: str = "base",
                 kp=400.0, kd=40.0, kp_swing: float = 900.0, mu: float = 0.8,
                 f_min: float = 10.0, f_nominal: float | None = None, actuated: Sequence[str] | None = None,
                 effort_limits="urdf", cond_max: float = 1e6):
        if not system.floating_base:
            raise ModelError("LeggedLaw needs a floating-base model (from_urdf(..., floating_base=True))")
        self.base_spec = {"frame": base_frame, "axes": list(BASE_AXES), "rotation_reference": np.eye(3)}
        super().__init__(system, [self.base_spec], kp=kp, kd=kd, effort_limits=effort_limits, cond_max=cond_max)
        self.feet = list(feet)
        for f in self.feet:
            c = system.constraint(f)                          # UnknownNameError listing the constraints
            if c.type != "point_contact":
                raise ModelError(f"LeggedLaw: constraint '{f}' must be a point_contact, is {c.type}")
        self.plan = plan or GaitPlan(self.feet)
        self.actuated = list(actuated) if actuated is not None else list(system.joint_names)
        self.kp_swing = float(vector_gain("kp_swing", kp_swing, 1)[0])
        weight = float(np.linalg.norm(system.model.gravity.linear)) * sum(
            Y.mass for Y in system.model.inertias)
        self.f_nominal = weight if f_nominal is None else float(f_nominal)
        self.qp = ContactForceQP(mu=mu, f_min=f_min)
        self._f_max = np.zeros(0)
        self.channel = InternalForceChannel(chooser=self._choose)
        self._laws: dict[tuple, PassiveJointLaw] = {}
        self._p_lift: dict[str, np.ndarray] = {}
        self._base0: np.ndarray | None = None
        self.events: list[dict] = []
        if self.limits is not None:   # the base has no actuator: no limit to check there (τ_base = 0)
            self.limits = np.where(self._law_for(()).mask, self.limits, np.inf)

    # ------------------------------------------------------------------ pieces
    def _law_for(self, swing: tuple) -> PassiveJointLaw:
        law = self._laws.get(swing)
        if law is None:
            coords = [self.base_spec] + [{"frame": f, "axes": ["x", "y", "z"]} for f in swing]
            kp = np.concatenate([self.kp, np.full(3 * len(swing), self.kp_swing)])
            law = PassiveJointLaw(self.system, coords, actuated=self.actuated, kp=kp, kd=self.kd,
                                  effort_limits=None, cond_max=self.cond_max)
            self._laws[swing] = law
        return law

    def _switch_contacts(self, t: float, q: np.ndarray) -> tuple[tuple, np.ndarray]:
        swing, w_of = [], {}
        for f in self.feet:
            kind, w = self.plan.phase(f, t)
            c = self.system.constraint(f)
            if kind == "swing":
                swing.append(f)
                if c.active:
                    self._p_lift[f] = self.system.frame_placement(q, f).translation.copy()
                    self.system.set_active(f, False)
                    self.events.append({"t": t, "foot": f, "event": "lift-off"})
            else:
                if not c.active:
                    self.system.set_active(f, True)             # re-anchored where the foot is now
                    self.events.append({"t": t, "foot": f, "event": "touchdown"})
                w_of[f] = np.inf if w >= 1.0 else w * self.f_nominal
        active = [c.name for c in self.system.active_constraints]
        if any(a not in w_of for a in active):
            raise ModelError(f"LeggedLaw: active constraints {active} must all be feet of {self.feet}")
        return tuple(swing), np.array([w_of[a] for a in active])   # in the rows' order

    def _reference(self, t: float, q: np.ndarray, swing: tuple) -> Reference:
        if self._base0 is None:
            self._base0 = self.system.frame_placement(q, self.base_spec["frame"]).translation.copy()
        th, thd, thdd = self.plan.base(t)
        th = th.copy()
        th[:3] += self._base0
        parts = [(th, thd, thdd)] + [self.plan.swing(f, t, self._p_lift[f]) for f in swing]
        return Reference(theta=np.concatenate([p[0] for p in parts]),
                         theta_dot=np.concatenate([p[1] for p in parts]),
                         theta_ddot=np.concatenate([p[2] for p in parts]))

    def _choose(self, lambda_0: np.ndarray, E: np.ndarray) -> np.ndarray:
        res = self.qp.solve(lambda_0, E, f_max=self._f_max)
        self._qp_result = res
        return res.z

    # ------------------------------------------------------------------ law
    def compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """τ (n-vector, zero on the base) for the plan at ``state.t``; ``reference`` is not used (the plan
        is the reference)."""
        t = float(state.t)
        q = self.system.check_q(state.q)
        swing, self._f_max = self._switch_contacts(t, q)
        law = self._law_for(swing)
        ref = self._reference(t, q, swing)
        t, terms, base, motion, u_p, lam_m, _, _ = law.motion_multiplier(state, ref)   # Aᵀλ_m (exact model)
        basis = self.channel.basis(terms.A, law.mask, t, terms.row_labels)
        cmd = self.channel.command(t, basis, lam_m)
        res = self._qp_result if basis.size else None
        tau = self._finish(base, cmd.tau, motion)
        self.last = dict(law.last, swing=swing, active_feet=[f for f in self.feet if f not in swing],
                         lambda_cmd=lam_m - basis.E @ (basis.E.T @ lam_m) + basis.E @ cmd.z,
                         saturation=self.saturation)
        if res is not None:
            self.last.update(foot_forces=res.forces, cone_margins=res.margins, qp_feasible=res.feasible,
                             qp_slack=res.slack)
        return tau

    def reset(self) -> None:
        super().reset()
        self.channel.reset()
        self._base0 = None
        for law in self._laws.values():
            law.reset()


__all__ = ["LeggedLaw", "BASE_AXES"]
