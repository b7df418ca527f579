"""Floating frame of reference (FFR) dynamics of one flexible body, from its invariants.

Coordinates: frame position ``R`` (world, m), unit quaternion ``p = (w, x, y, z)`` (scalar
first; normalised whenever ``A`` is formed), modal amplitudes ``q_f`` ``(m,)``. Velocities:
``Ṙ`` (world, m/s), ``ω̄`` (body-frame angular velocity, rad/s), ``q̇_f``. The quaternion moves
as ``ṗ = ½ p ⊗ (0, ω̄)``.

With ``S̄ = S̄(q)``, ``J = J(q)``, ``G = G(q)`` from :class:`~diffmbs.flex.FFRInvariants`, the
kinetic energy ``T = ½ vᵀ M(q) v`` has the mass matrix (:func:`ffr_mass_matrix`)::

          Ṙ             ω̄          q̇_f
    [ m I₃          −A [S̄]×        A i1  ]
    [ [S̄]× Aᵀ         J              G    ]
    [ i1ᵀ Aᵀ          Gᵀ            M_ff  ]

and the equations of motion ``M v̇ = Q_v + Q_g + Q_e + Q_d + Q_applied`` follow from the
Euler–Poincaré (Boltzmann–Hamel) equations of ``T`` on SE(3) × ℝᵐ. The quadratic velocity
forces (:func:`ffr_quadratic_velocity_forces`) are::

    Q_v,R = −A [ω̄ × (ω̄ × S̄) + 2 ω̄ × (i1 q̇)]
    Q_v,ω = −ω̄ × (J ω̄ + G q̇) − Σ_k q̇_k J'_k ω̄ − Σ_k q̇_k G1_k q̇
    Q_v,k = ω̄ᵀ (J1_k + Σ_l q_l J2_kl) ω̄ + ω̄ᵀ G1_k q̇ − Σ_l q̇_l ω̄ · G1_l[:, k]

with ``J'_k = ∂J/∂q_k = J1_k + J1_kᵀ + Σ_l q_l (J2_kl + J2_lk)``. Elastic forces ``−K_ff q``,
modal damping ``−D q̇`` and gravity (:func:`ffr_gravity_forces`: ``m g``, ``S̄ × Aᵀ g``,
``i1ᵀ Aᵀ g``) complete them. Without modes everything reduces to the Newton–Euler equations of
a rigid body about a point that need not be its centre of mass.

Energy ``T + ½ qᵀ K_ff q − g · (m R + A S̄)``, the linear momentum ``m Ṙ + A (ω̄ × S̄ + i1 q̇)``
and the angular momentum ``R × P + A (S̄ × Aᵀ Ṙ + J ω̄ + G q̇)`` are conserved without damping
and applied forces (tested).
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from diffmbs.flex._invariants import FFRInvariants
from diffmbs.rotations import quat_derivative, quat_to_matrix, rotation_vector_to_matrix, skew
from diffmbs.system import MechanicalSystem

__all__ = [
    "AbstractModalDamping",
    "FreeModalBody",
    "ModalDampingRatios",
    "NodeModes",
    "RayleighDamping",
    "ffr_gravity_forces",
    "ffr_mass_matrix",
    "ffr_quadratic_velocity_forces",
    "node_acceleration",
    "node_angular_velocity",
    "node_generalized_force",
    "node_position",
    "node_rotation",
    "node_velocity",
]


# --------------------------------------------------------------------------- mass and forces


def ffr_mass_matrix(invariants: FFRInvariants, q_f: Array, rotation: Array) -> Array:
    """Mass matrix ``(6 + m, 6 + m)`` for the velocities ``(Ṙ world, ω̄ body, q̇_f)``.

    ``q_f`` ``(m,)``; ``rotation`` A ``(3, 3)`` body → world (the ``Ṙ`` rows are in world axes,
    hence the dependence on A). Units kg, kg·m, kg·m² by block."""
    inv, a = invariants, rotation
    m = inv.n_modes
    s_bar = inv.first_moment_at(q_f)
    a_s = -a @ skew(s_bar)
    a_i1 = a @ inv.psi_integral
    g = inv.coupling_at(q_f)
    top = jnp.concatenate([inv.mass * jnp.eye(3, dtype=a.dtype), a_s, a_i1], axis=1)
    mid = jnp.concatenate([a_s.T, inv.inertia_at(q_f), g], axis=1)
    bot = jnp.concatenate([a_i1.T, g.T, inv.modal_mass.reshape(m, m)], axis=1)
    return jnp.concatenate([top, mid, bot], axis=0)


def ffr_quadratic_velocity_forces(
    invariants: FFRInvariants,
    q_f: Array,
    omega_bar: Array,
    qdot_f: Array,
    rotation: Array,
) -> Array:
    """Quadratic velocity (centrifugal, Coriolis, gyroscopic) forces ``(6 + m,)``, conjugate to
    ``(Ṙ world, ω̄ body, q̇_f)``: N (world), N·m (body), and N per unit modal amplitude.
    Formulas in the module docstring."""
    inv, w, qd = invariants, omega_bar, qdot_f
    s_bar = inv.first_moment_at(q_f)
    i1_qd = inv.psi_integral @ qd
    j = inv.inertia_at(q_f)
    g = inv.coupling_at(q_f)
    f_r = -rotation @ (jnp.cross(w, jnp.cross(w, s_bar)) + 2 * jnp.cross(w, i1_qd))
    # J'_k ω̄ for every k, and G1_k q̇.
    j2q = jnp.einsum("l,klab->kab", q_f, inv.inertia_quadratic)
    j2q_t = jnp.einsum("l,lkab->kab", q_f, inv.inertia_quadratic)
    dj = inv.inertia_linear + jnp.swapaxes(inv.inertia_linear, 1, 2) + j2q + j2q_t
    g1_qd = jnp.einsum("kal,l->ka", inv.coupling_linear, qd)  # (m, 3)
    f_w = -jnp.cross(w, j @ w + g @ qd) - jnp.einsum("k,kab,b->a", qd, dj, w) - qd @ g1_qd
    f_f = (
        jnp.einsum("a,kab,b->k", w, inv.inertia_linear + j2q, w)
        + g1_qd @ w
        - jnp.einsum("l,a,lak->k", qd, w, inv.coupling_linear)
    )
    return jnp.concatenate([f_r, f_w, f_f])


def ffr_gravity_forces(
    invariants: FFRInvariants, q_f: Array, rotation: Array, gravity: ArrayLike
) -> Array:
    """Generalized weight ``(6 + m,)`` in a uniform field ``gravity`` (m/s², world):
    ``(m g, S̄(q) × Aᵀ g, i1ᵀ Aᵀ g)``."""
    inv = invariants
    g_bar = rotation.T @ jnp.asarray(gravity, rotation.dtype)
    return jnp.concatenate(
        [
            inv.mass * rotation @ g_bar,
            jnp.cross(inv.first_moment_at(q_f), g_bar),
            inv.psi_integral.T @ g_bar,
        ]
    )


# --------------------------------------------------------------------------- nodes


class NodeModes(eqx.Module):
    """One FE node of a flexible body: undeformed ``position`` x̄₀ (m, body frame, (3,)), modal
    ``translation`` Ψ_P ``(3, m)`` (m per unit amplitude) and ``rotation`` Ψθ_P ``(3, m)``
    (rad per unit amplitude; zero for a node without rotation DOFs)."""

    position: Array
    translation: Array
    rotation: Array

    def deformed(self, q_f: Array) -> Array:
        """Body-frame position ``x̄₀ + Ψ_P q_f`` (m)."""
        return self.position + self.translation @ q_f


def node_position(r0: Array, rotation: Array, q_f: Array, node: NodeModes) -> Array:
    """World position ``r₀ + A (x̄₀ + Ψ_P q_f)`` (m)."""
    return r0 + rotation @ node.deformed(q_f)


def node_velocity(
    r0_dot: Array,
    rotation: Array,
    omega_bar: Array,
    q_f: Array,
    qdot_f: Array,
    node: NodeModes,
) -> Array:
    """World velocity ``ṙ₀ + A (ω̄ × x̄ + Ψ_P q̇_f)`` (m/s)."""
    x = node.deformed(q_f)
    return r0_dot + rotation @ (jnp.cross(omega_bar, x) + node.translation @ qdot_f)


def node_acceleration(
    r0_ddot: Array,
    rotation: Array,
    omega_bar: Array,
    omega_bar_dot: Array,
    q_f: Array,
    qdot_f: Array,
    qddot_f: Array,
    node: NodeModes,
) -> Array:
    """World acceleration (m/s², without gravity: what an accelerometer reads plus g)::

    r̈₀ + A (ω̄̇ × x̄ + ω̄ × (ω̄ × x̄) + 2 ω̄ × Ψ_P q̇_f + Ψ_P q̈_f)
    """
    x = node.deformed(q_f)
    w = omega_bar
    body = (
        jnp.cross(omega_bar_dot, x)
        + jnp.cross(w, jnp.cross(w, x))
        + 2 * jnp.cross(w, node.translation @ qdot_f)
        + node.translation @ qddot_f
    )
    return r0_ddot + rotation @ body


def node_rotation(rotation: Array, q_f: Array, node: NodeModes) -> Array:
    """World orientation of the node's frame, ``A exp([Ψθ_P q_f]×)`` (3, 3)."""
    return rotation @ rotation_vector_to_matrix(node.rotation @ q_f)


def node_angular_velocity(
    rotation: Array, omega_bar: Array, qdot_f: Array, node: NodeModes
) -> Array:
    """World angular velocity of the node's frame, ``A (ω̄ + Ψθ_P q̇_f)`` (rad/s, linearised in
    the small elastic rotation)."""
    return rotation @ (omega_bar + node.rotation @ qdot_f)


def node_generalized_force(
    rotation: Array,
    q_f: Array,
    node: NodeModes,
    force: Array,
    moment: Array | None = None,
) -> Array:
    """Generalized force ``(6 + m,)`` of a world ``force`` (N) at the node and an optional world
    ``moment`` (N·m) on it: ``(f, x̄ × f̄ + m̄, Ψ_Pᵀ f̄ + Ψθ_Pᵀ m̄)``, bars in body axes."""
    f_bar = rotation.T @ force
    m_bar = jnp.zeros_like(f_bar) if moment is None else rotation.T @ moment
    return jnp.concatenate(
        [
            force,
            jnp.cross(node.deformed(q_f), f_bar) + m_bar,
            node.translation.T @ f_bar + node.rotation.T @ m_bar,
        ]
    )


# --------------------------------------------------------------------------- damping


class AbstractModalDamping(eqx.Module):
    """Damping of the modal coordinates: ``matrix(M_ff, K_ff)`` → ``D`` ``(m, m)`` (N·s per
    unit amplitude), the force being ``−D q̇_f``."""

    @abc.abstractmethod
    def matrix(self, modal_mass: Array, modal_stiffness: Array) -> Array:
        """The damping matrix."""


class ModalDampingRatios(AbstractModalDamping):
    """A damping ratio ζ_k per mode (scalar or ``(m,)``): ``D = diag(2 ζ_k √(K_kk M_kk))``.

    Exact modal damping for diagonal ``M_ff`` and ``K_ff`` (the orthonormal bases of every
    reduction here; not for a classical Craig–Bampton basis)."""

    ratios: Array = eqx.field(converter=lambda x: jnp.asarray(x, jnp.result_type(float)))

    def matrix(self, modal_mass, modal_stiffness):
        c = 2 * self.ratios * jnp.sqrt(jnp.diagonal(modal_stiffness) * jnp.diagonal(modal_mass))
        return jnp.diag(jnp.broadcast_to(c, modal_mass.shape[:1]))


class RayleighDamping(AbstractModalDamping):
    """``D = α M_ff + β K_ff`` (α in 1/s, β in s): ζ(ω) = α/(2ω) + βω/2."""

    alpha: Array = eqx.field(converter=lambda x: jnp.asarray(x, jnp.result_type(float)))
    beta: Array = eqx.field(converter=lambda x: jnp.asarray(x, jnp.result_type(float)))

    def matrix(self, modal_mass, modal_stiffness):
        return self.alpha * modal_mass + self.beta * modal_stiffness


# --------------------------------------------------------------------------- one free body


class FreeModalBody(MechanicalSystem):
    """A single unconstrained flexible body (tests and examples; multibody models assemble
    bodies in :mod:`diffmbs.multibody`).

    ``q = (R (3), p (4), q_f (m))``, ``v = (Ṙ (3), ω̄ (3), q̇_f (m))``. Fields: ``invariants``,
    ``stiffness`` K_ff ``(m, m)`` (N per unit amplitude), ``damping`` (None: undamped),
    ``gravity`` (m/s², world, (3,)). Build it from modal data with :meth:`from_modal_data`.
    """

    invariants: FFRInvariants
    stiffness: Array
    damping: AbstractModalDamping | None = None
    gravity: Array = eqx.field(
        converter=lambda x: jnp.asarray(x, jnp.result_type(float)), default=(0.0, 0.0, 0.0)
    )

    @classmethod
    def from_modal_data(
        cls,
        data,
        damping: AbstractModalDamping | None = None,
        gravity: ArrayLike = (0.0, 0.0, 0.0),
    ) -> FreeModalBody:
        """From a :class:`~diffmbs.flex.ModalData`."""
        return cls(data.invariants, data.modal_stiffness, damping, gravity)

    @property
    def n_modes(self) -> int:
        return self.invariants.n_modes

    def split(self, q: Array, v: Array | None = None):
        """``(R, A, q_f)`` from ``q``, and ``(Ṙ, ω̄, q̇_f)`` from ``v`` when given."""
        parts = (q[:3], quat_to_matrix(q[3:7]), q[7:])
        return parts if v is None else (*parts, v[:3], v[3:6], v[6:])

    def mass(self, q):
        _, a, q_f = self.split(q)
        return ffr_mass_matrix(self.invariants, q_f, a)

    def forces(self, t, q, v):
        _, a, q_f, _, w, qd = self.split(q, v)
        inv = self.invariants
        f = ffr_quadratic_velocity_forces(inv, q_f, w, qd, a)
        f = f + ffr_gravity_forces(inv, q_f, a, self.gravity)
        elastic = -self.stiffness @ q_f
        if self.damping is not None:
            elastic = elastic - self.damping.matrix(inv.modal_mass, self.stiffness) @ qd
        return f.at[6:].add(elastic)

    def qdot(self, q, v):
        return jnp.concatenate([v[:3], quat_derivative(q[3:7], v[3:6]), v[6:]])

    def initial_state(
        self,
        position: ArrayLike = (0.0, 0.0, 0.0),
        quaternion: ArrayLike = (1.0, 0.0, 0.0, 0.0),
        q_f: ArrayLike | None = None,
        velocity: ArrayLike = (0.0, 0.0, 0.0),
        omega_bar: ArrayLike = (0.0, 0.0, 0.0),
        qdot_f: ArrayLike | None = None,
    ) -> tuple[Array, Array]:
        """``(q0, v0)`` from the parts (SI; modal parts default to zero)."""
        dt = jnp.result_type(float)
        zeros = jnp.zeros(self.n_modes, dt)
        q_f = zeros if q_f is None else jnp.asarray(q_f, dt)
        qdot_f = zeros if qdot_f is None else jnp.asarray(qdot_f, dt)
        q0 = jnp.concatenate([jnp.asarray(position, dt), jnp.asarray(quaternion, dt), q_f])
        v0 = jnp.concatenate([jnp.asarray(velocity, dt), jnp.asarray(omega_bar, dt), qdot_f])
        return q0, v0
