"""A 3-D journal bearing with clearance whose crowned journal tilts and whose surfaces wear on
maps over angle × axial position (../shared/SEEDS.md 003, beyond the planar joint).

A straight journal that tilts in its bore bears on an edge, where Hertz's theory says nothing;
real pins are crowned (barrel-shaped) for that reason. Here the journal's radius falls off
along its axis as ``r − s²/(2 R_c)`` (``crown_radius`` R_c, axial position ``s`` on
``[−d, d]``, ``half_length`` d), so it touches the bore in one point and the patch is Hertz's
ellipse (:func:`diffmbs.hertz.point_contact`).

**Contact without search.** With the bearing's axis ``u`` through A (body i) and the journal's
axis ``v`` through B (body j), the journal's axis point at ``s`` lies off the bearing's axis by
``t(s) = (I − u uᵀ)(B + s v − A)``; the penetration there is

    δ(s) = |t(s)| − c − s²/(2 R_c),

largest where ``s = R_c n(s)·t₁`` (``n = t/|t|``, ``t₁ = (I − u uᵀ) v``, the tilt): two
fixed-point steps from ``s = 0`` (exact for a tilt in the load's plane, which keeps ``n``),
limited to the journal's ends. At that point the contact is the planar joint's
(:func:`~diffmbs.multibody._clearance.journal_contact`: normal, rate, sliding) with the crown's
drop and the worn depths subtracted. The rate is that of ``|t|`` at fixed ``s`` — exact at a
stationary point.

**The patch.** Relative curvatures: axial ``1/(2 R_c)``, around ``½(1/r − 1/(r + c))`` (the
bore's concave radius ``r + c``); the smaller carries the ellipse's longer semi-axis. The
ellipsoidal pressure ``p₀ √(1 − x²/α² − y²/β²)`` (``α`` axial, ``β`` around) is averaged over
each map cell (:func:`ellipse_cell_pressures`): across the angle exactly (semi-ellipse
integrals), along the axis by Gauss–Legendre at four points per cell — exact for the cells'
sum, whose integrand there is a parabola, so the removed volume obeys ``V̇ = k_w P |v_s|`` to
round-off while the patch lies inside the maps. The patch is Hertz's whole ellipse even where
it reaches the journal's end (edge loading, outside Hertz's theory: choose the crown so that
``R_c · tilt`` stays inside ``d``); a patch beyond a map's axial extent is not worn into it.

**Maps.** Each surface carries ``(cells, axial_cells)`` worn depths (m): equal angles about its
axis (origin as :class:`~diffmbs.multibody.WearingClearance`) × equal lengths over the bore's
``[−bore_half_length, bore_half_length]`` from ``bearing_center`` along its axis, and over the
journal's ``[−d, d]``. Depth between cell centres: linear, periodic in the angle, held at the
outer centres along the axis. The patch's position on the maps is the contact point's.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs.hertz import point_contact
from diffmbs.multibody._bodies import BodyKinematics, as_float_array, dot
from diffmbs.multibody._clearance import journal_contact
from diffmbs.multibody._forces import Wrench
from diffmbs.multibody._wear import (
    AbstractWearingJournal,
    _angle_about,
    _semi_ellipse_area,
    interpolate_periodic,
    wrap_angle,
)
from diffmbs.rotations import safe_norm

__all__ = ["CrownedWearingClearance", "ellipse_cell_pressures", "interpolate_map"]

# Gauss–Legendre on [−1, 1]: exact for the cells' sum (a parabola) and ≲1e-3 per cell (NumPy
# arrays: a JAX array made at import would start JAX's backend before diffmbs.configure)
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(4)


def _within(x: Array, lower: ArrayLike, upper: ArrayLike) -> Array:
    """``x`` limited to ``[lower, upper]`` by selection (no ``clip``: its tangent hazard)."""
    return jnp.where(x < lower, lower, jnp.where(x > upper, upper, x))


def ellipse_cell_pressures(
    center_angle: ArrayLike, center_axial: ArrayLike, angle_half_width: ArrayLike,
    axial_half_width: ArrayLike, peak: ArrayLike, n_cells: int, axial_edges: ArrayLike,
) -> Array:  # fmt: skip
    """The mean pressure of a Hertz ellipse over each cell of an angle × axial map.

    Args:
        center_angle: the patch's centre (rad); cells ``k`` cover ``[2πk/n, 2π(k+1)/n)``.
        center_axial: its axial position (m).
        angle_half_width: its semi-axis around the surface as an angle (rad, ``β/R``).
        axial_half_width: its semi-axis along the axis ``α`` (m).
        peak: ``p₀`` (Pa). Scalars.
        n_cells: cells around (static).
        axial_edges: ``(m + 1,)`` the axial cells' edges (m), increasing.

    Returns:
        ``(n_cells, m)`` mean pressures (Pa); ``Σ p̄ · Δθ Δx = (2π/3) p₀ α β/R`` (the load over
        ``R``) to round-off when the patch lies inside the edges.
    """
    width = 2.0 * math.pi / n_cells
    centres = (jnp.arange(n_cells) + 0.5) * width
    offsets = wrap_angle(centres - center_angle)  # (n,)
    beta, alpha = jnp.asarray(angle_half_width, float), jnp.asarray(axial_half_width, float)
    loaded = (alpha > 0) & (beta > 0)
    beta, alpha = jnp.where(loaded, beta, 1.0), jnp.where(loaded, alpha, 1.0)
    edges = jnp.asarray(axial_edges, float) - center_axial
    edges = _within(edges, -alpha, alpha)  # the patch's part of each cell
    lower, upper = edges[:-1], edges[1:]  # (m,)
    half = 0.5 * (upper - lower)
    x = 0.5 * (upper + lower) + half * _NODES[:, None]  # (g, m)
    squared = 1.0 - (x / alpha) ** 2  # w², the ellipse's width² there (over its full width)
    inside = squared > 0
    squared = jnp.where(inside, squared, 0.0)
    w = jnp.where(inside, jnp.sqrt(jnp.where(inside, squared, 1.0)), 1.0)
    scaled = beta * w  # (g, m): the half-width around, at x
    top = _semi_ellipse_area((offsets[:, None, None] + 0.5 * width) / scaled)  # (n, g, m)
    bottom = _semi_ellipse_area((offsets[:, None, None] - 0.5 * width) / scaled)
    across = beta * squared * (top - bottom)  # ∫ √(w² − y²/β²) dy over the cell's angles
    along = jnp.sum(_WEIGHTS[:, None] * across, axis=1) * half  # (n, m)
    cell_lengths = jnp.diff(jnp.asarray(axial_edges, float))
    return jnp.where(loaded, peak * along / (width * cell_lengths), 0.0)


def interpolate_map(depth: ArrayLike, angle: ArrayLike, axial: ArrayLike,
                    axial_centres: ArrayLike) -> Array:  # fmt: skip
    """The map ``depth`` ``(n, m)`` at ``angle`` (rad; periodic, as
    :func:`~diffmbs.wear.interpolate_periodic`) and ``axial`` (m): linear between the cell
    centres ``axial_centres`` ``(m,)`` (equal spacing), held beyond the outer ones."""
    ring = interpolate_periodic(jnp.asarray(depth).T, angle)  # (m,): each axial row at the angle
    centres = jnp.asarray(axial_centres, float)
    m = centres.shape[0]
    if m == 1:
        return ring[0]
    position = _within((axial - centres[0]) / (centres[1] - centres[0]), 0.0, m - 1.0)
    below = jnp.where(position >= m - 1, m - 2, jnp.floor(position)).astype(jnp.int32)
    fraction = position - below
    return (1.0 - fraction) * ring[below] + fraction * ring[below + 1]


class CrownedWearingClearance(AbstractWearingJournal):
    """A 3-D revolute joint with clearance, crowned journal and wear maps over angle × axial
    position (module docstring). Geometry as :class:`RevoluteClearance`, the fields of
    :class:`~diffmbs.multibody.AbstractWearingJournal`, and (m):

    - ``crown_radius`` R_c: the journal's axial profile (a barrel; ``R_c ≫ r``);
    - ``half_length`` d: the journal's half-length (its map and the contact's reach);
    - ``bore_half_length``: the bore's map, either side of ``bearing_center``;
    - ``axial_cells`` (static): cells of each map along its axis (default 20).

    Output: the normal force (N), ``(1,)``, at the worn gap.
    """

    crown_radius: Array = eqx.field(kw_only=True, converter=as_float_array,
                                    metadata={"units": "m"})  # fmt: skip
    half_length: Array = eqx.field(kw_only=True, converter=as_float_array,
                                   metadata={"units": "m"})  # fmt: skip
    bore_half_length: Array = eqx.field(kw_only=True, converter=as_float_array,
                                        metadata={"units": "m"})  # fmt: skip
    axial_cells: int = eqx.field(kw_only=True, default=20, static=True)

    def __check_init__(self):
        self._check_wear_fields(("crown_radius", "half_length", "bore_half_length"))
        if not (isinstance(self.axial_cells, int) and self.axial_cells >= 1):
            raise ValueError(f"{type(self).__name__}.axial_cells must be an integer ≥ 1, got "
                             f"{self.axial_cells!r}")  # fmt: skip

    @property
    def map_shape(self) -> tuple[int, ...]:
        return (self.cells, self.axial_cells)

    def cell_areas(self) -> tuple[Array, Array]:
        arc = 2.0 * math.pi / self.cells / self.axial_cells
        return (arc * (self.journal_radius + self.clearance) * 2.0 * self.bore_half_length,
                arc * self.journal_radius * 2.0 * self.half_length)  # fmt: skip

    def axial_edges(self) -> tuple[Array, Array]:
        """The axial cells' edges (m), ``(axial_cells + 1,)``: the bore's, the journal's."""
        unit = jnp.linspace(-1.0, 1.0, self.axial_cells + 1)
        return self.bore_half_length * unit, self.half_length * unit

    def axial_centres(self, surface: str) -> Array:
        edges = self.axial_edges()[("bore", "journal").index(surface)]
        return 0.5 * (edges[1:] + edges[:-1])

    def depth_at(self, surface: str, depth: Array, angle: ArrayLike,
                 axial: ArrayLike | None = None) -> Array:  # fmt: skip
        if axial is None:
            raise ValueError(f"{type(self).__name__}: a depth on its {surface} needs the axial "
                             "position too")  # fmt: skip
        centres = self.axial_centres(surface)
        where = jnp.broadcast_arrays(jnp.asarray(angle, float), jnp.asarray(axial, float))
        return jax.vmap(lambda a, x: interpolate_map(depth, a, x, centres))(
            *(w.reshape(-1) for w in where)).reshape(where[0].shape)

    def contacts(self, ki: BodyKinematics, kj: BodyKinematics):
        """The unworn surfaces' contact at the crown's touching point (leading axis 1)."""
        return self._worn_contacts(jnp.zeros((self.state_size,)), ki, kj)[0]

    def _touching(self, ki: BodyKinematics, kj: BodyKinematics) -> Array:
        """The journal's axial position of deepest penetration ``s`` (m; module docstring)."""
        u = ki.rotation @ self.bearing_axis
        offset = kj.point(self.journal_center) - ki.point(self.bearing_center)
        t0 = offset - dot(u, offset) * u
        tilt = kj.rotation @ self.journal_axis
        tilt = tilt - dot(u, tilt) * u
        s = jnp.zeros(())
        for _ in range(2):
            t = t0 + s * tilt
            size = safe_norm(t)
            n = jnp.where(size > 0, t / jnp.where(size > 0, size, 1.0), 0.0)
            s = _within(self.crown_radius * dot(n, tilt), -self.half_length, self.half_length)
        return s

    def _worn_contacts(self, state, ki, kj):
        """``(contacts' tuple at the worn gap, (angle, axial) on the bore, on the journal)``."""
        s = self._touching(ki, kj)
        on_axis = self.journal_center + s * self.journal_axis  # body j's frame
        delta, rate, direction, point, slide = journal_contact(self, ki, kj, on_axis)
        outward = -direction
        axial = dot(ki.rotation @ self.bearing_axis, point - ki.point(self.bearing_center))
        at_bore = (_angle_about(self.bearing_axis, ki.rotation.T @ outward), axial)
        at_journal = (_angle_about(self.journal_axis, kj.rotation.T @ outward), s)
        bore, journal = self.maps(state)
        worn = (self.depth_at("bore", bore, *at_bore)
                + self.depth_at("journal", journal, *at_journal))  # fmt: skip
        delta = delta - s**2 / (2.0 * self.crown_radius) - worn
        one = (delta[None], rate[None], direction[None], point[None], slide[None])
        return one, at_bore, at_journal

    def patch(self, normal: Array) -> tuple[Array, Array, Array]:
        """Hertz's ellipse under ``normal`` (N): ``(axial semi-axis α (m), semi-axis around β
        (m), p₀ (Pa))``, the size from the floored load (:meth:`_hertz_load`)."""
        r = self.journal_radius
        axial = 0.5 / self.crown_radius
        around = 0.5 * (1.0 / r - 1.0 / (r + self.clearance))
        axial_first = axial <= around  # the smaller curvature carries the longer semi-axis
        smaller = jnp.where(axial_first, axial, around)
        larger = jnp.where(axial_first, around, axial)
        a, b, _ = point_contact(self._hertz_load(normal, r**2), smaller, larger,
                                self.contact_modulus)  # fmt: skip
        alpha, beta = jnp.where(axial_first, a, b), jnp.where(axial_first, b, a)
        return alpha, beta, 3.0 * normal / (2.0 * math.pi * alpha * beta)

    def loads(self, t, state, ki, kj) -> tuple[Wrench, Array]:
        contacts, at_bore, at_journal = self._worn_contacts(state, ki, kj)
        wrench, friction_rate, normal = self._loads(contacts, state[: self.friction_states], ki)
        alpha, beta, peak = self.patch(normal[0])
        r = self.journal_radius
        bore_edges, journal_edges = self.axial_edges()
        bore = ellipse_cell_pressures(*at_bore, beta / (r + self.clearance), alpha, peak,
                                      self.cells, bore_edges)  # fmt: skip
        journal = ellipse_cell_pressures(*at_journal, beta / r, alpha, peak, self.cells,
                                         journal_edges)  # fmt: skip
        speed = safe_norm(contacts[4][0])
        wear_rate = speed * jnp.concatenate([self.wear_coefficient[0] * bore.reshape(-1),
                                             self.wear_coefficient[1] * journal.reshape(-1)])
        return wrench, jnp.concatenate([friction_rate.reshape(-1), wear_rate])

    def output_at(self, t, state, ki, kj):
        delta, rate, *_ = self._worn_contacts(state, ki, kj)[0]
        return self.contact_force(delta, rate)
