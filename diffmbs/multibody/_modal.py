"""Flexible (modal, floating frame of reference) bodies inside a multibody model.

State of one modal body with ``m`` modes (``7 + m`` coordinates, ``6 + m`` velocities)::

    q_body = (r₀ (3), p (4), q_f (m))     r₀: reference-frame origin, world (m); p: (w, x, y, z)
    v_body = (ṙ₀ (3), ω̄ (3), q̇_f (m))     ṙ₀ world (m/s); ω̄ body axes (rad/s); modal rates

The equations of motion are those of :mod:`diffmbs.flex._ffr` (mass matrix and quadratic velocity
forces from the invariants, ``−K q_f``, modal damping, gravity on the deformed body). In the
model, the rigid bodies come first in ``q`` and ``v``, then the modal bodies in the order they
were added.

**Attachment.** Joints, force elements and sensors name either the modal body (its undeformed
*reference frame*, origin r₀, axes A) or one of its FE nodes as ``node(body, node_id)``, i.e. the
string ``"body@node_id"`` (``node_id`` a label of :attr:`ModalData.node_ids`). Each attachment is
one extra row of the model's stacked :class:`~diffmbs.multibody.BodyKinematics` (``com`` = 0, so
``point(s̄)`` is ``origin + R s̄``): for a node, the origin is ``r₀ + A (x̄₀ + Ψ_P q_f)`` and the
axes ``A exp([Ψθ_P q_f]×)`` (the node's small elastic rotation). Existing joint, force and sensor
classes therefore act on nodes unchanged. Loads on a row (a force at a point and a couple, world)
are reduced to the row origin and mapped to ``(ṙ₀, ω̄, q̇_f)`` by
:func:`~diffmbs.flex.node_generalized_force` (the frame row: no modal part).
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from diffmbs.flex import (
    AbstractModalDamping,
    ModalData,
    ffr_gravity_forces,
    ffr_mass_matrix,
    ffr_quadratic_velocity_forces,
    node_acceleration,
    node_angular_velocity,
    node_generalized_force,
    node_position,
    node_rotation,
    node_velocity,
)
from diffmbs.multibody._bodies import (
    GROUND,
    BodyKinematics,
    as_float_array,
    as_quaternion,
    as_vector3,
)
from diffmbs.rotations import quat_derivative, quat_normalize, quat_to_matrix

__all__ = ["NODE_SEPARATOR", "ModalBody", "node", "split_node"]

NODE_SEPARATOR = "@"
"""Separates a modal body's name from a node label in attachment names (``"beam@12"``)."""


def node(body: str, node_id: int) -> str:
    """The attachment name of FE node ``node_id`` (a label of the modal data) of ``body``."""
    return f"{body}{NODE_SEPARATOR}{int(node_id)}"


def split_node(name: str) -> tuple[str, int] | None:
    """``(body, node_id)`` of a node attachment name, or None for a plain body name."""
    body, sep, label = name.rpartition(NODE_SEPARATOR)
    if not sep:
        return None
    try:
        return body, int(label)
    except ValueError:
        return None


class ModalBody(eqx.Module):
    """A flexible body described by modal data (floating frame of reference).

    Fields (SI): ``name`` (static; no ``"@"``); ``modal_data`` (:class:`~diffmbs.flex.ModalData`,
    body frame = the frame of its node coordinates); ``damping`` of the modal coordinates
    (:class:`~diffmbs.flex.ModalDampingRatios`, :class:`~diffmbs.flex.RayleighDamping`, or None);
    initial ``position`` of the frame origin (world, m), ``orientation`` (w, x, y, z), ``velocity``
    of the origin (world, m/s), ``angular_velocity`` ω̄ (body axes, rad/s), ``modal_amplitudes``
    q_f and ``modal_velocities`` q̇_f ((m,), default zero). Float leaves are parameters
    (``"beam.damping.ratios"``, ``"beam.modal_data.modal_stiffness"`` …).
    """

    name: str = eqx.field(static=True)
    modal_data: ModalData
    damping: AbstractModalDamping | None = None
    position: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    orientation: Array = eqx.field(default=(1.0, 0.0, 0.0, 0.0), converter=as_quaternion)
    velocity: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    angular_velocity: Array = eqx.field(default=(0.0, 0.0, 0.0), converter=as_vector3)
    modal_amplitudes: Array | None = eqx.field(default=None)
    modal_velocities: Array | None = eqx.field(default=None)

    def __check_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a body needs a non-empty string name, got {self.name!r}")
        if self.name == GROUND:
            raise ValueError(f"{GROUND!r} is reserved for the fixed world frame")
        if NODE_SEPARATOR in self.name:
            raise ValueError(f"modal body {self.name!r}: {NODE_SEPARATOR!r} marks node names")
        if not isinstance(self.modal_data, ModalData):
            raise ValueError(f"modal body {self.name!r}: modal_data must be a ModalData")
        m = self.n_modes
        for field in ("modal_amplitudes", "modal_velocities"):
            x = getattr(self, field)
            if x is not None and jnp.shape(x) != (m,):
                raise ValueError(f"modal body {self.name!r}: {field} must have shape ({m},)")

    @property
    def n_modes(self) -> int:
        return self.modal_data.n_modes

    @property
    def invariants(self):
        return self.modal_data.invariants

    def node_index(self, node_id: int) -> int:
        return self.modal_data.node_index(node_id)

    def damping_matrix(self) -> Array | None:
        if self.damping is None:
            return None
        return self.damping.matrix(self.invariants.modal_mass, self.modal_data.modal_stiffness)

    def initial_state(self) -> tuple[Array, Array]:
        """``(q0, v0)`` of shapes ``(7 + m,)``, ``(6 + m,)``."""
        zeros = jnp.zeros(self.n_modes, dtype=self.position.dtype)
        qf = zeros if self.modal_amplitudes is None else as_float_array(self.modal_amplitudes)
        vf = zeros if self.modal_velocities is None else as_float_array(self.modal_velocities)
        q0 = jnp.concatenate([self.position, self.orientation, qf])
        v0 = jnp.concatenate([self.velocity, self.angular_velocity, vf])
        return q0, v0


# --------------------------------------------------------------------------- model helpers
# ``bodies``: the model's modal bodies; ``nodes``: static ((body k, node row), …) per node row.


def layout(n_rigid: int, bodies: tuple[ModalBody, ...]):
    """Static ``(q slices, v slices)`` of the modal bodies in the model's ``q`` and ``v``."""
    qs, vs = [], []
    q0, v0 = 7 * n_rigid, 6 * n_rigid
    for b in bodies:
        m = b.n_modes
        qs.append(slice(q0, q0 + 7 + m))
        vs.append(slice(v0, v0 + 6 + m))
        q0, v0 = q0 + 7 + m, v0 + 6 + m
    return qs, vs


def split(q_k: Array, v_k: Array | None = None):
    """``(r₀, A, q_f)`` and, with ``v_k``, ``(ṙ₀, ω̄, q̇_f)``."""
    parts = (q_k[:3], quat_to_matrix(q_k[3:7]), q_k[7:])
    return parts if v_k is None else (*parts, v_k[:3], v_k[3:6], v_k[6:])


def kinematics_rows(bodies, nodes, n_rigid, q: Array, v: Array | None) -> BodyKinematics:
    """Kinematics rows: one per modal body (its reference frame), then one per node row."""
    qs, vs = layout(n_rigid, bodies)
    rows = []
    parts = []
    for k, b in enumerate(bodies):
        qk = q[qs[k]]
        vk = None if v is None else v[vs[k]]
        vk = jnp.zeros(6 + b.n_modes, dtype=q.dtype) if vk is None else vk
        parts.append(split(qk, vk))
        r0, a, _, rd, w, _ = parts[-1]
        rows.append((r0, a, rd, a @ w))
    for k, row in nodes:
        r0, a, qf, rd, w, qd = parts[k]
        nm = bodies[k].modal_data.node(row)
        rows.append(
            (
                node_position(r0, a, qf, nm),
                node_rotation(a, qf, nm),
                node_velocity(rd, a, w, qf, qd, nm),
                node_angular_velocity(a, w, qd, nm),
            )
        )
    pos, rot, vel, omega = (jnp.stack(x) for x in zip(*rows, strict=True))
    return BodyKinematics(pos, rot, jnp.zeros_like(pos), vel, omega)


def mass_blocks(bodies, n_rigid, q: Array) -> list[Array]:
    qs, _ = layout(n_rigid, bodies)
    out = []
    for k, b in enumerate(bodies):
        _, a, qf = split(q[qs[k]])
        out.append(ffr_mass_matrix(b.invariants, qf, a))
    return out


def force_blocks(bodies, nodes, n_rigid, gravity, q, v, row_force, row_torque) -> list[Array]:
    """Generalized forces of each modal body: FFR quadratic velocity forces, gravity, elastic
    and damping forces, and the loads on its rows (``row_force``, ``row_torque``: world, the
    couple about the row origin; the modal bodies' rows first, then the node rows)."""
    qs, vs = layout(n_rigid, bodies)
    n_m = len(bodies)
    out = []
    for k, b in enumerate(bodies):
        _, a, qf, _, w, qd = split(q[qs[k]], v[vs[k]])
        inv = b.invariants
        f = ffr_quadratic_velocity_forces(inv, qf, w, qd, a)
        f = f + ffr_gravity_forces(inv, qf, a, gravity)
        elastic = -b.modal_data.modal_stiffness @ qf
        d = b.damping_matrix()
        if d is not None:
            elastic = elastic - d @ qd
        f = f.at[6:].add(elastic)
        frame = jnp.concatenate([row_force[k], a.T @ row_torque[k], jnp.zeros_like(qf)])
        out.append(f + frame)
    for j, (k, row) in enumerate(nodes):
        _, a, qf = split(q[qs[k]])
        nm = bodies[k].modal_data.node(row)
        gen = node_generalized_force(a, qf, nm, row_force[n_m + j], row_torque[n_m + j])
        out[k] = out[k] + gen
    return out


def row_accelerations(bodies, nodes, n_rigid, q, v, vdot) -> tuple[Array, Array]:
    """World acceleration of each row's origin and world angular acceleration of its axes."""
    qs, vs = layout(n_rigid, bodies)
    acc, alpha, parts = [], [], []
    for k in range(len(bodies)):
        r0, a, qf, rd, w, qd = split(q[qs[k]], v[vs[k]])
        ad = vdot[vs[k]]
        parts.append((a, qf, w, qd, ad))
        acc.append(ad[:3])
        alpha.append(a @ ad[3:6])
    for k, row in nodes:
        a, qf, w, qd, ad = parts[k]
        nm = bodies[k].modal_data.node(row)
        acc.append(node_acceleration(ad[:3], a, w, ad[3:6], qf, qd, ad[6:], nm))
        th_d, th_dd = nm.rotation @ qd, nm.rotation @ ad[6:]
        alpha.append(a @ (ad[3:6] + th_dd + jnp.cross(w, th_d)))
    return jnp.stack(acc), jnp.stack(alpha)


def qdot_parts(bodies, n_rigid, q, v) -> list[Array]:
    qs, vs = layout(n_rigid, bodies)
    out = []
    for k in range(len(bodies)):
        qk, vk = q[qs[k]], v[vs[k]]
        out.append(jnp.concatenate([vk[:3], quat_derivative(qk[3:7], vk[3:6]), vk[6:]]))
    return out


def normalize_parts(bodies, n_rigid, q) -> list[Array]:
    qs, _ = layout(n_rigid, bodies)
    out = []
    for k in range(len(bodies)):
        qk = q[qs[k]]
        out.append(jnp.concatenate([qk[:3], quat_normalize(qk[3:7]), qk[7:]]))
    return out


def potential_energy(bodies, n_rigid, gravity, q) -> Array:
    """``Σ −g · (m r₀ + A S̄(q_f)) + ½ q_fᵀ K q_f`` (J)."""
    qs, _ = layout(n_rigid, bodies)
    energy = jnp.zeros((), dtype=q.dtype)
    for k, b in enumerate(bodies):
        r0, a, qf = split(q[qs[k]])
        inv = b.invariants
        moment = inv.mass * r0 + a @ inv.first_moment_at(qf)
        energy = energy - gravity @ moment + 0.5 * qf @ (b.modal_data.modal_stiffness @ qf)
    return energy


def centre_of_mass(body: ModalBody, q_k: Array) -> Array:
    """World centre of mass of the deformed body (m)."""
    r0, a, qf = split(q_k)
    inv = body.invariants
    return r0 + a @ inv.first_moment_at(qf) / inv.mass


def check_nodes(bodies: dict[str, ModalBody], name: str) -> tuple[str, int] | None:
    """``(body, row)`` of a valid node attachment name, None for other names; raises
    ``ValueError`` for a node name on a modal body that lacks the node."""
    parsed = split_node(name)
    if parsed is None or parsed[0] not in bodies:
        return None
    body, label = parsed
    ids = bodies[body].modal_data.node_ids
    if label not in ids:
        raise ValueError(f"modal body {body!r} has no node {label} (nodes {ids[0]}…{ids[-1]})")
    return body, int(np.flatnonzero(np.asarray(ids) == label)[0])
