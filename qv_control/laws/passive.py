"""Control with passive joints (paper `aghili-projection-operator` eq. 56–62) and the controllability test
R((I−B)P) ⊆ R((I−B)(I−P)) (eq. 58, i.e. N ∩ B⊥ = {0}, eq. 64).

Its force channel acts on the internal forces λ ∈ R(A) ∩ N(A_pᵀ) only (:mod:`qv_control.laws.internal_force`):
f = (I + H)f∥ + AᵀE(z − Eᵀλ_m), λ_m the multiplier the motion command produces with the model
(M q̈ + h = f − Aᵀλ at q̈ = u_p), z = Eᵀλ_d (+ PI on the measured internal force) or a chooser's z."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from qv_dynamics.linalg import norm2
from qv_dynamics.projection import pinv_rank
from qv_dynamics.state import Reference, State

from ..kernels import layout as L
from .base import GainError
from .internal_force import InternalForceChannel, export_internal, import_internal
from .projection_base import ProjectionLawBase, UncontrollableError


def passive_projector(A: np.ndarray, actuated_mask: np.ndarray, tol: float = 1e-8, P: np.ndarray | None = None):
    """(I + H, residual) of eq. 61–62 and the eq. 58 range-inclusion residual
    ‖(I − QbQb⁺)(I−B)P‖ / max(‖(I−B)P‖, 1) with Qb = (I−B)(I−P). ``P``: I − A⁺A if already known."""
    n = A.shape[1]
    if P is None:
        _, _, V2 = pinv_rank(A)
        P = V2.dot(V2.T)
    ib = (~actuated_mask).astype(float)   # the diagonal of I − B: products with it scale rows/columns
    eye = np.eye(n)
    if not ib.any():  # every joint actuated: I − B = 0, so Qb = 0, H = 0 and the residual is exactly 0
        return eye, P, 0.0
    # Qb and (I−B)P are zero outside the passive rows p: with Y = ((I−P))_p, Qb = SᵀY and Qb⁺ = Y⁺S (S selects
    # the rows p), so the SVDs and norms are those of the n_p × n blocks and H = −(I−P)Y⁺ fills the columns p
    p = ~np.asarray(actuated_mask, bool)
    Pp = eye - P
    Y = Pp[p]
    Y_pinv, _, _ = pinv_rank(Y)
    Z = P[p]
    resid = norm2(Z - Y.dot(Y_pinv.dot(Z))) / max(norm2(Z), 1.0)
    eye[:, p] -= Pp.dot(Y_pinv)           # I + H, H = −(I−P)Qb⁺(I−B)
    return eye, P, resid


def _uncontrollable_message(system, A: np.ndarray, mask: np.ndarray, resid: float) -> str:
    n = A.shape[1]
    B = np.eye(n)[mask]
    K = np.vstack([A, B]) if B.size else A
    _, _, V2 = pinv_rank(K)
    passive = [nm for nm, a in zip(_velocity_names(system), mask) if not a]
    msg = (f"uncontrollable with actuated joints {[nm for nm, a in zip(_velocity_names(system), mask) if a]}: "
           f"R((I-B)P) is not inside R((I-B)(I-P)) (eq. 58/64, residual {resid:.2e})")
    if V2.shape[1]:
        d = V2[:, 0]
        msg += ("; the passive joints " + str(passive) + " can move with every actuator locked, e.g. along "
                + ", ".join(f"{nm}: {x:+.3f}" for nm, x in zip(_velocity_names(system), d) if abs(x) > 1e-6))
    return msg


def _velocity_names(system) -> list[str]:
    return system.velocity_names


def _actuated_mask(system, actuated) -> np.ndarray:
    """B of eq. 55 as a mask; a multi-DoF joint (the free-flyer ``root_joint``) marks all its velocities."""
    mask = np.zeros(system.nv, bool)
    if actuated is None or len(actuated) == 0:
        raise GainError("actuated: list the actuated joint names (the others are passive)")
    for name in actuated:
        mask[system.joint_v_indices(name)] = True
    return mask


def check_controllability(system, actuated: Sequence[str], q, tol: float = 1e-8) -> float:
    """Eq. 58/64 at configuration q for the given actuated joints; returns the residual or raises
    :class:`UncontrollableError` naming a passive motion that no actuator can resist."""
    mask = _actuated_mask(system, actuated)
    _, A = system.constraint_rows(q)
    _, _, resid = passive_projector(A, mask, tol)
    if resid > tol:
        raise UncontrollableError(_uncontrollable_message(system, A, mask, resid))
    return resid


class PassiveJointLaw(ProjectionLawBase):
    """PIDC for mechanisms with passive joints, eq. 56–62: f = (I + H)(h∥ + PMu_p), zero on passive joints,
    plus the internal-force channel AᵀE(z − Eᵀλ_m) (module doc).

    ``actuated``: names of the actuated joints (B of eq. 55). Raises :class:`UncontrollableError` at
    construction (if ``q0`` is given) and on any call where eq. 58/64 fails. ``Reference.lambda_`` (λ_d)
    sets the internal force (None: zero); a λ_d with a non-internal part larger than ``internal_tol``
    (relative to ‖λ_d‖, and absolute in N) raises NonInternalForceError, or with ``non_internal="project"``
    its projection on the internal forces is commanded and the sample counted (``law.counters()``, e.g. in
    the controller node's /diagnostics). ``kf`` (< 1), ``ki``: PI on the
    measured internal force EEᵀ(λ_d − λ_meas) (``State.lambda_meas``); ``internal_chooser(λ₀, E) -> z``
    replaces the target by an external choice (e.g. a friction-cone QP). Changes of the internal-force
    space are logged in ``law.internal.events``."""

    name = "passive"
    tick_mode = 2

    def __init__(self, system, coordinates, actuated: Sequence[str] = (), kp=100.0, kd=20.0, kf=0.0, ki=0.0,
                 q0=None, controllability_tol: float = 1e-8, effort_limits="urdf", cond_max: float = 1e6,
                 internal_tol: float = 1e-6, internal_chooser=None, non_internal: str = "raise",
                 compiled: bool = True):
        super().__init__(system, coordinates, kp=kp, kd=kd, kf=kf, ki=ki, effort_limits=effort_limits,
                         cond_max=cond_max, compiled=compiled)
        self.internal = InternalForceChannel(self.force_pi.kf, self.force_pi.ki, chooser=internal_chooser,
                                             check_rtol=internal_tol, check_atol=internal_tol,
                                             non_internal=non_internal)
        self.actuated = list(actuated)
        self.mask = _actuated_mask(system, self.actuated)
        self._passive = ~self.mask
        self.tol = float(controllability_tol)
        if self.limits is not None:
            self.limits = np.where(self.mask, self.limits, np.inf)
        if q0 is not None:
            check_controllability(system, self.actuated, q0, self.tol)

    def channels(self, state: State, reference: Reference | None = None):
        """(t, terms, base, motion, u_p): the two torque channels (I + H)Ph and (I + H)PMu_p of eq. 62, zero
        on the passive joints, before limits; with an exact model they give q̈ = u_p."""
        return self._channels(state, reference)[:5]

    def _channels(self, state: State, reference: Reference | None):
        """:meth:`channels` plus the checked reference, A⁺ and the measured λ (for the force channel)."""
        t, terms, ref, P, Apinv, a_perp, u_p, lam_meas = self._pidc(state, reference)
        base = P.dot(terms.h)
        motion = P.dot(terms.M.dot(u_p))
        resid = 0.0
        if self._passive.any():  # every joint actuated: I + H = I and the residual is 0 (passive_projector)
            IH, _, resid = passive_projector(terms.A, self.mask, self.tol, P=P)
            if resid > self.tol:
                raise UncontrollableError(_uncontrollable_message(self.system, terms.A, self.mask, resid))
            base = IH.dot(base)
            motion = IH.dot(motion)
            base[self._passive] = 0.0
            motion[self._passive] = 0.0
        self.last.update(controllability_residual=resid)
        return t, terms, base, motion, u_p, ref, Apinv, lam_meas

    def motion_multiplier(self, state: State, reference: Reference | None = None):
        """:meth:`channels` plus λ_m = A⁺ᵀ(f − h − Mu_p), the multiplier the motion command produces with the
        model (Aᵀλ_m = f − h − Mu_p; minimum norm, from the A⁺ of the same tick), the checked reference and
        the measured λ: (t, terms, base, motion, u_p, lam_m, ref, lam_meas)."""
        t, terms, base, motion, u_p, ref, Apinv, lam_meas = self._channels(state, reference)
        lam_m = Apinv.T @ (base + motion - terms.h - terms.M @ u_p)
        return t, terms, base, motion, u_p, lam_m, ref, lam_meas

    def _compiled_case(self) -> bool:
        return self.internal.chooser is None   # (a Python chooser of z: the numpy path)

    def _compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """The numpy path of :meth:`compute`."""
        t, terms, base, motion, u_p, lam_m, ref, lam_meas = self.motion_multiplier(state, reference)
        basis = self.internal.basis(terms.A, self.mask, t, terms.row_labels)
        cmd = self.internal.command(t, basis, lam_m, ref.lambda_, lam_meas, self.saturation.force_frozen,
                                    terms.row_labels)
        self.last.update(lambda_motion=lam_m, internal_z=cmd.z, internal_z_d=cmd.z_d, internal_dim=basis.size,
                         internal_force=basis.E @ cmd.z)
        return self._finish(base, cmd.tau, motion)

    # ------------------------------------------------------------------ the compiled tick's state
    def _pack(self, packer, plan) -> None:
        ch = self.internal
        par = packer._floats[L.F_PAR][0]
        par[[L.P_IRTOL, L.P_IATOL, L.P_ICHECK_RTOL, L.P_ICHECK_ATOL, L.P_NONINT, L.P_IKF, L.P_IKI, L.P_IMAX,
             L.P_IDT]] = ch.rtol, ch.atol, ch.check_rtol, ch.check_atol, ch.non_internal == "project", ch.kf, ch.ki, \
            ch.i_max, ch.max_dt
        packer.ints(L.I_PAS, np.flatnonzero(self._passive))

    def _export_state(self, ct) -> None:
        super()._export_state(ct)
        export_internal(self.internal, ct)

    def _import_state(self, ct) -> bool:
        import_internal(self.internal, ct)
        return super()._import_state(ct)

    def _diagnostics(self, ct) -> dict:
        d = super()._diagnostics(ct)
        D, m = ct.block(L.F_DIAG), ct.m
        s = int(D[L.D_SCALARS, L.DS_DIM])
        d.update(controllability_residual=0.0, lambda_motion=D[L.D_LAMBDA_M, :m].copy(),
                 internal_z=D[L.D_Z, :s].copy(), internal_z_d=D[L.D_Z_D, :s].copy(), internal_dim=s,
                 internal_force=D[L.D_INTERNAL, :m].copy())
        return d

    def counters(self) -> dict:
        """Counted departures of the force channel: λ_d samples projected on the internal forces and the
        largest non-internal part seen (N)."""
        if self._ct is not None:
            self._ct.sync()
        ch = self.internal
        return {"lambda_d_projected": ch.projected, "lambda_d_non_internal_max": ch.non_internal_max}

    def reset(self) -> None:
        super().reset()
        self.internal.reset()
