"""Minimal coordinates θ(q) for the control laws.

Paper `aghili-quasi-velocities` eq. 33–34: θ̇ = (∂θ/∂q)q̇ = D v_r with D = (∂θ/∂q)Q⁻ᵀV₂;
paper `aghili-projection-operator` eq. 40–41: q̇ = Λθ̇, q̈ = Λθ̈ + Λ̇θ̇ (Λ built in the laws from ∂θ/∂q).

A coordinate is one of (spec items, in Python or YAML alike)::

    "panda_joint3"                       a 1-DoF joint (θ = q_j, range = the URDF joint limits)
    "panda_hand.x"                       a world-axis component of a frame: x, y, z (position) or
                                         rx, ry, rz (orientation, see below)
    {joint: panda_joint3} | {joints: [panda_joint3, panda_joint5]}
    {frame: panda_hand, axes: [x, y, rx, ry, rz], rotation_reference: 3x3 (optional)}

Orientation components are the world-axis components of the rotation vector φ = log₃(R·R_refᵀ) of the
frame's rotation R relative to a reference R_ref; R_ref is the frame orientation at the first
evaluation (or :meth:`MinimalCoordinates.anchor`) unless given, so θ_d = 0 holds the initial attitude.
φ̇ = Jlog₃(E)Eᵀω with E = R·R_refᵀ and ω the world angular velocity (E-dot = [ω]×E).

:meth:`MinimalCoordinates.evaluate` returns θ, ∂θ/∂q, its time derivative along q̇ and the drift
(∂θ/∂q)˙q̇, and (for the laws that need Ḋ) the time derivative Ȧ of the active constraint Jacobian of the
system, all from one Pinocchio ``computeJointJacobiansTimeVariation`` pass in a private ``Data``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pinocchio as pin
from scipy.linalg.lapack import dgesdd as _dgesdd

from qv_dynamics.errors import DimensionError, ModelError, RankDeficiencyError, UnknownNameError
from qv_dynamics.kernels.loader import load
from qv_dynamics.linalg import LOCAL_WORLD_ALIGNED

from .coord_plan import CompiledCoordinates

AXES = ("x", "y", "z", "rx", "ry", "rz")
#: beyond this angle (rad) the rotation-vector coordinates are too close to the log₃ singularity at π
MAX_ROTATION_ANGLE = 2.8


@dataclass
class CoordinateItem:
    kind: str              # "joint" | "position" | "rotation"
    label: str
    name: str              # joint or frame name
    index: int = -1        # q index (joint) or axis 0..2 (frame)
    v_index: int = -1      # velocity index (joint)
    frame_id: int = -1
    lower: float = -np.inf
    upper: float = np.inf


@dataclass
class KinematicTerms:
    """θ(q), J = ∂θ/∂q (k×n), J̇ (k×n, along q̇), J̇q̇ (k) and optionally Ȧ (m×n) of the active constraints."""

    theta: np.ndarray
    J: np.ndarray
    Jdot: np.ndarray
    Jdot_qdot: np.ndarray
    theta_dot: np.ndarray | None = None  # J q̇
    Adot: np.ndarray | None = None


def _entries(spec) -> list[dict]:
    """The spec as a list of mappings: "frame.axis" -> {frame, axes}, a joint name -> {joint}."""
    if spec is None:
        raise ModelError("coordinates: a list of joints and/or frame components is required, e.g. "
                         "['panda_hand.x', 'panda_hand.y', 'panda_joint3']")
    if isinstance(spec, str):
        spec = [s.strip() for s in spec.split(",") if s.strip()]  # "panda_hand.x, panda_hand.y, ..."
    elif isinstance(spec, dict):
        spec = [spec]
    out = []
    for i, s in enumerate(spec):
        if isinstance(s, str):
            head, _, tail = s.rpartition(".")
            s = {"frame": head, "axes": [tail]} if head and tail in AXES else {"joint": s}
        if not isinstance(s, dict):
            raise ModelError(f"coordinates[{i}]: expected a joint name, 'frame.axis' or a mapping, got {s!r}")
        out.append(dict(s))
    return out


def _joint_items(system, i: int, s: dict, joints) -> list[CoordinateItem]:
    if s:
        raise ModelError(f"coordinates[{i}]: unknown keys {sorted(s)}")
    model = system.model
    items = []
    for jn in joints:
        vi = system.joint_v_index(jn)  # UnknownNameError with the list of joints
        jid = model.getJointId(jn)
        if model.joints[jid].nq != 1 or model.joints[jid].nv != 1:
            raise ModelError(f"coordinates: joint '{jn}' is not a 1-DoF joint with one position "
                             "variable (continuous/spherical joints: use a frame orientation instead)")
        qi = model.joints[jid].idx_q
        lo, hi = float(model.lowerPositionLimit[qi]), float(model.upperPositionLimit[qi])
        if not lo < hi:  # URDF without limits (continuous/unbounded) -> no range check
            lo, hi = -np.inf, np.inf
        items.append(CoordinateItem("joint", jn, jn, index=qi, v_index=vi, lower=lo, upper=hi))
    return items


def _frame_items(system, i: int, s: dict) -> list[CoordinateItem]:
    frame = s.pop("frame", None)
    if frame is None:
        raise ModelError(f"coordinates[{i}]: needs 'joint', 'joints' or 'frame'")
    fid = system.frame_id(frame)  # UnknownNameError with suggestions
    axes = s.pop("axes", ["x", "y", "z"])
    if isinstance(axes, str):
        axes = [axes]
    ref = s.pop("rotation_reference", None)
    if s:
        raise ModelError(f"coordinates[{i}]: unknown keys {sorted(s)}")
    items = []
    for a in axes:
        if a not in AXES:
            raise UnknownNameError(f"coordinates[{i}]: unknown axis {a!r} (allowed {AXES})")
        k = AXES.index(a)
        it = CoordinateItem("position" if k < 3 else "rotation", f"{frame}.{a}", frame, index=k % 3, frame_id=fid)
        it.rotation_reference = None if ref is None else np.asarray(ref, float).reshape(3, 3)
        items.append(it)
    return items


def _parse(system, spec) -> list[CoordinateItem]:
    items: list[CoordinateItem] = []
    for i, s in enumerate(_entries(spec)):
        joints = s.pop("joints", None)
        if "joint" in s:
            joints = [s.pop("joint")]
        items += _joint_items(system, i, s, joints) if joints is not None else _frame_items(system, i, s)
    labels = [it.label for it in items]
    dup = sorted({lab for lab in labels if labels.count(lab) > 1})
    if dup:
        raise ModelError(f"coordinates: repeated entries {dup}")
    if not items:
        raise ModelError("coordinates: empty list")
    return items


class MinimalCoordinates:
    """θ(q) chosen by the user (eq. 33): selected joints and/or world-axis components of frames."""

    def __init__(self, system, spec: Sequence | str | dict, compiled: bool = True):
        self.system = system
        # θ, J, J̇, Ȧ in one compiled call (qv_control.kernels.coordinates, coord_plan), loaded at the first evaluation
        # (a law whose fused tick does the coordinates itself never needs it); compiled=False: numpy (the reference)
        self.compiled = bool(compiled)
        self.model = system.model
        self.data = self.model.createData()  # private: never clobbers the system's Data
        self.spec = spec
        self.items = _parse(system, spec)
        self.k = len(self.items)
        self.labels = [it.label for it in self.items]
        self.lower = np.array([it.lower for it in self.items])
        self.upper = np.array([it.upper for it in self.items])
        self._joint_rows = [(i, it) for i, it in enumerate(self.items) if it.kind == "joint"]
        frames: dict[int, list[int]] = {}
        for i, it in enumerate(self.items):
            if it.kind != "joint":
                frames.setdefault(it.frame_id, []).append(i)
        self._frames = frames
        self._rot_ref: dict[int, np.ndarray | None] = {}
        self._ref_version = 0  # bumped whenever an orientation reference is set (the compiled path's copy)
        for fid, rows in frames.items():
            refs = [getattr(self.items[i], "rotation_reference", None) for i in rows]
            self._rot_ref[fid] = next((r for r in refs if r is not None), None)
        # evaluation plan (static, plain ints: scalar indexing beats fancy indexing for a few rows):
        # joint rows (row, q index, v index); per frame its position rows (row, axis) and rotation rows
        self._j_plan = [(i, it.index, it.v_index) for i, it in self._joint_rows]
        self._frame_plan = []
        for fid, rows in frames.items():
            pos = [(i, self.items[i].index) for i in rows if self.items[i].kind == "position"]
            rot = [(i, self.items[i].index) for i in rows if self.items[i].kind == "rotation"]
            self._frame_plan.append((fid, _row_map(pos), _row_map(rot), rot[0][0] if rot else -1))
        self._fast = CompiledCoordinates(self) if self.compiled else None
        # range check bounds (joint rows only have finite ones)
        self._lo = self.lower - 1e-12
        self._hi = self.upper + 1e-12
        self._has_range = bool(np.isfinite(self.lower).any() or np.isfinite(self.upper).any())
        self._range_rows = [(i, float(lo), float(hi)) for i, (lo, hi) in enumerate(zip(self._lo, self._hi))
                            if math.isfinite(lo) or math.isfinite(hi)]

    @property
    def _kernel(self):
        """:func:`qv_control.kernels.coordinates.coordinates`, or None (numpy path: ``compiled=False`` or not
        loadable)."""
        return load("qv_control.kernels.coordinates", "coordinates") if self.compiled else None

    @property
    def size(self) -> int:
        return self.k

    def __len__(self) -> int:
        return self.k

    def anchor(self, q, force: bool = True) -> None:
        """Take the current frame orientations as the orientation references (R_ref)."""
        q = self.system.check_q(q)
        pin.framesForwardKinematics(self.model, self.data, q)
        for fid in self._frames:
            if force or self._rot_ref[fid] is None:
                self._rot_ref[fid] = self.data.oMf[fid].rotation.copy()
        self._ref_version += 1

    def check_range(self, theta, name: str = "theta_d") -> None:
        """Raise ReferenceRangeError when a joint coordinate leaves its URDF joint range."""
        if not self._has_range:
            return
        if len(theta) == self.k:  # the usual case: plain float comparisons on the few bounded rows
            th = theta.tolist() if isinstance(theta, np.ndarray) else list(theta)
            if not any(th[i] < lo or th[i] > hi for i, lo, hi in self._range_rows):
                return
        elif not ((theta < self._lo).any() or (theta > self._hi).any()):
            return
        from .references import ReferenceRangeError

        bad = np.flatnonzero((theta < self.lower - 1e-12) | (theta > self.upper + 1e-12))
        if bad.size:
            msg = ", ".join(f"{self.labels[i]} = {theta[i]:.6g} not in [{self.lower[i]:.6g}, {self.upper[i]:.6g}]"
                            for i in bad)
            raise ReferenceRangeError(f"{name}: outside the joint range: {msg}")

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, q, qdot, constraint_rates: bool = False, data=None, compiled: bool = True) -> KinematicTerms:
        """θ, J = ∂θ/∂q, J̇, J̇q̇ at (q, q̇); with ``constraint_rates`` also Ȧ of the system's active
        constraints (rows in the order of ``system.evaluate(...).A``).

        ``data``: a Pinocchio Data of the same model that already holds the joint Jacobians, their time
        variation and the frame placements at this (q, q̇) — e.g. ``system.data`` right after
        ``system.evaluate(q, qdot)`` (computeCoriolisMatrix + updateFramePlacements leave exactly what
        computeJointJacobiansTimeVariation would compute): the kinematic pass is then skipped. By default
        the kinematics are computed in this object's private Data."""
        model = self.model
        n = model.nv
        q = np.asarray(q, float)
        qdot = np.asarray(qdot, float)
        if data is None:
            data = self.data
            pin.computeJointJacobiansTimeVariation(model, data, q, qdot)
            pin.updateFramePlacements(model, data)
        if self._fast is not None and compiled:  # (compiled=False: the numpy path for this call)
            fast = self._fast.evaluate(data, q, qdot, constraint_rates)
            if fast is not None:
                theta, J, Jd, Jdq, thd, Adot = fast
                return KinematicTerms(theta=theta, J=J, Jdot=Jd, Jdot_qdot=Jdq, theta_dot=thd, Adot=Adot)
        k = self.k
        theta = np.zeros(k)
        J = np.zeros((k, n))
        Jd = np.zeros((k, n))
        for i, qi, vi in self._j_plan:
            theta[i] = q[qi]
            J[i, vi] = 1.0
        cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for fid, pos_rows, rot_rows, first_rot in self._frame_plan:
            J6 = pin.getFrameJacobian(model, data, fid, LOCAL_WORLD_ALIGNED)
            dJ6 = pin.getFrameJacobianTimeVariation(model, data, fid, LOCAL_WORLD_ALIGNED)
            cache[fid] = (J6, dJ6)
            oMf = data.oMf[fid]
            if pos_rows is not None:
                rows, axes = pos_rows
                theta[rows] = oMf.translation[axes]
                J[rows] = J6[axes]
                Jd[rows] = dJ6[axes]
            if rot_rows is not None:
                rows, axes = rot_rows
                phi, GJ, GJd = self._rotation(fid, oMf.rotation, J6, dJ6, qdot, first_rot)
                theta[rows] = phi[axes]
                J[rows] = GJ[axes]
                Jd[rows] = GJd[axes]
        kt = KinematicTerms(theta=theta, J=J, Jdot=Jd, Jdot_qdot=Jd.dot(qdot), theta_dot=J.dot(qdot))
        if constraint_rates:
            kt.Adot = self._constraint_rates(q, qdot, cache, data)
        return kt

    def _rotation(self, fid: int, R: np.ndarray, J6: np.ndarray, dJ6: np.ndarray, qdot: np.ndarray, row: int):
        """(φ, GJ_ω, (GJ_ω)˙) of one frame, all three axes (the caller keeps the rows it needs).

        φ = log₃(E), E = R·R_refᵀ; φ̇ = Gω with G = Jlog₃(E)Eᵀ = J_l⁻¹(φ) = I − ½[φ]× + c(θ)[φ]×², θ = ‖φ‖,
        c = 1/θ² − (1 + cos θ)/(2θ sin θ) (the inverse left Jacobian of SO(3)); in closed form along φ̇,
        Ġ = −½[φ̇]× + c([φ̇]×[φ]× + [φ]×[φ̇]×) + (c′/θ)(φᵀφ̇)[φ]×², and [φ]×[φ̇]× = ([φ̇]×[φ]×)ᵀ."""
        R_ref = self._rot_ref[fid]
        if R_ref is None:
            R_ref = self._rot_ref[fid] = R.copy()
            self._ref_version += 1
        phi = pin.log3(R.dot(R_ref.T))
        th2 = float(phi.dot(phi))
        if th2 > MAX_ROTATION_ANGLE ** 2:
            raise RankDeficiencyError(
                f"coordinates: frame '{self.items[row].name}' is {math.sqrt(th2):.3f} rad "
                "from its orientation reference; rotation-vector coordinates are singular near pi "
                "(choose a rotation_reference closer to the working orientation)")
        c, k = _left_jacobian_coefficients(th2)
        P = pin.skew(phi)
        P2 = P.dot(P)
        G = c * P2
        G -= 0.5 * P
        G += _EYE3
        Jw = J6[3:]
        phid = G.dot(Jw.dot(qdot))                      # φ̇ = Gω
        Pd = pin.skew(phid)
        S = Pd.dot(P)
        Gd = c * (S + S.T)
        Gd -= 0.5 * Pd
        Gd += (k * float(phi.dot(phid))) * P2
        return phi, G.dot(Jw), G.dot(dJ6[3:]) + Gd.dot(Jw)

    def _frame_rates(self, fid: int, cache, data=None):
        if fid not in cache:
            data = self.data if data is None else data
            cache[fid] = (pin.getFrameJacobian(self.model, data, fid, LOCAL_WORLD_ALIGNED),
                          pin.getFrameJacobianTimeVariation(self.model, data, fid, LOCAL_WORLD_ALIGNED))
        return cache[fid][1]

    def _constraint_rates(self, q, qdot, cache, data=None) -> np.ndarray:
        """Ȧ of the active constraints, in the rows of the system's :meth:`constraint_plan`."""
        items, m, _ = self.system.constraint_plan()
        out = np.empty((m, self.model.nv))
        for c, rows, sel in items:
            out[rows] = c.jacobian_rate(self.system, q, qdot, lambda fid: self._frame_rates(fid, cache, data))[sel]
        return out


_EYE3 = np.eye(3)
_EYE3.flags.writeable = False
_SERIES_BELOW = 0.02  # rad: below, the series of c and c′/θ (closed forms lose digits to cancellation)


def _left_jacobian_coefficients(th2: float) -> tuple[float, float]:
    """c(θ) = 1/θ² − (1 + cos θ)/(2θ sin θ) = 1/θ² − cot(θ/2)/(2θ) and c′(θ)/θ, from θ² (see ``_rotation``);
    Taylor series (truncation < 1e-20 there) below ``_SERIES_BELOW``."""
    if th2 < _SERIES_BELOW ** 2:
        return (1 / 12 + th2 * (1 / 720 + th2 * (1 / 30240 + th2 / 1209600)),
                1 / 360 + th2 * (1 / 7560 + th2 / 201600))
    th = math.sqrt(th2)
    cot = 1.0 / math.tan(0.5 * th)
    # c′ = −2/θ³ + csc²(θ/2)/(4θ) + cot(θ/2)/(2θ²), csc² = 1 + cot²
    return 1.0 / th2 - 0.5 * cot / th, (-2.0 / th2 + 0.25 * (1.0 + cot * cot) + 0.5 * cot / th) / th2


def _row_map(pairs: list[tuple[int, int]]):
    """(rows of θ, axes of the frame quantity) for ``pairs`` = [(row, axis)]: slices when both are
    contiguous and ascending (views, no gather), index arrays otherwise; None when there is no pair."""
    if not pairs:
        return None
    rows = [i for i, _ in pairs]
    axes = [a for _, a in pairs]

    def as_index(ix):
        k = len(ix)
        return slice(ix[0], ix[0] + k) if ix == list(range(ix[0], ix[0] + k)) else np.array(ix, dtype=int)

    return as_index(rows), as_index(axes)


def _singular_values(D: np.ndarray) -> np.ndarray:
    """Singular values (descending) by LAPACK dgesdd without vectors, called directly (numpy's wrapper
    costs more than the 2×2..7×7 decomposition itself)."""
    _, s, _, info = _dgesdd(D, compute_uv=0)
    return s if info == 0 else np.linalg.svd(D, compute_uv=False)


def check_reduced_jacobian(D: np.ndarray, labels: Sequence[str], n: int, r: int, cond_max: float) -> float:
    """D = (∂θ/∂q)Q⁻ᵀV₂ (eq. 34) must be square (k = n − r) and well conditioned; returns cond(D)."""
    k, nr = D.shape
    if k != nr:
        raise DimensionError(
            f"minimal coordinates: {k} given ({', '.join(labels)}) but the constrained system has n - r = "
            f"{n} - {r} = {nr} degrees of freedom; D = (dtheta/dq) Q^-T V2 must be square. "
            + ("Add coordinates (e.g. orientation axes rx, ry, rz, a redundancy joint, or the x y z of a foot "
               "or tool whose contact was switched off: qv_control.laws.legged.LeggedLaw does this itself)."
               if k < nr else "Remove coordinates (the constraints already fix some of them)."))
    if k == 0:
        return 1.0
    s = _singular_values(D)
    cond = float(s[0] / s[-1]) if s[-1] > 0 else np.inf
    if not cond <= cond_max:
        raise RankDeficiencyError(
            f"minimal coordinates ({', '.join(labels)}) are singular here: cond(D) = {cond:.3g} > {cond_max:.3g} "
            "(the chosen theta does not parametrize the constrained motion at this pose; choose other "
            "coordinates or move away from the singular pose)")
    return cond


def as_coordinates(system, coordinates, compiled: bool = True) -> MinimalCoordinates:
    if isinstance(coordinates, MinimalCoordinates):
        if coordinates.system is system and coordinates.compiled == bool(compiled):
            return coordinates
        coordinates = coordinates.spec
    return MinimalCoordinates(system, coordinates, compiled)



__all__ = ["MinimalCoordinates", "KinematicTerms", "check_reduced_jacobian", "as_coordinates", "AXES"]
