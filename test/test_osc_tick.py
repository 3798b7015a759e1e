"""The operational-space laws' compiled ticks (qv_control.kernels.osc, kernels.osc_body and their pieces in
kernels.osc_parts and kernels.osc_frames) against their numpy paths (``compiled=False``, the reference): the same
torques within 1e-9 (relative to the largest |τ|) on closed-loop states, random walks and random states with
resets, in free motion and in contact, with every option the kernels serve (task rows, moment rows, damping, the
motion integral, the force PI, redundant rows, passive joints, rows below the rank floor with the carried tangent,
effort limits that saturate); the declined samples raise what the numpy path raises and the next sample continues
from the same state; without numba the laws run their numpy paths and equal the compiled ones.
Each pair of laws is fed the same states (two laws on one trajectory, so rounding cannot grow through a loop).
Measured differences (relative): ≤ 1e-13 on the closed loops and the formulation rows' scenes, ≤ 1e-11 on random
Panda states (cond(JM⁻¹Jᵀ) up to ~1e5).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_kernel_room import _BLOCK as REFUSE_NUMBA  # (a sitecustomize that refuses numba's import)

from qv_control.coordinates import as_coordinates
from qv_control.laws.base import ForcePI
from qv_control.laws.osc import OperationalSpaceLaw
from qv_control.laws.osc_constrained import ConstrainedOperationalSpaceLaw
from qv_control.saturation import SaturationStatus, saturate
from qv_dynamics import ConstrainedSystem
from qv_dynamics.errors import DimensionError, NonFiniteError, NotPositiveDefiniteError
from qv_dynamics.state import Reference, State

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-9
FRAME = "panda_hand_tcp"
COORDS = [f"{FRAME}.x", f"{FRAME}.y", f"{FRAME}.rx", f"{FRAME}.ry", f"{FRAME}.rz", "panda_joint3"]


def _pair(cls, *args, **kw):
    fast, ref = cls(*args, **kw), cls(*args, compiled=False, **kw)
    assert fast._fast is not None, "the operational-space kernels are not in the cache (qv warm)"
    return fast, ref


class _Worst:
    def __init__(self):
        self.rel, self.served = 0.0, 0

    def check(self, fast, ref, state, reference):
        t1, t2 = fast.compute(state, reference), ref.compute(state, reference)
        scale = max(float(np.abs(t2).max()), 1e-9)
        self.rel = max(self.rel, float(np.abs(t1 - t2).max()) / scale)
        self.served += fast._stale
        return t1


def _table():
    doc = yaml.safe_load((ROOT / "config" / "panda_table_model.yaml").read_text())
    return ConstrainedSystem.from_yaml(doc), np.asarray(doc["initial"]["q"], float)


class _Both:
    """A controller for the simulator that runs both laws on each state and applies the compiled one's τ."""

    def __init__(self, fast, ref, reference):
        self.fast, self.ref, self.reference, self.worst = fast, ref, reference, _Worst()

    def compute(self, state, reference=None):
        return self.worst.check(self.fast, self.ref, state, self.reference(state.t))


@pytest.mark.parametrize("kind", ["osc", "osc_constrained"])
def test_closed_loop_on_the_panda_table_equals_the_numpy_path(kind):
    """0.4 s of the table task (tool on the table, pressing 10 N, a 2 cm step of x_d), the simulator closing the
    loop with the compiled law, the numpy law fed the same states (measured λ from the simulator)."""
    from qv_dynamics.sim import simulate

    system, q0 = _table()
    p0 = system.frame_placement(q0, FRAME)
    z = float(system.constraint("contact").position[2])
    if kind == "osc":
        fast, ref = _pair(OperationalSpaceLaw, system, frame=FRAME, kp=60.0, kd=120.0, kf=0.3, ki=30.0,
                          ki_motion=900.0, q_null=q0, rotation=p0.rotation)
        target = np.array([p0.translation[0] + 0.02, p0.translation[1], z])
    else:
        fast, ref = _pair(ConstrainedOperationalSpaceLaw, system, COORDS, kp=400.0, kd=40.0, kf=0.3, ki=30.0)
        target = as_coordinates(system, COORDS).evaluate(q0, np.zeros(7)).theta + np.r_[0.02, 0, 0, 0, 0, 0]
    both = _Both(fast, ref, lambda t: Reference(theta=target, lambda_=np.array([-10.0])))
    tr = simulate(system, q0, np.zeros(7), both, 0.4, 1e-3)
    assert tr.ok, tr.error
    print(f"\n{kind} closed loop: {both.worst.served} compiled samples, worst relative τ difference "
          f"{both.worst.rel:.1e}")
    assert both.worst.served >= 395 and both.worst.rel <= TOL


def _tool_variants():
    return [dict(), dict(axes=("x", "z", "ry"), force_axis="z", moment_axes=("ry",)), dict(damping=0.2),
            dict(ki_motion=3600.0, effort_limits=8.0), dict(ki=0.0, kf=0.0, effort_limits=[87.0] * 4 + [0.5] * 3)]


@pytest.mark.parametrize("variant", range(5))
def test_tool_law_random_walks_and_random_states_with_resets(variant):
    """A random walk (q, q̇, the contact switched, λ_meas present or not, repeated, backward and late stamps,
    resets) then independent random states, for each option of the tool law; torques equal within 1e-9."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": FRAME, "axes": ["z"], "name": "contact", "active": False}])
    rng = np.random.default_rng(40 + variant)
    q0 = system.random_configuration(rng) * 0.5
    pl = system.frame_placement(q0, FRAME)
    kw = dict(frame=FRAME, kp=60.0, kd=120.0, kf=0.5, ki=30.0, q_null=q0, rotation=pl.rotation)
    kw.update(_tool_variants()[variant])
    fast, ref = _pair(OperationalSpaceLaw, system, **kw)
    worst, q, t = _Worst(), q0.copy(), 0.0
    k = 1 + len(kw.get("moment_axes", ()))
    for i in range(400):
        walk = i < 250
        q = q + 0.003 * rng.normal(size=7) if walk else system.random_configuration(rng) * 0.6
        t += rng.choice([1e-3, 1e-3, 1e-3, 0.0, -2e-3, 0.03]) if walk else 1e-3
        if rng.uniform() < 0.03:
            system.set_active("contact", not system.constraint("contact").active)
        if rng.uniform() < 0.01:
            fast.reset()
            ref.reset()
        meas = None if rng.uniform() < 0.2 else -10.0 + rng.normal(size=k)
        st = State(t=t, q=q, qdot=0.3 * rng.normal(size=7), lambda_meas=meas)
        r = Reference(theta=pl.translation + 0.01 * rng.normal(size=3),
                      theta_dot=None if i % 7 == 0 else 0.05 * rng.normal(size=3), lambda_=-10.0 + np.zeros(k))
        worst.check(fast, ref, st, None if i % 50 == 3 else r)
    np.testing.assert_allclose(fast.integral_torque, ref.integral_torque, rtol=TOL, atol=TOL)
    system.set_active("contact", False)
    print(f"\ntool law {_tool_variants()[variant]}: worst relative τ difference {worst.rel:.1e} ({worst.served} "
          "compiled)")
    assert worst.served >= 380 and worst.rel <= TOL


def _body_cases():
    from qv_control.demo.cases import closed_chain_force as crank_row
    from qv_control.demo.cases.face import face_pose, face_system
    from qv_control.demo.cases.singular_pass import X_STAR, fork_system

    face, crank, fork = face_system(), crank_row.system(), fork_system()
    return [("face: three redundant rows", face, ["face_m.x"], face_pose(face, 0.62), {}),
            ("face, joint3 passive", face, ["face_m.x"], face_pose(face, 0.62), dict(actuated=["joint1", "joint2"])),
            ("crank, damped", crank, ["crank_joint"], np.array([0.4, -0.8]), dict(damping=0.2)),
            ("fork: the rows meet", fork, ["face_m.x"], face_pose(fork, X_STAR - 0.01),
             dict(rank_atol=0.02, effort_limits=20.0))]


@pytest.mark.parametrize("case", range(4))
def test_body_law_random_walks_and_random_states_with_resets(case):
    """The whole-body law on the formulation rows' scenes: a random walk (through the fork's singular pose, where
    rows fall below the floor and the tangent is carried), then random states, with resets; equal within 1e-9."""
    label, system, coords, q0, extra = _body_cases()[case]
    rng = np.random.default_rng(7 + case)
    fast, ref = _pair(ConstrainedOperationalSpaceLaw, system, coords, kp=7200.0, kd=180.0, kf=0.3, ki=30.0,
                      **({"effort_limits": None} | extra))
    worst, q, ranks, dims = _Worst(), q0.copy(), set(), set()
    for i in range(300):
        q = q0 + 0.02 * rng.normal(size=q0.size) if i >= 200 else q + 0.002 * rng.normal(size=q0.size)
        if i < 200 and label.startswith("fork"):
            q = q0 + (0.03 * np.sin(i / 20.0)) * np.r_[1.0, -1.0, 0.5][:q0.size]
        if i % 97 == 50:
            fast.reset()
            ref.reset()
        st = State(t=1e-3 * i, q=q, qdot=0.2 * rng.normal(size=q0.size),
                   lambda_meas=None if i % 5 == 0 else -3.0 - rng.uniform(size=system.m))
        r = Reference(theta=None if i % 11 == 0 else fast.coords.evaluate(q0, 0 * q0).theta + 0.005,
                      theta_dot=0.1 * rng.normal(size=1), theta_ddot=rng.normal(size=1),
                      lambda_=-3.0 - rng.uniform(size=system.m))
        worst.check(fast, ref, st, r)
        ranks.add(fast.last["rank"])
        dims.add((fast.last["rank"], fast.last["Lambda_x"].shape[0]))
    print(f"\n{label}: (rank, rows of Λ_x) {sorted(dims)}, worst relative τ difference {worst.rel:.1e} "
          f"({worst.served} compiled)")
    assert worst.served >= 290 and worst.rel <= TOL
    if label.startswith("fork"):                  # the rows below the floor and the carried tangent's row
        assert ranks == {1, 2} and (1, 3) in dims


def test_force_pi_and_limiter_equal_their_numpy_twins():
    """osc_parts.force_pi against ForcePI (stamps repeated, backward, late; frozen; sizes changing) and
    osc_parts.limit against saturate (motion scaled, force scaled, clipped; zero and infinite limits)."""
    from qv_control.kernels import osc_layout as L
    from qv_control.kernels.osc_parts import force_pi, limit, pi_reset

    rng = np.random.default_rng(3)
    S = np.zeros(L.state_shape(4))
    S[L.PAR, [L.KF, L.KI_F, L.MAX_DT, L.PI_ON, L.GAP]] = 0.4, 25.0, 0.1, 1.0, 2.0
    pi_reset(S)
    pi, t = ForcePI(0.4, 25.0), 0.0
    for i in range(300):
        k = 2 if i < 150 else 3
        t += rng.choice([1e-3, 0.0, -1e-3, 0.05, 1e-3])
        d, m = rng.normal(size=k), rng.normal(size=k)
        frozen = bool(rng.uniform() < 0.1)
        status = SaturationStatus(True, 0.0, 0.5, False, 2.0) if frozen else SaturationStatus()
        want = pi.correction(t, d, m, status)
        got = np.zeros(k)
        assert force_pi(S, t, d, m, frozen, got)
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    for case in range(200):
        n = 4
        lim = np.abs(rng.normal(size=n)) * 5 + (0.0 if case % 10 else 1.0)
        lim[rng.integers(n)] = np.inf if case % 3 == 0 else (0.0 if case % 17 == 0 else lim[0])
        base, force, motion = rng.normal(size=(3, n)) * rng.choice([0.5, 3.0, 20.0], size=3)[:, None]
        S[L.LIMITS, :n], S[L.PAR, L.HAS_LIMITS] = lim, 1.0
        tau = np.empty(n)
        limit(S, base, force, True, motion, tau)
        want, st = saturate(base, force, motion, lim)
        np.testing.assert_allclose(tau, want, rtol=1e-14, atol=1e-14)
        V = S[L.VAR]
        assert (bool(V[L.SAT_ACTIVE]), bool(V[L.SAT_CLIPPED])) == (st.active, st.clipped)
        assert V[L.SAT_MOTION] == pytest.approx(st.motion_scale, abs=1e-14)
        assert V[L.SAT_FORCE] == pytest.approx(st.force_scale, abs=1e-14)
        assert V[L.SAT_PEAK] == st.peak_ratio or np.isinf(st.peak_ratio) and np.isinf(V[L.SAT_PEAK])


def test_frame_rows_and_coordinates_equal_the_numpy_coordinates():
    """osc_frames.coordinates (θ, J, θ̇, J̇q̇ with the drift as a vector) against MinimalCoordinates.evaluate with
    compiled=False (J̇q̇ = J̇·q̇ of its J̇, from Pinocchio's frame Jacobian time variation) on random Panda states: a
    joint, frame positions and the three rotation rows, about a reference; a frame beyond its chart is refused."""
    import pinocchio as pin

    from qv_control.kernels.osc_frames import coordinates, frames
    from qv_dynamics.quasi_sampler import data_views

    system = ConstrainedSystem.from_urdf("panda")
    rng = np.random.default_rng(9)
    spec = [f"{FRAME}.x", f"{FRAME}.z", "panda_joint3", {"frame": FRAME, "axes": ["rx", "ry", "rz"]},
            "panda_link4.y"]
    coords = as_coordinates(system, spec)
    coords._fast._plans.clear()
    plan, fids, sup = coords._fast._plan(False)
    *_, Jw, dJw, oMf = data_views(system.model, system.data)
    worst, q0 = 0.0, system.random_configuration(rng) * 0.5
    coords.anchor(q0)
    for _ in range(30):
        q, qd = q0 + 0.4 * rng.normal(size=7), rng.normal(size=7)     # orientations up to ~1.5 rad from R_ref
        pin.computeCoriolisMatrix(system.model, system.data, q, qd)
        pin.updateFramePlacements(system.model, system.data)
        Rref = np.array([coords._rot_ref[f] if coords._rot_ref.get(f) is not None else np.eye(3) for f in fids])
        cout, J6, acc = np.empty((coords.k + 3, 7)), np.empty((len(fids), 6, 7)), np.empty((len(fids), 6))
        frames(Jw, dJw, oMf, np.array(fids), sup, qd, J6, acc)
        assert coordinates(oMf, np.array(fids), np.arange(len(fids)), Rref, plan, J6, acc, q, qd, cout) == 0
        ref = coords.evaluate(q, qd, compiled=False)
        k = coords.k
        for got, want in ((cout[:k], ref.J), (cout[k, :k], ref.theta), (cout[k + 1, :k], ref.theta_dot),
                          (cout[k + 2, :k], ref.Jdot_qdot)):
            worst = max(worst, float(np.abs(got - want).max() / max(np.abs(want).max(), 1.0)))
    assert worst <= 1e-12, worst
    coords.anchor(q)
    Rref[0] = pin.exp3(np.array([0.0, 0.0, 3.0])) @ coords._rot_ref[fids[0]]   # 3 rad > MAX_ROTATION_ANGLE
    assert coordinates(oMf, np.array(fids), np.arange(len(fids)), Rref, plan, J6, acc, q, qd, cout) == 1


def test_declined_samples_raise_as_the_numpy_path_and_the_next_continues():
    """A non-finite state, a reference of the wrong size and a mass matrix that is not positive definite: the
    compiled law raises the numpy path's error; the samples after continue equal to the numpy law's."""
    system = ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": FRAME, "axes": ["z"], "name": "contact", "active": True}])
    rng = np.random.default_rng(5)
    q0 = system.random_configuration(rng) * 0.5
    pl = system.frame_placement(q0, FRAME)
    fast, ref = _pair(OperationalSpaceLaw, system, frame=FRAME, kf=0.3, ki=30.0, q_null=q0, rotation=pl.rotation)
    bfast, bref = _pair(ConstrainedOperationalSpaceLaw, system, COORDS, kp=400.0, kd=40.0, kf=0.3, ki=30.0)
    worst = _Worst()
    th = as_coordinates(system, COORDS).evaluate(q0, 0 * q0).theta   # (the laws' own: R_ref at their first state)
    bad = [(State(t=0.0, q=np.full(7, np.nan), qdot=np.zeros(7)), None, NonFiniteError),
           (State(t=0.0, q=q0, qdot=np.zeros(7)), Reference(theta_dot=np.zeros(2)), DimensionError)]
    for i in range(40):
        st = State(t=1e-3 * i, q=q0 + 0.01 * rng.normal(size=7), qdot=0.1 * rng.normal(size=7),
                   lambda_meas=np.array([-9.0]))
        worst.check(fast, ref, st, Reference(theta=pl.translation, lambda_=np.array([-10.0])))
        worst.check(bfast, bref, st, Reference(theta=th, lambda_=np.array([-10.0])))
        if i % 10 == 5:
            state, r, err = bad[(i // 10) % 2]
            for law in (fast, ref, bfast, bref):
                with pytest.raises(err):
                    law.compute(state, r)
    assert worst.served >= 78 and worst.rel <= TOL
    system.model.armature[:] = -50.0          # M not positive definite (armature on the diagonal)
    try:
        for law in _pair(OperationalSpaceLaw, system, frame=FRAME, q_null=q0, rotation=pl.rotation):
            with pytest.raises(NotPositiveDefiniteError):
                law.compute(State(t=0.0, q=q0, qdot=np.zeros(7)), None)
    finally:
        system.model.armature[:] = 0.0


_RUN = """
import json, sys
import numpy as np
from qv_control import Reference, State, make_law
from qv_dynamics import ConstrainedSystem

F = "panda_hand_tcp"
system = ConstrainedSystem.from_urdf("panda", constraints=[{"type": "point_contact", "frame": F, "axes": ["z"]}])
q0 = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.8])
laws = {"osc": make_law("osc", system, frame=F, contact=None, kf=0.3, ki=30.0, q_null=q0),
        "osc_constrained": make_law("osc_constrained", system, coordinates=[F + ".x", F + ".y", F + ".rx", F + ".ry",
                                                                            F + ".rz", "panda_joint3"], kp=400.0,
                                    kd=40.0, kf=0.3, ki=30.0)}
out = {"fast": [law._fast is not None for law in laws.values()], "numba": "numba" in sys.modules}
for name, law in laws.items():
    taus = []
    for k in range(5):
        q = q0 + 0.01 * k * np.arange(7) / 7
        st = State(0.001 * k, q, 0.05 * np.cos(np.arange(7) + k), np.array([-9.0]))
        taus.append(law.compute(st, Reference(lambda_=np.array([-10.0]))).tolist())
    out[name] = taus
print(json.dumps(out))
"""


def test_without_numba_the_laws_run_their_numpy_paths_and_equal_the_compiled_ones(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(REFUSE_NUMBA)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_RUN)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    blocked = json.loads(proc.stdout.splitlines()[-1])
    assert blocked["numba"] is False and blocked["fast"] == [False, False]
    here: dict = {}
    exec(compile(textwrap.dedent(_RUN).replace("print(json.dumps(out))", ""), "<run>", "exec"), here)
    assert here["out"]["fast"] == [True, True]
    for name in ("osc", "osc_constrained"):
        a, b = np.array(blocked[name]), np.array(here["out"][name])
        assert np.all(np.isfinite(a)) and np.abs(a).max() > 1.0
        assert np.abs(a - b).max() <= TOL * np.abs(b).max(), (name, np.abs(a - b).max())


def test_a_parameter_assigned_after_construction_is_used_by_the_next_compiled_tick():
    """Gains, limits and the force PI's gains assigned to a built law reach its compiled tick (they are packed again),
    as the numpy path reads them: the torques stay equal after each assignment."""
    system, q0 = _table()
    pl = system.frame_placement(q0, FRAME)
    tool = _pair(OperationalSpaceLaw, system, frame=FRAME, kf=0.3, ki=30.0, q_null=q0, rotation=pl.rotation)
    body = _pair(ConstrainedOperationalSpaceLaw, system, COORDS, kp=400.0, kd=40.0, kf=0.3, ki=30.0)
    th = as_coordinates(system, COORDS).evaluate(q0, 0 * q0).theta
    worst = _Worst()
    changes = [("KP", 2000.0), ("KD", 90.0), ("limits", np.full(7, 5.0)), ("damping", 0.2)]
    bchanges = [("kd", 60.0), ("kp", np.full(6, 900.0)), ("limits", np.full(7, 5.0)), ("damping", 0.2)]
    rng = np.random.default_rng(2)
    for i in range(60):
        if i % 12 == 11:
            for law in tool:
                setattr(law, *changes[i // 12 % 4])
                law.force_pi.kf = 0.1 + 0.1 * (i // 12)
            for law in body:
                setattr(law, *bchanges[i // 12 % 4])
        st = State(t=1e-3 * i, q=q0 + 0.01 * rng.normal(size=7), qdot=0.1 * rng.normal(size=7),
                   lambda_meas=np.array([-9.0]))
        worst.check(*tool, st, Reference(theta=pl.translation + 0.01, lambda_=np.array([-10.0])))
        worst.check(*body, st, Reference(theta=th + 0.01, lambda_=np.array([-10.0])))
    print(f"\nafter assignments: worst relative τ difference {worst.rel:.1e} ({worst.served} compiled)")
    assert worst.served >= 118 and worst.rel <= TOL
