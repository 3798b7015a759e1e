"""Law tick of every law in ``make_law`` vs ``pin.constraintDynamics`` on the same states (targets: the arm laws
<= 5x, the legged law and two arms <= 6x): the arm laws on the Panda + table contact (point contact, axis z) + six
minimal coordinates and on another 7-DoF arm (xArm7 of example-robot-data, the same task at its flange); the legged
law on ANYmal C standing on its four feet (pin.constraintDynamics with the four 3-D foot contacts); the two-arm law
(passive box joints, internal-force PI) on two Pandas holding a box (pin.constraintDynamics with the two 6-D loop
closures of the same closed chain). Every ratio is measured side by side in one run; the load average is printed.

The states are those of a lock-step closed-loop run of the Panda table task (config/panda_table.yaml: the
tool presses 10 N on the table while it traces a square), so every law sees realistic inputs (no torque
saturation). Each law gets the same states, reference and λ measurement; the calls are interleaved state
by state with Pinocchio's, every call timed on its own, medians reported (robust to a shared machine). The order of
the candidates turns by one at each state (:func:`rotated`): the first call after the operational-space laws' numpy
work finds the code every compiled tick shares (Pinocchio's Coriolis pass, the tick's Python path) out of the
caches and pays to bring it back, ~3x a warm tick (measured: quasi_tracking's first rep 30 µs, the next ones 10 µs,
when it always came first); in turn, every candidate, Pinocchio's call too, pays that equally often.

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
#: the whole-body operational-space law: the same coordinates and PIDC-type gains (numpy products, no compiled tick)
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


def tool_laws(system, q0: np.ndarray) -> dict:
    """osc and impedance at the table task's start: posture q0, tool orientation held at its start."""
    pin.framesForwardKinematics(system.model, system.data, q0)
    R0 = system.data.oMf[system.frame_id(TOOL)].rotation.copy()
    return {name: make_law(name, system, q_null=q0, rotation=R0, **p) for name, p in TOOL_PARAMS.items()}


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


def run(n_states: int = 300, reps: int = 5) -> tuple[dict, dict]:
    """Time every law and pin.constraintDynamics on the same closed-loop states; print and return the medians
    (µs) of the Panda table task and of the legged law on ANYmal C."""
    seconds = 4.0
    system, states, ref = closed_loop_states(seconds, max(1, int(seconds * 1000) // max(n_states, 1)))
    refs = [ref(s.t) for s in states]
    model = system.model
    pdata = model.createData()
    cms, cds = pin_constraint_vectors(system, [("3d", "panda_hand_tcp")])  # std::vectors, as Pinocchio's examples
    pin.initConstraintDynamics(model, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    # every law of the registry that runs on the fixed-base Panda (the legged law: bench/legged.py)
    params = {**PARAMS, **COORD_BASELINES}
    laws = {name: make_law(name, system, coordinates=COORDS, **params[name]) for name in LAWS if name in params}
    tool = tool_laws(system, states[0].q)
    missing = sorted(set(LAWS) - set(laws) - set(tool) - {"legged"})
    assert not missing, f"laws not benchmarked: {missing}"
    laws.update(tool)
    trefs = [tool_reference(system, r) for r in refs]
    times = {k: [] for k in [*laws, "pin.constraintDynamics"]}
    sat = {k: 0 for k in laws}
    tau0 = np.zeros(system.nv)
    for i, (s, r, tr) in enumerate(zip(states, refs, trefs)):
        for name in rotated([*laws, "pin.constraintDynamics"], i):
            if name == "pin.constraintDynamics":
                times[name] += time_calls(pin.constraintDynamics, reps, model, pdata, s.q, s.qdot, tau0, cms, cds,
                                          prox)
                continue
            law = laws[name]
            if name in tool:  # posture target = this state: the states drift 0.2 rad from q0 in null-space motion
                law.q_null = s.q  # that the tool laws' stiff posture term (k_p·k_d = 7200/s²) would saturate
            times[name] += time_calls(law.compute, reps, s, tr if name in tool else r)
            sat[name] += bool(getattr(law, "saturation", None) is not None and law.saturation.active)
    print(f"\nLaw tick, Panda + table contact (1 row) + six coordinates {COORDS}; {len(states)} closed-loop "
          f"states x {reps} reps (pin.constraintDynamics: 3-D contact at the same frame); load {load()}")
    med = median_table(times, "law", 24, extra=("saturated", sat))
    worst = max(med[k] for k in laws) / med["pin.constraintDynamics"]
    from qv_dynamics.kernels.loader import STATUS

    print("compiled kernels (QV_COMPILED=0 for the numpy path): "
          + ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in sorted(STATUS.items())))
    legs = legged_tick(max(20, n_states // 3), reps)
    other = other_arm_tick(max(20, n_states // 3), reps)
    arms = two_arm_tick(max(20, n_states // 3), reps)
    worst_other = max(other[k] for k in other if k != "pin.constraintDynamics") / other["pin.constraintDynamics"]
    worst6 = max(legs["legged"] / legs["pin.constraintDynamics"], arms["passive"] / arms["pin.constraintDynamics"])
    print(f"targets: every arm law <= 5x pin.constraintDynamics (Panda worst {worst:.1f}x, xArm7 worst "
          f"{worst_other:.1f}x), legged and two arms <= 6x (worst {worst6:.1f}x) -> "
          f"{'met' if max(worst, worst_other) <= 5 and worst6 <= 6 else 'NOT met'}; load {load()}")
    legs = {"legged": legs, "xarm7": other, "two_arms": arms}
    tick_breakdown({k: laws[k] for k in ("quasi_tracking", "pidc")}, states[:40], refs[:40], reps)
    return med, legs


def rotated(names: list, i: int) -> list:
    """``names`` starting at entry i mod len (module doc: each candidate first as often as the others)."""
    k = i % len(names)
    return names[k:] + names[:k]


def load() -> str:
    import os

    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def table(path: str, med: dict, more: dict, n_states: int, reps: int) -> None:
    """The law-tick medians and their ratios to ``pin.constraintDynamics`` as a Markdown table at ``path``."""
    rows = []
    for robot, times, names in (("Panda, table contact (1 row)", med, None),
                                ("xArm7, table contact (1 row)", more["xarm7"], None),
                                ("ANYmal C, four feet (12 rows)", more["legged"], {"legged": "legged"}),
                                ("two Pandas + box, two welds (12 rows)", more["two_arms"], {"passive": "passive"})):
        p = times["pin.constraintDynamics"]
        rows += [[f"`{k}`", robot, f"{t:.1f}", f"{p:.1f}", f"{t / p:.1f}"]
                 for k, t in times.items() if k != "pin.constraintDynamics" and (names is None or k in names)]
    write_table(path, f"Law tick: one compute(state, reference) per law against pin.constraintDynamics on the same "
                f"states ({n_states} closed-loop states x {reps} reps, medians)",
                f"PYTHONPATH=. .venv/bin/python bench/law_tick.py --states {n_states} --reps {reps} --write-table PATH",
                ["law", "robot", "law µs", "pin.constraintDynamics µs", "× Pinocchio"], rows,
                "pin.constraintDynamics is called with StdVec_RigidConstraintModel / StdVec_RigidConstraintData "
                "containers, as Pinocchio's examples call it; its contacts are 3-D at the same frames. Timings on "
                "a shared machine: read the ratios, measured side by side.")


XARM = "xarm_description/urdf/xarm7.urdf"
XARM_COORDS = ["link_eef.x", "link_eef.y", "link_eef.rx", "link_eef.ry", "link_eef.rz", "joint3"]


def other_arm_tick(n_states: int = 100, reps: int = 5) -> dict:
    """The arm laws on another 7-DoF arm (xArm7, example-robot-data): its flange on a table (point contact, z),
    θ = flange x, y, orientation and joint 3, states of a random walk near a bent pose, the hold target, 10 N down;
    vs ``pin.constraintDynamics`` with a 3-D contact at the flange, interleaved."""
    from qv_dynamics.robots import example_robot_data_dir

    system = ConstrainedSystem.from_urdf(str(example_robot_data_dir() / XARM),
                                         constraints=[{"type": "point_contact", "frame": "link_eef", "axes": ["z"],
                                                       "name": "contact"}])
    q0 = np.array([0.0, 0.3, 0.0, 0.9, 0.0, 0.6, 0.0])
    gains = {k: (dict(v, actuated=[f"joint{i}" for i in range(1, 8)]) if k == "passive" else v)
             for k, v in {**PARAMS, **COORD_BASELINES}.items()}
    laws = {name: make_law(name, system, coordinates=XARM_COORDS, **p) for name, p in gains.items()}
    pin.framesForwardKinematics(system.model, system.data, q0)
    R0 = system.data.oMf[system.frame_id("link_eef")].rotation.copy()
    laws.update({name: make_law(name, system, q_null=q0, rotation=R0, **dict(p, frame="link_eef"))
                 for name, p in TOOL_PARAMS.items()})
    model = system.model
    pdata = model.createData()
    cms, cds = pin_constraint_vectors(system, [("3d", "link_eef")])
    pin.initConstraintDynamics(model, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    rng = np.random.default_rng(3)
    ref = Reference(lambda_=np.array([-10.0]))
    tref = Reference(theta=system.data.oMf[system.frame_id("link_eef")].translation.copy(), lambda_=ref.lambda_)
    times = {k: [] for k in [*laws, "pin.constraintDynamics"]}
    q = q0.copy()
    tau0 = np.zeros(7)
    for k in range(n_states):
        v = 0.05 * rng.standard_normal(7)
        q = q + 1e-3 * v
        s = State(t=1e-3 * k, q=q.copy(), qdot=v, lambda_meas=np.array([-10.0]))
        for name in rotated([*laws, "pin.constraintDynamics"], k):
            if name == "pin.constraintDynamics":
                times[name] += time_calls(pin.constraintDynamics, reps, model, pdata, s.q, s.qdot, tau0, cms, cds,
                                          prox)
            else:
                times[name] += time_calls(laws[name].compute, reps, s, tref if name in TOOL_PARAMS else ref)
    print(f"Law tick, xArm7 + table contact (1 row) + six coordinates {XARM_COORDS}; {n_states} states x {reps} reps")
    return median_table(times, "law", 24)


def two_arm_tick(n_states: int = 100, reps: int = 5) -> dict:
    """The two-arm law (``passive``: the box's six joints passive, the internal-force PI, as ``qv demo bimanual``)
    on two Pandas holding a box, on states of its closed loop in the simulator, vs ``pin.constraintDynamics`` with
    the two 6-D loop closures (hand to box) of the same closed chain, interleaved."""
    from qv_control.demo.bimanual import BimanualConfig, BoxPlan, coordinates
    from qv_dynamics import simulate
    from qv_dynamics.sim.bimanual import arm_joints, bimanual_system, nominal_q

    system = bimanual_system()
    q0 = nominal_q(system)
    mask = np.zeros(system.nv, bool)
    mask[[system.joint_v_index(j) for j in arm_joints()]] = True
    cfg = BimanualConfig(conditions="ideal")
    plan = BoxPlan(cfg, system, q0, mask)
    law = make_law("passive", system, coordinates=coordinates(plan.R0), actuated=arm_joints(), kp=cfg.kp, kd=cfg.kd,
                   kf=cfg.kf, ki=cfg.ki, q0=q0, internal_tol=cfg.internal_tol)
    tr = simulate(system, q0, np.zeros(system.nv), law, t_final=1e-3 * (n_states + 1), dt=1e-3,
                  reference=plan.reference)
    assert tr.ok, tr.error
    law.reset()
    model = system.model
    pdata = model.createData()
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in system.constraints:
        fa, fb = model.frames[c.frame_id], model.frames[c.frame_b_id]
        cm = pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, model, fa.parentJoint, fa.placement, fb.parentJoint,
                                      fb.placement, pin.ReferenceFrame.LOCAL_WORLD_ALIGNED)
        cms.append(cm)
        cds.append(cm.createData())
    pin.initConstraintDynamics(model, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-12, 0.0, 1)
    tau0 = np.zeros(system.nv)
    times = {"passive": [], "pin.constraintDynamics": []}
    for i in range(len(tr.t) - 1):
        s = State(t=float(tr.t[i]), q=tr.q[i], qdot=tr.qdot[i], lambda_meas=tr.lam[i - 1] if i else None)
        times["passive"] += time_calls(law.compute, reps, s, plan.reference(s.t))
        times["pin.constraintDynamics"] += time_calls(pin.constraintDynamics, reps, model, pdata, s.q, s.qdot, tau0,
                                                      cms, cds, prox)
    print(f"Law tick, two Pandas holding a box (two 6-D loop closures, box passive), {len(tr.t) - 1} closed-loop "
          f"states x {reps} reps")
    return median_table(times, "law", 24)


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


def tick_breakdown(laws: dict, states, refs, reps: int = 5) -> dict:
    """Medians of the parts of a compiled tick on the same states, per law: the whole ``compute``, Pinocchio's
    Coriolis pass, the one kernel call (state, reference and the packed blocks), and the Python around them (the
    difference: the state and reference read, the rare-event checks, the call itself)."""
    out = {}
    for name, law in laws.items():
        ct = getattr(law, "_ct", None)
        if ct is None or ct.I is None:
            continue
        model, data = ct.model, ct.data
        times = {"compute": [], "pin.computeCoriolisMatrix": [], "kernel": []}
        for s, r in zip(states, refs):
            law.compute(s, r)
            tau = np.empty(ct.n)
            times["compute"] += time_calls(law.compute, reps, s, r)
            times["pin.computeCoriolisMatrix"] += time_calls(pin.computeCoriolisMatrix, reps, model, data, s.q, s.qdot)
            v = ct.views
            times["kernel"] += time_calls(ct.kernel, reps, v[0], v[1], v[2], v[3], v[4], v[5], ct.I, ct.F, s.q, s.qdot,
                                          s.lambda_meas, r.theta, r.theta_dot, r.theta_ddot, r.lambda_, s.t, tau)
        med = medians_us(times)
        med["Python around"] = med["compute"] - med["pin.computeCoriolisMatrix"] - med["kernel"]
        print(f"parts of a {name} tick: " + ", ".join(f"{k} {v:.2f} µs" for k, v in med.items()))
        out[name] = med
    return out


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
    med, legs = run(args.states, args.reps)
    if args.write_table:
        table(args.write_table, med, legs, args.states, args.reps)
    first_tick()
    return 0


if __name__ == "__main__":
    sys.exit(main())
