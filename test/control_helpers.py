"""Shared set-up for test/test_control*.py: the Panda sliding on a plane, the five-bar, recorders and fits.

The closed loops run on the simulator (qv_dynamics.simulate) through its public contract only; every
figure is recomputed from the recorded trajectory with the core's functions (not read back from the law).
"""
from __future__ import annotations

import numpy as np

from qv_control import Reference, TrajectoryReference
from qv_dynamics import ConstrainedSystem, quasi_decompose

PLANE = [{"type": "point_contact", "frame": "panda_hand", "axes": ["z"], "name": "plane"}]
Q0 = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
COORDS = ["panda_hand.x", "panda_hand.y", "panda_hand.rx", "panda_hand.ry", "panda_hand.rz", "panda_joint3"]
LAMBDA_D = -10.0  # the tool presses 10 N down on the plane (constraint force on the robot −Aᵀλ = +10 N up)


def panda_pair():
    """(plant, model): two independent Panda systems whose hand slides on the plane z = z(Q0)."""
    plant = ConstrainedSystem.from_urdf("panda", constraints=PLANE)
    model = ConstrainedSystem.from_urdf("panda", constraints=PLANE)
    plant.anchor(Q0)
    model.anchor(Q0)
    return plant, model


def circle_reference(theta0: np.ndarray, offset=(0.02, -0.01), radius: float = 0.05, omega: float = 2.0,
                     lambda_d=LAMBDA_D) -> TrajectoryReference:
    """θ_d(t): hand x, y on a circle of ``radius`` (first point offset from θ0), orientation and joint 3 held."""
    off = np.zeros(theta0.size)
    off[:2] = offset
    R, w = radius, omega

    def th(t):
        out = theta0 + off
        out[:2] += [R * np.sin(w * t), R * (1.0 - np.cos(w * t))]
        return out

    def thd(t):
        out = np.zeros(theta0.size)
        out[:2] = [R * w * np.cos(w * t), R * w * np.sin(w * t)]
        return out

    def thdd(t):
        out = np.zeros(theta0.size)
        out[:2] = [-R * w * w * np.sin(w * t), R * w * w * np.cos(w * t)]
        return out

    lam = lambda_d if callable(lambda_d) else [lambda_d]
    return TrajectoryReference(th, thd, thdd, lambda_=lam, size=theta0.size, lambda_size=1)


class Recorder:
    """Wraps a law: forwards compute() and keeps (t, τ, copies of chosen law.last entries, saturation);
    ``disturbance(t, q) -> τ_d`` is added to the plant input (not seen by the law)."""

    def __init__(self, law, keys=(), disturbance=None):
        self.law = law
        self.keys = keys
        self.disturbance = disturbance
        self.rows: list[dict] = []

    def compute(self, state, reference):
        tau = self.law.compute(state, reference)
        row = {"t": state.t, "tau": tau.copy(), "sat": self.law.saturation}
        for k in self.keys:
            v = self.law.last.get(k)
            row[k] = v.copy() if isinstance(v, np.ndarray) else v
        self.rows.append(row)
        if self.disturbance is not None:
            tau = tau + self.disturbance(state.t, state.q)
        return tau

    def series(self, key):
        return np.array([r[key] for r in self.rows])


def fit_rate(t: np.ndarray, x: np.ndarray) -> float:
    """Least-squares slope of log x(t): the exponential decay rate (positive for decay)."""
    return float(-np.polyfit(t, np.log(x), 1)[0])


def theta_terms(system, coords, q, qdot):
    """θ, θ̇ and D = (∂θ/∂q)Q⁻ᵀV₂ (eq. 34) at one recorded state, from the core's quasi_decompose."""
    terms = system.evaluate(q, qdot)
    qs = quasi_decompose(terms)
    kin = coords.evaluate(q, qdot)
    return kin.theta, kin.theta_dot, kin.J @ qs.Qinv.T @ qs.V2, terms, qs


def composite_error(system, coords, q, qdot, ref: Reference, kp) -> np.ndarray:
    """ε = D⁻¹(θ̇ − θ̇_d + K_p(θ − θ_d)) = (v_r − v_rd) + D⁻¹K_p(θ − θ_d) (eq. 35); ‖ε‖ is basis-free."""
    th, thd, D, _, _ = theta_terms(system, coords, q, qdot)
    return np.linalg.solve(D, thd - ref.theta_dot + kp * (th - ref.theta))


def fivebar_urdf(l1: float = 0.2, l2: float = 0.25, half_base: float = 0.1, mass: float = 0.5) -> str:
    """Planar five-bar in the vertical x–z plane: two 2-link chains from motors at x = ∓half_base, joints
    about y; the tips (frames tip_a, tip_b) are closed by a loop_closure in x, z."""
    def link(name, length):
        izz = mass * length ** 2 / 12.0
        return (f'<link name="{name}"><inertial><origin xyz="0 0 {length / 2}"/><mass value="{mass}"/>'
                f'<inertia ixx="{izz}" ixy="0" ixz="0" iyy="{izz}" iyz="0" izz="1e-4"/></inertial></link>')

    def joint(name, parent, child, xyz):
        return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/><child link="{child}"/>'
                f'<origin xyz="{xyz}"/><axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="50" velocity="10"/>'
                f'</joint>')

    parts = ['<robot name="fivebar"><link name="base"/>']
    for side, x in (("a", -half_base), ("b", half_base)):
        parts += [link(f"{side}1", l1), link(f"{side}2", l2),
                  joint(f"{side}1_joint", "base", f"{side}1", f"{x} 0 0"),
                  joint(f"{side}2_joint", f"{side}1", f"{side}2", f"0 0 {l1}"),
                  f'<link name="tip_{side}"/><joint name="tip_{side}_fixed" type="fixed"><parent link="{side}2"/>'
                  f'<child link="tip_{side}"/><origin xyz="0 0 {l2}"/></joint>']
    parts.append("</robot>")
    return "".join(parts)


FIVEBAR_LOOP = [{"type": "loop_closure", "frame_a": "tip_a", "frame_b": "tip_b", "axes": ["x", "z"],
                 "name": "loop"}]


def fivebar(q_guess=(-0.3, 0.9, 0.3, -0.9)):
    """A five-bar system and a closed configuration near ``q_guess`` (Newton–Raphson q ← q − A⁺Φ)."""
    sysm = ConstrainedSystem.from_urdf(fivebar_urdf(), constraints=FIVEBAR_LOOP)
    q = np.array(q_guess, float)
    for _ in range(50):
        phi, A = sysm.constraint_rows(q)
        if np.linalg.norm(phi) < 1e-14:
            break
        q = q - np.linalg.pinv(A) @ phi
    return sysm, q


def numpy_ticks(law) -> list:
    """A counter of the ticks the law's numpy path serves (its ``_compute`` wrapped on the instance): the others
    went through the whole compiled tick."""
    calls = [0]
    inner = law._compute

    def counted(*args, **kw):
        calls[0] += 1
        return inner(*args, **kw)
    law._compute = counted
    return calls
