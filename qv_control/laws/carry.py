"""Bumpless transfer of integral actions across contact switches.

A law with integral action (motion integral, force PI) restarts its integrators when the contact set
changes (the reduced spaces change). What they were applying at the last sample before the switch,
τ_I (a generalised force), is an estimate of a constant disturbance (e.g. a model error: +10 % link masses
lift the Panda's tool by 6 N); dropping it at touch-down hands that disturbance back at once, and a stiff
contact is lost before a force PI can relearn it. :class:`IntegralCarry` keeps the bias b ← b + τ_I at the
switch, to be added to the law's gravity term, so the restarted integrators only estimate what is left.
Only a phase that lasted ``min_time`` hands its τ_I on: after a bounce of a few ms the integrators hold a
transient, not an estimate (a chattering contact would otherwise random-walk b).
"""
from __future__ import annotations

import numpy as np


class IntegralCarry:
    """b and τ_I of one law: :meth:`tick` every sample, :attr:`tau_int` set by the law, :meth:`switch` at a
    contact switch, :attr:`total` = b + τ_I (what to hand to a law rebuilt at the switch)."""

    def __init__(self, nv: int, min_time: float = 0.05):
        self.nv, self.min_time = int(nv), float(min_time)
        self.reset()

    def reset(self) -> None:
        self.bias: np.ndarray | None = None       # b, carried from earlier phases
        self.tau_int: np.ndarray | None = None    # τ_I of the last sample
        self._phase: list[float] | None = None    # [start, last] time of the current phase

    def tick(self, t: float) -> None:
        if self._phase is None:
            self._phase = [t, t]
        self._phase[1] = t

    @property
    def total(self) -> np.ndarray:
        """b + τ_I (τ_I only after a phase of ``min_time`` or longer)."""
        out = np.zeros(self.nv) if self.bias is None else self.bias.copy()
        if self.tau_int is not None and self._phase and self._phase[1] - self._phase[0] >= self.min_time:
            out = out + self.tau_int
        return out

    def switch(self) -> None:
        """At a contact switch: b ← b + τ_I, a new phase starts."""
        if self.tau_int is not None:
            self.bias, self.tau_int = self.total, None
        self._phase = None

    def drop(self) -> None:
        """Forget τ_I of the current phase: the next :meth:`switch` keeps b as it was (a lost contact, whose
        integrals wound up while the force fell)."""
        self.tau_int = None

    def carry(self, bias: np.ndarray) -> None:
        """Start from the bias b carried over from a law of the previous contact phase."""
        self.bias = np.asarray(bias, float).reshape(self.nv).copy()


__all__ = ["IntegralCarry"]
