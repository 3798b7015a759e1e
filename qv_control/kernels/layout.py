"""Sizes of the ticks' ``out`` arrays (:mod:`qv_control.kernels.tick`, :mod:`qv_control.kernels.quasi_tick`),
in numpy-free Python: the laws allocate the buffers at construction whether or not the compiled tick serves."""
from __future__ import annotations

TICK_ROWS = 12  # vector rows before the matrices in the projection tick's ``out`` (its module doc)
QUASI_TICK_ROWS = 14  # the same for the quasi-velocity tick


def tick_rows(n: int, m: int, k: int, plan_rows: int) -> int:
    """Rows of the projection tick's ``out`` for n velocities, m constraint rows, k coordinates and the
    coordinates' plan."""
    return TICK_ROWS + n + m + k + 2 * k + (plan_rows - k) + 3


def quasi_tick_rows(n: int, k: int, plan_rows: int) -> int:
    """Rows of the quasi-velocity tick's ``out`` for n velocities, k coordinates and the coordinates' plan (with
    the Ȧ rows)."""
    return QUASI_TICK_ROWS + 7 + k + 2 * k + (plan_rows - k) + 3
