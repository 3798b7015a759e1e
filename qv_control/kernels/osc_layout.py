"""Where the operational-space laws keep their tick state (:mod:`qv_control.kernels.osc`), in numpy-free Python: the
laws build these arrays at construction whether or not the compiled tick serves, and the kernel reads the same
names (numba freezes them into its code).

One float array ``S`` (rows × width, width ≥ n) holds a law's parameters and its state between ticks; rows hold
vectors (their first entries) and two rows hold scalars by column. The force PI, the limiter's last status and
the carried integral torque have the same columns in both laws.
"""
from __future__ import annotations

# ----------------------------------------------------------------------------------------------- rows of S
ARMATURE, LIMITS, Q_NULL, BIAS, TAU_INT = 0, 1, 2, 3, 4   # n-vectors (LIMITS: inf where a joint has none)
PI_Z, PI_D, PI_DPREV = 5, 6, 7                           # the force PI: ∫e, the target of this sample, the previous
GRAV = 8                                                  # g⃗ (3), then (osc) R_d row-major at 3..11
PAR, VAR = 9, 10                                          # scalar parameters, scalar state (columns below)
AXES = 11                                                 # osc: task rows (6), then the force rows (4)
Z, A_INT = 12, 13                                         # osc: the motion integral z (6) and Ω K_I z
KP, MASK, LO, HI = 12, 13, 14, 15                         # osc_constrained: K_P (k), 1 on the actuated joints,
#                                                           θ's range (k; the joint rows' bounds ± 1e-12, else ∓inf)
ROWS = 14                                                 # osc: rows of S
LAST = 16                                                 # osc_constrained: the carried basis (n rows)
WIDTH = 32                                                # at least these columns (the scalar rows)

# ---------------------------------------------------------------------------------------- columns of row VAR
T_PREV_OK, T_PREV = 0, 1                                  # osc: the last sample's time
PI_Z_OK, PI_T_OK, PI_T, PI_PERIOD = 2, 3, 4, 5            # the force PI (qv_control.laws.base.ForcePI)
PI_H_OK, PI_H_T, PI_H_PREV, PI_SIZE = 6, 7, 8, 9          # its previous-target history (laws.integral)
BIAS_OK, TAU_INT_OK, PHASE_OK, PHASE_START, PHASE_LAST = 10, 11, 12, 13, 14   # laws.carry.IntegralCarry
SAT_ACTIVE, SAT_MOTION, SAT_FORCE, SAT_CLIPPED, SAT_PEAK = 15, 16, 17, 18, 19  # saturation.SaturationStatus
LAST_KIND, LAST_COLS = 20, 21                             # osc_constrained: 0 none, 1 N(A) of V₁, 2 the tangent T
FORCE_SEEN = 22                                           # a sample in contact filled the force rows of ``out``
RANK, RESIDUAL, FEEDBACK = 23, 24, 25                     # osc_constrained: r, the passive residual, PI on
PI_ZSIZE, WAS_CONTACT = 26, 27                            # entries of ∫e; osc: the last sample's contact (−1: none)
LAMBDA_DIM = 28                                           # osc_constrained: rows of the operational space

# ---------------------------------------------------------------------------------------- columns of row PAR
KP_X, KD_X, KI_X, KP_NULL, I_LIMIT = 0, 1, 2, 3, 4       # osc: K_P, K_D, K_I, the posture's K_P, the clamp
KF, KI_F, MAX_DT, DAMPING, PI_ON = 5, 6, 7, 8, 9          # force PI gains, its max dt; δ₀; PI enabled
FRAME, NJOINTS, N_AXES, N_FORCE, HAS_LIMITS = 10, 11, 12, 13, 14
KD_C, RANK_ATOL, COND_MAX, K_COORD, N_PASSIVE = 15, 16, 17, 18, 19  # osc_constrained
GAP, CARRY_MIN, NQ = 20, 21, 22                           # the PI's gap in periods; IntegralCarry.min_time; nq
RTOL, ATOL = 23, 24                                       # osc_constrained: the default rank rule

#: ``out`` rows of the tool-frame tick: τ, base, force, motion, τ_I, e (6), a* (6), λ_d, f, then Λ_x (rows of the
#: task) — and of the whole-body tick: τ, base, force, motion, θ, θ − θ_d, θ_d, λ_d, f, then Λ_x
TAU, BASE, FORCE, MOTION, TAUI, ERR, ASTAR, LAM_D, F_CMD, LAMBDA_X = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
C_THETA, C_E, THETA_D = 4, 5, 6

#: the tick's return codes: served, the numpy path decides (a factor not positive definite, an input of another
#: size), a non-finite input, an orientation beyond its chart, the task not an operational space, θ_d out of range
OK, FALLBACK, NON_FINITE, CHART, SINGULAR, RANGE = 1, 0, 2, 3, 4, 5


def state_shape(n: int) -> tuple[int, int]:
    """(rows, width) of the tool-frame law's ``S`` for n velocities."""
    return ROWS, max(n, WIDTH)


def body_state_shape(n: int, m: int) -> tuple[int, int]:
    """(rows, width) of the whole-body law's ``S`` for n velocities and at most m constraint rows."""
    return LAST + n, max(n, m, WIDTH)
