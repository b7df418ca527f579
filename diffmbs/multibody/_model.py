"""The multibody model (a :class:`~diffmbs.system.MechanicalSystem`) and its builder.

State layout, ``n`` bodies in the order they were added::

    q = (r_G,1, p_1, r_G,2, p_2, …)   shape (7n,)   COM position (world, m), quaternion (w, x, y, z)
    v = (ṙ_G,1, ω̄_1, ṙ_G,2, ω̄_2, …)   shape (6n,)   COM velocity (world, m/s), ω̄ (body axes, rad/s)

so ``M = diag(m_i I₃, J̄_i)`` is constant and ``M v̇ = Q − Φ_vᵀ λ`` with ``Q`` the applied loads plus
the gyroscopic torques ``−ω̄ × J̄ ω̄``. Body ``i``'s slices are ``model.q_slice(name)`` and
``model.v_slice(name)``.

Elements of one kind and identical static structure are *stacked* (:class:`ElementGroup`: every
array leaf gets a leading axis) and evaluated with one ``vmap``, so the traced graph, and the
compile time, do not grow with the number of bodies, joints or force elements.

Quaternion norm: the continuous kinematics ``ṗ = ½ p ⊗ (0, ω̄)`` preserve ``|p|``; every rotation
matrix is formed homogeneously (:func:`diffmbs.rotations.quat_to_matrix`), so Φ, the forces and
the sensors do not depend on ``|p|`` at all and the integrator's tiny norm drift is harmless.
The norm is therefore *not* a constraint (its velocity-level row would be identically zero, which
a least-squares KKT solve would turn into noise). :meth:`MultibodyModel.normalize` rescales the
quaternions; :func:`diffmbs.multibody.project` is ``project_state`` followed by it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import lineax as lx
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs._linalg import matvec, tmatvec
from diffmbs.multibody import _modal
from diffmbs.multibody._bodies import (
    GROUND,
    BodyKinematics,
    BodyStack,
    RigidBody,
    as_vector3,
)
from diffmbs.multibody._forces import AbstractForceElement
from diffmbs.multibody._joints import AbstractJoint
from diffmbs.multibody._modal import ModalBody
from diffmbs.multibody._sensors import AbstractSensor, SensorInput
from diffmbs.parameters import ParameterError, ParameterRef, parameter_paths, resolve_attribute_path
from diffmbs.rotations import (
    quat_from_rotation_vector,
    quat_normalize,
    quat_to_matrix,
)
from diffmbs.system import MechanicalSystem, constraint_jacobian

__all__ = ["BodyState", "ElementGroup", "ModelBuilder", "ModelError", "MultibodyModel"]


class ModelError(ValueError):
    """An inconsistent model description; the message names the offending item, whose name is
    also the attribute ``item`` (None when not about one item)."""

    def __init__(self, message: str, item: str | None = None):
        super().__init__(message)
        self.item = item


# --------------------------------------------------------------------------- stacking


class ElementGroup(eqx.Module):
    """Elements of one type with identical static structure, stacked for ``vmap``.

    ``elements``: one element whose array leaves have a leading axis of size ``len(names)`` (its
    body-name fields are blanked: the bodies are ``body_index``, static, one row per element,
    one column per attachment; the ground is index n)."""

    elements: Any
    names: tuple[str, ...] = eqx.field(static=True)
    body_index: tuple[tuple[int, ...], ...] = eqx.field(static=True)

    def gather(self, kinematics: BodyKinematics) -> tuple[BodyKinematics, ...]:
        """Kinematics of each attachment, stacked over the group's elements."""
        index = np.asarray(self.body_index, dtype=np.int32).reshape(len(self.names), -1)
        return tuple(
            jax.tree.map(lambda x, col=col: x[index[:, col]], kinematics)
            for col in range(index.shape[1])
        )

    def map(self, method: str, t: Array, kinematics: BodyKinematics, *per_element: Array):
        """``element.method(t, *per_element, *kinematics)`` for every element (one ``vmap``;
        ``per_element`` arrays have a leading axis of the group's size)."""

        def one(element, extra, ks):
            return getattr(element, method)(t, *extra, *ks)

        return eqx.filter_vmap(one)(self.elements, per_element, self.gather(kinematics))

    @property
    def state_size(self) -> int:
        """Internal states of each element of the group (static)."""
        return self.member(0).state_size

    def member(self, k: int):
        """The ``k``-th element, unstacked."""
        return jax.tree.map(lambda x: x[k] if eqx.is_array(x) else x, self.elements)

    def member_kinematics(self, k: int, kinematics: BodyKinematics) -> tuple[BodyKinematics, ...]:
        return tuple(jax.tree.map(lambda x, b=b: x[b], kinematics) for b in self.body_index[k])


def _hashable(leaf):
    try:
        hash(leaf)
    except TypeError:
        return id(leaf)
    return leaf


def stack_elements(named: list[tuple[str, Any, tuple[int, ...]]]) -> tuple[ElementGroup, ...]:
    """Group ``(name, element, body indices)`` by type and static structure and stack each group.

    Body-name fields are blanked first, so elements on different bodies share a structure; a
    plain-function field (e.g. a prescribed motion) is static, so each distinct function forms
    its own group."""
    groups: dict[Any, list] = {}
    for name, element, index in named:
        blank = dataclasses.replace(element, **{f: "" for f in element.attachments})
        arrays, static = eqx.partition(blank, eqx.is_array)
        key = (
            type(element),
            jtu.tree_structure(arrays),
            jtu.tree_structure(static),
            tuple(_hashable(leaf) for leaf in jtu.tree_leaves(static)),
        )
        groups.setdefault(key, []).append((name, arrays, static, index))
    out = []
    for members in groups.values():
        names, arrays, statics, indices = zip(*members, strict=True)
        stacked = jax.tree.map(lambda *xs: jnp.stack(xs), *arrays)
        out.append(ElementGroup(eqx.combine(stacked, statics[0]), names, indices))
    return tuple(out)


# --------------------------------------------------------------------------- the model


class BodyState(eqx.Module):
    """One body's state in the terms of :class:`RigidBody`: ``position`` and ``velocity`` of the
    body-frame origin (world, m and m/s), unit ``orientation`` (w, x, y, z), body-frame
    ``angular_velocity`` ω̄ (rad/s), and ``com_position`` (world, m)."""

    position: Array
    orientation: Array
    velocity: Array
    angular_velocity: Array
    com_position: Array


def _retract_body(kin: BodyKinematics, dx: Array) -> BodyKinematics:
    """Kinematics moved by ``dx = (Δr_G world, Δθ body)`` (the coordinates of ``v``)."""
    spin = quat_to_matrix(quat_from_rotation_vector(dx[3:]))
    return dataclasses.replace(kin, position=kin.position + dx[:3], rotation=kin.rotation @ spin)


class MultibodyModel(MechanicalSystem):
    """Rigid bodies, joints, force elements and sensors as a constrained mechanical system.

    Build it with :class:`ModelBuilder` (or :func:`~diffmbs.multibody.model_from_dict`). Float
    leaves are parameters: body mass properties and initial states, ``gravity`` (3,) m/s², joint
    and force-element parameters; names and topology are static. See the module docstring for the
    state layout.
    """

    bodies: BodyStack
    gravity: Array
    joint_groups: tuple[ElementGroup, ...]
    force_groups: tuple[ElementGroup, ...]
    sensor_list: tuple[AbstractSensor, ...]
    sensor_names: tuple[str, ...] = eqx.field(static=True)
    modal_bodies: tuple[ModalBody, ...] = ()
    node_rows: tuple[tuple[int, int], ...] = eqx.field(static=True, default=())
    node_names: tuple[str, ...] = eqx.field(static=True, default=())
    internal_state: Array | None = None  # the force elements' states z; None: a fresh start

    # ----------------------------------------------------------------- sizes and names

    @property
    def n_bodies(self) -> int:
        return self.bodies.count

    @property
    def modal_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.modal_bodies)

    @property
    def n_rows(self) -> int:
        """Rows of :meth:`kinematics`: rigid bodies, ground, modal bodies, node attachments."""
        return self.n_bodies + 1 + len(self.modal_bodies) + len(self.node_rows)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(n for g in self.joint_groups for n in g.names)

    @property
    def force_names(self) -> tuple[str, ...]:
        return tuple(n for g in self.force_groups for n in g.names)

    def body_index(self, name: str) -> int:
        """Index of body ``name`` (the ground is ``n_bodies``)."""
        if name == GROUND:
            return self.n_bodies
        if name in self.modal_names:
            return self.n_bodies + 1 + self.modal_names.index(name)
        if name in self.node_names:
            return self.n_bodies + 1 + len(self.modal_bodies) + self.node_names.index(name)
        try:
            return self.bodies.names.index(name)
        except ValueError:
            known = ", ".join(self.bodies.names + self.modal_names + self.node_names)
            raise KeyError(f"unknown body {name!r} (bodies: {known})") from None

    def q_slice(self, name: str) -> slice:
        """Slice of ``q`` holding body ``name``'s (r_G, p) (a modal body: (r₀, p, q_f))."""
        if name in self.modal_names:
            k = self.modal_names.index(name)
            return _modal.layout(self.n_bodies, self.modal_bodies)[0][k]
        i = self.body_index(name)
        return slice(7 * i, 7 * i + 7)

    def v_slice(self, name: str) -> slice:
        """Slice of ``v`` holding body ``name``'s (ṙ_G, ω̄) (a modal body: (ṙ₀, ω̄, q̇_f))."""
        if name in self.modal_names:
            k = self.modal_names.index(name)
            return _modal.layout(self.n_bodies, self.modal_bodies)[1][k]
        i = self.body_index(name)
        return slice(6 * i, 6 * i + 6)

    def joint_rows(self) -> dict[str, slice]:
        """Rows of Φ (and of the multipliers) belonging to each joint."""
        rows, start = {}, 0
        for group in self.joint_groups:
            n_eq = type(group.elements).n_equations
            for name in group.names:
                rows[name] = slice(start, start + n_eq)
                start += n_eq
        return rows

    def constraint_labels(self) -> tuple[str, ...]:
        """The joint of each row of Φ, as ``"joint 'name'"``."""
        return tuple(
            f"joint {name!r}" for name, rows in self.joint_rows().items()
            for _ in range(rows.stop - rows.start)
        )

    def _locate(self, groups: tuple[ElementGroup, ...], name: str, kind: str):
        for group in groups:
            if name in group.names:
                return group, group.names.index(name)
        raise KeyError(f"unknown {kind} {name!r}")

    # ----------------------------------------------------------------- parameters by name

    def _parameter_owners(self):
        """``(name, selector of its stacked object, row or None)`` for every body, modal body,
        joint and force element."""
        for row, name in enumerate(self.bodies.names):
            yield name, (lambda m: m.bodies), row
        for k, name in enumerate(self.modal_names):
            yield name, (lambda m, k=k: m.modal_bodies[k]), None
        for groups in ("joint_groups", "force_groups"):
            for g, group in enumerate(getattr(self, groups)):
                select = lambda m, g=g, groups=groups: getattr(m, groups)[g].elements
                for row, name in enumerate(group.names):
                    yield name, select, row

    def resolve_parameter(self, path: str) -> ParameterRef:
        """Parameters by element name: ``"body.mass"``, ``"spring.stiffness"``,
        ``"spring.stops.stiffness"``, ``"hinge.motion.rate"``, ``"beam.damping.ratios"``,
        ``"gravity"`` (a body, joint or force-element name, then a field path, indices
        allowed: ``"spring.point_i[0]"``). Raises ParameterError naming the items that exist."""
        if path == "gravity":
            return ParameterRef(lambda m: m.gravity)
        name, _, field = path.partition(".")
        for owner, select, row in self._parameter_owners():
            if owner == name:
                if not field:
                    break
                leading = () if row is None else (row,)
                return resolve_attribute_path(self, field, select, leading, name=path)
        else:
            raise ParameterError(
                path,
                f"no body, joint or force element {name!r}; the model has "
                f"{', '.join(owner for owner, _, _ in self._parameter_owners())} and 'gravity'",
            )
        raise ParameterError(path, f"expected '{name}.<field>' (or 'gravity')")

    def parameter_paths(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """``{"spring.stiffness": (shape, units), …, "gravity": ((3,), "m/s^2")}``: every
        float field of every named item, one element's shape (see :meth:`resolve_parameter`)."""
        out = {"gravity": ((3,), "m/s^2")}
        for name, select, row in self._parameter_owners():
            for field, (shape, units) in parameter_paths(select(self)).items():
                out[f"{name}.{field}"] = (shape if row is None else shape[1:], units)
        return out

    # ----------------------------------------------------------------- MechanicalSystem

    def _rigid(self, q: Array, v: Array | None = None):
        """The rigid bodies' parts of ``q`` (and ``v``)."""
        n = self.n_bodies
        return (q[: 7 * n], None if v is None else v[: 6 * n])

    def mass(self, q: Array) -> Array:
        if not self.modal_bodies:
            return self.bodies.mass_matrix()
        blocks = _modal.mass_blocks(self.modal_bodies, self.n_bodies, q)
        return jax.scipy.linalg.block_diag(self.bodies.mass_matrix(), *blocks)

    def qdot(self, q: Array, v: Array) -> Array:
        if not self.modal_bodies:
            return self.bodies.qdot(q, v)
        rigid = self.bodies.qdot(*self._rigid(q, v))
        parts = _modal.qdot_parts(self.modal_bodies, self.n_bodies, q, v)
        return jnp.concatenate([rigid, *parts])

    def kinematics(self, q: Array, v: Array | None = None) -> BodyKinematics:
        """Stacked kinematics of all bodies plus the ground (row ``n_bodies``), then the modal
        bodies' reference frames and the node attachments (see :mod:`._modal`)."""
        if not self.modal_bodies:
            return self.bodies.kinematics(q, v)
        rigid = self.bodies.kinematics(*self._rigid(q, v))
        rows = _modal.kinematics_rows(self.modal_bodies, self.node_rows, self.n_bodies, q, v)
        return jax.tree.map(lambda a, b: jnp.concatenate([a, b]), rigid, rows)

    # ----------------------------------------------------------------- internal states

    @property
    def n_internal(self) -> int:
        """The force elements' internal states, group after group (static)."""
        return sum(len(g.names) * g.state_size for g in self.force_groups)

    def internal_slices(self) -> dict[str, slice]:
        """Each force element's slice of the internal states ``z``, by name (elements with
        states only)."""
        out, start = {}, 0
        for group in self.force_groups:
            for name in group.names:
                out[name] = slice(start, start + group.state_size)
                start += group.state_size
        return {name: rows for name, rows in out.items() if rows.stop > rows.start}

    def initial_internal_state(self) -> Array:
        """The held internal states (see :meth:`with_internal_state`), else zeros: a fresh
        bristle carries no load."""
        if self.internal_state is not None:
            return self.internal_state
        return jnp.zeros((self.n_internal,))

    def with_internal_state(self, z: Array) -> MultibodyModel:
        z = jnp.asarray(z)
        if z.shape != (self.n_internal,):
            raise ValueError(
                f"with_internal_state: expected shape ({self.n_internal},), got {z.shape}"
            )
        return eqx.tree_at(lambda m: m.internal_state, self, z, is_leaf=lambda x: x is None)

    def internal_rate(self, t: ArrayLike, q: Array, v: Array) -> Array:
        return self.element_state_rates(t, self.kinematics(q, v))

    def _group_states(self, dtype) -> list[Array | None]:
        """Each force group's internal states ``(n_elements, state_size)``, None without."""
        z = self.initial_internal_state().astype(dtype)
        out, start = [], 0
        for group in self.force_groups:
            size = len(group.names) * group.state_size
            out.append(z[start : start + size].reshape(len(group.names), -1) if size else None)
            start += size
        return out

    def applied_wrenches(self, t: ArrayLike, kin: BodyKinematics) -> tuple[Array, Array]:
        """Sum of the force elements' loads on every :meth:`kinematics` row (at the held
        internal states): force (world, N) and moment about the row's origin (world, N·m),
        shapes ``(n_rows, 3)``."""
        force = jnp.zeros((self.n_rows, 3), dtype=kin.position.dtype)
        torque = jnp.zeros((self.n_rows, 3), dtype=kin.position.dtype)
        states = self._group_states(kin.position.dtype)
        for group, state in zip(self.force_groups, states, strict=True):
            if state is None:
                wrench = group.map("wrench", t, kin)
            else:
                wrench = group.map("loads", t, kin, state)[0]
            index = np.asarray(group.body_index, dtype=np.int32).reshape(-1)
            f = wrench.force.reshape(-1, 3)
            arm = wrench.point.reshape(-1, 3) - kin.position[index]
            force = force.at[index].add(f)
            torque = torque.at[index].add(jnp.cross(arm, f) + wrench.torque.reshape(-1, 3))
        return force, torque

    def element_state_rates(self, t: ArrayLike, kin: BodyKinematics) -> Array:
        """``ż`` ``(n_internal,)`` of the force elements with internal states (only those
        groups are evaluated; within one traced step XLA shares their work with
        :meth:`applied_wrenches`)."""
        states = self._group_states(kin.position.dtype)
        rates = [
            group.map("loads", t, kin, state)[1].reshape(-1)
            for group, state in zip(self.force_groups, states, strict=True)
            if state is not None
        ]
        return jnp.concatenate(rates) if rates else jnp.zeros((0,), kin.position.dtype)

    def rigid_body_forces(
        self, kin: BodyKinematics, omega_bar: Array, force: Array, torque: Array
    ) -> Array:
        """Generalized forces of the rigid bodies, shape ``(n, 6)`` = (world force + gravity,
        body-axes torque − ω̄ × J̄ω̄), from the loads of :meth:`applied_wrenches` and the
        body-frame angular velocities ``omega_bar`` (n, 3)."""
        n = self.n_bodies
        spin = matvec(self.bodies.inertia, omega_bar)
        body_torque = tmatvec(kin.rotation[:n], torque[:n])
        q_trans = force[:n] + self.bodies.mass[:, None] * self.gravity
        return jnp.concatenate([q_trans, body_torque - jnp.cross(omega_bar, spin)], axis=1)

    def forces(self, t: ArrayLike, q: Array, v: Array) -> Array:
        n = self.n_bodies
        kin = self.kinematics(q, v)
        force, torque = self.applied_wrenches(t, kin)
        omega_bar = v[: 6 * n].reshape(-1, 6)[:, 3:]
        rigid = self.rigid_body_forces(kin, omega_bar, force, torque).reshape(-1)
        if not self.modal_bodies:
            return rigid
        modal = _modal.force_blocks(
            self.modal_bodies, self.node_rows, n, self.gravity, q, v,
            force[n + 1 :], torque[n + 1 :],
        )  # fmt: skip
        return jnp.concatenate([rigid, *modal])

    def constraints(self, t: ArrayLike, q: Array) -> Array:
        kin = self.kinematics(q)
        parts = [group.map("constraint", t, kin).reshape(-1) for group in self.joint_groups]
        return jnp.concatenate(parts) if parts else jnp.zeros((0,), dtype=q.dtype)

    def sensors(self, t, q, v, vdot) -> dict[str, Array]:
        if not self.sensor_list:
            return {}
        lam = None
        if any(s.needs_multipliers for s in self.sensor_list):
            lam = self.multipliers(t, q, v, vdot)
        data = SensorInput(jnp.asarray(t), q, v, vdot, self.kinematics(q, v), lam)
        pairs = zip(self.sensor_names, self.sensor_list, strict=True)
        return {name: sensor(self, data) for name, sensor in pairs}

    # ----------------------------------------------------------------- states

    def initial_state(self) -> tuple[Array, Array]:
        """``(q0, v0)`` from the bodies' initial poses and velocities, as given (not assembled;
        see ``assemble`` and ``consistent_velocities``)."""
        q0, v0 = self.bodies.initial_state()
        if not self.modal_bodies:
            return q0, v0
        qs, vs = zip(*(b.initial_state() for b in self.modal_bodies), strict=True)
        return jnp.concatenate([q0, *qs]), jnp.concatenate([v0, *vs])

    def normalize(self, q: Array) -> Array:
        """``q`` with every quaternion scaled to unit norm (the motion is unchanged)."""
        qb = q[: 7 * self.n_bodies].reshape(-1, 7)
        rigid = jnp.concatenate([qb[:, :3], quat_normalize(qb[:, 3:])], axis=1).reshape(-1)
        if not self.modal_bodies:
            return rigid
        modal = _modal.normalize_parts(self.modal_bodies, self.n_bodies, q)
        return jnp.concatenate([rigid, *modal])

    def body_state(self, name: str, q: Array, v: Array | None = None) -> BodyState:
        """Body ``name``'s state read out of ``q`` (and ``v``), as a :class:`BodyState`."""
        i = self.body_index(name)
        if i == self.n_bodies:
            raise KeyError("the ground has no state")
        if name in self.node_names:
            raise KeyError(f"{name!r} is a node of a modal body, not a body")
        k = jax.tree.map(lambda x: x[i], self.kinematics(q, v))
        origin = jnp.zeros(3, dtype=q.dtype)
        vel = k.point_velocity(origin)
        omega_bar = k.rotation.T @ k.angular_velocity
        if name in self.modal_names:  # the reference frame; com_position of the deformed body
            qk = q[self.q_slice(name)]
            body = self.modal_bodies[self.modal_names.index(name)]
            com = _modal.centre_of_mass(body, qk)
            return BodyState(k.position, quat_normalize(qk[3:7]), vel, omega_bar, com)
        quat = quat_normalize(q[: 7 * self.n_bodies].reshape(-1, 7)[i, 3:])
        return BodyState(k.point(origin), quat, vel, omega_bar, k.position)

    def row_accelerations(self, q: Array, v: Array, vdot: Array) -> tuple[Array, Array]:
        """World acceleration of each :meth:`kinematics` row's origin (m/s², the COM of a rigid
        body, a node's deformed position) and world angular acceleration (rad/s²), from
        ``v̇``; shapes ``(n_rows, 3)``."""
        n = self.n_bodies
        vd = vdot[: 6 * n].reshape(-1, 6)
        rot = quat_to_matrix(q[: 7 * n].reshape(-1, 7)[:, 3:])
        zero = jnp.zeros((1, 3), dtype=q.dtype)
        acc, alpha = [vd[:, :3], zero], [matvec(rot, vd[:, 3:]), zero]
        if self.modal_bodies:
            a, w = _modal.row_accelerations(
                self.modal_bodies, self.node_rows, n, q, v, vdot
            )  # fmt: skip
            acc, alpha = acc + [a], alpha + [w]
        return jnp.concatenate(acc), jnp.concatenate(alpha)

    # ----------------------------------------------------------------- joints and elements

    def joint(self, name: str) -> AbstractJoint:
        """The joint ``name`` (unstacked, body names blanked)."""
        group, k = self._locate(self.joint_groups, name, "joint")
        return group.member(k)

    def joint_coordinates(self, name: str, q: Array) -> Array:
        """Coordinates of joint ``name`` at ``q`` (rad / m; see the joint classes)."""
        group, k = self._locate(self.joint_groups, name, "joint")
        return group.member(k).coordinates(*group.member_kinematics(k, self.kinematics(q)))

    def joint_residuals(self, t: ArrayLike, q: Array) -> dict[str, Array]:
        """``max |Φ|`` of each joint at ``q`` (m or dimensionless, mixed)."""
        phi = self.constraints(t, q)
        return {name: jnp.max(jnp.abs(phi[rows])) for name, rows in self.joint_rows().items()}

    def multipliers(self, t: ArrayLike, q: Array, v: Array, vdot: Array) -> Array:
        """λ with ``Φ_vᵀ λ = Q − M v̇`` (minimum-norm least squares, SVD), shape (n_c,)."""
        t = jnp.asarray(t, dtype=q.dtype)
        jac = constraint_jacobian(self, t, q, v)
        residual = self.forces(t, q, v) - self.mass(q) @ vdot
        op = lx.MatrixLinearOperator(jac.T)
        return lx.linear_solve(op, residual, solver=lx.SVD(), throw=False).value

    def joint_reaction(self, name: str, t: ArrayLike, q: Array, multipliers: Array) -> Array:
        """Load body i exerts on body j through joint ``name``: (F (3) N, τ (3) N·m) about the
        origin of frame j, in frame-j axes, from the multipliers (``−Φ_vᵀλ`` of its rows)."""
        group, k = self._locate(self.joint_groups, name, "joint")
        joint = group.member(k)
        lam = multipliers[self.joint_rows()[name]]
        ki, kj = group.member_kinematics(k, self.kinematics(q))
        on_j = group.body_index[k][1] != self.n_bodies  # else act on i and negate
        target = kj if on_j else ki
        t = jnp.asarray(t, dtype=q.dtype)

        def phi(dx):
            moved = _retract_body(target, dx)
            return joint.constraint(t, ki, moved) if on_j else joint.constraint(t, moved, kj)

        generalized = -jax.jacfwd(phi)(jnp.zeros(6, dtype=q.dtype)).T @ lam
        force, torque_com = generalized[:3], target.rotation @ generalized[3:]
        origin, axes = kj.frame(joint.frame_j)
        torque = torque_com + jnp.cross(target.position - origin, force)
        sign = 1.0 if on_j else -1.0
        return sign * jnp.concatenate([axes.T @ force, axes.T @ torque])

    def element_output(self, name: str, t: ArrayLike, q: Array, v: Array) -> Array:
        """The ``output`` of force element ``name`` (tension, contact force, …)."""
        group, k = self._locate(self.force_groups, name, "force element")
        kins = group.member_kinematics(k, self.kinematics(q, v))
        t = jnp.asarray(t, dtype=q.dtype)
        if group.state_size:  # at the states this copy holds (the simulation's, in sensors)
            state = self.initial_internal_state()[self.internal_slices()[name]]
            return group.member(k).output_at(t, state.astype(q.dtype), *kins)
        return group.member(k).output(t, *kins)

    # ----------------------------------------------------------------- energy

    def kinetic_energy(self, v: Array, q: Array | None = None) -> Array:
        """``½ vᵀ M(q) v`` (J); ``q`` is needed only with modal bodies."""
        if not self.modal_bodies:
            return 0.5 * v @ (self.bodies.mass_matrix() @ v)
        if q is None:
            raise ValueError("kinetic_energy(v, q): a model with modal bodies needs q")
        return 0.5 * v @ (self.mass(q) @ v)

    def potential_energy(self, t: ArrayLike, q: Array) -> Array:
        """Gravity ``−Σ m g·r_G`` plus the force elements' elastic energy (J)."""
        kin = self.kinematics(q)
        n = self.n_bodies
        energy = -jnp.sum(self.bodies.mass * (kin.position[:n] @ self.gravity))
        if self.modal_bodies:
            energy = energy + _modal.potential_energy(self.modal_bodies, n, self.gravity, q)
        for group in self.force_groups:
            energy = energy + jnp.sum(group.map("potential_energy", t, kin))
        return energy


# --------------------------------------------------------------------------- the builder


class ModelBuilder:
    """Assemble a :class:`MultibodyModel` from named parts.

    Example::

        b = ModelBuilder(gravity=(0, 0, -9.81))
        b.add_body(RigidBody("link", mass=1.0, inertia=(0.1, 0.1, 0.01)))
        b.add_joint("hinge", Revolute("ground", Frame((0, 0, 0)), "link", Frame((0, 0, 0.5))))
        b.add_sensor("angle", JointCoordinates("hinge"))
        model = b.build()

    Names are unique across bodies, joints, force elements and sensors; ``"ground"`` is the
    world. References to unknown bodies, joints or elements are reported by :meth:`build`
    (:class:`ModelError`, naming the item and the unknown name).
    """

    def __init__(self, gravity: ArrayLike = (0.0, 0.0, -9.81)):
        self.gravity = as_vector3(gravity)
        self._items: dict[str, tuple[str, Any]] = {}

    def _add(self, kind: str, name: str, item, expected: type) -> str:
        if not isinstance(name, str) or not name:
            raise ModelError(f"a {kind} needs a non-empty string name, got {name!r}")
        if name == GROUND:
            raise ModelError(f"{GROUND!r} is reserved for the fixed world frame")
        if name in self._items:
            raise ModelError(f"duplicate name {name!r}: already used by a {self._items[name][0]}")
        if not isinstance(item, expected):
            raise ModelError(f"{kind} {name!r}: expected a {expected.__name__}, got {item!r}")
        self._items[name] = (kind, item)
        return name

    def add_body(self, body: RigidBody | ModalBody) -> str:
        """Add a rigid or modal body (named by ``body.name``); returns the name. Attach to FE
        node ``k`` of a modal body ``"beam"`` by the name ``node("beam", k)`` = ``"beam@k"``."""
        if not isinstance(body, RigidBody | ModalBody):
            raise ModelError(f"expected a RigidBody or a ModalBody, got {body!r}")
        return self._add("body", body.name, body, type(body))

    def add_joint(self, name: str, joint: AbstractJoint) -> str:
        return self._add("joint", name, joint, AbstractJoint)

    def add_force(self, name: str, element: AbstractForceElement) -> str:
        return self._add("force element", name, element, AbstractForceElement)

    def add_sensor(self, name: str, sensor: AbstractSensor) -> str:
        return self._add("sensor", name, sensor, AbstractSensor)

    def _of_kind(self, kind: str) -> dict[str, Any]:
        return {name: item for name, (k, item) in self._items.items() if k == kind}

    def build(self) -> MultibodyModel:
        everything = self._of_kind("body")
        if not everything:
            raise ModelError("a model needs at least one body")
        bodies = {n: b for n, b in everything.items() if isinstance(b, RigidBody)}
        modal = {n: b for n, b in everything.items() if isinstance(b, ModalBody)}
        joints = self._of_kind("joint")
        index = {name: i for i, name in enumerate(bodies)} | {GROUND: len(bodies)}
        index |= {name: len(bodies) + 1 + k for k, name in enumerate(modal)}
        known = ", ".join([GROUND, *everything])
        node_rows: dict[str, tuple[int, int]] = {}

        def add_node(kind: str, name: str, b: str) -> None:
            try:
                found = _modal.check_nodes(modal, b)
            except ValueError as err:
                raise ModelError(f"{kind} {name!r}: {err}", name) from None
            if found is not None and b not in index:
                node_rows[b] = (list(modal).index(found[0]), found[1])
                index[b] = len(bodies) + len(modal) + len(node_rows)

        def attach(kind: str, name: str, element) -> tuple[int, ...]:
            names = [getattr(element, f) for f in element.attachments]
            for b in names:
                add_node(kind, name, b)
                if b not in index:
                    raise ModelError(f"{kind} {name!r}: unknown body {b!r} (bodies: {known})", name)
            if len(names) == 2 and names[0] == names[1]:
                raise ModelError(f"{kind} {name!r} connects body {names[0]!r} to itself", name)
            return tuple(index[b] for b in names)

        joint_list = [(n, j, attach("joint", n, j)) for n, j in joints.items()]
        force_list = []
        for name, element in self._of_kind("force element").items():
            try:
                resolved = element.resolve(joints)
            except ValueError as err:
                raise ModelError(f"force element {name!r}: {err}", name) from None
            force_list.append((name, resolved, attach("force element", name, resolved)))
        sensors = self._of_kind("sensor")
        forces = {n for n, *_ in force_list}
        for name, sensor in sensors.items():
            for kind, ref in sensor.references():
                if kind == "body":
                    add_node("sensor", name, ref)
                ok = {"body": ref in index, "joint": ref in joints, "force": ref in forces}[kind]
                if not ok:
                    raise ModelError(f"sensor {name!r}: unknown {kind} {ref!r}", name)
        return MultibodyModel(
            bodies=BodyStack.from_bodies(list(bodies.values())),
            gravity=self.gravity,
            joint_groups=stack_elements(joint_list),
            force_groups=stack_elements(force_list),
            sensor_list=tuple(sensors.values()),
            sensor_names=tuple(sensors),
            modal_bodies=tuple(modal.values()),
            node_rows=tuple(node_rows.values()),
            node_names=tuple(node_rows),
        )
