"""``qv demo bimanual``: two arms hold a box (by default two Pandas and a 2 kg box; any pair from the config's
``system:``, :class:`qv_dynamics.sim.bimanual_spec.BimanualSpec`); the box pose is tracked in the motion
channel and the squeeze in the internal-force channel of the passive-joint law, against two independent
Cartesian impedance controllers (the baseline), in MuJoCo with weld grasps.

    qv demo bimanual [--out DIR] [--config config/bimanual.yaml] [--short] [--conditions ideal|realistic]

Runs (each from rest at the nominal pose, 1 kHz control, MuJoCo at 2 kHz):

1. ``ours``: box 10 cm / 20° along a minimum-jerk path in 4 s, squeeze 20 N, then a squeeze step to 40 N;
2. ``baseline``: the same plan through :class:`~qv_control.laws.dual_impedance.DualArmImpedance` (same
   K_P/K_D, each arm carrying half the box weight and the desired squeeze as feed-forward);
3. ``release``: the right hand hands its load over (internal force with a chooser), lets go, moves 3 cm
   away and back while the left hand holds the box alone, re-grasps, and the squeeze returns to 20 N
   (:mod:`qv_control.demo.bimanual_release`).

The squeeze is the internal force along the grasp line, s = ½(f_L − f_R)·u (u from the left to the right
grasp); the other five internal components are those of the unit squeeze with the least torque in the
kinetic metric (τᵀM⁻¹τ) at the nominal pose (λ̂, rotated with the planned box), so λ_d = s_d·λ̂: with the
internal force fully prescribed the torque for a given motion is unique, and this is where its minimum
norm is chosen.
Writes ``summary.json``, ``runs.npz`` and the figures (:mod:`qv_control.demo.bimanual_report`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields, replace

import numpy as np
import pinocchio as pin

from qv_dynamics.plants.mujoco_loops import MujocoLoopPlant, PlantConditions
from qv_dynamics.sim import bimanual as arms
from qv_dynamics.sim.bimanual import DEFAULT, arm_joints, bimanual_system, nominal_q, redundancy_joints, tcp_frame
from qv_dynamics.sim.bimanual_spec import BimanualSpec, BimanualSpecError
from qv_dynamics.state import Reference, State

from ..laws import make_law
from ..laws.dual_impedance import ArmTarget, DualArmImpedance
from ..laws.internal_force import internal_force_basis

BOX = "box"

CONDITIONS = {
    "ideal": {},
    # what the controllers' model does not know (the same for ours and the baseline)
    "realistic": {"mass_scale": {"box_joint": 1.1}, "joint_damping": 0.2, "frictionloss": 0.2,
                  "site_offsets": {"box_grasp_{first}": ((0.0, 0.002, 0.0), (0.0175, 0.0, 0.0))},
                  "force_noise": 0.2, "velocity_noise": 1e-3, "seed": 14},
}


@dataclass
class BimanualConfig:
    kp: float = 900.0            # G_P = K_P (1/s²): 30 rad/s
    kd: float = 60.0             # G_D = K_D (1/s): critically damped
    kf: float = 0.05             # squeeze PI (force channel); small k_f: the measured force is noisy
    ki: float = 30.0
    squeeze: float = 20.0        # N
    squeeze_step: float = 40.0   # N, from t_step = t_settle + t_move + t_hold
    squeeze_ramp: float = 0.1    # s, minimum-jerk ramp of the step (0: a jump; the grasps' compliance then rings)
    move: tuple = (0.0, 0.06, 0.08)   # m (10 cm)
    turn_deg: float = 20.0
    turn_axis: tuple = (0.0, 0.0, 1.0)
    t_settle: float = 0.5
    t_move: float = 4.0
    t_hold: float = 1.0
    t_after_step: float = 1.0
    dt: float = 1e-3
    conditions: str = "realistic"
    internal_tol: float = 0.05   # λ_d is planned: its grasp line differs from the real one by the tracking error
    t_grasp: float = 0.3         # the grasps settle (plant only, before t = 0)
    system: BimanualSpec = DEFAULT   # the two arms and the box

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "bimanual") -> "BimanualConfig":
        """The config from a mapping (YAML), every value checked: a bad one raises BimanualSpecError naming
        ``<where>.<key>``; ``system`` is a :class:`BimanualSpec` mapping (arms, object)."""
        if d is not None and not isinstance(d, dict):
            raise BimanualSpecError(f"{where}: expected a mapping, got {d!r}")
        d = dict(d or {})
        names = {f.name for f in fields(cls)}
        extra = sorted(set(d) - names)
        if extra:
            raise BimanualSpecError(f"{where}: unknown key(s) {extra}; known: {sorted(names)}")
        out = {}
        for k, v in d.items():
            key = f"{where}.{k}"
            if k == "system":
                out[k] = arms.check(BimanualSpec.from_dict(v, key), key)
            elif k == "conditions":
                if v not in CONDITIONS:
                    raise BimanualSpecError(f"{key}: expected one of {sorted(CONDITIONS)}, got {v!r}")
                out[k] = v
            elif k in ("move", "turn_axis"):
                if not isinstance(v, (list, tuple)) or len(v) != 3 or not all(_finite(x) for x in v):
                    raise BimanualSpecError(f"{key}: expected 3 finite numbers, got {v!r}")
                out[k] = tuple(float(x) for x in v)
            else:
                low = _LOWER.get(k, "> 0")
                if not _finite(v) or (low == "> 0" and v <= 0) or (low == ">= 0" and v < 0):
                    raise BimanualSpecError(f"{key}: expected a finite number {low}, got {v!r}".replace(" any", ""))
                out[k] = float(v)
        if "turn_axis" in out and float(np.linalg.norm(out["turn_axis"])) == 0.0 and out.get("turn_deg", 1.0):
            raise BimanualSpecError(f"{where}.turn_axis: must not be zero")
        return cls(**out)

    def shortened(self) -> "BimanualConfig":
        """The CI variant: a 1 s move (same amplitude), short holds."""
        return replace(self, t_settle=0.2, t_move=1.0, t_hold=0.3, t_after_step=0.3)

    @property
    def t_step(self) -> float:
        return self.t_settle + self.t_move + self.t_hold

    @property
    def t_final(self) -> float:
        return self.t_step + self.t_after_step

    def plant_conditions(self) -> PlantConditions:
        if self.conditions not in CONDITIONS:
            raise BimanualSpecError(f"conditions must be one of {sorted(CONDITIONS)}, got {self.conditions!r}")
        c = dict(CONDITIONS[self.conditions])
        if "site_offsets" in c:     # the first arm's grasp is not where the model says
            c["site_offsets"] = {k.format(first=self.system.sides[0]): v for k, v in c["site_offsets"].items()}
        return PlantConditions(**c)


#: the bound of each number of the config (the others: > 0)
_LOWER = {"turn_deg": "any", "squeeze": "any", "squeeze_step": "any", "kf": ">= 0", "ki": ">= 0", "t_settle": ">= 0",
          "t_hold": ">= 0", "t_after_step": ">= 0", "t_grasp": ">= 0", "squeeze_ramp": ">= 0"}


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def min_jerk(t: float, t0: float, T: float) -> tuple[float, float, float]:
    """s(t) = 10x³ − 15x⁴ + 6x⁵, x = (t − t0)/T clipped to [0, 1], and its first two time derivatives."""
    if t <= t0 or t >= t0 + T:
        return (0.0 if t <= t0 else 1.0), 0.0, 0.0
    x = (t - t0) / T
    return (10 * x ** 3 - 15 * x ** 4 + 6 * x ** 5, (30 * x ** 2 - 60 * x ** 3 + 30 * x ** 4) / T,
            (60 * x - 180 * x ** 2 + 120 * x ** 3) / T ** 2)


class BoxPlan:
    """The planned box pose (θ = box position, rotation vector relative to the start, the arms' redundancy
    joints at their nominal posture) and the desired multiplier λ_d(t) = s_d(t)·(λ̂ rotated with the planned
    box)."""

    def __init__(self, cfg: BimanualConfig, system, q0: np.ndarray, mask: np.ndarray):
        self.cfg = cfg
        M0 = system.frame_placement(q0, BOX)
        self.p0, self.R0 = M0.translation.copy(), M0.rotation.copy()
        self.dp = np.asarray(cfg.move, float)
        axis = np.asarray(cfg.turn_axis, float)
        self.phi = np.deg2rad(cfg.turn_deg) * axis / np.linalg.norm(axis)
        self.sides = cfg.system.sides
        self.grasp = {s: M0.actInv(system.frame_placement(q0, f"box_grasp_{s}")) for s in self.sides}
        qn = nominal_q(system, spec=cfg.system)
        self.lam_hat = squeeze_direction(system, qn, mask)
        self.red0 = np.array([qn[system.joint_q_index(j)] for j in redundancy_joints(spec=cfg.system)])

    def box(self, t: float):
        """(pose, twist [v; ω], classical acceleration [a; α]) of the planned box, world axes."""
        s, sd, sdd = min_jerk(t, self.cfg.t_settle, self.cfg.t_move)
        R = pin.exp3(s * self.phi) @ self.R0
        return pin.SE3(R, self.p0 + s * self.dp), np.concatenate([sd * self.dp, sd * self.phi]), \
            np.concatenate([sdd * self.dp, sdd * self.phi])

    def squeeze(self, t: float) -> float:
        """s_d(t): ``squeeze``, then ``squeeze_step`` from t_step along a minimum-jerk ramp of ``squeeze_ramp``
        s (a jump for 0: with compliant grasps the closed loop then rings, ~15 N on 20 → 40 N in MuJoCo)."""
        c = self.cfg
        s = min_jerk(t, c.t_step, c.squeeze_ramp)[0] if c.squeeze_ramp > 0 else float(t >= c.t_step)
        return c.squeeze + s * (c.squeeze_step - c.squeeze)

    def lambda_d(self, t: float, squeeze: float | None = None) -> np.ndarray:
        s = min_jerk(t, self.cfg.t_settle, self.cfg.t_move)[0]
        R = pin.exp3(s * self.phi)
        return (self.squeeze(t) if squeeze is None else squeeze) * (np.kron(np.eye(4), R) @ self.lam_hat)

    def reference(self, t: float) -> Reference:
        s, sd, sdd = min_jerk(t, self.cfg.t_settle, self.cfg.t_move)
        z = np.zeros(self.red0.size)
        th = np.concatenate([self.p0 + s * self.dp, s * self.phi, self.red0])
        thd = np.concatenate([sd * self.dp, sd * self.phi, z])
        thdd = np.concatenate([sdd * self.dp, sdd * self.phi, z])
        return Reference(th, thd, thdd, self.lambda_d(t))

    def arm_targets(self, t: float) -> list[ArmTarget]:
        """Grasp-frame targets of the baseline: pose, twist and acceleration of each grasp frame of the
        planned box, feed-forward wrench = half the box weight (with its moment) + the planned λ_d rows."""
        M, tw, acc = self.box(t)
        lam_d = self.lambda_d(t)
        out = []
        for i, side in enumerate(self.sides):
            Mg = M * self.grasp[side]
            r = Mg.translation - M.translation
            v, w, a, al = tw[:3], tw[3:], acc[:3], acc[3:]
            f = 0.5 * self.cfg.system.object.mass * GRAVITY_UP     # the model's box mass
            wrench = np.concatenate([f, np.cross(-r, f)]) + lam_d[6 * i:6 * i + 6]
            out.append(ArmTarget(Mg, np.concatenate([v + np.cross(w, r), w]),
                                 np.concatenate([a + np.cross(al, r) + np.cross(w, np.cross(w, r)), al]), wrench))
        return out


GRAVITY_UP = np.array([0.0, 0.0, 9.81])


def squeeze_weights(system, q: np.ndarray) -> np.ndarray:
    """σ with σᵀλ = s = ½(f_L − f_R)·u, u the unit vector from the left to the right grasp at q."""
    first, second = getattr(system, "bimanual_spec", DEFAULT).sides
    pl = system.frame_placement(q, f"box_grasp_{first}").translation
    pr = system.frame_placement(q, f"box_grasp_{second}").translation
    u = (pr - pl) / np.linalg.norm(pr - pl)
    return 0.5 * np.concatenate([u, np.zeros(3), -u, np.zeros(3)])


def squeeze_direction(system, q: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """λ̂ = E z: unit squeeze (σᵀλ̂ = 1) whose torque τ = AᵀEz is least in the kinetic metric, τᵀM⁻¹τ, over
    the internal forces (Lagrange: z = G⁻¹c/(cᵀG⁻¹c), G = EᵀAM⁻¹AᵀE, c = Eᵀσ). At the nominal pose this
    puts the squeeze on the shoulders (0.36 N·m/N on joint 2) instead of the 12 N·m wrists (0.21 N·m/N on
    joint 6 with zero internal moments, which saturates at 40 N)."""
    _, A = system.constraint_rows(q)
    E = internal_force_basis(A, mask).E
    AE = A.T @ E
    G = AE.T @ np.linalg.solve(system.mass_matrix(q), AE)
    c = E.T @ squeeze_weights(system, q)
    z = np.linalg.solve(G, c)
    return E @ (z / (c @ z))


class Recorder:
    """Per-step log of a run: box pose error against the plan, true λ, squeeze, torques."""

    def __init__(self, plan: BoxPlan, system):
        self.plan, self.system = plan, system
        self.rows: dict[str, list] = {k: [] for k in ("t", "e_pos", "e_rot", "box_pos", "squeeze", "squeeze_d",
                                                      "internal_err", "tau", "lam")}

    def add(self, t: float, q: np.ndarray, tau: np.ndarray, lam_true: np.ndarray | None, lam_d: np.ndarray | None,
            mask: np.ndarray) -> None:
        M = self.system.frame_placement(q, BOX)
        Md = self.plan.box(t)[0]
        r = self.rows
        r["t"].append(t)
        r["e_pos"].append(M.translation - Md.translation)
        r["e_rot"].append(pin.log3(M.rotation @ Md.rotation.T))
        r["box_pos"].append(M.translation.copy())
        r["tau"].append(np.asarray(tau, float).copy())
        if lam_true is not None and lam_true.size == 12:
            _, A = self.system.constraint_rows(q)
            E = internal_force_basis(A, mask).E
            r["squeeze"].append(float(squeeze_weights(self.system, q) @ lam_true))
            r["internal_err"].append(float(np.linalg.norm(E.T @ (lam_true - lam_d))) if lam_d is not None else np.nan)
            r["lam"].append(lam_true.copy())
        else:
            r["squeeze"].append(np.nan)
            r["internal_err"].append(np.nan)
            r["lam"].append(np.full(12, np.nan))
        r["squeeze_d"].append(float(squeeze_weights(self.system, q) @ lam_d) if lam_d is not None and lam_d.size == 12
                              else np.nan)

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.asarray(v, float) for k, v in self.rows.items()}


def _setup(cfg: BimanualConfig):
    system = bimanual_system(spec=cfg.system)
    q0 = nominal_q(system)
    mask = np.zeros(system.nv, bool)
    for nm in arm_joints(spec=cfg.system):
        mask[system.joint_v_index(nm)] = True
    plant = MujocoLoopPlant(system, conditions=cfg.plant_conditions())
    plant.reset(q0)
    hold_still(plant, system, q0, mask, cfg.t_grasp)
    q_start = plant.q    # the plan starts where the settled box is (the real grasps may differ from the model)
    return system, q_start, mask, plant, BoxPlan(cfg, system, q_start, mask)


def hold_still(plant: MujocoLoopPlant, system, q0: np.ndarray, mask: np.ndarray, duration: float) -> None:
    """Make the grasps before the run: hold the model's static torque (gravity + the minimum-norm static
    multiplier on the passive rows) for ``duration`` s, so the welds settle where the real grasps are
    (they differ from the model under ``site_offsets``). Every controller starts from this state."""
    g = pin.computeGeneralizedGravity(system.model, system.model.createData(), q0)
    _, A = system.constraint_rows(q0)
    lam = np.linalg.lstsq(A[:, ~mask].T, -g[~mask], rcond=None)[0]
    tau = np.where(mask, g + A.T @ lam, 0.0)
    plant.step(tau, duration)
    plant.data.time = 0.0


def coordinates(R0: np.ndarray, spec: BimanualSpec = DEFAULT, sides=None) -> list:
    """θ = box position, box rotation vector log₃(R R0ᵀ), the redundancy joints of the arms ``sides`` (both by
    default; k = n − r: 8 for two 7-DoF arms, 6 for two 6-DoF arms)."""
    return [{"frame": BOX, "axes": ["x", "y", "z", "rx", "ry", "rz"], "rotation_reference": R0.tolist()},
            *[j for s in (spec.sides if sides is None else sides) for j in redundancy_joints(s, spec)]]


def make_ours(cfg: BimanualConfig, system, q0, plan: "BoxPlan"):
    return make_law("passive", system, coordinates=coordinates(plan.R0, cfg.system),
                    actuated=arm_joints(spec=cfg.system), kp=cfg.kp,
                    kd=cfg.kd, kf=cfg.kf, ki=cfg.ki, q0=q0, internal_tol=cfg.internal_tol)


def run(cfg: BimanualConfig, kind: str = "ours") -> dict:
    """One run of ``kind`` = ours | baseline in MuJoCo (module doc); returns the recorded arrays."""
    system, q0, mask, plant, plan = _setup(cfg)
    law = make_ours(cfg, system, q0, plan) if kind == "ours" else \
        DualArmImpedance(system, [(arm_joints(s, cfg.system), tcp_frame(s, cfg.system)) for s in cfg.system.sides],
                         kp=cfg.kp, kd=cfg.kd,
                         kp_null=cfg.kp, kd_null=cfg.kd, q_null=q0)
    rec = Recorder(plan, system)
    steps = int(round(cfg.t_final / cfg.dt))
    wall = time.perf_counter()
    for k in range(steps):
        t = k * cfg.dt
        q = plant.q
        _, A = system.constraint_rows(q)
        lam_true = plant.lambda_meas(A)
        if kind == "ours":
            state = State(t, q, plant.measured_qdot(), plant.lambda_meas(A, noisy=True))
            tau = law.compute(state, plan.reference(t))
        else:
            tau = law.compute(q, plant.measured_qdot(), plan.arm_targets(t))
        plant.step(tau, cfg.dt)
        rec.add(t, q, tau, lam_true, plan.lambda_d(t), mask)
    out = rec.arrays()
    out["wall_s"] = np.array(time.perf_counter() - wall)
    out["limits"] = plant.effort_limits
    out["mask"] = mask
    return out


def _rms(x: np.ndarray) -> float:
    x = np.asarray(x, float)
    return float(np.sqrt(np.mean(np.sum(x * x, axis=1) if x.ndim == 2 else x * x))) if x.size else float("nan")


def metrics(r: dict, cfg: BimanualConfig) -> dict:
    """The acceptance figures of one run (windows: the move, the settled hold, the squeeze step)."""
    t = r["t"]
    move = (t >= cfg.t_settle) & (t <= cfg.t_settle + cfg.t_move)
    held = (t >= cfg.t_settle) & (t < cfg.t_step)
    after = t >= cfg.t_step
    late = t >= cfg.t_step + 0.2
    pre = (t >= cfg.t_step - 0.2) & (t < cfg.t_step)
    sq, sqd = r["squeeze"], r["squeeze_d"]
    tau = r["tau"][:, r["mask"].astype(bool)]
    i0 = int(np.searchsorted(t, cfg.t_step))
    return {
        "object_pos_rms_m": _rms(r["e_pos"][move]),
        "object_rot_rms_rad": _rms(r["e_rot"][move]),
        "object_pos_max_m": float(np.max(np.linalg.norm(r["e_pos"][move], axis=1))),
        "internal_force_rms_error_rel": _rms(sq[held] - sqd[held]) / cfg.squeeze,
        "internal_force_change_n": float(np.max(np.abs(sq[move] - sqd[move]))),
        "internal_vector_rms_error_n": _rms(r["internal_err"][held]),
        "squeeze_step_box_move_m": float(np.max(np.linalg.norm(r["box_pos"][after] - r["box_pos"][i0], axis=1))),
        "squeeze_after_step_rms_error_rel": _rms(sq[late] - sqd[late]) / cfg.squeeze_step,
        # the squeeze's ripple before the step (noise, grasp offsets) and how far it goes beyond the new target
        # after it, both measured by the plant (its true λ), the latter signed along the step
        "squeeze_ripple_before_step_n": float(np.max(np.abs(sq[pre] - sqd[pre]))) if pre.any() else 0.0,
        "squeeze_step_overshoot_n": float(np.max(np.sign(cfg.squeeze_step - cfg.squeeze)
                                                 * (sq[after] - cfg.squeeze_step))),
        "max_abs_torque_ratio": float(np.max(np.abs(tau) / r["limits"])),
        "wall_s": float(r["wall_s"]),
        **({"ros": r["ros"]} if "ros" in r else {}),
    }
