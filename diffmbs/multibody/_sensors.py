"""Sensors: named outputs of a multibody model at one state (``MultibodyModel.sensors``).

A sensor is a small ``equinox.Module`` declared by name when the model is built
(``builder.add_sensor("tip_acc", PointAcceleration("arm", (1.0, 0, 0)))``); it refers to bodies,
joints and force elements by name and returns an array at one state, which
:func:`diffmbs.integrate.simulate` stacks over the saved times. Units are SI; "world" axes are
the ground's, "body" axes the body frame's.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs.multibody._bodies import BodyKinematics, as_vector3
from diffmbs.rotations import quat_normalize

if TYPE_CHECKING:  # annotations only; the model is always the calling MultibodyModel
    from diffmbs.system import MechanicalSystem

__all__ = [
    "AbstractSensor",
    "BodyAngularVelocity",
    "BodyOrientation",
    "ElementForce",
    "JointCoordinates",
    "JointReaction",
    "KineticEnergy",
    "MechanicalEnergy",
    "ModalStress",
    "PointAcceleration",
    "PointPosition",
    "PointVelocity",
    "PotentialEnergy",
    "SensorInput",
]


class SensorInput(eqx.Module):
    """One state as sensors see it: time ``t`` (s), ``q`` (7n,), ``v`` (6n,), accelerations
    ``vdot`` (6n,), the stacked :class:`BodyKinematics` (n+1 rows, ground last) and the
    constraint ``multipliers`` (n_c,) — the latter only when some sensor needs them."""

    t: Array
    q: Array
    v: Array
    vdot: Array
    kinematics: BodyKinematics
    multipliers: Array | None


class AbstractSensor(eqx.Module):
    """A named model output. Implement :meth:`__call__` and :meth:`references`."""

    needs_multipliers: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, model: MechanicalSystem, data: SensorInput) -> Array:
        """The output at one state."""

    @abc.abstractmethod
    def references(self) -> tuple[tuple[str, str], ...]:
        """``(kind, name)`` pairs this sensor reads, kind ∈ {"body", "joint", "force"}."""


def _validate_axes(axes: str, allowed=("world", "body")) -> None:
    if axes not in allowed:
        raise ValueError(f"axes must be one of {allowed}, got {axes!r}")


def _body(model: MechanicalSystem, data: SensorInput, name: str) -> tuple[int, BodyKinematics]:
    index = model.body_index(name)
    return index, jax.tree.map(lambda x: x[index], data.kinematics)


def _in_axes(k: BodyKinematics, vector: Array, axes: str) -> Array:
    return k.rotation.T @ vector if axes == "body" else vector


class PointPosition(AbstractSensor):
    """World position (m, (3,)) of body-frame ``point`` (m) of ``body``."""

    body: str = eqx.field(static=True)
    point: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)

    def __call__(self, model, data):
        return _body(model, data, self.body)[1].point(self.point)

    def references(self):
        return (("body", self.body),)


class PointVelocity(AbstractSensor):
    """Velocity (m/s, (3,)) of the material point at body-frame ``point`` of ``body``, in
    ``axes`` ``"world"`` or ``"body"``."""

    body: str = eqx.field(static=True)
    point: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    axes: str = eqx.field(static=True, default="world")

    def __check_init__(self):
        _validate_axes(self.axes)

    def __call__(self, model, data):
        k = _body(model, data, self.body)[1]
        return _in_axes(k, k.point_velocity(self.point), self.axes)

    def references(self):
        return (("body", self.body),)


class PointAcceleration(AbstractSensor):
    """Acceleration (m/s², (3,)) of the material point at body-frame ``point`` of ``body``:
    ``a_G + α × ρ + ω × (ω × ρ)`` from the equations of motion, in ``axes``.

    ``include_gravity=True`` gives an accelerometer's reading, the specific force ``a − g``
    (at rest on the ground it reads +9.81 m/s² upwards); ``False`` the kinematic acceleration.
    """

    body: str = eqx.field(static=True)
    point: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    axes: str = eqx.field(static=True, default="world")
    include_gravity: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        _validate_axes(self.axes)

    def __call__(self, model, data):
        index, k = _body(model, data, self.body)
        if model.modal_bodies:  # rows of modal bodies and nodes: accelerations from the model
            acc, alpha = model.row_accelerations(data.q, data.v, data.vdot)
            acc, alpha = acc[index], alpha[index]
        else:
            accel = data.vdot.reshape(-1, 6)[index]
            acc, alpha = accel[:3], k.rotation @ accel[3:]
        arm = k.arm(self.point)
        omega = k.angular_velocity
        a = acc + jnp.cross(alpha, arm) + jnp.cross(omega, jnp.cross(omega, arm))
        if self.include_gravity:
            a = a - model.gravity
        return _in_axes(k, a, self.axes)

    def references(self):
        return (("body", self.body),)


class BodyOrientation(AbstractSensor):
    """Orientation of ``body``: the unit quaternion (w, x, y, z) (``"quaternion"``, (4,)) or the
    rotation matrix body → world (``"matrix"``, (3, 3))."""

    body: str = eqx.field(static=True)
    representation: str = eqx.field(static=True, default="quaternion")

    def __check_init__(self):
        if self.representation not in ("quaternion", "matrix"):
            got = self.representation
            raise ValueError(f"representation must be 'quaternion' or 'matrix', got {got!r}")

    def __call__(self, model, data):
        index, k = _body(model, data, self.body)
        if self.representation == "matrix":
            return k.rotation
        if index > model.n_bodies:  # a modal body's reference frame (a node: use "matrix")
            if self.body not in model.modal_names:
                raise ValueError(f"{self.body!r} is a node: use representation='matrix'")
            return quat_normalize(data.q[model.q_slice(self.body)][3:7])
        return quat_normalize(data.q[: 7 * model.n_bodies].reshape(-1, 7)[index, 3:])

    def references(self):
        return (("body", self.body),)


class BodyAngularVelocity(AbstractSensor):
    """Angular velocity (rad/s, (3,)) of ``body`` in ``axes`` ``"body"`` (ω̄) or ``"world"``."""

    body: str = eqx.field(static=True)
    axes: str = eqx.field(static=True, default="body")

    def __check_init__(self):
        _validate_axes(self.axes)

    def __call__(self, model, data):
        k = _body(model, data, self.body)[1]
        return _in_axes(k, k.angular_velocity, self.axes)

    def references(self):
        return (("body", self.body),)


class JointCoordinates(AbstractSensor):
    """The coordinates of ``joint`` (rad or m; see :mod:`diffmbs.multibody._joints`), or their
    rates with ``derivative=1`` (rad/s or m/s); shape ``(n_coordinates,)``."""

    joint: str = eqx.field(static=True)
    derivative: int = eqx.field(static=True, default=0)

    def __check_init__(self):
        if self.derivative not in (0, 1):
            raise ValueError(f"derivative must be 0 or 1, got {self.derivative!r}")

    def __call__(self, model, data):
        if self.derivative == 0:
            return model.joint_coordinates(self.joint, data.q)
        return jax.jvp(
            lambda q_: model.joint_coordinates(self.joint, q_),
            (data.q,),
            (model.qdot(data.q, data.v),),
        )[1]

    def references(self):
        return (("joint", self.joint),)


class JointReaction(AbstractSensor):
    """The load body i exerts on body j through ``joint``: force (N) and moment (N·m) about the
    origin of joint frame j, in frame-j axes, shape (6,) = (F, τ).

    From the multipliers, ``−Φ_vᵀ λ`` restricted to the joint's rows. With redundant
    constraints the split between joints is the minimum-norm one (not unique physically)."""

    joint: str = eqx.field(static=True)

    needs_multipliers: ClassVar[bool] = True

    def __call__(self, model, data):
        return model.joint_reaction(self.joint, data.t, data.q, data.multipliers)

    def references(self):
        return (("joint", self.joint),)


class ElementForce(AbstractSensor):
    """The characteristic force of force element ``element`` (its ``output``): a spring's
    tension (N), a contact's normal force (N), a bushing's (F, τ), an applied load …"""

    element: str = eqx.field(static=True)

    def __call__(self, model, data):
        return model.element_output(self.element, data.t, data.q, data.v)

    def references(self):
        return (("force", self.element),)


class KineticEnergy(AbstractSensor):
    """Kinetic energy ``½ vᵀ M v`` of all bodies (J)."""

    def __call__(self, model, data):
        return model.kinetic_energy(data.v, data.q)

    def references(self):
        return ()


class PotentialEnergy(AbstractSensor):
    """Gravitational plus elastic potential energy (J; zero at the world origin / free length)."""

    def __call__(self, model, data):
        return model.potential_energy(data.t, data.q)

    def references(self):
        return ()


class MechanicalEnergy(AbstractSensor):
    """Kinetic plus potential energy (J)."""

    def __call__(self, model, data):
        return model.kinetic_energy(data.v, data.q) + model.potential_energy(data.t, data.q)

    def references(self):
        return ()


class ModalStress(AbstractSensor):
    """Normal stresses (Pa) at the stress points of modal body ``body``, ``σ = S q_f`` with
    ``S`` its ``modal_data.stress_modes`` (s, m) (for beams,
    :func:`~diffmbs.flex.beam_stress_modes`; labels in ``modal_data.stress_labels``), shape
    ``(s,)``. Elastic stresses only: rigid-body motion of the frame adds none."""

    body: str = eqx.field(static=True)

    def __call__(self, model, data):
        if self.body not in model.modal_names:
            raise ValueError(f"ModalStress: {self.body!r} is not a modal body of the model")
        body = model.modal_bodies[model.modal_names.index(self.body)]
        stress_modes = body.modal_data.stress_modes
        if stress_modes.shape[0] == 0:
            raise ValueError(f"ModalStress: modal body {self.body!r} has no stress points "
                             "(give modal_data(..., stress_modes=...))")  # fmt: skip
        return stress_modes @ data.q[model.q_slice(self.body)][7:]

    def references(self):
        return (("body", self.body),)
