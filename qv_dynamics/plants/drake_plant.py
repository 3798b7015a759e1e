"""A Drake plant with physical sliding friction, behind the same interface as the MuJoCo plant.

Why a second simulator: MuJoCo's convex soft contact (and Drake's SAP) create a spurious separating normal
velocity of about μ‖v_t‖ while a stiff contact slides, which the contact damping turns into a bouncing
normal force even open loop. Drake's discrete ``lagged`` contact approximation with **point contact and
Hunt–Crossley dissipation** slides quietly, so friction conditions are judged here.

The MultibodyPlant is built body by body from the same (reduced) Pinocchio model as the controller and
the MuJoCo plant: joint placements, axes, masses, centres of mass and inertias (locked fingers merged
into link 7 as ``pin.buildReducedModel`` does), URDF effort limits (the command is clipped to them).
Scene: a sphere of ``tip_radius`` at ``tool_frame`` on a tool body welded to the robot at
``sensor_frame`` (default: the tool frame itself, a massless tool: the sensor reads the contact wrench);
with ``tool_mass`` > 0 the tool is a rigid body of that mass, its centre of mass halfway between the
sensor and the tool point (``tool_com``, fraction of the way), and the F/T sensor (the weld's reaction
wrench) reads contact + tool weight + tool inertia, as a flange sensor does. The table is an anchored box
whose top is at ``table_height`` (fixed for a run). Contact: point stiffness ``stiffness`` (N/m),
Hunt–Crossley ``dissipation`` (s/m), Coulomb μ = ``friction`` (static = dynamic). The default
d = 200 s/m makes a touch-down at mm/s mostly inelastic, as on a real table (Hunt–Crossley's restitution
is e ≈ 1 − (2/3)d·ṙ⁻, so e ≈ 0.2 at 6 mm/s); with d = 20 s/m (e ≈ 0.92, a steel-on-steel bounce) a
planned touch-down bounces under model error or noise for every controller.

Sign conventions of :class:`qv_dynamics.plants.table_plant.TablePlant`: :meth:`contact_force_world` is
the force the table exerts on the tool (world axes, +z when pressing), :meth:`tool_wrench_world` the F/T
reading turned into the same convention (force on the tool from below the sensor).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pinocchio as pin

from ..errors import ModelError, as_vector
from .table_plant import TablePlant

try:  # drake (requirements.txt) is needed by this plant only; its tests skip without it
    from pydrake.geometry import AddContactMaterial, Box, ProximityProperties, Sphere
    from pydrake.math import RigidTransform, RotationMatrix
    from pydrake.multibody.plant import (
        AddMultibodyPlantSceneGraph,
        ContactModel,
        CoulombFriction,
        DiscreteContactApproximation,
    )
    from pydrake.multibody.tree import FixedOffsetFrame, RevoluteJoint, RotationalInertia, SpatialInertia, WeldJoint
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.framework import DiagramBuilder
except ImportError as exc:  # pragma: no cover - reported when the plant is built
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None


@dataclass
class DrakeSceneConfig:
    """Scene parameters (SI units)."""

    tool_frame: str = "panda_hand_tcp"
    sensor_frame: str | None = None   # None: the sensor sits at the tool point (massless tool)
    tool_mass: float = 0.0
    tool_com: float = 0.5             # tool centre of mass: this fraction of the way sensor -> tool point
    tip_radius: float = 0.01
    table_height: float = 0.2
    table_center: tuple = (0.5, 0.0)
    table_half_size: tuple = (0.4, 0.5)
    table_thickness: float = 0.05
    timestep: float = 0.0005
    friction: float = 0.0
    stiffness: float = 1.0e6          # N/m, point contact (penetration 10 µm at 10 N)
    dissipation: float = 200.0        # s/m, Hunt–Crossley


def _X(M: pin.SE3) -> "RigidTransform":
    return RigidTransform(RotationMatrix(np.asarray(M.rotation)), np.asarray(M.translation))


def _inertia(I: pin.Inertia) -> "SpatialInertia":
    c = np.asarray(I.inertia)
    rot = RotationalInertia(c[0, 0], c[1, 1], c[2, 2], c[0, 1], c[0, 2], c[1, 2])
    return SpatialInertia.MakeFromCentralInertia(float(I.mass), np.asarray(I.lever), rot)


class DrakePlant(TablePlant):
    """Drake MultibodyPlant mirroring a Pinocchio fixed-base robot of revolute joints, with a table."""

    def __init__(self, system_or_model, scene: DrakeSceneConfig | None = None):
        if _IMPORT_ERROR is not None:
            raise ModelError(f"pydrake is not installed ({_IMPORT_ERROR}); "
                             "`pip install -r requirements.txt`")
        pm = getattr(system_or_model, "model", system_or_model)
        if not isinstance(pm, pin.Model) or pm.nq != pm.nv:
            raise ModelError("DrakePlant needs a fixed-base ConstrainedSystem or pinocchio.Model")
        self.scene = scene or DrakeSceneConfig()
        self.pin_model = pm
        self.joint_names = [pm.names[j] for j in range(1, pm.njoints)]
        self.n = pm.nv
        lim = np.asarray(pm.effortLimit, float)
        self.effort_limits = np.where(lim > 0, lim, 1e6)
        self._build()
        self.last_tau = np.zeros(self.n)

    # ------------------------------------------------------------------ model
    def _build(self) -> None:
        pm, sc = self.pin_model, self.scene
        builder = DiagramBuilder()
        plant, sg = AddMultibodyPlantSceneGraph(builder, time_step=sc.timestep)
        bodies = {0: plant.world_body()}
        self._joints = []
        for j in range(1, pm.njoints):
            kind = pm.joints[j].shortname()
            if kind not in ("JointModelRX", "JointModelRY", "JointModelRZ"):
                raise ModelError(f"joint '{pm.names[j]}' ({kind}): the Drake plant mirrors revolute x/y/z joints")
            body = plant.AddRigidBody(pm.names[j] + "_body", _inertia(pm.inertias[j]))
            parent = bodies[pm.parents[j]]
            F = plant.AddFrame(FixedOffsetFrame(pm.names[j] + "_jp", parent.body_frame(), _X(pm.jointPlacements[j])))
            axis = np.eye(3)["XYZ".index(kind[-1])]
            self._joints.append(plant.AddJoint(RevoluteJoint(pm.names[j], F, body.body_frame(), axis, 0.0)))
            plant.AddJointActuator(pm.names[j] + "_act", self._joints[-1])
            bodies[j] = body
        tool = pm.frames[pm.getFrameId(sc.tool_frame)]
        sensor = tool if sc.sensor_frame is None else pm.frames[pm.getFrameId(sc.sensor_frame)]
        if sensor.parentJoint != tool.parentJoint:
            raise ModelError("sensor_frame and tool_frame must be on the same link")
        X_ts = sensor.placement.inverse() * tool.placement           # tool point in the sensor frame
        com = sc.tool_com * np.asarray(X_ts.translation)
        m = float(sc.tool_mass)
        r = 0.02                                                      # tool inertia: a 2 cm solid sphere
        tool_I = SpatialInertia.Zero() if m <= 0 else \
            SpatialInertia.MakeFromCentralInertia(m, com, RotationalInertia(*(3 * [0.4 * m * r * r])))
        self._tool = plant.AddRigidBody("tool", tool_I)
        self._weld = plant.AddJoint(WeldJoint("ft_sensor", plant.AddFrame(FixedOffsetFrame(
            "flange", bodies[sensor.parentJoint].body_frame(), _X(sensor.placement))),
            self._tool.body_frame(), RigidTransform()))
        props = ProximityProperties()
        AddContactMaterial(sc.dissipation, sc.stiffness, CoulombFriction(sc.friction, sc.friction), props)
        plant.RegisterCollisionGeometry(self._tool, _X(X_ts), Sphere(sc.tip_radius), "tip", props)
        cx, cy = sc.table_center
        hx, hy = sc.table_half_size
        X_table = RigidTransform([cx, cy, sc.table_height - sc.table_thickness / 2])
        plant.RegisterCollisionGeometry(plant.world_body(), X_table, Box(2 * hx, 2 * hy, sc.table_thickness),
                                        "table", props)
        plant.set_contact_model(ContactModel.kPoint)
        plant.set_discrete_contact_approximation(DiscreteContactApproximation.kLagged)
        plant.Finalize()
        self.plant, self.diagram = plant, builder.Build()
        self.simulator = Simulator(self.diagram)
        self.context = self.simulator.get_mutable_context()
        self.pc = plant.GetMyMutableContextFromRoot(self.context)
        self._tip_offset = np.asarray(X_ts.translation)
        starts = [jt.position_start() for jt in self._joints]
        if starts != list(range(self.n)):
            raise ModelError(f"Drake joint order {starts} differs from Pinocchio's")
        self._actuate(np.zeros(self.n))

    def _actuate(self, tau: np.ndarray) -> None:
        self.plant.get_actuation_input_port().FixValue(self.pc, tau)

    # ------------------------------------------------------------------ state
    def reset(self, q, qdot=None) -> None:
        q = as_vector("q", q, self.n)
        qdot = np.zeros(self.n) if qdot is None else as_vector("qdot", qdot, self.n)
        self.context.SetTime(0.0)
        self.plant.SetPositions(self.pc, q)
        self.plant.SetVelocities(self.pc, qdot)
        self.simulator.Initialize()

    @property
    def time(self) -> float:
        return float(self.context.get_time())

    @property
    def q(self) -> np.ndarray:
        return self.plant.GetPositions(self.pc).copy()

    @property
    def qdot(self) -> np.ndarray:
        return self.plant.GetVelocities(self.pc).copy()

    def _tool_pose(self) -> "RigidTransform":
        return self.plant.EvalBodyPoseInWorld(self.pc, self._tool)

    @property
    def tool_position(self) -> np.ndarray:
        return np.asarray(self._tool_pose().multiply(self._tip_offset)).copy()

    def tool_rotation(self) -> np.ndarray:
        return np.asarray(self._tool_pose().rotation().matrix()).copy()

    @property
    def table_height(self) -> float:
        return float(self.scene.table_height)

    def set_table_height(self, z: float) -> None:
        raise ModelError("the Drake table is anchored: its height is fixed for a run (build a new plant)")

    # ------------------------------------------------------------------ forces
    def contact_force_world(self) -> np.ndarray:
        """Total force the table exerts on the tool tip (world axes), from Drake's contact results."""
        res = self.plant.get_contact_results_output_port().Eval(self.pc)
        f = np.zeros(3)
        for i in range(res.num_point_pair_contacts()):
            info = res.point_pair_contact_info(i)
            fb = np.asarray(info.contact_force())  # force on body B, world axes
            f += fb if info.bodyB_index() == self._tool.index() else -fb
        return f

    def tool_wrench_world(self) -> np.ndarray:
        """F/T sensor (the weld's reaction wrench on the tool at the sensor frame), turned into the force
        and torque acting on the tool from below the sensor, world axes: −R·F_CJc (massless tool: the
        contact wrench, torque about the sensor point)."""
        F = self.plant.get_reaction_forces_output_port().Eval(self.pc)[int(self._weld.index())]
        R = self.tool_rotation()
        return np.concatenate([-R @ np.asarray(F.translational()), -R @ np.asarray(F.rotational())])

    # ------------------------------------------------------------------ stepping
    def step(self, tau, dt: float | None = None) -> None:
        """Apply joint torques (clipped to the URDF effort limits) for ``dt`` (default one time step)."""
        tau = as_vector("tau", tau, self.n)
        self.last_tau = np.clip(tau, -self.effort_limits, self.effort_limits)
        self._actuate(self.last_tau)
        self.simulator.AdvanceTo(self.time + (self.scene.timestep if dt is None else float(dt)))

    # ------------------------------------------------------------------ model terms (for the tests)
    def mass_matrix(self, q) -> np.ndarray:
        ctx = self.plant.CreateDefaultContext()
        self.plant.SetPositions(ctx, as_vector("q", q, self.n))
        return self.plant.CalcMassMatrix(ctx)

    def gravity_torque(self, q) -> np.ndarray:
        """g(q) in the convention M q̈ + h = τ (Drake's CalcGravityGeneralizedForces is −g)."""
        ctx = self.plant.CreateDefaultContext()
        self.plant.SetPositions(ctx, as_vector("q", q, self.n))
        return -self.plant.CalcGravityGeneralizedForces(ctx)


__all__ = ["DrakePlant", "DrakeSceneConfig"]
