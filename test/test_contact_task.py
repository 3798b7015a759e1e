"""qv_control.task against independent references: the touch-down peak of a mass on a spring (closed form,
integrated numerically), finite differences of the profiles, the stiffness of a synthetic press, forward
kinematics for the IK of the start checks, and the integral carried across a contact switch."""
from __future__ import annotations

import math

import numpy as np
import pytest

from qv_control.task import (
    ApproachProfile,
    ContactDetector,
    ContactTask,
    ContactTaskConfig,
    ForceProfile,
    SwitchingLaw,
    TaskLaw,
    TaskRefused,
    WaypointTrace,
    check_task,
    contact_inertia,
    solve_pose,
    stiffness_from_press,
    touch_speed,
)
from qv_dynamics import ConstrainedSystem
from qv_dynamics.state import State

Q0 = np.array([0.0, 0.2, 0.0, -2.0, 0.0, 2.2, 0.785])
FRAME = "panda_hand_tcp"


@pytest.fixture(scope="module")
def panda():
    return ConstrainedSystem.from_urdf("panda", constraints=[
        {"type": "point_contact", "frame": FRAME, "axes": ["z"], "name": "contact", "active": False}])


def test_planned_touch_speed_peaks_at_the_planned_ratio_on_a_spring():
    """A mass Λ meeting an undamped spring k at the planned speed (c = 1) peaks at ρF: semi-implicit Euler
    at 1 µs against the closed form v√(kΛ), within 0.5 %."""
    Lam, k, F = 3.2, 1.0e6, 10.0
    v = touch_speed(F, Lam, k, peak_ratio=1.5, damping_factor=1.0)
    x, xd, peak, dt = 0.0, v, 0.0, 1e-6
    while xd > 0:
        xd -= dt * k * x / Lam
        x += dt * xd
        peak = max(peak, k * x)
    assert peak == pytest.approx(1.5 * F, rel=5e-3)


def test_stiffness_from_a_static_press():
    k = 2.0e5
    F = np.array([5.0, 10.0, 15.0])
    z = 0.3 - F / k
    assert stiffness_from_press(F, z) == pytest.approx(k, rel=1e-9)
    with pytest.raises(Exception, match="fall"):
        stiffness_from_press(F, 0.3 + F / k)


def test_contact_inertia_against_crba():
    """Λ_c = 1/(J_z M⁻¹ J_zᵀ) with M from Pinocchio's CRBA and J_z its frame Jacobian row."""
    sysm = ConstrainedSystem.from_urdf("panda", constraints=[])
    import pinocchio as pin

    M = pin.crba(sysm.model, sysm.model.createData(), Q0)
    M = np.triu(M) + np.triu(M, 1).T
    d = sysm.model.createData()
    J = pin.computeFrameJacobian(sysm.model, d, Q0, sysm.frame_id(FRAME), pin.LOCAL_WORLD_ALIGNED)[2]
    assert contact_inertia(sysm, Q0, FRAME) == pytest.approx(1.0 / (J @ np.linalg.solve(M, J)), rel=1e-10)


def test_approach_profile_reaches_the_touch_speed_at_the_slow_down_height():
    prof = ApproachProfile(z0=0.30, t0=0.1, speed=0.05, v_touch=0.004, z_slow=0.25, acc=2.0)
    t_end = 0.1 + prof.t_cruise_end + prof.t_brake
    z, zd, _ = prof(t_end)
    assert z == pytest.approx(0.25, abs=1e-12) and zd == pytest.approx(-0.004, abs=1e-12)
    for t in np.linspace(0.0, t_end + 0.5, 97):
        h = 1e-7
        fd = (prof(t + h)[0] - prof(t - h)[0]) / (2 * h)
        assert prof(t)[1] == pytest.approx(fd, abs=1e-6)


def test_waypoint_trace_derivatives_and_corners():
    tr = WaypointTrace([0.5, 0.0], [[0.5, 0.1], [0.6, 0.1]], 1.0)
    assert np.allclose(tr(1.0)[0], [0.5, 0.1]) and np.allclose(tr(2.0)[0], [0.6, 0.1])
    for t in np.linspace(0.01, 1.99, 37):
        h = 1e-6
        assert np.allclose(tr(t)[1], (tr(t + h)[0] - tr(t - h)[0]) / (2 * h), atol=1e-7)
        assert np.allclose(tr(t)[2], (tr(t + h)[1] - tr(t - h)[1]) / (2 * h), atol=1e-5)


def test_force_profile_and_detector_hysteresis():
    f = ForceProfile(10.0, [(1.0, 15.0), (2.0, 10.0)])
    assert [f(0.5), f(1.5), f(2.5)] == [10.0, 15.0, 10.0]
    d = ContactDetector(on=2.0, off=0.5, off_time=0.003)
    assert not d.made(1.9) and d.made(2.1)
    assert not d.lost(0.000, 0.4) and not d.lost(0.002, 0.4) and d.lost(0.0031, 0.4)
    assert not d.lost(0.004, 1.0)          # back above off: the timer restarts


def test_ik_of_the_start_check_matches_forward_kinematics(panda):
    q_goal = Q0 + np.array([0.2, -0.1, 0.05, 0.1, 0.0, -0.1, 0.1])
    oMf = panda.frame_placement(q_goal, FRAME)
    q, ep, eR = solve_pose(panda, Q0, FRAME, oMf.translation, oMf.rotation)
    assert ep < 1e-8 and eR < 1e-8
    assert np.allclose(panda.frame_placement(q, FRAME).translation, oMf.translation, atol=1e-8)
    R0 = panda.frame_placement(Q0, FRAME).rotation
    with pytest.raises(TaskRefused, match="unreachable"):
        check_task(panda, Q0, FRAME, R0, [[1.5, 0.0, 0.245]], 10.0)


def test_switching_law_rebuilds_at_a_switch_and_carries_the_integrals(panda):
    """The task switches the constraint on touch-down; the law is rebuilt for the new set (one more θ row
    dropped) and starts from the integral torque the free-motion law applied at its last sample."""
    R0 = panda.frame_placement(Q0, FRAME).rotation
    p0 = panda.frame_placement(Q0, FRAME).translation
    tl = TaskLaw("qv", panda, FRAME, "contact", Q0, R0, redundancy_joint="panda_joint3")
    tl.s.ki_motion = 3600.0
    task = ContactTask(ContactTaskConfig(surface_height=p0[2] - 0.01), panda, p0)
    task.start(0.0)
    law: SwitchingLaw = tl.law
    rng = np.random.default_rng(0)
    for k in range(80):
        t = 1e-3 * k
        task.update(t, 0.0)
        law.compute(State(t=t, q=Q0 + 1e-3 * rng.standard_normal(7), qdot=np.zeros(7)), tl.reference(task.point(t)))
    carried = law.law.integral_torque.copy()
    assert law.rebuilds == 1 and np.linalg.norm(carried) > 0
    task.update(0.08, 5.0)
    assert panda.constraint("contact").active and task.phase == "contact"
    law.compute(State(t=0.081, q=Q0, qdot=np.zeros(7), lambda_meas=np.array([-5.0])), tl.reference(task.point(0.081)))
    assert law.rebuilds == 2 and len(law.theta_names) == 6
    assert np.allclose(law.law._carry.bias, carried, atol=1e-12)
    panda.set_active("contact", False)
    assert math.isfinite(task.commanded_force(0.1))


def test_a_kept_law_after_its_reset_equals_a_new_build(panda):
    """Each set's law is kept and reset at a switch back to its set: over touch-downs, contact losses and
    re-contacts (integrals, force PI, carried bias, basis re-seeding) its torques equal those of a law built
    anew at every switch, to 1e-12 N·m."""
    R0 = panda.frame_placement(Q0, FRAME).rotation
    runs = []
    for kept in (True, False):
        tl = TaskLaw("qv", panda, FRAME, "contact", Q0, R0, redundancy_joint="panda_joint3")
        tl.s.ki_motion = 3600.0
        if not kept:
            tl.switching._law_for = tl.switching.factory       # a new build at every switch
        tl.warm(Q0)
        p0 = panda.frame_placement(Q0, FRAME).translation
        rng = np.random.default_rng(3)
        taus = []
        for k in range(240):
            t = 1e-3 * k
            contact = (k // 40) % 2 == 1                         # three touch-downs, two losses
            panda.set_active("contact", contact)
            point = {"p": p0 + [0.0, 1e-4 * k, 0.0], "v": np.zeros(3), "a": np.zeros(3), "lambda": -5.0,
                     "contact": contact, "phase": "reacquire" if k // 40 == 2 else "contact"}
            lam = np.array([-5.0 + rng.standard_normal()]) if contact else None
            q = Q0 + 1e-3 * rng.standard_normal(7)
            taus.append(tl.law.compute(State(t=t, q=q, qdot=1e-2 * rng.standard_normal(7), lambda_meas=lam),
                                       tl.reference(point)).copy())
        panda.set_active("contact", False)
        runs.append((np.array(taus), tl.switching.rebuilds, len(tl.switching._laws)))
    (kept, n_kept, sets), (fresh, n_fresh, _) = runs
    assert n_kept == n_fresh == 6 and sets == 2
    assert np.abs(kept - fresh).max() < 1e-12, np.abs(kept - fresh).max()
    assert np.abs(kept).max() > 1.0                               # torques, not zeros
