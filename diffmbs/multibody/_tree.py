"""Joint (relative) coordinates: a multibody model as a kinematic tree closed by constraints.

:class:`JointCoordinateModel` wraps a :class:`~diffmbs.multibody.MultibodyModel` (the *full*
model, in maximal coordinates, which keeps every parameter, force element and sensor) and
describes the same motion with far fewer coordinates:

* a spanning tree of the joints is chosen breadth-first from the ground (shallowest tree;
  ``cut=`` names joints to keep out of it). Every tree joint that has a joint-coordinate form
  (:attr:`~diffmbs.multibody.AbstractJoint.motion_sizes`: revolute, prismatic, cylindrical,
  planar, universal, spherical, fixed) contributes its own coordinates and is satisfied exactly;
* the other joints (the cut joints that close loops, distance and prescribed joints) stay
  constraints ``Φ(t, q) = 0`` on the poses the tree gives, solved by the KKT machinery of
  :mod:`diffmbs.system`;
* when the search stops, the first body not reached floats — its coordinates are those of the
  full model (COM position, quaternion; ṙ_G, ω̄) — and the search goes on from it;
* a modal body's reference frame is a tree body like a rigid one (its origin in place of a
  COM); its modal coordinates are its own (``q_slice("<body>.modes")``), and with modal bodies
  the full model's equations are projected block by block
  (:meth:`JointCoordinateModel._projected_full`).

State layout (:mod:`._tree_layout`): the tree joints' coordinates in the full model's joint
order (``q_slice(joint)``), the floating bodies' (``q_slice(body)``), then the modal
coordinates. Spherical joints and floating bodies carry a quaternion (4 coordinates, 3
velocities: ω in the child frame's axes).

Poses: body k's (R_k, r_G,k) = parent pose ∘ A_k(q), with ``A_k`` = (joint frame on the parent) ∘
joint motion ∘ (joint frame on the child)⁻¹, for all bodies at once by pointer jumping:
⌈log₂ depth⌉ vectorised compositions, so the traced graph grows only with the logarithm of the
tree's depth. Kinematics are spatial (Plücker twists (ω, velocity of the body point at the
world origin), world axes): each joint's unit twists and the rate of its relative twist come
from a small forward-mode derivative of its local transform alone, body velocities and
velocity-product accelerations from masked sums over the static ancestry. The equations of
motion are the full model's projected onto the tree (Jourdain / Kane), ``M = Jᵀ M̄ J`` and
``Q = Jᵀ (Q̄ − M̄ J̇ v)`` with ``M̄`` the constant block-diagonal mass matrix and ``Q̄`` the full
model's forces (gravity, force elements, contact, gyroscopic torques), evaluated without J by
the composite-rigid-body method (:meth:`JointCoordinateModel.mass_and_forces`).

Use it for speed: a 30-link chain has 30 coordinates instead of 210 and no constraint at all.
Sensors, energies, reactions and parameters are the full model's (:meth:`to_maximal`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs._linalg import matvec, spd_solve, tmatvec
from diffmbs.multibody import _modal
from diffmbs.multibody._bodies import BodyKinematics
from diffmbs.multibody._model import ElementGroup, ModelError, MultibodyModel
from diffmbs.multibody._tree_layout import Layout, build_layout
from diffmbs.parameters import ParameterRef
from diffmbs.rotations import (
    matrix_to_quat,
    quat_derivative,
    quat_normalize,
    quat_to_matrix,
    unskew,
)
from diffmbs.system import MechanicalSystem

__all__ = ["JointCoordinateModel", "in_joint_coordinates"]

_ASSEMBLY_TOLERANCE = 1e-6
"""Largest tree-joint residual (m or dimensionless) :meth:`JointCoordinateModel.from_maximal`
accepts: the maximal state must satisfy the tree joints."""


def _matmul(a: Array, b: Array) -> Array:
    """Stacked 3×3 products ``(..., 3, 3)`` by broadcasting (any leading shape)."""
    return jnp.sum(a[..., :, :, None] * b[..., None, :, :], axis=-2)


class _Block(NamedTuple):
    """Bodies moved by the tree joints of one group (or the floating bodies): static ``child``,
    ``parent`` (m,) and ``v_index`` (m, nv); the local transforms (R_A (m, 3, 3), t_A (m, 3)),
    the child's pose in its parent's COM frame; the joints' unit twists ``units`` (m, nv, 6)
    and the rates of their relative twists at v̇ = 0, ``twist_rates`` (m, 6), both as (ω, v at
    the parent's COM) in parent axes."""

    child: tuple[int, ...]
    parent: tuple[int, ...]
    v_index: np.ndarray
    transform: tuple[Array, Array]
    units: Array | None = None
    twist_rates: Array | None = None


class _TreeMotion(NamedTuple):
    """World kinematics of the tree: rotations (n, 3, 3), COM positions (n, 3), the joints'
    unit twists (n_v, 6) and, for a given v, the bodies' spatial velocities (n, 6) and
    velocity-product accelerations (n, 6) (the rates of the spatial velocities at v̇ = 0). All
    twists are (ω, velocity of the body point at the world origin), world axes."""

    rotation: Array
    position: Array
    twists: Array
    velocity: Array | None = None
    bias: Array | None = None


def _to_world(r_p: Array, x_p: Array, twist: Array) -> Array:
    """Twists (..., 6) given at a frame with pose (R_p, x_p), in its axes → world origin, axes."""
    omega = matvec(r_p, twist[..., :3])
    return jnp.concatenate([omega, matvec(r_p, twist[..., 3:]) + jnp.cross(x_p, omega)], -1)


def _motion_cross(a: Array, b: Array) -> Array:
    """Spatial cross product of motion vectors ``a × b`` (..., 6) = (ω, v)."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return jnp.concatenate([jnp.cross(wa, wb), jnp.cross(wa, vb) + jnp.cross(va, wb)], -1)


def _body_frame(tm: _TreeMotion) -> tuple[Array, Array]:
    """The full model's body velocities v̄ (n, 6) = (ṙ_G world, ω̄ body axes) and their
    velocity-product accelerations J̇v (n, 6) from the spatial ones of ``tm``."""
    r, x = tm.rotation, tm.position
    omega, alpha = tm.velocity[:, :3], tm.bias[:, :3]
    com_velocity = tm.velocity[:, 3:] + jnp.cross(omega, x)
    com_bias = tm.bias[:, 3:] + jnp.cross(alpha, x) + jnp.cross(omega, com_velocity)
    vbar = jnp.concatenate([com_velocity, tmatvec(r, omega)], axis=1)
    return vbar, jnp.concatenate([com_bias, tmatvec(r, alpha)], axis=1)


def _joint_rate(element, coordinates, velocity):
    return element.motion_qdot(coordinates, velocity)


def _compose(a: tuple[Array, Array], b: tuple[Array, Array]) -> tuple[Array, Array]:
    """Stacked rigid transforms ``(R, t)``: ``a ∘ b = (R_a R_b, t_a + R_a t_b)``."""
    ra, ta = a
    rb, tb = b
    return _matmul(ra, rb), ta + matvec(ra, tb)


def _joint_transform(reverse_all: bool, joint, frames, flip, coordinates):
    """Local transform of one tree joint's child: pose of its COM frame in its parent's COM
    frame, ``(frame on the parent) ∘ motion ∘ (frame on the child)⁻¹`` (the motion inverted
    when the parent is the joint's body j)."""
    (r_i, t_i), (r_j, t_j) = frames
    motion = joint.motion(coordinates)

    def chain(a, m, b):
        (ra, ta), (rm, tm), (rb, tb) = a, m, b
        r = _matmul(_matmul(ra, rm), jnp.swapaxes(rb, -1, -2))
        return r, ta + matvec(ra, tm) - matvec(r, tb)

    forward = lambda: chain((r_i, t_i), motion, (r_j, t_j))  # noqa: E731
    backward = lambda: chain(  # noqa: E731
        (r_j, t_j), (jnp.swapaxes(motion[0], -1, -2), -tmatvec(motion[0], motion[1])), (r_i, t_i)
    )
    if flip is None:
        return backward() if reverse_all else forward()
    return jax.tree.map(lambda b, f: jnp.where(flip, b, f), backward(), forward())


def _free_transform(coordinates):
    """A floating body: its COM position and quaternion are the pose (parent: the ground)."""
    return quat_to_matrix(coordinates[3:]), coordinates[:3]


def _free_rate(element, coordinates, velocity):
    del element
    return jnp.concatenate([velocity[:3], quat_derivative(coordinates[3:], velocity[3:])])


def _subgroup(group: ElementGroup, members: tuple[int, ...]) -> ElementGroup:
    """The members ``members`` of a stacked group, still stacked."""
    index = np.asarray(members, dtype=np.int32)
    elements = jax.tree.map(lambda x: x[index] if eqx.is_array(x) else x, group.elements)
    return ElementGroup(
        elements,
        tuple(group.names[k] for k in members),
        tuple(group.body_index[k] for k in members),
    )


def _by_index(parts: list[Array], index: list[np.ndarray], size: int) -> Array:
    """Scatter flat ``parts`` to positions ``index`` (together a permutation of ``range(size)``)
    with one concatenation and one gather."""
    flat = np.concatenate([np.asarray(i, dtype=np.int64).reshape(-1) for i in index])
    if flat.size != size or np.any(np.sort(flat) != np.arange(size)):
        raise AssertionError("internal: the index blocks do not tile the vector")
    values = jnp.concatenate([p.reshape(-1) for p in parts])
    return values[np.argsort(flat)]


def in_joint_coordinates(model: MultibodyModel, cut: tuple[str, ...] = ()) -> JointCoordinateModel:
    """``model`` in joint coordinates: a spanning tree of the joints, the joints in ``cut`` and
    the loop closures kept as constraints. Much faster for chains and trees; the same sensors
    and parameters (names included)."""
    return JointCoordinateModel.from_model(model, cut)


class JointCoordinateModel(MechanicalSystem):
    """A :class:`~diffmbs.multibody.MultibodyModel` in joint coordinates (module docstring).

    ``JointCoordinateModel.from_model(model, cut=())`` (or ``mb.in_joint_coordinates(model)``).
    Shapes: ``q`` (n_q,), ``v`` (n_v,) as laid out by :meth:`q_slice` / :meth:`v_slice`. The
    float leaves are the full model's (``full``): its parameters, by name through
    :meth:`with_parameter`.
    """

    full: MultibodyModel
    layout: Layout = eqx.field(static=True)

    @classmethod
    def from_model(cls, model: MultibodyModel, cut: tuple[str, ...] = ()) -> JointCoordinateModel:
        """Choose the tree (breadth-first from the ground, joints in ``cut`` excluded)."""
        return cls(model, build_layout(model, tuple(cut)))

    # ----------------------------------------------------------------- layout

    @property
    def n_q(self) -> int:
        return self.layout.n_q

    @property
    def n_v(self) -> int:
        return self.layout.n_v

    @property
    def tree_joints(self) -> tuple[str, ...]:
        """Joints whose coordinates are state (the others are constraints)."""
        groups = self.full.joint_groups
        return tuple(groups[t.group].names[k] for t in self.layout.tree for k in t.members)

    @property
    def loop_joints(self) -> tuple[str, ...]:
        """Joints kept as constraints ``Φ(t, q) = 0`` (loop closures, distance, prescribed)."""
        groups = self.full.joint_groups
        return tuple(groups[g].names[k] for g, members in self.layout.loops for k in members)

    def constraint_labels(self) -> tuple[str, ...]:
        """The joint of each row of Φ (the loop joints'), as ``"joint 'name'"``."""
        groups = self.full.joint_groups
        return tuple(
            f"joint {groups[g].names[k]!r}"
            for g, members in self.layout.loops
            for k in members
            for _ in range(type(groups[g].elements).n_equations)
        )

    @property
    def floating_bodies(self) -> tuple[str, ...]:
        names = self.full.bodies.names + self.full.modal_names
        return tuple(names[b] for b in self.layout.free)

    def _slice(self, table, name: str) -> slice:
        for item, start, stop in table:
            if item == name:
                return slice(start, stop)
        known = ", ".join(item for item, _, _ in table)
        raise KeyError(f"{name!r} has no joint coordinates (tree joints, floating bodies: {known})")

    def q_slice(self, name: str) -> slice:
        """Slice of ``q`` holding tree joint ``name``'s coordinates (or a floating body's)."""
        return self._slice(self.layout.q_slices, name)

    def v_slice(self, name: str) -> slice:
        return self._slice(self.layout.v_slices, name)

    # ----------------------------------------------------------------- parameters

    def resolve_parameter(self, path: str) -> ParameterRef:
        """The full model's parameters, by the same names (see
        :meth:`MultibodyModel.resolve_parameter`)."""
        inner = self.full.resolve_parameter(path)
        return ParameterRef(lambda m: inner.where(m.full), inner.index)

    def parameter_paths(self) -> dict[str, tuple[tuple[int, ...], str]]:
        return self.full.parameter_paths()

    # ----------------------------------------------------------------- kinematics

    def _tree_parts(self):
        for tg in self.layout.tree:
            yield tg, _subgroup(self.full.joint_groups[tg.group], tg.members)

    def _block_specs(self) -> list[tuple]:
        """Per block of bodies (the tree joints of one group; the floating bodies): static
        ``(child, parent, q_index (m, nq), v_index (m, nv))``, the local-transform and
        coordinate-rate functions, and their per-member arguments (element, frames, flip)."""
        com = self.full.bodies.com
        n_frames = self.layout.n_tree - self.full.n_bodies  # modal frames (origin: com = 0)
        com = jnp.concatenate([com, jnp.zeros((n_frames + 1, 3), com.dtype)])
        tree_index = self.layout.tree_index(self.full.n_bodies)
        specs = []
        for tg, sub in self._tree_parts():
            m = len(tg.members)
            el = sub.elements
            bi, bj = tree_index[np.asarray(sub.body_index, dtype=np.int32).T]
            frames = (
                (el.frame_i.rotation, el.frame_i.point - com[bi]),
                (el.frame_j.rotation, el.frame_j.point - com[bj]),
            )
            rev = np.asarray(tg.reversed)
            flip = None if rev.all() or not rev.any() else jnp.asarray(rev)
            local = functools.partial(_joint_transform, bool(rev.all()))
            qi = np.asarray(tg.q_index, dtype=np.int32).reshape(m, -1)
            vi = np.asarray(tg.v_index, dtype=np.int32).reshape(m, -1)
            specs.append((tg.child, tg.parent, qi, vi, local, _joint_rate, (el, frames, flip)))
        if self.layout.free:
            qi = np.asarray(self.layout.free_q)[:, None] + np.arange(7)
            vi = np.asarray(self.layout.free_v)[:, None] + np.arange(6)
            ground = (self.layout.n_tree,) * len(self.layout.free)
            specs.append((self.layout.free, ground, qi, vi, _free_transform, _free_rate, ()))
        return specs

    def _blocks(self, q: Array, v: Array | None = None, twists: bool = True) -> list[_Block]:
        """The tree's bodies in blocks, each with its local transforms and, if ``twists``, its
        joints' unit twists and (when ``v`` is given) the rates of their relative twists
        (:class:`_Block`)."""
        out = []
        for child, parent, qi, vi, local, rate, args in self._block_specs():
            coords = q[qi]
            transform = eqx.filter_vmap(local)(*args, coords)
            if not twists:
                out.append(_Block(child, parent, vi, transform))
                continue
            nv = vi.shape[1]

            def motion(*a, local=local, rate=rate, nv=nv):
                *member, c, w = a
                element = member[0] if member else None

                def twist(c_, w_):  # relative twist (ω, v at the parent's COM), parent axes
                    (r, t), (dr, dt) = jax.jvp(
                        lambda c__: local(*member, c__), (c_,), (rate(element, c_, w_),)
                    )
                    omega = unskew(_matmul(dr, jnp.swapaxes(r, -1, -2)))
                    return jnp.concatenate([omega, dt - jnp.cross(omega, t)])

                units = jax.jacfwd(lambda w_: twist(c, w_))(jnp.zeros(nv, c.dtype)).T
                if w is None:
                    return units, None
                return units, jax.jvp(lambda c_: twist(c_, w), (c,), (rate(element, c, w),))[1]

            rates = None if v is None else v[vi]
            units, twist_rates = eqx.filter_vmap(motion)(*args, coords, rates)
            out.append(_Block(child, parent, vi, transform, units, twist_rates))
        return out

    def _poses(self, blocks: list[_Block]) -> tuple[Array, Array]:
        """World poses of all bodies (ground appended as row n) by pointer jumping."""
        order = np.argsort(np.concatenate([np.asarray(b.child) for b in blocks]))
        r = jnp.concatenate([b.transform[0] for b in blocks])[order]
        t = jnp.concatenate([b.transform[1] for b in blocks])[order]
        r = jnp.concatenate([r, jnp.eye(3, dtype=r.dtype)[None]])
        t = jnp.concatenate([t, jnp.zeros((1, 3), t.dtype)])
        for anc in self.layout.jumps:
            index = np.asarray(anc)
            r, t = _compose((r[index], t[index]), (r, t))
        return r, t

    def poses(self, q: Array) -> tuple[Array, Array]:
        """Rotation matrices (n, 3, 3) and COM positions (n, 3) of all tree bodies (world; a
        modal body's reference frame and its origin after the rigid bodies)."""
        r, x = self._poses(self._blocks(q, twists=False))
        n = self.layout.n_tree
        return r[:n], x[:n]

    def qdot(self, q: Array, v: Array) -> Array:
        parts, index = [], []
        for _, _, qi, vi, _, rate, args in self._block_specs():
            element = args[0] if args else None
            parts.append(eqx.filter_vmap(rate)(element, q[qi], v[vi]))
            index.append(qi)
        for q_at, v_at, body in zip(self.layout.modal_q, self.layout.modal_v,
                                    self.full.modal_bodies, strict=True):  # fmt: skip
            parts.append(v[v_at : v_at + body.n_modes])
            index.append(np.arange(q_at, q_at + body.n_modes))
        return _by_index(parts, index, self.n_q)

    def _motion(self, q: Array, v: Array | None = None) -> _TreeMotion:
        """Poses, world unit twists and, when ``v`` is given, spatial velocities and velocity-
        product accelerations of all bodies (:class:`_TreeMotion`)."""
        n = self.layout.n_tree
        v = None if v is None else v[: self.layout.n_rigid_v]
        blocks = self._blocks(q, v)
        r, x = self._poses(blocks)
        twists, index, rates, children = [], [], [], []
        for b in blocks:
            r_p, x_p = r[np.asarray(b.parent)], x[np.asarray(b.parent)]
            twists.append(_to_world(r_p[:, None], x_p[:, None], b.units))
            index.append(b.v_index)
            if v is not None:
                rates.append(_to_world(r_p, x_p, b.twist_rates))
                children.append(np.asarray(b.child))
        order = np.argsort(np.concatenate([i.reshape(-1) for i in index]))
        twists = jnp.concatenate([s.reshape(-1, 6) for s in twists])[order]  # (n_rigid_v, 6)
        r, x = r[:n], x[:n]
        if v is None:
            return _TreeMotion(r, x, twists)
        velocity = self._moves(v.dtype) @ (twists * v[:, None])  # (n, 6)
        rates = jnp.concatenate(rates)[np.argsort(np.concatenate(children))]
        parent_velocity = jnp.concatenate([velocity, jnp.zeros((1, 6), v.dtype)])
        # d/dt (X_p σ) = V_p × X_p σ + X_p σ̇ and V_p × (V_child − V_p) = V_p × V_child
        steps = _motion_cross(parent_velocity[np.asarray(self.layout.parent)], velocity) + rates
        ancestry = jnp.asarray(np.asarray(self.layout.ancestry, dtype=v.dtype))
        return _TreeMotion(r, x, twists, velocity, ancestry @ steps)

    def _moves(self, dtype) -> Array:
        """``[k, c]`` = 1 where velocity coordinate c moves tree body k (its joint is on k's
        path), shape (n_tree, n_rigid_v)."""
        owner = np.asarray(self.layout.column_body)
        return jnp.asarray(np.asarray(self.layout.ancestry, dtype=dtype)[:, owner])

    def jacobian(self, q: Array) -> tuple[Array, Array, Array]:
        """``(R, r_G, J)``: rotations (n, 3, 3), COM positions (n, 3) and ``J = ∂v̄/∂v``
        (n, 6, n_v), v̄ = (ṙ_G world, ω̄ body axes) per body.

        Column c of J is the world unit twist (ω_c, v_O,c) of its joint; it moves every body k
        of the joint's subtree with ``ṙ_G,k = v_O,c + ω_c × r_G,k``, ``ω̄_k = R_kᵀ ω_c``."""
        tm = self._motion(q)
        return tm.rotation, tm.position, self._jacobian(tm)

    def _jacobian(self, tm: _TreeMotion) -> Array:
        omega, speed = tm.twists[:, :3], tm.twists[:, 3:]
        moves = self._moves(omega.dtype)[..., None]
        linear = moves * (speed[None] + jnp.cross(omega[None], tm.position[:, None]))
        angular = moves * tmatvec(tm.rotation[:, None], omega[None])
        return jnp.swapaxes(jnp.concatenate([linear, angular], axis=-1), 1, 2)

    def body_motion(self, q: Array, v: Array) -> tuple[Array, Array, Array, Array, Array]:
        """``(R, r_G, v̄, J̇v, J)``: as :meth:`jacobian`, plus v̄ = J v (n, 6) and the
        velocity-product accelerations ``J̇ v`` (n, 6), both as (COM world, body axes)."""
        tm = self._motion(q, v)
        vbar, bias = _body_frame(tm)
        return tm.rotation, tm.position, vbar, bias, self._jacobian(tm)

    def _kinematics(self, r: Array, x: Array, vbar: Array | None = None) -> BodyKinematics:
        if vbar is None:
            return self.full.bodies.with_ground(r, x)
        return self.full.bodies.with_ground(r, x, vbar[:, :3], vbar[:, 3:])

    # ----------------------------------------------------------------- MechanicalSystem

    def mass_and_forces(self, t: ArrayLike, q: Array, v: Array) -> tuple[Array, Array]:
        """Composite-rigid-body mass matrix and projected forces, ``M = Jᵀ M̄ J`` and
        ``Q = Jᵀ (Q̄ − M̄ J̇v)`` without forming J: with the bodies' spatial inertias at the
        world origin summed over subtrees, ``M_cd = s_cᵀ I_sub(d) s_d`` for joint c on the path
        of joint d, and ``Q_c = s_c · w_sub(c)`` with w the bodies' wrenches at the origin.
        With modal bodies, whose mass depends on their deformation, J is formed
        (:meth:`_projected_full`)."""
        if self.full.modal_bodies:
            return self._projected_full(t, q, v)
        tm = self._motion(q, v)
        r, x = tm.rotation, tm.position
        vbar, bias = _body_frame(tm)
        kin = self._kinematics(r, x, vbar)
        force, torque = self.full.applied_wrenches(t, kin)
        qbar = self.full.rigid_body_forces(kin, vbar[:, 3:], force, torque)
        bodies = self.full.bodies
        f = qbar[:, :3] - bodies.mass[:, None] * bias[:, :3]
        moment = matvec(r, qbar[:, 3:] - matvec(bodies.inertia, bias[:, 3:]))
        wrench = jnp.concatenate([moment + jnp.cross(x, f), f], axis=1)  # (n, 6) at the origin
        moves = self._moves(q.dtype)
        forces = jnp.sum(tm.twists * (moves.T @ wrench), axis=1)
        # subtree inertias at the origin: mass, first moment m r_G, I_world + m (|r|² 1 − r rᵀ)
        m = bodies.mass
        inertia = _matmul(_matmul(r, bodies.inertia), jnp.swapaxes(r, 1, 2))
        inertia += m[:, None, None] * (
            jnp.sum(x * x, axis=1)[:, None, None] * jnp.eye(3) - x[:, :, None] * x[:, None, :]
        )
        stacked = jnp.concatenate([m[:, None], m[:, None] * x, inertia.reshape(-1, 9)], axis=1)
        sub = moves.T @ stacked  # (n_v, 13): each column's subtree
        omega, speed = tm.twists[:, :3], tm.twists[:, 3:]
        moment_arm = sub[:, 1:4]
        momentum = sub[:, :1] * speed - jnp.cross(moment_arm, omega)
        angular = matvec(sub[:, 4:].reshape(-1, 3, 3), omega) + jnp.cross(moment_arm, speed)
        g = omega @ angular.T + speed @ momentum.T  # g[c, d] = s_c · (I_sub(d) s_d)
        owner = np.asarray(self.layout.column_body)
        on_path = np.asarray(self.layout.ancestry)[owner][:, owner].T  # [c, d]: c on d's path
        mass = jnp.where(on_path, g, jnp.where(on_path.T, g.T, 0.0))
        return mass, forces

    def mass(self, q: Array) -> Array:
        return self.mass_and_forces(0.0, q, jnp.zeros(self.n_v, q.dtype))[0]

    def forces(self, t: ArrayLike, q: Array, v: Array) -> Array:
        return self.mass_and_forces(t, q, v)[1]

    def constraints(self, t: ArrayLike, q: Array) -> Array:
        if not self.layout.loops:
            return jnp.zeros((0,), dtype=q.dtype)
        if self.full.modal_bodies:
            kin = self.full.kinematics(self.to_maximal(q)[0])
        else:
            kin = self._kinematics(*self.poses(q))
        parts = [
            _subgroup(self.full.joint_groups[g], members).map("constraint", t, kin).reshape(-1)
            for g, members in self.layout.loops
        ]
        return jnp.concatenate(parts)

    def sensors(self, t, q, v, vdot) -> dict[str, Array]:
        if not self.full.sensor_list:
            return {}
        return self.full.sensors(t, *self.to_maximal(q, v, vdot))

    # ----------------------------------------------------------------- modal bodies

    def _full_state(self, q: Array, v: Array) -> tuple[Array, Array, Array, Array]:
        """The full model's ``(q̄, v̄, J, J̇v)`` at joint coordinates ``(q, v)``: ``v̄ = J v``,
        shapes (n̄_q,), (n̄_v,), (n̄_v, n_v), (n̄_v,). A modal body's frame moves as a tree body
        (its origin in place of a COM); its modal rates are its own coordinates' (rows of the
        identity in J, no velocity-product term)."""
        n, layout = self.full.n_bodies, self.layout
        tm = self._motion(q, v)
        bias = _body_frame(tm)[1]
        jac = self._jacobian(tm)  # (n_tree, 6, n_rigid_v)
        q_max, v_max = self._full_coordinates(tm, jac, q, v)
        jac = jnp.pad(jac, ((0, 0), (0, 0), (0, self.n_v - layout.n_rigid_v)))
        j_parts = [jac[:n].reshape(-1, self.n_v)]
        b_parts = [bias[:n].reshape(-1)]
        for k, body in enumerate(self.full.modal_bodies):
            m = body.n_modes
            j_parts += [jac[n + k], jnp.asarray(np.eye(m, self.n_v, layout.modal_v[k]), q.dtype)]
            b_parts += [bias[n + k], jnp.zeros(m, q.dtype)]
        return q_max, v_max, jnp.concatenate(j_parts), jnp.concatenate(b_parts)

    def _full_coordinates(self, tm: _TreeMotion, jac: Array, q: Array, v: Array):
        """The full model's ``(q̄, v̄)`` from the tree's motion and Jacobian (n_tree, 6, n_rv)."""
        n, layout = self.full.n_bodies, self.layout
        quat = matrix_to_quat(tm.rotation)
        frame_velocity = jac @ v[: layout.n_rigid_v]  # (n_tree, 6)
        q_parts = [jnp.concatenate([tm.position[:n], quat[:n]], axis=1).reshape(-1)]
        v_parts = [frame_velocity[:n].reshape(-1)]
        for k, body in enumerate(self.full.modal_bodies):
            m, q_at, v_at = body.n_modes, layout.modal_q[k], layout.modal_v[k]
            q_parts.append(jnp.concatenate([tm.position[n + k], quat[n + k], q[q_at : q_at + m]]))
            v_parts += [frame_velocity[n + k], v[v_at : v_at + m]]
        return jnp.concatenate(q_parts), jnp.concatenate(v_parts)

    def _projected_full(self, t: ArrayLike, q: Array, v: Array) -> tuple[Array, Array]:
        """``M = Jᵀ M̄ J``, ``Q = Jᵀ (Q̄ − M̄ J̇v)`` with the full model's forces, block by block:
        M̄ is block diagonal, a modal body's modal rates are its own coordinates, so only the
        tree bodies' 6 × n_rigid_v Jacobians multiply (on the 3-D shock machine the dense
        product with J took ~40 µs of a ~150 µs right-hand side)."""
        n = self.full.n_bodies
        tm = self._motion(q, v)
        bias = _body_frame(tm)[1]  # (n_tree, 6)
        jac = self._jacobian(tm)  # (n_tree, 6, n_rv)
        q_max, v_max = self._full_coordinates(tm, jac, q, v)
        modal = _modal.mass_blocks(self.full.modal_bodies, n, q_max)
        frame_mass = jnp.concatenate([self.full.bodies.mass_blocks(),
                                      jnp.stack([b[:6, :6] for b in modal])])  # fmt: skip
        force = self.full.forces(t, q_max, v_max)
        _, v_slices = _modal.layout(n, self.full.modal_bodies)
        frame_force = jnp.concatenate([force[: 6 * n].reshape(n, 6),
                                       jnp.stack([force[s][:6] for s in v_slices])])  # fmt: skip
        net = frame_force - jnp.einsum("kab,kb->ka", frame_mass, bias)
        rigid_mass = jnp.einsum("kai,kab,kbj->ij", jac, frame_mass, jac)
        coupling = [jac[n + k].T @ b[:6, 6:] for k, b in enumerate(modal)]  # (n_rv, m) each
        mass = jnp.block([[rigid_mass, *coupling],
                          [jnp.concatenate([c.T for c in coupling]),
                           jax.scipy.linalg.block_diag(*(b[6:, 6:] for b in modal))]])
        modal_force = [force[s][6:] - b[6:, :6] @ bias[n + k]
                       for k, (s, b) in enumerate(zip(v_slices, modal, strict=True))]
        return mass, jnp.concatenate([jnp.einsum("kai,ka->i", jac, net), *modal_force])

    # ----------------------------------------------------------------- states

    @eqx.filter_jit  # called eagerly (initial states, post-processing): op by op it is slow
    def to_maximal(
        self, q: Array, v: Array | None = None, vdot: Array | None = None
    ) -> tuple[Array, ...]:
        """The full model's ``q`` — and ``v``, ``v̇`` when given — for this model's state (and
        accelerations)."""
        if self.full.modal_bodies:
            q_max, v_max, jac, bias = self._full_state(q, jnp.zeros(self.n_v, q.dtype) if v is None
                                                       else v)  # fmt: skip
            if v is None:
                return (q_max,)
            return (q_max, v_max) if vdot is None else (q_max, v_max, jac @ vdot + bias)
        if v is None:
            r, x = self.poses(q)
            return (jnp.concatenate([x, matrix_to_quat(r)], axis=1).reshape(-1),)
        r, x, vbar, bias, jac = self.body_motion(q, v)
        q_max = jnp.concatenate([x, matrix_to_quat(r)], axis=1).reshape(-1)
        if vdot is None:
            return q_max, vbar.reshape(-1)
        vdot_max = jac.reshape(-1, self.n_v) @ vdot + bias.reshape(-1)
        return q_max, vbar.reshape(-1), vdot_max

    def from_maximal(self, q_max: Array, v_max: Array | None = None) -> tuple[Array, ...]:
        """Joint coordinates (and velocities, when ``v_max`` is given) of a full-model state that
        satisfies the tree joints (assemble it first; an unassembled one raises, naming the
        joint). Velocities are the least-squares fit ``J v ≈ v̄`` (exact when consistent)."""
        q_max = jnp.asarray(q_max)
        residuals = _joint_residuals(self.full, q_max)
        bad = {j: float(residuals[j]) for j in self.tree_joints if _concrete(residuals[j])}
        bad = {j: r for j, r in bad.items() if not r <= _ASSEMBLY_TOLERANCE}
        if bad:
            joint, worst = max(bad.items(), key=lambda item: item[1])
            raise ModelError(
                f"from_maximal: tree joint {joint!r} is not assembled (|Φ| = {worst:.3g}); "
                "assemble the full model first",
                joint,
            )
        return self._coordinates_of(q_max, v_max)

    @eqx.filter_jit
    def _coordinates_of(self, q_max: Array, v_max: Array | None) -> tuple[Array, ...]:
        """:meth:`from_maximal` after its check, compiled (op by op it takes seconds)."""
        kin = self.full.kinematics(q_max)
        parts, index = [], []
        for tg, sub in self._tree_parts():
            ki, kj = sub.gather(kin)

            def relative(joint, ki_, kj_):
                oi, xi, oj, xj = joint.world_frames(ki_, kj_)
                return joint.motion_coordinates(xi.T @ xj, xi.T @ (oj - oi))

            parts.append(eqx.filter_vmap(relative)(sub.elements, ki, kj))
            index.append(np.asarray(tg.q_index, dtype=np.int32).reshape(len(tg.members), -1))
        n = self.full.n_bodies
        if self.layout.free:
            first = [7 * b if b < n else self.full.q_slice(self.full.modal_names[b - n]).start
                     for b in self.layout.free]  # fmt: skip
            parts.append(q_max[np.asarray(first)[:, None] + np.arange(7)])
            index.append(np.asarray(self.layout.free_q)[:, None] + np.arange(7))
        for k, body in enumerate(self.full.modal_bodies):
            start = self.full.q_slice(body.name).start + 7
            parts.append(q_max[start : start + body.n_modes])
            index.append(self.layout.modal_q[k] + np.arange(body.n_modes))
        q = _by_index(parts, index, self.n_q)
        if v_max is None:
            return (q,)
        if self.full.modal_bodies:
            jac = self._full_state(q, jnp.zeros(self.n_v, q.dtype))[2]
        else:
            jac = self.jacobian(q)[2].reshape(-1, self.n_v)
        return q, spd_solve(jac.T @ jac, jac.T @ jnp.asarray(v_max))

    def default_solver(self):
        """The full model's."""
        return self.full.default_solver()

    # ----------------------------------------------------------------- internal states

    @property
    def n_internal(self) -> int:
        return self.full.n_internal

    def initial_internal_state(self) -> Array:
        return self.full.initial_internal_state()

    def with_internal_state(self, z: Array) -> JointCoordinateModel:
        return eqx.tree_at(lambda m: m.full, self, self.full.with_internal_state(z))

    def internal_rate(self, t: ArrayLike, q: Array, v: Array) -> Array:
        if self.full.modal_bodies:
            return self.full.internal_rate(t, *self.to_maximal(q, v))
        tm = self._motion(q, v)
        kin = self._kinematics(tm.rotation, tm.position, _body_frame(tm)[0])
        return self.full.element_state_rates(t, kin)

    def initial_state(self) -> tuple[Array, Array]:
        """:meth:`from_maximal` of the full model's initial state (it must be assembled)."""
        return self.from_maximal(*self.full.initial_state())

    def normalize(self, q: Array) -> Array:
        """``q`` with every quaternion (spherical joints, floating bodies) of unit norm."""
        if not self.layout.quaternions:
            return q
        index = np.asarray(self.layout.quaternions)[:, None] + np.arange(4)
        return q.at[index].set(quat_normalize(q[index]))


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


@eqx.filter_jit
def _joint_residuals(model: MultibodyModel, q: Array) -> dict[str, Array]:
    return model.joint_residuals(0.0, q)
