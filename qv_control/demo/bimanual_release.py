"""One-hand release and re-grasp: a topology change under one force/motion controller (the second arm of the
config lets go).

Timeline (box held still at its start pose throughout, squeeze 20 N before and after):

1. ``handover`` (0.3 s): the internal-force channel moves the right hand's load to the left hand. The
   load split between the hands is an internal force, so this is a chooser of z (the channel's hook):
   z = (1 − α)Eᵀλ_d + α z_u, z_u solving (λ₀ + E z_u)_right = 0, α: 0 → 1 (minimum jerk);
2. ``release``: the right weld is switched off (MuJoCo) and the right grasp constraint deactivated (model):
   m 12 → 6, the internal-force space 6 → 0 (logged by the channel); the law switches to the one-hand
   coordinates θ = box pose, the holding arm's redundancy joints, the free TCP's pose, the free arm's
   redundancy joints (k = n − r: 14 for two 7-DoF arms), sharing the
   same internal-force channel;
3. ``away`` and ``back``: the right hand rises 3 cm and returns to its grasp frame while the left hand
   holds the box alone (≥ 1 s one-handed);
4. ``regrasp``: weld and constraint back on (6 → 12 rows, the basis is re-seeded and logged), the
   two-hand law resumes with the chooser at α = 1 (right hand unloaded) and α: 1 → 0 hands the squeeze
   back to the PI target.

Torque continuity is measured as the largest per-step change max_i |τ_i(k) − τ_i(k−1)| at the switches
against the largest one elsewhere in the run.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin

from qv_dynamics.sim.bimanual import redundancy_joints, tcp_frame
from qv_dynamics.state import Reference, State

from ..laws import make_law
from .bimanual import BimanualConfig, Recorder, _setup, coordinates, make_ours, min_jerk

LIFT = 0.03
PHASES = {"settle": 0.3, "handover": 0.3, "away": 0.5, "back": 0.5, "rest": 0.1, "regrasp": 0.3, "hold": 0.6}


class Handover:
    """Chooser z(λ₀, E) blending the squeeze target with 'unload the released hand' (module doc)."""

    def __init__(self, rows: np.ndarray):
        self.rows = rows
        self.alpha = 0.0
        self.lambda_d = np.zeros(12)

    def __call__(self, lam0: np.ndarray, E: np.ndarray) -> np.ndarray:
        z_t = E.T @ self.lambda_d
        z_u = np.linalg.lstsq(E[self.rows], -lam0[self.rows], rcond=None)[0]
        return (1.0 - self.alpha) * z_t + self.alpha * z_u


def _times() -> dict:
    t, out = 0.0, {}
    for k, d in PHASES.items():
        out[k] = (t, t + d)
        t += d
    return out


def one_hand_coordinates(R0: np.ndarray, R_tcp: np.ndarray, spec) -> list:
    hold, free = spec.sides
    return coordinates(R0, spec, (hold,)) + [{"frame": tcp_frame(free, spec), "axes": ["x", "y", "z", "rx", "ry", "rz"],
                                              "rotation_reference": R_tcp.tolist()}, *redundancy_joints(free, spec)]


def run_release(cfg: BimanualConfig) -> dict:
    """The release / re-grasp run in MuJoCo; returns the recorded arrays plus switch indices and events."""
    cfg = replace(cfg, t_settle=1e9, t_move=1.0, t_hold=0.0)      # the box is held still
    system, q0, mask, plant, plan = _setup(cfg)
    T = _times()
    spec = cfg.system
    hold, SIDE = spec.sides
    name = f"grasp_{SIDE}"
    law2 = make_ours(cfg, system, q0, plan)
    hand = Handover(np.arange(6, 12))            # the second grasp's rows
    G = plan.box(0.0)[0] * plan.grasp[SIDE]                        # the released hand's grasp frame
    system.set_active(name, False)
    law1 = make_law("passive", system, coordinates=one_hand_coordinates(plan.R0, G.rotation, spec),
                    actuated=list(law2.actuated), kp=cfg.kp, kd=cfg.kd, q0=q0)
    system.set_active(name, True)
    law1.internal = law2.internal                                  # one channel sees every topology
    rec = Recorder(plan, system)
    switches, log, law = [], [], law2
    steps = int(round(T["hold"][1] / cfg.dt))
    for k in range(steps):
        t = k * cfg.dt
        if law is law2 and T["handover"][1] <= t < T["regrasp"][0]:
            plant.set_weld(name, False)
            system.set_active(name, False)
            law, _ = law1, switches.append(k)
            log.append({"t": t, "event": "release", "side": SIDE})
        elif law is law1 and t >= T["regrasp"][0]:
            M_tcp = system.frame_placement(plant.q, tcp_frame(SIDE, spec))
            log.append({"t": t, "event": "regrasp", "side": SIDE,
                        "position_mismatch_m": float(np.linalg.norm(M_tcp.translation - G.translation)),
                        "angle_mismatch_rad": float(np.linalg.norm(pin.log3(M_tcp.rotation @ G.rotation.T)))})
            gap = plant.set_weld(name, True, where_it_is=True)       # the gripper grasps where the hand is
            log[-1]["weld_gap_closed_m"], log[-1]["weld_gap_closed_rad"] = gap
            system.set_active(name, True)
            law, _ = law2, switches.append(k)
        hand.lambda_d = plan.lambda_d(t)
        law2.internal.chooser = None
        if T["handover"][0] <= t < T["handover"][1]:
            hand.alpha, law2.internal.chooser = min_jerk(t, *_span(T["handover"]))[0], hand
        elif T["regrasp"][0] <= t < T["regrasp"][1]:
            hand.alpha, law2.internal.chooser = 1.0 - min_jerk(t, *_span(T["regrasp"]))[0], hand
        q = plant.q
        _, A = system.constraint_rows(q)
        state = State(t, q, plant.measured_qdot(), plant.lambda_meas(A, noisy=True))
        ref = plan.reference(t) if law is law2 else \
            _one_hand_reference(plan, G, t, T, len(redundancy_joints(hold, spec)))
        tau = law.compute(state, ref)
        lam_true = plant.lambda_meas(A)
        plant.step(tau, cfg.dt)
        rec.add(t, q, tau, lam_true, plan.lambda_d(t), mask)
    out = rec.arrays()
    out.update(limits=plant.effort_limits, mask=mask, switches=np.array(switches), events=law2.internal.events,
               log=log, phases=T)
    return out


def _span(window: tuple) -> tuple[float, float]:
    return window[0], window[1] - window[0]


def _one_hand_reference(plan, G: pin.SE3, t: float, T: dict, n_hold: int) -> Reference:
    """Box held at the plan, the redundancy joints at their nominal posture (``n_hold`` of the holding arm),
    the free TCP 3 cm up and back along world z."""
    up = min_jerk(t, *_span(T["away"]))
    down = min_jerk(t, *_span(T["back"]))
    z, zd, zdd = (LIFT * (up[i] - down[i]) for i in range(3))
    box = plan.reference(t)
    k = 6 + n_hold
    th = np.concatenate([box.theta[:k], G.translation + [0.0, 0.0, z], np.zeros(3), box.theta[k:]])
    thd = np.concatenate([box.theta_dot[:k], [0.0, 0.0, zd], np.zeros(3), box.theta_dot[k:]])
    thdd = np.concatenate([box.theta_ddot[:k], [0.0, 0.0, zdd], np.zeros(3), box.theta_ddot[k:]])
    return Reference(th, thd, thdd, None)


def release_metrics(r: dict) -> dict:
    """Box held (pose error over the whole run), torque peak and the per-step torque change at the
    switches against the largest elsewhere, the re-grasp mismatch and the logged basis re-seeds."""
    tau = r["tau"][:, r["mask"].astype(bool)]
    dtau = np.max(np.abs(np.diff(tau, axis=0)), axis=1)            # dtau[k-1] = change into step k
    near = np.zeros(dtau.size, bool)
    for k in r["switches"]:
        near[max(0, k - 3):k + 3] = True
    regrasp = next((e for e in r["log"] if e["event"] == "regrasp"), {})
    return {
        "release_box_pos_max_m": float(np.max(np.linalg.norm(r["e_pos"], axis=1))),
        "release_box_rot_max_rad": float(np.max(np.linalg.norm(r["e_rot"], axis=1))),
        "release_box_held": bool(np.max(np.linalg.norm(r["e_pos"], axis=1)) < 0.01),
        "release_max_abs_torque_ratio": float(np.max(np.abs(tau) / r["limits"])),
        "release_torque_step_at_switch_nm": float(dtau[near].max()) if near.any() else float("nan"),
        "release_torque_step_elsewhere_nm": float(dtau[~near].max()),
        "regrasp_position_mismatch_m": regrasp.get("position_mismatch_m", float("nan")),
        "regrasp_angle_mismatch_rad": regrasp.get("angle_mismatch_rad", float("nan")),
        "basis_events": [{k: v for k, v in e.items() if k != "rows"} for e in r["events"]],
    }
