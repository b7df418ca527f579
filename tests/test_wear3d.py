"""Wear over angle × axial maps: a crowned journal that tilts in its bore (3-D).

References (not from the code): Hertz's ellipse solved here with SciPy's elliptic integrals
and a root finder; the cells' pressures against ``scipy.integrate.dblquad``; the contact's
depth against a brute-force search along the journal; statics (a torque ``T`` on a journal
resting under its weight moves the contact to ``s = T/(m g)`` along its axis); Archard's volume
``V = k P v t``; a point of the spinning journal passes once under the patch, losing
``k ∫ p dy = k (π/2) p₀ β (1 − x²/α²)`` at axial position ``x``. Gradients against central
differences."""

import functools
import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import scipy.spatial.transform
import scipy.special

import diffmbs
import diffmbs.multibody as mb
from diffmbs import hertz, simulate, wear
from diffmbs.app import main
from diffmbs.multibody import BodyKinematics
from identification import WearProfileExperiment

diffmbs.configure()

MASS, G = 10.0, 9.81  # kg, m/s²
R, C = 0.01, 2e-4  # journal radius, clearance (m)
CROWN, HALF, BORE_HALF = 4.0, 0.01, 0.012  # crown radius, journal's and bore's half-lengths (m)
OMEGA = 2 * math.pi * 10.0  # rad/s
K_WEAR = (1e-13, 3e-13)  # 1/Pa: bore, journal
STIFFNESS = 1e10  # N/m^1.5
MODULUS = float(hertz.contact_modulus(210e9, 0.3, 210e9, 0.3))
CELLS, AXIAL = 36, 24
OFFSET = 0.002  # m: where the applied torque puts the contact along the axis


def _hertz_ellipse(force):
    """(axial semi-axis, semi-axis around, p₀) of Hertz's ellipse, solved with SciPy."""
    axial, around = 0.5 / CROWN, 0.5 * (1 / R - 1 / (R + C))
    small, large = min(axial, around), max(axial, around)

    def ratio(m):  # B'/A' of the ellipse with e² = m
        k, e = scipy.special.ellipk(m), scipy.special.ellipe(m)
        return (e / (1 - m) - k) / (k - e)

    m = scipy.optimize.brentq(lambda m: ratio(m) - large / small, 1e-12, 1 - 1e-15, xtol=1e-15)
    k, e = scipy.special.ellipk(m), scipy.special.ellipe(m)
    a = (3 * force * (k - e) / (2 * math.pi * MODULUS * m * small)) ** (1 / 3)
    b = a * math.sqrt(1 - m)
    peak = 3 * force / (2 * math.pi * a * b)
    return (a, b, peak) if axial <= around else (b, a, peak)


def _joint(clearance=C, crown=CROWN, wear_coefficient=K_WEAR, cells=CELLS, axial_cells=AXIAL):
    return mb.CrownedWearingClearance(
        "ground", (0, 0, 0), (0, 0, 1), "journal", (0, 0, 0), (0, 0, 1), clearance,
        journal_radius=R, contact_modulus=MODULUS, wear_coefficient=wear_coefficient,
        crown_radius=crown, half_length=HALF, bore_half_length=BORE_HALF, cells=cells,
        axial_cells=axial_cells, stiffness=STIFFNESS, damping=0.5, smoothing=1e-10,
    )  # fmt: skip


def _balancing_torque(t, kinematics):
    return jnp.array([MASS * G * OFFSET, 0.0, 0.0])  # N m, world


def _journal_model(**joint):
    """The journal resting on its bore under its weight, spinning, tilted by the torque that
    puts the contact at ``OFFSET`` along its axis (statics: ``T = m g s``)."""
    tilt = math.asin(OFFSET / CROWN)  # the tilt at which the crown touches at OFFSET
    delta = (MASS * G / STIFFNESS) ** (2 / 3)
    b = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
    b.add_body(mb.RigidBody(
        "journal", MASS, (0.01, 0.01, 0.02),
        position=(0.0, -(C + delta) + OFFSET**2 / (2 * CROWN), 0.0),
        orientation=(math.cos(tilt / 2), math.sin(tilt / 2), 0.0, 0.0),
        angular_velocity=(0.0, 0.0, OMEGA)))  # fmt: skip
    b.add_force("bearing", _joint(**joint))
    b.add_force("torque", mb.AppliedTorque("journal", _balancing_torque))
    b.add_sensor("force", mb.ElementForce("bearing"))
    return b.build()


def test_cells_hold_the_ellipses_load_and_match_quadrature():
    edges = np.linspace(-0.01, 0.01, 9)
    alpha, beta, centre = 0.004, 0.05, (0.3, 0.001)
    p = np.asarray(wear.ellipse_cell_pressures(*centre, beta, alpha, 2.0, 36, edges))
    width = 2 * math.pi / 36
    np.testing.assert_allclose(p.sum() * width * 0.0025, 2 * math.pi / 3 * 2.0 * alpha * beta,
                               rtol=1e-13)  # fmt: skip

    def exact(k, m):
        def f(y, x):
            return 2.0 * math.sqrt(max(1 - ((x - centre[1]) / alpha) ** 2
                                       - ((y - centre[0]) / beta) ** 2, 0.0))  # fmt: skip

        mean = scipy.integrate.dblquad(f, edges[m], edges[m + 1], k * width, (k + 1) * width,
                                       epsabs=1e-12)[0]  # fmt: skip
        return mean / (width * (edges[m + 1] - edges[m]))

    for k, m in ((2, 4), (2, 5), (3, 4), (1, 6), (2, 2)):  # centre, edges, the patch's rim
        np.testing.assert_allclose(p[k, m], exact(k, m), rtol=2e-4, atol=1e-4)


@pytest.mark.parametrize("tilt_axis", [(1.0, 0.0, 0.0), (0.6, 0.0, 0.8), (0.3, 0.9, 0.3)])
def test_the_contact_is_the_deepest_point_along_the_crowned_journal(tilt_axis):
    joint = _joint()
    axis = np.asarray(tilt_axis) / np.linalg.norm(tilt_axis)
    angle = 0.006  # rad
    rotation = scipy.spatial.transform.Rotation.from_rotvec(angle * axis).as_matrix()
    position = np.array([0.3 * C, -1.05 * C, 0.0015])
    ground = BodyKinematics(jnp.zeros(3), jnp.eye(3), jnp.zeros(3), jnp.zeros(3), jnp.zeros(3))
    journal = BodyKinematics(jnp.asarray(position), jnp.asarray(rotation), jnp.zeros(3),
                             jnp.zeros(3), jnp.zeros(3))  # fmt: skip
    delta = float(joint.contacts(ground, journal)[0][0])
    s = np.linspace(-HALF, HALF, 200_001)
    points = position + s[:, None] * rotation[:, 2]
    brute = np.max(np.hypot(points[:, 0], points[:, 1]) - C - s**2 / (2 * CROWN))
    np.testing.assert_allclose(delta, brute, rtol=0, atol=1e-4 * C)


@functools.cache
def _one_revolution():
    model = _journal_model()
    ts = jnp.linspace(0.0, 2 * math.pi / OMEGA, 101)
    return model, simulate(model, *model.initial_state(), ts, rtol=1e-10, atol=1e-12)


def test_a_tilted_spinning_journal_wears_a_scar_where_statics_puts_it():
    model, sol = _one_revolution()
    force = np.asarray(sol.sensors["force"])[:, 0]
    np.testing.assert_allclose(force, MASS * G, rtol=3e-3)
    joint = wear.wear_element(model, "bearing")
    bore, journal = (np.asarray(m) for m in joint.maps(sol.internal[-1]))
    speed, t = OMEGA * R, float(sol.ts[-1])
    work = scipy.integrate.trapezoid(force * speed, np.asarray(sol.ts))
    bore_cell = 2 * math.pi / CELLS * (R + C) * 2 * BORE_HALF / AXIAL
    journal_cell = 2 * math.pi / CELLS * R * 2 * HALF / AXIAL
    np.testing.assert_allclose(bore.sum() * bore_cell, K_WEAR[0] * work, rtol=1e-4)
    np.testing.assert_allclose(journal.sum() * journal_cell, K_WEAR[1] * work, rtol=1e-4)
    # the bore's scar: where statics puts the contact, along the axis
    centres = np.linspace(-BORE_HALF, BORE_HALF, AXIAL + 1)
    centres = 0.5 * (centres[1:] + centres[:-1])
    along = bore.sum(axis=0)
    alpha, beta, peak = _hertz_ellipse(MASS * G)
    np.testing.assert_allclose(along @ centres / along.sum(), OFFSET, atol=0.01 * alpha)
    # the journal: every point passed under the patch once, losing k (π/2) p₀ β (1 − x²/α²)
    edges = np.linspace(-HALF, HALF, AXIAL + 1) - OFFSET
    expected = [
        scipy.integrate.quad(lambda x: max(1 - (x / alpha) ** 2, 0.0), lo, hi)[0] / (hi - lo)
        * K_WEAR[1] * math.pi / 2 * peak * beta
        for lo, hi in zip(edges[:-1], edges[1:], strict=True)
    ]  # fmt: skip
    np.testing.assert_allclose(np.median(journal, axis=0), expected, rtol=1e-3,
                               atol=2e-3 * max(expected))  # fmt: skip
    assert t > 0 and speed > 0


@pytest.mark.slow
def test_gradients_through_crown_and_clearance_match_differences():
    """Forward-mode derivatives after a revolution w.r.t. ln c and ln R_c (the start is the
    nominal values' equilibrium, so the journal moves and tilts) of the worn volumes (depth
    sums), the bore's depth under the patch's centre (the four cells around it: the crown sets
    the peak pressure) and the journal's height, against central differences extrapolated to
    zero step (Richardson, steps 1e-3 and 2e-3: the simulation of the test above, its compiled
    program)."""

    def outputs(z, **options):
        model = _journal_model(clearance=C * jnp.exp(z[0]), crown=CROWN * jnp.exp(z[1]))
        sol = simulate(model, *model.initial_state(), _one_revolution()[1].ts, rtol=1e-10,
                       atol=1e-12, **options)  # fmt: skip
        bore, journal = wear.wear_element(model, "bearing").maps(sol.internal[-1])
        centre = jnp.sum(bore[26:28, 13:15])  # the cells around 270° and OFFSET
        return jnp.stack([jnp.sum(bore), jnp.sum(journal), centre, sol.q[-1][1]])

    z = jnp.zeros(2)
    jac = np.asarray(jax.jacfwd(lambda z: outputs(z, adjoint=diffrax.ForwardMode()))(z))

    def central(h):
        return np.stack([(outputs(z + h * e) - outputs(z - h * e)) / (2 * h) for e in np.eye(2)],
                        axis=1)  # fmt: skip

    differences = (4 * central(1e-3) - central(2e-3)) / 3
    scale = np.abs(differences).max(axis=1, keepdims=True)  # per output
    np.testing.assert_allclose(jac / scale, differences / scale, rtol=1e-3, atol=1e-3)


@pytest.mark.slow  # suite time: the planar joint's wear command is test_wear_profile.py's
def test_the_wear_command_writes_the_maps_of_a_3d_joint(tmp_path):
    """``diffmbs wear`` on the tilted journal: 300 revolutions in updates of one simulated
    revolution; the worn volume is Archard's ``k m g v t`` and the bore's scar sits where
    statics puts it, in ``profile.csv``'s rows of angle × axial position."""
    job = tmp_path / "job.toml"
    job.write_text(f"""
[model]
name = "test_wear3d:_journal_model"
cells = 24
axial_cells = 12

[wear]
element = "bearing"
period_s = {2 * math.pi / OMEGA}
cycles = 300
settle_cycles = 0
cycles_per_update = 1

[simulation]
rtol = 1e-9
atol = 1e-12
max_steps = 50000

[[experiments]]
name = "journal"
""")
    assert main(["wear", str(job), "--out", str(tmp_path / "wear")]) == 0
    out = tmp_path / "wear"
    profile = np.genfromtxt(out / "profile.csv", delimiter=",", names=True)
    assert profile.size == 24 * 12
    bore = 1e-6 * profile["bore_um"]
    cell = 2 * math.pi / 24 * (R + C) * 2 * BORE_HALF / 12
    revolution = 2 * math.pi / OMEGA
    np.testing.assert_allclose(bore.sum() * cell, K_WEAR[0] * MASS * G * OMEGA * R * 300
                               * revolution, rtol=3e-3)  # fmt: skip
    centroid = bore @ (1e-3 * profile["bore_axial_mm"]) / bore.sum()
    np.testing.assert_allclose(centroid, OFFSET, atol=0.02 * _hertz_ellipse(MASS * G)[0])
    history = np.genfromtxt(out / "wear_history.csv", delimiter=",", names=True)
    np.testing.assert_allclose(history["bore_volume_mm3"][-1], 1e9 * bore.sum() * cell,
                               rtol=1e-6)  # fmt: skip
    assert (out / "wear.png").stat().st_size > 10_000


def test_a_3d_joints_profile_needs_axial_positions():
    model = _journal_model(cells=12, axial_cells=4)
    angles, measured = np.radians([10.0, 20.0]), np.full(2, C)
    with pytest.raises(ValueError, match="'bearing' needs axial positions"):
        WearProfileExperiment("bore", model, "bearing", angles, measured, period=0.1,
                              schedule=[10], cycles_per_update=1)  # fmt: skip
    experiment = WearProfileExperiment("bore", model, "bearing", angles, measured, period=0.1,
                                       schedule=[10], cycles_per_update=1, axial=[0.0, 1e-3])
    assert experiment.axial.shape == (2,)
