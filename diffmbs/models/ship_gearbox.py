"""The ship reduction gearbox of the source study 000 (../shared/SEEDS.md): a double-helical
(herringbone) pair between a diesel engine and a propeller, started from rest.

Pinion z₁ = 27 and wheel z₂ = 151, normal module 10 mm, α_n = 20°, helix 27.12° (one helix
each hand, each 135 mm wide), profile shifts +0.236 / −0.2299, centre distance 1000 mm
(:data:`PAIR`). Pinion 563.92 kg, 26.38 kg·m² about its axis and 103.02 across; wheel 3998.37
kg, 1153.43 kg·m² about its axis (the study's x) and 1128.82 across. Each gear turns on a
revolute bearing to ground about world z (pinion at the origin, wheel at x = 1 m); the two
helices sit ±100 mm either side of each gear's middle, one :class:`~diffmbs.multibody.GearMesh`
each (ISO 6336 stiffness, ``slices`` across the face). Gravity −y.

**Torques.** The study gives the engine's torque (Wärtsilä W 8V31) and the propeller's load
(referred to the engine's shaft) at three speeds each; they are quadratics through those
points, fitted here (:func:`engine_torque`, :func:`propeller_torque`: the study's printed
polynomials carry sign errors), and cross at the nominal 720 rpm (75.398 rad/s). The points
span 475–720 rpm; below 475 rpm (49.74 rad/s) the engine's torque is held at its value there
(a governor on a starting ramp) and the propeller's falls as the square of the speed (a ship's
resistance at low speed, as the study argues), so a start from rest is possible: fitted down
to zero speed, the propeller quadratic would exceed the engine's below 31 rad/s. The engine's
torque enters over ``ramp_s`` (the study: "progressively"). The propeller's load on the wheel is
the referred one times z₂/z₁, against the wheel's turning.

Sensors: ``pinion_speed``, ``wheel_speed`` (rad/s, about world z), ``engine`` and
``propeller`` (the applied torques, N·m, world), ``mesh_left``/``mesh_right`` (each helix's
load along its line of action, transmission error, friction loss and the teeth's absorbed
power: :class:`~diffmbs.multibody.GearMesh`).
"""

from __future__ import annotations

import functools
import math

import jax.numpy as jnp
import numpy as np

import diffmbs.multibody as mb
from diffmbs.gears import GearPair, iso_6336_stiffness

__all__ = ["NOMINAL_SPEED", "PAIR", "engine_torque", "propeller_torque", "ship_gearbox"]

PAIR = GearPair(module=10e-3, teeth=(27, 151), pressure_angle=math.radians(20.0),
                helix_angle=math.radians(27.12), shifts=(0.236, -0.2299), face_width=0.135,
                centre_distance=1.0)  # fmt: skip
NOMINAL_SPEED = 720.0 * 2.0 * math.pi / 60.0  # rad/s of the engine
_SPEEDS = np.array([49.74188, 67.02064, 75.39822])  # rad/s (475, 640, 720 rpm)
_ENGINE = np.polyfit(_SPEEDS, [28949.45, 44762.33, 62600.94], 2)  # N·m, highest power first
_PROPELLER = np.polyfit(_SPEEDS, [11258.12, 33571.75, 62600.94], 2)
_LOWEST = float(_SPEEDS[0])


def engine_torque(speed):
    """The engine's torque (N·m) at the pinion's ``speed`` (rad/s, ≥ 0): the study's
    quadratic over its points, held at 475 rpm's value below."""
    speed = jnp.asarray(speed)
    above = jnp.polyval(jnp.asarray(_ENGINE), speed)
    return jnp.where(speed > _LOWEST, above, float(np.polyval(_ENGINE, _LOWEST)))


def propeller_torque(speed):
    """The propeller's load referred to the engine's shaft (N·m) at the pinion's ``speed``
    (rad/s, ≥ 0): the study's quadratic over its points, ∝ speed² below 475 rpm."""
    speed = jnp.asarray(speed)
    above = jnp.polyval(jnp.asarray(_PROPELLER), speed)
    below = float(np.polyval(_PROPELLER, _LOWEST)) * (speed / _LOWEST) ** 2
    return jnp.where(speed > _LOWEST, above, below)


class _Engine:
    """The engine's torque on the pinion (world z), entering over ``ramp`` s."""

    def __init__(self, ramp: float):
        self.ramp = ramp

    def __call__(self, t, kinematics):
        speed = kinematics.angular_velocity[2]
        share = jnp.where(t < self.ramp, t / self.ramp, 1.0)
        return jnp.array([0.0, 0.0, share * engine_torque(jnp.abs(speed))])

    def __eq__(self, other):  # equal engines compile once
        return isinstance(other, _Engine) and other.ramp == self.ramp

    def __hash__(self):
        return hash(("engine", self.ramp))


def _propeller(t, kinematics):
    """The propeller's load on the wheel (world z), against its turning (it turns negative)."""
    speed = -kinematics.angular_velocity[2] * PAIR.teeth[1] / PAIR.teeth[0]  # the engine's
    return jnp.array([0.0, 0.0, propeller_torque(jnp.abs(speed)) * PAIR.teeth[1] / PAIR.teeth[0]])


def ship_gearbox(
    *,
    mu: float = 0.05,
    damping: float = 5e4,
    stiffness: float | None = None,
    slices: int = 8,
    ramp_s: float = 1.0,
    initial_speed: float = 0.0,
    mesh_points: int | None = None,
) -> mb.MultibodyModel:
    """The gearbox of the module docstring. ``mu``: the teeth's friction; ``damping`` (N·s/m
    per tooth pair); ``stiffness``: a tooth pair's largest (N/m per helix; default ISO 6336's
    ``c' b``); ``slices`` across each helix; ``ramp_s``: the engine's torque entering (s);
    ``initial_speed``: the pinion's at the start (rad/s; the wheel's follows the ratio);
    ``mesh_points``: faceted teeth with that many vertices a flank
    (:class:`~diffmbs.multibody.FacetedGearMesh`) instead of the analytic element."""
    k = float(iso_6336_stiffness(PAIR).single) * PAIR.face_width if stiffness is None else stiffness
    ratio = PAIR.teeth[0] / PAIR.teeth[1]
    b = mb.ModelBuilder(gravity=(0.0, -9.81, 0.0))
    turn = math.pi + math.pi / PAIR.teeth[1]  # the centred mesh: a space faces the pinion
    b.add_body(mb.RigidBody("pinion", 563.92, (103.02, 103.02, 26.38),
                            angular_velocity=(0.0, 0.0, initial_speed)))  # fmt: skip
    b.add_body(mb.RigidBody("wheel", 3998.37, (1128.82, 1128.82, 1153.43),
                            position=(PAIR.centre_distance, 0.0, 0.0),
                            orientation=(math.cos(turn / 2), 0.0, 0.0, math.sin(turn / 2)),
                            angular_velocity=(0.0, 0.0, -ratio * initial_speed)))  # fmt: skip
    z = (0.0, 0.0, 1.0)
    b.add_joint("pinion_bearing", mb.Revolute("ground", mb.Frame.from_axis((0, 0, 0), z),
                                              "pinion", mb.Frame.from_axis((0, 0, 0), z)))
    b.add_joint("wheel_bearing", mb.Revolute(
        "ground", mb.Frame.from_axis((PAIR.centre_distance, 0, 0), z), "wheel",
        mb.Frame.from_axis((0, 0, 0), z)))  # fmt: skip
    element = (mb.GearMesh if mesh_points is None
               else functools.partial(mb.FacetedGearMesh, points=mesh_points))  # fmt: skip
    for name, side, hand in (("mesh_left", -0.1, 1.0), ("mesh_right", 0.1, -1.0)):
        helix = PAIR._replace(helix_angle=hand * PAIR.helix_angle)
        b.add_force(name, element("pinion", mb.Frame((0.0, 0.0, side)), "wheel",
                                  mb.Frame((0.0, 0.0, side)), helix, k, damping=damping, mu=mu,
                                  slices=slices))  # fmt: skip
    b.add_force("engine", mb.AppliedTorque("pinion", _Engine(ramp_s)))
    b.add_force("propeller", mb.AppliedTorque("wheel", _propeller))
    b.add_sensor("pinion_speed", mb.BodyAngularVelocity("pinion"))
    b.add_sensor("wheel_speed", mb.BodyAngularVelocity("wheel"))
    for name in ("engine", "propeller", "mesh_left", "mesh_right"):
        b.add_sensor(f"{name}_output", mb.ElementForce(name))
    return b.build()
