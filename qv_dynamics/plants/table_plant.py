"""The interface of a simulated robot whose tool touches a table (one plant per simulator: MuJoCo, Drake).

Sign conventions shared by every plant: :meth:`TablePlant.contact_force_world` is the force the table
exerts **on** the tool, in world axes (pressing down on the table gives +z). With the SPEC's
``M q̈ + h = τ − Aᵀλ`` and the constraint row A = ∂z_tool/∂q, the multiplier is ``λ = −F_z``.
"""
from __future__ import annotations

import abc

import numpy as np


class TablePlant(abc.ABC):
    """A fixed-base robot with a tool above a table: ``reset``, ``step(tau, dt)``, ``q``, ``qdot``,
    ``tool_position``, ``tool_rotation()`` and the contact force; the normal force and the multiplier of the
    contact row follow from the contact force the same way for every simulator."""

    @abc.abstractmethod
    def reset(self, q, qdot=None) -> None:
        """Set the joint positions and velocities (zero when None) and the time to 0."""

    @abc.abstractmethod
    def step(self, tau, dt: float | None = None) -> None:
        """Apply joint torques ``tau`` (clipped to the effort limits) for ``dt`` seconds."""

    @property
    @abc.abstractmethod
    def q(self) -> np.ndarray:
        """Joint positions."""

    @property
    @abc.abstractmethod
    def qdot(self) -> np.ndarray:
        """Joint velocities."""

    @property
    @abc.abstractmethod
    def tool_position(self) -> np.ndarray:
        """Tool point, world axes."""

    @abc.abstractmethod
    def tool_rotation(self) -> np.ndarray:
        """Tool frame orientation (3×3, world from tool)."""

    @abc.abstractmethod
    def contact_force_world(self) -> np.ndarray:
        """Total force the table exerts on the tool, world axes (zero without contact)."""

    def normal_force(self) -> float:
        """Normal force the table exerts on the tool, along +z (≥ 0; 0 without contact): F_z."""
        return float(self.contact_force_world()[2])

    def lambda_z(self) -> float:
        """Multiplier of the constraint row A = ∂z_tool/∂q in the SPEC convention M q̈ + h = τ − Aᵀλ: λ = −F_z."""
        return -self.normal_force()
