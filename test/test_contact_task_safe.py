"""A safe output that is safe, and the task's commands as a complete state machine.

The safe output (qv_control.safe_output: a damped joint hold about the pose latched at the hold, lifted by
task.retract, plus gravity) against Pinocchio (g, the mass matrix, forward kinematics of the lifted pose); on
the deterministic lock-step MuJoCo Panda (test/task_loop.py, the controller node's order: in the task's hold
and on a failed law state the safe output, not the law): the contact force falls within one state and the
pose holds; the force limit never trips on a step the user commanded; the commands answer whether they acted
(a second lift-off refused), and a hold or done is cleared by reset and the task runs again. Every force is
MuJoCo's own contact force."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from qv_control.safe_output import SafeOutput
from qv_control.task import ContactTask, ContactTaskConfig
from qv_dynamics.errors import ModelError

pytest.importorskip("mujoco")

from task_loop import run_task  # noqa: E402
from test_contact_task import FRAME, Q0  # noqa: E402

from qv_control.demo.config import DemoConfig, make_system  # noqa: E402

F = 10.0
T = 3.0          # s: 0.84 s after the first touch (2.164 s), pressing and tracing


@pytest.fixture(scope="module")
def panda():
    """The demo's Panda with the switchable table contact."""
    return make_system(DemoConfig())


def test_safe_output_against_pinocchio(panda):
    """At the latched pose at rest τ = g(q) (RNEA at q̇ = q̈ = 0); the lifted pose puts the tool ``lift`` above
    (forward kinematics; a first-order step: within 1 % of 3 mm) with its orientation kept; the velocity term is
    −2ζω M(q₀) q̇; the torque is clipped to the effort limits; an unknown mode is a named error."""
    model, data = panda.model, panda.model.createData()
    safe = SafeOutput(panda, hz=4.0)
    g = pin.rnea(model, data, Q0, np.zeros(7), np.zeros(7))
    assert np.allclose(safe.torque("hold", Q0, np.zeros(7)), g, atol=1e-10)
    safe.release()
    safe.latch(Q0, lift=0.003, frame=FRAME)
    p0, p1 = panda.frame_placement(Q0, FRAME), panda.frame_placement(safe.q_h, FRAME)
    assert np.allclose(p1.translation - p0.translation, [0, 0, 0.003], atol=3e-5)
    assert np.linalg.norm(pin.log3(p1.rotation @ p0.rotation.T)) < 2e-6
    v = np.zeros(7)
    v[3] = 0.1
    M = pin.crba(model, data, Q0)
    M = np.triu(M) + np.triu(M, 1).T
    w = 2 * np.pi * 4.0
    tau_v = safe.torque("hold", safe.q_h, v) - pin.rnea(model, data, safe.q_h, np.zeros(7), np.zeros(7))
    assert np.allclose(tau_v, -2 * w * M @ v, atol=1e-9)
    far = safe.torque("hold", Q0 + 1.0, np.zeros(7))
    assert np.all(np.abs(far) <= panda.effort_limits() + 1e-12)
    assert np.allclose(safe.torque("gravity", Q0), g) and not np.any(safe.torque("zero", Q0))
    with pytest.raises(ModelError, match="mode"):
        safe.torque("brake", Q0)


def _after(r, t0: float):
    return r["t"] >= t0 - 1e-9


def test_failed_law_in_contact_lifts_off_and_holds_the_pose():
    """The law fails at one state while pressing at 10 N: the task goes to its hold and the node's safe output
    takes over from that state: the contact force is 0 at the next sample, and over the next 2 s the tool stays
    within 1 cm of where it was (measured: up by the 3 mm retract, 10 µm sideways; the gravity-only output it
    replaces drifted 11.5 cm in the same 2 s)."""
    r = run_task("qv", T + 2.0, fail=(T, T + 0.001))
    task, t, fn, p = r["task"], r["t"], r["fn"], r["p"]
    assert task.phase == "hold" and task.reason == "control law failed"
    i = int(np.searchsorted(t, T))
    assert fn[i - 1] > 0.9 * F and fn[i + 1] == 0.0
    drift = np.linalg.norm(p[i:] - p[i], axis=1)
    assert drift.max() <= 0.01
    assert p[-1][2] - p[i][2] == pytest.approx(task.cfg.retract, abs=3e-4)
    assert np.linalg.norm(p[-1][:2] - p[i][:2]) <= 1e-3


def test_force_limit_trip_lifts_off_within_one_state():
    """A trip of the force limit (3 × 10 N; here the table jumps 1 mm up under the pressing tool) sends the task
    to its hold in the same state; the safe output lifts off: the force is 0 within 5 ms and never above the
    trip's reading again."""
    r = run_task("qv", T + 1.0, task_kw=dict(force_limit=3.0), lower=(T, -0.001))
    task, fn = r["task"], r["fn"]
    assert task.phase == "hold" and task.force_limit_trips == 1, task.reason
    t_trip = next(e["t"] for e in task.events if e["event"] == "safe hold")
    after = _after(r, t_trip)
    assert float(fn[after][5:].max()) == 0.0
    assert float(fn[after].max()) <= float(fn[_after(r, T)].max())


@pytest.mark.parametrize("steps", [[(1.0, 5.0)], [(0.5, 30.0), (1.0, 2.5)]])
def test_force_limit_never_trips_on_a_commanded_step(steps):
    """force 30 N, force_steps [1, 5] (a step down to 5 N: the measured 30 N was above 3 × 5 N and tripped the
    hold) and 10 → 30 → 2.5 N: the limit follows the largest force commanded over the last 0.3 s, so the task
    keeps pressing, tracking every step."""
    force = 30.0 if steps[0][1] < 30 else F
    r = run_task("qv", 3.8, task_kw=dict(force=force, force_steps=steps, force_limit=3.0))
    task, t, fn = r["task"], r["t"], r["fn"]
    assert task.phase == "contact" and task.force_limit_trips == 0, task.reason
    for ts, f in steps:
        m = (t > task.t_contact + ts + 0.2) & (t < task.t_contact + ts + 0.3)
        assert float(np.abs(fn[m] - f).max()) <= 0.05 * f


def test_second_lift_off_is_refused_and_the_release_goes_on():
    """lift_off in contact acts (the force ramps to zero over 0.15 s); a second one 50 ms into the ramp is
    refused (it restarted the ramp from the full force) and the force keeps falling."""
    t1 = 2.6
    r = run_task("qv", 3.4, commands={t1: "lift_off", t1 + 0.05: "lift_off"})
    (_, _, acted1, _), (_, _, acted2, why2) = r["answers"]
    assert acted1 and not acted2 and "already ramps to zero" in why2
    t, fn = r["t"], r["fn"]
    i2 = int(np.searchsorted(t, t1 + 0.05))
    assert float(fn[i2:].max()) <= fn[i2] + 1e-6
    assert r["task"].phase == "done"


def _full_second_run(r, t_start: float):
    task, t, fn = r["task"], r["t"], r["fn"]
    tc = task.t_contact
    assert tc is not None and tc > t_start and task.force_limit_trips == 0, task.events[-3:]
    touch = float(fn[(t > tc - 0.01) & (t < tc + 0.1)].max())
    press = fn[(t > tc + 0.3) & (t < tc + 0.6)]
    assert touch <= 1.5 * F + 1.0 and float(np.abs(press - F).max()) <= 0.05 * F
    return touch


def test_reset_after_a_hold_then_the_task_again():
    """hold while pressing, reset 0.5 s later (acted; the tool moves back to the start pose by a minimum-jerk
    move at lift_speed), start while it moves (refused, naming the time left), start once home: a second full
    approach, touch-down within the plan, pressing at 10 N ± 5 %."""
    home = 2.8       # s: after the reset, the 1.4 cm move back at ≤ 0.01 m/s takes 1.875 × 1.4 = 2.65 s
    r = run_task("qv", T + 0.5 + home + 3.0, commands={T: "hold", T + 0.5: "reset", T + 0.6: "start",
                                                      T + 0.5 + home: "start"})
    names = [(n, a) for _, n, a, _ in r["answers"]]
    assert names == [("hold", True), ("reset", True), ("start", False), ("start", True)], r["answers"]
    assert "moving back to the start pose" in r["answers"][2][3]
    assert float(r["fn"][_after(r, T + 0.01) & (r["t"] < T + 0.5 + home)].max()) == 0.0
    print(f"\nsecond touch-down after a reset: {_full_second_run(r, T + 0.5 + home):.2f} N")


def test_reset_after_done_then_the_task_again():
    """A timed task released 0.8 s after the touch ends done (the circle traced on through the release: 4.2 cm
    from the start pose); reset (acted; a second one refused: the task is free), the move home (8 s at 0.01
    m/s), start: a second full run."""
    r = run_task("qv", 15.0, task_kw=dict(release_at=0.8), commands={3.7: "reset", 3.8: "reset", 11.8: "start"})
    assert [(n, a) for _, n, a, _ in r["answers"]] == [("reset", True), ("reset", False), ("start", True)]
    _full_second_run(r, 11.8)


def test_commands_answer_whether_they_acted(panda):
    """The state machine without a plant: each command's answer and its reason."""
    p0 = panda.frame_placement(Q0, FRAME).translation
    task = ContactTask(ContactTaskConfig(surface_height=p0[2] - 0.01, release_at=1.0), panda, p0)
    assert not task.lift_off(0.0) and "nothing to lift off" in task.why
    assert not task.reset(0.0) and "task runs" in task.why
    assert task.start(0.0) and not task.start(0.01) and "already" not in task.why and "approach" in task.why
    task.update(0.2, 5.0, p0[2] - 0.01)
    assert task.phase == "contact"
    assert task.lift_off(0.3) and not task.lift_off(0.31)
    assert task.hold(0.32, "commanded") and not task.hold(0.33, "again") and "already holding" in task.why
    assert not task.start(0.34) and "reset it first" in task.why
    assert task.reset(0.4, p0) and task.phase == "free" and task.homing is None
    assert task.start(0.5) and task.phase == "approach"
    panda.set_active("contact", False)


@pytest.mark.parametrize("length", [0.2, 0.4])
def test_a_watchdog_episode_neither_lifts_nor_strikes(length):
    """The states stop reaching the controller (its watchdog sends the safe output from the last pose it had, with
    no velocity) for 0.2 or 0.4 s in the approach, at the touch-down and while pressing. The blind output floats
    the arm where it was (an open-loop lift of the latched pose pushed the tool 9 cm up in 0.4 s and the task
    ended in a hold); pressing, the task goes to its hold, and when the states return the hold lifts off by the
    retract (blind, pressing on resumed at 47 N). Peak ≤ 1.5 F + 1 N (measured ≤ 14.4 N)."""
    for t0 in (0.8, 2.05, 2.15, 2.6):
        r = run_task("qv", t0 + length + 1.0, blind=(t0, t0 + length))
        t, z = r["t"], r["z"]
        during = (t > t0) & (t < t0 + length)
        assert float(r["fn"].max()) <= 1.5 * F + 1.0, t0
        assert float(z[during].max() - z[np.searchsorted(t, t0)]) <= 5e-4, t0
        if t0 == 2.6:
            assert r["task"].phase == "hold" and "stale" in r["task"].reason
            assert z[-1] - z[np.searchsorted(t, t0)] == pytest.approx(r["task"].cfg.retract, abs=3e-4)
        else:
            assert r["task"].phase in ("approach", "contact") and r["task"].reason is None, (t0, r["task"].reason)
