"""Rigid multibody systems (layer 3): bodies, joints, force elements, contact and sensors,
assembled into a :class:`~diffmbs.system.MechanicalSystem` (:class:`MultibodyModel`).

Pipeline, one private module per stage: ``_bodies`` (rigid bodies, frames, kinematics) →
``_joints`` (constraint functions) → ``_forces`` / ``_contact`` / ``_clearance`` / ``_wear`` /
``_wear3d`` / ``_gears`` (force elements) → ``_sensors``
→ ``_modal`` (flexible FFR bodies; their FE nodes as attachments) → ``_model`` (the model and
its builder; elements of one type stacked and ``vmap``ped) →
``_assembly`` (position analysis, consistent velocities, static equilibrium) →
``_description`` (dicts and TOML files → models) → ``_tree`` (the same model in joint
coordinates: a kinematic tree, loops closed by constraints).
"""

from diffmbs.multibody._assembly import (
    AssemblyError,
    SingularConfigurationError,
    assemble,
    check_configuration,
    consistent_velocities,
    project,
    retract,
    static_equilibrium,
)
from diffmbs.multibody._bodies import GROUND, POINT_MASS_RADIUS, BodyKinematics, Frame, RigidBody
from diffmbs.multibody._clearance import RevoluteClearance, TranslationalClearance
from diffmbs.multibody._contact import PointPlane, PointsPlane, SpherePlane, SphereSphere
from diffmbs.multibody._description import model_from_dict, model_from_toml
from diffmbs.multibody._forces import (
    AbstractForceElement,
    AppliedForce,
    AppliedTorque,
    Bushing,
    LengthStops,
    NonlinearSpringDamper,
    RotationalSpringDamper,
    SpringDamper,
    Wrench,
)
from diffmbs.multibody._gear_facets import FacetedGearMesh, tooth_depth
from diffmbs.multibody._gear_teeth import RigidElasticGearMesh, tooth_stiffness
from diffmbs.multibody._gears import AbstractGearMesh, GearMesh
from diffmbs.multibody._joints import (
    AbstractJoint,
    ConstantRate,
    Cylindrical,
    Distance,
    Fixed,
    Harmonic,
    InPlane,
    Planar,
    PrescribedPrismatic,
    PrescribedRevolute,
    Prismatic,
    Revolute,
    Spherical,
    Universal,
)
from diffmbs.multibody._modal import ModalBody, node
from diffmbs.multibody._model import BodyState, ModelBuilder, ModelError, MultibodyModel
from diffmbs.multibody._sensors import (
    AbstractSensor,
    BodyAngularVelocity,
    BodyOrientation,
    ElementForce,
    JointCoordinates,
    JointReaction,
    KineticEnergy,
    MechanicalEnergy,
    ModalStress,
    PointAcceleration,
    PointPosition,
    PointVelocity,
    PotentialEnergy,
)
from diffmbs.multibody._tree import JointCoordinateModel, in_joint_coordinates
from diffmbs.multibody._wear import AbstractWearingJournal, WearingClearance
from diffmbs.multibody._wear3d import CrownedWearingClearance

__all__ = [
    "JointCoordinateModel",
    "in_joint_coordinates",
    "GROUND",
    "POINT_MASS_RADIUS",
    "AbstractForceElement",
    "AbstractGearMesh",
    "AbstractJoint",
    "AbstractSensor",
    "AbstractWearingJournal",
    "AppliedForce",
    "AppliedTorque",
    "AssemblyError",
    "BodyAngularVelocity",
    "BodyKinematics",
    "BodyOrientation",
    "BodyState",
    "Bushing",
    "ConstantRate",
    "CrownedWearingClearance",
    "Cylindrical",
    "Distance",
    "ElementForce",
    "Fixed",
    "Frame",
    "FacetedGearMesh",
    "GearMesh",
    "Harmonic",
    "InPlane",
    "JointCoordinates",
    "JointReaction",
    "KineticEnergy",
    "LengthStops",
    "MechanicalEnergy",
    "ModalStress",
    "ModalBody",
    "ModelBuilder",
    "ModelError",
    "MultibodyModel",
    "NonlinearSpringDamper",
    "Planar",
    "PointAcceleration",
    "PointPlane",
    "PointsPlane",
    "PointPosition",
    "PointVelocity",
    "PotentialEnergy",
    "PrescribedPrismatic",
    "PrescribedRevolute",
    "Prismatic",
    "Revolute",
    "RevoluteClearance",
    "RigidElasticGearMesh",
    "RigidBody",
    "RotationalSpringDamper",
    "SingularConfigurationError",
    "SpherePlane",
    "SphereSphere",
    "Spherical",
    "SpringDamper",
    "TranslationalClearance",
    "WearingClearance",
    "Universal",
    "Wrench",
    "tooth_depth",
    "tooth_stiffness",
    "assemble",
    "check_configuration",
    "consistent_velocities",
    "model_from_dict",
    "model_from_toml",
    "node",
    "project",
    "retract",
    "static_equilibrium",
]
