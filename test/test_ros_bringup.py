"""One-process bringup (sim + dynamics + controller nodes over rclpy) vs. the pure-library closed loop.

Both runs use the same law (built from the same parameters), the same plant (the simulator's model with
``mass_scale``, i.e. a 10 % heavier plant than the controller's model, so the force PI and the motion
loop have real errors to remove) and the same stepper. The reference for the ROS run is built by the
controller node from its parameters; the test builds the library's reference independently from the
same file. Force and motion errors must agree within 1 % (they agree to round-off: lock-step makes the
ROS loop deterministic).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")

from qv_control.laws.registry import make_law  # noqa: E402
from qv_control.references import SplineReference  # noqa: E402
from qv_control.ros.bringup import Bringup, load_params_file, tracking_errors  # noqa: E402
from qv_dynamics.robots import scale_inertias  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402
from qv_dynamics.sim import simulate  # noqa: E402
from qv_dynamics.state import Reference  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 7) % 200
DURATION = 10.0


def library_closed_loop(config: str, duration: float):
    """simulate() with the law, reference and plant described by the parameters file."""
    P = load_params_file(config)
    cp, sp = P["qv_controller"], P["qv_sim"]
    model, doc = load_model_config(cp["model_config"])
    law = make_law(cp["law"], model, **{k[len("law_params."):]: (np.asarray(v, float) if isinstance(v, list) and
                                                                   v and not isinstance(v[0], str) else v)
                                        for k, v in cp.items() if k.startswith("law_params.")})
    times = np.asarray(cp["reference.times"], float)
    spline = SplineReference(times, np.asarray(cp["reference.waypoints"], float).reshape(times.size, -1),
                             kind=cp.get("reference.kind", "quintic"), coordinates=law.coords)
    lam_d = np.asarray(cp["lambda_desired"], float) if "lambda_desired" in cp else None

    def reference(t):
        r = spline(t)
        return Reference(r.theta, r.theta_dot, r.theta_ddot, lam_d)

    plant, pdoc = load_model_config(sp["model_config"])
    scale_inertias(plant, float(sp.get("mass_scale", 1.0)))
    traj = simulate(plant, np.asarray(pdoc["initial"]["q"], float), np.zeros(plant.nv), law, duration,
                    float(sp["dt"]), method=sp.get("method", "projection"), integrator=sp.get("integrator", "rk4"),
                    reference=reference)
    assert traj.ok, traj.error
    return traj, law, reference


def _check(ros_err: dict, lib_err: dict, keys) -> None:
    for k in keys:
        assert np.isfinite(lib_err[k]) and lib_err[k] > 0, (k, lib_err)
        assert ros_err[k] == pytest.approx(lib_err[k], rel=0.01), (k, ros_err[k], lib_err[k])


def test_bringup_planar_3link_equals_library_closed_loop():
    config = str(ROOT / "config" / "planar_3link.yaml")
    with Bringup(config, domain_id=DOMAIN) as b:
        stats = b.run(DURATION, wall_timeout=150.0)
        summary = b.summary(stats)
        arr = b.arrays()
        dyn_msgs = b.dynamics.stats["messages"]
    assert stats["completed"] and stats["steps"] == 10000
    assert summary["safe_commands"] == 0 and not summary["rejected"]
    assert dyn_msgs >= 10000  # the dynamics node evaluated every published state
    traj, law, reference = library_closed_loop(config, DURATION)
    n = len(arr["t"])
    lib = tracking_errors(law, reference, traj.t[:n], traj.q[:n], traj.lam[:n])
    _check(summary, lib, ("motion_rms_error", "force_rms_error", "force_rms_error_rel"))
    # and the trajectories themselves coincide (lock-step, same stepper, same law)
    np.testing.assert_allclose(arr["q"], traj.q[:n], atol=1e-9)
    np.testing.assert_allclose(arr["tau"], traj.tau[:n], atol=1e-7)
    # the force loop did real work: λ tracks λ_d = 5 N to < 1 % RMS despite the 10 % mass error
    assert 1e-6 < summary["force_rms_error_rel"] < 0.01


def test_bringup_cli_slider_crank_equals_library_closed_loop(tmp_path):
    from qv_control.cli import main

    config = str(ROOT / "config" / "slider_crank.yaml")
    rc = main(["bringup", config, "--duration", str(DURATION), "--out", str(tmp_path), "--domain-id", str(DOMAIN)])
    assert rc == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["completed"] and summary["steps"] == 10000 and summary["sim_time_s"] == pytest.approx(DURATION)
    data = np.load(tmp_path / "trajectory.npz")
    traj, law, reference = library_closed_loop(config, DURATION)
    n = len(data["t"])
    lib = tracking_errors(law, reference, traj.t[:n], traj.q[:n], traj.lam[:n])
    # slider-crank: crank motion tracking; no force objective (λ_d = 0), so the force figure is the RMS
    # slider reaction — compared all the same
    _check(summary, lib, ("motion_rms_error", "force_rms_error"))
    np.testing.assert_allclose(data["q"], traj.q[:n], atol=1e-9)
    assert np.all(data["tau"][:, 1] == 0.0)  # passive rod joint: never commanded
