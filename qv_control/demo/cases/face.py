"""The planar 3-link arm (urdf/planar_3link.urdf) with a flat tool face at the end of link 3: three contact
frames across the face (``face_a``, ``face_m``, ``face_b``, ``HALF`` apart along the face), pressed down on a
table at ``TABLE`` with link 3 vertical. Shared by the face rows (redundant_contacts, rank_change)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

URDF = Path(__file__).resolve().parents[3] / "urdf" / "planar_3link.urdf"
FACE = ("face_a", "face_m", "face_b")
HALF = 0.04          # m, face half-width (the outer frames' offset from face_m)
TABLE = -0.4         # m, table height (the face of a vertical link 3 whose joint is at z = 0.1)


def face_urdf() -> str:
    """The arm's URDF with the three face frames as fixed links on link 3 (offsets along link 3's z)."""
    xml = URDF.read_text()
    extra = "".join(
        f'  <joint name="{nm}_joint" type="fixed"><parent link="link3"/><child link="{nm}"/>'
        f'<origin xyz="0.5 0 {dz}" rpy="0 0 0"/></joint>\n  <link name="{nm}"/>\n'
        for nm, dz in zip(FACE, (-HALF, 0.0, HALF)))
    return xml.replace("  <ros2_control", extra + "  <ros2_control", 1)


def face_system(rows=FACE):
    """ConstrainedSystem of the arm with one z point contact per face frame in ``rows`` (at the table)."""
    from qv_dynamics.model import ConstrainedSystem

    cons = [{"type": "point_contact", "name": nm, "frame": nm, "axes": ["z"], "position": [0.0, 0.0, TABLE]}
            for nm in rows]
    return ConstrainedSystem.from_urdf(face_urdf(), cons)


def face_pose(system, x: float, tilt: float = 0.0, z: float = TABLE) -> np.ndarray:
    """q putting face_m at (x, z) with link 3 pointing down, turned by ``tilt`` (rad, about −y) from vertical."""
    import pinocchio as pin

    m, d = system.model, system.data
    fid = m.getFrameId("face_m")

    def res(q):
        pin.framesForwardKinematics(m, d, q)
        return [d.oMf[fid].translation[0] - x, d.oMf[fid].translation[2] - z, q.sum() + math.pi / 2 - tilt]

    return least_squares(res, np.array([0.6, -1.2, -0.9]), xtol=1e-14, ftol=1e-14, gtol=1e-14).x
