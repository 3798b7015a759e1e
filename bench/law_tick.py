"""Law tick of every law in ``make_law`` vs ``pin.constraintDynamics`` on the same states (target: the arm laws
<= 5x, goal 4x; legged <= 6x): the arm laws on the Panda + table contact (point contact, axis z) + six minimal
coordinates, and the same on another 7-DoF arm (example-robot-data's xArm7, its tool on a table); the legged law on
ANYmal C standing on its four feet (pin.constraintDynamics with the four 3-D foot contacts).

The states are those of a lock-step closed-loop run of the Panda table task (config/panda_table.yaml: the
tool presses 10 N on the table while it traces a square; the xArm7 traces the same square about its start), so
every law sees realistic inputs (no torque saturation). Each law gets the same states, reference and λ measurement;
the calls are interleaved state by state with Pinocchio's, every call timed on its own, medians reported (robust to
a shared machine).

    PYTHONPATH=. .venv/bin/python bench/law_tick.py [--states 300] [--reps 5] [--write-table PATH]

``--write-table PATH`` also writes the medians and ratios (Markdown, with the command and the machine) for the
docs (``doc/results/generated/law_tick.md``).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "test"))

from models import pin_constraint_vectors  # noqa: E402  (the tests' Pinocchio reference)
from timing import median_table, medians_us, time_calls, write_table  # noqa: E402  (bench/)

from qv_control.laws import LAWS, make_law  # noqa: E402
from qv_control.references import SplineReference  # noqa: E402
from qv_dynamics import ConstrainedSystem  # noqa: E402
from qv_dynamics.state import Reference, State  # noqa: E402

COORDS = ["panda_hand_tcp.x", "panda_hand_tcp.y", "panda_hand_tcp.rx", "panda_hand_tcp.ry", "panda_hand_tcp.rz",
          "panda_joint3"]
JOINTS = [f"panda_joint{i}" for i in range(1, 8)]
PARAMS = {  # gains of config/panda_table.yaml for the quasi-velocity laws; PIDC-type gains for the others
    "quasi_tracking": dict(kp=60.0, kd=120.0, kf=0.3, ki=30.0),
    "quasi_setpoint": dict(kp=60.0, kd=120.0, kf=0.3, ki=30.0),
    "pidc": dict(kp=400.0, kd=40.0),
    "pidc_force": dict(kp=400.0, kd=40.0, kf=0.3, ki=30.0),
    "passive": dict(kp=400.0, kd=40.0, actuated=JOINTS),
}
#: the whole-body operational-space law: the same coordinates and PIDC-type gains
COORD_BASELINES = {"osc_constrained": dict(kp=400.0, kd=40.0, kf=0.3, ki=30.0)}
#: the tool-frame baselines (θ = tool position): the operational-space law with the table task's bandwidths and
#: force PI (config/panda_table.yaml), the impedance baseline with the demo's gains (config/demo.yaml)
TOOL = "panda_hand_tcp"
TOOL_PARAMS = {
    "osc": dict(frame=TOOL, contact="contact", kp=60.0, kd=120.0, kf=0.3, ki=30.0),
    "impedance": dict(frame=TOOL, contact="contact", kp_pos=3000.0, kd_pos=150.0, kp_rot=150.0, kd_rot=12.0),
}


def panda_table() -> tuple[ConstrainedSystem, np.ndarray]:
    import yaml

    doc = yaml.safe_load((ROOT / "config" / "panda_table_model.yaml").read_text())
    system = ConstrainedSystem.from_yaml(doc)
    return system, np.asarray(doc["initial"]["q"], float)


def reference(system):
    import yaml

    c = yaml.safe_load((ROOT / "config" / "panda_table.yaml").read_text())["qv_controller"]["ros__parameters"]
    r = c["reference"]
    W = np.asarray(r["waypoints"], float).reshape(len(r["times"]), -1)
    return SplineReference(r["times"], W, kind=r["kind"], lambda_=np.asarray(c["lambda_desired"], float))


def tool_laws(system, q0: np.ndarray, tool: str = TOOL) -> dict:
    """osc and impedance at the table task's start: posture q0, tool orientation held at its start."""
    pin.framesForwardKinematics(system.model, system.data, q0)
    R0 = system.data.oMf[system.frame_id(tool)].rotation.copy()
    return {name: make_law(name, system, q_null=q0, rotation=R0, **dict(p, frame=tool))
            for name, p in TOOL_PARAMS.items()}


#: another 7-DoF arm: example-robot-data's xArm7, its tool frame pointing down onto a table (point contact, axis z,
#: anchored where the tool starts), θ = the tool's x, y, orientation and joint3 (the redundancy)
ARM2 = dict(robot="xarm7", tool="link_eef", q0=(0.0, 0.3, 0.0, 0.9, 0.0, 0.6, 0.0), joint="joint3")


def second_arm(seconds: float, every: int):
    """(system, states, reference, coordinates) of a lock-step closed-loop run of the xArm7 with quasi_tracking:
    the Panda task's square (its x, y offsets from the start, the same times and λ_d) about the tool's start."""
    from qv_control.coordinates import as_coordinates
    from qv_dynamics.sim import simulate

    tool = ARM2["tool"]
    system = ConstrainedSystem.from_urdf(ARM2["robot"], constraints=[
        {"type": "point_contact", "name": "contact", "frame": tool, "axes": ["z"]}])
    coords = [f"{tool}.{a}" for a in ("x", "y", "rx", "ry", "rz")] + [ARM2["joint"]]
    q0 = np.array(ARM2["q0"])
    panda = reference(panda_table()[0])
    W = np.array([panda(t).theta for t in panda.times])
    W[:, :2] -= W[0, :2]
    W[:, 2:] = 0.0
    W += as_coordinates(system, coords).evaluate(q0, np.zeros(7)).theta
    ref = SplineReference(panda.times, W, kind=panda.kind, lambda_=panda(0.0).lambda_)
    law = make_law("quasi_tracking", system, coordinates=coords, **PARAMS["quasi_tracking"])
    tr = simulate(system, q0, np.zeros(system.nv), law, seconds, 1e-3, reference=ref)
    assert tr.ok, tr.error
    states = [State(t=float(tr.t[i]), q=tr.q[i].copy(), qdot=tr.qdot[i].copy(), lambda_meas=tr.lam[i].copy())
              for i in range(1, len(tr.t), every)]
    return system, states, ref, coords


def tool_reference(system, r: Reference) -> Reference:
    """The table task's reference for a tool-position law: (x_d, y_d) of θ_d, z on the table (the contact's
    anchored height), the same λ_d."""
    z = float(system.constraint("contact").position[2])
    return Reference(theta=np.array([r.theta[0], r.theta[1], z]), theta_dot=np.array([*r.theta_dot[:2], 0.0]),
                     theta_ddot=np.array([*r.theta_ddot[:2], 0.0]), lambda_=r.lambda_)


def closed_loop_states(seconds: float, every: int):
    """(system, states, reference) of a lock-step run of the table task with quasi_tracking."""
    from qv_dynamics.sim import simulate

    system, q0 = panda_table()
    ref = reference(system)
    law = make_law("quasi_tracking", system, coordinates=COORDS, **PARAMS["quasi_tracking"])
    tr = simulate(system, q0, np.zeros(system.nv), law, seconds, 1e-3, reference=ref)
    assert tr.ok, tr.error
    states = [State(t=float(tr.t[i]), q=tr.q[i].copy(), qdot=tr.qdot[i].copy(), lambda_meas=tr.lam[i].copy())
              for i in range(1, len(tr.t), every)]
    return system, states, ref


def arm_tick(label: str, system, states, ref, coords, tool: str, reps: int) -> tuple[dict, dict]:
    """Every law of the registry that runs on a fixed-base arm (the legged law: :func:`legged_tick`) and
    pin.constraintDynamics (3-D contact at the tool), interleaved state by state; prints and returns the medians
    (µs) and the laws."""
    refs = [ref(s.t) for s in states]
    model = system.model
    pdata = model.createData()
    cms, cds = pin_constraint_vectors(system, [("3d", tool)])  # std::vectors, as Pinocchio's examples
    pin.initConstraintDynamics(model, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    params = {**PARAMS, **COORD_BASELINES}
    joints = [model.names[j] for j in range(1, model.njoints)]
    laws = {name: make_law(name, system, coordinates=coords, **dict(params[name], **(
        {"actuated": joints} if "actuated" in params[name] else {}))) for name in LAWS if name in params}
    tool_set = tool_laws(system, states[0].q, tool)
    missing = sorted(set(LAWS) - set(laws) - set(tool_set) - {"legged"})
    assert not missing, f"laws not benchmarked: {missing}"
    laws.update(tool_set)
    trefs = [tool_reference(system, r) for r in refs]
    times = {k: [] for k in [*laws, "pin.constraintDynamics"]}
    sat = {k: 0 for k in laws}
    tau0 = np.zeros(system.nv)
    for s, r, tr in zip(states, refs, trefs):
        for name, law in laws.items():
            if name in tool_set:  # posture target = this state: the states drift 0.2 rad from q0 in null-space
                law.q_null = s.q  # motion that the tool laws' stiff posture term (k_p·k_d = 7200/s²) would saturate
            times[name] += time_calls(law.compute, reps, s, tr if name in tool_set else r)
            sat[name] += bool(getattr(law, "saturation", None) is not None and law.saturation.active)
        times["pin.constraintDynamics"] += time_calls(pin.constraintDynamics, reps, model, pdata, s.q, s.qdot, tau0,
                                                      cms, cds, prox)
    print(f"\nLaw tick, {label} + six coordinates {coords}; {len(states)} closed-loop states x {reps} reps "
          f"(pin.constraintDynamics: 3-D contact at the same frame)")
    return median_table(times, "law", 24, extra=("saturated", sat)), laws


def run(n_states: int = 300, reps: int = 5) -> tuple[dict, dict, dict]:
    """Time every law and pin.constraintDynamics on the same closed-loop states; print and return the medians
    (µs) of the Panda table task, of the xArm7's and of the legged law on ANYmal C."""
    import os
    import subprocess

    print("load (uptime):", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
          if os.path.exists("/usr/bin/uptime") else os.getloadavg())
    seconds = 4.0
    every = max(1, int(seconds * 1000) // max(n_states, 1))
    system, states, ref = closed_loop_states(seconds, every)
    med, laws = arm_tick("Panda + table contact (1 row)", system, states, ref, COORDS, TOOL, reps)
    arm2 = second_arm(seconds, every)
    med2, _ = arm_tick("xArm7 + table contact (1 row)", *arm2, ARM2["tool"], reps)
    worst = max(m[k] / m["pin.constraintDynamics"] for m in (med, med2) for k in m)
    from qv_dynamics.kernels.loader import STATUS

    print("compiled kernels (QV_COMPILED=0 for the numpy path): "
          + ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in sorted(STATUS.items())))
    legs = legged_tick(max(20, n_states // 3), reps)
    ratio = legs["legged"] / legs["pin.constraintDynamics"]
    print(f"targets: every arm law <= 5x pin.constraintDynamics (goal 4x): worst {worst:.1f}x -> "
          f"{'met' if worst <= 5 else 'NOT met'}; legged <= 6x: {ratio:.1f}x -> {'met' if ratio <= 6 else 'NOT met'}")
    shared_breakdown(system, laws["pidc"], states, [ref(s.t) for s in states], reps)
    quasi_breakdown(laws["quasi_tracking"], states, [ref(s.t) for s in states], reps)
    return med, med2, legs


def table(path: str, med: dict, med2: dict, legs: dict, n_states: int, reps: int) -> None:
    """The law-tick medians and their ratios to ``pin.constraintDynamics`` as a Markdown table at ``path``."""
    pin_legs = legs["pin.constraintDynamics"]
    rows = [[f"`{k}`", robot, f"{t:.1f}", f"{m['pin.constraintDynamics']:.1f}",
             f"{t / m['pin.constraintDynamics']:.1f}"]
            for m, robot in ((med, "Panda, table contact (1 row)"), (med2, "xArm7, table contact (1 row)"))
            for k, t in m.items() if k != "pin.constraintDynamics"]
    rows.append(["`legged`", "ANYmal C, four feet (12 rows)", f"{legs['legged']:.1f}", f"{pin_legs:.1f}",
                 f"{legs['legged'] / pin_legs:.1f}"])
    write_table(path, f"Law tick: one compute(state, reference) per law against pin.constraintDynamics on the same "
                f"states ({n_states} closed-loop states x {reps} reps, medians)",
                f"PYTHONPATH=. .venv/bin/python bench/law_tick.py --states {n_states} --reps {reps} --write-table PATH",
                ["law", "robot", "law µs", "pin.constraintDynamics µs", "× Pinocchio"], rows,
                "pin.constraintDynamics is called with StdVec_RigidConstraintModel / StdVec_RigidConstraintData "
                "containers, as Pinocchio's examples call it; its contacts are 3-D at the same frames. Timings on "
                "a shared machine: read the ratios, measured side by side.")


def legged_tick(n_states: int = 100, reps: int = 5) -> dict:
    """``make_law("legged")`` on ANYmal C (four feet in stance, hold-still plan) vs ``pin.constraintDynamics``
    with the four 3-D foot contacts, interleaved on the same states (the standing posture, joints perturbed by
    0.02 rad, velocities 0.01): medians printed and returned."""
    from qv_control.demo.anymal import AnymalConfig, make_system
    from qv_dynamics.plants.mujoco_legged import standing_configuration

    cfg = AnymalConfig()
    system = make_system(cfg)
    q0 = standing_configuration(system, joints=cfg.posture)
    law = make_law("legged", system)
    model = system.model
    pdata = model.createData()
    cms, cds = pin_constraint_vectors(system, [("3d", f) for f in cfg.feet])
    pin.initConstraintDynamics(model, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {"legged": [], "pin.constraintDynamics": []}
    for k in range(n_states):
        q = q0.copy()
        q[7:] += 0.02 * rng.standard_normal(12)
        v = 0.01 * rng.standard_normal(18)
        tau = np.r_[np.zeros(6), 10.0 * rng.standard_normal(12)]
        times["legged"] += time_calls(law.compute, reps, State(t=1e-3 * k, q=q, qdot=v))
        times["pin.constraintDynamics"] += time_calls(pin.constraintDynamics, reps, model, pdata, q, v, tau, cms,
                                                      cds, prox)
    print(f"Law tick, ANYmal C on four feet (12 rows, base passive), {n_states} states x {reps} reps "
          f"(pin.constraintDynamics: the four 3-D foot contacts)")
    return median_table(times, "law", 24)


def shared_breakdown(system, law, states, refs, reps: int = 5) -> dict:
    """Medians of the steps every law pays (state check, the terms, coordinates, reference, limiter) and of the
    Pinocchio passes inside them, on the same states: where the shared microseconds go. The terms come from the
    law's sampler (Pinocchio's passes + one kernel call); ``system.evaluate`` (the same terms in fresh arrays) is
    shown beside it."""
    model, data = system.model, system.data
    ev = system.evaluate
    part = np.full(system.nv, 1.0) if law.limits is None else 0.1 * law.limits  # within the limits
    steps = {
        "_read_state": lambda s, r: law._read_state(s),
        "law._terms (the sampler's)": lambda s, r: law._terms(s.q, s.qdot),
        "(system.evaluate)": lambda s, r: ev(s.q, s.qdot, checked=True),
        "coords.evaluate (shared data)": lambda s, r: law.coords.evaluate(s.q, s.qdot, data=data),
        "_read_reference": lambda s, r: law._read_reference(r, s.t, law.last["theta"], 1),
        "_finish (limiter)": lambda s, r: law._finish(part, None, part),
        "  pin.crba": lambda s, r: pin.crba(model, data, s.q),
        "  pin.computeGeneralizedGravity": lambda s, r: pin.computeGeneralizedGravity(model, data, s.q),
        "  pin.computeCoriolisMatrix": lambda s, r: pin.computeCoriolisMatrix(model, data, s.q, s.qdot),
        "  pin.updateFramePlacements": lambda s, r: pin.updateFramePlacements(model, data),
        "  (pin.computeAllTerms)": lambda s, r: pin.computeAllTerms(model, data, s.q, s.qdot),
    }
    times = {k: [] for k in steps}
    for s, r in zip(states, refs):
        law.compute(s, r)  # law.last["theta"] and the coordinates' references at this state
        for k, f in steps.items():
            times[k] += time_calls(f, reps, s, r)
    med = medians_us(times)
    print(f"shared part of a law tick ({law.name}; indented: the Pinocchio passes inside the terms)")
    for k, t in med.items():
        print(f"  {k:32s} {t:8.2f} µs")
    return med


def quasi_breakdown(law, states, refs, reps: int = 5) -> dict:
    """Medians of the parts of a quasi_tracking tick on the same states: the state check, the decomposition
    (``evaluate`` + ``quasi_decompose`` with ``prev``) and the fused tick after it (reference, force PI, the one
    kernel call: coordinates, motion, force channel, torque channels, limiter)."""
    times: dict[str, list[float]] = {k: [] for k in ("_read_state", "_decompose (evaluate + quasi_decompose)",
                                                      "_tick (fused, after the decomposition)",
                                                      "  _read_reference", "  force PI")}
    for s, r in zip(states, refs):
        law.compute(s, r)
        t, q, qdot, lam = law._read_state(s)
        terms, qs = law._decompose(q, qdot)
        times["_read_state"] += time_calls(law._read_state, reps, s)
        times["_decompose (evaluate + quasi_decompose)"] += time_calls(law._decompose, reps, q, qdot)
        times["_tick (fused, after the decomposition)"] += time_calls(law._tick, reps, t, q, qdot, lam, terms, qs, r)
        times["  _read_reference"] += time_calls(law._read_reference, reps, r, t, law._theta_hold, terms.m)
        times["  force PI"] += time_calls(law._force_correction, reps, t, r.lambda_, lam)
    med = medians_us(times)
    print(f"parts of a {law.name} tick")
    for k, v in med.items():
        print(f"  {k:40s} {v:8.2f} µs")
    return med


_FIRST_TICK = """
import time
t0 = time.perf_counter()
import sys
sys.path.insert(0, {bench!r})
import numpy as np
from qv_control.laws import make_law
from qv_dynamics.state import State
import law_tick as lt
t1 = time.perf_counter()
system, q0 = lt.panda_table()
ref = lt.reference(system)
law = make_law({name!r}, system, coordinates=lt.COORDS, **lt.PARAMS[{name!r}])
t2 = time.perf_counter()
state = State(t=0.0, q=q0, qdot=np.zeros(system.nv))
law.compute(state, ref(0.0))
t3 = time.perf_counter()
law.compute(State(t=1e-3, q=q0, qdot=np.zeros(system.nv)), ref(1e-3))
t4 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)
"""  # model + law construction includes loading the compiled kernels from numba's cache (~0.3 s)


def first_tick(name: str = "quasi_tracking") -> tuple[float, ...]:
    """A fresh process as a node starts one: (imports, model + law construction, first compute, second
    compute) in seconds, and the process's whole wall time to its first torque."""
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", _FIRST_TICK.format(bench=str(ROOT / "bench"), name=name)],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    wall = time.perf_counter() - t0
    imp, build, first, second = (float(x) for x in out.stdout.split())
    print(f"first tick in a fresh process ({name}): imports {imp:.2f} s, model + law {build:.2f} s, first compute "
          f"{1e3 * first:.2f} ms, second {1e6 * second:.0f} µs; interpreter start to first torque "
          f"{wall:.2f} s (target: first tick <= 1 s after start)")
    return imp, build, first, second, wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--states", type=int, default=300)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--write-table", metavar="PATH", help="also write the law-tick table (Markdown) to PATH")
    args = ap.parse_args(argv)
    med, med2, legs = run(args.states, args.reps)
    if args.write_table:
        table(args.write_table, med, med2, legs, args.states, args.reps)
    first_tick()
    return 0


if __name__ == "__main__":
    sys.exit(main())
