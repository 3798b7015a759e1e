"""The constrained model: a Pinocchio model of the robot plus its constraints (SPEC §2–§4).

``ConstrainedSystem.evaluate(q, qdot)`` returns the terms every formulation needs::

    M q̈ + h = τ_a − Aᵀλ,   h = C q̇ + g,   Ṁ = C + Cᵀ,   A q̇ = 0,   A q̈ + Ȧq̇ = 0,   Φ(q) = 0
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import numpy as np
import pinocchio as pin

from .constraints import Constraint, parse_constraints
from .errors import DimensionError, ModelError, StateMismatchError, UnknownNameError, as_bool, as_vector
from .model_checks import check_model, check_model_doc, unit_norm_parts
from .names import ModelNames
from .robots import DEFAULT_LOCKED, resolve_urdf, urdf_next_to
from .yamlio import load_yaml, read_text


def _owned(x: np.ndarray) -> np.ndarray:
    """``x`` if it owns its memory, else a copy: eigenpy returns Pinocchio's results (``data.M``, ``data.C``,
    ``data.g``) as fresh arrays, and a reference into ``data`` would change under the caller at the next pass."""
    return x if x.flags.owndata else x.copy()


class ConstraintPlan(NamedTuple):
    """The active constraint rows: ``items`` = (constraint, rows in A, selector of its 6 rows) per active
    constraint, ``m`` rows in all, one label per row."""

    items: tuple
    m: int
    labels: list


@dataclass
class DynamicsTerms:
    """Everything evaluated at one state (q, q̇). Arrays are owned (safe to keep)."""

    q: np.ndarray
    qdot: np.ndarray
    M: np.ndarray          # (n, n) symmetric mass matrix
    h: np.ndarray          # (n,) C q̇ + g
    C: np.ndarray | None   # (n, n) Coriolis matrix, Ṁ = C + Cᵀ (None from evaluate(..., coriolis=False))
    g: np.ndarray | None   # (n,) generalized gravity (None from evaluate(..., coriolis=False))
    A: np.ndarray          # (m, n) constraint Jacobian of the active constraints
    Adot_qdot: np.ndarray  # (m,) Ȧ q̇
    phi: np.ndarray        # (m,) constraint residual Φ(q)
    row_labels: list

    @property
    def n(self) -> int:
        return self.M.shape[0]

    def check_qdot(self, qdot) -> np.ndarray:
        """``self.qdot`` when ``qdot`` is None or equal to it; StateMismatchError otherwise, since C(q, q̇)
        and Ȧq̇ were evaluated at ``self.qdot`` (re-evaluate the terms for another velocity)."""
        if qdot is None or qdot is self.qdot:
            return self.qdot
        qdot = as_vector("qdot", qdot, self.M.shape[0])
        if (qdot != self.qdot).any():
            raise StateMismatchError("qdot differs from the q̇ the dynamics terms were evaluated at "
                                     "(C and Ȧq̇ depend on it): call system.evaluate(q, qdot) again")
        return self.qdot

    @property
    def m(self) -> int:
        return self.A.shape[0]


class ConstrainedSystem(ModelNames):
    """A robot (Pinocchio model) with holonomic/nonholonomic constraints that can be switched on and off."""

    def __init__(self, model: pin.Model, constraints: Sequence = (), floating_base: bool = False,
                 name: str = ""):
        self.model = model
        self.data = model.createData()
        self.floating_base = floating_base
        self._unit_parts = unit_norm_parts(model)  # quaternions and (cos, sin) pairs in q (check_q)
        self.name = name or model.name
        self.constraints: list[Constraint] = []
        for c in parse_constraints(constraints):
            self.add_constraint(c)
        self._zero_v = np.zeros(model.nv)
        # flat indices: lower triangle of M <- upper triangle (CRBA fills the upper triangle only)
        iu = np.triu_indices(model.nv, 1)
        self._lo_flat = iu[1] * model.nv + iu[0]
        self._up_flat = iu[0] * model.nv + iu[1]
        self._plan_key = None
        self._plan = ConstraintPlan((), 0, [])

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_urdf(cls, path_or_xml: str, constraints: Sequence = (), floating_base: bool = False,
                  gravity: Sequence[float] | None = None,
                  locked_joints: Sequence[str] | None = None) -> "ConstrainedSystem":
        """Load a URDF (file path, XML string, or an example-robot-data name such as ``panda``).

        ``floating_base=True`` adds a free-flyer root joint (q has nq = n + 1 entries: quaternion base).
        ``gravity`` overrides the world gravity vector (e.g. ``[0, 0, -9810]`` for a URDF in millimetres).
        ``locked_joints`` are removed from the model (fixed at their neutral value); the short name
        ``panda`` locks the two finger joints, so it is the 7-DoF arm (``panda_hand`` keeps them).
        """
        try:
            src = resolve_urdf(path_or_xml)
        except FileNotFoundError as exc:
            raise ModelError(str(exc)) from None
        root = pin.JointModelFreeFlyer() if floating_base else None
        try:
            if src.lstrip().startswith("<"):
                model = pin.buildModelFromXML(src, root) if root is not None else pin.buildModelFromXML(src)
            else:
                model = pin.buildModelFromUrdf(src, root) if root is not None else pin.buildModelFromUrdf(src)
        except (RuntimeError, ValueError, IndexError) as exc:
            raise ModelError(f"URDF could not be parsed: {exc}") from None
        if locked_joints is None and str(path_or_xml) in DEFAULT_LOCKED:
            locked_joints = DEFAULT_LOCKED[str(path_or_xml)]
        if locked_joints:
            ids = []
            for jn in locked_joints:
                if not model.existJointName(jn):
                    raise UnknownNameError(f"locked joint '{jn}' is not in the URDF")
                ids.append(model.getJointId(jn))
            model = pin.buildReducedModel(model, ids, pin.neutral(model))
        if model.nv == 0:
            raise ModelError("URDF has no movable joint")
        # physical inertias, finite numbers (urdfdom reads "nan" as 0), M(q₀) positive definite
        check_model(model, src if src.lstrip().startswith("<") else read_text(src, "URDF"))
        if gravity is not None:
            model.gravity.linear = as_vector("gravity", gravity, 3)
        return cls(model, constraints, floating_base=floating_base, name=model.name)

    @classmethod
    def from_yaml(cls, path_or_dict) -> "ConstrainedSystem":
        """Build from YAML: ``{robot: {urdf: <path|name>, floating_base: bool, gravity: [..]}, constraints: [..]}``;
        unknown keys refused (:func:`~qv_dynamics.model_checks.check_model_doc`)."""
        if isinstance(path_or_dict, dict):
            doc = path_or_dict
        else:
            doc = load_yaml(path_or_dict, "model config")
            robot = dict(check_model_doc(doc))
            if isinstance(robot.get("urdf"), str):  # a relative URDF path: next to the model config
                robot["urdf"] = urdf_next_to(robot["urdf"], Path(path_or_dict).resolve().parent)
                doc = dict(doc, robot=robot)
        robot = check_model_doc(doc)
        if "urdf" not in robot:
            raise ModelError("robot.urdf is required (file path, URDF XML, or example-robot-data name)")
        return cls.from_urdf(robot["urdf"], doc.get("constraints") or [],
                             floating_base=as_bool("robot.floating_base", robot.get("floating_base", False)),
                             gravity=robot.get("gravity"), locked_joints=robot.get("locked_joints"))

    def add_constraint(self, spec) -> Constraint:
        (c,) = parse_constraints([spec])
        c.bind(self)
        names = [k.name for k in self.constraints]
        if c.name in names:
            if c.explicit_name:
                raise ModelError(f"constraint name '{c.name}' is used twice (names must be unique: they address "
                                 f"set_active, wrench_constraints and λ_d labels); have {names}")
            c.name = f"{c.name}#{len(self.constraints)}"  # a generated name: the same contact listed again
        self.constraints.append(c)
        self._plan_key = None
        return c

    # ------------------------------------------------------------------ names and sizes
    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    n = nv

    @property
    def m(self) -> int:
        """Number of active constraint rows."""
        return self.constraint_plan().m

    def constraint(self, name: str) -> Constraint:
        for c in self.constraints:
            if c.name == name:
                return c
        raise UnknownNameError(f"unknown constraint '{name}'; have {[c.name for c in self.constraints]}")

    def set_active(self, name: str, active: bool = True, reanchor: bool = True) -> None:
        """Switch a constraint on or off (contact made / lost).

        A point contact or weld without an explicit ``position`` is re-anchored where its frame is at the
        next evaluation after it is switched on (``reanchor=True``)."""
        c = self.constraint(name)
        if active and not c.active and reanchor:
            c.release_anchor()
        c.active = bool(active)
        self._plan_key = None

    @property
    def active_constraints(self) -> list[Constraint]:
        return [c for c in self.constraints if c.active]

    def neutral(self) -> np.ndarray:
        return pin.neutral(self.model)

    def random_configuration(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """A random q inside the joint limits (finite limits; ±π for unbounded revolute joints)."""
        rng = rng or np.random.default_rng()
        lo = np.where(np.isfinite(self.model.lowerPositionLimit), self.model.lowerPositionLimit, -np.pi)
        hi = np.where(np.isfinite(self.model.upperPositionLimit), self.model.upperPositionLimit, np.pi)
        lo = np.maximum(lo, -10.0)
        hi = np.minimum(hi, 10.0)
        q = lo + (hi - lo) * rng.random(self.nq)
        if self.floating_base:
            q[:3] = rng.normal(size=3) * 0.1
            quat = rng.normal(size=4)
            q[3:7] = quat / np.linalg.norm(quat)
        return q

    def integrate(self, q: np.ndarray, dq: np.ndarray) -> np.ndarray:
        """q ⊕ dq on the configuration manifold (quaternion base handled by Pinocchio)."""
        return pin.integrate(self.model, q, dq)

    def check_q(self, q) -> np.ndarray:
        """``q`` as a finite nq-vector whose unit-norm parts (:func:`~qv_dynamics.model_checks.unit_norm_parts`)
        have norm 1 within 1e-6; DimensionError naming the joint otherwise (a zero quaternion is no rotation)."""
        q = as_vector("q", q, self.nq)
        for joint, lo, hi in self._unit_parts:
            nrm = math.sqrt(q[lo:hi].dot(q[lo:hi]))
            if abs(nrm - 1.0) > 1e-6:
                where = "base" if self.floating_base and lo == 3 else f"joint '{joint}'"
                raise DimensionError(f"q: {where} {'quaternion' if hi - lo == 4 else '(cos, sin) pair'} q[{lo}:{hi}] "
                                     f"must have unit norm, has {nrm:.6g}")
        return q

    def unit_norm_parts(self) -> list[tuple[str, int, int]]:
        return list(self._unit_parts)  # (joint, start, end) of the unit-norm parts of q

    # ------------------------------------------------------------------ kinematics
    def anchor(self, q, force: bool = False) -> None:
        """Record the current frame positions/orientations as the targets of point contacts and welds
        that have none (all of them with ``force=True``)."""
        q = self.check_q(q)
        pin.framesForwardKinematics(self.model, self.data, q)
        self._anchor_from_data(force)

    def _anchor_from_data(self, force: bool = False) -> None:
        for c in self.constraints:
            c.anchor(self.data, force)

    def frame_placement(self, q, frame: str) -> pin.SE3:
        q = self.check_q(q)
        pin.framesForwardKinematics(self.model, self.data, q)
        return self.data.oMf[self.frame_id(frame)].copy()

    def constraint_rows(self, q) -> tuple[np.ndarray, np.ndarray]:
        """Φ(q) and A(q) only (kinematics, no dynamics): for the position projection q ← q − A⁺Φ."""
        q = self.check_q(q)
        if self.constraint_plan().m == 0:  # no active row: no kinematics needed
            return np.zeros(0), np.zeros((0, self.nv))
        pin.computeJointJacobians(self.model, self.data, q)
        pin.updateFramePlacements(self.model, self.data)
        self._anchor_from_data(False)
        phi, A, _ = self._rows(q, None, drift=None)
        return phi, A

    def _stack(self, q, qdot, need_drift: bool = True):
        """Φ, A, Ȧq̇ after forwardKinematics(q, q̇, 0) + computeJointJacobians + updateFramePlacements
        (the simulator's fast path relies on this contract)."""
        return self._rows(q, qdot, drift="classical" if need_drift else None)

    # ------------------------------------------------------------------ dynamics
    def mass_matrix(self, q) -> np.ndarray:
        """M(q) by CRBA, made symmetric (CRBA fills the upper triangle only)."""
        return self._mass(self.check_q(q))

    def _mass(self, q: np.ndarray) -> np.ndarray:
        M = _owned(pin.crba(self.model, self.data, q))
        Mf = M.reshape(-1)
        Mf[self._lo_flat] = Mf[self._up_flat]
        return M

    def evaluate(self, q, qdot, coriolis: bool = True, checked: bool = False) -> DynamicsTerms:
        """M, h, C, g (Pinocchio CRBA / Coriolis / gravity) and A, Ȧq̇, Φ of the active constraints.

        One kinematic pass serves everything: ``computeCoriolisMatrix`` leaves the joint placements, the
        joint Jacobians J and their time variation J̇ in ``data``, so A = J (LOCAL_WORLD_ALIGNED) and
        Ȧq̇ = J̇q̇, which is the classical acceleration of the frame at q̈ = 0 (d/dt(A q̇) = A q̈ + Ȧ q̇).

        ``coriolis=False`` (the simulator's path, enough for ``direct_dynamics``) skips C and g: h comes
        from one RNEA at q̈ = 0 and Ȧq̇ from the frames' classical accelerations; the terms then have
        ``C = g = None`` and ``quasi_decompose`` refuses them.

        ``checked=True``: q and q̇ are float vectors already validated by :meth:`check_q` / ``as_vector``
        (a control law's ``_read_state``), so they are not checked a second time."""
        if not checked:
            q = self.check_q(q)
            qdot = as_vector("qdot", qdot, self.nv)
        model, data = self.model, self.data
        M = self._mass(q)
        if not coriolis:
            return self._evaluate_rnea(q, qdot, M)
        g = _owned(pin.computeGeneralizedGravity(model, data, q))
        C = _owned(pin.computeCoriolisMatrix(model, data, q, qdot))
        h = C.dot(qdot)
        h += g
        pin.updateFramePlacements(model, data)
        self._anchor_from_data(False)
        phi, A, ad = self._rows(q, qdot, drift="dJ")
        return DynamicsTerms(q=q, qdot=qdot, M=M, h=h, C=C, g=g, A=A, Adot_qdot=ad, phi=phi,
                             row_labels=self._plan[2])

    def _evaluate_rnea(self, q: np.ndarray, qdot: np.ndarray, M: np.ndarray) -> DynamicsTerms:
        """``evaluate(q, qdot, coriolis=False)``: h = RNEA(q, q̇, 0); Φ, A, Ȧq̇ by :meth:`_stack`."""
        model, data = self.model, self.data
        h = _owned(pin.nonLinearEffects(model, data, q, qdot))
        _, m, labels = self.constraint_plan()
        if m == 0:  # no active row: no kinematics needed
            return DynamicsTerms(q=q, qdot=qdot, M=M, h=h, C=None, g=None, A=np.zeros((0, self.nv)),
                                 Adot_qdot=np.zeros(0), phi=np.zeros(0), row_labels=labels)
        pin.forwardKinematics(model, data, q, qdot, self._zero_v)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        self._anchor_from_data(False)
        phi, A, ad = self._stack(q, qdot)
        return DynamicsTerms(q=q, qdot=qdot, M=M, h=h, C=None, g=None, A=A, Adot_qdot=ad, phi=phi,
                             row_labels=self._plan[2])

    def constraint_plan(self) -> ConstraintPlan:
        """The active rows (see :class:`ConstraintPlan`), rebuilt when the active set changes; the order of
        the rows of A, Φ, Ȧq̇ and λ."""
        # identity + active flag of every constraint (the plan keeps the objects alive, so ids stay unique)
        key = [(id(c), c.active) for c in self.constraints]
        if key != self._plan_key:
            items, r0, labels = [], 0, []
            for c in self.constraints:
                if not c.active:
                    continue
                k = c.size
                items.append((c, slice(r0, r0 + k), c.row_selector()))
                labels.extend(c.row_labels)
                r0 += k
            self._plan = ConstraintPlan(tuple(items), r0, labels)
            self._plan_key = key
        return self._plan

    def _rows(self, q, qdot, drift: str | None = "dJ"):
        """Φ, A and Ȧq̇ of the active constraints from the kinematics already in ``data``.

        ``drift="dJ"`` uses J̇q̇ (after computeCoriolisMatrix / computeJointJacobiansTimeVariation),
        ``drift="classical"`` the frame classical acceleration (after forwardKinematics(q, q̇, 0)),
        ``drift=None`` skips Ȧq̇ (kinematics only)."""
        items, m, _ = self.constraint_plan()
        model, data = self.model, self.data
        if len(items) == 1 and items[0][0].fresh_rows:  # one active constraint: its rows are the stack
            c, _, sel = items[0]
            phi, A, d = c.rows(model, data, q, qdot, drift, sel)  # fresh arrays: no copy needed
            return phi, np.ascontiguousarray(A), None if d is None else np.ascontiguousarray(d, dtype=float)
        if not items:
            return np.zeros(0), np.zeros((0, self.nv)), None if drift is None else np.zeros(0)
        phis, As, ads = zip(*[c.rows(model, data, q, qdot, drift, sel) for c, _, sel in items])
        return (np.concatenate(phis, dtype=float), np.concatenate(As, dtype=float),
                None if drift is None else np.concatenate(ads, dtype=float))

    @property
    def row_labels(self) -> list[str]:
        """One label per active constraint row, e.g. ``contact.z`` (cached while the active set holds)."""
        return self.constraint_plan().labels

    def rows_at(self, q: np.ndarray, qdot: np.ndarray | None = None):
        """(Φ, A, Ȧq̇) of the active rows at an already validated q (and q̇; Ȧq̇ is None without it): one
        kinematic pass (forwardKinematics(q, q̇, 0), computeJointJacobians, updateFramePlacements), anchors
        recorded, no checks, no dynamics. The simulator's RK4 stages and Newton–Raphson iterations call it."""
        items, m, _ = self.constraint_plan()
        if m == 0:
            return np.zeros(0), np.zeros((0, self.nv)), None if qdot is None else np.zeros(0)
        model, data = self.model, self.data
        if qdot is not None:
            pin.forwardKinematics(model, data, q, qdot, self._zero_v)
        pin.computeJointJacobians(model, data, q)
        pin.updateFramePlacements(model, data)
        self._anchor_from_data(False)
        drift = None if qdot is None else "classical"
        if len(items) == 1 and items[0][0].fresh_rows:  # one active constraint: its rows are the stack
            c, _, sel = items[0]
            phi, A, d = c.rows(model, data, q, qdot, drift, sel)
            return phi, np.ascontiguousarray(A), None if d is None else np.ascontiguousarray(d, dtype=float)
        return self._rows(q, qdot, drift)

    def effort_limits(self) -> np.ndarray:
        """URDF effort limits per velocity index (inf where none, e.g. the floating base)."""
        lim = np.array(self.model.effortLimit, dtype=float)
        lim[lim <= 0] = np.inf
        if self.floating_base:
            lim[:6] = 0.0
        return lim
