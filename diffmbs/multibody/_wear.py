"""A revolute joint with clearance whose surfaces wear (../shared/SEEDS.md 003: Tasora, Prati,
Silvestri): the planar journal–bearing joint of :class:`RevoluteClearance` with a worn-depth map
on the bearing's bore and one on the journal, integrated with the bodies as internal states.

At each instant the contact's normal force ``P`` (Hunt–Crossley, as the joint without wear)
gives the Hertz strip of two cylinders over the contact ``length``
(:func:`diffmbs.hertz.line_contact` with the journal's radius ``r`` and the bore's
``−(r + c)``), whose pressure each map's cells integrate exactly; the cells wear by
Archard's law at the sliding speed (:mod:`diffmbs.wear`). The worn depths at the contact's
angle on either surface open the gap:

    δ = |t| − c − h_bearing(θ_i) − h_journal(θ_j),

θ_i the contact's direction in the bearing's frame (body i) and θ_j in the journal's (body j),
both measured about the surface's axis from the first unit vector perpendicular to it (x̂, or
ŷ for an axis within 25° of x̂, projected) towards axis × that vector. The damping sees the rate
of ``|t|`` only: the worn depth's change along the surface over the time of an impact
(micrometres over the strip) is left out of it.

The maps are the element's internal states (after a friction law's, if it has one): cells of
the bearing, then of the journal, in metres; ``Solution.internal`` holds them at the save
times, ``model.with_internal_state(z)`` starts a run from worn surfaces
(:func:`diffmbs.wear.predict_wear` extrapolates them over many cycles).
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

from diffmbs.hertz import line_contact
from diffmbs.multibody._bodies import BodyKinematics, as_float_array, dot
from diffmbs.multibody._clearance import AbstractJournalBearing, journal_contact
from diffmbs.multibody._forces import Wrench
from diffmbs.parameters import check_physical_value
from diffmbs.rotations import safe_norm

__all__ = [
    "AbstractWearingJournal",
    "WearingClearance",
    "cell_pressures",
    "interpolate_periodic",
    "wrap_angle",
]


def wrap_angle(angle: ArrayLike) -> Array:
    """``angle`` (rad) wrapped to ``[−π, π)``."""
    return jnp.mod(jnp.asarray(angle, float) + math.pi, 2.0 * math.pi) - math.pi


@jax.custom_jvp
def _semi_ellipse_area(u: Array) -> Array:
    """``∫₀ᵘ √(1 − s²) ds`` for ``u`` clipped to ``[−1, 1]`` (its slope, ``√(1 − u²)``, is
    finite at the ends where the closed form's pieces are not)."""
    c = jnp.where(u > 1.0, 1.0, jnp.where(u < -1.0, -1.0, u))  # (no clip: see diffmbs.selection)
    return 0.5 * (c * jnp.sqrt(1.0 - c**2) + jnp.arcsin(c))


@_semi_ellipse_area.defjvp
def _semi_ellipse_area_jvp(primals, tangents):
    (u,), (du,) = primals, tangents
    inside = jnp.abs(u) < 1.0
    slope = jnp.where(inside, jnp.sqrt(jnp.where(inside, 1.0 - u**2, 1.0)), 0.0)
    return _semi_ellipse_area(u), slope * du


def cell_pressures(
    center: ArrayLike, half_width: ArrayLike, peak: ArrayLike, n_cells: int
) -> Array:
    """The mean pressure over each of ``n_cells`` equal angular cells of a surface under a
    Hertz strip.

    Args:
        center: the strip's centre (rad) in the surface's angle, cells ``k`` covering
            ``[2πk/n, 2π(k+1)/n)``; ``half_width``: the strip's half-width as an angle
            (rad, ``b/R``); ``peak``: ``p₀`` (Pa). Scalars (``vmap`` for more).

    Returns:
        ``(n_cells,)`` mean pressures (Pa); ``Σ p̄_k · (2π/n) = (π/2) p₀ b/R``, the strip's load
        per unit length over ``R``, exactly.
    """
    width = 2.0 * math.pi / n_cells
    centres = (jnp.arange(n_cells) + 0.5) * width
    offsets = wrap_angle(centres - center)
    half_width = jnp.asarray(half_width, float)
    loaded = half_width > 0
    b = jnp.where(loaded, half_width, 1.0)
    upper = _semi_ellipse_area((offsets + 0.5 * width) / b)
    lower = _semi_ellipse_area((offsets - 0.5 * width) / b)
    return jnp.where(loaded, peak * b * (upper - lower) / width, 0.0)


def interpolate_periodic(depth: ArrayLike, angle: ArrayLike) -> Array:
    """The map ``depth`` ``(n,)`` (values at the cell centres ``2π(k + ½)/n``) at ``angle``
    (rad), linear between centres, periodic."""
    depth = jnp.asarray(depth)
    n = depth.shape[-1]
    position = jnp.mod(jnp.asarray(angle, float) / (2.0 * math.pi) * n - 0.5, n)
    below = jnp.floor(position)
    fraction = position - below
    k = below.astype(jnp.int32)
    return (1.0 - fraction) * depth[..., k] + fraction * depth[..., (k + 1) % n]


def _angle_about(axis: Array, direction: Array) -> Array:
    """The angle (rad) of ``direction`` about the unit ``axis`` (module docstring's origin)."""
    helper = jnp.where(jnp.abs(axis[0]) > math.cos(math.radians(25.0)),
                       jnp.array([0.0, 1.0, 0.0]), jnp.array([1.0, 0.0, 0.0]))  # fmt: skip
    first = helper - dot(helper, axis) * axis
    first = first / safe_norm(first)
    second = jnp.cross(axis, first)
    y, x = dot(direction, second), dot(direction, first)
    centred = (x == 0.0) & (y == 0.0)  # the journal at the bore's centre: no direction, angle 0
    return jnp.where(centred, 0.0, jnp.arctan2(y, jnp.where(centred, 1.0, x)))  # finite slope


class AbstractWearingJournal(AbstractJournalBearing):
    """A journal–bearing joint with clearance whose bore and journal carry worn-depth maps as
    internal states (after a friction law's): the fields every wearing joint has.

    - ``journal_radius`` r (m, > 0);
    - ``contact_modulus`` E* (Pa, :func:`diffmbs.hertz.contact_modulus`);
    - ``wear_coefficient`` ``(2,)`` (1/Pa = m²/N): Archard's dimensional coefficients of the
      bore and of the journal;
    - ``cells`` (static): cells of each map around the surface, equal angles (default 180).
    """

    journal_radius: Array = eqx.field(kw_only=True, converter=as_float_array,
                                      metadata={"units": "m"})  # fmt: skip
    contact_modulus: Array = eqx.field(kw_only=True, converter=as_float_array,
                                       metadata={"units": "Pa"})  # fmt: skip
    wear_coefficient: Array = eqx.field(kw_only=True, converter=as_float_array,
                                        metadata={"units": "1/Pa"})  # fmt: skip
    cells: int = eqx.field(kw_only=True, default=180, static=True)

    @property
    def n_contacts(self) -> int:
        return 1

    def _check_wear_fields(self, lengths: tuple[str, ...]):
        name = type(self).__name__
        for field in ("clearance", "journal_radius", "contact_modulus", *lengths):
            check_physical_value(field, getattr(self, field), f"{name}.{field}")
        if jnp.shape(self.wear_coefficient) != (2,):
            raise ValueError(f"{name}.wear_coefficient: expected (bore, journal), shape (2,), "
                             f"got shape {jnp.shape(self.wear_coefficient)}")  # fmt: skip
        check_physical_value("wear_coefficient", self.wear_coefficient,
                             f"{name}.wear_coefficient")  # fmt: skip
        if not (isinstance(self.cells, int) and self.cells >= 3):
            raise ValueError(f"{name}.cells must be an integer ≥ 3, got {self.cells!r}")

    @property
    def map_shape(self) -> tuple[int, ...]:
        """One surface's map: ``(cells,)`` around it (and its axial cells, where it has them)."""
        return (self.cells,)

    @property
    def map_size(self) -> int:
        return math.prod(self.map_shape)

    @property
    def friction_states(self) -> int:
        return 0 if self.friction is None else self.friction.state_size

    @property
    def state_size(self) -> int:
        return self.friction_states + 2 * self.map_size

    @abc.abstractmethod
    def cell_areas(self) -> tuple[Array, Array]:
        """The area (m²) of one cell of the bore's map and of the journal's: a surface's worn
        volume is its area × the sum of its depths."""

    def axial_centres(self, surface: str) -> Array | None:
        """The axial positions (m) of a surface's (``"bore"``, ``"journal"``) map rows from its
        centre; ``None`` for a map around the surface only."""
        return None

    def depth_at(self, surface: str, depth: Array, angle: ArrayLike,
                 axial: ArrayLike | None = None) -> Array:  # fmt: skip
        """``surface``'s map ``depth`` (of :attr:`map_shape`, m) at ``angle`` (rad) and, for
        maps along the axis too, ``axial`` (m from the surface's centre); any shape."""
        return interpolate_periodic(depth, angle)

    def maps(self, state: Array) -> tuple[Array, Array]:
        """The worn depths ``(bore, journal)``, each of :attr:`map_shape` (m), in ``state``."""
        worn = state[self.friction_states :]
        n = self.map_size
        return worn[:n].reshape(self.map_shape), worn[n:].reshape(self.map_shape)

    def _hertz_load(self, normal: Array, area: Array) -> Array:
        """The load (N) the patch's size is computed from, floored at the micro-load
        ``1e-12 E* area`` (``area`` m², the patch's scale): a smoothed contact passes through
        loads of 1e-300 N, where the size's slope overflows; the peak from the true load keeps
        the cells carrying it exactly."""
        floor = 1e-12 * self.contact_modulus * area
        return jnp.where(normal > floor, normal, floor)


class WearingClearance(AbstractWearingJournal):
    """A planar journal–bearing joint with clearance whose bore and journal wear (module
    docstring). Geometry as :class:`RevoluteClearance` (without ``half_length``), the fields of
    :class:`AbstractWearingJournal`, and ``length`` L (m): the contact strip's.

    Output: the normal force (N), ``(1,)``, at the worn gap.
    """

    length: Array = eqx.field(kw_only=True, converter=as_float_array, metadata={"units": "m"})

    def __check_init__(self):
        self._check_wear_fields(("length",))

    def cell_areas(self) -> tuple[Array, Array]:
        arc = 2.0 * math.pi / self.cells * self.length
        return arc * (self.journal_radius + self.clearance), arc * self.journal_radius

    def contacts(self, ki: BodyKinematics, kj: BodyKinematics):
        """The unworn surfaces' contact, as :meth:`RevoluteClearance.contacts` (leading axis
        1)."""
        return self._worn_contacts(jnp.zeros((self.state_size,)), ki, kj)[0]

    def _worn_contacts(self, state, ki, kj):
        """``(contacts' tuple at the worn gap, angle on the bore, angle on the journal)``."""
        delta, rate, direction, point, slide = journal_contact(self, ki, kj, self.journal_center)
        outward = -direction  # from the bearing's axis towards the journal's centre
        angle_i = _angle_about(self.bearing_axis, ki.rotation.T @ outward)
        angle_j = _angle_about(self.journal_axis, kj.rotation.T @ outward)
        bore, journal = self.maps(state)
        delta = delta - interpolate_periodic(bore, angle_i) - interpolate_periodic(journal, angle_j)
        one = (delta[None], rate[None], direction[None], point[None], slide[None])
        return one, angle_i, angle_j

    def loads(self, t, state, ki, kj) -> tuple[Wrench, Array]:
        contacts, angle_i, angle_j = self._worn_contacts(state, ki, kj)
        wrench, friction_rate, normal = self._loads(contacts, state[: self.friction_states], ki)
        normal, slide = normal[0], contacts[4]
        r = self.journal_radius
        load = self._hertz_load(normal, self.length * r)
        half_width, _ = line_contact(load, self.length, r, -(r + self.clearance),
                                     self.contact_modulus)  # fmt: skip
        peak = 2.0 * normal / (math.pi * half_width * self.length)
        speed = safe_norm(slide[0])
        bore = cell_pressures(angle_i, half_width / (r + self.clearance), peak, self.cells)
        journal = cell_pressures(angle_j, half_width / r, peak, self.cells)
        wear_rate = speed * jnp.concatenate([self.wear_coefficient[0] * bore,
                                             self.wear_coefficient[1] * journal])  # fmt: skip
        return wrench, jnp.concatenate([friction_rate.reshape(-1), wear_rate])

    def output_at(self, t, state, ki, kj):
        delta, rate, *_ = self._worn_contacts(state, ki, kj)[0]
        return self.contact_force(delta, rate)
