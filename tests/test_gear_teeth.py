"""Rigid-elastic gear teeth (issue 28; SEEDS.md 004's extension).

References (not from the code): Castigliano's theorem on the same tapered Timoshenko beam,
integrated by SciPy's quadrature over the involute tooth's continuous thickness; the geometry
of the contact (a pair's contact point lies on the two teeth the element says it does: their
angular sectors); springs in series under a static load."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from scipy.spatial.transform import Rotation

import diffmbs
import diffmbs.multibody as mb
from diffmbs import gears
from diffmbs.flex import Material
from diffmbs.models.gear_rig import PAIR
from diffmbs.multibody import BodyKinematics

diffmbs.configure()


def _castigliano(pair, gear):
    """The tooth's compliance along the line of action at the working pitch point: a cantilever
    clamped at the root circle, the involute's thickness (the base circle's below it)."""
    g = gears.pair_geometry(pair)
    base, reference = float(g.base_radii[gear]), float(g.reference_radii[gear])
    alpha_t = float(g.transverse_pressure_angle)
    thickness = float(g.transverse_module) * (0.5 * math.pi + 2 * pair.shifts[gear]
                                              * math.tan(pair.pressure_angle))  # fmt: skip

    def half_angle(r):
        alpha = math.acos(base / max(r, base))
        return thickness / (2 * reference) + (math.tan(alpha_t) - alpha_t) - (
            math.tan(alpha) - alpha)  # fmt: skip

    r = float(g.working_radii[gear])
    point = r * np.array([math.cos(half_angle(r)), math.sin(half_angle(r))])
    tangent_angle = math.atan2(point[1], point[0]) - math.acos(base / r)
    touch = base * np.array([math.cos(tangent_angle), math.sin(tangent_angle)])
    d = (touch - point) / np.linalg.norm(touch - point)  # into the flank, along the line
    steel = Material.steel()
    E, G = float(steel.E), float(steel.G)
    b = pair.face_width
    root = reference - pair.module * (pair.dedendum - pair.shifts[gear])

    def integrand(s):
        h = 2 * s * math.sin(half_angle(s))
        area, inertia = b * h, b * h**3 / 12
        moment = d[1] * (point[0] - s) - d[0] * point[1]
        return moment**2 / (E * inertia) + d[1] ** 2 / (5 / 6 * G * area) + d[0] ** 2 / (E * area)

    return scipy.integrate.quad(integrand, root, point[0], epsabs=0, epsrel=1e-10, limit=200)[0]


@pytest.mark.parametrize("gear", [0, 1])
def test_the_tooths_fe_stiffness_is_castiglianos_for_the_same_beam(gear):
    pair = PAIR._replace(shifts=(0.25, -0.1))
    stiffness = mb.tooth_stiffness(pair, gear, elements=80)
    np.testing.assert_allclose(1.0 / stiffness, _castigliano(pair, gear), rtol=2e-3)
    # stiffer than the whole mesh of ISO 6336 (c' adds the contact and the gear body)
    assert stiffness > float(gears.iso_6336_stiffness(pair).single) * pair.face_width


def _kinematics(position, angle):
    rotation = Rotation.from_rotvec([0.0, 0.0, angle]).as_matrix()
    return BodyKinematics(jnp.asarray(position, float), jnp.asarray(rotation), jnp.zeros(3),
                          jnp.zeros(3), jnp.zeros(3))  # fmt: skip


def _element(**extra):
    return mb.RigidElasticGearMesh("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), PAIR,
                                   3.7e8, tooth_stiffness=(1.43e9, 1.76e9),
                                   tooth_mass=(2e-3, 3e-3), **extra)  # fmt: skip


def test_each_pair_loads_the_teeth_its_contact_point_lies_on():
    """At random angles of both gears (whole pitches of either included), each pair inside the
    path is made of the teeth in whose angular sectors its contact point lies."""
    element = _element()
    base = np.asarray(gears.pair_geometry(PAIR).base_radii)
    z1, z2 = PAIR.teeth
    rng = np.random.default_rng(4)
    checked = 0
    for _ in range(30):
        phi_1 = rng.uniform(-10, 10)
        phi_2 = (math.pi + math.pi / z2 - phi_1 * base[0] / base[1] + rng.uniform(-1, 1) * 1e-5
                 + 2 * math.pi * rng.integers(z2) / z2)  # fmt: skip
        mesh = element._mesh(_kinematics((0, 0, 0), phi_1),
                             _kinematics((PAIR.centre_distance, 0, 0), phi_2))
        teeth_1, teeth_2 = (np.asarray(t) for t in element._teeth(mesh))
        window = np.asarray(element._window(mesh))
        for flank, pair in zip(*np.nonzero(window[:, 0] > 0.5), strict=True):
            point = np.asarray(mesh.pitch_point + (mesh.xi[flank, 0, pair] - mesh.approach)
                               * mesh.transverse[flank])  # fmt: skip
            sector_1 = round((math.atan2(point[1], point[0]) - phi_1) * z1 / (2 * math.pi)) % z1
            sector_2 = round((math.atan2(point[1], point[0] - PAIR.centre_distance) - phi_2)
                             * z2 / (2 * math.pi)) % z2  # fmt: skip
            assert (teeth_1[flank, 0, pair], teeth_2[flank, 0, pair]) == (sector_1, sector_2)
            checked += 1
    assert checked > 40


def test_a_static_pair_is_the_contact_and_the_teeth_in_series():
    """One pair in contact, held 10 µm past conjugate action: with each tooth deflected by the
    load over its spring, the teeth are in equilibrium (no acceleration) exactly when the load
    is the closure times the series stiffness ``1/(1/k_c + 1/k_t1 + 1/k_t2)``."""
    element = _element()
    base = np.asarray(gears.pair_geometry(PAIR).base_radii)
    z1, z2 = PAIR.teeth
    for phi_1 in np.linspace(0.0, 2 * math.pi / z1, 21):  # the first with one pair in contact
        gear_1 = _kinematics((0, 0, 0), phi_1)
        gear_2 = _kinematics((PAIR.centre_distance, 0, 0),
                             math.pi + math.pi / z2 - phi_1 * base[0] / base[1] + 1e-5 / base[1])
        mesh = element._mesh(gear_1, gear_2)
        window = np.asarray(element._window(mesh))[0, 0]
        if np.sum(window > 0.999) == 1 and np.sum(window > 1e-9) == 1:
            break
    (pair,) = np.nonzero(window > 0.5)[0]
    n, m = (int(np.asarray(t)[0, 0, pair]) for t in element._teeth(mesh))
    contact = float(element._stiffness(mesh)[0, 0, pair])
    k_t1, k_t2 = (float(k) for k in element.tooth_stiffness)
    closure = float(mesh.depth[0])
    load = closure / (1 / contact + 1 / k_t1 + 1 / k_t2)
    state = np.zeros(element.state_size)
    state[n], state[z1 + m] = -load / k_t1, -load / k_t2
    wrench, rates = element.loads(0.0, jnp.asarray(state), gear_1, gear_2)
    np.testing.assert_allclose(np.asarray(rates)[z1 + z2:], 0.0, atol=1e-9 * load / 2e-3)
    output = element.output_at(0.0, jnp.asarray(state), gear_1, gear_2)
    np.testing.assert_allclose(float(output[0]), load, rtol=1e-6)
    # the gears feel the teeth's springs: r_b F about their axes, as rigid teeth would pass
    arms = np.asarray(wrench.point) - np.array([[0, 0, 0], [PAIR.centre_distance, 0, 0]])
    torques = np.asarray(wrench.torque)[:, 2] + np.cross(arms, np.asarray(wrench.force))[:, 2]
    np.testing.assert_allclose(torques, -base * load, rtol=1e-6)


@pytest.mark.slow
def test_the_rig_with_rigid_elastic_teeth_carries_its_load_as_the_rigid_mesh_in_series():
    """The gear rig under a steady 20 N·m for 60 ms: with rigid-elastic teeth (FE springs,
    contact spring in series to ISO's stiffness) the mean mesh load is T/r_b2 (within the
    friction's moment) and the rigid element's, the mean transmission error the rigid
    element's within 1 %; the teeth's vibration adds to the load's fluctuation."""
    from diffmbs import simulate
    from diffmbs.models.gear_rig import gear_rig

    ts = jnp.linspace(0.0, 0.06, 1201)
    runs = {}
    for elastic in (False, True):
        model = gear_rig(ripple_torque=0.0, elastic_teeth=elastic)
        sol = simulate(model, *model.initial_state(), ts, rtol=1e-8, atol=1e-11,
                       max_steps=200_000)  # fmt: skip
        runs[elastic] = np.asarray(sol.sensors["mesh_output"])[ts > 0.02]
    base = float(gears.pair_geometry(PAIR).base_radii[1])
    np.testing.assert_allclose(runs[True][:, 0].mean(), 20.0 / base, rtol=1e-2)  # friction
    np.testing.assert_allclose(runs[True][:, 0].mean(), runs[False][:, 0].mean(), rtol=1e-3)
    np.testing.assert_allclose(runs[True][:, 1].mean(), runs[False][:, 1].mean(), rtol=1e-2)
    assert runs[True][:, 0].std() > runs[False][:, 0].std()
