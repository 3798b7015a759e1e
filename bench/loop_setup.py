"""What the loop benchmarks share: the controller's model, law and reference built from a parameters file as
the controller node builds them, and the θ tracking RMS of a recorded motion (bench/deployed_loop.py,
bench/command_schedule.py)."""
from __future__ import annotations

import numpy as np


def controller_setup(config: str):
    """(system, law, reference, coordinates spec, q0) as the controller node builds them from ``config``."""
    from qv_control.laws import make_law
    from qv_control.references import SplineReference
    from qv_control.ros.bringup import load_params_file
    from qv_dynamics.ros.params import load_model_config

    P = load_params_file(config)
    c = P["qv_controller"]
    system, doc = load_model_config(c["model_config"])
    lp = {k[len("law_params."):]: v for k, v in c.items() if k.startswith("law_params.")}
    lp = {k: (np.asarray(v, float) if isinstance(v, list) and v and not isinstance(v[0], str) else v)
          for k, v in lp.items()}
    law = make_law(c["law"], system, **lp)
    times = c["reference.times"]
    W = np.asarray(c["reference.waypoints"], float).reshape(len(times), -1)
    ref = SplineReference(times, W, kind=c.get("reference.kind", "quintic"),
                          lambda_=np.asarray(c.get("lambda_desired") or [], float) if c.get("lambda_desired") else None)
    return system, law, ref, lp["coordinates"], np.asarray(doc["initial"]["q"], float)


def theta_rms(system, coords, ref, t, q, skip: float = 0.0, q_anchor=None) -> float:
    """RMS over samples of ‖θ(q) − θ_d(t)‖ with θ's orientation reference taken where the controller took
    its own: at ``q_anchor``, the first state it answered (the simulator's corrected initial state: it waits
    for the first command); None: at the first sample. A monitor that matched the simulator late records its first
    sample seconds into the run, and an orientation reference taken there biases rx, ry, rz by the tool's
    attitude error at that time (several times the lock-step figure)."""
    from qv_control.coordinates import MinimalCoordinates

    mc = MinimalCoordinates(system, coords)
    if q_anchor is not None:
        mc.anchor(q_anchor)
    zero = np.zeros(system.nv)
    err = []
    from qv_dynamics.errors import QVError

    for ti, qi in zip(t, q):
        try:
            th = mc.evaluate(qi, zero).theta
        except QVError:  # the loop lost the task (orientation beyond the coordinates' chart)
            return float("inf")
        if ti >= skip:
            err.append(float(np.sum((th - ref(ti).theta) ** 2)))
    return float(np.sqrt(np.mean(err))) if err else float("nan")
