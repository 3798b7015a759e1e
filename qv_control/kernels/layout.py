"""The packed arguments of the whole-tick kernels, in numpy-free Python: the laws build them at construction whether
or not the compiled tick serves (:mod:`qv_control.laws.packed`), the kernels read them with the same constants.

A tick kernel takes one int64 vector ``I`` and one float64 vector ``F``: ``I`` starts with a header of one
(offset, rows, columns) triple per block (:data:`NBLOCK` blocks, index = the block's constant below); an int
block lies in ``I`` after the header, a float block in ``F``. Blocks hold the static plan (the joint tree, frame
slots, rows), the law's parameters (gains, limits, tolerances) and its state between ticks (integrals, previous
targets and bases, the diagnostics of the last tick), so that a tick passes a handful of arrays.
"""
from __future__ import annotations

# ---- int blocks
I_SIZES = 0      # n, nq, m, k, slots, law mode, joints, ...  (SZ_* below)
I_TREE = 1       # joints × 3: first velocity column, velocity size, parent
I_PLAN = 2       # k × 4: the coordinates' rows (qv_control.kernels.coordinates)
I_SUP = 3        # slots × n: the columns supporting each frame slot
I_RPLAN = 4      # m × 3: constraint rows (slot of frame A, slot of frame B or −1, axis)
I_FJOINT = 5     # slots × 1: each slot's parent joint
I_FID = 6        # slots × 1: each slot's frame id (the placements written back into data.oMf)
I_QUAT = 7       # parts × 2: unit-norm parts of q (quaternions inside the tree), [lo, hi)
I_PAS = 8        # the passive velocities (projection laws)
I_FEET = 9       # feet × 1: each foot's first constraint row (legged)
# ---- float blocks
F_PAR = 10       # scalar parameters (P_* below)
F_KP = 11        # k: K_p
F_LIM = 12       # n: effort limits (inf: none)
F_LO = 13        # k: the coordinates' lower bounds − 1e-12 (−inf: none)
F_HI = 14        # k: upper bounds + 1e-12
F_ARM = 15       # n: armature
F_GRAV = 16      # 3: gravity
F_FPLACE = 17    # slots × 12: each slot's placement in its parent joint (rotation column-major, origin)
F_RREF = 18      # slots × 9: orientation references R_ref (row-major)
F_ST = 19        # state scalars (S_* below)
F_PIZ = 20       # m: the force PI's ∫e
F_PID = 21       # m: its target at the last stamp
F_PIDP = 22      # m: its target at the stamp before
F_IZ = 23        # k: the motion integral z
F_EP = 24        # k: θ − θ_d at the integral's last stamp
F_GVN = 25       # k: Gv_n at the rate's last stamp
F_GRATE = 26     # k: (Gv_n)˙ of that stamp
F_BIAS = 27      # n: the carried bias b
F_HOLD = 28      # k: the latched hold target θ_d
F_VP = 29        # n × n: the previous basis [V₁ V₂] (or the previous N(A) basis)
F_UP = 30        # m × m: the previous rotation of σ(R)
F_UC = 31        # k × k: the rotation of cond(D)'s Jacobi
F_TAUI = 32      # n: τ_I of the last tick
F_DIAG = 33      # rows × width: the last tick's diagnostics (D_* rows)
F_QP = 34        # the foot-force QP's parameters and workspace (legged)
F_DMAT = 35      # k × k: D of the last tick (its cond(D) formed when read)
F_KI6 = 36       # 6: the legged law's base integral gains k_i
F_FRICTION = 37  # 2 × n: the legged law's joint damping d and Coulomb friction f_c
F_FMAX = 38      # feet: the normal-force caps of the stance feet (inf: none), set by the law per tick
F_AFULL = 39     # m × n: A of the last tick (the projection laws' carried tangent starts from it)
NBLOCK = 40

# ---- I_SIZES entries
SZ_N, SZ_NQ, SZ_M, SZ_K, SZ_SLOTS, SZ_MODE, SZ_JOINTS, SZ_WIDTH = range(8)

# ---- F_PAR entries
(P_KD, P_COND_MAX, P_RTOL, P_ATOL, P_KF, P_KI, P_PI_DT, P_FORCE, P_COMPENSATE, P_NORMAL, P_NORMAL_RATE,
 P_RATE_DT, P_KI_MOTION, P_INT_LIMIT, P_INT_DT, P_HAS_LIMITS, P_PI_ON, P_ICHECK_RTOL, P_ICHECK_ATOL,
 P_TOL, P_IRTOL, P_IATOL, P_NONINT, P_IKF, P_IKI, P_IMAX, P_IDT, P_FRICTION_V, P_QP_MU, P_QP_MU_IN, P_QP_FMIN,
 P_QP_WT, P_QP_WN, P_QP_EPS, P_QP_SLACK, P_HAS_FRICTION, P_KI_LIMIT) = range(37)
NPAR = 40

# ---- F_PAR and F_ST entries of the impedance law's tick (its q_null in F_HOLD, its R_d in F_RREF)
IP_KP_POS, IP_KD_POS, IP_KP_ROT, IP_KD_ROT, IP_KP_NULL, IP_KD_NULL, IP_FORCE_KI, IP_CONTACT, IP_MAX_DT, IP_RCOND = \
    range(10)
IS_INT, IS_T_PREV, IS_Q_NULL, IS_R_D = range(4)   # ∫ of the force, t_prev (NaN: none), q_null and R_d latched
NIMP_PAR, NIMP_ST = 10, 4

# ---- F_ST entries (NaN: "none" for the stamps)
(S_PI_T, S_PI_Z, S_HIST_T, S_HIST_PREV, S_INT_T, S_INT_Z, S_E_T, S_GVN_T, S_GRATE, S_PHASE0, S_PHASE1, S_BIAS,
 S_HOLD, S_FORCE_FROZEN, S_MOTION_FROZEN, S_COND_CALLS, S_TAUI, S_TICKS, S_LIVE, S_PROJECTED, S_OFF_MAX,
 S_QP_SOLVES, S_QP_INFEASIBLE, S_PI_PERIOD, S_PI_PERIOD_NEXT) = range(25)
NSTATE = 25
#: a sample after a gap integrates the force error over at most this many sample periods (ForcePI, its kernel)
GAP_PERIODS = 2.0

# ---- F_DIAG rows (width max(n, m, k, 8))
(D_BASE, D_FORCE, D_MOTION, D_UV, D_EPS, D_E, D_THETA, D_UXI, D_XID, D_GVN, D_RATE, D_VN, D_SCALARS, D_VR,
 D_THETA_D, D_LAMBDA_D, D_UP, D_LAMBDA_M, D_Z, D_Z_D, D_AUX, D_INTERNAL, D_LAMBDA_CMD, D_KIZ) = range(24)
NDIAG = 24
# ---- D_SCALARS entries: the limiter's (active, α, β, clipped, peak) at DS_ACTIVE..DS_PEAK
(DS_COND, DS_V, DS_FEEDBACK, DS_T, DS_ACTIVE, DS_MOTION_SCALE, DS_FORCE_SCALE, DS_CLIPPED, DS_PEAK, DS_DIM,
 DS_FEASIBLE, DS_SLACK, DS_RESID, DS_RANK) = range(14)

TICK_ROWS = 12  # vector rows before the matrices in the projection tick's ``out`` (its module doc)
QUASI_TICK_ROWS = 14  # the same for the quasi-velocity tick


def tick_rows(n: int, m: int, k: int, plan_rows: int) -> int:
    """Rows of the projection tick's ``out`` for n velocities, m constraint rows, k coordinates and the
    coordinates' plan."""
    return TICK_ROWS + n + m + k + 2 * k + (plan_rows - k) + 3


def diag_width(n: int, m: int, k: int) -> int:
    """Columns of the diagnostics block."""
    return max(n, m, k, 14)
