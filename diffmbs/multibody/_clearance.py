"""Joints with clearance as force elements (../shared/SEEDS.md 001): no constraint holds the
journal; Hunt–Crossley contact against the bearing's wall does, so free flight, contact,
impacts and rebounds come out of the states.

:class:`RevoluteClearance` — the 3-D revolute joint with clearance of Cavalieri, Pucheta and
Cardona. Bearing on body i: centre ``bearing_center`` A and axis ``bearing_axis`` u (body i's
frame), radial clearance ``clearance`` c (bearing radius minus journal radius). Journal on body
j: centre ``journal_center`` B, axis ``journal_axis`` v (body j's frame), ``journal_radius`` r
and ``half_length`` d. The journal is the segment B ± d v with spherical ends C₁, C₂; each end's
eccentricity and gap are::

    t_α = (I − u uᵀ)(C_α − A),     g_α = c − |t_α|,     δ_α = −g_α (penetration)

so free flight (both gaps open), line contact (both closed on one side), two-point contact
(closed on opposite sides) and one-point contact all emerge, with the journal free to tilt
against the bearing. ``half_length = 0`` is the planar journal–bearing joint (one contact at
the journal's centre; another joint or the model's symmetry then carries the axial load and the
tilt). Each closed end pushes the journal along ``−n_α = −t_α/|t_α|`` with the normal law of
:class:`diffmbs.contact.AbstractHuntCrossley` (keyword-only ``stiffness``, ``damping``;
restitution through :func:`diffmbs.contact.damping_from_restitution`) at the contact point
``C_α + r n_α``, and, with a ``friction`` law (:mod:`diffmbs.friction`), against the sliding
of the journal's surface on the bearing's there. A law with memory
(:class:`~diffmbs.friction.BristleFriction`) keeps its state per contact point as the joint's
internal states (``state_size`` = contacts × the law's), integrated with the bodies; its
bristle's elastic energy is not counted in :meth:`potential_energy`. Output (for sensors): the
normal force at each end, ``(2,)`` N (``(1,)`` planar).

:class:`TranslationalClearance` — a slider in a guide with a gap: the slider's corners against
the guide's two walls (see the class).
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs.contact import AbstractHuntCrossley
from diffmbs.friction import AbstractFriction
from diffmbs.multibody._bodies import BodyKinematics, as_float_array, as_vector3, dot
from diffmbs.multibody._contact import as_unit_vector
from diffmbs.multibody._forces import AbstractForceElement, Wrench, pair_wrench
from diffmbs.parameters import check_physical_value
from diffmbs.rotations import safe_norm

__all__ = ["RevoluteClearance", "TranslationalClearance"]


def _velocity_of_body_point(k: BodyKinematics, point: Array) -> Array:
    """World velocity of the material point of body ``k`` at the world ``point`` (m/s)."""
    return k.velocity + jnp.cross(k.angular_velocity, point - k.position)


def journal_contact(joint, ki: BodyKinematics, kj: BodyKinematics, end_body_j: Array):
    """One end of a journal in its bearing (``joint``'s ``bearing_center``, ``bearing_axis``,
    ``clearance``, ``journal_radius``; the end in body j's frame): ``(δ, δ̇, −n, contact
    point, sliding velocity in the contact plane)`` as :meth:`_AbstractClearance.contacts`."""
    u = jnp.matmul(ki.rotation, joint.bearing_axis)
    u_rate = jnp.cross(ki.angular_velocity, u)
    w = kj.point(end_body_j) - ki.point(joint.bearing_center)
    w_rate = kj.point_velocity(end_body_j) - ki.point_velocity(joint.bearing_center)
    t = w - dot(u, w) * u
    size = safe_norm(t)
    nonzero = size > 0
    n = jnp.where(nonzero, t / jnp.where(nonzero, size, 1.0), 0.0)
    rate = dot(n, w_rate) - dot(n, u_rate) * dot(u, w)  # d|t|/dt, u turning with body i
    point = kj.point(end_body_j) + joint.journal_radius * n
    slide = _velocity_of_body_point(kj, point) - _velocity_of_body_point(ki, point)
    return size - joint.clearance, rate, -n, point, slide - dot(slide, n) * n


class _AbstractClearance(AbstractForceElement, AbstractHuntCrossley):
    """Loads, output and energy of a joint with clearance between body i and body j from its
    :meth:`contacts`; the concrete joints write only those."""

    friction: AbstractFriction | None = eqx.field(kw_only=True, default=None)

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    @abc.abstractmethod
    def contacts(self, ki: BodyKinematics, kj: BodyKinematics):
        """Per contact (any leading shape c): ``(δ (c) m, δ̇ (c) m/s, direction of the normal
        force on body j (c, 3) unit, contact point (c, 3) m, sliding velocity of body j on body
        i there, in the contact plane (c, 3) m/s)``."""

    @abc.abstractmethod
    def _origin(self, ki: BodyKinematics) -> Array:
        """Where the loads are reduced (world, m)."""

    def output(self, t, ki, kj):
        delta, rate, *_ = self.contacts(ki, kj)
        return self.contact_force(delta, rate)

    @property
    def state_size(self) -> int:
        """The friction law's states at every contact point (0 without memory)."""
        if self.friction is None:
            return 0
        return self.n_contacts * self.friction.state_size

    @property
    @abc.abstractmethod
    def n_contacts(self) -> int:
        """Contact points of :meth:`contacts` (static)."""

    def loads(self, t, state, ki, kj) -> tuple[Wrench, Array]:
        return self._loads(self.contacts(ki, kj), state, ki)[:2]

    def _loads(self, contacts, state, ki) -> tuple[Wrench, Array, Array]:
        """:meth:`loads` from :meth:`contacts`' tuple and the friction law's states, and the
        normal forces ``(c,)`` (N) they came from."""
        delta, rate, direction, points, slide = contacts
        normal = self.contact_force(delta, rate)
        forces = normal[..., None] * direction  # on body j
        state_rate = jnp.zeros((0,), dtype=forces.dtype)
        if self.friction is not None:
            state = jnp.reshape(state, normal.shape + (self.friction.state_size,))
            friction, state_rate = self.friction.force_and_rate(slide, normal, state)
            forces = forces + friction
        origin = self._origin(ki)
        forces, points = forces.reshape(-1, 3), points.reshape(-1, 3)
        torque = jnp.sum(jnp.cross(points - origin, forces), axis=0)
        wrench = pair_wrench(jnp.sum(forces, axis=0), origin, torque)
        return wrench, state_rate.reshape(-1), normal

    def wrench(self, t, ki, kj) -> Wrench:
        return self.loads(t, jnp.zeros((self.state_size,)), ki, kj)[0]

    def potential_energy(self, t, ki, kj):
        return jnp.sum(self.contact_energy(self.contacts(ki, kj)[0]))


class AbstractJournalBearing(_AbstractClearance):
    """A journal on body j in a bearing on body i (module docstring): their frames and the
    radial clearance (m), the positional fields of every such joint."""

    body_i: str = eqx.field(static=True)
    bearing_center: Array = eqx.field(converter=as_vector3)
    bearing_axis: Array = eqx.field(converter=as_unit_vector)
    body_j: str = eqx.field(static=True)
    journal_center: Array = eqx.field(converter=as_vector3)
    journal_axis: Array = eqx.field(converter=as_unit_vector)
    clearance: Array = eqx.field(converter=as_float_array, metadata={"units": "m"})

    def _origin(self, ki):
        return ki.point(self.bearing_center)


class RevoluteClearance(AbstractJournalBearing):
    """A revolute joint with radial clearance between a bearing on body i and a journal on body
    j (see the module docstring for the geometry and the fields; lengths in m)."""

    journal_radius: Array = eqx.field(
        kw_only=True, default=0.0, converter=as_float_array, metadata={"units": "m"}
    )
    half_length: float = eqx.field(kw_only=True, default=0.0, static=True)  # m
    # half_length (m) is static: it decides how many contacts the journal has (2, or 1 at 0)

    @property
    def n_contacts(self) -> int:
        return 2 if self.half_length else 1

    def __check_init__(self):
        name = type(self).__name__
        for field in ("clearance", "journal_radius"):
            check_physical_value(field, getattr(self, field), f"{name}.{field}")
        if not (math.isfinite(self.half_length) and self.half_length >= 0):
            raise ValueError(f"{name}.half_length must be ≥ 0, got {self.half_length!r}")

    def contacts(self, ki: BodyKinematics, kj: BodyKinematics):
        """Per journal end (leading axis 2, or 1 at the centre when ``half_length`` is 0), as
        :meth:`_AbstractClearance.contacts`; the force on the journal is along ``−n``."""
        d = self.half_length
        sides = jnp.array([[d], [-d]] if d else [[0.0]])
        ends = self.journal_center + sides * self.journal_axis
        return jax.vmap(lambda end: journal_contact(self, ki, kj, end))(ends)


class TranslationalClearance(_AbstractClearance):
    """A slider (body j) in a guide (body i) with a gap: no constraint holds it; the slider's
    ``corners`` ((k, 3), body j's frame, m) touch the guide's two walls, the planes at
    ``± half_width`` (m) along ``guide_normal`` from the guide's centre plane through
    ``guide_point`` (body i's frame). A corner past a wall is pushed back along the wall's
    inward normal with the normal law of :class:`~diffmbs.contact.AbstractHuntCrossley`, and,
    with a ``friction`` law, against its sliding on that wall. With the four corners of a block
    of length 2a and height 2b in a guide of half-width b + c, the block can slide, lift across
    the clearance c, cock and jam against opposite walls. Output: each corner's normal force
    against either wall, ``(k, 2)`` N (columns: the wall at −, at +)."""

    body_i: str = eqx.field(static=True)
    guide_point: Array = eqx.field(converter=as_vector3)
    guide_normal: Array = eqx.field(converter=as_unit_vector)
    half_width: Array = eqx.field(converter=as_float_array, metadata={"units": "m"})
    body_j: str = eqx.field(static=True)
    corners: Array = eqx.field(converter=as_float_array)

    @property
    def n_contacts(self) -> int:
        return 2 * self.corners.shape[0]  # every corner against either wall

    def __check_init__(self):
        name = type(self).__name__
        check_physical_value("clearance", self.half_width, f"{name}.half_width")
        if jnp.ndim(self.corners) != 2 or jnp.shape(self.corners)[-1] != 3:
            shape = jnp.shape(self.corners)
            raise ValueError(f"{name}.corners: expected shape (k, 3), got {shape}")

    def contacts(self, ki: BodyKinematics, kj: BodyKinematics):
        """Per corner and wall (leading axes k, 2; the walls at −, +), as
        :meth:`_AbstractClearance.contacts`; the force on the slider is along the wall's
        inward normal."""
        n = jnp.matmul(ki.rotation, self.guide_normal)
        origin = ki.point(self.guide_point)

        def one(corner):
            point = kj.point(corner)
            height = dot(point - origin, n)  # across the guide
            relative = kj.point_velocity(corner) - _velocity_of_body_point(ki, point)
            rate = dot(relative, n)  # = d/dt of the height: the wall turns with body i
            slide = relative - dot(relative, n) * n
            sides = jnp.array([-1.0, 1.0])
            delta = sides * height - self.half_width
            inward = -sides[:, None] * n
            return delta, sides * rate, inward, jnp.stack([point, point]), jnp.stack([slide, slide])

        return jax.vmap(one)(self.corners)

    def _origin(self, ki):
        return ki.point(self.guide_point)
