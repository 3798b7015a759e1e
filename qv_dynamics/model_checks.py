"""Checks of a loaded robot model (SPEC §6): physical inertias, finite numbers, M(q) positive definite.

URDF parsers are lenient: urdfdom reports an unparsable ``<mass value="nan"/>`` on stderr and Pinocchio
then builds the link with mass 0, and a negative mass or an indefinite inertia tensor loads without a word
(M(q) then has eigenvalues of −1e130). :func:`check_model` refuses such a model where it enters
(``ConstrainedSystem.from_urdf``) with a :class:`~qv_dynamics.errors.ModelError` naming the body.

A body's spatial inertia is physical when its mass is non-negative and its rotational inertia about the
centre of mass I_c is symmetric positive semi-definite and satisfies the triangle inequality
I₁ + I₂ ≥ I₃ of its principal moments. Every *moving* body (the inertia Pinocchio lumps on each joint,
fixed children included) must be physical. Point masses (I_c = 0) and massless intermediate bodies (the
x-slide of a planar particle) are legitimate models, so a zero mass is not refused per body; what makes
the dynamics solvable is M(q₀) symmetric positive definite at the neutral configuration (Cholesky),
which refuses a moving body that carries no mass at all (a leaf link without ``<inertial>``).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import numpy as np

from .errors import ModelError, check_keys

# the keys of a model YAML (ConstrainedSystem.from_yaml; ``initial``, ``scene``, ``plan``: the simulators' and
# the legged demo's); a key outside these is refused with the closest name
MODEL_KEYS = ("robot", "constraints", "initial", "scene", "plan")
ROBOT_KEYS = ("urdf", "floating_base", "gravity", "locked_joints")
INITIAL_KEYS = ("q", "qdot", "penetration", "posture")
INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
REL_TOL = 1e-12  # relative tolerance of the eigenvalue and triangle tests (rounding of URDF decimals)


def check_urdf_numbers(xml: str) -> None:
    """Every ``<inertial>`` of a URDF has a finite ``<mass value>`` and finite ``<inertia>`` entries.

    Pinocchio reads an unparsable number as 0, so this is checked on the XML text itself."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ModelError(f"URDF is not well-formed XML: {exc}") from None
    for link in root.iter("link"):
        inertial = link.find("inertial")
        if inertial is None:
            continue
        name = link.get("name", "?")
        mass = inertial.find("mass")
        values = {"mass": mass.get("value") if mass is not None else None}
        inertia = inertial.find("inertia")
        for k in INERTIA_KEYS:
            values[k] = inertia.get(k, "0") if inertia is not None else "0"
        for key, text in values.items():
            try:
                x = float(text)
            except (TypeError, ValueError):
                raise ModelError(f"link '{name}': <inertial> {key} = {text!r} is not a number") from None
            if not math.isfinite(x):
                raise ModelError(f"link '{name}': <inertial> {key} = {text!r} is not finite")


def check_body_inertia(label: str, mass: float, I_c: np.ndarray) -> None:
    """Mass ≥ 0 and I_c (about the centre of mass) symmetric positive semi-definite with principal moments
    that satisfy the triangle inequality; ModelError naming ``label`` otherwise."""
    if not math.isfinite(mass) or not np.all(np.isfinite(I_c)):
        raise ModelError(f"{label}: non-finite mass or inertia (mass {mass!r})")
    if mass < 0.0:
        raise ModelError(f"{label}: mass must be >= 0, got {mass:g} kg")
    eig = np.linalg.eigvalsh(0.5 * (I_c + I_c.T))
    scale = max(float(np.max(np.abs(eig))), 1e-300)
    if eig[0] < -REL_TOL * scale:
        raise ModelError(f"{label}: rotational inertia about the centre of mass is not positive semi-definite "
                         f"(principal moments {np.array2string(eig, precision=4)} kg m^2)")
    if eig[0] + eig[1] < eig[2] * (1.0 - 1e-9) - REL_TOL * scale:
        raise ModelError(f"{label}: principal moments {np.array2string(eig, precision=4)} kg m^2 violate "
                         "the triangle inequality I1 + I2 >= I3 (no physical body has them)")


def check_model_inertias(model) -> None:
    """Every moving body of a Pinocchio model (the inertia lumped on each joint) is physical."""
    for j in range(1, model.njoints):
        if model.joints[j].nv == 0:
            continue
        Y = model.inertias[j]
        check_body_inertia(f"body of joint '{model.names[j]}'", float(Y.mass), np.asarray(Y.inertia, float))


def check_mass_matrix(M: np.ndarray, where: str = "the neutral configuration") -> None:
    """M symmetric positive definite (Cholesky succeeds and min eigenvalue > 0); ModelError otherwise."""
    if not np.all(np.isfinite(M)):
        raise ModelError(f"mass matrix at {where} has non-finite entries")
    try:
        np.linalg.cholesky(0.5 * (M + M.T))
    except np.linalg.LinAlgError:
        eig = np.linalg.eigvalsh(0.5 * (M + M.T))
        raise ModelError(f"mass matrix at {where} is not positive definite (smallest eigenvalue "
                         f"{eig[0]:.3g}): check the <inertial> of every moving link") from None


def check_model(model, xml: str | None = None) -> None:
    """All checks of this module: URDF numbers (when the XML is given), body inertias, M(q₀) SPD."""
    import pinocchio as pin

    if xml is not None:
        check_urdf_numbers(xml)
    check_model_inertias(model)
    data = model.createData()
    M = pin.crba(model, data, pin.neutral(model))
    M = np.triu(M) + np.triu(M, 1).T  # CRBA fills the upper triangle
    check_mass_matrix(M)


__all__ = ["check_model", "check_urdf_numbers", "check_model_inertias", "check_body_inertia",
           "check_mass_matrix"]


def check_model_doc(doc) -> dict:
    """The ``robot`` mapping of a model YAML document; ModelError when the document is not a mapping with
    ``robot``, or has an unknown key at the top, in ``robot`` or in ``initial`` (named with the closest
    known key: a misspelled ``constrants:`` would otherwise load a robot without constraints)."""
    if not isinstance(doc, dict) or "robot" not in doc:
        raise ModelError("YAML must have a 'robot' mapping with a 'urdf' entry")
    check_keys("model config", doc, MODEL_KEYS)
    robot = doc["robot"] or {}
    check_keys("model config 'robot'", robot, ROBOT_KEYS)
    if doc.get("initial") is not None:
        check_keys("model config 'initial'", doc["initial"], INITIAL_KEYS)
    return robot


def unit_norm_parts(model) -> list[tuple[str, int, int]]:
    """(joint name, start, end) of the parts of q that must have unit norm: the quaternion of every free-flyer
    or spherical joint (root or mid-tree) and the (cos, sin) pair of an unbounded revolute or planar joint."""
    parts = []
    for j in range(1, model.njoints):
        jm = model.joints[j]
        if jm.nq != jm.nv + 1:
            continue
        size = 4 if ("FreeFlyer" in jm.shortname() or jm.shortname() == "JointModelSpherical") else 2
        parts.append((model.names[j], jm.idx_q + jm.nq - size, jm.idx_q + jm.nq))
    return parts
