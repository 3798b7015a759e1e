"""Legged robot with a passive floating base: projected inverse dynamics with passive joints (paper
`aghili-projection-operator` §7.4) + a friction-cone force channel, following its contact plan.

Per call at time t, with the plan's phases (:class:`qv_control.gait.GaitPlan`):

1. **Contact set.** A foot in swing has its ``point_contact`` switched off, a foot in stance on (re-anchored
   where it touched down); each change is logged once in :attr:`LeggedLaw.events`. The coordinates θ are
   the 6 base coordinates (world position, rotation vector of R·R₀ᵀ) plus x y z of every swing foot, so
   k = n − r holds in every stance (4 feet: 6; 3 feet: 9; 2 feet: 12). R₀ (``rotation_reference``) is the
   base rotation of the first state by default, so a robot standing at any heading holds it (θ_rot = 0
   there); the plan's base offsets are added to the first state's base position and to R₀.
2. **Motion** (eq. 45–46, 56–62): u = θ̈_d + k_d ė + k_p e + k_i ∫e (e = θ_d − θ; the integral on the six
   base coordinates only, one sample old, bounded by ``ki_limit`` and held while the limiter scales the motion
   channel), f_m = (I + H)P(h + Mu_p), zero on the six base velocities; with an exact model q̈ = u_p and the
   multiplier is λ_m with Aᵀλ_m = f_m − h − Mu_p.
3. **Force channel** (:mod:`qv_control.laws.internal_force`, :mod:`qv_control.laws.contact_qp`): λ = λ₀ +
   E z with E a basis of the internal forces (A_pᵀE = 0); the QP picks z so that every foot force is
   unilateral, inside its (inscribed-pyramid) friction cone, with least tangential force, and a loaded or
   unloading foot's normal force is capped at w·``f_nominal`` (the plan's load ramp). The torque AᵀE(z −
   Eᵀλ_m) changes the foot forces and nothing else (no base torque, no motion).
4. **Joint friction** (``joint_friction=True``): the model's joint damping d and Coulomb friction f_c (URDF
   ``<dynamics damping friction>``, Pinocchio's ``model.damping`` / ``model.friction``) are added on the actuated
   joints, τ_f = d·q̇ + f_c·tanh(q̇ / ``friction_velocity``): with the plant's M q̈ + h + τ_f = τ + Aᵀλ the law's
   model holds again.
5. Torque limits (URDF) by :func:`qv_control.saturation.saturate`: motion channel first, force channel last.

Diagnostics in :attr:`last`: ``foot_forces`` (k × 3, on the robot, world axes, model prediction),
``cone_margins`` (μf_n − ‖f_t‖, N), ``qp_feasible``, ``active_feet``, ``base_integral`` (k_i∫e);
``qp`` counts solves/infeasible.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from qv_dynamics.errors import ModelError
from qv_dynamics.state import Reference, State

from ..gait import GaitPlan, plan_from_spec
from ..kernels import layout as L
from .base import ControlLaw, scalar_gain, vector_gain
from .contact_qp import ContactForceQP, cone_margins
from .integral import BoundedIntegral
from .internal_force import InternalForceChannel
from .passive import PassiveJointLaw

BASE_AXES = ("x", "y", "z", "rx", "ry", "rz")


class LeggedLaw(ControlLaw):
    """Body-pose control of a legged robot through its feet (module doc).

    ``feet``: foot frames, each with a ``point_contact`` constraint of the same name in ``system`` (default:
    every point contact); ``plan``: a :class:`GaitPlan`, a plan mapping or its YAML text
    (:func:`qv_control.gait.plan_from_spec`; default: stance); ``kp`` (6 base gains, 1/s²), ``kp_swing``
    (swing-foot gain), ``kd`` (1/s, all coordinates), ``ki`` (6 base integral gains, 1/s³; ``ki_limit`` bounds
    ‖k_i∫e‖ in m/s², rad/s²); ``rotation_reference``: R₀ of the base rotation coordinates (3 × 3, 9 values
    row-major, or a quaternion x y z w; default None: the first state's base rotation); ``joint_friction``:
    add the model's joint damping and friction (module doc, step 4); ``mu``, ``f_min`` (N), ``f_nominal`` (N,
    the cap at load factor 1; default: the robot's weight); ``base_frame``; ``actuated``: the actuated joints
    (default: every 1-DoF joint, the root free-flyer passive)."""

    name = "legged"
    tick_kernel = "qv_control.kernels.tick.projection_law_tick"

    def __init__(self, system, feet: Sequence[str] | None = None, plan=None, base_frame: str = "base",
                 kp=400.0, kd=40.0, ki=1000.0, ki_limit: float = 5.0, kp_swing: float = 900.0, mu: float = 0.8,
                 f_min: float = 10.0, f_nominal: float | None = None, actuated: Sequence[str] | None = None,
                 effort_limits="urdf", cond_max: float = 1e6, rotation_reference=None,
                 joint_friction: bool = False, friction_velocity: float = 0.01, compiled: bool = True):
        if not system.floating_base:
            raise ModelError("LeggedLaw needs a floating-base model (from_urdf(..., floating_base=True))")
        self._R0_given = rotation_reference is not None
        R0 = rotation_matrix(rotation_reference) if self._R0_given else np.eye(3)
        self.base_spec = {"frame": base_frame, "axes": list(BASE_AXES), "rotation_reference": R0}
        super().__init__(system, [self.base_spec], kp=kp, kd=kd, effort_limits=effort_limits, cond_max=cond_max,
                         compiled=compiled)
        if feet is None:
            feet = [c.name for c in system.constraints if c.type == "point_contact"]
        self.feet = list(feet)
        for f in self.feet:
            c = system.constraint(f)                          # UnknownNameError listing the constraints
            if c.type != "point_contact":
                raise ModelError(f"LeggedLaw: constraint '{f}' must be a point_contact, is {c.type}")
        self.plan = plan if isinstance(plan, GaitPlan) else plan_from_spec(self.feet, _plan_spec(plan))
        self.actuated = list(actuated) if actuated is not None else list(system.joint_names)
        self.kp_swing = float(vector_gain("kp_swing", kp_swing, 1)[0])
        self.ki = vector_gain("ki", ki, 6) if np.any(np.asarray(ki, float) != 0) else np.zeros(6)
        self.integral = BoundedIntegral(1.0, scalar_gain("ki_limit", ki_limit))
        self._ki_z = np.zeros(6)
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
        mask = self._law_for(()).mask
        for swing in self._plan_swing_sets():   # built now, not at the first lift-off inside the 1 kHz loop
            self._law_for(swing)
        if self.limits is not None:   # the base has no actuator: no limit to check there (τ_base = 0)
            self.limits = np.where(mask, self.limits, np.inf)
        self.friction = JointFriction(system.model, mask, friction_velocity) if joint_friction else None
        # the compiled tick (qv_control.kernels.tick, mode 3) of the stance in force; a plan without steps or sway
        # has one constant reference
        self._static = not self.plan.steps and self.plan.sway is None
        self._static_ref: Reference | None = None
        self._ct_swing: tuple | None = None
        self._start_compiled_tick()
        if self._ct is not None:
            self._ct.source = self._law_for(())

    # ------------------------------------------------------------------ pieces
    def _law_for(self, swing: tuple) -> PassiveJointLaw:
        law = self._laws.get(swing)
        if law is None:
            coords = [self.base_spec] + [{"frame": f, "axes": ["x", "y", "z"]} for f in swing]
            kp = np.concatenate([self.kp, np.full(3 * len(swing), self.kp_swing)])
            law = PassiveJointLaw(self.system, coords, actuated=self.actuated, kp=kp, kd=self.kd,
                                  effort_limits=None, cond_max=self.cond_max, compiled=self.compiled)
            law._ct = None   # (its ticks run inside this law's compiled tick)
            self._laws[swing] = law
        return law

    def _plan_swing_sets(self) -> list[tuple]:
        """The sets of swinging feet the plan goes through (in the order of ``feet``), from its lift-off and
        touch-down times."""
        times = sorted({t for st in self.plan.steps for t in (st.t_lift, st.t_touch)})
        sets = []
        for a, b in zip(times, times[1:]):
            t = 0.5 * (a + b)
            swing = tuple(f for f in self.feet if self.plan.phase(f, t)[0] == "swing")
            if swing and swing not in sets:
                sets.append(swing)
        return sets

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

    def _latch(self, q: np.ndarray) -> None:
        """The first state's base position (the plan's origin) and, unless given, its rotation as R₀."""
        M = self.system.frame_placement(q, self.base_spec["frame"])
        self._base0 = M.translation.copy()
        if not self._R0_given:
            self.base_spec["rotation_reference"] = M.rotation.copy()   # for the laws built later
            for law in self._laws.values():
                law.coords.anchor(q)                                    # the base is their only rotated frame

    def _reference(self, t: float, q: np.ndarray, swing: tuple, integral: bool = True) -> Reference:
        """θ_d, θ̇_d, θ̈_d of the plan at ``t`` (+ k_i z on θ̈_d of the base when ``integral``: the compiled tick adds
        it itself)."""
        th, thd, thdd = self.plan.base(t)
        th = th.copy()
        th[:3] += self._base0
        if integral:
            thdd = thdd + self._ki_z
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
        is the reference). A tick whose contact set is the last one's runs compiled (module doc)."""
        ct = self._ct
        if ct is None or self._base0 is None or ct.I is None or not ct.live:
            return self._numpy_tick(state, reference)
        if self._static:
            ref = self._static_ref
        else:
            ref = self._plan_tick(state.t)
            if ref is None:
                return self._numpy_tick(state, reference)
        tau = ct.run(state, ref)
        return tau if tau is not None else self._numpy_tick(state, reference)

    def _numpy_tick(self, state, reference):
        if self._ct is None:
            return self._compute(state, reference)
        self._ct.hand_over()
        tau = self._compute(state, reference)
        self._ct_swing = self.last["swing"]
        self._ct.source = self._law_for(self._ct_swing)
        if self._static:
            self._static_ref = self._reference(0.0, None, (), integral=False)
        self._ct.take_back()
        return tau

    def _plan_tick(self, t) -> Reference | None:
        """The plan's reference at ``t`` when its contact set is the active one (the F_FMAX caps set), else None
        (a switch: the numpy path switches the constraints)."""
        try:
            t = float(t)
        except (TypeError, ValueError):
            return None
        if not math.isfinite(t):
            return None
        swing, w = [], []
        for f in self.feet:
            kind, x = self.plan.phase(f, t)
            if kind == "swing":
                swing.append(f)
            else:
                w.append(np.inf if x >= 1.0 else x * self.f_nominal)
        if tuple(swing) != self._ct_swing or self._ct.vector(L.F_FMAX).shape[0] != len(w):
            return None
        self._ct.vector(L.F_FMAX)[:] = w
        return self._reference(t, None, tuple(swing), integral=False)

    def _compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """The numpy path of :meth:`compute` (the reference with ``compiled=False``)."""
        t = float(state.t)
        q = self.system.check_q(state.q)
        if self._base0 is None:
            self._latch(q)
        swing, self._f_max = self._switch_contacts(t, q)
        law = self._law_for(swing)
        ref = self._reference(t, q, swing)
        t, terms, base, motion, u_p, lam_m, _, _ = law.motion_multiplier(state, ref)   # Aᵀλ_m (exact model)
        basis = self.channel.basis(terms.A, law.mask, t, terms.row_labels)
        cmd = self.channel.command(t, basis, lam_m)
        res = self._qp_result if basis.size else None
        if self.friction is not None:
            base = base + self.friction.torque(state.qdot)
        tau = self._finish(base, cmd.tau, motion)
        if self.ki.any():   # k_i∫e of the base coordinates for the next tick (held while the motion is scaled)
            self._ki_z = self.ki * self.integral.step(t, law.last["e_p"][:6], self.saturation.motion_frozen)
        self.last = dict(law.last, swing=swing, active_feet=[f for f in self.feet if f not in swing],
                         lambda_cmd=lam_m - basis.E @ (basis.E.T @ lam_m) + basis.E @ cmd.z,
                         saturation=self.saturation, base_integral=self._ki_z)
        if res is not None:
            self.last.update(foot_forces=res.forces, cone_margins=res.margins, qp_feasible=res.feasible,
                             qp_slack=res.slack)
        return tau

    # ------------------------------------------------------------------ the compiled tick's state
    def _tick_mode(self) -> int:
        return 3

    def _pack(self, packer, plan) -> None:
        law, qp = self._ct.source, self.qp
        par = packer._floats[L.F_PAR][0]
        ch = self.channel
        par[[L.P_IRTOL, L.P_IATOL, L.P_KI_LIMIT, L.P_INT_DT, L.P_QP_FMIN, L.P_QP_EPS, L.P_QP_SLACK,
             L.P_HAS_FRICTION]] = ch.rtol, ch.atol, self.integral.limit, self.integral.max_dt, qp.f_min, qp.eps, \
            qp.slack_weight, self.friction is not None
        packer.ints(L.I_PAS, np.flatnonzero(~law.mask))
        packer.floats(L.F_KI6, self.ki)
        if self.friction is not None:
            par[L.P_FRICTION_V] = self.friction.v_s
            packer.floats(L.F_FRICTION, np.vstack([self.friction.d, self.friction.fc]))
        feet = plan["m"] // 3
        faces, W = qp._faces(np.tile([0.0, 0.0, 1.0], (feet, 1)))
        packer.floats(L.F_QP, np.hstack([faces.reshape(feet, 18), W.reshape(feet, 9)]))
        packer.floats(L.F_FMAX, np.full(feet, np.inf))
        packer.floats(L.F_IZ, np.zeros(6))
        packer.floats(L.F_EP, np.zeros(max(6, law.k)))

    def _pi_size(self, n: int, m: int) -> int:
        return 0

    def _export_state(self, ct) -> None:
        st = ct.state
        self.integral.z = ct.vector(L.F_IZ).copy() if st[L.S_INT_Z] else None
        self.integral.t_prev = None if math.isnan(st[L.S_INT_T]) or not st[L.S_INT_Z] else float(st[L.S_INT_T])
        self._ki_z = ct.vector(L.F_EP)[:6].copy()
        self.qp.solves += int(st[L.S_QP_SOLVES])
        self.qp.infeasible += int(st[L.S_QP_INFEASIBLE])
        st[L.S_QP_SOLVES] = st[L.S_QP_INFEASIBLE] = 0.0
        if st[L.S_TAUI]:   # (a compiled tick since the state was taken back)
            ct.source._A_full, ct.source._T_lost = ct.block(L.F_AFULL).copy(), None

    def _import_state(self, ct) -> bool:
        st = ct.state
        z, tp = self.integral.z, self.integral.t_prev
        st[L.S_INT_Z] = z is not None and z.shape == (6,)
        if st[L.S_INT_Z]:
            ct.vector(L.F_IZ)[:] = z
        st[L.S_INT_T] = np.nan if tp is None else tp
        ct.vector(L.F_EP)[:6] = self._ki_z
        ct.block(L.F_UC)[:] = np.eye(ct.k)
        st[L.S_COND_CALLS] = st[L.S_TAUI] = st[L.S_QP_SOLVES] = st[L.S_QP_INFEASIBLE] = 0.0
        st[L.S_HOLD] = 0.0
        sat = self.saturation
        st[L.S_FORCE_FROZEN], st[L.S_MOTION_FROZEN] = sat.force_frozen, sat.motion_frozen
        if self._f_max.shape == ct.vector(L.F_FMAX).shape:
            ct.vector(L.F_FMAX)[:] = self._f_max
        return self._base0 is not None

    def _diagnostics(self, ct) -> dict:
        D = ct.block(L.F_DIAG)
        sc, k, n, m = D[L.D_SCALARS], ct.k, self.system.nv, ct.m
        e = D[L.D_E, :k].copy()
        swing = self._ct_swing
        lam_cmd = D[L.D_LAMBDA_CMD, :m].copy()
        d = dict(t=float(sc[L.DS_T]), theta=D[L.D_THETA, :k].copy(), theta_d=D[L.D_THETA_D, :k].copy(),
                 e_theta=-e, e_p=e, cond_D=ct.cond(), u_p=D[L.D_UP, :n].copy(), lambda_d=D[L.D_LAMBDA_D, :m].copy(),
                 controllability_residual=0.0, swing=swing, active_feet=[f for f in self.feet if f not in swing],
                 lambda_cmd=lam_cmd, saturation=self.saturation, base_integral=D[L.D_KIZ, :6].copy())
        if int(sc[L.DS_DIM]):
            forces = -lam_cmd.reshape(-1, 3)
            normals = np.tile([0.0, 0.0, 1.0], (forces.shape[0], 1))
            d.update(foot_forces=forces, cone_margins=cone_margins(forces, normals, self.qp.mu),
                     qp_feasible=bool(sc[L.DS_FEASIBLE]), qp_slack=float(sc[L.DS_SLACK]))
        return d

    def reset(self) -> None:
        super().reset()
        self.channel.reset()
        self.integral.reset()
        self._ki_z = np.zeros(6)
        self._base0 = None
        for law in self._laws.values():
            law.reset()


def rotation_matrix(value) -> np.ndarray:
    """A rotation from 3 × 3 (or 9 values, row-major) or a unit quaternion (x y z w); ModelError otherwise."""
    a = np.asarray(value, float).ravel()
    if a.size == 4 and np.all(np.isfinite(a)) and abs(np.linalg.norm(a) - 1.0) < 1e-6:
        x, y, z, w = a / np.linalg.norm(a)
        return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    if a.size == 9 and np.all(np.isfinite(a)):
        R = a.reshape(3, 3)
        if np.allclose(R.T @ R, np.eye(3), atol=1e-6) and np.linalg.det(R) > 0:
            return R
    raise ModelError(f"rotation_reference must be a rotation matrix (3 x 3 or 9 values, row-major) or a unit "
                     f"quaternion (x y z w), got {value!r}")


def _plan_spec(plan):
    """A plan mapping from a mapping, its YAML text or None (stance)."""
    if plan is None or isinstance(plan, dict):
        return plan
    if isinstance(plan, str):
        from qv_dynamics.yamlio import load_yaml

        spec = load_yaml(text=plan, what="plan") if plan.strip() else None
        if spec is None or isinstance(spec, dict):
            return spec
    raise ModelError(f"plan must be a GaitPlan, a mapping or its YAML text, got {plan!r}")


class JointFriction:
    """τ_f = d·q̇ + f_c·tanh(q̇/v_s) on the actuated joints, d and f_c the model's ``damping`` and ``friction``
    (the URDF's ``<dynamics>``), v_s = ``velocity`` (rad/s, the smoothing of sign(q̇))."""

    def __init__(self, model, actuated_mask: np.ndarray, velocity: float = 0.01):
        self.d = np.where(actuated_mask, np.asarray(model.damping, float), 0.0)
        self.fc = np.where(actuated_mask, np.asarray(model.friction, float), 0.0)
        self.v_s = scalar_gain("friction_velocity", velocity)

    def torque(self, qdot: np.ndarray) -> np.ndarray:
        qdot = np.asarray(qdot, float)
        return self.d * qdot + self.fc * np.tanh(qdot / self.v_s)


__all__ = ["LeggedLaw", "BASE_AXES", "JointFriction", "rotation_matrix"]
