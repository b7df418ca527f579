"""The four-bar of the wear study (../shared/SEEDS.md 003: Tasora, Prati, Silvestri): a crank
driven at constant speed, and between coupler and rocker a revolute joint with clearance whose
bore (on the rocker) and journal (on the coupler) wear
(:class:`~diffmbs.multibody.WearingClearance`).

The source gives no dimensions; these are chosen and stated here (SI; the x–y plane, gravity
−y, every axis along z): ground pivots A = (0, 0) and D = (0.38, 0); crank 0.10 m (0.3 kg),
coupler 0.33 m (0.8 kg), rocker 0.30 m (0.7 kg) — a Grashof crank-rocker — as uniform bars; the
crank turns at ``speed_rpm`` from 0 rad at t = 0, the coupler and the rocker start on the ideal
linkage's motion (closed-form positions and velocities, the upper branch). The joint: journal
radius 10 mm, the contact 20 mm long (the source's L), steel on bronze (E* from 210 GPa / 0.3
and 110 GPa / 0.34), Hunt–Crossley with ``stiffness`` and the damping of restitution 0.7 at
0.1 m/s, Coulomb friction ``mu``, Archard coefficients ``wear_coefficient`` (bore, journal;
1/Pa) on maps of ``cells`` cells.

Sensors: ``contact_force`` (N), ``journal`` (the journal centre, world, m), ``bore`` (the
bore's centre, world, m: their difference is the eccentricity) and ``rocker_angle`` (rad).
"""

from __future__ import annotations

import math

import numpy as np

import diffmbs.multibody as mb
from diffmbs.contact import damping_from_restitution
from diffmbs.friction import CoulombFriction
from diffmbs.hertz import contact_modulus

__all__ = ["LENGTHS", "four_bar_with_wear", "pin_positions"]

LENGTHS = {"ground": 0.38, "crank": 0.10, "coupler": 0.33, "rocker": 0.30}  # m
MASSES = {"crank": 0.3, "coupler": 0.8, "rocker": 0.7}  # kg
G = 9.81  # m/s²
JOURNAL_RADIUS, CONTACT_LENGTH = 0.01, 0.02  # m
MODULUS = float(contact_modulus(210e9, 0.3, 110e9, 0.34))  # Pa: steel journal, bronze bore


def pin_positions(crank_angle: float) -> tuple[np.ndarray, np.ndarray]:
    """The ideal linkage's pins ``(B, C)`` (m, 2-D) at ``crank_angle`` (rad): B on the crank's
    circle, C where the coupler's circle about B meets the rocker's about D, upper branch."""
    a, b, c, d = (LENGTHS[k] for k in ("crank", "coupler", "rocker", "ground"))
    pin_b = a * np.array([math.cos(crank_angle), math.sin(crank_angle)])
    gap = np.array([d, 0.0]) - pin_b
    ell = float(np.linalg.norm(gap))
    along = (b**2 - c**2 + ell**2) / (2 * ell)
    unit = gap / ell
    normal = np.array([-unit[1], unit[0]])
    return pin_b, pin_b + along * unit + math.sqrt(b**2 - along**2) * normal


def _bar(name: str, start: np.ndarray, end: np.ndarray, omega: float, v_start: np.ndarray):
    """A uniform bar from ``start`` to ``end`` (2-D, m) along its body x, turning at ``omega``
    (rad/s) with its ``start`` moving at ``v_start``."""
    mass, length = MASSES[name], float(np.linalg.norm(end - start))
    angle = math.atan2(*(end - start)[::-1])
    centre = 0.5 * (start + end)
    arm = centre - start
    velocity = v_start + omega * np.array([-arm[1], arm[0]])
    quat = (math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2))
    inertia = (1e-4 * mass, mass * length**2 / 12, mass * length**2 / 12)
    return mb.RigidBody(name, mass, inertia, position=(*centre, 0.0), orientation=quat,
                        velocity=(*velocity, 0.0), angular_velocity=(0.0, 0.0, omega))  # fmt: skip


def four_bar_with_wear(
    *,
    clearance: float = 2e-4,
    speed_rpm: float = 300.0,
    wear_coefficient: tuple[float, float] = (2e-15, 1e-15),
    stiffness: float = 1e10,
    mu: float = 0.1,
    cells: int = 120,
    misalignment: float | None = None,
    crown_radius: float = 5.0,
    axial_cells: int = 20,
) -> mb.MultibodyModel:
    """The four-bar of the module docstring; ``clearance`` (m), ``stiffness`` (N/m^1.5),
    ``wear_coefficient`` (1/Pa). Its initial state is ``model.initial_state()``; one crank
    turn takes ``60 / speed_rpm`` s.

    ``misalignment`` (rad): the rocker's bore tilted by it about the rocker's length, and the
    joint a 3-D one (:class:`~diffmbs.multibody.CrownedWearingClearance`: a journal crowned
    to ``crown_radius`` (m), 20 mm long, in a bore 24 mm long, maps of ``cells`` ×
    ``axial_cells``) — the contact then runs at ``crown_radius · misalignment`` from the
    journal's middle. ``None``: the planar joint."""
    omega = speed_rpm * 2 * math.pi / 60
    a, d = LENGTHS["crank"], LENGTHS["ground"]
    pin_b, pin_c = pin_positions(0.0)
    v_b = omega * a * np.array([0.0, 1.0])
    # v_C = v_B + ω₃ ẑ × (C − B) = ω₄ ẑ × (C − D)
    perp = lambda r: np.array([-r[1], r[0]])  # noqa: E731
    ground_d = np.array([d, 0.0])
    loop = np.column_stack([perp(pin_c - pin_b), -perp(pin_c - ground_d)])
    omega_3, omega_4 = np.linalg.solve(loop, -v_b)
    builder = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
    builder.add_body(_bar("crank", np.zeros(2), pin_b, omega, np.zeros(2)))
    builder.add_body(_bar("coupler", pin_b, pin_c, omega_3, v_b))
    builder.add_body(_bar("rocker", ground_d, pin_c, omega_4, np.zeros(2)))
    z = (0.0, 0.0, 1.0)
    half = {k: LENGTHS[k] / 2 for k in LENGTHS}
    builder.add_joint("A", mb.PrescribedRevolute(
        "ground", mb.Frame.from_axis((0, 0, 0), z), "crank",
        mb.Frame.from_axis((-half["crank"], 0, 0), z), mb.ConstantRate(0.0, omega)))  # fmt: skip
    builder.add_joint("B", mb.Revolute("crank", mb.Frame.from_axis((half["crank"], 0, 0), z),
                                       "coupler", mb.Frame.from_axis((-half["coupler"], 0, 0), z)))
    builder.add_joint("D", mb.Revolute("rocker", mb.Frame.from_axis((-half["rocker"], 0, 0), z),
                                       "ground", mb.Frame.from_axis((d, 0, 0), z)))  # fmt: skip
    contact = dict(journal_radius=JOURNAL_RADIUS, contact_modulus=MODULUS,
                   wear_coefficient=wear_coefficient, cells=cells, friction=CoulombFriction(mu),
                   stiffness=stiffness, damping=damping_from_restitution(0.7, 0.1),
                   smoothing=1e-9)  # fmt: skip
    frames = ("rocker", (half["rocker"], 0, 0))
    if misalignment is None:
        joint = mb.WearingClearance(*frames, z, "coupler", (half["coupler"], 0, 0), z,
                                    clearance, length=CONTACT_LENGTH, **contact)  # fmt: skip
    else:
        tilted = (0.0, -math.sin(misalignment), math.cos(misalignment))
        joint = mb.CrownedWearingClearance(
            *frames, tilted, "coupler", (half["coupler"], 0, 0), z, clearance,
            crown_radius=crown_radius, half_length=CONTACT_LENGTH / 2,
            bore_half_length=0.6 * CONTACT_LENGTH, axial_cells=axial_cells, **contact)  # fmt: skip
    builder.add_force("C", joint)
    builder.add_sensor("contact_force", mb.ElementForce("C"))
    builder.add_sensor("journal", mb.PointPosition("coupler", (half["coupler"], 0, 0)))
    builder.add_sensor("bore", mb.PointPosition("rocker", (half["rocker"], 0, 0)))
    builder.add_sensor("rocker_angle", mb.JointCoordinates("D"))
    return builder.build()
