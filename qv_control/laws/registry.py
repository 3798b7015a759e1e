"""Law registry: ``make_law(name, system, **params)`` for the controller node, the demo and the CLI.

Names (``law:`` parameter of qv_controller_node):

======================  ===========================================================================
``quasi_tracking``      :class:`QuasiTrackingLaw`  eq. 35–38 (SPEC signs) + force law eq. 42 (+ PI)
``quasi_setpoint``      :class:`QuasiSetpointLaw`  eq. 44 with Dᵀ (``form="paper"``: without) + eq. 42/47
``pidc``                :class:`PIDCLaw`           eq. 45–46, weighted minimum norm eq. 49–50 (``W``/``kappa``)
``pidc_force``          :class:`PIDCForceLaw`      hybrid eq. 54 = eq. 45–46 + force control eq. 51–52 (PI)
``passive``             :class:`PassiveJointLaw`   eq. 56–62, controllability test eq. 58/64
``legged``              :class:`LeggedLaw`         eq. 56–62 with a passive base + friction-cone foot forces (QP),
                                                   following a contact plan (``feet``, ``plan``)
``osc``                 :class:`OperationalSpaceLaw`  Khatib's operational-space hybrid force/motion law of a
                                                   tool frame (the strong baseline; θ = tool position)
``osc_constrained``     :class:`ConstrainedOperationalSpaceLaw`  operational-space control as whole-body OSC: the
                                                   coordinates θ, every contact row (λ_d, λ_meas per row) and
                                                   ``actuated``, as the projection laws take them
``impedance``           :class:`ImpedanceForceBaseline`  Cartesian impedance + Jacobian-transpose force (the
                                                   "what users build today" baseline; θ = tool position)
======================  ===========================================================================

Common parameters: ``coordinates`` (θ spec, see :mod:`qv_control.coordinates`; k = n − r entries),
``kp``, ``kd`` (motion gains; G_P, G_D of the projection paper), ``kf`` (< 1), ``ki`` (force PI on the
measured λ), ``effort_limits`` ("urdf" default, a number, an n-vector or None), ``cond_max``.
``osc`` and ``impedance`` take their own gains (see their classes: ``frame``, ``contact``, ``kp``/``kd``
giving the quasi law's closed-loop poles, ``kf``/``ki`` the same force PI; ``kp_pos`` ... for impedance) and a
reference θ = the tool position (3 values; λ_d of the contact row).
``quasi_tracking`` also takes ``normal_motion`` and ``normal_rate`` (default on): compensation of a measured
normal quasi-velocity V₁ᵀv ≠ 0 (a soft real contact), see :class:`QuasiTrackingLaw`.
"""
from __future__ import annotations

from qv_dynamics.errors import UnknownNameError
from qv_dynamics.robots import scale_inertias

from .base import ControlLaw
from .impedance import ImpedanceForceBaseline
from .legged import LeggedLaw
from .osc import OperationalSpaceLaw
from .osc_constrained import ConstrainedOperationalSpaceLaw
from .passive import PassiveJointLaw, check_controllability
from .pidc import PIDCLaw
from .pidc_force import PIDCForceLaw
from .projection_base import UncontrollableError
from .quasi_setpoint import QuasiSetpointLaw
from .quasi_tracking import QuasiTrackingLaw

#: the projection laws derive from ControlLaw; the two task-space baselines only share compute(state, reference)
LAWS: dict[str, type] = {
    "quasi_tracking": QuasiTrackingLaw,
    "quasi_setpoint": QuasiSetpointLaw,
    "pidc": PIDCLaw,
    "pidc_force": PIDCForceLaw,
    "passive": PassiveJointLaw,
    "legged": LeggedLaw,
    "osc": OperationalSpaceLaw,
    "osc_constrained": ConstrainedOperationalSpaceLaw,
    "impedance": ImpedanceForceBaseline,
}
ALIASES = {"hybrid": "pidc_force", "quasi": "quasi_tracking", "setpoint": "quasi_setpoint",
           "passive_joints": "passive"}


def make_law(name: str, system, **params) -> ControlLaw | OperationalSpaceLaw | ImpedanceForceBaseline:
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


__all__ = ["make_law", "LAWS", "ALIASES", "scale_inertias", "QuasiTrackingLaw", "QuasiSetpointLaw", "PIDCLaw",
           "PIDCForceLaw", "PassiveJointLaw", "OperationalSpaceLaw", "ConstrainedOperationalSpaceLaw",
           "ImpedanceForceBaseline", "UncontrollableError",
           "check_controllability"]
