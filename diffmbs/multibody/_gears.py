"""A gear mesh as a force element between two bodies (../shared/SEEDS.md 004: Ebrahimi and
Eberhard; the mesh element of SIMPACK): involute teeth, contact without search, several tooth
pairs at once, backlash, a tooth stiffness that varies along the path of contact, damping and
friction.

**Frames.** Each gear has a frame on its body: the origin on the gear's axis in the middle of
its face, z the axis (both gears' z parallel, same sense), x pointing at the middle of a
tooth. The geometry is :class:`diffmbs.gears.GearPair`'s (external gears).

**Contact without search.** In the transverse plane, with the unit ``e`` from gear 1's centre
to gear 2's (perpendicular to the axis ``u``), ``a`` the centres' distance (it follows the
bodies: bearings that give change it), ``f = u × e`` and ``φ₁, φ₂`` the gears' x-axes' angles
from ``e`` about ``u``, the teeth's deviation along the line of action from the centred mesh
(a tooth of gear 1 on ``e``, a space of gear 2 facing it) is

    Δ = wrap(r_b1 φ₁ + r_b2 φ₂ + w tan β_b − (z₂ + 1) p_bt / 2)   into [−p_bt/2, p_bt/2),

``w`` the axial offset of gear 2's frame from gear 1's (a helix turns an axial shift into a
rotation). Flank A (gear 1 drives gear 2 with ``φ₁`` increasing) closes by ``δ_A = Δ − j/2``,
flank B by ``δ_B = −Δ − j/2``, ``j`` the backlash along the line of action at ``a``
(:func:`diffmbs.gears.backlash`, with the ``allowance`` taken off the teeth). The pairs of a
flank sit a base pitch apart along its line of action, the nearest where gear 1's angle puts
it, ``ξ = g_f + r_b1 (±φ₁ + ψ₁) (mod p_bt)`` from the start of the path of contact (``g_f``
the approach, ``ψ₁`` half gear 1's tooth on its working circle); a pair carries load while
``0 ≤ ξ ≤ g_α``. A helical gear is cut into ``slices`` across its face, each a thin spur mesh
whose pairs are staggered by ``y tan β_b`` (``y`` the slice's axial position).

**Forces.** A pair at ``ξ`` is a spring of stiffness ``k(ξ) = k_max (1 − κ (2ξ/g_α − 1)²)``
(the parabola of 004; ``κ = 0.75 (ε_α − 1)/ε_α``, so the mean over a mesh cycle of the pairs'
sum is ISO 6336's ``c_γα b = k_max (0.75 ε_α + 0.25)`` when ``k_max = c' b``), a damper ``c``,
and a ramp over ``ramp`` × the base pitch centred on the path's ends (the load enters and
leaves over a short length, as under tip relief; a jump would make the equations stiff and the
derivatives ill): ``F = window(ξ) · max(k(ξ) δ_s + c δ̇ σ(δ/ε), 0)`` with ``δ_s = ε softplus(δ/ε)``
(smoothing ε) and ``σ`` its slope. It acts on gear 2 along the flank's line of action
``n = sin α_wt e ± cos α_wt f`` and ``∓ tan β_b u`` (the helix's axial force), on gear 1
opposite, at the pitch point. Friction ``μ F`` acts at the pair's contact point against the
sliding of the profiles, smoothed through the pitch point by ``tanh(v_s / sliding_speed)``.

Output: ``(4,)`` the load along the line of action (N; flank A positive), the transmission
error ``Δ`` (m along the line of action), the friction's power loss (W) and the normal loads'
power into the teeth (W: the rate of their elastic energy plus the dampers' loss; the mesh
takes from the gears' motion the sum of the last two).

Not modelled: tip relief's shape (only the ramp), the mesh's inertia, gear bodies' own
elasticity (the rigid-elastic teeth of 004 are a later step), the change of the backlash with
time in the damping.
"""

from __future__ import annotations

import abc
import math
from typing import ClassVar, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs import selection
from diffmbs.contact import contact_energy, smooth_penetration
from diffmbs.gears import GearPair, backlash, pair_geometry, working_thickness
from diffmbs.multibody._bodies import BodyKinematics, Frame, as_float_array, as_frame, dot
from diffmbs.multibody._forces import AbstractForceElement, Wrench, pair_wrench
from diffmbs.parameters import check_physical_value

__all__ = ["AbstractGearMesh", "GearMesh"]


def _pitch_and_helix(pair: GearPair) -> tuple[float, float]:
    """The transverse base pitch (m) and ``tan β_b`` signed by the hand (static floats)."""
    transverse_angle = math.atan(math.tan(pair.pressure_angle) / math.cos(pair.helix_angle))
    pitch = math.pi * pair.module / math.cos(pair.helix_angle) * math.cos(transverse_angle)
    base_helix = math.asin(math.sin(abs(pair.helix_angle)) * math.cos(pair.pressure_angle))
    return pitch, math.copysign(math.tan(base_helix), pair.helix_angle)


def _nominal_contact_ratio(pair: GearPair) -> float:
    """ε_α at the pair's own centre distance (a static float, also inside a trace)."""
    with jax.ensure_compile_time_eval():
        return float(pair_geometry(pair).contact_ratio)


def _wrap(x: Array, period: float) -> Array:
    """``x`` into ``[0, period)``."""
    return jnp.mod(x, period)


class AbstractGearMesh(AbstractForceElement):
    """What every gear mesh between gear 1 (``body_i``, ``frame_i``) and gear 2 (``body_j``,
    ``frame_j``) shares (module docstring): ``pair``: the geometry (static); ``stiffness``
    k_max (N/m, one tooth pair's largest: ISO 6336's ``c' b``,
    :func:`diffmbs.gears.iso_6336_stiffness`); ``damping`` c (N·s/m per pair); ``mu``
    (friction coefficient); ``allowance`` (m, the teeth's thickness allowance in all, split
    between the gears: backlash); static: ``smoothing`` ε (m), ``sliding_speed`` (m/s),
    ``slices`` (across the face), ``ramp`` (the load's entry length over the base pitch).
    The fields, the frames' state, the stiffness along the path and the load laws are here; a
    subclass says where the teeth touch."""

    body_i: str = eqx.field(static=True)
    frame_i: Frame = eqx.field(converter=as_frame)
    body_j: str = eqx.field(static=True)
    frame_j: Frame = eqx.field(converter=as_frame)
    pair: GearPair = eqx.field(static=True)
    stiffness: Array = eqx.field(converter=as_float_array, metadata={"units": "N/m"})
    damping: Array = eqx.field(default=0.0, converter=as_float_array,
                               metadata={"units": "N s/m"})  # fmt: skip
    mu: Array = eqx.field(default=0.0, converter=as_float_array, metadata={"units": "1"})
    allowance: Array = eqx.field(default=0.0, converter=as_float_array, metadata={"units": "m"})
    smoothing: float = eqx.field(static=True, default=1e-8)
    sliding_speed: float = eqx.field(static=True, default=1e-3)
    slices: int = eqx.field(static=True, default=1)
    ramp: float = eqx.field(static=True, default=0.05)

    attachments: ClassVar[tuple[str, ...]] = ("body_i", "body_j")

    def __check_init__(self):
        name = type(self).__name__
        for field in ("stiffness", "damping", "mu", "allowance"):
            check_physical_value(field, getattr(self, field), f"{name}.{field}")
        if not (isinstance(self.slices, int) and self.slices >= 1):
            raise ValueError(f"{name}.slices must be an integer ≥ 1, got {self.slices!r}")
        if not 0.0 < self.ramp < 0.5:
            raise ValueError(f"{name}.ramp must lie in (0, 0.5), got {self.ramp!r}")
        ratio = _nominal_contact_ratio(self.pair)
        if not math.isfinite(ratio) or ratio < 1.0:
            raise ValueError(f"{name}: the pair's contact ratio is {ratio:.3g} (< 1 or not a "
                             "number): the teeth do not mesh continuously at this centre "
                             "distance")  # fmt: skip

    @property
    def pairs(self) -> int:
        """Tooth pairs looked at per flank and slice (static): one pitch before the path's start
        to past its end and the ramp, ``⌈ε_α + ramp⌉ + 2`` at the pair's own centre distance
        (a centre distance that shrinks far lengthens the path beyond them)."""
        return math.ceil(_nominal_contact_ratio(self.pair) + self.ramp) + 2

    def _mesh(self, ki: BodyKinematics, kj: BodyKinematics) -> _Mesh:
        """The mesh's state at the bodies' kinematics (module docstring)."""
        p = self.pair
        origin_1, axes_1 = ki.frame(self.frame_i)
        origin_2, axes_2 = kj.frame(self.frame_j)
        u = axes_1[:, 2]
        offset = origin_2 - origin_1
        axial = dot(u, offset)
        across = offset - axial * u
        a = jnp.sqrt(dot(across, across))
        e = across / a
        f = jnp.cross(u, e)
        phi_1 = jnp.arctan2(dot(axes_1[:, 0], f), dot(axes_1[:, 0], e))
        phi_2 = jnp.arctan2(dot(axes_2[:, 0], f), dot(axes_2[:, 0], e))
        g = pair_geometry(p, a)
        r_b1, r_b2 = g.base_radii[0], g.base_radii[1]
        pitch, tan_helix = _pitch_and_helix(p)
        allowances = jnp.full(2, 0.5) * self.allowance
        _, clearance = backlash(p, a, allowances, g)  # one geometry per evaluation
        half_tooth = 0.5 * working_thickness(p, a, allowances, g)[0] / g.working_radii[0]
        s = r_b1 * phi_1 + r_b2 * phi_2 + axial * tan_helix - 0.5 * (p.teeth[1] + 1) * pitch
        deviation = _wrap(s + 0.5 * pitch, pitch) - 0.5 * pitch
        approach = (jnp.sqrt(g.tip_radii[1] ** 2 - r_b2**2)
                    - r_b2 * jnp.tan(g.working_pressure_angle))  # fmt: skip
        sin_w, cos_w = jnp.sin(g.working_pressure_angle), jnp.cos(g.working_pressure_angle)
        transverse = jnp.stack([sin_w * e + cos_w * f, sin_w * e - cos_w * f])  # flanks A, B
        normals = transverse - jnp.array([[1.0], [-1.0]]) * tan_helix * u  # loads' directions
        pitch_point = origin_1 + g.working_radii[0] * e
        relative = velocity_at(ki, pitch_point) - velocity_at(kj, pitch_point)
        y = ((jnp.arange(self.slices) + 0.5) / self.slices - 0.5) * p.face_width
        sign = jnp.array([[1.0], [-1.0]])
        ahead = approach + r_b1 * (sign * phi_1 + half_tooth) + sign * y * tan_helix
        first = _wrap(ahead, pitch)  # (2, slices)
        return _Mesh(
            xi=first[..., None] + pitch * (jnp.arange(self.pairs) - 1.0),
            depth=jnp.stack([deviation, -deviation]) - 0.5 * clearance,
            rate=normals @ relative,  # gear 1 closing on gear 2, per flank
            normals=normals, transverse=transverse, axis=u, pitch_point=pitch_point,
            approach=approach, deviation=deviation, path=g.path_of_contact,
            ratio=g.contact_ratio, pitch=pitch, centre=origin_1, across=e, distance=a,
            axial=axial, angles=jnp.stack([phi_1, phi_2]), slice_positions=y,
            tan_helix=tan_helix, base_radii=g.base_radii,
            wrapped=jnp.round((first - ahead) / pitch),
            phase=jnp.round((s - deviation) / pitch),
        )  # fmt: skip

    def _stiffness(self, mesh: _Mesh, xi: Array | None = None) -> Array:
        """One slice's pair stiffness (N/m) at the pairs' positions ``xi`` on the path (m;
        default the mesh's)."""
        xi = mesh.xi if xi is None else xi
        kappa = 0.75 * (mesh.ratio - 1.0) / mesh.ratio
        shape = 1.0 - kappa * (2.0 * xi / mesh.path - 1.0) ** 2
        return self.stiffness / self.slices * shape

    def _window(self, mesh: _Mesh) -> Array:
        """The load's share at each pair: 1 inside the path, 0 outside, ramping over
        ``ramp`` × the base pitch centred on each end (2 % to 98 %), so the window's integral,
        and the mean mesh stiffness, are the path's."""
        scale = 0.25 * self.ramp * mesh.pitch
        xi, path = mesh.xi, mesh.path
        return 0.25 * ((1.0 + jnp.tanh(xi / scale)) * (1.0 + jnp.tanh((path - xi) / scale)))

    def _contact_loads(self, depth: Array, rate: Array, stiffness: Array) -> Array:
        """Pair loads (N, ≥ 0, unwindowed) at the closures ``depth`` (m) and their rates (m/s)
        with one slice's ``stiffness`` (N/m): the smoothed spring and the damper."""
        eps = self.smoothing
        spring = stiffness * smooth_penetration(depth, eps)
        damper = self.damping / self.slices * rate * jax.nn.sigmoid(depth / eps)
        return selection.maximum(spring + damper, 0.0)

    def _path_wrench(self, ki, kj, mesh: _Mesh, load: Array, flanks: Array
                     ) -> tuple[Wrench, Array]:  # fmt: skip
        """The pairs' ``load`` ``(2, slices, pairs)`` on the path of contact as loads on the
        gears: the flanks' sums ``flanks`` along their lines of action through the pitch point,
        friction at each pair's place on its line; ``(wrench, friction's power loss W)``."""
        points = mesh.pitch_point + (mesh.xi - mesh.approach)[..., None] * mesh.transverse[
            :, None, None, :]  # fmt: skip
        tangents = jnp.cross(mesh.axis, mesh.transverse)[:, None, None, :]
        friction, power = self._friction(ki, kj, points, tangents, load)
        force, torque = resultant(friction, points, mesh.pitch_point)
        return pair_wrench(force + flanks @ mesh.normals, mesh.pitch_point, torque), power

    @abc.abstractmethod
    def _loads(self, ki, kj) -> tuple[Wrench, Array, Array, Array, Array]:
        """``(wrench, flanks' loads (2,) N, Δ m, friction's power loss W, the loads' power into
        the teeth W)`` at the bodies' kinematics."""

    def wrench(self, t, ki, kj) -> Wrench:
        return self._loads(ki, kj)[0]

    def output(self, t, ki, kj) -> Array:
        return _output(*self._loads(ki, kj)[1:])

    def _friction(self, ki, kj, points: Array, tangents: Array, load: Array) -> tuple[Array, Array]:
        """Friction ``μ load tanh(v_s / sliding_speed)`` at the contact ``points`` (..., 3) m
        along the profiles' sliding ``tangents`` (..., 3), ``v_s`` gear 1's surface's speed on
        gear 2's along them: ``(forces on gear 2 (..., 3) N, power loss W)``."""
        slip = jnp.sum((velocity_at(ki, points) - velocity_at(kj, points)) * tangents, axis=-1)
        friction = self.mu * load * jnp.tanh(slip / self.sliding_speed)
        return friction[..., None] * tangents, jnp.sum(friction * slip)


class GearMesh(AbstractGearMesh):
    """The analytic mesh (module docstring): the pairs' closure from the gears' angles, each
    pair's load windowed along the path of contact. Fields: :class:`AbstractGearMesh`."""

    def _pair_loads(self, mesh: _Mesh) -> Array:
        """Each pair's load (N) along its flank, ``(2, slices, pairs)``."""
        depth, rate = mesh.depth[:, None, None], mesh.rate[:, None, None]
        return self._window(mesh) * self._contact_loads(depth, rate, self._stiffness(mesh))

    def _loads(self, ki, kj):
        mesh = self._mesh(ki, kj)
        load = self._pair_loads(mesh)
        flanks = jnp.sum(load, axis=(1, 2))
        wrench, power = self._path_wrench(ki, kj, mesh, load, flanks)
        return wrench, flanks, mesh.deviation, power, flanks @ mesh.rate

    def potential_energy(self, t, ki, kj) -> Array:
        """The teeth's elastic energy (J) at their present stiffness."""
        mesh = self._mesh(ki, kj)
        energy = contact_energy(mesh.depth[:, None, None], self._stiffness(mesh), exponent=1.0,
                                smoothing=self.smoothing)  # fmt: skip
        return jnp.sum(self._window(mesh) * energy)


class _Mesh(NamedTuple):
    xi: Array  # (2, slices, pairs): the pairs' positions on the path of contact (m)
    depth: Array  # (2,): each flank's closure δ (m)
    rate: Array  # (2,): δ̇ (m/s)
    normals: Array  # (2, 3): the flanks' load directions on gear 2 (with the helix's)
    transverse: Array  # (2, 3): the flanks' lines of action
    axis: Array
    pitch_point: Array
    approach: Array
    deviation: Array
    path: Array
    ratio: Array
    pitch: float
    centre: Array  # gear 1's frame origin (3,)
    across: Array  # e: gear 1's centre to gear 2's, transverse unit (3,)
    distance: Array  # a: the centres' distance (m)
    axial: Array  # w: gear 2's frame's offset along the axis (m)
    angles: Array  # (φ₁, φ₂): the gears' x-axes from e about the axis (rad)
    slice_positions: Array  # (slices,): y across the face (m)
    tan_helix: float  # tan β_b, signed by the hand
    base_radii: Array  # (2,)
    wrapped: Array  # (2, slices): base pitches taken off gear 1's tooth 0 to place pair 1
    phase: Array  # the base pitches the gears stand from the centred mesh (Δ's wrapped turns)


def _output(flanks: Array, deviation: Array, power: Array, absorbed: Array) -> Array:
    """A mesh's ``(4,)`` output (module docstring) from its loads' parts."""
    return jnp.stack([flanks[0] - flanks[1], deviation, power, absorbed])


def velocity_at(k: BodyKinematics, points: Array) -> Array:
    """World velocity of body ``k``'s material points at the world ``points`` (..., 3) m/s."""
    return k.velocity + jnp.cross(k.angular_velocity, points - k.position)


def resultant(forces: Array, points: Array, reference: Array) -> tuple[Array, Array]:
    """The sum of ``forces`` (..., 3) N acting at ``points`` (..., 3) m and their moment about
    ``reference`` (3,) m."""
    forces, points = jnp.broadcast_arrays(forces, points)
    return (jnp.sum(forces.reshape(-1, 3), axis=0),
            jnp.sum(jnp.cross(points - reference, forces).reshape(-1, 3), axis=0))  # fmt: skip
