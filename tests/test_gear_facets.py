"""Gear teeth as faceted solids in signed-distance contact (issue 28's mesh-contact option).

References (not from the code): the involute's defining property — its normal is tangent to
the base circle — and the tooth thickness ``m_t (π/2 + 2x tan α_n)`` at the reference circle;
trimesh's closest-point distance to the extruded tooth (its own triangles, its own search);
the closure of rigid involutes turned a given distance apart along the line of action (the
gears' angles: conjugate action); polygon approximation — chords inside a convex curve, short
of it by their sagitta ``h²/(8ρ)``, the error falling as the square of the vertex count."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

import diffmbs
import diffmbs.multibody as mb
from diffmbs import gears
from diffmbs.models.gear_rig import PAIR
from diffmbs.multibody import BodyKinematics

diffmbs.configure()


def _kinematics(position, angle):
    rotation = Rotation.from_rotvec([0.0, 0.0, angle]).as_matrix()
    return BodyKinematics(jnp.asarray(position, float), jnp.asarray(rotation), jnp.zeros(3),
                          jnp.zeros(3), jnp.zeros(3))  # fmt: skip


@pytest.mark.parametrize("gear", [0, 1])
def test_the_flanks_are_involutes_of_the_thickness_drawn(gear):
    """Each chord's normal, through its middle, touches the base circle (the involute's
    defining property); the arc thickness at the reference circle is the drawing's less the
    allowance."""
    pair = PAIR._replace(shifts=(0.3, -0.1))
    geometry = gears.pair_geometry(pair)
    base = float(geometry.base_radii[gear])
    reference = float(geometry.reference_radii[gear])
    flanks = np.asarray(gears.tooth_profile(pair, gear, 4000, allowance=1e-4))
    for flank in flanks:
        middle, chord = 0.5 * (flank[1:] + flank[:-1]), np.diff(flank, axis=0)
        normal = np.c_[chord[:, 1], -chord[:, 0]] / np.linalg.norm(chord, axis=1)[:, None]
        reach = np.abs(middle[:, 0] * normal[:, 1] - middle[:, 1] * normal[:, 0])
        np.testing.assert_allclose(reach, base, rtol=1e-8)
    radius = np.linalg.norm(flanks[0], axis=1)
    half_angle = np.interp(reference, radius, np.arctan2(flanks[0][:, 1], flanks[0][:, 0]))
    drawn = float(geometry.transverse_module) * (
        0.5 * math.pi + 2 * pair.shifts[gear] * math.tan(pair.pressure_angle)) - 1e-4
    np.testing.assert_allclose(2 * half_angle * reference, drawn, rtol=1e-7)
    np.testing.assert_allclose(-flanks[1][:, 1], flanks[0][:, 1], rtol=1e-15)


def test_the_depth_inside_the_tooth_solid_is_trimeshs_distance():
    """Points inside the extruded tooth: ``tooth_depth`` (the transverse outline), capped by
    the end faces, equals trimesh's closest-point distance to the mesh's triangles."""
    mesh = gears.tooth_mesh(PAIR, 0, 12)
    assert mesh.is_watertight and mesh.is_convex and mesh.volume > 0
    rng = np.random.default_rng(28)
    inside = rng.dirichlet(np.full(len(mesh.vertices), 0.3), size=300) @ mesh.vertices
    inside[:, 2] = rng.uniform(-0.45, 0.45, len(inside)) * PAIR.face_width
    _, distance, _ = trimesh.proximity.closest_point_naive(mesh, inside)
    depth, _ = mb.tooth_depth(jnp.asarray(inside[:, :2]), gears.tooth_profile(PAIR, 0, 12))
    capped = np.minimum(np.asarray(depth), 0.5 * PAIR.face_width - np.abs(inside[:, 2]))
    np.testing.assert_allclose(capped, distance, rtol=0, atol=1e-10)  # trimesh: 2e-11
    outside = inside[:, :2] * 1.5
    assert np.all(np.asarray(mb.tooth_depth(jnp.asarray(outside),
                                            gears.tooth_profile(PAIR, 0, 12))[0]) < 0)


def _sweep(points: int, closure: float):
    """Flank A's closures and contacts' places on the path as gear 1 turns one pitch and gear
    2 follows rigidly, ``closure`` ahead along the line of action."""
    geometry = gears.pair_geometry(PAIR)
    base = np.asarray(geometry.base_radii)
    mesh = mb.FacetedGearMesh("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), PAIR, 1e8,
                              points=points)  # fmt: skip
    contacts = jax.jit(lambda gear_1, gear_2: mesh.contacts(gear_1, gear_2))
    angle = float(geometry.working_pressure_angle)
    line = np.array([math.sin(angle), math.cos(angle), 0.0])  # flank A's line of action
    pitch_point = np.array([float(geometry.working_radii[0]), 0.0, 0.0])
    approach = (math.sqrt(float(geometry.tip_radii[1]) ** 2 - base[1] ** 2)
                - base[1] * math.tan(angle))  # fmt: skip
    closures, places = [], []
    for turn in np.linspace(0.0, 2 * math.pi / PAIR.teeth[0], 61):
        wheel = math.pi + math.pi / PAIR.teeth[1] - turn * base[0] / base[1] + closure / base[1]
        depth, point, _ = contacts(_kinematics((0, 0, 0), turn),
                                   _kinematics((PAIR.centre_distance, 0, 0), wheel))
        closures.append(np.asarray(depth)[0, 0])
        places.append((np.asarray(point)[0, 0] - pitch_point) @ line + approach)
    return np.array(closures), np.array(places), float(geometry.path_of_contact)


def _sagitta(points: int) -> float:
    """The largest sagitta of the two gears' flank chords, summed: ``h²/(8ρ)`` with ρ the
    involute's curvature radius at the chord's middle."""
    total = 0.0
    for gear in (0, 1):
        base = float(gears.pair_geometry(PAIR).base_radii[gear])
        flank = np.asarray(gears.tooth_profile(PAIR, gear, points))[0]
        chord = np.linalg.norm(np.diff(flank, axis=0), axis=1)
        middle = np.linalg.norm(0.5 * (flank[1:] + flank[:-1]), axis=1)
        total += np.max(chord**2 / (8 * np.sqrt(middle**2 - base**2)))
    return total


def test_faceted_teeth_close_short_of_the_involutes_by_their_sagitta_falling_as_h_squared():
    """Rigid gears turned 10 µm ahead of conjugate action: every pair in contact inside the
    path closes by 10 µm with exact involutes; faceted teeth lie inside the involutes, so they
    close by less (never more), short by no more than the facets' sagittas, and the shortfall
    falls with the square of the vertex count."""
    closure = 10e-6
    shortfall = {}
    for points in (16, 32, 64):
        depths, places, path = _sweep(points, closure)
        pitch = float(gears.pair_geometry(PAIR).base_pitch)
        inside = (places > 0.1 * pitch) & (places < path - 0.1 * pitch) & (depths > -1e-4)
        assert inside.sum() > 61  # the pairs in contact, single and double contact
        assert np.all(depths[inside] <= closure + 1e-15)
        shortfall[points] = closure - depths[inside].min()
        assert shortfall[points] <= 1.1 * _sagitta(points), points
    for coarse, fine in ((16, 32), (32, 64)):
        assert 3.0 < shortfall[coarse] / shortfall[fine] < 6.0  # measured 4.5, 5.0


def test_finely_faceted_teeth_carry_the_analytic_elements_load():
    """Gear 2 held 10 µm ahead of conjugate action: with 128 vertices a flank, the faceted mesh's
    load equals :class:`~diffmbs.multibody.GearMesh`'s (same stiffness law) to 1 % wherever
    its contacts lie inside the path (the analytic element's ramps and the solids' corner
    contact at the path's ends differ by design), and is not larger."""
    geometry = gears.pair_geometry(PAIR)
    base = np.asarray(geometry.base_radii)
    k = float(gears.iso_6336_stiffness(PAIR).single) * PAIR.face_width
    elements = [element("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), PAIR, k, **extra)
                for element, extra in ((mb.GearMesh, {}), (mb.FacetedGearMesh, {"points": 128}))]
    loads = jax.jit(lambda g1, g2: jnp.stack([e.output(0.0, g1, g2)[0] for e in elements]))
    closures, places, path = _sweep(128, 10e-6)
    pitch = float(geometry.base_pitch)
    compared = 0
    for turn, depth, place in zip(np.linspace(0.0, 2 * math.pi / PAIR.teeth[0], 61), closures,
                                  places, strict=True):  # fmt: skip
        wheel = math.pi + math.pi / PAIR.teeth[1] - turn * base[0] / base[1] + 10e-6 / base[1]
        analytic, faceted = np.asarray(loads(_kinematics((0, 0, 0), turn),
                                             _kinematics((PAIR.centre_distance, 0, 0), wheel)))
        touching = place[depth > 0]
        if np.all((touching > 0.1 * pitch) & (touching < path - 0.1 * pitch)):
            np.testing.assert_allclose(faceted, analytic, rtol=1e-2)
            assert faceted <= analytic * (1 + 1e-3)  # the places' stiffness differ a little
            compared += 1
    assert compared > 20
