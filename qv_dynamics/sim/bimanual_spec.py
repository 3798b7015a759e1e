"""The description of a two-arm closed chain: two arms (any URDF or example-robot-data name, each with its
base pose, grasping frame and nominal posture) holding a free box (mass, size, where it sits between the
hands). Read from a mapping (YAML) with every value checked where it enters:
:class:`BimanualSpecError` names the offending key.

    arms:                                    # exactly two; names prefix every link and joint of the arm
      - {name: left, robot: panda, tcp: panda_hand_tcp, base_xyz: [-0.4, 0, 0], base_rpy: [0, 0, 0],
         posture: [0, -0.785, 0, -2.356, 0, 1.571, 0.785], redundancy: [panda_joint3]}
      - {name: right, robot: panda, ...}
    object: {mass: 2.0, size: [0.3, 0.1, 0.1], offset: [0, 0, -0.05]}

``posture``: one angle per moving joint of the arm (after ``locked``), in the arm's kinematic order; the
grasps are made there (the box's grasp frames coincide with the ``tcp`` frames). ``redundancy``: joints of
the arm (unprefixed) taken as minimal coordinates besides the box pose, k = n − r = 6 + their number (one
per joint beyond six on a redundant arm). ``offset``: box centre minus the midpoint of the two TCPs (world
axes); the box starts with the world's orientation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..errors import QVError
from ..robots import DEFAULT_LOCKED

_READY = (0.0, -math.pi / 4, 0.0, -3 * math.pi / 4, 0.0, math.pi / 2, math.pi / 4)


class BimanualSpecError(QVError):
    """A two-arm description with a missing, unknown or ill-typed key (the message names the key)."""


@dataclass(frozen=True)
class ArmSpec:
    name: str
    robot: str
    tcp: str
    base_xyz: tuple = (0.0, 0.0, 0.0)
    base_rpy: tuple = (0.0, 0.0, 0.0)
    posture: tuple = ()
    locked: tuple = ()
    redundancy: tuple = ()


@dataclass(frozen=True)
class ObjectSpec:
    mass: float = 2.0
    size: tuple = (0.30, 0.10, 0.10)
    offset: tuple = (0.0, 0.0, -0.05)


@dataclass(frozen=True)
class BimanualSpec:
    arms: tuple
    object: ObjectSpec = field(default_factory=ObjectSpec)
    name: str = "bimanual_box"
    urdf: str | None = None      # a file already generated from this description (else built in memory)

    @property
    def sides(self) -> tuple[str, str]:
        return tuple(a.name for a in self.arms)

    def arm(self, side: str) -> ArmSpec:
        for a in self.arms:
            if a.name == side:
                return a
        raise BimanualSpecError(f"no arm named '{side}'; arms are {list(self.sides)}")

    @classmethod
    def from_dict(cls, d, where: str = "bimanual") -> "BimanualSpec":
        d = _mapping(d, where)
        _known(d, where, ("arms", "object", "name", "urdf"))
        arms = d.get("arms")
        if not isinstance(arms, (list, tuple)) or len(arms) != 2:
            raise BimanualSpecError(f"{where}.arms: expected a list of two arms, got {arms!r}")
        parsed = tuple(_arm(a, f"{where}.arms[{i}]") for i, a in enumerate(arms))
        if parsed[0].name == parsed[1].name:
            raise BimanualSpecError(f"{where}.arms: the two arms need different names, both are '{parsed[0].name}'")
        obj = _object(d.get("object", {}), f"{where}.object")
        name = _text(d.get("name", "bimanual_box"), f"{where}.name")
        urdf = d.get("urdf")
        return cls(parsed, obj, name, None if urdf is None else _text(urdf, f"{where}.urdf"))


def panda_pair() -> BimanualSpec:
    """The shipped default: two Pandas facing each other 0.8 m apart in the "ready" posture, hands pointing down
    at the top face of a 2 kg box 0.30 × 0.10 × 0.10 m (``urdf/bimanual_panda_box.urdf``)."""
    arm = dict(robot="panda", tcp="panda_hand_tcp", posture=_READY, locked=DEFAULT_LOCKED["panda"],
               redundancy=("panda_joint3",))
    return BimanualSpec((ArmSpec("left", base_xyz=(-0.4, 0.0, 0.0), **arm),
                         ArmSpec("right", base_xyz=(0.4, 0.0, 0.0), base_rpy=(0.0, 0.0, math.pi), **arm)),
                        ObjectSpec(), "bimanual_panda_box", "bimanual_panda_box.urdf")


def _mapping(d, where: str) -> dict:
    if not isinstance(d, dict):
        raise BimanualSpecError(f"{where}: expected a mapping, got {type(d).__name__} {d!r}")
    return d


def _known(d: dict, where: str, keys) -> None:
    extra = sorted(set(d) - set(keys))
    if extra:
        raise BimanualSpecError(f"{where}: unknown key(s) {extra}; known: {sorted(keys)}")


def _text(v, where: str) -> str:
    if not isinstance(v, str) or not v.strip():
        raise BimanualSpecError(f"{where}: expected a non-empty string, got {v!r}")
    return v.strip()


def _numbers(v, where: str, n: int | None = None) -> tuple:
    if isinstance(v, (str, bytes, dict)) or not hasattr(v, "__len__"):
        raise BimanualSpecError(f"{where}: expected {n or 'a list of'} numbers, got {v!r}")
    if n is not None and len(v) != n:
        raise BimanualSpecError(f"{where}: expected {n} numbers, got {len(v)}: {list(v)!r}")
    out = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
            raise BimanualSpecError(f"{where}[{i}]: expected a finite number, got {x!r}")
        out.append(float(x))
    return tuple(out)


def _names(v, where: str) -> tuple:
    if isinstance(v, str) or not isinstance(v, (list, tuple)):
        raise BimanualSpecError(f"{where}: expected a list of joint names, got {v!r}")
    return tuple(_text(x, f"{where}[{i}]") for i, x in enumerate(v))


def _arm(a, where: str) -> ArmSpec:
    a = _mapping(a, where)
    keys = ("name", "robot", "tcp", "base_xyz", "base_rpy", "posture", "locked", "redundancy")
    _known(a, where, keys)
    for k in ("name", "robot", "tcp", "posture"):
        if k not in a:
            raise BimanualSpecError(f"{where}.{k}: missing (an arm needs name, robot, tcp and posture)")
    robot = _text(a["robot"], f"{where}.robot")
    locked = _names(a["locked"], f"{where}.locked") if "locked" in a else tuple(DEFAULT_LOCKED.get(robot, ()))
    return ArmSpec(name=_text(a["name"], f"{where}.name"), robot=robot, tcp=_text(a["tcp"], f"{where}.tcp"),
                   base_xyz=_numbers(a.get("base_xyz", (0, 0, 0)), f"{where}.base_xyz", 3),
                   base_rpy=_numbers(a.get("base_rpy", (0, 0, 0)), f"{where}.base_rpy", 3),
                   posture=_numbers(a["posture"], f"{where}.posture"), locked=locked,
                   redundancy=_names(a.get("redundancy", ()), f"{where}.redundancy"))


def _object(o, where: str) -> ObjectSpec:
    o = _mapping(o, where)
    _known(o, where, ("mass", "size", "offset"))
    mass = o.get("mass", 2.0)
    if isinstance(mass, bool) or not isinstance(mass, (int, float)) or not math.isfinite(mass):
        raise BimanualSpecError(f"{where}.mass: expected a finite number (kg), got {mass!r}")
    size = _numbers(o.get("size", (0.30, 0.10, 0.10)), f"{where}.size", 3)
    if mass <= 0:
        raise BimanualSpecError(f"{where}.mass: must be > 0 kg, got {mass!r}")
    if min(size) <= 0:
        raise BimanualSpecError(f"{where}.size: every side must be > 0 m, got {list(size)!r}")
    return ObjectSpec(float(mass), size, _numbers(o.get("offset", (0.0, 0.0, -0.05)), f"{where}.offset", 3))


__all__ = ["ArmSpec", "BimanualSpec", "BimanualSpecError", "ObjectSpec", "panda_pair"]
