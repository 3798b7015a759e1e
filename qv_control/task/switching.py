"""A law for a changing constraint set: rebuilt from a factory whenever the set of active constraints
changes, with the integral actions carried over.

SPEC §2: when the rank of the active constraint rows changes, the quasi-velocity basis (Q, V₁, V₂) is
re-seeded; a law built for one constraint set (its minimal coordinates θ: k = n − r entries) does not
apply to another. :class:`SwitchingLaw` calls ``factory(active)`` — ``active`` the tuple of active
constraint names — on the first compute and after every change, and hands the generalised force its
integral actions applied at the last sample, b + τ_I (``law.integral_torque``), to the new law
(``law.carry(b)``): a bumpless transfer, so a learned model error is not dropped at touch-down. A law
that handles both sets itself (the operational-space and impedance laws read the constraint's active
flag) is wrapped with ``rebuild=False``: the same instance throughout.

Each set's law is built once and kept (:meth:`SwitchingLaw.prepare` builds them before a task): a switch back to
a set takes its law again after ``law.reset()`` — the state a new build has, to machine precision (its test) — so
a touch-down costs the law's first sample, not its construction (~1.7 ms on the 6-DoF arm, ~2/3 of the switch,
at the moment a late command pushes on the surface).

Contact loss: when ``keep_learned`` is False at a switch (the task sets it while it re-approaches after a
lost contact), the new law gets only the bias the lost phase's law started from, not what its integrals
learned in that phase (a law that switches itself is told so through its ``drop_learned``).
Those integrals wind up as the force falls (the force PI's error is the whole
commanded force while the tool leaves the surface, and a controller that answers late integrates that
error over the gap); carried into free motion the wound-up force keeps pressing the tool down through
the re-approach and into the re-contact (a 60 ms stall at a 5 mm table drop: re-contact at 26 N (qv) and
31 N (osc) for 10 N commanded when carried, 10 N and 12.7 N when not).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from qv_dynamics.state import Reference, State


class SwitchingLaw:
    """``compute(state, reference)`` through the law built for the current active set (module doc)."""

    def __init__(self, system, factory: Callable[[tuple], object], rebuild: bool = True):
        self.system, self.factory, self.rebuild = system, factory, bool(rebuild)
        self.law = None
        self.active: tuple | None = None
        self._laws: dict = {}                          # active set -> its law (module doc)
        self.rebuilds = 0
        self.keep_learned = True
        self._carried_in: np.ndarray | None = None   # the bias handed to the current law at its build

    def active_set(self) -> tuple:
        return tuple(c.name for c in self.system.active_constraints)

    def current(self):
        """The law for the present active set (built or rebuilt here)."""
        active = self.active_set()
        if not self.rebuild and self.law is not None and active != self.active and not self.keep_learned \
                and hasattr(self.law, "drop_learned"):
            self.law.drop_learned()                  # a law that switches itself (module doc: contact loss)
        if self.law is None or (self.rebuild and active != self.active):
            carried = getattr(self.law, "integral_torque", None)
            if carried is not None and not self.keep_learned:
                carried = self._carried_in           # module doc: contact loss
            self.law = self._law_for(active)
            self._carried_in = None
            if carried is not None and hasattr(self.law, "carry"):
                self._carried_in = np.asarray(carried, float).copy()
                self.law.carry(self._carried_in)
            self.rebuilds += 1
        self.active = active
        return self.law

    def _law_for(self, active: tuple):
        """The law of ``active``: the kept one after its reset, else a new build (kept)."""
        kept = self._laws.get(active)
        if kept is None or not callable(getattr(kept, "reset", None)):
            self._laws.pop(active, None)
            return self.prepare(active)
        kept.reset()
        return kept

    def prepare(self, active: tuple):
        """Build (once) and keep the law of the active set ``active`` without switching to it; returns it."""
        law = self._laws.get(active)
        if law is None:
            law = self._laws[active] = self.factory(active)
        return law

    def reset(self) -> None:
        self.law, self.active, self._carried_in = None, None, None

    @property
    def theta_names(self) -> list[str]:
        """Names of the current law's coordinates θ (its ``theta_names`` or its coordinates' labels)."""
        law = self.current()
        names = getattr(law, "theta_names", None)
        if names:
            return list(names)
        coords = getattr(law, "coords", None) or getattr(law, "coordinates", None)
        return list(getattr(coords, "labels", None) or getattr(coords, "names", None) or [])

    def compute(self, state: State, reference: Reference) -> np.ndarray:
        law = self.current()
        return law.compute(state, reference)

    @property
    def peak_ratio(self) -> float | None:
        """Peak |τ_i|/limit of the current law's demand before its limiter (None: the law has no limiter)."""
        law = self.law
        sat = getattr(law, "saturation", None)
        return None if sat is None else float(sat.peak_ratio)

    def __getattr__(self, name):  # saturation, last, integral_torque ... of the current law
        if name in ("law", "system", "factory", "_carried_in", "keep_learned", "_laws"):
            raise AttributeError(name)
        return getattr(self.current(), name)


__all__ = ["SwitchingLaw"]
