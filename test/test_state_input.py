"""The controller's inputs read into preallocated arrays (qv_dynamics/ros/state_input.py) against the
references they replace: :class:`JointStateReader` against ``joint_state_to_arrays`` (q, q̇, effort and the
errors, for messages and for the views of their serialized bytes, in any name order with extra joints,
fixed-base and free-flyer layouts), :class:`SensorWrenches` against the sensor wrench rotated with
Pinocchio's own frame placements (``framesForwardKinematics``) and ``sensor_wrench_rows``, per active set."""
from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

pytest.importorskip("rclpy")

from rclpy.serialization import serialize_message  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from qv_dynamics.errors import QVError  # noqa: E402
from qv_dynamics.ros.messages import JointLayout, joint_state_to_arrays, sensor_wrench_rows  # noqa: E402
from qv_dynamics.ros.params import load_model_config  # noqa: E402
from qv_dynamics.ros.raw import JointStateDecoder  # noqa: E402
from qv_dynamics.ros.state_input import JointStateReader, SensorWrenches  # noqa: E402
from qv_dynamics.sim.bimanual import bimanual_system, nominal_q  # noqa: E402


def _message(rng, layout: JointLayout, effort: bool) -> JointState:
    names = list(layout.names) + ["extra_a", "extra_b"]
    order = rng.permutation(len(names))
    n = len(names)
    msg = JointState(name=[names[i] for i in order], position=rng.normal(size=n).tolist(),
                     velocity=rng.normal(size=n).tolist(), effort=rng.normal(size=n).tolist() if effort else [])
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(rng.integers(0, 2**31 - 1)), int(rng.integers(0, 10**9))
    return msg


@pytest.mark.parametrize("floating", [False, True])
def test_joint_state_reader_equals_joint_state_to_arrays(floating):
    system = bimanual_system() if floating else load_model_config("panda_table_model.yaml")[0]
    layout = JointLayout.from_system(system, floating=floating)
    reader, decoder = JointStateReader(layout), JointStateDecoder()
    rng = np.random.default_rng(21)
    for k in range(60):
        msg = _message(rng, layout, effort=k % 3 != 0)
        q, qdot, effort = joint_state_to_arrays(msg, layout)
        view = decoder.decode(serialize_message(msg))
        for given in (msg, view):
            t = reader.read(given)
            assert t == msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
            assert (reader.sec, reader.nanosec) == (msg.header.stamp.sec, msg.header.stamp.nanosec)
            np.testing.assert_array_equal(reader.q[layout.q_index], q[layout.q_index])
            np.testing.assert_array_equal(reader.qdot[layout.v_index], qdot[layout.v_index])
            assert reader.has_effort == (effort is not None)
            if effort is not None:
                np.testing.assert_array_equal(reader.effort[layout.v_index], effort[layout.v_index])
        if not floating:   # a fixed base: every entry of q and q̇ is a joint's
            np.testing.assert_array_equal(reader.q, q)
            np.testing.assert_array_equal(reader.qdot, qdot)


def test_joint_state_reader_refuses_as_joint_state_to_arrays():
    """A missing joint, a NaN, an Inf effort, a short velocity list: the same error class and text."""
    system = load_model_config("panda_table_model.yaml")[0]
    layout = JointLayout.from_system(system)
    rng = np.random.default_rng(22)
    bad = []
    for k in range(4):
        msg = _message(rng, layout, effort=True)
        if k == 0:
            msg.name = [n if n != "panda_joint4" else "panda_joint9" for n in msg.name]
        elif k == 1:
            msg.position[msg.name.index("panda_joint2")] = float("nan")
        elif k == 2:
            msg.effort[msg.name.index("panda_joint7")] = float("inf")
        else:
            msg.velocity = msg.velocity[:-1]
        bad.append(msg)
    decoder = JointStateDecoder()
    for msg in bad:
        with pytest.raises(QVError) as ref:
            joint_state_to_arrays(msg, layout)
        for given in (msg, decoder.decode(serialize_message(msg))):
            with pytest.raises(type(ref.value)) as got:
                JointStateReader(layout).read(given)
            assert str(got.value) == str(ref.value)


def _reference_rows(system, q, wrenches: dict, sign: float):
    data = system.model.createData()
    pin.framesForwardKinematics(system.model, data, q)
    parts = [sensor_wrench_rows(c, data.oMf[c.frame_id].rotation, sign * wrenches[c.name])
             for c in system.active_constraints]
    return np.concatenate(parts)


def test_sensor_wrenches_rows_equal_pinocchio_rotation():
    """Two welds (force and moment rows) at random poses, then one of them switched off (its rows leave λ),
    then a constraint without a sensor switched on (no λ_meas); a point contact's z row on the Panda."""
    system = bimanual_system()
    rng = np.random.default_rng(23)
    names = [c.name for c in system.constraints]
    sensed = SensorWrenches(system, system.constraints, sign=-1.0)
    assert sensed.rows(nominal_q(system)) is None            # no measurement yet
    wrenches = {n: rng.normal(size=6) for n in names}
    for n in names:
        sensed.store(n, wrenches[n])
    for k in range(20):
        q = pin.randomConfiguration(system.model, -np.ones(system.model.nq), np.ones(system.model.nq))
        sensed.forget()
        np.testing.assert_allclose(sensed.rows(q), _reference_rows(system, q, wrenches, -1.0), rtol=0, atol=1e-12)
        if k == 10:
            system.set_active(names[0], False)
            assert sensed.rows(q).shape == (6,)
    system.set_active(names[0], True)
    only_one = SensorWrenches(system, [system.constraint(names[1])])
    only_one.store(names[1], wrenches[names[1]])
    assert only_one.rows(q) is None                           # the other active constraint has no sensor
    with pytest.raises(QVError):
        sensed.store(names[0], [0.0, float("nan"), 0, 0, 0, 0])
    np.testing.assert_array_equal(sensed.latest(names[0]), -wrenches[names[0]])   # the bad one not kept

    panda = load_model_config("panda_table_model.yaml")[0]
    contact = panda.active_constraints[0]
    point = SensorWrenches(panda, [contact])
    w = rng.normal(size=6)
    point.store(contact.name, w)
    q = pin.neutral(panda.model) + 0.3
    np.testing.assert_allclose(point.rows(q), _reference_rows(panda, q, {contact.name: w}, 1.0), rtol=0, atol=1e-12)
