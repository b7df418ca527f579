"""Rigid-elastic gear teeth (../shared/SEEDS.md 004's extension): each tooth a body with its
own tangential coordinate, held to its gear by a spring–damper identified once from a FE model
of the tooth; compared with the rigid teeth of :class:`~diffmbs.multibody.GearMesh`.

**The tooth's spring** (:func:`tooth_stiffness`): the tooth as the project's beam FE — Timoshenko
elements along its centre line from the root circle to the tip, each a rectangle of the face
width by the involute tooth's thickness at the element's middle radius (the base circle's
below it; fillet and the gear body's compliance left out: clamped at the root) — loaded on its
flank at the working pitch point along the line of action; the stiffness is that load over the
flank point's displacement along it (the section rigid across its thickness).

**The element** (:class:`RigidElasticGearMesh`): every tooth of both gears carries a deflection
``u`` (m, along the line of action at the base circle: the tooth turned by ``u / r_b`` about
the gear's axis, positive with the gear's angle) and its rate, ``2 (z₁ + z₂)`` internal states.
A pair's closure is :class:`~diffmbs.multibody.GearMesh`'s plus (flank A) or minus (flank B)
the deflections of its two teeth; its load (the same stiffness law, now the contact's spring,
in series with the teeth) pushes the teeth back, ``m_t ü = −k_t u − c_t u̇ ∓ Σ F``; the gears feel
the teeth's springs and dampers about their axes in place of the loads' moments (the loads'
other components, and friction, go to the gears directly). Which teeth meet needs no search:
along flank A gear 1's tooth ``n`` (at ``φ₁ + 2πn/z₁``) sits ``n`` base pitches ahead of tooth
0, and meets gear 2's tooth ``−1 − n − K`` (flank B: ``−n − K``), the teeth of gear 2 at
``φ₂ + 2πm/z₂`` and ``K`` the whole base pitches the gears stand from the centred mesh (tooth 0
of gear 1 in the space between gear 2's teeth −1 and 0).

With massless, infinitely stiff teeth the element is :class:`~diffmbs.multibody.GearMesh`; with
the contact stiffness ``k_c`` and the teeth's ``k_t1, k_t2`` in series a pair is as stiff as
``1/(1/k_c + 1/k_t1 + 1/k_t2)``. :meth:`potential_energy` is zero: the contacts' and the
teeth's energies depend on the teeth's states, not on the bodies' coordinates alone (an energy
sensor of the model leaves them out).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from diffmbs.flex import BeamModel, Material, RectangularSection
from diffmbs.gears import GearPair, involute, pair_geometry
from diffmbs.multibody._bodies import as_float_array
from diffmbs.multibody._forces import Wrench
from diffmbs.multibody._gears import AbstractGearMesh, _Mesh, _output
from diffmbs.parameters import check_physical_value

__all__ = ["RigidElasticGearMesh", "tooth_stiffness"]


def _half_thickness_angle(pair: GearPair, gear: int, radius: np.ndarray) -> np.ndarray:
    """Half the tooth's angular thickness (rad) at ``radius`` (m), the base circle's below it."""
    g = pair_geometry(pair)
    base, reference = float(g.base_radii[gear]), float(g.reference_radii[gear])
    thickness = float(g.transverse_module) * (
        0.5 * math.pi + 2.0 * pair.shifts[gear] * math.tan(pair.pressure_angle)
    ) - pair.thickness_allowances[gear]
    pressure = np.arccos(base / np.maximum(radius, base))
    return (thickness / (2.0 * reference) + float(involute(g.transverse_pressure_angle))
            - (np.tan(pressure) - pressure))  # fmt: skip


def tooth_stiffness(pair: GearPair, gear: int, *, elements: int = 60,
                    material: Material | None = None) -> float:  # fmt: skip
    """One tooth's stiffness (N/m) along the line of action, loaded on its flank at the working
    pitch point (module docstring): the project's Timoshenko beam FE, ``elements`` along the
    tooth, ``material`` (default steel)."""
    material = Material.steel() if material is None else material
    g = pair_geometry(pair)
    root = float(g.reference_radii[gear]) - pair.module * (pair.dedendum - pair.shifts[gear])
    tip, base = float(g.tip_radii[gear]), float(g.base_radii[gear])
    contact = float(g.working_radii[gear])
    angle = float(_half_thickness_angle(pair, gear, np.array(contact)))
    load_x = contact * math.cos(angle)  # the flank point's projection on the centre line
    # nodes from the root to the tip, one at the load's station
    below = np.linspace(root, load_x, max(2, round(elements * (load_x - root) / (tip - root))))
    x = np.concatenate([below, np.linspace(load_x, tip, elements + 2 - below.size)[1:]])
    middle = 0.5 * (x[1:] + x[:-1])
    height = 2.0 * middle * np.sin(_half_thickness_angle(pair, gear, middle))
    sections = [RectangularSection(pair.face_width, h) for h in height]
    nodes = np.c_[x, np.zeros_like(x), np.zeros_like(x)]
    beam = BeamModel(nodes, np.c_[np.arange(x.size - 1), np.arange(1, x.size)], sections,
                     material, orientation=(0.0, 1.0, 0.0),
                     element_section=tuple(range(x.size - 1)))  # fmt: skip
    stiffness = np.asarray(beam.assemble().stiffness)
    # the load on the +y flank at P, pushing in along the line of action: from P towards the
    # base circle's tangent point, at the polar angle angle − α_P
    pressure = math.acos(base / contact)
    direction = -np.array([math.cos(angle - pressure + 0.5 * math.pi),
                           math.sin(angle - pressure + 0.5 * math.pi)])  # fmt: skip
    arm = contact * math.sin(angle)  # P's offset from the centre line (y)
    node = int(np.argmin(np.abs(x - load_x)))
    # unit load at P on the node: forces (x, y) and the moment about z of the offset force
    load = np.zeros(stiffness.shape[0])
    load[6 * node: 6 * node + 2] = direction
    load[6 * node + 5] = -arm * direction[0]
    free = np.arange(6, stiffness.shape[0])  # the root node clamped
    u = np.zeros_like(load)
    u[free] = np.linalg.solve(stiffness[np.ix_(free, free)], load[free])
    at_p = u[6 * node: 6 * node + 2] + u[6 * node + 5] * np.array([-arm, 0.0])
    return float(1.0 / (direction @ at_p))


class RigidElasticGearMesh(AbstractGearMesh):
    """Rigid-elastic teeth (module docstring): :class:`~diffmbs.multibody.AbstractGearMesh`'s
    fields (``stiffness``: the contact's spring, one pair's largest, N/m) and, per gear
    ``(2,)``: ``tooth_stiffness`` k_t (N/m along the line of action, :func:`tooth_stiffness`),
    ``tooth_mass`` m_t (kg, the tooth's inertia about the gear's axis over r_b²) and
    ``tooth_damping`` c_t (N·s/m)."""

    tooth_stiffness: Array = eqx.field(kw_only=True, converter=as_float_array,
                                       metadata={"units": "N/m"})  # fmt: skip
    tooth_mass: Array = eqx.field(kw_only=True, converter=as_float_array,
                                  metadata={"units": "kg"})  # fmt: skip
    tooth_damping: Array = eqx.field(kw_only=True, default=(0.0, 0.0),
                                     converter=as_float_array,
                                     metadata={"units": "N s/m"})  # fmt: skip

    def __check_init__(self):
        name = type(self).__name__
        for field in ("tooth_stiffness", "tooth_mass", "tooth_damping"):
            value = getattr(self, field)
            if jnp.shape(value) != (2,):
                raise ValueError(f"{name}.{field}: expected one value per gear, shape (2,), "
                                 f"got shape {jnp.shape(value)}")  # fmt: skip
            check_physical_value(field, value, f"{name}.{field}")

    @property
    def state_size(self) -> int:
        return 2 * sum(self.pair.teeth)

    def _teeth(self, mesh: _Mesh) -> tuple[Array, Array]:
        """The teeth of each pair, ``(2 gears, 2 flanks, slices, pairs)`` integer indices into
        each gear's teeth (module docstring)."""
        z1, z2 = self.pair.teeth
        p = jnp.arange(self.pairs) - 1.0
        sign = jnp.array([1.0, -1.0])[:, None, None]
        ahead = sign * (mesh.wrapped[..., None] + p)  # gear 1's tooth: pitches ahead of tooth 0
        gear_1 = jnp.mod(ahead, z1)
        gear_2 = jnp.mod(jnp.array([-1.0, 0.0])[:, None, None] - ahead - mesh.phase, z2)
        return gear_1.astype(int), gear_2.astype(int)

    def loads(self, t, state, ki, kj) -> tuple[Wrench, Array]:
        wrench, _, rates = self._state_loads(state, ki, kj)
        return wrench, rates

    def _state_loads(self, state, ki, kj):
        z1, z2 = self.pair.teeth
        u, w = state[: z1 + z2], state[z1 + z2:]
        mesh = self._mesh(ki, kj)
        teeth_1, teeth_2 = self._teeth(mesh)
        sign = jnp.array([1.0, -1.0])[:, None, None]
        yielded = u[teeth_1] + u[z1 + teeth_2]
        yield_rate = w[teeth_1] + w[z1 + teeth_2]
        depth = mesh.depth[:, None, None] + sign * yielded
        rate = mesh.rate[:, None, None] + sign * yield_rate
        load = self._window(mesh) * self._contact_loads(depth, rate, self._stiffness(mesh))
        flanks = jnp.sum(load, axis=(1, 2))
        # the loads push each tooth back: −Σ F on flank A, +Σ F on flank B
        push = (-sign * load).ravel()
        pushed = jnp.zeros(z1 + z2).at[teeth_1.ravel()].add(push).at[
            z1 + teeth_2.ravel()].add(push)  # fmt: skip
        k_t = jnp.repeat(self.tooth_stiffness, jnp.array([z1, z2]), total_repeat_length=z1 + z2)
        c_t = jnp.repeat(self.tooth_damping, jnp.array([z1, z2]), total_repeat_length=z1 + z2)
        m_t = jnp.repeat(self.tooth_mass, jnp.array([z1, z2]), total_repeat_length=z1 + z2)
        held = k_t * u + c_t * w  # what each tooth's spring–damper passes to its gear
        rates = jnp.concatenate([w, (pushed - held) / m_t])
        # the gears: the loads without their moments about each gear's axis, and the teeth's
        wrench, power = self._path_wrench(ki, kj, mesh, load, flanks)
        radii = mesh.base_radii
        turning = jnp.stack([  # the normal loads' moments about each gear's axis (its +φ)
            -radii[0] * (flanks[0] - flanks[1]), -radii[1] * (flanks[0] - flanks[1])])
        springs = jnp.stack([radii[0] * jnp.sum(held[:z1]), radii[1] * jnp.sum(held[z1:])])
        correction = (springs - turning)[:, None] * mesh.axis
        wrench = Wrench(force=wrench.force, point=wrench.point,
                        torque=wrench.torque + correction)  # fmt: skip
        absorbed = jnp.sum(load * rate)
        return wrench, (flanks, mesh.deviation, power, absorbed), rates

    def _loads(self, ki, kj):
        """At undeflected teeth (the element's loads without its states)."""
        wrench, (flanks, deviation, power, absorbed), _ = self._state_loads(
            jnp.zeros(self.state_size), ki, kj)  # fmt: skip
        return wrench, flanks, deviation, power, absorbed

    def output_at(self, t, state, ki, kj) -> Array:
        return _output(*self._state_loads(state, ki, kj)[1])

