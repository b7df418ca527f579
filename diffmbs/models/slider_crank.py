"""The 3-D slider-crank of ../shared/SEEDS.md 001 (Cavalieri, Pucheta, Cardona), with or
without clearance in the revolute joint between crank and frame.

Geometry (world axes, m; gravity −Z): the crank (0.1 m, 0.12 kg, I = (1e-4, 1e-4, 1e-5) kg·m²,
its axis along body z) turns about the world Y axis through the origin and stands vertical at
t = 0 with ω = 2π rad/s about −Y; the connecting rod (0.29 m, 0.5 kg, I = (4e-3, 4e-4, 4e-3),
its axis along body y) joins the crank pin (0, 0, 0.1) to the slider (0.5 kg, I = 1e-4 each) at
(0, 0.14, −0.154), which runs on a prismatic joint along Y. Universal joints at both ends of
the rod (cross arms: Y on the crank and on the slider, the rod's normal to Y on the rod — the
only choice that lets the mechanism move; the two then repeat one equation, which the default
KKT solver handles as a redundant constraint).

With ``clearance`` (m, default 0.5 mm) the crank's revolute joint is a
:class:`~diffmbs.multibody.RevoluteClearance`: a journal 20 mm long (ends ± 10 mm along Y, the
source's table 2) of radius ``journal_radius`` (not given by the source: 10 mm here) in a bearing
on the ground, plus an :class:`~diffmbs.multibody.InPlane` joint that holds it axially (the
source neglects axial play). The source solves exact unilateral contact with restitution
e = 0.9; here the journal's spherical ends meet the bearing with Hertz's law for a sphere in a
conforming spherical seat, ``K = 4/3 E* sqrt(R_j R_b / (R_b − R_j))`` (steel, E = 207 GPa,
ν = 0.3), and the Hunt–Crossley damping that gives e at ``impact_speed`` (m/s).

The model's sensors: ``slider_position``, ``slider_velocity`` and ``slider_acceleration`` (world,
m, m/s, m/s²), ``journal`` (the journal centre's world position, m: its X–Z orbit in the
bearing), ``energy`` (kinetic plus potential, J) and with clearance ``contact_force`` (N, one
per journal end).
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

import diffmbs.multibody as mb
from diffmbs.contact import damping_from_restitution
from diffmbs.friction import AbstractFriction, CoulombFriction
from diffmbs.rotations import matrix_to_quat
from diffmbs.system import AugmentedLagrangianKKT

__all__ = [
    "CLEARANCE",
    "JOURNAL_HALF_LENGTH",
    "SliderCrank",
    "hertz_conforming_stiffness",
    "slider_crank",
]

CRANK = 0.1  # m
SLIDER_START = np.array([0.0, 0.14, -0.154])  # m
ROD = float(np.linalg.norm(SLIDER_START - [0.0, 0.0, CRANK]))  # 0.29003 m: "0.29 m" in 001
CLEARANCE = 5e-4  # m, radial
JOURNAL_HALF_LENGTH = 0.01  # m: the journal is 20 mm long
STEEL_MODULUS, STEEL_POISSON = 207e9, 0.3  # Pa, 1
_CROSS = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, -1.0]])  # columns: x=Y, y=X


class SliderCrank(mb.MultibodyModel):
    """The slider-crank as built by :func:`slider_crank`: a
    :class:`~diffmbs.multibody.MultibodyModel` whose simulations solve the equations of motion
    with :class:`~diffmbs.system.AugmentedLagrangianKKT` — its one repeated equation (the two
    universal joints) is the augmented Lagrangian's minimum-norm case, and it is ~2.5× cheaper
    per step here than the default null-space solve (benchmarks/README.md)."""

    def default_kkt_solver(self):
        return AugmentedLagrangianKKT()


def hertz_conforming_stiffness(
    journal_radius: float,
    clearance: float,
    modulus: float = STEEL_MODULUS,
    poisson: float = STEEL_POISSON,
) -> float:
    """Hertz's ``K`` (N/m^1.5) of a sphere of radius R_j in a spherical seat of radius
    R_b = R_j + c, both of one material: ``4/3 E* sqrt(R_j R_b / c)``, E* = E / (2 (1 − ν²))."""
    effective_modulus = modulus / (2.0 * (1.0 - poisson**2))
    bearing_radius = journal_radius + clearance
    return 4.0 / 3.0 * effective_modulus * math.sqrt(journal_radius * bearing_radius / clearance)


def slider_crank(
    clearance: float | None = CLEARANCE,
    *,
    crank_speed: float = 2.0 * math.pi,
    journal_radius: float = 0.01,
    restitution: float = 0.9,
    impact_speed: float = 0.1,
    stiffness: float | None = None,
    friction: AbstractFriction | float | None = None,
    smoothing: float = 1e-7,
) -> SliderCrank:
    """The slider-crank of the module docstring, its initial state consistent (``crank_speed``
    rad/s about −Y at t = 0). ``clearance=None`` gives the ideal revolute joint. Contact:
    ``stiffness`` (N/m^1.5; default :func:`hertz_conforming_stiffness`), damping from
    ``restitution`` at ``impact_speed`` (m/s), ``smoothing`` (m) the force's onset, ``friction``
    (a law of :mod:`diffmbs.friction`, or a number: Coulomb's μ, as a job file gives it) at the
    journal's ends; a :class:`~diffmbs.friction.BristleFriction`'s bristles are the model's
    internal states."""
    if friction is not None and not isinstance(friction, AbstractFriction):
        friction = CoulombFriction(friction)
    pin = np.array([0.0, 0.0, CRANK])
    rod_axis = (SLIDER_START - pin) / ROD  # body y of the rod
    rod_rotation = np.stack([[1.0, 0.0, 0.0], rod_axis, np.cross([1.0, 0.0, 0.0], rod_axis)], 1)
    # at t = 0 the pin moves along −X and the slider is at rest: the rod turns about Y
    crank_omega = np.array([0.0, -crank_speed, 0.0])
    rod_omega = np.array([0.0, -crank_speed * CRANK / (CRANK - SLIDER_START[2]), 0.0])

    b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mb.RigidBody("crank", mass=0.12, inertia=(1e-4, 1e-4, 1e-5), position=pin / 2,
                            velocity=np.cross(crank_omega, pin / 2),
                            angular_velocity=crank_omega))  # fmt: skip
    rod_center = (pin + SLIDER_START) / 2
    b.add_body(mb.RigidBody("rod", mass=0.5, inertia=(4e-3, 4e-4, 4e-3), position=rod_center,
                            orientation=matrix_to_quat(jnp.asarray(rod_rotation)),
                            velocity=np.cross(rod_omega, rod_center - SLIDER_START),
                            angular_velocity=rod_rotation.T @ rod_omega))  # fmt: skip
    b.add_body(mb.RigidBody("slider", mass=0.5, inertia=(1e-4, 1e-4, 1e-4),
                            position=SLIDER_START))  # fmt: skip
    journal = (0.0, 0.0, -CRANK / 2)  # the crank's pivot, body frame
    if clearance is None:
        b.add_joint("crank_bearing", mb.Revolute(
            "ground", mb.Frame.from_axis((0, 0, 0), (0, 1, 0)),
            "crank", mb.Frame.from_axis(journal, (0, 1, 0))))  # fmt: skip
    else:
        stiffness = (
            hertz_conforming_stiffness(journal_radius, clearance)
            if stiffness is None
            else stiffness
        )
        damping = float(damping_from_restitution(restitution, impact_speed))
        b.add_force("crank_bearing", mb.RevoluteClearance(
            "ground", (0, 0, 0), (0, 1, 0), "crank", journal, (0, 1, 0), clearance,
            journal_radius=journal_radius, half_length=JOURNAL_HALF_LENGTH, friction=friction,
            stiffness=stiffness, damping=damping, smoothing=smoothing))  # fmt: skip
        b.add_joint("crank_axial", mb.InPlane("ground", mb.Frame.from_axis((0, 0, 0), (0, 1, 0)),
                                              "crank", mb.Frame(journal)))  # fmt: skip
        b.add_sensor("contact_force", mb.ElementForce("crank_bearing"))
    b.add_joint("crank_pin", mb.Universal("crank", mb.Frame((0, 0, CRANK / 2), _CROSS),
                                          "rod", mb.Frame((0, -ROD / 2, 0), _CROSS)))  # fmt: skip
    b.add_joint("slider_pin", mb.Universal("rod", mb.Frame((0, ROD / 2, 0)),
                                           "slider", mb.Frame((0, 0, 0))))  # fmt: skip
    b.add_joint("guide", mb.Prismatic(
        "ground", mb.Frame.from_axis(SLIDER_START, (0, 1, 0), x_axis=(1, 0, 0)),
        "slider", mb.Frame.from_axis((0, 0, 0), (0, 1, 0), x_axis=(1, 0, 0))))  # fmt: skip
    b.add_sensor("slider_position", mb.PointPosition("slider"))
    b.add_sensor("slider_velocity", mb.PointVelocity("slider"))
    b.add_sensor("slider_acceleration", mb.PointAcceleration("slider"))
    b.add_sensor("journal", mb.PointPosition("crank", journal))
    b.add_sensor("energy", mb.MechanicalEnergy())
    model = b.build()
    return SliderCrank(**{f.name: getattr(model, f.name) for f in dataclasses.fields(model)})
