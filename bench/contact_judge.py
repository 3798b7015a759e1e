"""The judge of ``bench/contact_task.py``: the deployed contact task's figures from the topics recorded outside
the nodes, and the targets they are held to.

Safety (every run): the MuJoCo-measured normal force never above the force limit (``task.force_limit`` × the
commanded force: ``task.force`` before the first touch, the force profile after it): the largest of the plant's
own ``contact_force_peak_n`` (its contact force, every control period) and of the F/T samples recorded here;
the run ends ``done``, or in a ``hold`` with the tool lifted (no contact at the end) and its drift ≤ 1 cm
(the tool's largest distance, after the hold's retract, from where the retract ended).

Task criteria (reported; all met on a quiet machine): contact made and held (from the first sample above
``contact_on`` to the last, ≥ 99 % of the samples above ``contact_off``, until the planned release, no safe
hold); touch-down peak (first 0.5 s) ≤ 1.5 × the steady force (the median after it); ≥ 80 % of the samples
after the first 0.5 s in contact within ±5 % of it; tool travel ≥ 2 cm while in contact; no watchdog
episode in the controller's /diagnostics; every process alive at the end; force RMS error against the
commanded profile ≤ 0.05 % of the force (the 50 ms after each commanded step left out: a step's
transient, not regulation).

The commanded profile and the planned trace are timed from the controller's own first-touch instant (its
/diagnostics ``task_t_contact_s``, the stamp of the state at which it detected the touch), as the task times
them; the first F/T sample above ``contact_on`` only bounds the contact segment (the circle runs at
r ω = 6.3 cm/s: 1 ms of offset is 63 µm of path error). The normal force is f_n = −(R f)_z with f the sensor's
wrench (robot on environment, tool axes) and R the tool orientation from the model's kinematics at the joint
state of the same stamp; the tool position likewise.
"""
from __future__ import annotations

import struct

import numpy as np

FORCE_RMS_BOUND = 5e-4      # force RMS error ≤ 0.05 % of the commanded force
DRIFT_BOUND = 0.01          # m: the tool's drift in a hold


def _stamp(data: bytes) -> float:
    """The header stamp [s] of a serialized stamped message (little-endian CDR: sec, nanosec after the 4-byte
    encapsulation)."""
    sec, nanosec = struct.unpack_from("<iI", data, 4)
    return sec + 1e-9 * nanosec


def _stamp_of(msg) -> float:
    return msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec


class Watch:
    """Records /joint_states (stamp, q), the F/T wrench (stamp, f), the effort commands' arrival times, the
    controller's phase and /diagnostics values of the controller and of the plant."""

    def __init__(self, node, wrench: str, controller: str = "qv_controller"):
        import time

        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from rclpy.qos import DurabilityPolicy, QoSProfile, qos_profile_sensor_data
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray, String

        from qv_dynamics.ros.raw import JointStateDecoder, subscribe_raw, wrench_values

        self.js, self.ft, self.cmd_wall, self.diag, self.plant = [], [], [], {}, {}
        self.unreadable = 0
        self.phase = "?"
        self._clock = time.monotonic
        # the 1 kHz topics read from their bytes with the nodes' own decoders (a recorder decoding them with rclpy
        # would take a share of the two cores from the processes it judges)
        subscribe_raw(node, JointState, "/joint_states", JointStateDecoder().decode, self.on_js, 100, self._bad)
        subscribe_raw(node, WrenchStamped, wrench, lambda b: (_stamp(b), wrench_values(b)), self.on_ft,
                      qos_profile_sensor_data, self._bad)
        node.create_subscription(DiagnosticArray, "/diagnostics", self.on_diag, 10)
        node.create_subscription(Float64MultiArray, "/effort_controller/commands",
                                 lambda _m: self.cmd_wall.append(self._clock()), qos_profile_sensor_data, raw=True)
        node.create_subscription(String, f"/{controller}/phase", self.on_phase,
                                 QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL))

    def _bad(self, exc) -> None:
        self.unreadable += 1

    def on_js(self, msg) -> None:
        t = msg.sec + 1e-9 * msg.nanosec if hasattr(msg, "sec") else _stamp_of(msg)
        self.js.append((t, list(msg.name), np.array(msg.position, float)))

    def on_ft(self, value) -> None:
        t, w = value
        self.ft.append((t, np.array(w[:3], float)))

    def on_phase(self, msg) -> None:
        self.phase = msg.data

    def on_diag(self, msg) -> None:
        for s in msg.status:
            if s.name.endswith(": controller"):
                self.diag.update({kv.key: kv.value for kv in s.values})
            elif s.name.endswith(": plant"):
                self.plant.update({kv.key: kv.value for kv in s.values})


def samples(watch: Watch, frame: str, system) -> np.ndarray | None:
    """Rows (t, f_n, x, y, z) of the F/T samples with a joint state of the same stamp, sorted by t."""
    names = list(system.velocity_names)
    js = {round(t, 6): pos[[nm.index(n) for n in names]] for t, nm, pos in watch.js}
    rows = []
    for t, f in watch.ft:
        q = js.get(round(t, 6))
        if q is not None:
            oMf = system.frame_placement(q, frame)
            rows.append((t, -float((oMf.rotation @ f)[2]), *oMf.translation))
    return np.array(sorted(rows)) if rows else None


def _profile(c: dict):
    from qv_control.task import ForceProfile

    steps = c.get("task.force_steps") or []
    return ForceProfile(float(c.get("task.force", 10.0)), list(zip(steps[::2], steps[1::2])))


def safety(a: np.ndarray | None, c: dict, t0: float, plant_peak: float, hold_t: float | None) -> dict:
    """Peak normal force against the force limit, and (in a hold) the tool's drift (module doc)."""
    force, ratio = float(c.get("task.force", 10.0)), float(c.get("task.force_limit", 3.0))
    prof = _profile(c)
    out = {"plant_peak_n": plant_peak, "limit_n": ratio * force}
    if a is None:
        out.update(peak_n=plant_peak, peak_over_limit=plant_peak / (ratio * force), drift_m=float("nan"),
                   lifted=False)
        return out
    t, fn, p = a[:, 0], a[:, 1], a[:, 2:5]
    limit = np.array([ratio * (force if not np.isfinite(t0) or x < t0 else prof(x - t0)) for x in t])
    k = int(np.argmax(fn / limit))
    # the plant's peak (every control period) against the largest limit it could have met
    worst = max(fn[k] / limit[k], plant_peak / (ratio * max(force, prof.max_force)))
    out.update(peak_n=max(float(fn.max()), plant_peak), peak_over_limit=float(worst), sample_peak_n=float(fn.max()),
               sample_peak_t=float(t[int(np.argmax(fn))]),
               lifted=bool(fn[-20:].max() < float(c.get("task.contact_off", 0.5))))
    if hold_t is not None:
        t_ret = hold_t + float(c.get("task.retract", 0.003)) / float(c.get("task.lift_speed", 0.01))
        after = t >= t_ret
        out["drift_m"] = float(np.max(np.linalg.norm(p[after] - p[after][0], axis=1))) if after.any() else 0.0
    return out


def figures(a: np.ndarray | None, c: dict, system, diag: dict) -> dict:
    """The task criteria's figures (module doc) from the samples ``a`` and the controller's diagnostics."""
    from qv_control.task import CircleTrace, WaypointTrace

    if a is None:
        return {"contact": False, "reason": "no F/T samples with a matching joint state"}
    t, fn, p = a[:, 0], a[:, 1], a[:, 2:4]
    on = np.nonzero(fn > c.get("task.contact_on", 2.0))[0]
    if not on.size:
        return {"contact": False, "reason": f"no contact (max f_n {fn.max():.2f} N)"}
    tc, te = t[on[0]], t[on[-1]]
    seg = (t >= tc) & (t <= te)
    t_task = float(diag.get("task_t_contact_s", "nan"))
    t0 = t_task if np.isfinite(t_task) else tc
    steady = seg & (t >= tc + 0.5)
    Fs = float(np.median(fn[steady])) if steady.any() else float("nan")
    force = float(c.get("task.force", 10.0))
    steps = c.get("task.force_steps") or []
    prof = _profile(c)
    rel = c.get("task.release_at", -1.0)
    w = steady & (t < t0 + rel) if rel and rel > 0 else steady
    half = 0.5 * float(np.median(np.diff(t))) if t.size > 1 else 0.0
    for tau_i in steps[::2]:   # each step's transient from its instant on (half a sample early: stamps are floats)
        w &= ~((t >= t0 + tau_i - half) & (t < t0 + tau_i + 0.05))
    fd = np.array([prof(x - t0) for x in t[w]])
    q0 = np.asarray(c["task.start_q"], float)
    p0 = system.frame_placement(q0, c["task.frame"]).translation
    settle = c.get("task.settle", 0.35)
    if c.get("task.trace", "circle") == "circle":
        tr = CircleTrace(p0, c.get("task.radius", 0.04), c.get("task.period", 4.0), c.get("task.circle_ramp", 0.6))
    else:
        wp = c["task.waypoints"]
        tr = WaypointTrace(p0, list(zip(wp[::2], wp[1::2])), c.get("task.segment_time", 1.0))
    pw = w & (t >= t0 + settle + 0.5)
    perr = np.array([np.linalg.norm(p[i] - tr(t[i] - t0 - settle)[0]) for i in np.nonzero(pw)[0]])
    early = fn[seg & (t < tc + 0.5)]
    return {"contact": True, "t_contact": float(tc), "t0": float(t0), "contact_s": float(te - tc),
            "touch_detect_ms": 1e3 * float(t0 - tc), "held": float(np.mean(fn[seg] > c.get("task.contact_off", 0.5))),
            "peak_ratio": float(early.max() / Fs) if early.size and Fs > 0 else float("inf"),
            "peak_over_force": float(fn[seg].max() / force), "steady_force": Fs,
            "in_band": float(np.mean(np.abs(fn[steady] - Fs) <= 0.05 * Fs)) if steady.any() else 0.0,
            "travel_m": float(np.sum(np.linalg.norm(np.diff(p[seg], axis=0), axis=1))),
            "force_rms_rel": float(np.sqrt(np.mean((fn[w] - fd) ** 2)) / force) if w.any() else float("nan"),
            "path_rms_m": float(np.sqrt(np.mean(perr ** 2))) if perr.size else float("nan")}


def judge(d: dict, release_at: float) -> tuple[dict, dict]:
    """(safety verdicts, task criteria verdicts) of one run's figures ``d`` (module doc)."""
    end_ok = d.get("phase") == "done" or (d.get("phase") == "hold" and d.get("lifted", False)
                                           and d.get("drift_m", np.inf) <= DRIFT_BOUND)
    safe = {"peak <= force limit": d.get("peak_over_limit", np.inf) <= 1.0,
            "ends done, or held lifted with drift <= 1 cm": end_ok}
    held = d.get("contact", False) and d.get("held", 0) >= 0.99 and d.get("phase") != "hold"
    if release_at > 0:
        held = held and d.get("contact_s", 0) >= release_at - 0.2
    task = {"contact made and held": held,
            "touch-down <= 1.5x steady": d.get("peak_ratio", np.inf) <= 1.5,
            ">= 80 % within +-5 %": d.get("in_band", 0) >= 0.8,
            "travel >= 2 cm": d.get("travel_m", 0) >= 0.02,
            "no watchdog episode": int(d.get("watchdog_episodes", 1)) == 0,
            "force RMS <= 0.05 %": d.get("force_rms_rel", np.inf) <= FORCE_RMS_BOUND,
            "every process alive": bool(d.get("alive")) and all(d["alive"].values())}
    return safe, task


__all__ = ["DRIFT_BOUND", "FORCE_RMS_BOUND", "Watch", "figures", "judge", "safety", "samples"]
