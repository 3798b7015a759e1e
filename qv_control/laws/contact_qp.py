"""Foot forces of a legged robot chosen by a small QP over the internal-force coordinates.

With a passive base the motion fixes the multiplier only up to the internal forces (see
:mod:`qv_control.laws.internal_force`): λ = λ₀ + E z. Each stance foot i has three rows of λ (world axes,
SPEC sign M q̈ + h = τ − Aᵀλ), so the force the ground exerts **on** foot i is f_i = −λ_i. The QP

    min_z   Σ_i f_iᵀ W_i f_i + ε‖z‖²,      W_i = w_t (I − n_i n_iᵀ) + w_n n_i n_iᵀ
    s.t.    f_min,i ≤ n_iᵀ f_i ≤ f_max,i                          (unilateral, with a ramped upper bound)
            |t_{i,k}ᵀ f_i| ≤ (sμ/√2) n_iᵀ f_i,  k = 1, 2            (friction pyramid)

keeps every foot force unilateral (normal force at least ``f_min``) and inside its friction cone, with
the least tangential force (w_t) and the most even normal load (w_n: least squares of the normal forces,
whose sum the motion fixes). The pyramid is the **inscribed** linearisation of the Coulomb cone
‖f_t‖ ≤ μ f_n (four faces at ±μ/√2 along two tangents) shrunk by the safety factor s = ``cone_safety``
(0.9): its corners touch the cone of sμ, so a feasible force keeps a margin of at least (1 − s)μf_n.
(With s = 1 the optimum often sits in a corner, on the true cone: measured in MuJoCo, the foot then
slides.) The upper bound ``f_max`` ramps a foot's load out before lift-off and in after touchdown.

Solver: ``quadprog`` (Goldfarb–Idnani dual active set, dense; exact for these 3–6 variables). When the
constraints are inconsistent (e.g. the centre of mass outside the support polygon), the same QP is solved
with one slack s ≥ 0 added to every inequality and a large penalty on s²: the result is the least
violation, reported as ``feasible=False`` with the slack in newtons (never a silent success).

Cone margin of a foot: μ f_n − ‖f_t‖ (N): positive inside the cone, negative outside or when pulling.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from qv_dynamics.errors import DimensionError, QVError, as_vector

try:
    import quadprog
except ImportError as exc:  # pragma: no cover - reported when the QP is used
    quadprog = None
    _IMPORT_ERROR = exc


@dataclass
class ContactForces:
    """QP result: z, λ = λ₀ + E z, foot forces f_i = −λ_i (k × 3, on the robot), cone margins (k, N),
    normal forces (k), whether the hard constraints held, and the slack (N) used otherwise."""

    z: np.ndarray
    lam: np.ndarray
    forces: np.ndarray
    margins: np.ndarray
    normal: np.ndarray
    feasible: bool
    slack: float = 0.0


def tangent_basis(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit tangents t₁, t₂ with (t₁, t₂, n) right-handed and orthonormal."""
    a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    t1 = a - (a @ n) * n
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


def cone_margins(forces: np.ndarray, normals: np.ndarray, mu: float) -> np.ndarray:
    """μ f_n − ‖f_t‖ per foot (N) for forces on the robot (k × 3) and unit normals (k × 3)."""
    fn = np.einsum("ij,ij->i", forces, normals)
    ft = forces - fn[:, None] * normals
    return mu * fn - np.linalg.norm(ft, axis=1)


class ContactForceQP:
    """The QP of the module doc. ``mu``: friction coefficient; ``f_min`` (N): least normal force of a
    loaded foot; ``cone_safety``: s of the module doc; ``w_t``, ``w_n``: weights of the tangential and
    normal force squares; ``eps``: weight of ‖z‖² (keeps the Hessian positive definite); ``slack_weight``:
    penalty of the infeasible fallback."""

    def __init__(self, mu: float = 0.8, f_min: float = 5.0, w_t: float = 1.0, w_n: float = 0.05,
                 eps: float = 1e-6, slack_weight: float = 1e6, cone_safety: float = 0.9):
        if quadprog is None:  # pragma: no cover
            raise QVError(f"quadprog is not installed ({_IMPORT_ERROR}); `pip install quadprog`")
        for name, val in (("mu", mu), ("w_t", w_t), ("w_n", w_n), ("eps", eps), ("slack_weight", slack_weight)):
            if not (np.isfinite(val) and val > 0):
                raise QVError(f"ContactForceQP: {name} must be a finite number > 0, got {val!r}")
        if not (0 < cone_safety <= 1):
            raise QVError(f"ContactForceQP: cone_safety must be in (0, 1], got {cone_safety!r}")
        if not (np.isfinite(f_min) and f_min >= 0):
            raise QVError(f"ContactForceQP: f_min must be >= 0 N, got {f_min!r}")
        self.mu, self.f_min, self.w_t, self.w_n = float(mu), float(f_min), float(w_t), float(w_n)
        self.eps, self.slack_weight = float(eps), float(slack_weight)
        self.cone_safety = float(cone_safety)
        self.mu_in = self.cone_safety * self.mu / np.sqrt(2.0)       # inscribed pyramid of the cone sμ
        self.solves = 0
        self.infeasible = 0
        self._tangent_cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._face_cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}
        self._up: dict[int, np.ndarray] = {}

    def _rows(self, lam0: np.ndarray, E: np.ndarray, normals: np.ndarray, f_lo: np.ndarray, f_hi: np.ndarray):
        """(C, b) with C z ≥ b for every foot (f_i = −λ₀_i − E_i z), and the cost (G, a), vectorised over feet:
        per foot the face normals g (f_i satisfies gᵀf_i ≥ lo) are n, μ_in n ∓ t₁, μ_in n ∓ t₂ and −n (if
        capped); the faces and the weights W of a set of normals are kept between calls."""
        k, s = normals.shape[0], E.shape[1]
        Ek = E.reshape(k, 3, s)
        l0 = lam0.reshape(k, 3)
        faces, W = self._faces(normals)
        capped = np.isfinite(f_hi)
        lo = np.zeros((k, 6))
        lo[:, 0] = f_lo
        lo[capped, 5] = -f_hi[capped]
        keep = np.ones((k, 6), bool)
        keep[:, 5] = capped
        C = -np.einsum("kfi,kis->kfs", faces, Ek)[keep]                               # gᵀf = −gᵀλ₀ − gᵀE z ≥ lo
        b = (lo + np.einsum("kfi,ki->kf", faces, l0))[keep]
        WE = np.einsum("kij,kjs->kis", W, Ek)
        G = self.eps * np.eye(s) + np.einsum("kit,kis->ts", Ek, WE)
        a = -np.einsum("kis,ki->s", WE, l0)                                          # ½zᵀGz − aᵀz = ½fᵀWf + c
        return C, b, G, a

    def _faces(self, normals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(k × 6 × 3 face normals n, μ_in n − t₁, μ_in n + t₁, μ_in n − t₂, μ_in n + t₂, −n; k × 3 × 3 weights
        W = w_t(I − nnᵀ) + w_n nnᵀ) of the feet's normals, cached by their bytes."""
        key = normals.tobytes()
        got = self._face_cache.get(key)
        if got is None:
            k = normals.shape[0]
            faces = np.empty((k, 6, 3))
            for i, n in enumerate(normals):
                t1, t2 = self._tangents(n)
                faces[i] = (n, self.mu_in * n - t1, self.mu_in * n + t1, self.mu_in * n - t2, self.mu_in * n + t2, -n)
            nn = np.einsum("ki,kj->kij", normals, normals)
            W = self.w_t * (np.eye(3) - nn) + self.w_n * nn
            if len(self._face_cache) > 64:
                self._face_cache.clear()
            got = self._face_cache[key] = (faces, W)
        return got

    def _tangents(self, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = n.tobytes()
        t = self._tangent_cache.get(key)
        if t is None:
            if len(self._tangent_cache) > 64:
                self._tangent_cache.clear()
            t = self._tangent_cache[key] = tangent_basis(n)
        return t

    def solve(self, lambda_0, E, normals=None, f_max=None) -> ContactForces:
        """z for λ = λ₀ + E z (module doc). ``normals``: k × 3 unit normals (default +z); ``f_max``: k upper
        bounds of the normal forces (inf = none; a bound below ``f_min`` drops that foot's minimum to 0)."""
        E = np.asarray(E, float)
        m = E.shape[0]
        if E.ndim != 2 or m % 3:
            raise DimensionError(f"E: expected 3k x s rows (three per foot), got shape {E.shape}")
        lam0 = as_vector("lambda_0", lambda_0, m)
        k = m // 3
        if normals is None:                       # +z for every foot (a flat floor), one array per foot count
            normals = self._up.get(k)
            if normals is None:
                normals = self._up[k] = np.tile([0.0, 0.0, 1.0], (k, 1))
        else:
            normals = np.asarray(normals, float).reshape(k, 3)
            normals = normals / np.linalg.norm(normals, axis=1, keepdims=True)
        if f_max is None:
            f_hi = np.full(k, np.inf)
        else:
            f_hi = np.asarray(f_max, float)
            f_hi = f_hi.copy() if f_hi.shape == (k,) else np.array(np.broadcast_to(f_hi, (k,)))
        if not (f_hi >= 0).all():                 # NaN or negative
            raise DimensionError(f"f_max: expected {k} bounds >= 0 N (inf = none), got {f_hi}")
        f_lo = np.where(f_hi < self.f_min, 0.0, self.f_min)      # a foot being unloaded needs no minimum
        self.solves += 1
        s = E.shape[1]
        if s == 0:
            z, slack = np.zeros(0), 0.0
        else:
            C, b, G, a = self._rows(lam0, E, normals, f_lo, f_hi)
            try:
                z = quadprog.solve_qp(G, a, C.T, b, 0)[0]
                slack = 0.0
            except ValueError:                                     # inconsistent constraints: least violation
                G2 = np.zeros((s + 1, s + 1))
                G2[:s, :s], G2[s, s] = G, self.slack_weight
                C2 = np.hstack([C, np.ones((C.shape[0], 1))])
                C2 = np.vstack([C2, np.eye(1, s + 1, s)])          # s ≥ 0
                x = quadprog.solve_qp(G2, np.append(a, 0.0), C2.T, np.append(b, 0.0), 0)[0]
                z, slack = x[:s], float(x[s])
        lam = lam0 + E @ z
        forces = -lam.reshape(k, 3)
        normal = np.einsum("ij,ij->i", forces, normals)
        feasible = slack <= 1e-6 * max(1.0, float(np.abs(lam).max()))   # N: round-off of a degenerate set
        if not feasible:
            self.infeasible += 1
        return ContactForces(z, lam, forces, cone_margins(forces, normals, self.mu), normal, feasible, slack)


__all__ = ["ContactForceQP", "ContactForces", "cone_margins", "tangent_basis"]
