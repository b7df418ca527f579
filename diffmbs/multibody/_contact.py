"""Hunt–Crossley contact between geometric primitives attached to bodies.

Each contact has the normal law of :func:`diffmbs.contact.hunt_crossley_force`:
``F = K δ_sⁿ max(1 + χ δ̇, 0)`` with the smoothed penetration ``δ_s = ε softplus(δ/ε)``, so the
force is never tensile and its onset is smooth over ``ε``. Its parameters are the shared set of
:class:`diffmbs.contact.AbstractHuntCrossley`, keyword-only after the geometry: ``stiffness`` K
(N/mⁿ), ``damping`` χ (s/m); static: ``exponent`` n (1.5 Hertzian), ``smoothing`` ε (m). No
friction.

Geometry (body-frame points and directions, metres):

* :class:`SpherePlane`: sphere (``center``, ``radius``) on body i against the plane through
  ``plane_point`` with outward unit normal ``plane_normal`` on body j; ``δ = radius − h``, h the
  height of the centre above the plane;
* :class:`PointPlane`: the same with a point (radius 0);
* :class:`PointsPlane`: several points of body i against one plane of body j, each with the
  law and parameters of the element (the four lower stops of a table: one set of parameters
  for fits, one element in the model);
* :class:`SphereSphere`: ``δ = r_i + r_j − |c_j − c_i|`` (the distance is guarded at zero).

The normal force acts along the normal at the contact point (the centre's projection on the
plane; the point between the spheres), equal and opposite on the two bodies. The output (for
sensors) is the normal force F (N, ≥ 0). Penetration rates are exact time derivatives.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from diffmbs._linalg import matvec
from diffmbs.contact import AbstractHuntCrossley
from diffmbs.multibody._bodies import (
    BodyKinematics,
    as_float_array,
    as_vector3,
    concrete_or_none,
    dot,
)
from diffmbs.multibody._forces import AbstractForceElement, Wrench, pair_wrench
from diffmbs.parameters import check_physical_value
from diffmbs.rotations import safe_norm

__all__ = ["PointPlane", "PointsPlane", "SpherePlane", "SphereSphere"]


def as_unit_vector(x) -> Array:
    """Converter: a 3-vector normalised to unit length (when concrete; must be non-zero)."""
    x = as_vector3(x)
    arr = concrete_or_none(x)
    if arr is None:
        return x
    n = np.linalg.norm(arr)
    if not n > 0:
        raise ValueError(f"a normal must be a non-zero 3-vector, got {arr.tolist()}")
    return jnp.asarray(arr / n)


class _AbstractContact(AbstractForceElement, AbstractHuntCrossley):
    """Shared force, output and energy of a Hunt–Crossley contact between body i and body j;
    a primitive pair only implements :meth:`contact`."""

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def __check_init__(self):
        for name in ("radius", "radius_i", "radius_j"):
            if hasattr(self, name):
                check_physical_value(name, getattr(self, name), f"{type(self).__name__}.{name}")

    @abc.abstractmethod
    def contact(self, ki: BodyKinematics, kj: BodyKinematics) -> tuple[Array, Array, Array, Array]:
        """``(F, δ, direction of the force on body j (unit), contact point)``; world frame."""

    def output(self, t, ki, kj):
        return self.contact(ki, kj)[0]

    def wrench(self, t, ki, kj) -> Wrench:
        force, _, direction, point = self.contact(ki, kj)
        return pair_wrench(force * direction, point, jnp.zeros_like(direction))

    def potential_energy(self, t, ki, kj):
        delta = self.contact(ki, kj)[1]
        return self.contact_energy(delta)


def _plane_contact(
    contact, ki: BodyKinematics, center: Array, radius: Array, kj: BodyKinematics
) -> tuple[Array, Array, Array, Array]:
    """``(F, δ, −normal, contact point)`` of a sphere on body i against the plane on body j
    (the force pushes body j along −normal)."""
    c, p0 = ki.point(center), kj.point(contact.plane_point)
    normal = matvec(kj.rotation, contact.plane_normal)
    height = dot(c - p0, normal)
    relative = ki.point_velocity(center) - kj.point_velocity(contact.plane_point)
    rate = dot(relative, normal) + dot(c - p0, jnp.cross(kj.angular_velocity, normal))
    delta = radius - height
    force = contact.contact_force(delta, -rate)
    return force, delta, -normal, c - height * normal


class SpherePlane(_AbstractContact):
    """Sphere (``center`` in body i's frame, ``radius`` m) against a plane on body j (or the
    ground) through ``plane_point`` with outward normal ``plane_normal`` (body j's frame)."""

    body_i: str = eqx.field(static=True)
    center: Array = eqx.field(converter=as_vector3)
    radius: Array = eqx.field(converter=as_float_array)
    body_j: str = eqx.field(static=True)
    plane_point: Array = eqx.field(converter=as_vector3)
    plane_normal: Array = eqx.field(converter=as_unit_vector)

    def contact(self, ki, kj):
        return _plane_contact(self, ki, self.center, self.radius, kj)


class PointPlane(_AbstractContact):
    """A point (``point`` in body i's frame) against a plane on body j, as :class:`SpherePlane`
    with zero radius."""

    body_i: str = eqx.field(static=True)
    point: Array = eqx.field(converter=as_vector3)
    body_j: str = eqx.field(static=True)
    plane_point: Array = eqx.field(converter=as_vector3)
    plane_normal: Array = eqx.field(converter=as_unit_vector)

    def contact(self, ki, kj):
        return _plane_contact(self, ki, self.point, jnp.zeros(()), kj)


class PointsPlane(AbstractForceElement, AbstractHuntCrossley):
    """Points ``points`` ((n, 3), body i's frame) against one plane on body j (as
    :class:`PointPlane`, each point with the element's law and parameters). The loads are
    reduced to the plane point (a force and a couple, equal and opposite on the two bodies).
    Output: the normal force at each point (n,) N."""

    body_i: str = eqx.field(static=True)
    points: Array = eqx.field(converter=as_float_array)
    body_j: str = eqx.field(static=True)
    plane_point: Array = eqx.field(converter=as_vector3)
    plane_normal: Array = eqx.field(converter=as_unit_vector)

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def __check_init__(self):
        if jnp.ndim(self.points) != 2 or jnp.shape(self.points)[-1] != 3:
            raise ValueError(f"PointsPlane.points: expected shape (n, 3), got "
                             f"{jnp.shape(self.points)}")  # fmt: skip

    def _each(self, ki, kj):
        """``(F (n,), δ (n,), −normal (3,), contact points (n, 3))``."""
        one = lambda p: _plane_contact(self, ki, p, jnp.zeros(()), kj)  # noqa: E731
        return jax.vmap(one)(self.points)

    def output(self, t, ki, kj):
        return self._each(ki, kj)[0]

    def wrench(self, t, ki, kj) -> Wrench:
        force, _, direction, points = self._each(ki, kj)
        origin = kj.point(self.plane_point)
        forces = force[:, None] * direction
        torque = jnp.sum(jnp.cross(points - origin, forces), axis=0)
        return pair_wrench(jnp.sum(forces, axis=0), origin, torque)

    def potential_energy(self, t, ki, kj):
        return jnp.sum(self.contact_energy(self._each(ki, kj)[1]))


class SphereSphere(_AbstractContact):
    """Sphere (``center_i``, ``radius_i``) on body i against sphere (``center_j``,
    ``radius_j``) on body j; centres in the bodies' frames (m)."""

    body_i: str = eqx.field(static=True)
    center_i: Array = eqx.field(converter=as_vector3)
    radius_i: Array = eqx.field(converter=as_float_array)
    body_j: str = eqx.field(static=True)
    center_j: Array = eqx.field(converter=as_vector3)
    radius_j: Array = eqx.field(converter=as_float_array)

    def contact(self, ki, kj):
        c_i, c_j = ki.point(self.center_i), kj.point(self.center_j)
        gap = c_j - c_i
        distance = safe_norm(gap)
        nonzero = distance > 0
        normal = jnp.where(nonzero, gap / jnp.where(nonzero, distance, 1.0), 0.0)
        rate = dot(normal, kj.point_velocity(self.center_j) - ki.point_velocity(self.center_i))
        delta = self.radius_i + self.radius_j - distance
        force = self.contact_force(delta, -rate)
        return force, delta, normal, c_i + (self.radius_i - 0.5 * delta) * normal
