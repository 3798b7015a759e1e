"""Setpoint regulation in quasi-velocities (paper `aghili-quasi-velocities` eq. 44 with the SPEC's Dᵀ) with the
force channel of :mod:`qv_control.laws.quasi_base` (eq. 42/47)."""
from __future__ import annotations

import numpy as np

from qv_dynamics.state import Reference, State

from ..kernels import layout as L
from .base import GainError
from .packed import Setting
from .quasi_base import QuasiLawBase


class QuasiSetpointLaw(QuasiLawBase):
    """Setpoint regulation in quasi-velocities (eq. 44 with the SPEC's Dᵀ) + force law (eq. 42/47).

    ``form="lyapunov"`` (default): u_v = −k_d v_r − DᵀK_p(θ − θ_d); with V = ½‖v_r‖² + ½(θ−θ_d)ᵀK_p(θ−θ_d)
    (eq. 46), V̇ = −k_d‖v_r‖² ≤ 0 because v_rᵀΓ_v v_r = 0 and θ̇ = Dv_r.
    ``form="paper"``: u_v = −k_d v_r − K_p(θ − θ_d) as printed in eq. 44; the Lyapunov argument then
    fails unless D = I (and the law depends on the arbitrary basis of V₂); kept for comparison.
    θ̇_d and θ̈_d of the reference are ignored (regulation). ``last["V"]`` is the Lyapunov function.
    """

    name = "quasi_setpoint"
    form = Setting()

    def __init__(self, system, coordinates, kp=10.0, kd=10.0, form: str = "lyapunov", **kw):
        super().__init__(system, coordinates, kp=kp, kd=kd, **kw)
        if form not in ("lyapunov", "paper"):
            raise GainError(f"form must be 'lyapunov' (u_v = -kd v_r - D^T Kp e) or 'paper' (-kd v_r - Kp e), "
                            f"got {form!r}")
        self.form = form

    def _tick_mode(self) -> int:
        return 1 if self.form == "lyapunov" else 2

    def _diagnostics(self, ct) -> dict:
        d = super()._diagnostics(ct)
        d["V"] = float(ct.block(L.F_DIAG)[L.D_SCALARS, L.DS_V])
        return d

    def _compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """The numpy path of :meth:`compute`."""
        t, q, qdot, lam_meas = self._read_state(state)
        terms, qs = self._decompose(q, qdot)
        kin = self.coords.evaluate(q, qdot, data=self.system.data)  # reuse evaluate's kinematics
        ref = self._read_reference(reference, t, kin.theta, terms.m)
        D, cond = self._reduced_jacobian(qs, kin.J)
        e = kin.theta - ref.theta
        Kpe = self.kp * e
        u_v = -self.kd * qs.v_r - (Kpe.dot(D) if self.form == "lyapunov" else Kpe)
        u_xi, xi_d = self._force_channel(t, qs, ref.lambda_, lam_meas)
        V = 0.5 * float(qs.v_r.dot(qs.v_r)) + 0.5 * float(e.dot(Kpe))
        self.last.update(t=t, theta=kin.theta, theta_d=ref.theta, e_theta=e, cond_D=cond, u_v=u_v, u_xi=u_xi,
                         xi_d=xi_d, v_r=qs.v_r, V=V, lambda_d=ref.lambda_)
        return self._torque(terms, qs, u_v, u_xi)
