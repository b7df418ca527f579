"""The 3-D Medium Weight Shock Machine (MIL-DTL-901E) as a multibody model (SEEDS.md 002).

:func:`mwsm3d` builds :class:`ShockMachine3D`, a :class:`~diffmbs.multibody.MultibodyModel` in
body coordinates, and by default returns it in joint coordinates (z up; the hammer swings in the
x–z plane about an axis along y):

* ``bed``: one rigid body on its springs (one six-component bushing ``bed_springs`` at its
  centre of mass: vertical and lateral stiffness, rocking and yaw stiffness of four corner
  springs, damping from ``zeta_bed``);
* ``hammer``: a pendulum on the revolute joint ``hammer_pivot`` to the bed, its mass at the
  head; released from rest ``drop_height_ft`` above the impact point on the far side, it swings
  more than 180° and strikes the anvil table from below with its arm horizontal (contact
  ``impact``: the head's spherical face against the anvil's pad, Hunt–Crossley);
* ``anvil``: a rigid table guided by its bolts (bushing ``anvil_bolts``: lateral and yaw
  stiffness only), resting on four lower stops and limited by four upper stops ``travel_in``
  higher (``lower_stops``, ``upper_stops``: the table's four corner points against the bed's
  stop faces, Hunt–Crossley); an off-centre blow (``impact_offset``) rocks it. With
  ``anvil_hz`` > 0 the table is compliant: a struck lower plate ``anvil`` (``anvil_fraction``
  of the mass, the bolts, stops and pad) and an upper plate ``anvil_top`` (the channels and
  the anvil sensor), joined by the bushing ``anvil_spring`` (vertical and rocking, the upper
  plate's mode at ``anvil_hz`` on a fixed lower plate, 2 % damping; stiff laterally);
* supporting channels (``channels="modal"``): two pairs (a carbuilding MC 6 × 12 and a standard
  C 6 × 8.2 each), every channel a floating-frame modal body whose frame is welded to the anvil
  at its bolts (fixed-interface modes, ``modes_per_channel`` each, modal damping
  ``channel_damping``); or (``channels="lumped"``) one vertical spring–damper at the lumped
  model's 60 Hz, for comparison with :class:`~diffmbs.models.LumpedContactModel`;
* ``equipment``: the 325 kg block of test 1, T-clamped to each channel at two points (bushings
  ``clamp_<channel>_<k>``); with ``equipment="flexible"`` also the HEB 100 beam of test 2
  (modal body ``equipment_beam``, welded to the block at its supports).

Sensors: ``equipment_acceleration`` (3,) at the centre of the block's top face, an
accelerometer's reading (m/s², 0 at rest: gravity removed as a seismic accelerometer does);
``anvil_acceleration`` (3,) likewise at the centre of the anvil's top; ``hammer_velocity`` (3,)
of the head (m/s); ``impact_force`` (N); ``lower_stop_forces`` and ``upper_stop_forces`` (4,) N;
``bed_spring_load`` (6,) the bed springs' force (N) and couple on the bed, world axes;
``energy`` (J, kinetic plus potential); with modal channels ``stress_<channel>`` (12,) the
normal stresses (Pa) at the four outline points of the section at a bolt, a T-clamp and the
middle (labels in the channel's ``modal_data.stress_labels``); with the flexible equipment
``beam_short_tip_acceleration`` and ``beam_long_tip_acceleration`` (3,) at the tips of the two
cantilevers, as accelerometers read them.

A test starts (:meth:`ShockMachine3D.initial_state`) from static equilibrium with the hammer
held at its release angle (``start="release"``: the study's 1.394 s of fall, then the impact),
or held ``gap`` below the anvil with the speed the fall gives it (``start="impact"``: the same
blow without simulating the fall, for fits). Dimensions, masses and their sources:
:mod:`diffmbs.models._mwsm3d_parts`. Pictures: :func:`draw_machine` (one state, PNG) and
:func:`animate_blow` (a GIF of a run).
"""

from __future__ import annotations

import dataclasses
import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

import diffmbs.multibody as mb
from diffmbs._phases import SolverPhases
from diffmbs._rosenbrock import RosenbrockW
from diffmbs.contact import damping_from_restitution
from diffmbs.flex import ModalDampingRatios
from diffmbs.models._mwsm3d_draw import animate_blow, draw_machine
from diffmbs.models._mwsm3d_parts import Geometry, channel_modal_data, equipment_beam_modal_data
from diffmbs.models.mwsm import (
    CHANNEL_HZ,
    DAMPING_RATIO,
    FT,
    HAMMER_CONTACT_K,
    INCH,
    NRL_RESTITUTION,
    NRL_VELOCITY_RATIO,
    STOP_CONTACT_K,
    STOP_RESTITUTION,
    G,
    _check_options,
)
from diffmbs.rotations import quat_from_rotation_vector, quat_to_matrix

__all__ = ["CHANNELS", "ShockMachine3D", "animate_blow", "draw_machine", "mwsm3d"]

CHANNELS = (("A_carbuilding", "MC6x12", -1, -1), ("A_standard", "C6x8.2", -1, 1),
            ("B_carbuilding", "MC6x12", 1, -1), ("B_standard", "C6x8.2", 1, 1))  # fmt: skip
"""The supporting channels: name, section, pair side (y sign), side within the pair."""


class ShockMachine3D(mb.MultibodyModel):
    """The 3-D MWSM (module docstring); a :class:`~diffmbs.multibody.MultibodyModel` whose
    :meth:`initial_state` is the start of a test: static equilibrium with the hammer held at
    ``hold_angle`` (rad, about y from the arm pointing at the impact point, positive
    downwards), then the hammer's angular velocity ``hammer_rate`` (rad/s, 0 for a release)."""

    hold_angle: Array = eqx.field(default=0.0, metadata={"units": "rad"})
    hammer_rate: Array = eqx.field(default=0.0, metadata={"units": "rad/s"})
    fall_time: float = eqx.field(static=True, default=0.0)  # s, 0: the run starts at the blow

    def default_solver(self):
        """With a release (:attr:`fall_time` > 0): :class:`~diffmbs.RosenbrockW` through 98 %
        of the fall (~30 ms before the blow), then ``diffrax.Tsit5()``. During the fall the
        channels ring on their stiff modes and nothing moves fast: the linearly implicit solver
        takes ~1,100 steps where Tsit5 takes ~4,000 (rtol 1e-4); after the blow the response
        must be resolved to 2 kHz, where Tsit5 takes the fewest. The fall time is the rigid
        pendulum's estimate (the bed's recoil delays the blow by ~0.4 %); a wrong one (after
        changing ``hold_angle``) costs time, never accuracy: each solver meets the tolerance,
        the W-method through a blow too, in more steps."""
        if self.fall_time <= 0.0:
            return None
        return SolverPhases((RosenbrockW(), diffrax.Tsit5()), 0.98 * self.fall_time)

    def hammer_angle(self, q: Array) -> Array:
        """The hammer's angle (rad) about the pivot axis relative to the bed (0: arm horizontal
        towards the anvil; positive: head down)."""
        r_bed = quat_to_matrix(q[self.q_slice("bed")][3:7])
        r_ham = quat_to_matrix(q[self.q_slice("hammer")][3:7])
        rel = r_bed.T @ r_ham
        return jnp.arctan2(rel[0, 2], rel[0, 0])

    def initial_state(self) -> tuple[Array, Array]:
        """``(q0, v0)``: at rest in static equilibrium, hammer held at :attr:`hold_angle`; then
        the hammer turning at :attr:`hammer_rate` about its pivot (the bed at rest).
        Differentiable in the parameters (implicit function theorem)."""
        guess, v_built = super().initial_state()
        q0 = mb.static_equilibrium(self, guess, hold=jax.tree_util.Partial(_held_hammer, self))
        v0 = jnp.zeros_like(v_built, dtype=q0.dtype)
        hammer = self.v_slice("hammer")
        # ω̄ about the body's y axis (the pivot axis, parallel to the bed's y at rest); the
        # centre of mass moves with ω × (r_G − pivot).
        r_ham = quat_to_matrix(q0[self.q_slice("hammer")][3:7])
        omega_world = r_ham @ jnp.array([0.0, 1.0, 0.0]) * self.hammer_rate
        arm = r_ham @ jnp.array([Geometry.hammer_arm, 0.0, 0.0])
        v0 = v0.at[hammer].set(jnp.concatenate([jnp.cross(omega_world, arm),
                                                jnp.array([0.0, 1.0, 0.0]) * self.hammer_rate]))
        return q0, v0


def _held_hammer(model: ShockMachine3D, q: Array) -> Array:
    """The hammer's angle from the held one (rad, wrapped to (−π, π]), shape (1,)."""
    delta = model.hammer_angle(q) - model.hold_angle
    return jnp.arctan2(jnp.sin(delta), jnp.cos(delta))[None]


def _pendulum_fall_time(start: float, gain: float, dt: float = 1e-3) -> float:
    """Time (s) for a rigid pendulum, ``φ̈ = gain · cos φ`` (φ from the arm pointing at the
    anvil, head down positive; gain = m g l / I, 1/s²), to swing from rest at ``start`` to
    φ = 0: classical RK4, the crossing interpolated linearly."""
    rhs = lambda y: np.array([y[1], gain * math.cos(y[0])])  # noqa: E731
    y, t = np.array([start, 0.0]), 0.0
    while True:
        k1 = rhs(y)
        k2 = rhs(y + dt / 2 * k1)
        k3 = rhs(y + dt / 2 * k2)
        k4 = rhs(y + dt * k3)
        y_next = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        if y_next[0] <= 0.0:
            return t + dt * y[0] / (y[0] - y_next[0])
        y, t = y_next, t + dt


def _box_inertia(mass: float, a: float, b: float, c: float) -> list[float]:
    return [mass * (b * b + c * c) / 12, mass * (a * a + c * c) / 12, mass * (a * a + b * b) / 12]


def _y_rotation(angle: float) -> np.ndarray:
    return np.asarray(quat_from_rotation_vector(jnp.array([0.0, angle, 0.0])))


def mwsm3d(
    *,
    drop_height_ft: float = 2.0,
    travel_in: float = 3.0,
    equipment: str = "rigid",
    channels: str = "modal",
    modes_per_channel: int = 10,
    beam_modes: int = 8,
    start: str = "release",
    gap: float = 1e-3,
    k_impact: float = HAMMER_CONTACT_K,
    e_impact: float = NRL_RESTITUTION,
    k_stop: float = STOP_CONTACT_K,
    e_stop: float = STOP_RESTITUTION,
    bed_hz: float = 3.0,
    zeta_bed: float = DAMPING_RATIO,
    channel_damping: float = 0.02,
    channel_hz: float = CHANNEL_HZ,
    zeta_channel: float = DAMPING_RATIO,
    clamp_stiffness: float = 1e8,
    impact_offset: float = 0.0,
    anvil_hz: float = 0.0,
    anvil_fraction: float = 0.4,
    smoothing: float = 1e-6,
    coordinates: str = "joint",
) -> mb.JointCoordinateModel | ShockMachine3D:
    """The 3-D MWSM of the module docstring, in SI inside; machine options in ft / in at this
    edge. ``equipment``: ``"rigid"`` (test 1) or ``"flexible"`` (test 2). ``channels``:
    ``"modal"`` or ``"lumped"``. ``beam_modes``: the HEB 100's fixed-interface modes (the
    lowest 8 hold both cantilevers' vertical bending, 159 Hz and 307 Hz; the lowest 6 only the
    long one's: sideways bending and twist come first). ``start``: ``"release"`` or
    ``"impact"``. Contact stiffnesses
    (N/m^1.5) and restitutions as :meth:`LumpedContactModel.from_machine` (the impact's χ from
    ``e_impact`` at the impact speed, the stops' from ``e_stop`` at 0.545 of it; each stop point
    a quarter of ``k_stop``); ``impact_offset`` (m) moves the blow along y off the table's
    centre; ``anvil_hz`` > 0 makes the table compliant (module docstring). Default values and
    their sources: :mod:`diffmbs.models._mwsm3d_parts`.

    ``coordinates="joint"`` (default) returns the machine in joint coordinates
    (:class:`~diffmbs.multibody.JointCoordinateModel`: bed, anvil and equipment floating, the
    hammer's angle, the channels' and beam's modal coordinates; 62 coordinates and no
    constraint for test 1, about 4× faster to simulate); its ``full`` is the
    :class:`ShockMachine3D`, whose parameters, sensors and initial state it shares.
    ``"full"`` returns the :class:`ShockMachine3D` itself (body coordinates, 29 constraints)."""
    _check_options({k: v for k, v in locals().items() if k not in ("impact_offset",)})
    for name, value, allowed in (("equipment", equipment, ("rigid", "flexible")),
                                 ("channels", channels, ("modal", "lumped")),
                                 ("start", start, ("release", "impact")),
                                 ("coordinates", coordinates, ("joint", "full"))):  # fmt: skip
        if value not in allowed:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(map(repr, allowed))}")
    geo = Geometry
    h = drop_height_ft * FT
    arm = geo.hammer_arm
    if not h < arm:
        raise ValueError(f"drop_height_ft: {drop_height_ft} ft is not below the arm "
                         f"({arm / FT:.2f} ft)")  # fmt: skip
    v_impact = math.sqrt(2 * G * h)
    t_anvil, t_block = geo.anvil_thickness(), geo.block_thickness()
    z_u = geo.anvil_underside
    m_e = geo.block_mass
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))

    # bed on its springs
    b.add_body(mb.RigidBody("bed", mass=geo.bed_mass,
                            inertia=_box_inertia(geo.bed_mass, *geo.bed_box)))
    k_bed = (geo.bed_mass + geo.anvil_mass + m_e) * (2 * math.pi * bed_hz) ** 2
    c_bed = 2 * zeta_bed * math.sqrt(k_bed * (geo.bed_mass + geo.anvil_mass + m_e))
    sx, sy = geo.bed_spring_points
    rocking = np.array([sy * sy, sx * sx, sx * sx + sy * sy])
    b.add_force("bed_springs", mb.Bushing("ground", (0.0, 0.0, 0.0), "bed", (0.0, 0.0, 0.0),
                                          stiffness=(k_bed,) * 3, damping=(c_bed,) * 3,
                                          rotational_stiffness=k_bed * rocking,
                                          rotational_damping=c_bed * rocking))  # fmt: skip

    # hammer: body frame at the pivot, arm along body x, head (centre of mass) at x = arm
    pivot = np.array([-arm, 0.0, z_u - geo.face_radius])
    impact_y = float(impact_offset)
    pivot[1] = impact_y
    if start == "release":
        hold = math.pi + math.asin(h / arm)
        rate = 0.0
        fall = _pendulum_fall_time(hold, G * arm / (arm**2 + geo.head_size**2 / 6))
    else:
        hold = math.asin(gap / arm)  # the face `gap` below contact
        rate = -v_impact / arm  # upwards at impact: the angle decreases
        fall = 0.0
    head = geo.head_size
    b.add_body(mb.RigidBody("hammer", mass=geo.hammer_mass,
                            inertia=_box_inertia(geo.hammer_mass, head, head, head),
                            com=(arm, 0.0, 0.0), position=pivot,
                            orientation=_y_rotation(hold)))  # fmt: skip
    b.add_joint("hammer_pivot", mb.Revolute("bed", mb.Frame.from_axis(pivot, (0, 1, 0)),
                                            "hammer", mb.Frame.from_axis((0, 0, 0), (0, 1, 0))))

    # anvil table on its bolts and stops
    anvil_centre = np.array([0.0, 0.0, z_u + t_anvil / 2])
    if not 0.0 < anvil_fraction < 1.0:
        raise ValueError(f"anvil_fraction: must be in (0, 1), got {anvil_fraction!r}")
    lower_mass = geo.anvil_mass * (anvil_fraction if anvil_hz > 0 else 1.0)
    b.add_body(mb.RigidBody("anvil", mass=lower_mass,
                            inertia=_box_inertia(lower_mass, *geo.anvil_plan, t_anvil),
                            position=anvil_centre))  # fmt: skip
    table = "anvil"  # the body that carries the channels
    if anvil_hz > 0:
        table, upper_mass = "anvil_top", geo.anvil_mass - lower_mass
        upper_inertia = _box_inertia(upper_mass, *geo.anvil_plan, t_anvil)
        b.add_body(mb.RigidBody(table, mass=upper_mass, inertia=upper_inertia,
                                position=anvil_centre))  # fmt: skip
        omega = 2 * math.pi * anvil_hz
        k_v, rocking = upper_mass * omega**2, np.array(upper_inertia)[:2] * omega**2
        b.add_force("anvil_spring", mb.Bushing(
            "anvil", (0.0, 0.0, 0.0), table, (0.0, 0.0, 0.0),
            stiffness=(1e9, 1e9, k_v), damping=(1e5, 1e5, 0.04 * math.sqrt(k_v * upper_mass)),
            rotational_stiffness=(*rocking, 1e8),
            rotational_damping=(*(0.04 * np.sqrt(rocking * upper_inertia[:2])), 1e4)))
    b.add_force("anvil_bolts", mb.Bushing("bed", anvil_centre, "anvil", (0.0, 0.0, 0.0),
                                          stiffness=(1e8, 1e8, 0.0), damping=(1e4, 1e4, 0.0),
                                          rotational_stiffness=(0.0, 0.0, 1e7),
                                          rotational_damping=(0.0, 0.0, 1e3)))  # fmt: skip
    px, py = geo.stop_points
    corners = np.array([[x, y, -t_anvil / 2] for x in (-px, px) for y in (-py, py)])
    chi_stop = float(damping_from_restitution(e_stop, NRL_VELOCITY_RATIO * v_impact))
    stop = dict(stiffness=k_stop / 4, damping=chi_stop, smoothing=smoothing)
    b.add_force("lower_stops", mb.PointsPlane("anvil", corners, "bed", (0.0, 0.0, z_u),
                                              (0.0, 0.0, 1.0), **stop))  # fmt: skip
    b.add_force("upper_stops", mb.PointsPlane("anvil", corners, "bed",
                                              (0.0, 0.0, z_u + travel_in * INCH),
                                              (0.0, 0.0, -1.0), **stop))  # fmt: skip
    chi_impact = float(damping_from_restitution(e_impact, v_impact))
    b.add_force("impact", mb.SphereSphere("hammer", (arm, 0.0, 0.0), geo.face_radius, "anvil",
                                          (0.0, impact_y, -t_anvil / 2 + geo.pad_radius),
                                          geo.pad_radius, stiffness=k_impact,
                                          damping=chi_impact, smoothing=smoothing))  # fmt: skip

    # channels and equipment
    top = z_u + t_anvil
    channel_height = 6.0 * INCH
    block_centre = np.array([0.0, 0.0, top + channel_height + t_block / 2])
    b.add_body(mb.RigidBody("equipment", mass=m_e,
                            inertia=_box_inertia(m_e, *geo.block_plan, t_block),
                            position=block_centre))  # fmt: skip
    if channels == "lumped":
        k_ch = m_e * (2 * math.pi * channel_hz) ** 2
        c_ch = 2 * zeta_channel * math.sqrt(k_ch * m_e)
        b.add_force("channels", mb.Bushing(table, block_centre - anvil_centre, "equipment",
                                           (0.0, 0.0, 0.0), stiffness=(1e9, 1e9, k_ch),
                                           damping=(1e5, 1e5, c_ch),
                                           rotational_stiffness=(1e7,) * 3,
                                           rotational_damping=(1e3,) * 3))  # fmt: skip
    else:
        clamp = dict(stiffness=(clamp_stiffness,) * 3, rotational_stiffness=(0.0,) * 3,
                     damping=(2 * 0.05 * math.sqrt(clamp_stiffness * m_e / 8),) * 3)
        for name, section, side, partner in CHANNELS:
            data, labels = channel_modal_data(section, geo.channel_span, geo.clamp_spacing,
                                              modes_per_channel)  # fmt: skip
            y = side * geo.pair_spacing / 2 + partner * geo.partner_offset
            origin = np.array([0.0, y, top + channel_height / 2])
            b.add_body(mb.ModalBody(name, data, damping=ModalDampingRatios(channel_damping),
                                    position=origin))  # fmt: skip
            b.add_joint(f"bolts_{name}", mb.Fixed(table, origin - anvil_centre, name,
                                                  (0.0, 0.0, 0.0)))  # fmt: skip
            for k in range(2):
                x = (2 * k - 1) * geo.clamp_spacing / 2
                node = mb.node(name, labels[f"clamp_{k}"])
                under = np.array([x, y, -t_block / 2 - channel_height / 2])
                b.add_force(f"clamp_{name}_{k}", mb.Bushing(node, (0.0, 0.0, 0.0), "equipment",
                                                            under, **clamp))  # fmt: skip
            b.add_sensor(f"stress_{name}", mb.ModalStress(name))
    if equipment == "flexible":
        data, labels = equipment_beam_modal_data(geo.beam_length, geo.beam_free_lengths,
                                                 beam_modes)  # fmt: skip
        section_half = 0.05
        origin = block_centre + np.array([0.0, 0.0, t_block / 2 + geo.beam_support_height
                                          + section_half])  # fmt: skip
        b.add_body(mb.ModalBody("equipment_beam", data,
                                damping=ModalDampingRatios(channel_damping), position=origin))
        b.add_joint("beam_supports", mb.Fixed("equipment", origin - block_centre,
                                              "equipment_beam", (0.0, 0.0, 0.0)))  # fmt: skip
        for tip, which in (("short", "tip_0"), ("long", "tip_1")):
            b.add_sensor(f"beam_{tip}_tip_acceleration", mb.PointAcceleration(
                mb.node("equipment_beam", labels[which]), include_gravity=True))  # fmt: skip

    b.add_sensor("equipment_acceleration",
                 mb.PointAcceleration("equipment", (0.0, 0.0, t_block / 2), include_gravity=True))
    b.add_sensor("anvil_acceleration",
                 mb.PointAcceleration(table, (0.0, 0.0, t_anvil / 2), include_gravity=True))
    b.add_sensor("hammer_velocity", mb.PointVelocity("hammer", (arm, 0.0, 0.0)))
    b.add_sensor("impact_force", mb.ElementForce("impact"))
    b.add_sensor("lower_stop_forces", mb.ElementForce("lower_stops"))
    b.add_sensor("upper_stop_forces", mb.ElementForce("upper_stops"))
    b.add_sensor("bed_spring_load", mb.ElementForce("bed_springs"))
    b.add_sensor("energy", mb.MechanicalEnergy())
    model = b.build()
    fields = {f.name: getattr(model, f.name) for f in dataclasses.fields(model)}
    machine = ShockMachine3D(**fields, hold_angle=jnp.asarray(hold), hammer_rate=jnp.asarray(rate),
                             fall_time=float(fall))  # fmt: skip
    return mb.in_joint_coordinates(machine) if coordinates == "joint" else machine
