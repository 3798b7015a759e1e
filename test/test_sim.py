"""Constrained simulator: section 6 of the projection-operator paper against closed forms.

References used here are independent of the simulator: the slider-crank's closed forms (paper eq. 66, 68),
the centripetal force m‖q̇‖²/ρ, the impulse/energy formula of the floating-base lecture computed with
explicit inverses, and a non-redundant run for the redundant one. Horizons are short, except the issue's
10 s slider-crank at 1 ms (10,000 RK4 steps, ~3-5 s per method; also in bench/simulate.py)."""
import json

import numpy as np
import pytest

from qv_dynamics import ConstrainedSystem
from qv_dynamics.sim import Stepper, simulate
from qv_dynamics.sim.scenarios import (
    SLIDER_L,
    SLIDER_M,
    build,
    cart_pendulum,
    main,
    run,
    singular_passes,
    slider_crank,
    three_link_chain,
    urdf_path,
)

G = 9.81


def slider_closed_forms(q, qdot):
    """Paper eq. 66 (y_C) and eq. 68 (M, potential of the two tip masses) — no Pinocchio."""
    l, m = SLIDER_L, SLIDER_M
    q1, q2 = q[:, 0], q[:, 1]
    yC = l * (np.sin(q1) + np.sin(q1 + q2))
    c2 = np.cos(q2)
    M11, M12, M22 = m * l * l * (3 + 2 * c2), m * l * l * (1 + c2), m * l * l
    K = 0.5 * (M11 * qdot[:, 0] ** 2 + 2 * M12 * qdot[:, 0] * qdot[:, 1] + M22 * qdot[:, 1] ** 2)
    V = m * G * l * (2 * np.sin(q1) + np.sin(q1 + q2))
    Aq = l * ((np.cos(q1) + np.cos(q1 + q2)) * qdot[:, 0] + np.cos(q1 + q2) * qdot[:, 1])
    return yC, K + V, Aq


# ----------------------------------------------------------------------------- slider-crank (sec. 8)
def test_slider_crank_projection_through_singular_poses_vs_kkt():
    """10 s at 1 ms (10,000 steps), RK4, unactuated: ≥ 15 singular poses passed, |y_C| ≤ 1e-9 after
    correction at every step, relative energy drift ≤ 1e-5 (closed-form energy). KKT + Baumgarte on the same run
    drifts off the constraint by orders of magnitude more (measured 1.5e-10 vs 3e-16)."""
    proj = run(slider_crank(), t_final=10.0, method="projection")
    assert proj.ok, proj.error
    assert len(proj.t) == 10001
    assert singular_passes(proj.q[:, 0]) >= 15
    yC, E, Aq = slider_closed_forms(proj.q, proj.qdot)
    assert np.max(np.abs(yC)) <= 1e-9
    assert np.max(np.abs(Aq)) <= 1e-9
    assert np.max(proj.phi_norm) <= 1e-9
    drift = np.max(np.abs(E - E[0])) / abs(E[0])
    assert drift <= 1e-5
    assert proj.stats["energy_drift_rel"] <= 1e-5
    # the closest approach to a singular pose really is close: |cos q1| < 1e-2 (A = l c1 [2 1] → 0)
    assert proj.stats["min_abs_cos_q1"] < 1e-2

    kkt = run(slider_crank(), t_final=10.0, method="kkt_baumgarte")
    yk, Ek, Aqk = slider_closed_forms(kkt.q, kkt.qdot)
    assert np.max(np.abs(yk)) > 1e-11 > 1e3 * np.max(np.abs(yC))
    assert np.max(np.abs(Aqk)) > 100 * max(np.max(np.abs(Aq)), 1e-14)
    # without stabilization (Savin eq. 19-20 as is) the KKT run leaves the closure at a near-singular pass
    # (measured: blow-up at t ≈ 1.2 s, the third pass, after switching to the folded branch)
    kkt0 = run(slider_crank(), t_final=2.0, method="kkt_baumgarte", baumgarte=(0.0, 0.0))
    with np.errstate(over="ignore", invalid="ignore"):  # the recorded blow-up holds huge numbers
        y0 = slider_closed_forms(kkt0.q, kkt0.qdot)[0]
    assert (not kkt0.ok) or np.nanmax(np.abs(y0)) > 1e-3
    if not kkt0.ok:
        assert "non-finite" in kkt0.error or "singular" in kkt0.error


def test_slider_crank_exactly_at_singular_pose_kkt_fails_projection_continues():
    """Start at q1 = π/2, q2 = −π (A = 0, eq. 70): the KKT matrix is singular and the baseline stops with a
    clear message; the projection run (rank 0 → P = I, constraint 'virtually removed') goes on through
    several more singular poses with the closure kept and energy conserved."""
    kkt = run(slider_crank(start="singular"), t_final=0.5, method="kkt_baumgarte")
    assert not kkt.ok
    assert "singular" in kkt.error and "rank(A) = 0" in kkt.error
    assert len(kkt.t) == 1  # the initial state is kept

    proj = run(slider_crank(start="singular"), t_final=1.0, method="projection")
    assert proj.ok, proj.error
    assert proj.stats["rank_min"] == 0 and proj.stats["rank_max"] == 1
    assert singular_passes(proj.q[:, 0]) >= 3
    yC, E, _ = slider_closed_forms(proj.q, proj.qdot)
    assert np.max(np.abs(yC)) <= 1e-9
    assert np.max(np.abs(E - E[0])) / abs(E[0]) <= 1e-5
    # stays on the isosceles branch q2 = 2π − 2q1 of the paper (no switch to the folded branch)
    assert np.max(np.abs(np.sin(0.5 * (proj.q[:, 1] + 2 * proj.q[:, 0])))) < 1e-6


# ----------------------------------------------------------------------------- particle on a circle
@pytest.mark.parametrize("integrator", ["rk4", "semi_implicit_euler", "scipy"])
def test_particle_circle_force_and_energy(integrator):
    rho, speed = 0.5, 1.5
    scn = build("particle_circle", rho=rho, speed=speed)
    tr = run(scn, t_final=0.3 if integrator == "scipy" else 1.0, integrator=integrator)
    assert tr.ok, tr.error
    m = 1.0
    pred = m * np.sum(tr.qdot ** 2, axis=1) / rho
    assert np.all(np.abs(tr.lam[:, 0] - pred) <= 1e-8 * pred)
    assert np.max(np.abs(np.hypot(tr.q[:, 0], tr.q[:, 1]) - rho)) <= 1e-12
    K = 0.5 * m * np.sum(tr.qdot ** 2, axis=1)
    # semi-implicit Euler is first order: with the projections its energy error grows ~1 % per second here
    tol = 1e-9 if integrator != "semi_implicit_euler" else 2e-2
    assert np.max(np.abs(K - K[0])) / K[0] <= tol
    # the particle really goes round: angle travelled = speed·t/ρ
    ang = np.unwrap(np.arctan2(tr.q[:, 1], tr.q[:, 0]))
    assert ang[-1] == pytest.approx(speed * tr.t[-1] / rho, rel=1e-2 if integrator == "semi_implicit_euler" else 1e-8)


# ----------------------------------------------------------------------------- redundant constraints
def test_redundant_chain_matches_non_redundant_and_kkt_fails():
    """The closure listed twice plus the identically-zero out-of-plane row (7 rows, rank 2): same motion to
    1e-9, same tip force (the minimum-norm λ splits it evenly over the repeated rows); KKT cannot start."""
    ref = run(three_link_chain(redundant=False), t_final=1.0)
    red = run(three_link_chain(redundant=True), t_final=1.0)
    assert ref.ok and red.ok, (ref.error, red.error)
    assert red.stats["rank_max"] == 2 and red.lam.shape[1] == 7
    assert np.max(np.abs(red.q - ref.q)) <= 1e-9
    assert np.max(np.abs(red.qdot - ref.qdot)) <= 1e-9
    assert np.ptp(ref.q[:, 0]) > 0.1  # it moves
    labels = red.lam_labels
    fx = sum(red.lam[:, i] for i, lab in enumerate(labels) if lab.endswith(".x"))
    fz = sum(red.lam[:, i] for i, lab in enumerate(labels) if lab.endswith(".z"))
    fy = [red.lam[:, i] for i, lab in enumerate(labels) if lab.endswith(".y")]
    scale = np.max(np.abs(ref.lam))
    assert np.max(np.abs(fx - ref.lam[:, 0])) <= 1e-9 * scale
    assert np.max(np.abs(fz - ref.lam[:, 1])) <= 1e-9 * scale
    assert max(np.max(np.abs(f)) for f in fy) <= 1e-12 * scale
    kkt = run(three_link_chain(redundant=True), t_final=0.1, method="kkt_baumgarte")
    assert not kkt.ok and "rank(A) = 2 < 7" in kkt.error


# ----------------------------------------------------------------------------- impacts
def test_impacts_energy_loss_matches_lecture_formula():
    """Cart-pendulum: P hits the floor (guard) and is then locked horizontally (time): at each impact
    K⁻ − K⁺ = ½q̇⁻ᵀAᵀ(AM⁻¹Aᵀ)⁻¹Aq̇⁻ (1e-9 rel, explicit inverse here) and Aq̇⁺ = 0."""
    scn = cart_pendulum()
    tr = run(scn, t_final=1.2)
    assert tr.ok, tr.error
    impacts = [e for e in tr.events if e.get("impact")]
    assert [e["constraint"] for e in impacts] == ["floor", "wall"]
    sysm = scn.system
    checked = 0
    for e in impacts:
        # the set active right after this impact
        active = {"floor": ["floor"], "wall": ["floor", "wall"]}[e["constraint"]]
        chk = ConstrainedSystem.from_urdf(urdf_path("cart_pendulum"), constraints=[
            {"type": "point_contact", "frame": "tip", "axes": [c.axes[0]], "name": c.name}
            for c in sysm.constraints if c.name in active])
        q, vm, vp = np.array(e["q"]), np.array(e["qdot_minus"]), np.array(e["qdot_plus"])
        terms = chk.evaluate(q, vm)
        M, A = terms.M, terms.A
        Minv = np.linalg.inv(M)
        rd = A @ vm
        predicted = 0.5 * rd @ np.linalg.inv(A @ Minv @ A.T) @ rd
        loss = 0.5 * vm @ M @ vm - 0.5 * vp @ M @ vp
        assert predicted > 1e-3
        assert abs(loss - predicted) <= 1e-9 * predicted
        assert np.linalg.norm(A @ vp) <= 1e-12 * np.linalg.norm(A) * np.linalg.norm(vm)
        # impulse map N_c of the lecture
        Nc = np.eye(2) - Minv @ A.T @ np.linalg.inv(A @ Minv @ A.T) @ A
        assert np.allclose(vp, Nc @ vm, rtol=0, atol=1e-12)
        checked += 1
    assert checked == 2
    # the floor contact is met where the guard says (located by regula falsi re-stepping)
    e0 = impacts[0]
    assert sysm.frame_placement(np.array(e0["q"]), "tip").translation[2] == pytest.approx(-0.45, abs=1e-12)
    # energy bookkeeping: E − E₀ − W_τ + L_impacts stays at round-off
    assert tr.stats["energy_drift_rel"] <= 1e-8
    # lecture case 2 (vertical motion locked): the torque does not move the system, the cart slides freely
    k = (tr.t > e0["t"] + 0.01) & (tr.t < 0.99)
    assert np.ptp(tr.q[k, 1]) <= 1e-9
    assert np.ptp(tr.qdot[k, 0]) <= 1e-9 and abs(tr.qdot[k, 0][0]) > 0.1


# ----------------------------------------------------------------------------- bad input
def _slider():
    return slider_crank().system


def test_nan_torque_stops_and_keeps_data():
    system = _slider()

    def tau(t, q, qdot):
        return np.array([np.nan, 0.0]) if t >= 0.05 else np.zeros(2)

    tr = simulate(system, [0, 0], [12, -24], tau, 0.2, 1e-3)
    assert not tr.ok
    assert "non-finite" in tr.error and "t = 0.05" in tr.error
    assert 45 <= len(tr.t) <= 52 and np.all(np.isfinite(tr.q))
    assert tr.t[-1] == pytest.approx(0.05, abs=1.5e-3)


def test_wrong_size_torque_and_raising_guard():
    system = _slider()
    tr = simulate(system, [0, 0], [12, -24], np.zeros(3), 0.1, 1e-3)
    assert not tr.ok and "expected length 2" in tr.error and len(tr.t) == 1

    def guard(t, q, qdot):
        if t > 0.03:
            raise RuntimeError("sensor offline")
        return 1.0

    tr = simulate(system, [0, 0], [12, -24], None, 0.1, 1e-3, schedule=[(guard, "slider", False)])
    assert not tr.ok and "guard for 'slider' raised RuntimeError" in tr.error and "sensor offline" in tr.error
    assert 25 <= len(tr.t) <= 35


def test_newton_raphson_not_converging_stops():
    """A contact switched on out of reach (tip at x = 5 m, the arm reaches 1.5 m): NR cannot converge."""
    system = ConstrainedSystem.from_urdf(urdf_path("planar_3link"), constraints=[
        {"type": "point_contact", "frame": "tip", "axes": ["x"], "position": [5.0, 0, 0], "name": "far",
         "active": False}])
    tr = simulate(system, [0.3, 0.2, 0.1], np.zeros(3), None, 0.2, 1e-3, schedule=[(0.05, "far", True)])
    assert not tr.ok
    assert "Newton" in tr.error and "did not converge" in tr.error
    assert len(tr.t) >= 50 and np.all(np.isfinite(tr.q))


# ----------------------------------------------------------------------------- Stepper API, CLI
def test_stepper_reproduces_simulate():
    scn = slider_crank()
    tr = run(scn, t_final=0.05)
    st = Stepper(slider_crank().system)
    q, v = st.correct(scn.q0.copy(), scn.qdot0.copy())
    for k in range(50):
        q, v = st.step(q, v, np.zeros(2), 1e-3)
        assert st.phi_norm <= 1e-12 and st.last.lam.shape == (1,)
    assert np.max(np.abs(q - tr.q[-1])) <= 1e-14 and np.max(np.abs(v - tr.qdot[-1])) <= 1e-12


def test_cli_writes_summary(tmp_path):
    out = tmp_path / "pc"
    rc = main(["particle_circle", "--t-final", "0.2", "--out", str(out)])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    for key in ("max_constraint_error", "energy_drift_rel", "wall_time_s", "steps", "sim_time_s"):
        assert key in s
    assert s["steps"] == 200 and s["sim_time_s"] == pytest.approx(0.2)
    assert (out / "figure.png").stat().st_size > 10_000
    d = np.load(out / "trajectory.npz")
    assert d["q"].shape == (201, 2)
    assert s["max_constraint_error"] == pytest.approx(float(np.max(d["phi_norm"])), rel=0, abs=1e-300)
    assert s["lambda_rel_error_max"] <= 1e-8
    # a run that stops returns 1 and still writes its summary
    rc = main(["slider_crank", "--start", "singular", "--method", "kkt_baumgarte", "--t-final", "0.1",
               "--out", str(tmp_path / "kkt"), "--no-plot"])
    s = json.loads((tmp_path / "kkt" / "summary.json").read_text())
    assert rc == 1 and s["ok"] is False and "singular" in s["error"]


def test_floating_base_free_fall_is_exact():
    """Floating-base path (quaternion integration): an unconstrained body falls as z = −½gt² (RK4 exact)."""
    system = ConstrainedSystem.from_urdf("panda", floating_base=True)
    q0 = system.neutral()
    q0[7:] = [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398]
    tr = simulate(system, q0, np.zeros(system.nv), None, 0.2, 1e-3)
    assert tr.ok, tr.error
    assert tr.q[-1, 2] == pytest.approx(-0.5 * G * 0.2 ** 2, abs=1e-12)
    assert np.max(np.abs(tr.q[-1, 7:] - q0[7:])) <= 1e-12  # uniform gravity: the joints do not move
    assert np.linalg.norm(tr.q[-1, 3:7]) == pytest.approx(1.0, abs=1e-14)
    assert tr.stats["energy_drift_rel"] <= 1e-10


# ----------------------------------------------------------------------------- controller path, recording
def test_controller_object_gets_state_reference_and_measured_lambda():
    """A law with compute(State, Reference) (qv_control contract): it sees t, q, q̇, the λ of the previous
    step as State.lambda_meas and the reference of the callable; with τ = centripetal push the particle's
    normal force changes accordingly (λ = m‖q̇‖²/ρ − f_n, f_n the outward torque component)."""
    from qv_dynamics.state import Reference

    seen = []

    class Push:
        def compute(self, state, reference):
            seen.append((state.t, None if state.lambda_meas is None else state.lambda_meas.copy(),
                         reference.lambda_))
            nrm = state.q / np.linalg.norm(state.q)
            return 0.2 * nrm  # outward push: does no work on the circle, only loads the constraint

    scn = build("particle_circle", rho=0.5, speed=1.5)
    tr = simulate(scn.system, scn.q0, scn.qdot0, Push(), 0.05, 1e-3,
                  reference=lambda t: Reference(lambda_=np.array([t])))
    assert tr.ok, tr.error
    assert len(seen) == 51  # one call per step (zero-order hold) + the final state's λ
    assert seen[0][1] is None
    for k in range(1, 50):
        assert seen[k][0] == pytest.approx(tr.t[k])
        assert np.allclose(seen[k][1], tr.lam[k - 1], rtol=0, atol=1e-15)  # one-sample-delayed measurement
        assert seen[k][2][0] == pytest.approx(tr.t[k])
    pred = np.sum(tr.qdot ** 2, axis=1) / 0.5 + 0.2  # outward push adds to the inward constraint force
    assert np.max(np.abs(tr.lam[:, 0] - pred) / pred) <= 1e-8
    assert np.allclose(tr.tau[:-1], 0.2 * tr.q[:-1] / 0.5, atol=1e-12)
    sub = simulate(scn.system, scn.q0, scn.qdot0, Push(), 0.05, 1e-3, record_every=10)
    assert len(sub.t) == 6 and np.allclose(sub.q, tr.q[::10], atol=1e-15)
    assert np.allclose(sub.lam, tr.lam[::10], atol=1e-15) and np.allclose(sub.energy, tr.energy[::10])


def test_scenario_urdfs_have_ros2_control_and_limits():
    """Each scenario URDF loads in Pinocchio and carries a mock_components ros2_control system whose joints
    exist, with effort command only on actuated joints and position/velocity/effort state interfaces."""
    import xml.etree.ElementTree as ET

    for name in ("slider_crank", "planar_3link", "particle_circle", "cart_pendulum"):
        system = ConstrainedSystem.from_urdf(urdf_path(name))
        root = ET.parse(urdf_path(name)).getroot()
        movable = [j for j in root.findall("joint") if j.get("type") != "fixed"]
        assert sorted(j.get("name") for j in movable) == sorted(system.joint_names)
        for j in movable:
            lim = j.find("limit")
            assert float(lim.get("effort")) > 0 and float(lim.get("velocity")) > 0
        rc = root.findall("ros2_control")
        assert len(rc) == 1 and rc[0].get("type") == "system" and rc[0].get("name")
        assert rc[0].find("hardware/plugin").text.strip() == "mock_components/GenericSystem"
        rc_joints = rc[0].findall("joint")
        assert sorted(j.get("name") for j in rc_joints) == sorted(system.joint_names)
        n_cmd = 0
        for j in rc_joints:
            assert [s.get("name") for s in j.findall("state_interface")] == ["position", "velocity", "effort"]
            cmds = [c.get("name") for c in j.findall("command_interface")]
            assert cmds in ([], ["effort"])
            n_cmd += len(cmds)
        assert n_cmd >= 1


def test_controller_called_once_per_tick_across_located_impact():
    """Event location re-steps the tick where the guard fires; a controller (with its own integrators) must
    still be called exactly once per tick, and the impact is still located on the floor."""
    calls = []

    class Counting:
        def compute(self, state, reference):
            calls.append(state.t)
            return np.zeros(2)

    scn = cart_pendulum()
    tr = simulate(scn.system, scn.q0, scn.qdot0, Counting(), 0.4, 1e-3, schedule=scn.schedule[:1])
    assert tr.ok, tr.error
    assert [e["constraint"] for e in tr.events if e.get("impact")] == ["floor"]
    assert len(calls) == 401 and np.allclose(np.diff(calls), 1e-3)
    e = tr.events[0]
    assert scn.system.frame_placement(np.array(e["q"]), "tip").translation[2] == pytest.approx(-0.45, abs=1e-12)
