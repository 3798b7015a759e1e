"""Row ``rank_change``: the flat tool face rolls from an edge contact onto its face and back while pressing:
the active constraint rows go from 1 (the edge ``face_a``) to 3 of rank 2 (the face) and back to 1.

Timeline: 10 N ramped on the edge with the face tilted by ``TILT`` (0–0.3 s), hold, roll about the edge (0.5–0.9
s) to MARGIN short of level, creep on until the face touches (the plant's force on ``face_m`` or ``face_b``: the
supervisor's switch), shift the centre of pressure from where it is to the middle (moment → 0), trace x +5 cm
and back on the face (1.2–2.0 s), shift it back onto the edge (moment → −hF), switch to the edge at 2.35 s and
tilt up again from the tilt it has (2.8 s in all). A lift-off is an edge losing its force while the commanded
centre of pressure c is on its half (|c − edge| < 1.5h). Judged: the wrench (total force, moment about face_m ÷
HALF: on the edge the moment is −hF by geometry) and face_a's x.
* qv: two projection hybrid laws (``pidc_force``) on the same system, switched with its active rows: on the
  edge θ = (face_a.x, face_m.ry), λ_d = −F; on the face θ = face_a.x, λ_d the minimum-norm split of (F, M).
* osc: operational-space control switched likewise, with qv's coordinates on each phase and every active
  contact row (λ per row).
* osc_tool: the operational-space law switched likewise: on the edge task rows (x, z, ry) of face_a with force
  row z and the tilt as orientation target; on the face rows (x, z, ry) of face_m with force rows z and ry.
* impedance: Cartesian impedance switched likewise (edge: orientation target; face: no moment channel).
Judged by MuJoCo (:class:`~qv_dynamics.plants.mujoco_face.MujocoFacePlant`, frictionless stiff spheres).
"""
from __future__ import annotations

import math

import numpy as np
import pinocchio as pin

from qv_dynamics.state import Reference

from . import common
from .common import PER_ROW, Tick, run_row, smooth_ramp
from .face import FACE, HALF, TABLE, face_pose, face_system
from .redundant_contacts import NO_MOMENT, split

FORCE = 10.0
TILT = 0.05                   # rad: face_a is the low edge
X_A = 0.56                    # m, face_a's x
T_RAMP, T_ROLL, T_ROLL_END = 0.3, 0.5, 0.9
T_SHIFT, T_TRACE, T_TRACE_END, T_BACK, T_EDGE, T_END = 0.9, 1.2, 2.0, 2.0, 2.35, 2.8
STROKE = 0.05
TOUCH_N = 0.2                 # N on face_m or face_b that tells the supervisor the face is down
OVERROLL = 0.002              # rad the roll is commanded past level (in CREEP s after T_ROLL_END)
CREEP = 0.3
MARGIN = 0.001                # rad short of level where the roll ends (the creep goes on from there)


def tilt_d(t: float, tilt0: float = 0.0) -> float:
    """The edge law's tilt target: TILT → MARGIN, then a slow creep to −OVERROLL (the roll goes on until the
    face is felt: the edge sinks into the table under F, so the face touches before the law's level), and after
    the face phase from the tilt ``tilt0`` measured at the switch to TILT."""
    if t < T_EDGE:       # level at T_ROLL_END with zero rate, then a slow creep past it until the edge is felt
        return (TILT - (TILT - MARGIN) * smooth_ramp(t, T_ROLL, T_ROLL_END - T_ROLL)
                - (MARGIN + OVERROLL) * smooth_ramp(t, T_ROLL_END, CREEP))
    return tilt0 + (TILT - tilt0) * smooth_ramp(t, T_EDGE, 0.3)


def moment_d(t: float, F: float, mode: str = "face", t_face: float = 0.0, M0: float = 0.0) -> float:
    """M about face_m (N·m, upward forces × arm): −hF on the edge (by geometry); on the face from the moment
    M0 measured at the switch (t_face) to 0 in 0.3 s, then back to −hF (all load on the edge) before the edge
    is taken again."""
    if mode == "edge":
        return -HALF * F
    return M0 * (1 - smooth_ramp(t, t_face, 0.3)) - HALF * F * smooth_ramp(t, T_BACK, T_EDGE - 0.05 - T_BACK)


def x_d(t: float) -> tuple[float, float, float]:
    if not T_TRACE < t < T_TRACE_END:
        return X_A, 0.0, 0.0
    w = 2 * math.pi / (T_TRACE_END - T_TRACE)
    s = t - T_TRACE
    return (X_A + 0.5 * STROKE * (1 - math.cos(w * s)), 0.5 * STROKE * w * math.sin(w * s),
            0.5 * STROKE * w * w * math.cos(w * s))


class Supervisor:
    """Edge → face when face_b's contact carries TOUCH_N after the roll started; face → edge at T_EDGE. Sets the
    active rows of every system it is given (the controllers' models)."""

    def __init__(self, systems):
        self.systems, self.mode, self.events = systems, None, []
        self.t_face, self.M0, self.tilt0 = 0.0, 0.0, 0.0
        self.set("edge", 0.0)

    def set(self, mode: str, t: float) -> None:
        if mode == self.mode:
            return
        for s in self.systems:
            for nm in FACE[1:]:
                s.set_active(nm, mode == "face", reanchor=False)
        self.mode = mode
        self.events.append((t, mode))

    def update(self, t: float, lam: np.ndarray, tilt: float) -> None:
        if self.mode == "edge" and T_ROLL < t < T_EDGE and -min(lam[1], lam[2]) > TOUCH_N:
            self.set("face", t)
            self.t_face, self.M0 = t, float(np.array([-HALF, 0.0, HALF]) @ -lam)
        elif self.mode == "face" and t >= T_EDGE:
            self.set("edge", t)
            self.tilt0 = tilt


def level_rotation(sysm, q) -> np.ndarray:
    pin.framesForwardKinematics(sysm.model, sysm.data, q)
    return sysm.data.oMf[sysm.model.getFrameId("face_m")].rotation.copy()


def tilted(R0: np.ndarray, tilt: float) -> np.ndarray:
    """The face's rotation tilted by ``tilt`` about −y (the joints' axis) from level R0."""
    return pin.exp3(np.array([0.0, -tilt, 0.0])) @ R0


#: the per-scene choices of each law on each phase (its keyword arguments; gains, force PI and posture are shared:
#: common.py); the ry coordinate's rotation reference is the level face (R0), the tool laws' tilt target R_d
RY = {"frame": "face_m", "axes": ["ry"]}
SETUP = {"qv": {"edge": {"coordinates": ["face_a.x", RY]}, "face": {"coordinates": ["face_a.x"]}},
         "osc": {"edge": {"coordinates": ["face_a.x", RY]}, "face": {"coordinates": ["face_a.x"]}},
         "osc_tool": {"edge": {"frame": "face_a", "contact": "face_a", "axes": ("x", "z", "ry"), "force_axis": "z"},
                      "face": {"frame": "face_m", "contact": "face_m", "axes": ("x", "z", "ry"), "force_axis": "z",
                               "moment_axes": ("ry",)}},
         "impedance": {"edge": {"frame": "face_a", "contact": "face_a"},
                       "face": {"frame": "face_m", "contact": "face_m"}}}


class Switched:
    """The controller of one kind for both modes, with the mode's reference (a law object per mode)."""

    def __init__(self, kind: str, sysm, q0, sup: Supervisor):
        self.kind, self.sup = kind, sup
        self.R0 = level_rotation(sysm, face_pose(sysm, 0.6))
        if kind not in SETUP:
            raise ValueError(f"unknown controller {kind!r}")
        laws = {}
        for mode in ("face", "edge"):          # each law is built with its phase's rows active
            setup = dict(SETUP[kind][mode])
            if "coordinates" in setup:
                setup["coordinates"] = [dict(c, rotation_reference=self.R0) if isinstance(c, dict) else c
                                        for c in setup["coordinates"]]
            sup.set(mode, 0.0)
            laws[mode] = common.make_law(kind, setup, sysm, q0)
        self.edge, self.face = laws["edge"], laws["face"]
        self.sup.events.clear()
        self.sup.mode = "edge"
        self._last = None

    def compute(self, state, reference):
        law = self.edge if self.sup.mode == "edge" else self.face
        if law is not self._last:       # a law taking over starts afresh (no integral from its last phase)
            _restart(law)
            self._last = law
        if self.kind not in PER_ROW:
            law.R_d = tilted(self.R0, tilt_d(state.t, self.sup.tilt0) if self.sup.mode == "edge" else 0.0)
        return law.compute(state, reference)


def _restart(law) -> None:
    """Reset a law's integrators and clock (the impedance baseline's by its attributes: it has no reset)."""
    if hasattr(law, "reset"):
        law.reset()
    else:
        law._int, law._t_prev = 0.0, None


def tick(t: float, kind: str, sup: Supervisor) -> Tick:
    F = FORCE * smooth_ramp(t, 0.0, T_RAMP)
    mode = sup.mode
    M = moment_d(t, F, mode, sup.t_face, sup.M0)
    x, xd, xdd = x_d(t)
    judged = np.array([-F, M / HALF])
    p_d = np.array([x, 0.0, TABLE])
    if kind in PER_ROW:
        if mode == "edge":
            ref = Reference(theta=np.array([x, -tilt_d(t, sup.tilt0)]), theta_dot=np.array([xd, 0.0]),
                            theta_ddot=np.array([xdd, 0.0]), lambda_=np.array([-F]))
        else:
            ref = Reference(theta=np.array([x]), theta_dot=np.array([xd]), theta_ddot=np.array([xdd]),
                            lambda_=-split(F, M))
    elif mode == "edge":
        ref = Reference(theta=p_d, theta_dot=np.array([xd, 0, 0]), theta_ddot=np.array([xdd, 0, 0]),
                        lambda_=np.array([-F]))
    else:
        ref = Reference(theta=p_d + [HALF, 0, 0], theta_dot=np.array([xd, 0, 0]),
                        theta_ddot=np.array([xdd, 0, 0]), lambda_=np.array([-F, M]))
    return Tick(ref, judged, p_d)


def run(kind: str, duration: float | None = None) -> dict:
    """One run (``duration`` default T_END = 2.8 s)."""
    from qv_dynamics.plants.mujoco_face import MujocoFacePlant

    sysm = face_system()
    q0 = face_pose(sysm, X_A + HALF, tilt=TILT, z=TABLE + HALF * math.sin(TILT))
    plant = MujocoFacePlant(sysm, FACE, TABLE)
    plant.reset(q0)
    sup = Supervisor([sysm])
    arms = np.array([-HALF, 0.0, HALF])

    def measure():
        lam = plant.forces()
        sup.update(plant.time, lam, float(plant.q.sum()) + math.pi / 2)
        F, M = -lam.sum(), float(arms @ -lam)
        if kind in PER_ROW:
            fed = lam[:1] if sup.mode == "edge" else lam
        else:
            fed = np.array([-F]) if sup.mode == "edge" else np.array([-F, M])
        rows = np.array([lam[0], np.nan, np.nan])
        if sup.mode == "face":          # the edges on whose half the commanded centre of pressure c lies
            F_d, M_d = tick(plant.time, kind, sup).lambda_d * [-1, HALF]
            c = M_d / max(F_d, 1e-9)
            rows = np.array([lam[0] if c < 0.5 * HALF else np.nan, np.nan, lam[2] if c > -0.5 * HALF else np.nan])
        return fed, np.array([-F, M / HALF]), plant.site("face_a"), rows

    out = run_row("rank_change", kind, lambda: Switched(kind, sysm, q0, sup), plant,
                  lambda t: tick(t, kind, sup), measure, duration or T_END, FORCE, T_RAMP, T_RAMP + 0.2)
    out["events"] = list(sup.events)
    if kind == "impedance" and not out["figures"]["failed"]:
        out["figures"]["failed"] = NO_MOMENT
    return out


__all__ = ["SETUP", "run", "tick", "Supervisor", "Switched"]
