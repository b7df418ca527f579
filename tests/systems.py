"""Small mechanical systems shared by several test files (not a test module)."""

import equinox as eqx
import jax.numpy as jnp

from diffmbs.system import MechanicalSystem

G = 9.81


class Pendulum(MechanicalSystem):
    """Point mass on a massless rod, Cartesian (x, y): x² + y² − L² = 0 (optionally twice, a
    redundant constraint). Sensor: total energy."""

    m: float = 0.7
    length: float = 1.3
    copies: int = eqx.field(static=True, default=1)

    def mass(self, q):
        return self.m * jnp.eye(2)

    def forces(self, t, q, v):
        return jnp.array([0.0, -self.m * G])

    def constraints(self, t, q):
        return jnp.tile(q @ q - self.length**2, self.copies)

    def sensors(self, t, q, v, vdot):
        return {"energy": 0.5 * self.m * v @ v + self.m * G * q[1]}
