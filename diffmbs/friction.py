"""Friction laws in JAX: the tangential force of a contact from its sliding velocity, its
normal force and, for laws with memory, an internal state (layer 1, next to :mod:`diffmbs.contact`).

Every law is an ``equinox.Module`` whose float fields are parameters (differentiable,
batchable) with two pure functions, vectorised over leading axes:

* ``force(v_t, normal_force, state)`` — the friction force (N, ``(..., 3)``) on the body whose
  contact point slides at ``v_t`` (m/s, ``(..., 3)``, already in the tangent plane) relative to
  the other surface; it opposes ``v_t``. ``normal_force`` (N, ``(...)``) is the contact's normal
  force (its magnitude is used);
* ``state_rate(v_t, normal_force, state)`` — the time derivative of the internal state
  (``(..., state_size)``; ``state_size = 0`` for laws without memory).

Laws
----
* :class:`CoulombFriction` — Coulomb ``μ |F_n|`` opposing the sliding, regularised as
  ``v / sqrt(|v|² + v_ε²)``, plus viscous ``−c_v v``. Without memory it cannot hold a load at
  rest: a block on a slope below the friction angle creeps at the speed where the regularised
  force balances the load (``v = v_ε r / sqrt(1 − r²)``, r = tan α / μ).
* :class:`StribeckFriction` — the same with ``μ(v) = μ_d + (μ_s − μ_d) exp(−(|v|/v_s)²)``.

The interface leaves room for a law with memory, such as the elastic stick point of Gonthier et
al. (2004) (../shared/SEEDS.md 000, equations 3-40 … 3-49), whose bristle deflection ``s`` is a
state (``state_size``, ``state_rate``, ``initial_state``); neither that law nor the
integrator's support for such states exists yet::

      F_t = k F_stick + (1 − k) F_slide − c_v v,     k = exp(−|v|² / v_stick²),
      F_stick = −k_stick s − c_stick ṡ,  |F_stick| ≤ μ_s |F_n|,  s: the bristle's deflection.
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from diffmbs.contact import _check, as_float_leaf
from diffmbs.rotations import safe_norm

__all__ = ["AbstractFriction", "CoulombFriction", "StribeckFriction"]


def _field(units: str):
    return eqx.field(converter=as_float_leaf, metadata={"units": units})


def _sliding_direction(v_t: Array, v_epsilon: Array) -> Array:
    """``v / sqrt(|v|² + v_ε²)``: the unit sliding direction, smooth through ``v = 0``."""
    return v_t / jnp.sqrt(jnp.sum(v_t * v_t, axis=-1, keepdims=True) + v_epsilon**2)


class AbstractFriction(eqx.Module):
    """A friction law (see the module docstring); ``state_size`` internal states per contact.

    Concrete parameters are checked by name: coefficients and dampers ≥ 0, speeds > 0."""

    state_size: ClassVar[int] = 0

    def __check_init__(self):
        for name, value in vars(self).items():  # every field is a parameter
            positive = name.startswith("v_")  # a regularisation or Stribeck speed
            _check(f"{type(self).__name__}.{name}", value, low=0.0, low_open=positive)

    @abc.abstractmethod
    def force(self, v_t: Array, normal_force: Array, state: Array) -> Array:
        """Friction force (N, ``(..., 3)``) opposing the sliding velocity ``v_t``."""

    def state_rate(self, v_t: Array, normal_force: Array, state: Array) -> Array:
        """Time derivative of the internal state (``(..., state_size)``)."""
        del normal_force, state
        return jnp.zeros(v_t.shape[:-1] + (self.state_size,), dtype=v_t.dtype)

    def initial_state(self, shape: tuple[int, ...] = ()) -> Array:
        """The state of a contact that has just closed: ``(*shape, state_size)`` zeros."""
        return jnp.zeros(shape + (self.state_size,))


class CoulombFriction(AbstractFriction):
    """Regularised Coulomb friction ``μ |F_n|`` plus viscous friction ``c_v v``.

    ``mu`` (1), ``viscous`` c_v (N·s/m), ``v_epsilon`` (m/s): the speed below which the force
    falls linearly to zero."""

    mu: Array = _field("1")
    viscous: Array = _field("N s/m")
    v_epsilon: Array = _field("m/s")

    def __init__(self, mu: ArrayLike, viscous: ArrayLike = 0.0, v_epsilon: ArrayLike = 1e-4):
        self.mu, self.viscous, self.v_epsilon = mu, viscous, v_epsilon

    def force(self, v_t, normal_force, state=None):
        del state
        magnitude = self.mu * jnp.abs(normal_force)[..., None]
        return -magnitude * _sliding_direction(v_t, self.v_epsilon) - self.viscous * v_t


class StribeckFriction(AbstractFriction):
    """Coulomb friction whose coefficient falls from ``mu_static`` at rest to ``mu_dynamic``
    over the Stribeck speed ``v_stribeck`` (m/s), plus viscous friction ``viscous`` (N·s/m);
    regularised below ``v_epsilon`` (m/s) like :class:`CoulombFriction`."""

    mu_static: Array = _field("1")
    mu_dynamic: Array = _field("1")
    v_stribeck: Array = _field("m/s")
    viscous: Array = _field("N s/m")
    v_epsilon: Array = _field("m/s")

    def __init__(self, mu_static, mu_dynamic, v_stribeck, viscous=0.0, v_epsilon=1e-4):
        self.mu_static, self.mu_dynamic, self.v_stribeck = mu_static, mu_dynamic, v_stribeck
        self.viscous, self.v_epsilon = viscous, v_epsilon

    def coefficient(self, speed: Array) -> Array:
        """``μ(|v|)`` (1)."""
        return self.mu_dynamic + (self.mu_static - self.mu_dynamic) * jnp.exp(
            -((speed / self.v_stribeck) ** 2)
        )

    def force(self, v_t, normal_force, state=None):
        del state
        mu = self.coefficient(safe_norm(v_t))
        direction = _sliding_direction(v_t, self.v_epsilon)
        return -(mu * jnp.abs(normal_force))[..., None] * direction - self.viscous * v_t
