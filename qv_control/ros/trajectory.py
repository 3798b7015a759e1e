"""Trajectory message sampling: θ_d(t), θ̇_d(t), θ̈_d(t) from a trajectory_msgs/JointTrajectory on the
controller's named reference coordinates (the ``~/reference`` topic of SPEC §5)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from trajectory_msgs.msg import JointTrajectory

from qv_dynamics.errors import DimensionError, UnknownNameError, as_vector
from qv_dynamics.ros.messages import stamp_to_sec


class JointTrajectoryReference:
    """θ_d(t), θ̇_d(t), θ̈_d(t) from a trajectory_msgs/JointTrajectory, mapped onto named coordinates.

    Positions are interpolated by cubic Hermite splines when the points carry velocities (linear
    otherwise); accelerations are interpolated linearly when given. Before the first point the first is
    held; after the last the last position is held with zero velocity and acceleration. A header stamp
    of zero means "start when received" (``t_receive``)."""

    def __init__(self, msg: JointTrajectory, coordinate_names: Sequence[str], t_receive: float):
        names = list(coordinate_names)
        if not msg.points:
            raise DimensionError("joint trajectory has no points")
        unknown = [n for n in msg.joint_names if n not in names]
        if unknown:
            raise UnknownNameError(f"joint trajectory names {unknown} are not reference coordinates {names}")
        missing = [n for n in names if n not in msg.joint_names]
        if missing:
            raise UnknownNameError(f"joint trajectory lacks reference coordinates {missing}")
        k = len(msg.joint_names)
        order = np.array([list(msg.joint_names).index(n) for n in names], int)
        t0 = stamp_to_sec(msg.header.stamp)
        self.t0 = t_receive if t0 == 0.0 else t0
        ts, P, V, A = [], [], [], []
        for i, p in enumerate(msg.points):
            t = p.time_from_start.sec + 1e-9 * p.time_from_start.nanosec
            pos = as_vector(f"trajectory point {i} positions", p.positions, k)[order]
            vel = as_vector(f"trajectory point {i} velocities", p.velocities, k)[order] if len(p.velocities) else None
            acc = as_vector(f"trajectory point {i} accelerations", p.accelerations, k)[order] \
                if len(p.accelerations) else None
            if ts and t <= ts[-1]:
                raise DimensionError(f"trajectory point {i}: time_from_start must increase")
            ts.append(t)
            P.append(pos)
            V.append(vel)
            A.append(acc)
        self.t = np.array(ts)
        self.P = np.array(P)
        self.has_v = all(v is not None for v in V)
        self.V = np.array(V) if self.has_v else None
        self.has_a = all(a is not None for a in A)
        self.A = np.array(A) if self.has_a else None

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = t - self.t0
        n = self.P.shape[1]
        if s <= self.t[0]:
            return self.P[0].copy(), np.zeros(n), np.zeros(n)
        if s >= self.t[-1]:
            return self.P[-1].copy(), np.zeros(n), np.zeros(n)
        i = int(np.searchsorted(self.t, s) - 1)
        h = self.t[i + 1] - self.t[i]
        x = (s - self.t[i]) / h
        p0, p1 = self.P[i], self.P[i + 1]
        if self.has_v:
            v0, v1 = self.V[i], self.V[i + 1]
            h00, h10, h01, h11 = 2 * x**3 - 3 * x**2 + 1, x**3 - 2 * x**2 + x, -2 * x**3 + 3 * x**2, x**3 - x**2
            pos = h00 * p0 + h10 * h * v0 + h01 * p1 + h11 * h * v1
            d00, d10, d01, d11 = 6 * x**2 - 6 * x, 3 * x**2 - 4 * x + 1, -6 * x**2 + 6 * x, 3 * x**2 - 2 * x
            vel = (d00 * p0 + d10 * h * v0 + d01 * p1 + d11 * h * v1) / h
            e00, e10, e01, e11 = 12 * x - 6, 6 * x - 4, -12 * x + 6, 6 * x - 2
            acc = (e00 * p0 + e10 * h * v0 + e01 * p1 + e11 * h * v1) / h**2
        else:
            pos = (1 - x) * p0 + x * p1
            vel = (p1 - p0) / h
            acc = np.zeros(n)
        if self.has_a:
            acc = (1 - x) * self.A[i] + x * self.A[i + 1]
        return pos, vel, acc

