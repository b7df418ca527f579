"""A gear mesh whose teeth touch as faceted solids: the mesh-contact counterpart of
:class:`~diffmbs.multibody.GearMesh` (issue 28, SEEDS.md 004), to show what a coarse tooth mesh
does to the mesh force and to check the analytic element against geometry.

**Teeth.** Each tooth is :func:`diffmbs.gears.tooth_mesh`'s solid: its two involute flanks as
``points`` vertices each (equally spaced along the line of action), closed by straight tip and
root chords — a convex polygon in the transverse plane (``tooth_profile``), extruded over the
face (``tooth_mesh`` builds it as a ``trimesh.Trimesh``). Inside a prism, the signed distance to
its side faces is the signed distance to the polygon's edges, so contact is computed in the
transverse plane of each slice (a helical gear is cut into ``slices``, each section turned by
its helix as :class:`~diffmbs.multibody.GearMesh` staggers its pairs).

**Signed-distance contact, no search.** The teeth of gear 1 within ``⌈ε_α⌉`` pitches of the line
of centres carry their flank vertices into gear 2's frame; each vertex is turned back by a
whole number of gear 2's pitches onto one reference tooth (the teeth are equal), whose convex
outline gives the vertex's depth ``−maxₑ nₑ·(x − aₑ)`` and the deepest edge's normal. Gear 2's
vertices go into gear 1 the same way. A tooth pair's closure is its deepest vertex, of either
gear, on that flank (A: gear 1's +y flank on gear 2's +y flank, the side gear 1 drives with
φ₁ increasing); its load is :class:`~diffmbs.multibody.AbstractGearMesh`'s spring (the
parabolic stiffness at the contact's place ξ on the path) and damper, along the deepest edge's
normal (with the helix's axial part), at the vertex; friction as the analytic element's.

With fine facets the closure is the analytic element's: vertices lie on the involutes and the
chords inside them, so a faceted tooth lies inside the true one and its closure is short of the
true one by at most the facets' sagitta ``h²/(8ρ)`` of both gears at the contact (``h`` the
facet's length, ``ρ`` the flank's curvature radius) — the ripple coarse meshes give, which
falls with the square of the vertex count. Unlike the analytic element's ramp, a pair's load
starts and stops where the tooth solids meet (corner contact at the tips under load).

Output and parameters: those of :class:`~diffmbs.multibody.GearMesh`; ``points`` (static)
vertices per flank.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs.contact import contact_energy
from diffmbs.gears import tooth_profile
from diffmbs.multibody._forces import pair_wrench
from diffmbs.multibody._gears import (
    AbstractGearMesh,
    _Mesh,
    _nominal_contact_ratio,
    resultant,
    velocity_at,
)

__all__ = ["FacetedGearMesh", "tooth_depth"]

_OUT_OF_REACH = -1.0  # m: a closure no candidate reaches (finite, so derivatives stay finite)


def _outline(flanks: Array) -> tuple[Array, Array]:
    """A tooth's convex outline from its flanks ``(2, points, 2)`` (:func:`tooth_profile`):
    vertices counter-clockwise ``(2 points, 2)`` and each edge's outward unit normal."""
    vertices = jnp.concatenate([flanks[1], flanks[0][::-1]])
    edges = jnp.roll(vertices, -1, axis=0) - vertices
    normals = jnp.stack([edges[:, 1], -edges[:, 0]], axis=-1)
    return vertices, normals / jnp.linalg.norm(normals, axis=-1, keepdims=True)


def tooth_depth(points: Array, flanks: Array) -> tuple[Array, Array]:
    """How deep the transverse ``points`` (..., 2) m lie inside the tooth whose flanks are
    ``flanks`` ``(2, n, 2)`` (same frame): ``(depth (...) m, positive inside; the nearest
    edge's outward normal (..., 2))``. Exact inside the convex outline (its signed distance);
    outside, negative but no larger than the distance."""
    vertices, normals = _outline(flanks)
    heights = points @ normals.T - jnp.sum(vertices * normals, axis=-1)  # (..., edges)
    nearest = jnp.argmax(heights, axis=-1)  # one edge, so one tangent (not max's ties)
    depth = -jnp.take_along_axis(heights, nearest[..., None], axis=-1)[..., 0]
    return depth, normals[nearest]


def _turn(points: Array, angle: Array) -> Array:
    """``points`` (..., 2) turned by ``angle`` (...) rad."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    x, y = points[..., 0], points[..., 1]
    return jnp.stack([c * x - s * y, s * x + c * y], axis=-1)


def _into(points: Array, centre: Array, angle: Array, teeth: int, flanks: Array):
    """Depths of world-transverse ``points`` (..., 2) in a gear centred at ``centre`` (2,)
    whose tooth 0 points at ``angle`` (rad): each point turned onto the tooth it lies in.
    ``(depth, the edge's outward normal in world axes, that tooth's index)``."""
    relative = points - centre
    bearing = jnp.arctan2(relative[..., 1], relative[..., 0])
    tooth = jnp.round((bearing - angle) * teeth / (2.0 * math.pi))
    turn = angle + 2.0 * math.pi * tooth / teeth
    depth, normal = tooth_depth(_turn(relative, -turn), flanks)
    return depth, _turn(normal, turn), tooth


class FacetedGearMesh(AbstractGearMesh):
    """Gear teeth as faceted solids in signed-distance contact (module docstring). Fields:
    :class:`~diffmbs.multibody.AbstractGearMesh`'s and ``points`` (static: vertices per flank,
    ≥ 2)."""

    points: int = eqx.field(static=True, default=16)

    def __check_init__(self):
        if not (isinstance(self.points, int) and self.points >= 2):
            raise ValueError(f"FacetedGearMesh.points must be an integer ≥ 2, got {self.points!r}")

    def contacts(self, ki, kj) -> tuple[Array, Array, Array]:
        """Each tooth pair's deepest vertex at the gears' kinematics, per slice, flank (A, B)
        and pair ``(slices, 2, 2⌈ε_α⌉ + 1)``: ``(closure m (negative: apart), contact point
        (…, 3) m, load direction on gear 2 (…, 3), the helix's axial part included)``."""
        return self._contacts(self._mesh(ki, kj))

    def _contacts(self, mesh: _Mesh):
        p, w = self.pair, mesh.tan_helix
        teeth_1, teeth_2 = p.teeth
        reach = math.ceil(_nominal_contact_ratio(p))
        k = jnp.arange(-reach, reach + 1.0)  # gear 1's teeth about the line of centres
        y = mesh.slice_positions[:, None]
        angle_1 = mesh.angles[0] + y * w / mesh.base_radii[0]  # (slices, 1): each section's
        angle_2 = mesh.angles[1] - (y - mesh.axial) * w / mesh.base_radii[1]
        centre_2 = jnp.stack([mesh.distance, 0.0])
        flanks = [tooth_profile(p, g, self.points, 0.5 * self.allowance) for g in (0, 1)]
        nearest_1 = jnp.round(-angle_1 * teeth_1 / (2.0 * math.pi))
        nearest_2 = jnp.round((math.pi - angle_2) * teeth_2 / (2.0 * math.pi))
        # gear 1's vertices in gear 2's teeth: (slices, teeth, flank, points)
        turn_1 = (angle_1 + 2.0 * math.pi * (nearest_1 + k) / teeth_1)[..., None, None]
        vertices_1 = _turn(flanks[0], turn_1)
        depth_1, normal_1, _ = _into(vertices_1, centre_2, angle_2[..., None, None], teeth_2,
                                     flanks[1])  # fmt: skip
        pair_1 = jnp.broadcast_to(k[:, None, None], depth_1.shape[1:])
        # gear 2's vertices in gear 1's teeth
        turn_2 = (angle_2 + 2.0 * math.pi * (nearest_2 + k) / teeth_2)[..., None, None]
        vertices_2 = centre_2 + _turn(flanks[1], turn_2)
        depth_2, normal_2, tooth = _into(vertices_2, jnp.zeros(2), angle_1[..., None, None],
                                         teeth_1, flanks[0])  # fmt: skip
        pair_2 = tooth - nearest_1[..., None, None]

        def by_flank(values):  # (slices, teeth, flank, points, ...) -> (slices, flank, n, ...)
            values = jnp.moveaxis(values, 2, 1)
            return values.reshape(values.shape[:2] + (-1,) + values.shape[4:])

        depth = jnp.concatenate([by_flank(depth_1), by_flank(depth_2)], axis=2)
        pair = jnp.concatenate([by_flank(jnp.broadcast_to(pair_1, depth_1.shape)),
                                by_flank(pair_2)], axis=2)  # fmt: skip
        points = jnp.concatenate([by_flank(vertices_1), by_flank(vertices_2)], axis=2)
        directions = jnp.concatenate([by_flank(-normal_1), by_flank(normal_2)], axis=2)
        mine = pair[:, :, None, :] == k[:, None]  # (slices, flank, pairs, candidates)
        candidates = jnp.where(mine, depth[:, :, None, :], _OUT_OF_REACH)
        deepest = jnp.argmax(candidates, axis=-1)
        closure = jnp.take_along_axis(candidates, deepest[..., None], axis=-1)[..., 0]

        def pick(values):  # (slices, flank, candidates, 2) -> (slices, flank, pairs, 3) world
            chosen = jnp.take_along_axis(values[:, :, None], deepest[..., None, None], axis=3)
            chosen = chosen[..., 0, :]
            return chosen[..., :1] * mesh.across + chosen[..., 1:] * jnp.cross(mesh.axis,
                                                                               mesh.across)

        contact = mesh.centre + pick(points) + mesh.slice_positions[:, None, None, None] * mesh.axis
        side = jnp.array([1.0, -1.0])[:, None, None]
        direction = pick(directions) - side * w * mesh.axis
        return closure, contact, direction

    def _loads(self, ki, kj):
        mesh = self._mesh(ki, kj)
        closure, contact_points, directions = self._contacts(mesh)
        closing = velocity_at(ki, contact_points) - velocity_at(kj, contact_points)
        rate = jnp.sum(closing * directions, -1)
        stiffness = self._stiffness(mesh, self._place(mesh, contact_points))
        load = self._contact_loads(closure, rate, stiffness)
        flanks = jnp.sum(load, axis=(0, 2))
        transverse = directions - jnp.sum(directions * mesh.axis, -1, keepdims=True) * mesh.axis
        tangents = jnp.cross(mesh.axis, transverse)
        friction, power = self._friction(ki, kj, contact_points, tangents, load)
        force, torque = resultant(load[..., None] * directions + friction, contact_points,
                                  mesh.pitch_point)  # fmt: skip
        wrench = pair_wrench(force, mesh.pitch_point, torque)
        return wrench, flanks, mesh.deviation, power, jnp.sum(load * rate)

    @staticmethod
    def _place(mesh: _Mesh, points: Array) -> Array:
        """The contacts' positions ξ (m) on the path of contact, kept within it (the stiffness's
        parabola is the path's)."""
        xi = jnp.sum((points - mesh.pitch_point) * mesh.transverse[:, None], -1) + mesh.approach
        xi = jnp.where(xi < 0.0, 0.0, xi)
        return jnp.where(xi > mesh.path, mesh.path, xi)

    def potential_energy(self, t, ki, kj) -> Array:
        """The teeth's elastic energy (J) at their present stiffness."""
        mesh = self._mesh(ki, kj)
        closure, points, _ = self._contacts(mesh)
        stiffness = self._stiffness(mesh, self._place(mesh, points))
        return jnp.sum(contact_energy(closure, stiffness, exponent=1.0, smoothing=self.smoothing))
