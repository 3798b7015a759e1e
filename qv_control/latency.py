"""Latency compensation: the state at the time a command will act.

A command computed from the state (q, q̇) measured at t acts on the robot only from t + L: the state's way
to the controller, the law's compute, the command's way back and the hardware's next write. With a
topic-based controller behind ros2_control the command is written in the update cycle after the one that
read the state, so L ≈ one update period. Until then the previous command τ⁻ is held. A law that answers
the measured state therefore answers a state one period old. :class:`StatePredictor` gives the law the
state at t + L instead, predicted from the SPEC's constrained dynamics under the held command:

    M q̈ + h = τ⁻ − Aᵀλ,   A q̈ + Ȧq̇ = 0   →   q̈ = direct_dynamics(q, q̇, τ⁻)   (projection paper eq. 22–25)

    q̂̇ = q̇ + L q̈,        q̂ = q ⊕ (L q̇ + ½ L² q̈)        (second-order Taylor; ⊕ = pin.integrate)

(the acceleration :class:`qv_dynamics.observer.VelocityObserver` predicts with), so the truncation errors
are ‖q̂̇ − q̇(t+L)‖ ≤ ½ L² max‖q⃛‖ and ‖q̂ − q(t+L)‖ ≤ ⅙ L³ max‖q⃛‖; the law samples its reference at t + L.
The prediction keeps A q̂̇ = A q̇ − L Ȧq̇ + O(L²): to first order it stays on the constraint manifold.

The horizon is either given (seconds) or one update period measured from the states' stamps
(:class:`StampPeriod`: the 10th percentile of recent spacings. A node that answers the freshest state only
sees a spacing of two or more periods wherever it skipped states, under load most of them, so a median
would double the horizon; a low percentile needs one spacing in ten to be a single period).

A measured horizon is a latency only where the command does act a period late. A plant that applies each
command over the step from the state it answers (a lock-step simulator; a realtime simulator whose
controller answers within the period) has none, and predicting there is not neutral: the prediction makes
the command depend on the previous one, τ_k ∋ −K_v L M⁻¹ τ_{k−1} (K_v = ∂τ/∂q̇ of the law), a discrete
loop of its own that diverges in alternating sign once ρ(K_v M⁻¹) L > 1. A model-based law scales its
damping with M (the quasi-velocity law at k_p = 60, k_d = 120 /s on the Panda: ρ(K_v M⁻¹) = 180 /s, ρL =
0.18 at L = 1 ms); a joint-space or Cartesian impedance does not (the impedance baseline of the demo:
ρ = 1.83·10³ /s from ∂τ/∂q̇ by finite differences, ρL = 1.8; its torques are NaN within 0.8 s).
With the measured horizon the predictor therefore reads the effort the plant reports
having applied (``applied``, sensor_msgs/JointState ``effort`` of a simulator): equal to the command
answered to the previous state (clipped at the effort limits), that command acted at once. The plant is
taken to apply commands at once — L = 0 — while every state so far did, and from then on for each window
of ``window`` states of which at least ``AT_ONCE_SHARE`` did (decided at the window's end: counted in
``at_once``); else one period. The decision is per window, not per state: a horizon flipping between 0 and
one period from one state to the next makes the law's sample times jump back and forth by a period, which
its rates and force integral read as noise (a realtime MuJoCo run on a loaded machine, 55–65 % of the
answers in time: force RMS 0.36–2.5 % per state against 0.045 % at a constant period).

A plant that applies commands at once without reporting them (or a law too stiff for its delay) is caught
by that loop's signature: the velocity correction L q̈ of the prediction reverses its direction and grows
(‖Δv_k‖ > ``GROWTH`` ‖Δv_{k−1}‖, above ``DV_MIN``) for ``DIVERGING`` samples in a row. The prediction then
stops for good (L = 0, the uncompensated loop: ``stopped``, one warning logged); a genuine delay keeps Δv
of one sign between reversals of the motion, which take many samples.
"""
from __future__ import annotations

import logging
import math

import numpy as np
import pinocchio as pin

from qv_dynamics.errors import DimensionError
from qv_dynamics.kernels.loader import load
from qv_dynamics.linalg import ATOL, RTOL
from qv_dynamics.projection import direct_dynamics

AUTO = -1.0  # horizon: one update period measured from the stamps
# longest horizon [s]: the Taylor step's error grows as L² (q̂̇) and L³ (q̂), and a held torque acting for
# much longer than a control period is not what happens; a measured period is capped by StampPeriod.max_gap
MAX_HORIZON = 0.1
AT_ONCE_SHARE = 0.99   # share of a window's states acting at once for L = 0 over the next window (module doc)
GROWTH, DIVERGING, DV_MIN = 1.2, 4, 1e-3   # the prediction's own loop diverging (module doc): ×, samples, rad/s

log = logging.getLogger("qv_latency")


class StampPeriod:
    """The update period of a periodic state stream from its stamps: the ``quantile`` of the last ``window``
    positive spacings no longer than ``max_gap`` (recomputed when ``window`` new ones have come); 0 until
    ``min_samples`` spacings are known."""

    def __init__(self, window: int = 64, min_samples: int = 8, max_gap: float = 0.1, quantile: float = 0.1):
        self.window, self.min_samples, self.max_gap = int(window), int(min_samples), float(max_gap)
        self.quantile = float(quantile)
        self._buf = np.zeros(self.window)
        self._n = 0                       # spacings collected so far
        self._t: float | None = None
        self.period = 0.0

    def update(self, t: float) -> float:
        """Take the stamp ``t`` [s]; returns the current period estimate [s] (0: not known yet)."""
        prev, self._t = self._t, t
        if prev is None:
            return self.period
        gap = t - prev
        if 0.0 < gap <= self.max_gap:
            self._buf[self._n % self.window] = gap
            self._n += 1
            if self._n == self.min_samples or self._n % self.window == 0:
                self.period = float(np.quantile(self._buf[:min(self._n, self.window)], self.quantile))
        return self.period


class StatePredictor:
    """(t, q, q̇) → (t + L, q̂, q̂̇) of ``system`` under the held torque (module doc).

    ``horizon`` L [s] in [0, :data:`MAX_HORIZON`], or :data:`AUTO` (−1): one update period measured from the
    stamps passed to :meth:`predict` (spacings above MAX_HORIZON ignored). L = 0 returns the state unchanged
    (no model evaluation). When the kernels are cached,
    M, h, A, Ȧq̇ come from a :class:`~qv_dynamics.quasi_sampler.QuasiSampler` (Pinocchio's Coriolis pass and
    the terms kernel: the code the law's own sample runs next, so it is in the caches when the law needs it)
    and q̈ from the simulator's compiled projection stage
    (:meth:`qv_dynamics.kernels.sim_fastpath.CompiledProjection.accel_terms`: the same eq. 25 and rank rule); else
    (or ``compiled=False``) from :func:`direct_dynamics`."""

    def __init__(self, system, horizon: float = AUTO, compiled: bool = True):
        horizon = float(horizon)
        if not math.isfinite(horizon) or (horizon < 0.0 and horizon != AUTO) or horizon > MAX_HORIZON:
            raise DimensionError(f"prediction horizon must be in [0, {MAX_HORIZON:g}] s or {AUTO} (one measured "
                                 f"period), got {horizon}")
        self.system = system
        self.horizon = horizon
        self.period = StampPeriod(max_gap=MAX_HORIZON) if horizon == AUTO else None
        self.limits = np.asarray(system.effort_limits(), float)
        self.at_once = 0                   # states answered with L = 0: the plant applied the last command at once
        self._now_at_once = False          # the last state was answered with L = 0 for that reason
        self.window = 64
        self._plant_at_once = True         # the decision (module doc): every state so far, then per window
        self._first_window = True
        self._win = [0, 0]                 # states, of which acted at once, in the current window
        self.stopped = False               # the prediction's own loop diverged: L = 0 from then on (module doc)
        self._dv_prev: np.ndarray | None = None
        self._diverging = 0
        self._fast = self._sampler = None  # the compiled path: one Coriolis pass, two kernel calls
        if compiled and load("qv_dynamics.kernels.sim") is not None:
            from qv_dynamics.kernels.sim_fastpath import CompiledProjection  # imports numba: only once it has loaded
            from qv_dynamics.quasi_sampler import QuasiSampler

            self._fast = CompiledProjection(system, RTOL, ATOL)
            self._sampler = QuasiSampler(system)

    @property
    def lead_now(self) -> float:
        """The current horizon L [s] (a measured period: 0 until known)."""
        if self.stopped:
            return 0.0
        if self.period is None:
            return self.horizon
        return 0.0 if self._now_at_once else self.period.period

    def lead(self, t: float) -> float:
        """The horizon L for the state stamped ``t`` (a measured period is updated with ``t``)."""
        return self.period.update(t) if self.period is not None else self.horizon

    def acted_at_once(self, applied: np.ndarray | None, tau: np.ndarray | None) -> bool:
        """The plant's reported ``applied`` effort is the last command ``tau`` (or it clipped at the limits)."""
        if applied is None or tau is None or applied.shape != tau.shape:
            return False
        tol = 1e-9 * (1.0 + np.abs(tau))
        return bool(np.all(np.abs(applied - tau) <= tol)
                    or np.all(np.abs(applied - np.clip(tau, -self.limits, self.limits)) <= tol))

    def _at_once_decision(self, now: bool) -> bool:
        """Whether the plant applies the commands at once (module doc), given this state's echo ``now``."""
        w = self._win
        w[0] += 1
        w[1] += int(now)
        if self._first_window and not now:
            self._plant_at_once = False
        if w[0] >= self.window:
            self._plant_at_once = w[1] >= AT_ONCE_SHARE * w[0]
            self._first_window, self._win = False, [0, 0]
        return self._plant_at_once

    def predict(self, t: float, q: np.ndarray, qdot: np.ndarray, tau: np.ndarray | None,
                applied: np.ndarray | None = None) -> tuple[float, np.ndarray, np.ndarray]:
        """(t + L, q̂, q̂̇): the state at t + L under the held ``tau`` (module doc); q and q̇ float vectors
        of the system's sizes (a node's parsed joint state), ``tau`` the command acting now. ``tau=None``
        (no command sent yet: what the actuators hold is unknown, e.g. brakes) returns the state as is: a
        guess (zero torque: a free fall of L) would start the loop with a kick. ``applied``: the effort the
        plant reports for the step that ended at t (module doc: equal to ``tau``, L = 0 with a measured horizon)."""
        L = self.lead(t)
        # (no command sent yet: nothing to tell from; the state is answered as is below)
        self._now_at_once = self.period is not None and tau is not None and L > 0.0 \
            and self._at_once_decision(self.acted_at_once(applied, tau))
        if self._now_at_once:
            self.at_once += 1
            L = 0.0
        if L <= 0.0 or tau is None or self.stopped:
            return t, q, qdot
        sysm = self.system
        if self._fast is not None:
            qdd = self._fast.accel_terms(self._sampler.evaluate(q, qdot), tau)
        else:
            qdd = direct_dynamics(sysm.evaluate(q, qdot, coriolis=False, checked=True), tau=tau)[0]
        if self._diverges(L * qdd):
            return t, q, qdot
        v = qdot + L * qdd
        dq = qdot * L
        dq += (0.5 * L * L) * qdd
        return t + L, pin.integrate(sysm.model, q, dq), v

    def _diverges(self, dv: np.ndarray) -> bool:
        """Track the reversals of Δv = L q̈ (module doc); True (and ``stopped``) once the loop diverges."""
        prev, self._dv_prev = self._dv_prev, dv
        n = float(np.linalg.norm(dv))
        if prev is not None and n > DV_MIN and float(dv.dot(prev)) < 0 and n > GROWTH * float(np.linalg.norm(prev)):
            self._diverging += 1
        else:
            self._diverging = 0
        if self._diverging >= DIVERGING:
            log.warning(f"latency compensation stopped: the predicted velocity correction reversed and grew for "
                        f"{DIVERGING} states in a row (|L q̈| = {n:.3g} rad/s), the commands act sooner than "
                        f"L = {1e3 * self.lead_now:.3g} ms or the law is too stiff for it; answering the measured "
                        f"state from now on")
            self.stopped = True
        return self.stopped


__all__ = ["AUTO", "MAX_HORIZON", "StampPeriod", "StatePredictor"]
