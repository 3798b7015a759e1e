"""Shared numerical conventions: rank tolerances, Pinocchio's world-aligned frame, LAPACK helpers.

Every rank decision in the package (A⁺, P = I − A⁺A, the SVD bases V₁/V₂ of eq. 9) keeps singular values
σ > max(ATOL, RTOL·σ_max); the same numbers are used everywhere so the formulations agree on the rank.
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin
from scipy.linalg.lapack import dgesdd, dgesv, dpotrf

from .errors import NotPositiveDefiniteError

RTOL = 1e-9  # relative singular-value threshold
ATOL = 1e-9  # absolute singular-value threshold

# constraint rows and task Jacobians are expressed at the frame with world-aligned axes
LOCAL_WORLD_ALIGNED = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED


def svd_full(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Full SVD X = U diag(s) Vᵀ (U m×m, Vᵀ n×n) by LAPACK dgesdd called directly (no numpy wrapper
    overhead; falls back to numpy's dgesdd driver if LAPACK reports no convergence)."""
    U, s, Vt, info = dgesdd(X, compute_uv=1, full_matrices=1)
    if info != 0:
        U, s, Vt = np.linalg.svd(X)
    return U, s, Vt


def svd_thin(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thin SVD X = U diag(s) Vᵀ (k = min(m, n) singular triplets) by LAPACK dgesdd, as :func:`svd_full`."""
    U, s, Vt, info = dgesdd(X, compute_uv=1, full_matrices=0)
    if info != 0:
        U, s, Vt = np.linalg.svd(X, full_matrices=False)
    return U, s, Vt


def inv(X: np.ndarray) -> np.ndarray:
    """X⁻¹ of a square matrix by LU with partial pivoting (LAPACK dgesv on X·Y = I, the algorithm of
    ``numpy.linalg.inv``) called directly; ``numpy.linalg.LinAlgError`` when X is singular."""
    _, _, Y, info = dgesv(X, identity(X.shape[0]))
    if info != 0:
        raise np.linalg.LinAlgError("Singular matrix")
    return Y


def singular_values(X: np.ndarray) -> np.ndarray:
    """Singular values of X, descending (LAPACK dgesdd without vectors, called directly)."""
    _, s, _, info = dgesdd(X, compute_uv=0)
    return s if info == 0 else np.linalg.svd(X, compute_uv=False)


def norm2(X: np.ndarray) -> float:
    """Spectral norm σ₁(X) (largest singular value, as ``numpy.linalg.norm(X, 2)``); 0 for an empty matrix."""
    if X.size == 0:
        return 0.0
    return float(singular_values(X)[0])


_IDENTITIES: dict[int, np.ndarray] = {}


def identity(n: int) -> np.ndarray:
    """A cached n×n identity, read-only (LAPACK copies its right-hand side unless told to overwrite)."""
    eye = _IDENTITIES.get(n)
    if eye is None:
        eye = _IDENTITIES[n] = np.eye(n)
        eye.flags.writeable = False
    return eye


def cholesky_lower(M: np.ndarray, what: str = "mass matrix is not positive definite", clean: bool = True
                   ) -> np.ndarray:
    """Lower Cholesky factor L (M = LLᵀ) by LAPACK dpotrf; NotPositiveDefiniteError(``what``) otherwise.
    ``clean=False`` leaves the strict upper triangle unspecified (enough for dpotrs)."""
    L, info = dpotrf(M, lower=1, clean=int(clean))
    if info != 0 or not math.isfinite(L[-1, -1]):
        raise NotPositiveDefiniteError(what)
    return L


_BLAS_SETTERS = ("openblas_set_num_threads", "openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                 "scipy_openblas_set_num_threads64_")


def limit_blas_threads(n: int = 1) -> int:
    """Set the thread count of every OpenBLAS loaded in this process (numpy's and scipy's); returns how many
    libraries were set. For entry points only (CLI main, node main, scripts): it changes the whole process.

    The simulator works on matrices of size ≤ ~30, where BLAS threads only add wake-up latency; on a loaded
    2-core machine they made a 1 kHz step ~10× slower (measured: 0.34 → 4 s per simulated second for the
    Panda point contact). Linux only (reads /proc/self/maps); a no-op elsewhere. Setting
    ``OPENBLAS_NUM_THREADS=1`` in the environment before numpy is imported has the same effect."""
    import ctypes

    done = 0
    try:
        with open("/proc/self/maps") as fh:
            paths = {ln.split()[-1] for ln in fh if "openblas" in ln.lower() and ".so" in ln}
    except OSError:
        return 0
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in _BLAS_SETTERS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn(ctypes.c_int(int(n)))
                done += 1
                break
    return done


def kernel_vector(x: np.ndarray) -> np.ndarray:
    """``x`` as the compiled kernels' signatures take it, C-contiguous and writeable: a strided view or a read-only
    buffer (e.g. a vector read from a message's bytes) is copied, so numba never compiles another
    specialization on the spot."""
    return x if x.flags.c_contiguous and x.flags.writeable else np.array(x, order="C")
