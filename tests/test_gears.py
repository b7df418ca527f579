"""Involute gear pairs and the gear-mesh force element (issue 28, first part).

References (not from the code): ISO/TR 6336-30:2017 calculation example 1 (virtual teeth, c'_th,
c', c_γα, c_γβ as published); the zero-backlash centre distance from the involute-function
condition and the backlash's first-order growth ``2 Δa sin α_w`` with the centre distance;
statics of a pair evaluated tooth by tooth (torques ``r_b F``, the helix's axial force
``F tan β_b``); a slowly turning pair under a torque against kinematics (the ratio), statics
(the line-of-action force ``T/r_b2``), ISO 6336's mean mesh stiffness, the share of the mesh
cycle with two pairs in contact (``ε_α − 1``), the mesh frequency ``z₁ n₁`` and Ohlendorf's
loss factor ``H_V``; derivatives against central differences through the backlash."""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from scipy.spatial.transform import Rotation

import diffmbs
import diffmbs.multibody as mb
from diffmbs import gears, simulate
from diffmbs.models.gear_rig import gear_rig
from diffmbs.multibody import BodyKinematics

diffmbs.configure()

DEG = math.pi / 180


def test_iso_6336_30_example_1_stiffness():
    """ISO/TR 6336-30:2017 example 1: m_n 8 mm, z 17/103, α_n 20°, β 15.8°, x 0.145/0,
    b 100 mm, a 500 mm, basic rack D (h_fP = 1.4 m_n)."""
    pair = gears.GearPair(8e-3, (17, 103), 20 * DEG, 15.8 * DEG, (0.145, 0.0), 0.1, 0.5,
                          dedendum=1.4)  # fmt: skip
    geometry = gears.pair_geometry(pair)
    np.testing.assert_allclose(geometry.virtual_teeth, [18.905, 114.543], rtol=2e-5)
    stiffness = np.asarray(gears.iso_6336_stiffness(pair)) / 1e9  # N/(mm·µm)
    np.testing.assert_allclose(stiffness[:2], [17.8558, 12.3705], rtol=2e-5)  # c'_th, c'
    # the mesh stiffnesses also carry ε_α, from the tip diameters the example rounds
    np.testing.assert_allclose(stiffness[2:], [17.4648, 14.8451], rtol=3e-4)


def test_gear_blank_factor_of_a_rimmed_wheel():
    """ISO 6336-1's C_R = 1 + ln(b_s/b) / (5 e^{s_R/(5 m_n)}), b_s/b held to [0.2, 1.2] and s_R/m_n
    to ≥ 1, on example 1's pair: it scales c' (and the mesh stiffnesses), not c'_th."""
    pair = gears.GearPair(8e-3, (17, 103), 20 * DEG, 15.8 * DEG, (0.145, 0.0), 0.1, 0.5,
                          dedendum=1.4)  # fmt: skip
    solid = np.asarray(gears.iso_6336_stiffness(pair))
    # b_s = 30 mm, s_R = 24 mm: 1 + ln 0.3 / (5 e^0.6) = 0.8678…
    rimmed = np.asarray(gears.iso_6336_stiffness(pair, web_thickness=0.03, rim_thickness=0.024))
    expected = 1.0 + math.log(0.3) / (5.0 * math.exp(0.6))
    np.testing.assert_allclose(rimmed[1:] / solid[1:], expected, rtol=1e-12)
    assert rimmed[0] == solid[0] and 0.8678 < expected < 0.8679
    # the bounds: a web thinner than 0.2 b, a rim thinner than m_n, a web wider than 1.2 b
    bounded = [(0.01, 0.002, 0.2, 1.0), (0.05, 0.004, 0.5, 1.0), (0.15, 0.05, 1.2, 6.25)]
    for web, rim, ratio, rim_modules in bounded:
        c_r = gears.gear_blank_factor(pair, web, rim)
        assert c_r == pytest.approx(1.0 + math.log(ratio) / (5.0 * math.exp(rim_modules / 5.0)))
    assert gears.gear_blank_factor(pair, 0.1, 0.05) == 1.0  # a web as wide as the face
    with pytest.raises(ValueError, match="rim_thickness"):
        gears.iso_6336_stiffness(pair, web_thickness=0.03)
    with pytest.raises(ValueError, match="web_thickness must be > 0"):
        gears.gear_blank_factor(pair, 0.0, 0.02)


def _zero_backlash_distance(pair):
    """The centre distance of no backlash: inv α_wt = inv α_t + 2 tan α_n (x₁+x₂)/(z₁+z₂)."""
    alpha_t = math.atan(math.tan(pair.pressure_angle) / math.cos(pair.helix_angle))
    target = (math.tan(alpha_t) - alpha_t + 2 * math.tan(pair.pressure_angle)
              * sum(pair.shifts) / sum(pair.teeth))  # fmt: skip
    working = scipy.optimize.brentq(lambda a: math.tan(a) - a - target, 1e-3, 1.2, xtol=1e-15)
    base = sum(pair.teeth) * pair.module / math.cos(pair.helix_angle) / 2 * math.cos(alpha_t)
    return base / math.cos(working), working, alpha_t


HELICAL = gears.GearPair(3e-3, (20, 40), 20 * DEG, 15 * DEG, (0.1, -0.05), 0.03, 0.0)


def test_backlash_follows_the_centre_distance_and_the_allowances():
    a0, working, alpha_t = _zero_backlash_distance(HELICAL)
    pair = HELICAL._replace(centre_distance=a0)
    assert abs(float(gears.backlash(pair)[1])) < 1e-15
    grown = float(gears.backlash(pair, a0 + 1e-6)[1])
    np.testing.assert_allclose(grown, 2e-6 * math.sin(working), rtol=1e-4)
    allowance = 2e-5  # m, in all, at the reference circles
    thinner = float(gears.backlash(pair, None, (allowance / 2, allowance / 2))[1])
    np.testing.assert_allclose(thinner, allowance * math.cos(alpha_t), rtol=1e-9)


def _kinematics(position, angle, omega=0.0):
    rotation = Rotation.from_rotvec([0.0, 0.0, angle]).as_matrix()
    return BodyKinematics(jnp.asarray(position, float), jnp.asarray(rotation), jnp.zeros(3),
                          jnp.zeros(3), jnp.array([0.0, 0.0, omega]))  # fmt: skip


def test_flanks_backlash_torques_and_the_helixs_axial_force():
    """Gear 2 turned from the centred mesh by s along the line of action: no load within
    ±j/2, then the flank's; the torques are ``r_b F`` on each gear, the axial force
    ``F tan β_b``, opposite on the flanks."""
    a0, _, alpha_t = _zero_backlash_distance(HELICAL)
    pair = HELICAL._replace(centre_distance=a0)
    allowance = 2e-5
    mesh = mb.GearMesh("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), pair, 1e8,
                       allowance=allowance, slices=8)  # fmt: skip
    geometry = gears.pair_geometry(pair)
    base = np.asarray(geometry.base_radii)
    tan_helix = math.tan(float(geometry.base_helix_angle))
    half_gap = 0.5 * allowance * math.cos(alpha_t)
    gear_1 = _kinematics((0, 0, 0), 0.0)
    centred = math.pi + math.pi / pair.teeth[1]  # a space of gear 2 faces gear 1's tooth
    for s in (-1.5, -1.01, -0.99, 0.0, 0.99, 1.01, 1.5):  # in half gaps
        gear_2 = _kinematics((a0, 0, 0), centred + s * half_gap / base[1])
        load, deviation = np.asarray(mesh.output(0.0, gear_1, gear_2))[:2]
        np.testing.assert_allclose(deviation, s * half_gap, rtol=1e-9, atol=1e-15)
        assert (load == 0.0) if abs(s) < 0.99 else (np.sign(load) == np.sign(s) and abs(load)
                                                     > 0.0)  # fmt: skip
        wrench = mesh.wrench(0.0, gear_1, gear_2)
        arms = np.asarray(wrench.point) - np.array([[0, 0, 0], [a0, 0, 0]])
        torques = np.asarray(wrench.torque)[:, 2] + np.cross(arms, np.asarray(wrench.force))[:, 2]
        np.testing.assert_allclose(torques, [-base[0] * load, -base[1] * load], rtol=1e-9,
                                   atol=1e-9 * abs(load))  # fmt: skip
        np.testing.assert_allclose(np.asarray(wrench.force)[1, 2], -tan_helix * load,
                                   rtol=1e-9, atol=1e-12)  # fmt: skip


MESHES = [mb.GearMesh, functools.partial(mb.FacetedGearMesh, points=24)]


@pytest.mark.parametrize("element", MESHES, ids=["analytic", "faceted"])
def test_the_reported_powers_are_the_work_the_mesh_does_on_the_gears(element):
    """At states with the gears moving every way (centre distance, axial offset, tilt-free
    spin, slip both sides of the pitch point), the power of the element's wrench on the two
    bodies equals minus the friction's loss and the normal loads' power into the teeth (the
    energy balance's terms; rigid-body kinematics, not the element's own sums)."""
    a0, _, _ = _zero_backlash_distance(HELICAL)
    pair = HELICAL._replace(centre_distance=a0)
    mesh = element("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), pair, 1e8,
                   damping=500.0, mu=0.08, allowance=1e-5, slices=3)  # fmt: skip
    loads = jax.jit(lambda g1, g2: (mesh.wrench(0.0, g1, g2), mesh.output(0.0, g1, g2)))
    rng = np.random.default_rng(28)
    centred = math.pi + math.pi / pair.teeth[1]
    checked = 0
    for _ in range(12):
        angle = rng.uniform(0, 2 * math.pi)
        gear_1 = BodyKinematics(jnp.asarray(rng.normal(0, 1e-5, 3)),
                                jnp.asarray(Rotation.from_rotvec([0, 0, angle]).as_matrix()),
                                jnp.zeros(3), jnp.asarray(rng.normal(0, 0.05, 3)),
                                jnp.array([0.0, 0.0, rng.uniform(5, 20)]))  # fmt: skip
        spin = float(gear_1.angular_velocity[2]) * pair.teeth[0] / pair.teeth[1]
        turn = centred + rng.uniform(-1, 1) * 0.3 / pair.teeth[1]
        gear_2 = BodyKinematics(jnp.array([a0 + rng.normal(0, 5e-6), 0.0, rng.normal(0, 1e-4)]),
                                jnp.asarray(Rotation.from_rotvec([0, 0, turn]).as_matrix()),
                                jnp.zeros(3), jnp.asarray(rng.normal(0, 0.05, 3)),
                                jnp.array([0.0, 0.0, -spin * rng.uniform(0.9, 1.1)]))  # fmt: skip
        wrench, output = loads(gear_1, gear_2)
        power = 0.0
        for body, k in enumerate((gear_1, gear_2)):
            point = np.asarray(wrench.point[body])
            arm = point - np.asarray(k.position)
            velocity = np.asarray(k.velocity) + np.cross(np.asarray(k.angular_velocity), arm)
            power += np.dot(np.asarray(wrench.force[body]), velocity)
            power += np.dot(np.asarray(wrench.torque[body]), np.asarray(k.angular_velocity))
        load, _, friction, absorbed = np.asarray(output)
        checked += abs(load) > 0 and friction > 0
        np.testing.assert_allclose(power, -(friction + absorbed), rtol=1e-9, atol=1e-9 * (
            abs(friction) + abs(absorbed) + 1e-12), equal_nan=False)  # fmt: skip
    assert checked >= 6  # most states load the teeth and slide


SPUR = gears.GearPair(3e-3, (20, 40), 20 * DEG, 0.0, (0.0, 0.0), 0.02, 0.09)
SPEED, TORQUE, MU = 5.0, 20.0, 0.05  # rad/s of gear 1; N·m on gear 2; friction


def _spur_model(stiffness=None, allowance=0.0, mu=MU, ripple=0.0):
    """The gear rig (``diffmbs.models.gear_rig``: this ``SPUR`` pair, gear 1 driven at
    ``SPEED``, gear 2 on a revolute bearing under a resisting torque, the pair centred at the
    start): ``TORQUE``, or ``ripple`` × ``TORQUE`` at 25 Hz about zero. ``(model, k_max)``."""
    k = float(gears.iso_6336_stiffness(SPUR).single) * SPUR.face_width
    model = gear_rig(speed=SPEED, mean_torque=0.0 if ripple else TORQUE,
                     ripple_torque=ripple * TORQUE, ripple_hz=25.0,
                     stiffness=k if stiffness is None else stiffness, damping=1000.0,
                     allowance=allowance, mu=mu)  # fmt: skip
    return model, k


@functools.cache
def _slow_run():
    model, k = _spur_model()
    ts = jnp.linspace(0.0, 1.0, 4001)
    sol = simulate(model, *model.initial_state(), ts, rtol=1e-8, atol=1e-10, max_steps=100_000)
    return sol, k


def test_a_slowly_turning_pair_meets_kinematics_statics_and_iso_6336():
    sol, k_max = _slow_run()
    ts = np.asarray(sol.ts)
    late = ts > 0.2  # past the start's transient
    out = np.asarray(sol.sensors["mesh_output"])[late]
    omega_2 = np.asarray(sol.sensors["wheel_speed"])[late, 2]
    cycle = 2 * math.pi / (SPUR.teeth[0] * SPEED)
    whole = ts[late] < ts[late][0] + 25 * cycle
    np.testing.assert_allclose(omega_2[whole].mean(), -SPEED * 20 / 40, rtol=1e-4)  # the ratio
    assert np.all(np.abs(omega_2 / (-SPEED * 20 / 40) - 1) < 5e-3)  # the mesh's ripple
    geometry = gears.pair_geometry(SPUR)
    base = np.asarray(geometry.base_radii)
    force = TORQUE / base[1]
    np.testing.assert_allclose(out[:, 0].mean(), force, rtol=1e-2)  # friction's torque: 0.4 %
    # the mesh stiffness F/δ over whole mesh cycles: ISO 6336's mean c_γα b
    stiffness = out[:, 0] / out[:, 1]
    mean = float(gears.iso_6336_stiffness(SPUR).mesh) * SPUR.face_width
    np.testing.assert_allclose(stiffness[whole].mean(), mean, rtol=1e-2)
    # two pairs carry the load over ε_α − 1 of the cycle
    double = np.mean(stiffness[whole] > 1.2 * k_max)
    np.testing.assert_allclose(double, float(geometry.contact_ratio) - 1, atol=0.01)
    # the mesh force's spectrum peaks at the mesh frequency z₁ n₁
    spectrum = np.abs(np.fft.rfft(out[:, 0] - out[:, 0].mean()))
    frequencies = np.fft.rfftfreq(out.shape[0], ts[1] - ts[0])
    step = frequencies[1]
    assert abs(frequencies[np.argmax(spectrum)] - SPUR.teeth[0] * SPEED / (2 * math.pi)) < step
    # friction: Ohlendorf's H_V = π (u + 1)/(z₁ u) (1 − ε_α + ε₁² + ε₂²), loss = μ H_V P
    pitch = float(geometry.base_pitch)
    tips, working = np.asarray(geometry.tip_radii), float(geometry.working_pressure_angle)
    addendum = (np.sqrt(tips**2 - base**2) - base * math.tan(working)) / pitch
    u = SPUR.teeth[1] / SPUR.teeth[0]
    loss_factor = (math.pi * (u + 1) / (SPUR.teeth[0] * u)
                   * (1 - float(geometry.contact_ratio) + np.sum(addendum**2)))  # fmt: skip
    power = TORQUE * SPEED * 20 / 40
    np.testing.assert_allclose(out[whole, 2].mean() / power, MU * loss_factor, rtol=0.05)


@pytest.mark.parametrize("element", MESHES, ids=["analytic", "faceted"])
def test_the_mesh_loads_derivatives_through_the_gap_edge_match_differences(element):
    """The element's load on gear 2 (force and torque) as gear 2 turns through the gap's edge
    (flank A closing, inside the smoothing, in contact): its derivatives w.r.t. ln k, the
    allowance and gear 2's angle against central differences."""
    a0, _, alpha_t = _zero_backlash_distance(HELICAL)
    pair = HELICAL._replace(centre_distance=a0)
    base_2 = float(gears.pair_geometry(pair).base_radii[1])
    half_gap = 0.5 * 2e-5 * math.cos(alpha_t)
    gear_1 = _kinematics((0, 0, 0), 0.0, omega=3.0)

    @jax.jit
    def loads(x):
        log_k, allowance, s = x
        mesh = element("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), pair,
                       1e8 * jnp.exp(log_k), damping=300.0, mu=0.05, allowance=allowance,
                       slices=4, smoothing=1e-7)  # fmt: skip
        turn = math.pi + math.pi / pair.teeth[1] + s / base_2
        rotation = jnp.array([[jnp.cos(turn), -jnp.sin(turn), 0.0],
                              [jnp.sin(turn), jnp.cos(turn), 0.0], [0.0, 0.0, 1.0]])  # fmt: skip
        gear_2 = BodyKinematics(jnp.array([a0, 0.0, 0.0]), rotation, jnp.zeros(3), jnp.zeros(3),
                                jnp.array([0.0, 0.0, -1.5]))  # fmt: skip
        wrench = mesh.wrench(0.0, gear_1, gear_2)
        return jnp.concatenate([wrench.force[1], wrench.torque[1]])

    for s in (half_gap - 2e-7, half_gap, half_gap + 5e-7, half_gap + 3e-6):
        x = jnp.array([0.0, 2e-5, s])
        jac = np.asarray(jax.jacfwd(loads)(x))
        steps = np.array([1e-6, 1e-11, 1e-11])
        differences = np.stack([(loads(x + h * e) - loads(x - h * e)) / (2 * h)
                                for h, e in zip(steps, np.eye(3), strict=True)], axis=1)
        scale = np.abs(differences).max()
        np.testing.assert_allclose(jac / scale, differences / scale, atol=1e-5)


@pytest.mark.slow
def test_derivatives_through_the_backlash_match_differences():
    """The load reverses (gear 2 crosses its backlash twice in 60 ms): forward-mode
    derivatives under error control of the transmission error and gear 2's speed w.r.t. ln k
    and the thickness allowance against central differences at rtol 1e-11 (on this pair,
    tangents carried along the steps were off by up to 14 %, 3 % even at rtol 1e-11)."""

    def outputs(z, rtol=1e-9, **options):
        model, _ = _spur_model(stiffness=2.5e8 * jnp.exp(z[0]), allowance=2e-5 * (1 + z[1]),
                               mu=0.0, ripple=1.0)  # fmt: skip
        sol = simulate(model, *model.initial_state(), jnp.linspace(0.0, 0.06, 4), rtol=rtol,
                       atol=1e-2 * rtol, max_steps=100_000, **options)  # fmt: skip
        return jnp.concatenate([sol.sensors["mesh_output"][1:, 1],
                                sol.sensors["wheel_speed"][1:, 2]])

    z = jnp.zeros(2)
    controlled = diffmbs.ForwardSensitivity()
    jac = np.asarray(jax.jacfwd(lambda z: outputs(z, adjoint=controlled))(z))
    h = 1e-4
    differences = np.stack([(outputs(z + h * e, 1e-11) - outputs(z - h * e, 1e-11)) / (2 * h)
                            for e in np.eye(2)], axis=1)  # fmt: skip
    scale = np.abs(differences).max(axis=1, keepdims=True)
    np.testing.assert_allclose(jac / scale, differences / scale, rtol=1e-3, atol=1e-3)


def test_bad_gear_input_names_the_item():
    with pytest.raises(ValueError, match="contact ratio"):
        mb.GearMesh("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)),
                    SPUR._replace(centre_distance=0.0935), 1e8)  # fmt: skip
    with pytest.raises(ValueError, match="GearMesh.mu"):
        mb.GearMesh("g1", mb.Frame((0, 0, 0)), "g2", mb.Frame((0, 0, 0)), SPUR, 1e8, mu=-0.1)


KINDS = {"gear_mesh": (mb.GearMesh, ""), "faceted_gear_mesh": (mb.FacetedGearMesh, ""),
         "rigid_elastic_gear_mesh": (mb.RigidElasticGearMesh,
                                     "tooth_stiffness = [1.4e9, 1.8e9]\ntooth_mass = [3e-3, 4e-3]")}


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_gear_mesh_described_in_toml_is_the_python_one(kind):
    text = f"""
gravity = [0.0, 0.0, 0.0]
[[bodies]]
name = "g1"
mass = 0.44
inertia = [1e-4, 1e-4, 2e-4]
[[bodies]]
name = "g2"
mass = 1.78
inertia = [1.6e-3, 1.6e-3, 3.2e-3]
position = [0.09, 0.0, 0.0]
[[forces]]
name = "mesh"
type = "{kind}"
body_i = "g1"
frame_i = {{ point = [0.0, 0.0, 0.0] }}
body_j = "g2"
frame_j = {{ point = [0.0, 0.0, 0.0] }}
stiffness = 2.5e8
mu = 0.05
{KINDS[kind][1]}
[forces.pair]
module = 3e-3
teeth = [20, 40]
pressure_angle_deg = 20.0
helix_angle = 0.0
shifts = [0.0, 0.0]
face_width = 0.02
centre_distance = 0.09
"""
    mesh = mb.model_from_toml(text).force_groups[0].member(0)
    assert type(mesh) is KINDS[kind][0]
    assert mesh.pair == SPUR._replace(pressure_angle=math.radians(20.0))
    assert float(mesh.stiffness) == 2.5e8 and float(mesh.mu) == 0.05
    with pytest.raises(mb.ModelError, match=r"forces\[0\].pair: missing key 'module'"):
        mb.model_from_toml(text.replace("module = 3e-3\n", ""))
