"""Law registry: ``make_law(name, system, **params)`` for the controller node, the demo and the CLI.

Names (``law:`` parameter of qv_controller_node):

======================  ===========================================================================
``quasi_tracking``      :class:`QuasiTrackingLaw`  eq. 35–38 (SPEC signs) + force law eq. 42 (+ PI)
``quasi_setpoint``      :class:`QuasiSetpointLaw`  eq. 44 with Dᵀ (``form="paper"``: without) + eq. 42/47
``pidc``                :class:`PIDCLaw`           eq. 45–46, weighted minimum norm eq. 49–50 (``W``/``kappa``)
``pidc_force``          :class:`PIDCForceLaw`      hybrid eq. 54 = eq. 45–46 + force control eq. 51–52 (PI)
``passive``             :class:`PassiveJointLaw`   eq. 56–62, controllability test eq. 58/64
======================  ===========================================================================

Common parameters: ``coordinates`` (θ spec, see :mod:`qv_control.coordinates`; k = n − r entries),
``kp``, ``kd`` (motion gains; G_P, G_D of the projection paper), ``kf`` (< 1), ``ki`` (force PI on the
measured λ), ``effort_limits`` ("urdf" default, a number, an n-vector or None), ``cond_max``.
``quasi_tracking`` also takes ``normal_motion`` and ``normal_rate`` (default on): compensation of a measured
normal quasi-velocity V₁ᵀv ≠ 0 (a soft real contact), see :class:`QuasiTrackingLaw`.
"""
from __future__ import annotations

import pinocchio as pin

from qv_dynamics.errors import UnknownNameError

from .base import ControlLaw
from .pidc import PassiveJointLaw, PIDCForceLaw, PIDCLaw, UncontrollableError, check_controllability
from .quasi_tracking import QuasiSetpointLaw, QuasiTrackingLaw

LAWS: dict[str, type[ControlLaw]] = {
    "quasi_tracking": QuasiTrackingLaw,
    "quasi_setpoint": QuasiSetpointLaw,
    "pidc": PIDCLaw,
    "pidc_force": PIDCForceLaw,
    "passive": PassiveJointLaw,
}
ALIASES = {"hybrid": "pidc_force", "quasi": "quasi_tracking", "setpoint": "quasi_setpoint",
           "passive_joints": "passive"}


def make_law(name: str, system, **params) -> ControlLaw:
    """Build a law by name (table in the module doc); unknown names/parameters raise UnknownNameError."""
    import inspect

    key = ALIASES.get(str(name), str(name))
    if key not in LAWS:
        raise UnknownNameError(f"unknown control law {name!r}; available: {sorted(LAWS)} (aliases {ALIASES})")
    cls = LAWS[key]
    allowed: set[str] = set()
    for klass in cls.__mro__:  # follow **kw up the class chain only while an __init__ forwards it
        if "__init__" not in vars(klass):
            continue
        sig = inspect.signature(klass.__init__).parameters
        allowed |= {p for p, v in sig.items() if p not in ("self", "system") and v.kind != v.VAR_KEYWORD}
        if not any(v.kind == v.VAR_KEYWORD for v in sig.values()):
            break
    bad = sorted(set(params) - allowed)
    if bad:
        raise UnknownNameError(f"law {key!r}: unknown parameter(s) {bad}; accepted: {sorted(allowed)}")
    return cls(system, **params)


def scale_inertias(system, mass_scale: float = 1.1, inertia_scale: float | None = None) -> None:
    """Model error for robustness studies: multiply every body's mass (and rotational inertia, by
    ``inertia_scale``, default = ``mass_scale``) in ``system.model`` in place; centres of mass unchanged."""
    s_m = float(mass_scale)
    s_i = s_m if inertia_scale is None else float(inertia_scale)
    model = system.model
    for i in range(1, model.njoints):
        Y = model.inertias[i]
        model.inertias[i] = pin.Inertia(Y.mass * s_m, Y.lever.copy(), Y.inertia * s_i)
    system.data = model.createData()


__all__ = ["make_law", "LAWS", "ALIASES", "scale_inertias", "QuasiTrackingLaw", "QuasiSetpointLaw", "PIDCLaw",
           "PIDCForceLaw", "PassiveJointLaw", "UncontrollableError", "check_controllability"]
