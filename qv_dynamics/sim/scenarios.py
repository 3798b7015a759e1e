"""Built-in simulation scenarios and the ``qv simulate`` command.

    qv simulate <name> [--t-final T] [--dt DT] [--method projection|kkt_baumgarte]
                       [--integrator rk4|semi_implicit_euler|scipy] [--out DIR] [--no-plot]
                       [--record-every K] [--baumgarte ALPHA BETA] [--redundant] [--start extended|singular]

writes ``DIR/trajectory.npz``, ``DIR/summary.json`` (max_constraint_error, energy_drift_rel, wall_time_s,
steps, sim_time_s, plus scenario extras) and ``DIR/figure.png`` (states, constraint error, energy, λ).

Scenarios:
- ``slider_crank``: paper `aghili-projection-operator` section 8 (equal links, unactuated, passes the
  singular poses q₁ = π/2 + nπ where A = 0, eq. 65–70).
- ``particle_circle``: a particle on a circle of radius ρ; λ = m‖q̇‖²/ρ.
- ``three_link_chain``: planar 3-link arm with its end fixed (Savin lecture eq. 10–11); ``redundant=True``
  lists the closure twice and adds the (identically zero) out-of-plane row.
- ``cart_pendulum``: the floating-base lecture's cart-pendulum through its contact cases: free → P on the
  floor (vertical motion locked, impact) → P fixed (impact) → support removed, P on a wall (horizontal
  motion locked).
- ``panda_plane``: 7-DoF Panda (example-robot-data) with its tool frame ``panda_hand_tcp`` on a plane
  (point_contact axes [z]), gravity compensation + joint PD around a moving reference.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pinocchio as pin

from .. import runfiles
from ..argtypes import nonnegative_float, positive_float, positive_int
from ..linalg import limit_blas_threads
from ..model import ConstrainedSystem
from ..robots import package_share_dir
from .simulation import simulate
from .stepper import INTEGRATORS, METHODS
from .trajectory import Trajectory

OUT_FILES = ("trajectory.npz", "summary.json", "figure.png")  # what `qv simulate` writes into --out


@dataclass
class Scenario:
    """Everything ``simulate`` needs, plus a post-processing hook for scenario-specific figures."""

    name: str
    system: ConstrainedSystem
    q0: np.ndarray
    qdot0: np.ndarray
    tau: Any = None
    schedule: list = field(default_factory=list)
    t_final: float = 1.0
    dt: float = 1e-3
    description: str = ""
    extras: Callable[[Trajectory], dict] | None = None
    simulate_kwargs: dict = field(default_factory=dict)


def urdf_path(name: str) -> str:
    return str(package_share_dir() / "urdf" / f"{name}.urdf")


# ----------------------------------------------------------------------------- slider-crank (sec. 8)
SLIDER_L = 0.3
SLIDER_M = 1.0


def slider_crank_system(**kw) -> ConstrainedSystem:
    """Closure y_C = 0 (eq. 67) as a point contact of the rod tip along world z."""
    return ConstrainedSystem.from_urdf(urdf_path("slider_crank"), constraints=[
        {"type": "point_contact", "frame": "slider_pin", "axes": ["z"], "position": [0.0, 0.0, 0.0],
         "name": "slider"}], **kw)


def singular_passes(q1: np.ndarray) -> int:
    """How many times q₁ crosses a singular pose π/2 + nπ (eq. 65 with odd n: A = l c₁[2 1] = 0)."""
    k = np.floor((np.asarray(q1) - np.pi / 2) / np.pi)
    return int(np.sum(np.abs(np.diff(k))))


def slider_crank(omega: float = 12.0, t_final: float = 10.0, dt: float = 1e-3, start: str = "extended") -> Scenario:
    """Unactuated slider-crank: starts extended (q = 0) or exactly at a singular pose (q₁ = π/2, q₂ = −π),
    with q̇ = ω[1, −2] (the isosceles branch q₂ = 2π − 2q₁ of the paper)."""
    system = slider_crank_system()
    q0 = np.array([0.0, 0.0]) if start == "extended" else np.array([np.pi / 2, -np.pi])
    qdot0 = omega * np.array([1.0, -2.0])

    def extras(tr: Trajectory) -> dict:
        q1 = tr.q[:, 0]
        return {"singular_passes": singular_passes(q1),
                "min_abs_cos_q1": float(np.min(np.abs(np.cos(q1)))) if q1.size else None,
                "q1_final": float(q1[-1]) if q1.size else None,
                "branch_error_max": float(np.max(np.abs(np.sin(0.5 * (tr.q[:, 1] + 2 * q1))))) if q1.size else None}

    return Scenario("slider_crank", system, q0, qdot0, None, [], t_final, dt,
                    "slider-crank of paper sec. 8, unactuated, through the singular poses q1 = pi/2 + n pi", extras)


# ----------------------------------------------------------------------------- particle on a circle
def circle_constraint(rho: float, name: str = "circle") -> dict:
    """Custom constraint Φ = ‖p‖ − ρ on the planar particle (q = p): A = p̂ᵀ, Ȧq̇ = (‖q̇‖² − (p̂·q̇)²)/‖p‖.
    With a unit-normal A the multiplier is the normal force itself: λ = m‖q̇‖²/ρ on the circle."""

    def f(q, qdot):
        r = float(np.hypot(q[0], q[1]))
        nrm = q[:2] / r
        vn = float(nrm @ qdot[:2])
        return (np.array([r - rho]), nrm.reshape(1, 2),
                np.array([(float(qdot[:2] @ qdot[:2]) - vn * vn) / r]))

    return {"type": "custom", "function": f, "rows": 1, "name": name}


def particle_circle(rho: float = 0.5, speed: float = 1.5, t_final: float = 5.0, dt: float = 1e-3) -> Scenario:
    system = ConstrainedSystem.from_urdf(urdf_path("particle_circle"), constraints=[circle_constraint(rho)])
    mass = float(sum(system.model.inertias[j].mass for j in range(1, system.model.njoints)))
    q0 = np.array([rho, 0.0])
    qdot0 = np.array([0.0, speed])

    def extras(tr: Trajectory) -> dict:
        ok = np.isfinite(tr.lam[:, 0])
        pred = mass * np.sum(tr.qdot[ok] ** 2, axis=1) / rho
        err = np.abs(tr.lam[ok, 0] - pred) / np.abs(pred)
        return {"lambda_rel_error_max": float(err.max()) if err.size else None, "mass": mass, "rho": rho}

    return Scenario("particle_circle", system, q0, qdot0, None, [], t_final, dt,
                    "particle on a circle: lambda = m |qdot|^2 / rho", extras)


# ----------------------------------------------------------------------------- planar 3-link closed chain
CHAIN_END = [1.0, 0.0, 0.0]


def three_link_system(redundant: bool = False) -> ConstrainedSystem:
    """Savin eq. 11: tip fixed at (x*, y*) = (1, 0) (world x, z). ``redundant``: the same closure listed
    twice and with the out-of-plane axis y (a row of zeros): 7 rows, rank 2."""
    cons = [{"type": "point_contact", "frame": "tip", "axes": ["x", "z"], "position": CHAIN_END, "name": "end"}]
    if redundant:
        cons = [{"type": "point_contact", "frame": "tip", "axes": ["x", "y", "z"], "position": CHAIN_END,
                 "name": "end"},
                {"type": "point_contact", "frame": "tip", "axes": ["x", "y", "z"], "position": CHAIN_END,
                 "name": "end_again"},
                {"type": "point_contact", "frame": "tip", "axes": ["z"], "position": CHAIN_END, "name": "end_z"}]
    return ConstrainedSystem.from_urdf(urdf_path("planar_3link"), constraints=cons)


def three_link_chain(redundant: bool = False, t_final: float = 3.0, dt: float = 1e-3) -> Scenario:
    system = three_link_system(redundant)
    q0 = np.array([1.2, -1.4, -0.9])  # corrected onto the closure by the first Newton–Raphson pass
    return Scenario("three_link_chain", system, q0, np.zeros(3), None, [], t_final, dt,
                    "planar 3-link arm with its end fixed (Savin eq. 10-11), unactuated under gravity"
                    + (" — redundant constraint rows" if redundant else ""))


# ----------------------------------------------------------------------------- cart-pendulum contact cases
FLOOR_Z = -0.45


def cart_pendulum_system() -> ConstrainedSystem:
    return ConstrainedSystem.from_urdf(urdf_path("cart_pendulum"), constraints=[
        {"type": "point_contact", "frame": "tip", "axes": ["z"], "position": [0.0, 0.0, FLOOR_Z], "name": "floor",
         "active": False},
        {"type": "point_contact", "frame": "tip", "axes": ["x"], "name": "wall", "active": False}])


def cart_pendulum(t_final: float = 2.5, dt: float = 1e-3, phi0: float = 70.0, cart_speed: float = 0.4,
                  torque_amp: float = 0.3) -> Scenario:
    """Lecture cases: free swing; P hits the floor z = −0.45 m (impact; case 2: vertical motion locked,
    N_c = [1, 0]ᵀ, τ moves nothing); at t = 1 s P is also locked horizontally (impact; case 1: rank 2, no motion);
    at t = 1.5 s the floor is removed and only the horizontal lock remains (case 3: P moves vertically)."""
    system = cart_pendulum_system()
    data = system.model.createData()
    fid = system.frame_id("tip")

    def tip_above_floor(t, q, qdot):
        pin.framesForwardKinematics(system.model, data, q)
        return float(data.oMf[fid].translation[2] - FLOOR_Z)

    schedule = [(tip_above_floor, "floor", True), (1.0, "wall", True), (1.5, "floor", False)]

    def tau(t, q, qdot):
        return np.array([0.0, torque_amp * math.sin(2 * math.pi * t)])

    def extras(tr: Trajectory) -> dict:
        errs = [abs(e["energy_loss"] - e["energy_loss_predicted"]) / max(abs(e["energy_loss_predicted"]), 1e-300)
                for e in tr.events if e.get("impact")]
        cases = sorted({int(r) for r in tr.rank[np.isfinite(tr.rank)]})
        return {"impact_energy_error_rel_max": max(errs) if errs else None, "ranks_seen": cases,
                "A_qdot_after_impact_max": max((e["A_qdot_after"] for e in tr.events if e.get("impact")),
                                               default=None)}

    return Scenario("cart_pendulum", system, np.array([0.0, math.radians(phi0)]), np.array([cart_speed, 0.0]),
                    tau, schedule,
                    t_final, dt, "cart-pendulum through the contact cases of the floating-base lecture", extras,
                    {"hold_torque": False})


# ----------------------------------------------------------------------------- Panda tool on a plane
PANDA_Q0 = np.array([0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398])


def panda_plane_system(frame: str = "panda_hand_tcp") -> ConstrainedSystem:
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": frame, "axes": ["z"], "name": "plane"}])


class PandaPlaneTorque:
    """τ = g(q) + K(q_r(t) − q) − D q̇ with a slow sinusoidal joint reference (ZOH at the sim rate)."""

    def __init__(self, system: ConstrainedSystem, q_ref: np.ndarray, kp: float = 60.0, kd: float = 6.0,
                 amp: float = 0.25, freq: float = 0.5):
        self.model = system.model
        self.data = system.model.createData()
        self.q_ref, self.kp, self.kd, self.amp, self.freq = q_ref.copy(), kp, kd, amp, freq

    def __call__(self, t, q, qdot):
        g = pin.computeGeneralizedGravity(self.model, self.data, q)
        qr = self.q_ref.copy()
        qr[0] += self.amp * math.sin(2 * math.pi * self.freq * t)
        qr[3] -= 0.5 * self.amp * (1 - math.cos(2 * math.pi * self.freq * t))  # presses the tool on the plane
        return g + self.kp * (qr - q) - self.kd * qdot


def panda_plane(t_final: float = 2.0, dt: float = 1e-3) -> Scenario:
    system = panda_plane_system()
    ctrl = PandaPlaneTorque(system, PANDA_Q0)
    return Scenario("panda_plane", system, PANDA_Q0.copy(), np.zeros(7), ctrl, [], t_final, dt,
                    "Panda tool frame on a frictionless plane (point_contact axes [z]), gravity compensation + PD",
                    None, {"hold_torque": True})


SCENARIOS: dict[str, Callable[..., Scenario]] = {
    "slider_crank": slider_crank,
    "particle_circle": particle_circle,
    "three_link_chain": three_link_chain,
    "cart_pendulum": cart_pendulum,
    "panda_plane": panda_plane,
}


def build(name: str, **kw) -> Scenario:
    if name not in SCENARIOS:
        from ..errors import UnknownNameError

        raise UnknownNameError(f"unknown scenario {name!r}; choose one of {sorted(SCENARIOS)}")
    return SCENARIOS[name](**kw)


def run(scn: Scenario, t_final: float | None = None, dt: float | None = None, method: str = "projection",
        integrator: str = "rk4", **kw) -> Trajectory:
    """Simulate a scenario; ``stats`` gets the scenario extras."""
    args = dict(scn.simulate_kwargs)
    args.update(kw)
    tr = simulate(scn.system, scn.q0, scn.qdot0, scn.tau, scn.t_final if t_final is None else t_final,
                  scn.dt if dt is None else dt, method=method, integrator=integrator, schedule=scn.schedule, **args)
    tr.stats["scenario"] = scn.name
    tr.stats["description"] = scn.description
    if scn.extras is not None and tr.t.size:
        try:
            tr.stats.update(scn.extras(tr))
        except Exception as exc:  # noqa: BLE001 - extras are diagnostics only
            tr.stats["extras_error"] = f"{type(exc).__name__}: {exc}"
    return tr


def plot(tr: Trajectory, path, title: str = "") -> Path:
    """Four panels: states, constraint error (before/after correction), energy drift, constraint forces."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(4, 1, figsize=(9, 11), sharex=True)
    t = tr.t
    ax[0].plot(t, tr.q, lw=1)
    ax[0].set_ylabel("q")
    ax[0].set_title(title or tr.stats.get("scenario", ""))
    ok = np.isfinite(tr.phi_norm)
    ax[1].semilogy(t[ok], np.maximum(tr.phi_pre[ok], 1e-18), lw=0.8, label="‖Φ‖ before correction")
    ax[1].semilogy(t[ok], np.maximum(tr.phi_norm[ok], 1e-18), lw=0.8, label="‖Φ‖ after correction")
    ax[1].semilogy(t[ok], np.maximum(tr.velocity_error[ok], 1e-18), lw=0.8, label="‖Aq̇‖")
    ax[1].legend(fontsize=8)
    ax[1].set_ylabel("constraint error")
    drift = tr.energy - tr.energy[0] - tr.work + tr.impact_loss
    ax[2].plot(t, drift, lw=1, label="E − E₀ − W_τ + L_impact (drift)")
    ax2 = ax[2].twinx()
    ax2.plot(t, tr.energy, "k:", lw=0.8, label="E")
    ax2.plot(t, tr.kinetic, "g:", lw=0.8, label="K")
    ax2.set_ylabel("E, K [J]")
    ax[2].set_ylabel("drift [J]")
    ax[2].legend(fontsize=8, loc="upper left")
    ax2.legend(fontsize=8, loc="upper right")
    if tr.lam.size and tr.lam.shape[1]:
        for i, lab in enumerate(tr.lam_labels):
            ax[3].plot(t, tr.lam[:, i], lw=1, label=f"λ {lab}")
        ax[3].legend(fontsize=8)
    ax[3].set_ylabel("λ (M q̈ + h = τ − Aᵀλ)")
    ax[3].set_xlabel("t [s]")
    for e in tr.events:
        for a in ax:
            a.axvline(e["t"], color="r" if e.get("impact") else "0.6", lw=0.6, ls="--")
    fig.tight_layout()
    p = Path(path)
    runfiles.savefig(fig, p, dpi=90)
    plt.close(fig)
    return p


def main(argv: list[str] | None = None) -> int:
    limit_blas_threads(1)  # entry point: small matrices, BLAS threads only add latency
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="qv simulate", description="Run a built-in constrained-simulation scenario.")
    ap.add_argument("name", choices=sorted(SCENARIOS))
    ap.add_argument("--t-final", type=positive_float, default=None, help="simulated time [s] (scenario default)")
    ap.add_argument("--dt", type=positive_float, default=None, help="step [s] (default 1e-3)")
    ap.add_argument("--method", choices=METHODS, default="projection")
    ap.add_argument("--integrator", choices=INTEGRATORS, default="rk4")
    ap.add_argument("--out", default=None, help="output folder (default sim_out/<name>)")
    ap.add_argument("--record-every", type=positive_int, default=1, help="keep every k-th step (k >= 1)")
    ap.add_argument("--baumgarte", type=nonnegative_float, nargs=2, default=(20.0, 20.0), metavar=("ALPHA", "BETA"),
                    help="kkt_baumgarte: A q̈ = −Ȧq̇ − 2αAq̇ − β²Φ (default 20 20 [1/s])")
    ap.add_argument("--redundant", action="store_true", help="three_link_chain: redundant constraint rows")
    ap.add_argument("--start", choices=("extended", "singular"), default=None,
                    help="slider_crank: start extended or exactly at the singular pose q1 = pi/2")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    kw: dict = {}
    for option, value, scenario in (("redundant", args.redundant, "three_link_chain"),
                                    ("start", args.start, "slider_crank")):
        if value:  # an option of another scenario would be ignored: refused instead
            if args.name != scenario:
                ap.error(f"--{option} applies to {scenario} only, not {args.name}")
            kw[option] = value
    if args.method != "kkt_baumgarte" and any(a.startswith("--baum") for a in argv):
        ap.error(f"--baumgarte applies to --method kkt_baumgarte only, not {args.method}")
    out = Path(args.out or Path("sim_out") / args.name)
    try:  # before the run: an unwritable folder is refused now, an earlier run's files are removed (and listed)
        runfiles.prepare_out_dir(out, OUT_FILES)
    except runfiles.OutputError as exc:
        ap.exit(2, f"qv simulate: {exc}\n")
    scn = build(args.name, **kw)
    print(f"computing {args.name} ({args.method}, {args.integrator})", flush=True)  # (the signal tests wait for it)
    tr = run(scn, args.t_final, args.dt, args.method, args.integrator, record_every=args.record_every,
             baumgarte=tuple(args.baumgarte))
    if not args.no_plot and tr.t.size:
        plot(tr, out / "figure.png", f"{scn.name} ({args.method}, {args.integrator})")
    tr.save(out)  # summary.json last: a run interrupted before it leaves none (runfiles)
    s = tr.stats
    print(json.dumps({k: s.get(k) for k in ("scenario", "max_constraint_error", "energy_drift_rel", "wall_time_s",
                                            "steps", "sim_time_s", "real_time_factor")}, indent=1))
    if not tr.ok:
        print(f"simulation stopped: {tr.error}", file=sys.stderr)
    print(f"wrote {out}/trajectory.npz, summary.json" + ("" if args.no_plot else ", figure.png"))
    return 0 if tr.ok else 1


if __name__ == "__main__":
    sys.exit(main())
