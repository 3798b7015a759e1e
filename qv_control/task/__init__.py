"""The contact task: approach a surface, touch down, press and trace, release, lift off.

Small modules, each with its math in its docstring:

- :mod:`.approach`: contact inertia Λ_c, the planned touch-down speed, the surface stiffness from a static
  press, the descent profile;
- :mod:`.filters`: the F/T low-pass and the contact detector with hysteresis;
- :mod:`.profiles`: the force profile (steps) and the traces (circle, task-space waypoints);
- :mod:`.switching`: a law rebuilt from a factory at every change of the active constraint set, integrals
  carried;
- :mod:`.laws`: the three controllers a task drives (qv, osc, impedance) and their references;
- :mod:`.contact_task`: the state machine;
- :mod:`.checks`: the refusals at start (unreachable targets, efforts).

Composables for any law: :class:`~qv_control.laws.friction.FrictionCompensation` (μ from the F/T),
:class:`~qv_dynamics.observer.VelocityObserver`, :class:`LowPass`. Example::

    from qv_control import ContactTask, ContactTaskConfig, TaskLaw, contact_inertia, touch_speed
    v = touch_speed(10.0, contact_inertia(system, q0, "panda_hand_tcp"), stiffness=2e6, damping_factor=2)
    task = ContactTask(ContactTaskConfig(surface_height=0.245, force=10.0, touch_speed=v), system, p0)
    law = TaskLaw("qv", system, "panda_hand_tcp", "contact", q0, R0, redundancy_joint="panda_joint3")
    task.start(t0)
    # every sample: task.update(t, f_n, z); tau = law.law.compute(state, law.reference(task.point(t)))
"""
from .approach import ApproachProfile, contact_inertia, stiffness_from_press, touch_speed
from .checks import TaskRefused, check_task, solve_pose
from .contact_task import PHASES, TERMINAL, ContactTask, ContactTaskConfig
from .filters import ContactDetector, LowPass
from .laws import KINDS, TaskLaw, TaskLawSettings
from .profiles import CircleTrace, ForceProfile, WaypointTrace, smooth
from .switching import SwitchingLaw

__all__ = ["ApproachProfile", "CircleTrace", "ContactDetector", "ContactTask", "ContactTaskConfig", "ForceProfile",
           "KINDS", "LowPass", "PHASES", "SwitchingLaw", "TERMINAL", "TaskLaw", "TaskLawSettings", "TaskRefused",
           "WaypointTrace", "check_task", "contact_inertia", "smooth", "solve_pose", "stiffness_from_press",
           "touch_speed"]
