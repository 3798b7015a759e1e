"""The compiled (numba) numerics of qv_dynamics, in one room: the only folder of the package that imports numba.

Each kernel module computes the same equations as a numpy reference path elsewhere in the package, to rounding,
and a test holds the two against each other (:data:`PAIRS`). The kernels are loaded through
:func:`qv_dynamics.kernels.loader.load`, which returns None (the caller keeps its numpy path) when numba is
missing, its disk cache is cold or stale, or ``QV_COMPILED=0``: the package imports and runs without numba.
Importing this package imports nothing (no numba, no numpy). Kernel module: the reference it must equal; the
tests pairing them:

- ``quasi``: :func:`qv_dynamics.quasi.quasi_decompose` (``gauge="svd"``) and ``ConstrainedSystem.evaluate``;
  test_quasi_compiled.py, test_quasi_sampler.py
- ``aligned``: :func:`qv_dynamics.quasi_basis.aligned_basis` (the steady state's bases); test_quasi_compiled.py
- ``crb``: Pinocchio's ``crba`` and ``computeGeneralizedGravity``; test_crb_kernel.py
- ``frame``: the constraints' ``jacobian`` and ``drift`` (Pinocchio frames); test_quasi_sampler.py
- ``quasi_linalg``: numpy/LAPACK (Cholesky, singular values, products); test_quasi_linalg.py
- ``sim``: :func:`qv_dynamics.projection.direct_dynamics_rank`, :func:`qv_dynamics.impact.m_projection`;
  test_sim_compiled.py
- ``sim_linalg``: numpy/LAPACK (LU, Cholesky, Jacobi SVD), through ``sim``; test_sim_compiled.py
- ``sim_fastpath``: ``Stepper(system, compiled=False)``; test_sim_compiled.py

``loader`` is the one loader (numba's disk cache, staleness, ``qv warm``); ``views`` builds the index arrays
the kernels read in numpy.
"""

#: modules of the room that are support, not kernels (no numpy reference of their own)
SUPPORT = ("loader", "views")

#: modules with kernel entry points (``@kernel``) and a ``warm()``: ``qv warm`` compiles them
KERNEL_MODULES = ("qv_dynamics.kernels.quasi", "qv_dynamics.kernels.sim")

#: kernel module -> (numpy reference, test file that holds them against each other)
PAIRS = {
    "qv_dynamics.kernels.quasi": ("qv_dynamics.quasi.quasi_decompose", "test_quasi_compiled.py"),
    "qv_dynamics.kernels.aligned": ("qv_dynamics.quasi_basis.aligned_basis", "test_quasi_compiled.py"),
    "qv_dynamics.kernels.crb": ("pinocchio.crba", "test_crb_kernel.py"),
    "qv_dynamics.kernels.frame": ("qv_dynamics.model.ConstrainedSystem.evaluate", "test_quasi_sampler.py"),
    "qv_dynamics.kernels.quasi_linalg": ("numpy.linalg.cholesky", "test_quasi_linalg.py"),
    "qv_dynamics.kernels.sim": ("qv_dynamics.projection.direct_dynamics_rank", "test_sim_compiled.py"),
    "qv_dynamics.kernels.sim_linalg": ("qv_dynamics.projection.direct_dynamics_rank", "test_sim_compiled.py"),
    "qv_dynamics.kernels.sim_fastpath": ("qv_dynamics.sim.stepper.Stepper", "test_sim_compiled.py"),
}
