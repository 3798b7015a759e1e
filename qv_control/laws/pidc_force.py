"""Hybrid PIDC motion + constraint-force control (paper `aghili-projection-operator` eq. 51–54)."""
from __future__ import annotations

import numpy as np

from qv_dynamics.projection import coupling
from qv_dynamics.state import Reference, State

from ..kernels import layout as L
from .integral import export_pi, import_pi
from .lazy_kernel import LazyKernel
from .projection_base import ProjectionLawBase


class PIDCForceLaw(ProjectionLawBase):
    """Hybrid motion/force control, eq. 54 = PIDC (eq. 45–46) + constraint force control (eq. 51–52).

    ``kf`` (G_F, < 1 because the measured force is one sample old) and ``ki`` (G_I) act on
    e_f = Aᵀ(λ_d − λ_meas); without ``State.lambda_meas`` the force loop is open (F = F_d with an exact
    model). With a measurement the force error obeys (G_F + 1)ė_f + G_I e_f = 0. ``rank_atol``: the absolute floor
    of A's rank decision (:mod:`.projection_base`): near a pose where a row vanishes, that row is dropped rather
    than its −A⁺Ȧq̇ demanded."""

    name = "pidc_force"
    _coupling = LazyKernel("coupled")
    tick_mode = 1

    def __init__(self, system, coordinates, kp=100.0, kd=20.0, kf=0.0, ki=0.0, effort_limits="urdf",
                 cond_max: float = 1e6, compiled: bool = True, rank_atol: float | None = None):
        super().__init__(system, coordinates, kp=kp, kd=kd, kf=kf, ki=ki, effort_limits=effort_limits,
                         cond_max=cond_max, compiled=compiled, rank_atol=rank_atol)

    def _force_target(self, t, terms, ref, lam_meas) -> np.ndarray:
        """f_F = F_d + PI (eq. 51–52, before the projection (I−P)), F_d = Aᵀλ_d; sets ``last``'s entries."""
        A = terms.A
        F_d = ref.lambda_.dot(A)
        corr = self._force_correction(t, F_d, None if lam_meas is None else lam_meas.dot(A))
        self.last.update(F_d=F_d, force_feedback=corr is not None)
        return F_d if corr is None else F_d + corr

    def _pi_size(self, n: int, m: int) -> int:
        return n   # the PI acts on Aᵀλ (generalized forces)

    def _pack(self, packer, plan) -> None:
        pass

    def _export_state(self, ct) -> None:
        super()._export_state(ct)
        export_pi(self.force_pi, ct)

    def _import_state(self, ct) -> bool:
        import_pi(self.force_pi, ct)
        return super()._import_state(ct)

    def _diagnostics(self, ct) -> dict:
        d = super()._diagnostics(ct)
        D, n = ct.block(L.F_DIAG), self.system.nv
        d.update(F_d=D[L.D_AUX, :n].copy(), force_feedback=bool(D[L.D_SCALARS, L.DS_FEEDBACK]),
                 u_F=D[L.D_FORCE, :n].copy())
        return d

    def _compute(self, state: State, reference: Reference | None = None) -> np.ndarray:
        """The numpy path of :meth:`compute`."""
        t, terms, ref, P, Apinv, a_perp, u_p, lam_meas = self._pidc(state, reference)
        M = terms.M
        u_F = self._force_target(t, terms, ref, lam_meas)
        u_F = u_F - P.dot(u_F)                              # keep it impotent: (I−P)u_F
        PMu = P.dot(M.dot(u_p))
        mu_Ma, mu_PMu = self._coupled(M, P, M.dot(a_perp), PMu)   # μ = (I−P)MM_c⁻¹ (eq. 32)
        base = terms.h + mu_Ma
        motion = PMu + mu_PMu
        self.last["u_F"] = u_F
        return self._finish(base, u_F, motion)

    def _coupled(self, M, P, x, y) -> tuple[np.ndarray, np.ndarray]:
        """(μx, μy), μ = (I−P)MM_c⁻¹: by :func:`qv_control.kernels.laws.coupled`, or numpy (the reference)."""
        if self._coupling is None:
            mu = coupling(M, P)
            return mu.dot(x), mu.dot(y)
        out = np.empty((2, M.shape[0]))
        self._coupling(M, P, x, y, out)
        return out[0], out[1]
