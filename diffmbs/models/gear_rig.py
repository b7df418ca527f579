"""A gear test rig: a spur pair under a reversing load, its dynamic transmission error read by a
tangential accelerometer on the wheel's rim (the way gear-rattle and dynamic-TE rigs measure
it). The model of the gear identification example (``data/gear_rig/``, issue 28).

The pair (:data:`PAIR`): module 3 mm, z 20 / 40, α 20°, no shifts, face width 20 mm, centre
distance 90 mm (steel, solid discs: pinion 0.44 kg, wheel 1.78 kg). A motor turns the pinion
at ``speed`` (rad/s) about world z through a stiff speed control (prescribed); the wheel turns
on a revolute bearing at x = 90 mm against a brake's torque
``T(t) = mean_torque + ripple_torque sin(2π ripple_hz t)`` (N·m, resisting the wheel's
turning), which reverses the load when the ripple exceeds the mean: the teeth then cross their
backlash and rattle. The mesh is :class:`~diffmbs.multibody.GearMesh` ``"mesh"`` (or the
faceted teeth of :class:`~diffmbs.multibody.FacetedGearMesh`; parameters
``mesh.stiffness``, ``mesh.damping``, ``mesh.allowance``, ``mesh.mu``).

Sensors: ``wheel_rim_velocity`` (m/s, wheel axes: component 1 is the rim speed of a point at
``accelerometer_radius``, whose time derivative a tangential accelerometer reads),
``wheel_speed`` (rad/s, world) and ``mesh_output`` (the load along the line of action N,
transmission error m, friction loss W, the teeth's absorbed power W:
:class:`~diffmbs.multibody.GearMesh`).
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np

import diffmbs.multibody as mb
from diffmbs import gears
from diffmbs.gears import GearPair, iso_6336_stiffness

__all__ = ["PAIR", "elastic_teeth_of", "gear_rig"]

PAIR = GearPair(module=3e-3, teeth=(20, 40), pressure_angle=math.radians(20.0), helix_angle=0.0,
                shifts=(0.0, 0.0), face_width=0.02, centre_distance=0.09)  # fmt: skip


class _Brake:
    """The brake's torque on the wheel (world z): it turns negative, the torque resists."""

    def __init__(self, mean: float, ripple: float, hz: float):
        self.terms = (mean, ripple, hz)

    def __call__(self, t, kinematics):
        mean, ripple, hz = self.terms
        return jnp.array([0.0, 0.0, mean + ripple * jnp.sin(2.0 * math.pi * hz * t)])

    def __eq__(self, other):  # equal brakes compile once
        return isinstance(other, _Brake) and other.terms == self.terms

    def __hash__(self):
        return hash(("brake", self.terms))


def elastic_teeth_of(pair: GearPair, damping_ratio: float = 0.02) -> dict:
    """Rigid-elastic teeth for :class:`~diffmbs.multibody.RigidElasticGearMesh`, per gear:
    ``tooth_stiffness`` from the tooth's beam FE (:func:`~diffmbs.multibody.tooth_stiffness`),
    ``tooth_mass`` the steel tooth's inertia about its gear's axis over r_b² (its outline, face
    width and 7850 kg/m³) and ``tooth_damping`` at ``damping_ratio`` of critical."""
    geometry = gears.pair_geometry(pair)
    stiffness, mass = [], []
    for gear in (0, 1):
        flanks = np.asarray(gears.tooth_profile(pair, gear, 64))
        x, y = np.concatenate([flanks[1], flanks[0][::-1]]).T
        x1, y1 = np.roll(x, -1), np.roll(y, -1)
        cross = x * y1 - x1 * y
        polar = np.sum(cross * (x**2 + x * x1 + x1**2 + y**2 + y * y1 + y1**2)) / 12.0
        mass.append(7850.0 * pair.face_width * polar / float(geometry.base_radii[gear]) ** 2)
        stiffness.append(mb.tooth_stiffness(pair, gear))
    stiffness, mass = np.array(stiffness), np.array(mass)
    return {"tooth_stiffness": stiffness, "tooth_mass": mass,
            "tooth_damping": 2.0 * damping_ratio * np.sqrt(stiffness * mass)}  # fmt: skip


def gear_rig(
    *,
    speed: float = 50.0,
    mean_torque: float = 20.0,
    ripple_torque: float = 30.0,
    ripple_hz: float = 40.0,
    stiffness: float | None = None,
    damping: float = 1000.0,
    allowance: float = 3e-5,
    mu: float = 0.05,
    accelerometer_radius: float = 0.05,
    mesh_points: int | None = None,
    elastic_teeth: bool = False,
) -> mb.MultibodyModel:
    """The rig of the module docstring. ``speed``: the pinion's (rad/s); the brake's
    ``mean_torque`` and ``ripple_torque`` (N·m) at ``ripple_hz`` (Hz); the mesh's
    ``stiffness`` (N/m, one tooth pair's largest; default ISO 6336's ``c' b``), ``damping``
    (N·s/m per pair), ``allowance`` (m, the teeth's thickness allowance in all: the backlash)
    and ``mu``; ``accelerometer_radius`` (m) of the rim point; ``mesh_points``: the teeth as
    faceted solids with that many vertices a flank
    (:class:`~diffmbs.multibody.FacetedGearMesh`) instead of the analytic element;
    ``elastic_teeth``: rigid-elastic teeth (:class:`~diffmbs.multibody.RigidElasticGearMesh`,
    :func:`elastic_teeth`) whose pair stiffness in series is ``stiffness``."""
    k = float(iso_6336_stiffness(PAIR).single) * PAIR.face_width if stiffness is None else stiffness
    ratio = PAIR.teeth[0] / PAIR.teeth[1]
    b = mb.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body(mb.RigidBody("pinion", 0.44, (1e-4, 1e-4, 2e-4)))
    turn = math.pi + math.pi / PAIR.teeth[1]  # the centred mesh: a space faces the pinion
    b.add_body(mb.RigidBody("wheel", 1.78, (1.6e-3, 1.6e-3, 3.2e-3),
                            position=(PAIR.centre_distance, 0.0, 0.0),
                            orientation=(math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)),
                            angular_velocity=(0.0, 0.0, -ratio * speed)))  # fmt: skip
    z = (0.0, 0.0, 1.0)
    b.add_joint("motor", mb.PrescribedRevolute(
        "ground", mb.Frame.from_axis((0, 0, 0), z), "pinion", mb.Frame.from_axis((0, 0, 0), z),
        mb.ConstantRate(0.0, speed)))  # fmt: skip
    b.add_joint("bearing", mb.Revolute(
        "ground", mb.Frame.from_axis((PAIR.centre_distance, 0, 0), z), "wheel",
        mb.Frame.from_axis((0, 0, 0), z)))  # fmt: skip
    if elastic_teeth:
        teeth = elastic_teeth_of(PAIR)  # the teeth's FE, once
        element = functools.partial(mb.RigidElasticGearMesh, **teeth)
        k = 1.0 / (1.0 / k - sum(1.0 / teeth["tooth_stiffness"]))
    elif mesh_points is not None:
        element = functools.partial(mb.FacetedGearMesh, points=mesh_points)
    else:
        element = mb.GearMesh
    b.add_force("mesh", element("pinion", mb.Frame((0, 0, 0)), "wheel", mb.Frame((0, 0, 0)), PAIR,
                                k, damping=damping, mu=mu, allowance=allowance))  # fmt: skip
    b.add_force("brake", mb.AppliedTorque("wheel", _Brake(mean_torque, ripple_torque, ripple_hz)))
    b.add_sensor("wheel_rim_velocity", mb.PointVelocity("wheel", (accelerometer_radius, 0, 0),
                                                        axes="body"))  # fmt: skip
    b.add_sensor("wheel_speed", mb.BodyAngularVelocity("wheel", axes="world"))
    b.add_sensor("mesh_output", mb.ElementForce("mesh"))
    return b.build()
