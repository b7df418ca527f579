"""Joints as constraint functions ``Φ(t, q) = 0`` between two bodies (or a body and the ground).

A joint connects frame ``frame_i`` on body ``body_i`` to frame ``frame_j`` on body ``body_j``
(:class:`~diffmbs.multibody.Frame`: origin and axes in each body's frame). In world components,
with origins ``o_i``, ``o_j``, axes ``x_i, y_i, z_i`` and ``x_j, y_j, z_j`` and ``d = o_j − o_i``:

============================  ============================================  ===  ===
joint                         equations                                      n   DOF
============================  ============================================  ===  ===
:class:`Spherical`            d = 0                                          3   3
:class:`Revolute`             d = 0, z_i·x_j = z_i·y_j = 0 (about z)          5   1
:class:`Universal`            d = 0, x_i·y_j = 0 (about x_i and y_j)          4   2
:class:`Cylindrical`          z_i·x_j = z_i·y_j = 0, x_i·d = y_i·d = 0        4   2
:class:`Prismatic`            cylindrical + x_i·y_j = 0 (along z)             5   1
:class:`Planar`               z_i·d = 0, z_i·x_j = z_i·y_j = 0                3   3
:class:`Fixed`                d = 0, z_i·x_j = z_i·y_j = x_i·y_j = 0          6   0
:class:`Distance`             (d·d − L²) / (2L) = 0                           1   5
:class:`PrescribedRevolute`   revolute + sin(θ − θ(t)) = 0                    6   0
:class:`PrescribedPrismatic`  prismatic + z_i·d − s(t) = 0                    6   0
============================  ============================================  ===  ===

Units: metres for position equations, dimensionless for axis equations. Only ``Φ`` is written
here; Jacobians, ``Φ̇`` and ``γ`` come from autodiff (:mod:`diffmbs.system`). The equations are
local: each (like every practical joint formulation) also admits mirrored configurations far from
the intended one, which position analysis from a reasonable guess never reaches.

Joint coordinates (:meth:`AbstractJoint.coordinates`): the revolute angle ``θ`` of ``x_j`` about
``z_i`` measured from ``x_i`` (rad, in (−π, π]), the prismatic displacement ``z_i·d`` (m), both
for the cylindrical joint, the in-plane translation and angle for the planar joint, the
distance ``|d|`` for the distance joint.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from diffmbs.multibody._bodies import BodyKinematics, Frame, as_float_array, as_frame, dot
from diffmbs.rotations import matrix_to_quat, quat_derivative, quat_to_matrix, safe_norm

__all__ = [
    "AbstractJoint",
    "ConstantRate",
    "Cylindrical",
    "Distance",
    "Fixed",
    "Harmonic",
    "InPlane",
    "Planar",
    "PrescribedPrismatic",
    "PrescribedRevolute",
    "Prismatic",
    "Revolute",
    "Spherical",
    "Universal",
]


class AbstractJoint(eqx.Module):
    """A joint between frame ``frame_i`` on ``body_i`` and ``frame_j`` on ``body_j``.

    Subclasses set ``n_equations`` (the length of Φ) and ``coordinate_kinds`` (one entry,
    ``"angle"`` or ``"length"``, per joint coordinate) and implement :meth:`constraint` (and
    :meth:`coordinates` when they have coordinates). Both act on one joint; the model ``vmap``s
    them over all joints of a type.
    """

    body_i: str = eqx.field(static=True)
    frame_i: Frame = eqx.field(converter=as_frame)
    body_j: str = eqx.field(static=True)
    frame_j: Frame = eqx.field(converter=as_frame)

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")
    n_equations: ClassVar[int]
    coordinate_kinds: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def constraint(self, t: Array, ki: BodyKinematics, kj: BodyKinematics) -> Array:
        """Φ of this joint, shape ``(n_equations,)``, given the kinematics of its two bodies."""

    def coordinates(self, ki: BodyKinematics, kj: BodyKinematics) -> Array:
        """Joint coordinates, shape ``(len(coordinate_kinds),)`` (rad or m)."""
        del ki, kj
        return jnp.zeros((0,))

    # Joint-coordinate (tree) form, used by :class:`~diffmbs.multibody.JointCoordinateModel`.
    motion_sizes: ClassVar[tuple[int, int] | None] = None
    """``(n_q, n_v)`` of the joint's own coordinates and velocities when it is a tree joint of a
    joint-coordinate model; ``None``: the joint is always kept as a constraint (a loop)."""

    def motion(self, coordinates: Array) -> tuple[Array, Array]:
        """Pose of frame j relative to frame i at the joint coordinates (shape ``(n_q,)``):
        rotation (3, 3) and origin (3,) in frame-i axes, satisfying Φ = 0 for every value."""
        raise NotImplementedError(f"{type(self).__name__} has no joint-coordinate form")

    def motion_coordinates(self, rotation: Array, translation: Array) -> Array:
        """The inverse of :meth:`motion`: coordinates (n_q,) of a relative pose with Φ = 0."""
        raise NotImplementedError(f"{type(self).__name__} has no joint-coordinate form")

    def motion_qdot(self, coordinates: Array, velocity: Array) -> Array:
        """Coordinate rates from the joint velocities (n_v,); the identity unless overridden."""
        del coordinates
        return velocity

    def world_frames(self, ki: BodyKinematics, kj: BodyKinematics):
        """``(o_i, X_i, o_j, X_j)``: world origins (3,) and axes (3, 3) of the two joint frames."""
        return (*ki.frame(self.frame_i), *kj.frame(self.frame_j))


# --------------------------------------------------------------------------- building blocks


def _parallel_axes(xi: Array, xj: Array) -> Array:
    """z_j ∥ z_i: ``(z_i·x_j, z_i·y_j)``."""
    return dot(xi[:, 2:3].T, xj[:, :2].T)


def _angle(xi: Array, xj: Array) -> Array:
    """Angle of ``x_j`` about ``z_i`` from ``x_i`` (rad, (−π, π])."""
    return jnp.arctan2(dot(xj[:, 0], xi[:, 1]), dot(xj[:, 0], xi[:, 0]))


def _no_twist(xi: Array, xj: Array) -> Array:
    return dot(xi[:, 0], xj[:, 1])[None]


def _in_plane(xi: Array, d: Array) -> Array:
    """``(x_i·d, y_i·d)``."""
    return dot(xi[:, :2].T, d)


def _along(xi: Array, d: Array) -> Array:
    """``z_i·d``."""
    return dot(xi[:, 2], d)


@jax.custom_jvp
def _cos_sin(angle: Array) -> Array:
    """``(cos, sin)`` of ``angle`` stacked on a leading axis, computed once: the optimisation
    barrier keeps XLA from fusing (and so recomputing) the transcendentals into every
    consumer (the rotation, its unit twists and their rates each did; a batched 10-link
    right-hand side in joint coordinates went from 6.8 to 6.0 µs per variant). The derivative
    reuses the same values, so derivatives of any order add no sine either."""
    return jax.lax.optimization_barrier(jnp.stack([jnp.cos(angle), jnp.sin(angle)]))


@_cos_sin.defjvp
def _cos_sin_jvp(primals, tangents):
    cs = _cos_sin(primals[0])
    return cs, jnp.stack([-cs[1], cs[0]]) * tangents[0]


def _elementary_rotation(axis: int, angle: Array) -> Array:
    """Rotation by ``angle`` (rad) about coordinate axis ``axis`` (0, 1, 2), shape (3, 3)."""
    c, s = _cos_sin(angle)
    one, zero = jnp.ones_like(c), jnp.zeros_like(c)
    rows = (
        ((one, zero, zero), (zero, c, -s), (zero, s, c)),
        ((c, zero, s), (zero, one, zero), (-s, zero, c)),
        ((c, -s, zero), (s, c, zero), (zero, zero, one)),
    )[axis]
    return jnp.stack([jnp.stack(row) for row in rows])


def _planar_angle(rotation: Array) -> Array:
    """Angle about z of a relative rotation that keeps z (rad, (−π, π])."""
    return jnp.arctan2(rotation[1, 0], rotation[0, 0])


def _no_rotation(dtype) -> Array:
    return jnp.eye(3, dtype=dtype)


def _axial(s: Array) -> Array:
    return jnp.stack([jnp.zeros_like(s), jnp.zeros_like(s), s])


# --------------------------------------------------------------------------- joints


class Spherical(AbstractJoint):
    """Ball joint: the two frame origins coincide (3 rotational DOF)."""

    n_equations: ClassVar[int] = 3
    motion_sizes: ClassVar[tuple[int, int]] = (4, 3)  # quaternion; ω in frame-j axes

    def motion(self, coordinates):
        return quat_to_matrix(coordinates), jnp.zeros(3, dtype=coordinates.dtype)

    def motion_coordinates(self, rotation, translation):
        return matrix_to_quat(rotation)

    def motion_qdot(self, coordinates, velocity):
        return quat_derivative(coordinates, velocity)

    def constraint(self, t, ki, kj):
        oi, _, oj, _ = self.world_frames(ki, kj)
        return oj - oi


class Revolute(AbstractJoint):
    """Hinge about the common z axis of the two frames (1 DOF, coordinate: angle)."""

    n_equations: ClassVar[int] = 5
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("angle",)
    motion_sizes: ClassVar[tuple[int, int]] = (1, 1)

    def motion(self, coordinates):
        angle = coordinates[0]
        return _elementary_rotation(2, angle), jnp.zeros(3, dtype=coordinates.dtype)

    def motion_coordinates(self, rotation, translation):
        return _planar_angle(rotation)[None]

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        return jnp.concatenate([oj - oi, _parallel_axes(xi, xj)])

    def coordinates(self, ki, kj):
        _, xi, _, xj = self.world_frames(ki, kj)
        return _angle(xi, xj)[None]


class Universal(AbstractJoint):
    """Cardan joint: origins coincide; the cross's arms are ``x_i`` (on body i) and ``y_j``
    (on body j), kept perpendicular (2 DOF). With coincident frames the joint is assembled."""

    n_equations: ClassVar[int] = 4
    motion_sizes: ClassVar[tuple[int, int]] = (2, 2)  # about x_i, then about y_j

    def motion(self, coordinates):
        rot = _elementary_rotation(0, coordinates[0]) @ _elementary_rotation(1, coordinates[1])
        return rot, jnp.zeros(3, dtype=coordinates.dtype)

    def motion_coordinates(self, rotation, translation):
        return jnp.stack(
            [
                jnp.arctan2(rotation[2, 1], rotation[1, 1]),
                jnp.arctan2(rotation[0, 2], rotation[0, 0]),
            ]
        )

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        return jnp.concatenate([oj - oi, _no_twist(xi, xj)])


class Cylindrical(AbstractJoint):
    """Sliding hinge along and about the common z axis (2 DOF: displacement, angle)."""

    n_equations: ClassVar[int] = 4
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("length", "angle")
    motion_sizes: ClassVar[tuple[int, int]] = (2, 2)

    def motion(self, coordinates):
        return _elementary_rotation(2, coordinates[1]), _axial(coordinates[0])

    def motion_coordinates(self, rotation, translation):
        return jnp.stack([translation[2], _planar_angle(rotation)])

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        d = oj - oi
        return jnp.concatenate([_parallel_axes(xi, xj), _in_plane(xi, d)])

    def coordinates(self, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        return jnp.stack([_along(xi, oj - oi), _angle(xi, xj)])


class Prismatic(AbstractJoint):
    """Slider along the common z axis, no relative rotation (1 DOF: displacement z_i·d)."""

    n_equations: ClassVar[int] = 5
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("length",)
    motion_sizes: ClassVar[tuple[int, int]] = (1, 1)

    def motion(self, coordinates):
        return _no_rotation(coordinates.dtype), _axial(coordinates[0])

    def motion_coordinates(self, rotation, translation):
        return translation[2:]

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        d = oj - oi
        return jnp.concatenate([_parallel_axes(xi, xj), _in_plane(xi, d), _no_twist(xi, xj)])

    def coordinates(self, ki, kj):
        oi, xi, oj, _ = self.world_frames(ki, kj)
        return _along(xi, oj - oi)[None]


class Planar(AbstractJoint):
    """Frame j slides and turns in the x–y plane of frame i (3 DOF: x, y, angle about z_i)."""

    n_equations: ClassVar[int] = 3
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("length", "length", "angle")
    motion_sizes: ClassVar[tuple[int, int]] = (3, 3)

    def motion(self, coordinates):
        x, y, angle = coordinates
        return _elementary_rotation(2, angle), jnp.stack([x, y, jnp.zeros_like(x)])

    def motion_coordinates(self, rotation, translation):
        return jnp.stack([translation[0], translation[1], _planar_angle(rotation)])

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        return jnp.concatenate([_along(xi, oj - oi)[None], _parallel_axes(xi, xj)])

    def coordinates(self, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        return jnp.concatenate([_in_plane(xi, oj - oi), _angle(xi, xj)[None]])


class InPlane(AbstractJoint):
    """Frame j's origin stays in the x–y plane of frame i (one equation, 5 DOF): an axial
    stop, e.g. for a journal whose radial motion a clearance joint governs."""

    n_equations: ClassVar[int] = 1
    coordinate_kinds: ClassVar[tuple[str, ...]] = ()

    def constraint(self, t, ki, kj):
        oi, xi, oj, _ = self.world_frames(ki, kj)
        return _along(xi, oj - oi)[None]


class Fixed(AbstractJoint):
    """Weld: the two frames coincide (0 DOF)."""

    n_equations: ClassVar[int] = 6
    motion_sizes: ClassVar[tuple[int, int]] = (0, 0)

    def motion(self, coordinates):
        return _no_rotation(coordinates.dtype), jnp.zeros(3, dtype=coordinates.dtype)

    def motion_coordinates(self, rotation, translation):
        return jnp.zeros((0,), dtype=rotation.dtype)

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        return jnp.concatenate([oj - oi, _parallel_axes(xi, xj), _no_twist(xi, xj)])


class Distance(AbstractJoint):
    """Massless rod: the frame origins stay ``length`` (m, > 0, a parameter) apart (5 DOF).

    Written ``(d·d − L²)/(2L)`` (metres; smooth also where ``d = 0``)."""

    length: Array = eqx.field(converter=as_float_array)

    n_equations: ClassVar[int] = 1
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("length",)

    def constraint(self, t, ki, kj):
        oi, _, oj, _ = self.world_frames(ki, kj)
        d = oj - oi
        return ((dot(d, d) - self.length**2) / (2 * self.length))[None]

    def coordinates(self, ki, kj):
        oi, _, oj, _ = self.world_frames(ki, kj)
        return safe_norm(oj - oi)[None]


# --------------------------------------------------------------------------- prescribed motion


class ConstantRate(eqx.Module):
    """Motion law ``start + rate · t`` (rad or m; rate in rad/s or m/s); parameters."""

    start: Array = eqx.field(converter=as_float_array)
    rate: Array = eqx.field(converter=as_float_array)

    def __call__(self, t: ArrayLike) -> Array:
        return self.start + self.rate * t


class Harmonic(eqx.Module):
    """Motion law ``offset + amplitude · sin(2π frequency · t + phase)``; parameters.

    ``frequency`` in Hz, ``phase`` in rad; ``amplitude`` and ``offset`` in rad or m."""

    amplitude: Array = eqx.field(converter=as_float_array)
    frequency: Array = eqx.field(converter=as_float_array)
    phase: Array = eqx.field(default=0.0, converter=as_float_array)
    offset: Array = eqx.field(default=0.0, converter=as_float_array)

    def __call__(self, t: ArrayLike) -> Array:
        return self.offset + self.amplitude * jnp.sin(2 * jnp.pi * self.frequency * t + self.phase)


class PrescribedRevolute(AbstractJoint):
    """Revolute joint whose angle follows ``motion(t)`` (rad; 0 DOF).

    ``motion``: a twice-differentiable function of time — :class:`ConstantRate`,
    :class:`Harmonic`, any ``eqx.Module`` (whose float leaves are then parameters) or a plain
    function. The drive equation is ``x_j · (−sin θ(t) x_i + cos θ(t) y_i) = sin(θ − θ(t))``,
    smooth for any number of turns (no angle wrapping). Its multiplier is the drive torque.
    """

    motion: Callable[[Array], Array]

    n_equations: ClassVar[int] = 6
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("angle",)

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        angle = self.motion(t)
        drive = dot(xj[:, 0], -jnp.sin(angle) * xi[:, 0] + jnp.cos(angle) * xi[:, 1])
        return jnp.concatenate([oj - oi, _parallel_axes(xi, xj), drive[None]])

    def coordinates(self, ki, kj):
        _, xi, _, xj = self.world_frames(ki, kj)
        return _angle(xi, xj)[None]


class PrescribedPrismatic(AbstractJoint):
    """Prismatic joint whose displacement ``z_i·d`` follows ``motion(t)`` (m; 0 DOF).

    ``motion`` as for :class:`PrescribedRevolute`; its multiplier is the drive force."""

    motion: Callable[[Array], Array]

    n_equations: ClassVar[int] = 6
    coordinate_kinds: ClassVar[tuple[str, ...]] = ("length",)

    def constraint(self, t, ki, kj):
        oi, xi, oj, xj = self.world_frames(ki, kj)
        d = oj - oi
        drive = _along(xi, d) - self.motion(t)
        return jnp.concatenate(
            [_parallel_axes(xi, xj), _in_plane(xi, d), _no_twist(xi, xj), drive[None]]
        )

    def coordinates(self, ki, kj):
        oi, xi, oj, _ = self.world_frames(ki, kj)
        return _along(xi, oj - oi)[None]
