"""Small URDFs generated as strings for the core tests, the Pinocchio reference solver, admissible velocities.

Every model here is written out from its physical parameters, so the closed forms of the papers can be
compared against what Pinocchio computes from the URDF (no value is copied from the code under test).
"""
from __future__ import annotations

import numpy as np
import pinocchio as pin

LWA = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
TINY = 0.0  # rotational inertia of a point mass


def _inertial(mass: float, com=(0.0, 0.0, 0.0), ixx=TINY, iyy=TINY, izz=TINY) -> str:
    return (f'<inertial><origin xyz="{com[0]!r} {com[1]!r} {com[2]!r}" rpy="0 0 0"/><mass value="{mass!r}"/>'
            f'<inertia ixx="{ixx!r}" ixy="0" ixz="0" iyy="{iyy!r}" iyz="0" izz="{izz!r}"/></inertial>')


def _joint(name, kind, parent, child, xyz=(0, 0, 0), axis=(0, 0, 1), lim=10.0):
    limit = (f'<limit lower="{-lim!r}" upper="{lim!r}" effort="100" velocity="10"/>'
             if kind in ("prismatic", "revolute") else "")
    ax = f'<axis xyz="{axis[0]} {axis[1]} {axis[2]}"/>' if kind != "fixed" else ""
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz[0]!r} {xyz[1]!r} {xyz[2]!r}" rpy="0 0 0"/>{ax}{limit}</joint>')


def particle_xy(mass: float = 2.0) -> str:
    """A point mass moved by two prismatic joints x, y (projection paper sec. 5.4, q = [q1 q2])."""
    return ('<robot name="particle">'
            '<link name="world"/><link name="carriage"/>'
            f'<link name="particle">{_inertial(mass)}</link>'
            + _joint("x", "prismatic", "world", "carriage", axis=(1, 0, 0))
            + _joint("y", "prismatic", "carriage", "particle", axis=(0, 1, 0))
            + '</robot>')


def two_link_point_masses(m: float = 1.5, l: float = 0.7) -> str:
    """Planar 2R arm in the x-y plane, equal links of length l, point mass m at each link's distal end
    (the model behind eq. 68 of the projection paper); frame ``C`` at the tip of link 2."""
    return ('<robot name="slider_crank_open">'
            '<link name="world"/>'
            f'<link name="link1">{_inertial(m, com=(l, 0, 0))}</link>'
            f'<link name="link2">{_inertial(m, com=(l, 0, 0))}</link>'
            '<link name="C"/>'
            + _joint("q1", "revolute", "world", "link1", axis=(0, 0, 1))
            + _joint("q2", "revolute", "link1", "link2", xyz=(l, 0, 0), axis=(0, 0, 1))
            + _joint("tipC", "fixed", "link2", "C", xyz=(l, 0, 0))
            + '</robot>')


def cart_pendulum(mc: float = 3.0, mp: float = 0.8, l: float = 0.4, theta_p: float = 0.05) -> str:
    """Cart (prismatic x) with a pendulum of mass m_p, centre of mass at l and inertia θ_p about it,
    point P at 2l (floating-base lecture). φ = 0 hangs down; r_P = (x + 2l sin φ, −2l cos φ) in (x, z)."""
    return ('<robot name="cart_pendulum">'
            '<link name="world"/>'
            f'<link name="cart">{_inertial(mc)}</link>'
            f'<link name="pole">{_inertial(mp, com=(0, 0, -l), ixx=theta_p, iyy=theta_p, izz=theta_p)}</link>'
            '<link name="P"/>'
            + _joint("x", "prismatic", "world", "cart", axis=(1, 0, 0))
            + _joint("phi", "revolute", "cart", "pole", axis=(0, -1, 0))
            + _joint("tipP", "fixed", "pole", "P", xyz=(0, 0, -2 * l))
            + '</robot>')


def prismatic_arm(scale: float = 1.0) -> str:
    """A 4-DoF arm with a prismatic joint, in metres (scale=1) or millimetres (scale=1000):
    lengths × scale, masses unchanged (kg), inertias × scale² (kg·mm²)."""
    s, s2 = scale, scale * scale

    def link(name, mass, com, i):
        return (f'<link name="{name}">'
                + _inertial(mass, com=tuple(c * s for c in com), ixx=i[0] * s2, iyy=i[1] * s2, izz=i[2] * s2)
                + '</link>')

    return ('<robot name="prismatic_arm"><link name="world"/>'
            + link("slide", 4.0, (0.0, 0.0, 0.05), (0.02, 0.03, 0.025))
            + link("upper", 2.0, (0.2, 0.0, 0.0), (0.004, 0.03, 0.03))
            + link("fore", 1.2, (0.15, 0.01, 0.0), (0.002, 0.012, 0.011))
            + link("hand", 0.5, (0.05, 0.0, 0.02), (0.001, 0.0015, 0.001))
            + '<link name="tip"/>'
            + _joint("slide_x", "prismatic", "world", "slide", axis=(1, 0, 0), lim=10.0 * s)
            + _joint("shoulder", "revolute", "slide", "upper", xyz=(0, 0, 0.1 * s), axis=(0, 1, 0))
            + _joint("elbow", "revolute", "upper", "fore", xyz=(0.4 * s, 0, 0), axis=(0, 1, 0))
            + _joint("wrist", "revolute", "fore", "hand", xyz=(0.3 * s, 0, 0), axis=(0, 0, 1))
            + _joint("tip_fixed", "fixed", "hand", "tip", xyz=(0.1 * s, 0.02 * s, 0.05 * s))
            + '</robot>')


def massless_link_arm() -> str:
    """Two revolute joints whose second link has zero mass and zero inertia: M is singular."""
    return ('<robot name="massless"><link name="world"/>'
            f'<link name="a">{_inertial(1.0, com=(0.3, 0, 0), ixx=0.01, iyy=0.01, izz=0.01)}</link>'
            '<link name="b"><inertial><mass value="0"/>'
            '<inertia ixx="0" ixy="0" ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>'
            + _joint("j1", "revolute", "world", "a", axis=(0, 0, 1))
            + _joint("j2", "revolute", "a", "b", xyz=(0.5, 0, 0), axis=(0, 0, 1))
            + '</robot>')


# ---------------------------------------------------------------------------------------------- Pinocchio
def pin_constraints(system, specs):
    """RigidConstraintModels (LOCAL_WORLD_ALIGNED) for ``[(kind, frame), ...]`` with kind '3d' or '6d'."""
    model = system.model
    cms = []
    for kind, frame in specs:
        fr = model.frames[model.getFrameId(frame)]
        ctype = pin.ContactType.CONTACT_3D if kind == "3d" else pin.ContactType.CONTACT_6D
        cms.append(pin.RigidConstraintModel(ctype, model, fr.parentJoint, fr.placement, LWA))
    return cms


def pin_constraint_vectors(system, specs):
    """(models, datas) of ``pin_constraints`` as ``pin.StdVec_RigidConstraintModel`` / ``StdVec_RigidConstraintData``,
    the containers Pinocchio's own examples pass to ``constraintDynamics`` (a Python list is converted to a
    ``std::vector`` on every call, ~2 µs of a 3 µs call on the Panda)."""
    cms = pin.StdVec_RigidConstraintModel()
    cds = pin.StdVec_RigidConstraintData()
    for c in pin_constraints(system, specs):
        cms.append(c)
        cds.append(c.createData())
    return cms, cds


class PinReference:
    """pin.constraintDynamics on its own Data (independent of the system's): returns (q̈, Aᵀλ, λ) in
    our sign convention M q̈ + h = τ − Aᵀλ (Pinocchio's λ has the opposite sign)."""

    def __init__(self, system, specs, mu: float = 0.0, max_iter: int = 1, accuracy: float = 1e-14):
        self.model = system.model
        self.data = self.model.createData()
        self.cms, self.cds = pin_constraint_vectors(system, specs)
        pin.initConstraintDynamics(self.model, self.data, self.cms, self.cds)
        self.prox = pin.ProximalSettings(accuracy, mu, max_iter)

    def __call__(self, q, qdot, tau):
        qdd = pin.constraintDynamics(self.model, self.data, q, qdot, tau, self.cms, self.cds, self.prox).copy()
        lam = -self.data.lambda_c.copy()
        J = pin.getConstraintsJacobian(self.model, self.data, self.cms, self.cds)
        return qdd, J.T @ lam, lam


def null_space_qdot(system, q, rng, scale: float = 1.0) -> np.ndarray:
    """A random admissible q̇ = scale·V₂z, A(q)V₂ = 0 (V₂ from numpy's SVD of A, rank σ > 1e-9·σ₁), z ~ N(0, I)."""
    A = system.constraint_rows(q)[1]
    _, s, Vt = np.linalg.svd(A)
    r = int(np.count_nonzero(s > 1e-9 * s[0]))
    return scale * (Vt[r:].T @ rng.normal(size=system.nv - r))


def rel_err(a, b) -> float:
    """‖a − b‖ / ‖b‖ (relative error against the reference b)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
