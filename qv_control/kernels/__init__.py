"""The compiled (numba) numerics of qv_control, in one room: the only folder of the package that imports numba.

Each kernel module computes what a law or the minimal coordinates compute in numpy with ``compiled=False``
(the reference path, also taken when :func:`qv_dynamics.kernels.loader.load` cannot give the kernel: numba
missing, cache cold or stale, ``QV_COMPILED=0``), to rounding; a test holds the two against each other
(:data:`PAIRS`). Importing this package imports nothing. Kernel module: the
reference it must equal; the test pairing them:

- ``laws``: the laws' products with ``compiled=False`` (tracking, pidc, osc, ...); test_law_compiled.py
- ``coordinates``: :meth:`qv_control.coordinates.MinimalCoordinates.evaluate` with ``compiled=False``;
  test_law_compiled.py
- ``tick``: a projection law's ``compute`` with ``compiled=False``; test_law_compiled.py
- ``quasi_tick``: a quasi-velocity law's whole tick (``compute`` with ``compiled=False``); test_law_compiled.py
- ``limiter``: :func:`qv_control.saturation.saturate`; test_law_compiled.py
- ``integrals``: :class:`qv_control.laws.integral.BoundedIntegral`, :class:`qv_control.laws.base.ForcePI`;
  test_law_compiled.py
- ``internal``: :func:`qv_control.laws.passive.passive_projector`,
  :func:`qv_control.laws.internal_force.internal_force_basis`; test_passive_compiled.py
- ``conditioning``: :func:`qv_control.coordinates.check_reduced_jacobian` (D and cond(D)); test_law_compiled.py
- ``contact_qp``: :class:`qv_control.laws.contact_qp.ContactForceQP` (quadprog); test_contact_qp.py
- ``osc``, ``osc_body``: the operational-space laws' ``compute`` with ``compiled=False`` (the tool-frame law, the
  whole-body law), ``osc_parts`` their shared pieces (force PI, limiter, Λ_x, channels) and ``osc_frames`` their
  frame Jacobians and coordinates (J̇q̇ as a vector: ``MinimalCoordinates.evaluate``); test_osc_tick.py
- ``impedance``: the impedance baseline's whole tick (:class:`qv_control.laws.impedance.ImpedanceForceBaseline` with
  ``compiled=False``); test_impedance_compiled.py

``layout`` names the blocks of the whole-tick kernels' packed arguments (plain Python, used by the laws at
construction); ``blocks`` reads them and does what every tick does before its law (the checks, the terms);
``osc_layout`` places the operational-space laws' packed state.
"""

#: modules of the room that are support, not kernels (no numpy reference of their own)
SUPPORT = ("layout", "blocks", "osc_layout")

#: modules with kernel entry points (``@kernel``) and a ``warm()``: ``qv warm`` compiles them
KERNEL_MODULES = ("qv_control.kernels.contact_qp", "qv_control.kernels.coordinates", "qv_control.kernels.impedance",
                  "qv_control.kernels.laws", "qv_control.kernels.quasi_tick", "qv_control.kernels.tick",
                  "qv_control.kernels.osc", "qv_control.kernels.osc_body")

#: kernel module -> (numpy reference, test file that holds them against each other)
PAIRS = {
    "qv_control.kernels.laws": ("qv_control.laws.quasi_tracking.QuasiTrackingLaw", "test_law_compiled.py"),
    "qv_control.kernels.coordinates": ("qv_control.coordinates.MinimalCoordinates.evaluate",
                                       "test_law_compiled.py"),
    "qv_control.kernels.tick": ("qv_control.laws.projection_base.ProjectionLawBase", "test_law_compiled.py"),
    "qv_control.kernels.quasi_tick": ("qv_control.laws.quasi_base.QuasiLawBase", "test_law_compiled.py"),
    "qv_control.kernels.limiter": ("qv_control.saturation.saturate", "test_law_compiled.py"),
    "qv_control.kernels.integrals": ("qv_control.laws.integral.BoundedIntegral", "test_law_compiled.py"),
    "qv_control.kernels.internal": ("qv_control.laws.internal_force.internal_force_basis", "test_passive_compiled.py"),
    "qv_control.kernels.conditioning": ("qv_control.coordinates.check_reduced_jacobian", "test_law_compiled.py"),
    "qv_control.kernels.contact_qp": ("qv_control.laws.contact_qp.ContactForceQP", "test_contact_qp.py"),
    "qv_control.kernels.osc": ("qv_control.laws.osc.OperationalSpaceLaw", "test_osc_tick.py"),
    "qv_control.kernels.osc_body": ("qv_control.laws.osc_constrained.ConstrainedOperationalSpaceLaw",
                                    "test_osc_tick.py"),
    "qv_control.kernels.osc_parts": ("qv_control.laws.osc.OperationalSpaceLaw", "test_osc_tick.py"),
    "qv_control.kernels.osc_frames": ("qv_control.coordinates.MinimalCoordinates.evaluate", "test_osc_tick.py"),
    "qv_control.kernels.impedance": ("qv_control.laws.impedance.ImpedanceForceBaseline",
                                     "test_impedance_compiled.py"),
}
