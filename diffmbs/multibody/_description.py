"""Plain-data model descriptions (dicts, TOML files) → :class:`MultibodyModel`.

Layout (SI units; every table's keys are the constructor arguments of the class its ``type``
names, listed in :data:`JOINT_TYPES`, :data:`FORCE_TYPES`, :data:`SENSOR_TYPES`)::

    gravity = [0, 0, -9.81]

    [[bodies]]                       # RigidBody: mass, inertia (3×3 or diagonal), com, initial
    name = "link"                    # state; or mesh = "part.stl" and density = 7850 instead of
    mass = 1.0                       # mass/inertia/com (a relative path is taken from the file's
    inertia = [0.1, 0.1, 0.01]       # directory)
    position = [0, 0, -0.5]

    [[joints]]
    name = "hinge"
    type = "revolute"
    body_i = "ground"
    frame_i = { point = [0, 0, 0], z_axis = [0, 1, 0] }   # or orientation = [w, x, y, z],
    body_j = "link"                                       # or rotation = 3×3, or just a point
    frame_j = { point = [0, 0, 0.5], z_axis = [0, 1, 0] }

    [[forces]]
    name = "spring"
    type = "spring_damper"           # stops = { lower = 0.1, upper = 0.3, stiffness = 1e7 }
    ...

    [[sensors]]
    name = "tip"
    type = "point_acceleration"
    body = "link"
    point = [0, 0, -0.5]

A prescribed joint's ``motion`` is a table ``{ type = "constant_rate", start = 0, rate = 6.28 }``
(or ``"harmonic"``); a contact's ``friction`` is ``{ type = "coulomb", mu = 0.1 }`` (or
``"stribeck"``, ``"bristle"``: :data:`FRICTION_TYPES`, the arguments of the law's class); a
``gear_mesh``'s (``faceted_gear_mesh``'s, ``rigid_elastic_gear_mesh``'s) ``pair`` is a table of
:class:`~diffmbs.gears.GearPair`'s fields, its angles in
radians or as ``pressure_angle_deg``, ``helix_angle_deg``.
User functions (nonlinear laws, applied loads) cannot be described in data; add them with the
Python API. Errors are :class:`~diffmbs.multibody.ModelError` whose message
starts with the key path (``joints[1].frame_i.z_axis: …``).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import tomllib
from collections.abc import Mapping
from typing import Any

from diffmbs.friction import AbstractFriction, BristleFriction, CoulombFriction, StribeckFriction
from diffmbs.gears import GearPair
from diffmbs.multibody._bodies import Frame, RigidBody
from diffmbs.multibody._clearance import RevoluteClearance, TranslationalClearance
from diffmbs.multibody._contact import PointPlane, SpherePlane, SphereSphere
from diffmbs.multibody._forces import Bushing, LengthStops, RotationalSpringDamper, SpringDamper
from diffmbs.multibody._gear_facets import FacetedGearMesh
from diffmbs.multibody._gear_teeth import RigidElasticGearMesh
from diffmbs.multibody._gears import GearMesh
from diffmbs.multibody._joints import (
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
from diffmbs.multibody._model import ModelBuilder, ModelError, MultibodyModel
from diffmbs.multibody._sensors import (
    BodyAngularVelocity,
    BodyOrientation,
    ElementForce,
    JointCoordinates,
    JointReaction,
    KineticEnergy,
    MechanicalEnergy,
    PointAcceleration,
    PointPosition,
    PointVelocity,
    PotentialEnergy,
)
from diffmbs.multibody._wear import WearingClearance
from diffmbs.multibody._wear3d import CrownedWearingClearance

__all__ = ["FORCE_TYPES", "JOINT_TYPES", "SENSOR_TYPES", "model_from_dict", "model_from_toml"]

JOINT_TYPES: dict[str, type] = {
    "spherical": Spherical,
    "revolute": Revolute,
    "universal": Universal,
    "cylindrical": Cylindrical,
    "prismatic": Prismatic,
    "planar": Planar,
    "in_plane": InPlane,
    "fixed": Fixed,
    "distance": Distance,
    "prescribed_revolute": PrescribedRevolute,
    "prescribed_prismatic": PrescribedPrismatic,
}
FORCE_TYPES: dict[str, type] = {
    "spring_damper": SpringDamper,
    "rotational_spring_damper": RotationalSpringDamper,
    "bushing": Bushing,
    "sphere_plane": SpherePlane,
    "point_plane": PointPlane,
    "sphere_sphere": SphereSphere,
    "revolute_clearance": RevoluteClearance,
    "wearing_clearance": WearingClearance,
    "crowned_wearing_clearance": CrownedWearingClearance,
    "translational_clearance": TranslationalClearance,
    "gear_mesh": GearMesh,
    "faceted_gear_mesh": FacetedGearMesh,
    "rigid_elastic_gear_mesh": RigidElasticGearMesh,
}
SENSOR_TYPES: dict[str, type] = {
    "point_position": PointPosition,
    "point_velocity": PointVelocity,
    "point_acceleration": PointAcceleration,
    "body_orientation": BodyOrientation,
    "body_angular_velocity": BodyAngularVelocity,
    "joint_coordinates": JointCoordinates,
    "joint_reaction": JointReaction,
    "element_force": ElementForce,
    "kinetic_energy": KineticEnergy,
    "potential_energy": PotentialEnergy,
    "mechanical_energy": MechanicalEnergy,
}
FRICTION_TYPES: dict[str, type] = {
    "coulomb": CoulombFriction,
    "stribeck": StribeckFriction,
    "bristle": BristleFriction,
}
MOTION_TYPES: dict[str, type] = {"constant_rate": ConstantRate, "harmonic": Harmonic}

_TOP_KEYS = ("gravity", "bodies", "joints", "forces", "sensors")
_RESOLVED_FIELDS = {"body_i", "frame_i", "body_j", "frame_j"}  # filled in by resolve()


def _table(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ModelError(f"{path}: expected a table, got {value!r}")
    return value


def _check_keys(table: Mapping, allowed, required, path: str) -> None:
    for key in table:
        if key not in allowed:
            raise ModelError(f"{path}.{key}: unknown key (expected one of {', '.join(allowed)})")
    for key in required:
        if key not in table:
            raise ModelError(f"{path}: missing key {key!r}")


def _construct(cls: type, kwargs: dict, path: str):
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise ModelError(f"{path}: {err}") from None


def _frame(value: Any, path: str) -> Frame:
    if not isinstance(value, Mapping):
        return _construct(Frame, {"point": value}, path)
    keys = ("point", "orientation", "rotation", "z_axis", "x_axis")
    _check_keys(value, keys, ("point",), path)
    given = [k for k in ("orientation", "rotation", "z_axis") if k in value]
    if len(given) > 1:
        raise ModelError(f"{path}: give one of orientation, rotation, z_axis, not {given}")
    if "x_axis" in value and "z_axis" not in value:
        raise ModelError(f"{path}.x_axis: only meaningful with z_axis")
    try:
        if "orientation" in value:
            return Frame.from_quaternion(value["point"], value["orientation"])
        if "z_axis" in value:
            return Frame.from_axis(value["point"], value["z_axis"], value.get("x_axis"))
        if "rotation" in value:
            return Frame(value["point"], value["rotation"])
        return Frame(value["point"])
    except (ValueError, TypeError) as err:
        raise ModelError(f"{path}: {err}") from None


def _typed(table: Mapping, registry: dict[str, type], path: str) -> tuple[type, dict]:
    kind = table.get("type")
    if kind not in registry:
        raise ModelError(f"{path}.type: expected one of {', '.join(registry)}, got {kind!r}")
    return registry[kind], {k: v for k, v in table.items() if k != "type"}


def _element(table: Any, registry: dict[str, type], path: str, with_name: bool = True):
    table = _table(table, path)
    cls, fields = _typed(table, registry, path)
    name = fields.pop("name", None) if with_name else None
    if with_name and (not isinstance(name, str) or not name):
        raise ModelError(f"{path}.name: expected a non-empty string, got {name!r}")
    init = [f for f in dataclasses.fields(cls) if f.init]
    skip = _RESOLVED_FIELDS if cls is RotationalSpringDamper else set()
    allowed = [f.name for f in init if f.name not in skip]
    required = [
        f.name
        for f in init
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    _check_keys(fields, allowed, [r for r in required if r not in skip], path)
    for key, value in list(fields.items()):
        if key.startswith("frame_"):
            fields[key] = _frame(value, f"{path}.{key}")
        elif key == "motion":
            fields[key] = _element(value, MOTION_TYPES, f"{path}.motion", with_name=False)[1]
        elif key == "friction":
            fields[key] = _friction(value, f"{path}.friction")
        elif key == "pair":
            fields[key] = _gear_pair(value, f"{path}.pair")
        elif key == "stops":
            stops = _table(value, f"{path}.stops")
            stop_fields = [f.name for f in dataclasses.fields(LengthStops)]
            _check_keys(stops, stop_fields, ("stiffness",), f"{path}.stops")
            fields[key] = _construct(
                LengthStops, {"lower": None, "upper": None, **stops}, f"{path}.stops"
            )
    return name, _construct(cls, fields, path)


def _friction(table: Any, path: str) -> AbstractFriction:
    """A friction law from ``{type = "coulomb" | "stribeck" | "bristle", <its arguments>}``."""
    cls, fields = _typed(_table(table, path), FRICTION_TYPES, path)
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    required = [p.name for p in parameters if p.default is inspect.Parameter.empty]
    _check_keys(fields, [p.name for p in parameters], required, path)
    return _construct(cls, fields, path)


def _gear_pair(table: Any, path: str) -> GearPair:
    """A :class:`~diffmbs.gears.GearPair` from its fields (SI; the angles in radians, or in
    degrees as ``pressure_angle_deg``, ``helix_angle_deg``)."""
    table = dict(_table(table, path))
    for angle in ("pressure_angle", "helix_angle"):
        if f"{angle}_deg" in table:
            if angle in table:
                raise ModelError(f"{path}: give {angle} or {angle}_deg, not both")
            table[angle] = math.radians(table.pop(f"{angle}_deg"))
    fields = GearPair._fields
    required = [f for f in fields if f not in GearPair._field_defaults]
    _check_keys(table, [*fields, "pressure_angle_deg", "helix_angle_deg"], required, path)
    return GearPair(**{k: tuple(v) if isinstance(v, list) else v for k, v in table.items()})


def _body(table: Any, path: str, base_dir: str | None) -> RigidBody:
    table = dict(_table(table, path))
    state = ("position", "orientation", "velocity", "angular_velocity")
    if "mesh" in table:
        _check_keys(table, ("name", "mesh", "density", *state), ("name", "density"), path)
        mesh = table.pop("mesh")
        if base_dir is not None and isinstance(mesh, str) and not os.path.isabs(mesh):
            mesh = os.path.join(base_dir, mesh)
        try:
            return RigidBody.from_mesh(table.pop("name"), mesh, table.pop("density"), **table)
        except (ValueError, TypeError, OSError) as err:
            raise ModelError(f"{path}: {err}") from None
    keys = ("name", "mass", "inertia", "com", *state)
    _check_keys(table, keys, ("name", "mass", "inertia"), path)
    return _construct(RigidBody, table, path)


def model_from_dict(description: Mapping[str, Any], base_dir: str | None = None) -> MultibodyModel:
    """Build a :class:`MultibodyModel` from a plain-data description (see the module docstring).

    ``base_dir``: directory for relative mesh paths. Raises :class:`ModelError` whose message
    starts with the key path of the offending entry.
    """
    description = _table(description, "model")
    _check_keys(description, _TOP_KEYS, ("bodies",), "model")
    try:
        builder = ModelBuilder(description.get("gravity", (0.0, 0.0, -9.81)))
    except (ValueError, TypeError) as err:
        raise ModelError(f"gravity: {err}") from None
    sections = {key: description.get(key, []) for key in _TOP_KEYS[1:]}
    for key, entries in sections.items():
        if not isinstance(entries, list):
            raise ModelError(f"{key}: expected an array of tables, got {entries!r}")
    for i, table in enumerate(sections["bodies"]):
        path = f"bodies[{i}]"
        try:
            builder.add_body(_body(table, path, base_dir))
        except ModelError as err:
            raise ModelError(str(err) if str(err).startswith(path) else f"{path}: {err}") from None
    adders = {
        "joints": (builder.add_joint, JOINT_TYPES),
        "forces": (builder.add_force, FORCE_TYPES),
        "sensors": (builder.add_sensor, SENSOR_TYPES),
    }
    paths = {}
    for key, (add, registry) in adders.items():
        for i, table in enumerate(sections[key]):
            path = f"{key}[{i}]"
            name, item = _element(table, registry, path)
            try:
                add(name, item)
            except ModelError as err:
                raise ModelError(f"{path}: {err}") from None
            paths[name] = path
    try:
        return builder.build()
    except ModelError as err:
        if err.item in paths:
            raise ModelError(f"{paths[err.item]}: {err}", err.item) from None
        raise


def model_from_toml(source: str | os.PathLike) -> MultibodyModel:
    """Build a model from a TOML file (a path) or TOML text (a string containing a newline)."""
    if isinstance(source, str) and "\n" in source:
        return model_from_dict(tomllib.loads(source))
    path = os.fspath(source)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as err:
        raise ModelError(f"{path}: {err.strerror or err}") from None
    except tomllib.TOMLDecodeError as err:
        raise ModelError(f"{path}: invalid TOML: {err}") from None
    return model_from_dict(data, base_dir=os.path.dirname(os.path.abspath(path)))
