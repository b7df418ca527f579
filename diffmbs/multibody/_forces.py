"""Force elements: pure functions of the state giving forces and torques on the bodies.

Every element is an ``equinox.Module`` whose float fields are parameters; the body names it
attaches to are static fields listed in ``attachments``. :meth:`AbstractForceElement.wrench`
acts on one element, given the :class:`~diffmbs.multibody.BodyKinematics` of its bodies (in
``attachments`` order), and returns one :class:`Wrench` row per attached body; the model stacks
elements of one type and ``vmap``s it. Gravity is a model-level field, not an element.

Sign conventions: a point-to-point *tension* ``T > 0`` pulls the two points together; a
rotational spring's torque acts on body j about ``z_i`` (and its opposite on body i).
Contact elements live in :mod:`diffmbs.multibody._contact`.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs._linalg import matvec, tmatvec
from diffmbs.contact import AbstractHuntCrossley
from diffmbs.multibody._bodies import (
    BodyKinematics,
    Frame,
    as_float_array,
    as_frame,
    as_vector3,
    dot,
)
from diffmbs.multibody._joints import AbstractJoint
from diffmbs.rotations import safe_norm, unskew

__all__ = [
    "AbstractForceElement",
    "AppliedForce",
    "AppliedTorque",
    "Bushing",
    "LengthStops",
    "NonlinearSpringDamper",
    "RotationalSpringDamper",
    "SpringDamper",
    "Wrench",
]


class Wrench(eqx.Module):
    """Loads on the attached bodies, one row per body, world axes.

    ``force`` (k, 3) N applied at ``point`` (k, 3) m, plus a couple ``torque`` (k, 3) N·m."""

    force: Array
    point: Array
    torque: Array


def pair_wrench(force_on_j: Array, point: Array, torque_on_j: Array) -> Wrench:
    """Equal and opposite loads on bodies i and j, both applied at ``point`` (rows i, j)."""
    return Wrench(
        force=jnp.stack([-force_on_j, force_on_j]),
        point=jnp.stack([point, point]),
        torque=jnp.stack([-torque_on_j, torque_on_j]),
    )


class AbstractForceElement(eqx.Module):
    """A force element attached to the bodies named by the fields in ``attachments``.

    Implement :meth:`wrench` and :meth:`output`; override :meth:`potential_energy` for
    conservative parts and :meth:`resolve` when the element refers to other model items. An
    element with internal states (a friction bristle) returns their number from
    :attr:`state_size` and implements :meth:`loads`; its :meth:`wrench` is the load at the
    states of a fresh element (zeros).
    """

    attachments: ClassVar[tuple[str, ...]]

    @property
    def state_size(self) -> int:
        """Number of internal states (static; default 0)."""
        return 0

    def loads(self, t: Array, state: Array, *kinematics: BodyKinematics) -> tuple[Wrench, Array]:
        """``(wrench, ṡ)``: the loads at the internal states ``state`` ``(state_size,)`` and
        their rate ``(state_size,)``; default: :meth:`wrench` and no states."""
        del state
        return self.wrench(t, *kinematics), jnp.zeros((0,), dtype=kinematics[0].position.dtype)

    @abc.abstractmethod
    def wrench(self, t: Array, *kinematics: BodyKinematics) -> Wrench:
        """Loads on the attached bodies, rows in ``attachments`` order."""

    @abc.abstractmethod
    def output(self, t: Array, *kinematics: BodyKinematics) -> Array:
        """The element's characteristic force for sensors (a tension, a contact force …)."""

    def output_at(self, t: Array, state: Array, *kinematics: BodyKinematics) -> Array:
        """:meth:`output` at the internal states ``state`` ``(state_size,)`` (default: the
        output does not depend on them)."""
        del state
        return self.output(t, *kinematics)

    def potential_energy(self, t: Array, *kinematics: BodyKinematics) -> Array:
        """Stored elastic energy (J); zero unless the element defines one."""
        del t, kinematics
        return jnp.zeros(())

    def resolve(self, joints: Mapping[str, AbstractJoint]) -> AbstractForceElement:
        """This element with references to other model items filled in (default: itself)."""
        del joints
        return self


# --------------------------------------------------------------------------- point to point


def _optional_float(x):
    return None if x is None else as_float_array(x)


class LengthStops(AbstractHuntCrossley):
    """Hunt–Crossley end stops on a point-to-point element's length (optional ``lower``/``upper``,
    m), with the shared contact parameters of :class:`diffmbs.contact.AbstractHuntCrossley`
    (keyword-only: ``stiffness`` K (N/mⁿ), ``damping`` χ (s/m); static ``exponent``,
    ``smoothing``)."""

    lower: Array | None = eqx.field(converter=_optional_float, metadata={"units": "m"})
    upper: Array | None = eqx.field(converter=_optional_float, metadata={"units": "m"})

    def __check_init__(self):
        if self.lower is None and self.upper is None:
            raise ValueError("LengthStops needs a lower or an upper stop")

    def tension(self, length: Array, rate: Array) -> Array:
        """Stop tension (N): pulls in beyond ``upper``, pushes apart below ``lower``."""
        out = jnp.zeros_like(length)
        if self.upper is not None:
            out = out + self.contact_force(length - self.upper, rate)
        if self.lower is not None:
            out = out - self.contact_force(self.lower - length, -rate)
        return out

    def energy(self, length: Array) -> Array:
        out = jnp.zeros_like(length)
        for gap in (
            None if self.upper is None else length - self.upper,
            None if self.lower is None else self.lower - length,
        ):
            if gap is not None:
                out = out + self.contact_energy(gap)
        return out


def _length_and_rate(element, ki: BodyKinematics, kj: BodyKinematics):
    """Length L (m), rate L̇ (m/s), unit direction u from i to j and the point on i."""
    p_i, p_j = ki.point(element.point_i), kj.point(element.point_j)
    d = p_j - p_i
    length = safe_norm(d)
    nonzero = length > 0
    u = jnp.where(nonzero, d / jnp.where(nonzero, length, 1.0), 0.0)
    rate = dot(u, kj.point_velocity(element.point_j) - ki.point_velocity(element.point_i))
    return length, rate, u, p_i, p_j


def _point_to_point_wrench(tension: Array, u: Array, p_i: Array, p_j: Array) -> Wrench:
    zero = jnp.zeros(3, dtype=u.dtype)
    return Wrench(
        force=jnp.stack([tension * u, -tension * u]),
        point=jnp.stack([p_i, p_j]),
        torque=jnp.stack([zero, zero]),
    )


class SpringDamper(AbstractForceElement):
    """Linear spring–damper–actuator between ``point_i`` on ``body_i`` and ``point_j`` on
    ``body_j`` (points in the body frames, m).

    Tension ``T = k (L − L₀) + c L̇ + F_a`` plus optional :class:`LengthStops`: ``stiffness`` k
    (N/m), ``damping`` c (N·s/m), ``free_length`` L₀ (m), ``actuator_force`` F_a (N, tension
    positive). Output: T (N). Potential energy: ``½ k (L − L₀)²`` plus the stops' elastic energy.
    """

    body_i: str = eqx.field(static=True)
    point_i: Array = eqx.field(converter=as_vector3)
    body_j: str = eqx.field(static=True)
    point_j: Array = eqx.field(converter=as_vector3)
    stiffness: Array = eqx.field(converter=as_float_array, metadata={"units": "N/m"})
    free_length: Array = eqx.field(converter=as_float_array, metadata={"units": "m"})
    damping: Array = eqx.field(default=0.0, converter=as_float_array, metadata={"units": "N s/m"})
    actuator_force: Array = eqx.field(default=0.0, converter=as_float_array,
                                      metadata={"units": "N"})  # fmt: skip
    stops: LengthStops | None = None

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def _tension(self, length, rate):
        out = (
            self.stiffness * (length - self.free_length) + self.damping * rate + self.actuator_force
        )
        return out if self.stops is None else out + self.stops.tension(length, rate)

    def wrench(self, t, ki, kj):
        length, rate, u, p_i, p_j = _length_and_rate(self, ki, kj)
        return _point_to_point_wrench(self._tension(length, rate), u, p_i, p_j)

    def output(self, t, ki, kj):
        length, rate, *_ = _length_and_rate(self, ki, kj)
        return self._tension(length, rate)

    def potential_energy(self, t, ki, kj):
        length, *_ = _length_and_rate(self, ki, kj)
        energy = 0.5 * self.stiffness * (length - self.free_length) ** 2
        return energy if self.stops is None else energy + self.stops.energy(length)


class NonlinearSpringDamper(AbstractForceElement):
    """Point-to-point element with tension ``T = law(L, L̇)`` (N; L in m, L̇ in m/s), plus
    optional :class:`LengthStops`. ``law`` is any differentiable function; an ``eqx.Module``
    law's float leaves are parameters. Output: T (N). No potential energy is reported."""

    body_i: str = eqx.field(static=True)
    point_i: Array = eqx.field(converter=as_vector3)
    body_j: str = eqx.field(static=True)
    point_j: Array = eqx.field(converter=as_vector3)
    law: Callable[[Array, Array], Array]
    stops: LengthStops | None = None

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def _tension(self, length, rate):
        out = self.law(length, rate)
        return out if self.stops is None else out + self.stops.tension(length, rate)

    def wrench(self, t, ki, kj):
        length, rate, u, p_i, p_j = _length_and_rate(self, ki, kj)
        return _point_to_point_wrench(self._tension(length, rate), u, p_i, p_j)

    def output(self, t, ki, kj):
        length, rate, *_ = _length_and_rate(self, ki, kj)
        return self._tension(length, rate)


# --------------------------------------------------------------------------- rotational


class RotationalSpringDamper(AbstractForceElement):
    """Torsional spring–damper–actuator on the angle θ of the revolute ``joint`` (by name).

    Torque on body j about the joint axis ``z_i`` (and its opposite on body i):
    ``τ = −k (θ − θ₀) − c θ̇ + τ_a``; ``stiffness`` k (N·m/rad), ``damping`` c (N·m·s/rad),
    ``reference_angle`` θ₀ (rad), ``actuator_torque`` τ_a (N·m). θ is the joint angle in
    (−π, π] (so the spring is meant for rotations below half a turn). Output: τ (N·m).
    The joint's bodies and frames are copied in when the model is built (:meth:`resolve`).
    """

    joint: str = eqx.field(static=True)
    stiffness: Array = eqx.field(converter=as_float_array, metadata={"units": "N m/rad"})
    damping: Array = eqx.field(default=0.0, converter=as_float_array,
                               metadata={"units": "N m s/rad"})  # fmt: skip
    reference_angle: Array = eqx.field(default=0.0, converter=as_float_array,
                                       metadata={"units": "rad"})  # fmt: skip
    actuator_torque: Array = eqx.field(default=0.0, converter=as_float_array,
                                       metadata={"units": "N m"})  # fmt: skip
    body_i: str = eqx.field(static=True, default="")
    frame_i: Frame | None = None
    body_j: str = eqx.field(static=True, default="")
    frame_j: Frame | None = None

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def resolve(self, joints):
        if self.joint not in joints:
            raise ValueError(f"unknown joint {self.joint!r} (known: {', '.join(joints)})")
        joint = joints[self.joint]
        if joint.coordinate_kinds != ("angle",):
            raise ValueError(
                f"joint {self.joint!r} is a {type(joint).__name__}, not a revolute joint"
            )
        return dataclasses.replace(
            self,
            body_i=joint.body_i,
            frame_i=joint.frame_i,
            body_j=joint.body_j,
            frame_j=joint.frame_j,
        )

    def _angle_rate_axis(self, ki, kj):
        oj, xj = kj.frame(self.frame_j)
        _, xi = ki.frame(self.frame_i)
        axis = xi[:, 2]
        angle = jnp.arctan2(dot(xj[:, 0], xi[:, 1]), dot(xj[:, 0], xi[:, 0]))
        rate = dot(axis, kj.angular_velocity - ki.angular_velocity)
        return angle, rate, axis, oj

    def output(self, t, ki, kj):
        angle, rate, _, _ = self._angle_rate_axis(ki, kj)
        return (
            -self.stiffness * (angle - self.reference_angle)
            - self.damping * rate
            + self.actuator_torque
        )

    def wrench(self, t, ki, kj):
        _, _, axis, oj = self._angle_rate_axis(ki, kj)
        return pair_wrench(jnp.zeros(3, dtype=axis.dtype), oj, self.output(t, ki, kj) * axis)

    def potential_energy(self, t, ki, kj):
        angle, *_ = self._angle_rate_axis(ki, kj)
        return 0.5 * self.stiffness * (angle - self.reference_angle) ** 2


# --------------------------------------------------------------------------- bushing


class Bushing(AbstractForceElement):
    """Six-component linear bushing between ``frame_i`` on ``body_i`` and ``frame_j`` on
    ``body_j``, in the axes of frame i.

    With ``d = X_iᵀ (o_j − o_i)`` (m), the small-angle rotation vector
    ``φ = vee(½(R − Rᵀ))`` of ``R = X_iᵀ X_j`` (rad; ``sin θ · axis``, exact to second order) and
    the relative angular velocity ``ω_r = X_iᵀ (ω_j − ω_i)``, the load on body j, applied at
    ``o_j``, is ``F = −K d − C ḋ`` and ``τ = −K_r φ − C_r ω_r`` (frame-i components; the opposite
    load acts on body i at the same point). ``stiffness`` K (3,) N/m, ``damping`` C (3,) N·s/m,
    ``rotational_stiffness`` K_r (3,) N·m/rad, ``rotational_damping`` C_r (3,) N·m·s/rad.
    Output: (F, τ) in frame-i axes, shape (6,). Energy: ``½ dᵀKd + ½ φᵀK_rφ``.
    """

    body_i: str = eqx.field(static=True)
    frame_i: Frame = eqx.field(converter=as_frame)
    body_j: str = eqx.field(static=True)
    frame_j: Frame = eqx.field(converter=as_frame)
    stiffness: Array = eqx.field(converter=as_vector3, metadata={"units": "N/m"})
    rotational_stiffness: Array = eqx.field(converter=as_vector3, metadata={"units": "N m/rad"})
    damping: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3,
                               metadata={"units": "N s/m"})  # fmt: skip
    rotational_damping: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3,
                                          metadata={"units": "N m s/rad"})  # fmt: skip

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def _deflections(self, ki, kj):
        o_i, x_i = ki.frame(self.frame_i)
        o_j, x_j = kj.frame(self.frame_j)
        gap = o_j - o_i
        d = tmatvec(x_i, gap)
        gap_rate = kj.point_velocity(self.frame_j.point) - ki.point_velocity(self.frame_i.point)
        d_rate = tmatvec(x_i, gap_rate - jnp.cross(ki.angular_velocity, gap))
        phi = unskew(jnp.sum(x_i[:, :, None] * x_j[:, None, :], axis=0))  # X_iᵀ X_j
        omega_rel = tmatvec(x_i, kj.angular_velocity - ki.angular_velocity)
        return d, d_rate, phi, omega_rel, o_j, x_i

    def output(self, t, ki, kj):
        d, d_rate, phi, omega_rel, _, _ = self._deflections(ki, kj)
        force = -self.stiffness * d - self.damping * d_rate
        torque = -self.rotational_stiffness * phi - self.rotational_damping * omega_rel
        return jnp.concatenate([force, torque])

    def wrench(self, t, ki, kj):
        *_, o_j, x_i = self._deflections(ki, kj)
        load = self.output(t, ki, kj)
        return pair_wrench(matvec(x_i, load[:3]), o_j, matvec(x_i, load[3:]))

    def potential_energy(self, t, ki, kj):
        d, _, phi, *_ = self._deflections(ki, kj)
        return 0.5 * (dot(d, self.stiffness * d) + dot(phi, self.rotational_stiffness * phi))


# --------------------------------------------------------------------------- applied loads


def _check_axes(axes: str) -> None:
    if axes not in ("world", "body"):
        raise ValueError(f"axes must be 'world' or 'body', got {axes!r}")


def _axes(kinematics: BodyKinematics, vector: Array, axes: str) -> Array:
    return matvec(kinematics.rotation, vector) if axes == "body" else vector


class AppliedForce(AbstractForceElement):
    """Force ``force(t, kinematics)`` (N, a function of time and the body's
    :class:`BodyKinematics`) at body-frame ``point`` (m) of ``body``, in ``axes`` ``"world"`` or
    ``"body"``. An ``eqx.Module`` function's float leaves are parameters. Output: the force,
    world axes (3,)."""

    body: str = eqx.field(static=True)
    point: Array = eqx.field(converter=as_vector3)
    force: Callable[[Array, BodyKinematics], Array]
    axes: str = eqx.field(static=True, default="world")

    attachments: ClassVar[tuple[str, ...]] = ("body",)

    def __check_init__(self):
        _check_axes(self.axes)

    def output(self, t, k):
        return _axes(k, jnp.asarray(self.force(t, k)), self.axes)

    def wrench(self, t, k):
        force = self.output(t, k)
        return Wrench(force[None], k.point(self.point)[None], jnp.zeros_like(force)[None])


class AppliedTorque(AbstractForceElement):
    """Couple ``torque(t, kinematics)`` (N·m) on ``body``, in ``axes`` ``"world"`` or ``"body"``.
    Output: the torque, world axes (3,)."""

    body: str = eqx.field(static=True)
    torque: Callable[[Array, BodyKinematics], Array]
    axes: str = eqx.field(static=True, default="world")

    attachments: ClassVar[tuple[str, ...]] = ("body",)

    def __check_init__(self):
        _check_axes(self.axes)

    def output(self, t, k):
        return _axes(k, jnp.asarray(self.torque(t, k)), self.axes)

    def wrench(self, t, k):
        torque = self.output(t, k)
        return Wrench(jnp.zeros_like(torque)[None], k.position[None], torque[None])
