"""Friction laws in JAX: the tangential force of a contact from its sliding velocity, its
normal force and, for laws with memory, an internal state (layer 1, next to :mod:`diffmbs.contact`).

Every law is an ``equinox.Module`` whose float fields are parameters (differentiable,
batchable) with two pure functions, vectorised over leading axes:

* ``force(v_t, normal_force, state)`` — the friction force (N, ``(..., 3)``) on the body whose
  contact point slides at ``v_t`` (m/s, ``(..., 3)``, already in the tangent plane) relative to
  the other surface; it opposes ``v_t``. ``normal_force`` (N, ``(...)``) is the contact's normal
  force (its magnitude is used);
* ``state_rate(v_t, normal_force, state)`` — the time derivative of the internal state
  (``(..., state_size)``; ``state_size = 0`` for laws without memory); ``force_and_rate``
  gives both from one evaluation (what a force element needs: the joints with clearance of
  :mod:`diffmbs.multibody` carry the states as their internal states, integrated with the
  bodies).

Laws
----
* :class:`CoulombFriction` — Coulomb ``μ |F_n|`` opposing the sliding, regularised as
  ``v / sqrt(|v|² + v_ε²)``, plus viscous ``−c_v v``. Without memory it cannot hold a load at
  rest: a block on a slope below the friction angle creeps at the speed where the regularised
  force balances the load (``v = v_ε r / sqrt(1 − r²)``, r = tan α / μ).
* :class:`StribeckFriction` — the same with ``μ(v) = μ_d + (μ_s − μ_d) exp(−(|v|/v_s)²)``.
* :class:`BristleFriction` — the elastic stick point of Gonthier et al. (2004) as written in
  ../shared/SEEDS.md 000 (equations 3-40 … 3-49): it holds a load at rest (no creep) and
  breaks away at ``μ_s |F_n|``. Its bristle's elastic force ``z = k_stick s`` (N, ``(..., 3)``;
  s the bristle's deflection) is a state::

      F_t = k F_stick + (1 − k) F_slide − c_v v,     k = exp(−|v|² / v_stick²)     (3-40, 3-43)
      F_slide = −μ_d |F_n| v/|v|,   F_stick = −k_stick s − c_stick ṡ,  |F_stick| ≤ μ_s |F_n|

  The thesis moves the stick point in a jump when the bound is exceeded (3-48, 3-49); an ODE
  needs a rate instead (see the class).
"""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs.contact import _check, _concrete, as_float_leaf
from diffmbs.rotations import safe_norm

__all__ = ["AbstractFriction", "BristleFriction", "CoulombFriction", "StribeckFriction"]


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

    def force_and_rate(self, v_t: Array, normal_force: Array, state: Array):
        """``(force, state_rate)`` in one call (what a force element integrating the state
        needs)."""
        return self.force(v_t, normal_force, state), self.state_rate(v_t, normal_force, state)

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


class BristleFriction(AbstractFriction):
    """Friction with an elastic stick point (a bristle), from ../shared/SEEDS.md 000, 3-40 … 3-49.

    Parameters: ``mu_static``, ``mu_dynamic`` (1, ``mu_dynamic ≤ mu_static``), ``k_stick``
    (N/m) and ``c_stick`` (N·s/m, > 0) the bristle's spring and damper, ``v_stick`` (m/s) the
    speed of the stick–slip blend ``k = exp(−|v|²/v_stick²)``, ``viscous`` c_v (N·s/m).

    The state ``z`` (N, 3 per contact) is the bristle's elastic force, ``k_stick s`` with ``s``
    the contact point minus the stick point (in newtons, the state is on the scale of the
    forces, which is what an integrator's tolerances see). The thesis' jump of the stick point
    (3-49) becomes a rate, blended like the force::

        ż = k k_stick [v − (|z|/z_max)ⁿ⁻² (z·v)₊ z / z_max²] + (1 − k) (z_slide − z) λ,
        λ = v_stick k_stick / (μ_s |F_n| + v_stick c_stick),     F_stick = −z − (c_stick/k_stick) ż

    with ``z_max = μ_s |F_n|`` and ``z_slide = μ_d |F_n| v/|v|``. Sticking, the bristle follows
    the sliding and, as it nears ``z_max`` while loading, stops stretching (it unloads
    elastically). Sliding, it relaxes — about as fast as sliding its own length at ``v_stick``
    — to the force of dynamic friction (the thesis' update with η = μ_d/μ_s), so at re-stick it
    does not push with the static force in the old direction. Where the bound shrinks below
    ``|z|`` (the normal force falls, the contact opens: ``z_max = 0``) the bristle returns at
    its own rate, ``ż −= (k_stick/c_stick)(|z| − z_max)₊² z/|z|²`` (the thesis' jump of the
    stick point, as a rate, smooth across the bound where sticking bristles sit: a rate with
    a kink there gives gradients that depend on the rounding of each step), so a contact that
    closes again starts from a relaxed bristle; hence ``c_stick > 0``.

    The bound on the stick force (3-47) is where a saturated bristle sits, so it is soft: up
    to ``μ_s |F_n|`` the force is the bristle's, beyond it the excess ``e`` (the damper's, in a
    transient) enters as ``m tanh(e/m)``, ``m = 0.05 μ_s |F_n|`` — smooth to second order at
    the bound (a hard clip there makes each step's derivative depend on the last bit of
    ``|F_stick| − μ_s |F_n|``: gradients 35 % off were measured with another compiler's
    rounding).

    Choosing the parameters: ``v_stick`` above the speed at which a re-sticking bristle swings,
    about ``μ_s |F_n| / sqrt(k_stick m)`` (m the mass the contact holds), and well below the
    sliding speeds of interest; ``c_stick`` near ``2 sqrt(k_stick m)``. On a block on a moving
    belt the stick–slip period approaches Coulomb's as k_stick grows with v_stick ∝
    1/sqrt(k_stick) (tests/test_friction.py).
    """

    state_size: ClassVar[int] = 3
    saturation_exponent: ClassVar[int] = 16  # n above (even): how sharply the bristle saturates
    bound_margin: ClassVar[float] = 0.05  # the stick force's soft bound (see the class)

    mu_static: Array = _field("1")
    mu_dynamic: Array = _field("1")
    k_stick: Array = _field("N/m")
    c_stick: Array = _field("N s/m")
    v_stick: Array = _field("m/s")
    viscous: Array = _field("N s/m")

    def __init__(self, mu_static, mu_dynamic, k_stick, c_stick, v_stick, viscous=0.0):
        self.mu_static, self.mu_dynamic = mu_static, mu_dynamic
        self.k_stick, self.c_stick, self.v_stick = k_stick, c_stick, v_stick
        self.viscous = viscous

    def __check_init__(self):
        _check("BristleFriction.c_stick", self.c_stick, low=0.0, low_open=True)
        static, dynamic = _concrete(self.mu_static), _concrete(self.mu_dynamic)
        if static is not None and dynamic is not None and np.any(dynamic > static):
            raise ValueError(
                f"BristleFriction.mu_dynamic ({dynamic}) must not exceed mu_static ({static})"
            )

    def _terms(self, v_t: Array, normal_force: Array, state: Array):
        """``(|F_n| (..., 1), blend k (..., 1), sliding direction (..., 3), ż (..., 3))``,
        shared by :meth:`state_rate` and :meth:`force`."""
        normal = jnp.abs(normal_force)[..., None]
        k = jnp.exp(-jnp.sum(v_t * v_t, axis=-1, keepdims=True) / self.v_stick**2)
        direction = _sliding_direction(v_t, 1e-3 * self.v_stick)  # weighted by 1 − k ≈ 0 below
        z_max = self.mu_static * normal
        loaded = z_max > 0
        zz = jnp.sum(state * state, axis=-1, keepdims=True)
        zv = jnp.sum(state * v_t, axis=-1, keepdims=True)
        ratio = zz / jnp.where(loaded, z_max, 1.0) ** 2  # (|z| / z_max)²
        # the fraction of the outward stretching removed, (|z|/z_max)ⁿ, held beyond 2 z_max,
        # far from the bound where sticking bristles sit, so the rate stays bounded
        removal = jnp.where(ratio < 4.0, ratio, 4.0) ** (self.saturation_exponent // 2)
        size = safe_norm(state)[..., None]
        # the outward speed (z·v)₊/|z|, smoothed over 1e-5 v_stick: a stuck contact's speed
        # changes sign at every step, and a kink there would make its derivative a coin toss
        speed = zv / jnp.where(size > 0, size, 1.0)
        smoothing = 1e-5 * self.v_stick
        outward_speed = 0.5 * (speed + jnp.sqrt(speed**2 + smoothing**2)) - 0.5 * smoothing
        outward = removal * outward_speed / jnp.where(size > 0, size, 1.0) * state
        excess = jnp.where(size > z_max, size - z_max, 0.0)
        # a bristle beyond a shrunk bound (falling normal force, an open contact) returns at
        # its own rate; squared, so the rate is smooth (C¹) across the bound where it sticks
        pull_in = self.k_stick / self.c_stick * excess**2 / jnp.where(zz > 0, zz, 1.0)
        z_slide = self.mu_dynamic * normal * direction
        relax = self.v_stick * self.k_stick / (z_max + self.v_stick * self.c_stick)
        rate = (
            jnp.where(loaded, k * self.k_stick * (v_t - outward), 0.0)  # open: nothing holds
            + (1 - k) * (z_slide - state) * relax
            - pull_in * state
        )
        return normal, k, direction, rate

    def state_rate(self, v_t, normal_force, state):
        return self._terms(v_t, normal_force, state)[3]

    def force(self, v_t, normal_force, state):
        return self.force_and_rate(v_t, normal_force, state)[0]

    def force_and_rate(self, v_t, normal_force, state):
        normal, k, direction, rate = self._terms(v_t, normal_force, state)
        stick = -state - self.c_stick / self.k_stick * rate
        size = safe_norm(stick)[..., None]
        bound = self.mu_static * normal  # 3-47, softened: see the class
        over = jnp.where(size > bound, size - bound, 0.0)
        margin = self.bound_margin * bound
        held = bound + margin * jnp.tanh(over / jnp.where(margin > 0, margin, 1.0))
        stick = jnp.where(size > bound, held / jnp.where(size > 0, size, 1.0), 1.0) * stick
        slide = -self.mu_dynamic * normal * direction
        return k * stick + (1 - k) * slide - self.viscous * v_t, rate
