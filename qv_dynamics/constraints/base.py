"""The abstract constraint (SPEC §3): Φ(q), A(q) and Ȧq̇ of one kind, at the kinematics already in ``data``.

Axes are world-aligned at the frame (Pinocchio's LOCAL_WORLD_ALIGNED), so a row of A is the world-axis
velocity of the frame origin (or world angular velocity), and Ȧq̇ is the matching classical (not spatial)
acceleration at q̈ = 0: d/dt(A q̇) = A q̈ + Ȧ q̇. A constraint selects some of the six rows
``x y z rx ry rz`` (``axes``) of its 6-row residual, Jacobian and drift.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, ClassVar

import numpy as np
import pinocchio as pin

from ..errors import ModelError, as_bool
from ..linalg import LOCAL_WORLD_ALIGNED

AXES = ("x", "y", "z", "rx", "ry", "rz")
#: the keys every kind reads (its own are its ``keys``)
COMMON_KEYS = ("type", "name", "axes", "active", "position", "offset", "rotation")
#: the row selector of a constraint that keeps all six rows (its rows need no selection)
ALL_ROWS = slice(0, 6)

# how Ȧq̇ is read from the kinematics in ``data``: "dJ" = J̇q̇ (after computeCoriolisMatrix or
# computeJointJacobiansTimeVariation), "classical" = the frame's classical acceleration (after
# forwardKinematics(q, q̇, 0)), None = not needed (kinematics only)
DRIFT_MODES = ("dJ", "classical", None)


def frame_drift(model: pin.Model, data: pin.Data, fid: int, qdot: np.ndarray, mode: str | None):
    """Ȧq̇ of a frame (6-vector, world-aligned axes) in the given mode; None when ``mode`` is None."""
    if mode is None:
        return None
    if mode == "dJ":
        return pin.getFrameJacobianTimeVariation(model, data, fid, LOCAL_WORLD_ALIGNED).dot(qdot)
    # classical acceleration at q̈ = 0 = d/dt(J q̇) − J q̈ = J̇q̇ (linear part; angular is ω̇ anyway)
    return pin.getFrameClassicalAcceleration(model, data, fid, LOCAL_WORLD_ALIGNED).vector


class Constraint(ABC):
    """One constraint of a :class:`~qv_dynamics.model.ConstrainedSystem`, switchable on and off.

    ``position``/``rotation`` are the anchored target of the measured quantity: a world position (point
    contact), a world pose (weld) or an offset (loop closure). ``explicit_target``: given by the user, never
    re-anchored. ``frame_id``/``frame_b_id`` are filled in by :meth:`bind`."""

    kind: ClassVar[str]
    default_axes: ClassVar[tuple[str, ...]] = ("x", "y", "z")
    keys: ClassVar[tuple[str, ...]] = ()  # the kind's own keys in a YAML/dict spec (beside COMMON_KEYS)
    # rows() returns arrays computed afresh (held by no one else): the system may hand them out as they are
    fresh_rows: ClassVar[bool] = True

    def __init__(self, frame: str | None = None, axes=None, name: str = "", active: bool = True):
        self.frame = frame
        self.frame_b: str | None = None
        self.axes = tuple(self.default_axes if axes is None else axes)
        self.name = name
        self.active = bool(active)
        self.position: np.ndarray | None = None
        self.rotation: np.ndarray | None = None
        self.explicit_target = False
        self.explicit_name = False  # a name given by the user must be unique; generated ones are made unique
        self.frame_id = -1
        self.frame_b_id = -1
        self.axis_idx = np.array([AXES.index(a) for a in self.axes], dtype=int)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(name={self.name!r}, frame={self.frame!r}, axes={self.axes}, "
                f"active={self.active})")

    @property
    def type(self) -> str:
        """The kind's name as written in YAML (``point_contact``, ``weld``, ``loop_closure``, ``custom``)."""
        return self.kind

    @property
    def size(self) -> int:
        return len(self.axes)

    @property
    def row_labels(self) -> list[str]:
        return [f"{self.name}.{a}" for a in self.axes]

    def row_selector(self):
        """Rows of the 6-row quantities this constraint keeps: a slice when the axes are contiguous."""
        idx = self.axis_idx
        k = idx.size
        if k == 6 and np.array_equal(idx, np.arange(6)):
            return ALL_ROWS
        if k and np.array_equal(idx, np.arange(idx[0], idx[0] + k)):
            return slice(int(idx[0]), int(idx[0]) + k)
        return idx

    # ------------------------------------------------------------------ set-up
    def bind(self, system) -> None:
        """Resolve frame names to ids of ``system``'s model (UnknownNameError when absent)."""
        self.frame_id = system.frame_id(self.frame) if self.frame else -1
        self.frame_b_id = system.frame_id(self.frame_b) if self.frame_b else -1

    def anchor(self, data: pin.Data, force: bool = False) -> None:
        """Record the target from the frame placements in ``data`` (kinds with an anchored target)."""

    def release_anchor(self) -> None:
        """Forget an anchored target (re-anchored at the next evaluation), unless it was given explicitly."""

    # ------------------------------------------------------------------ the three quantities
    @abstractmethod
    def residual(self, data: pin.Data, q: np.ndarray) -> np.ndarray:
        """Φ (6 rows, before axis selection) from the frame placements in ``data``."""

    @abstractmethod
    def jacobian(self, model: pin.Model, data: pin.Data, q: np.ndarray) -> np.ndarray:
        """A (6 × n, before axis selection) from the joint Jacobians in ``data``."""

    @abstractmethod
    def drift(self, model: pin.Model, data: pin.Data, q: np.ndarray, qdot: np.ndarray, mode: str) -> np.ndarray:
        """Ȧq̇ (6 rows, before axis selection); ``mode`` as in :data:`DRIFT_MODES`."""

    @abstractmethod
    def jacobian_rate(self, system, q: np.ndarray, qdot: np.ndarray, frame_rate: Callable[[int], np.ndarray]
                      ) -> np.ndarray:
        """Ȧ (6 × n, before axis selection); ``frame_rate(fid)`` gives J̇ of a frame (cached by the caller)."""

    def rows(self, model: pin.Model, data: pin.Data, q: np.ndarray, qdot, mode: str | None, sel):
        """(Φ, A, Ȧq̇ or None) of the selected rows ``sel`` (see :meth:`row_selector`)."""
        if sel is ALL_ROWS:  # all six rows: no selection (three views less per call)
            ad = None if mode is None else self.drift(model, data, q, qdot, mode)
            return self.residual(data, q), self.jacobian(model, data, q), ad
        ad = None if mode is None else self.drift(model, data, q, qdot, mode)[sel]
        return self.residual(data, q)[sel], self.jacobian(model, data, q)[sel], ad

    # ------------------------------------------------------------------ parsing
    @classmethod
    def from_mapping(cls, d: dict, index: int) -> "Constraint":
        """Build from the keys of a spec (``type`` removed); the keys used are popped from ``d``."""
        axes = d.pop("axes", cls.default_axes)
        if isinstance(axes, str) or not isinstance(axes, (list, tuple)):
            raise ModelError(f"constraint #{index} ({cls.kind}): 'axes' must be a list of {AXES}, got {axes!r}")
        axes = tuple(axes)
        if not axes and cls.default_axes:
            raise ModelError(f"constraint #{index} ({cls.kind}): 'axes' is empty (a constraint without rows); "
                             f"give some of {AXES} or leave 'axes' out for {cls.default_axes}")
        for a in axes:
            if a not in AXES:
                raise ModelError(f"constraint #{index}: unknown axis {a!r} (allowed {AXES})")
        if len(set(axes)) != len(axes):
            raise ModelError(f"constraint #{index}: repeated axis in {axes}")
        c = cls(axes=axes, active=as_bool(f"constraint #{index} ({cls.kind}): 'active'", d.pop("active", True)))
        c.read_keys(d, index)
        return c

    def read_keys(self, d: dict, index: int) -> None:
        """Pop this kind's own keys from ``d`` (ModelError when one is missing or wrong)."""

    def read_target(self, d: dict) -> None:
        """``position`` (or ``offset``: a finite 3-vector) and ``rotation`` (a rotation matrix) of the spec:
        an explicit target. ModelError naming the key otherwise."""
        self.explicit_target = "position" in d or "rotation" in d
        where = f"constraint {self.kind} at frame '{self.frame}'"
        if "position" in d:
            self.position = finite_array(where, "position", d.pop("position"), (3,))
        if "offset" in d:
            self.position = finite_array(where, "offset", d.pop("offset"), (3,))
        if "rotation" in d:
            R = finite_array(where, "rotation", d.pop("rotation"), (3, 3))
            if np.abs(R.T @ R - np.eye(3)).max() > 1e-9 or np.linalg.det(R) <= 0:
                raise ModelError(f"{where}: 'rotation' is not a rotation matrix (RᵀR = I, det R = +1)")
            self.rotation = R


def finite_array(where: str, key: str, value, shape: tuple) -> np.ndarray:
    """``value`` as a finite float array of ``shape``; ModelError naming the key otherwise."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{where}: '{key}' must be numbers of shape {shape}, got {value!r}") from None
    if arr.shape != shape:
        raise ModelError(f"{where}: '{key}' must have shape {shape}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{where}: '{key}' has non-finite entries {arr.tolist()}")
    return arr


def require_frame(d: dict, index: int, kind: str, key: str = "frame") -> str:
    frame = d.pop(key, None)
    if not frame:
        raise ModelError(f"constraint #{index} ({kind}): '{key}' is required")
    return frame


class FrameConstraint(Constraint):
    """A constraint on one frame's placement with an anchored world target (point contact, weld).

    A target that was not given is recorded where the frame is at the first evaluation after the
    constraint is added or switched on (contact made where the tool touched)."""

    keys = ("frame",)

    def bind(self, system) -> None:
        super().bind(system)
        self._model = system.model
        if system.model.frames[self.frame_id].parentJoint == 0:
            raise ModelError(f"constraint '{self.name or self.kind}': frame '{self.frame}' is fixed to the world "
                             "(no joint moves it): its rows of A would be all zero; constrain a moving frame")

    def placement(self, data: pin.Data) -> pin.SE3:
        """The frame's world placement in ``data`` (its joint placements current): one frame recomputed by
        ``updateFramePlacement``, which costs less from Python than reading ``data.oMf[frame_id]``."""
        return pin.updateFramePlacement(self._model, data, self.frame_id)

    def anchor(self, data: pin.Data, force: bool = False) -> None:
        if force or self.position is None or self.rotation is None:
            oMf = data.oMf[self.frame_id]
            if force or self.position is None:
                self.position = oMf.translation.copy()
            if force or self.rotation is None:
                self.rotation = oMf.rotation.copy()

    def release_anchor(self) -> None:
        if not self.explicit_target:
            self.position = None
            self.rotation = None

    def jacobian(self, model: pin.Model, data: pin.Data, q: np.ndarray) -> np.ndarray:
        return pin.getFrameJacobian(model, data, self.frame_id, LOCAL_WORLD_ALIGNED)

    def drift(self, model: pin.Model, data: pin.Data, q, qdot: np.ndarray, mode: str) -> np.ndarray:
        return frame_drift(model, data, self.frame_id, qdot, mode)

    def jacobian_rate(self, system, q, qdot, frame_rate) -> np.ndarray:
        return frame_rate(self.frame_id)

    def read_keys(self, d: dict, index: int) -> None:
        self.frame = require_frame(d, index, self.kind)
        self.read_target(d)
