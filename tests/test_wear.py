"""Archard wear on height maps: a journal spinning under a constant load in its bore.

References (not from the code): Archard's volume law ``V = k P v t``; a point of the journal
passes once per revolution under the Hertz strip and loses ``k ∫ p dx = k P / L``; the bore's
cells under a strip that stays put wear by ``k v t`` times the semi-ellipse's mean over each cell,
integrated here by ``scipy.integrate.quad``; a bore worn by a depth ``d`` under the journal lets
it sink by ``d``. Gradients against central differences."""

import functools
import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate

import diffmbs
import diffmbs.multibody as mb
from diffmbs import hertz, simulate, wear

diffmbs.configure()

MASS, G = 10.0, 9.81  # kg, m/s²
R, C, L = 0.01, 2e-4, 0.02  # journal radius, clearance, contact length (m)
OMEGA = 2 * math.pi * 10.0  # rad/s: 10 revolutions per second
K_WEAR = (1e-13, 3e-13)  # 1/Pa: bore, journal
STIFFNESS = 1e10  # N/m^1.5
MODULUS = float(hertz.contact_modulus(210e9, 0.3, 210e9, 0.3))
CELLS = 36


def test_cells_hold_the_strips_load_exactly_and_interpolation_is_periodic():
    b = np.deg2rad(3.0)
    for center in (0.0, 1.0, 2 * math.pi - 0.01):
        p = np.asarray(wear.cell_pressures(center, b, 1.0, 60))
        np.testing.assert_allclose(p.sum() * 2 * math.pi / 60, math.pi / 2 * b, rtol=1e-12)
    depth = np.sin(2 * math.pi * (np.arange(8) + 0.5) / 8)
    centres = 2 * math.pi * (np.arange(8) + 0.5) / 8
    at_centres = wear.interpolate_periodic(depth, centres + 2 * math.pi)
    np.testing.assert_allclose(at_centres, depth, atol=1e-12)
    halfway = wear.interpolate_periodic(depth, 0.0)  # between the last centre and the first
    np.testing.assert_allclose(halfway, 0.5 * (depth[0] + depth[-1]), atol=1e-12)


def _journal_model(wear_coefficient=K_WEAR, bore=None):
    b = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
    delta = (MASS * G / STIFFNESS) ** (2 / 3)  # the resting penetration
    sink = 0.0 if bore is None else bore
    b.add_body(mb.RigidBody("journal", MASS, (0.01, 0.01, 0.02),
                            position=(0.0, -(C + delta + sink), 0.0),
                            angular_velocity=(0.0, 0.0, OMEGA)))  # fmt: skip
    b.add_force("bearing", mb.WearingClearance(
        "ground", (0, 0, 0), (0, 0, 1), "journal", (0, 0, 0), (0, 0, 1), C,
        journal_radius=R, length=L, contact_modulus=MODULUS,
        wear_coefficient=wear_coefficient, cells=CELLS,
        stiffness=STIFFNESS, damping=0.5, smoothing=1e-10))  # fmt: skip
    b.add_sensor("force", mb.ElementForce("bearing"))
    b.add_sensor("centre", mb.PointPosition("journal"))
    return b.build()


@functools.cache
def _one_revolution():
    model = _journal_model()
    ts = jnp.linspace(0.0, 2 * math.pi / OMEGA, 201)
    return model, simulate(model, *model.initial_state(), ts, rtol=1e-10, atol=1e-12)


def test_the_roundness_filter_is_iso_16610_21s_gaussian():
    """Against the filter's definition in the angle (ISO 16610-21: the weighting function
    ``s(x) = exp(−π (x / (α λ_c))²) / (α λ_c)``, ``α = √(ln 2 / π)``, ``λ_c`` the cut-off's
    wavelength, here 2π/UPR rad), convolved around the circle by quadrature; a harmonic at the
    cut-off passes by half; the mean wholly; a (cells, axial) map column by column."""
    n, upr = 1440, 50.0
    theta = (np.arange(n) + 0.5) * 2 * math.pi / n
    rng = np.random.default_rng(16610)
    profile = 1e-6 * (0.3 + np.exp(-((theta - 2.9) / 0.02) ** 2) + 0.05 * rng.standard_normal(n))
    width = math.sqrt(math.log(2) / math.pi) * 2 * math.pi / upr
    lag = np.angle(np.exp(1j * (theta[:, None] - theta[None, :])))  # wrapped into (−π, π]
    weights = np.exp(-math.pi * (lag / width) ** 2) / width * (2 * math.pi / n)
    np.testing.assert_allclose(wear.roundness_filter(profile, upr), weights @ profile,
                               rtol=0, atol=1e-9 * np.abs(profile).max())  # fmt: skip
    at_cutoff = np.cos(50 * theta)
    np.testing.assert_allclose(wear.roundness_filter(at_cutoff, upr), 0.5 * at_cutoff, atol=1e-12)
    assert float(jnp.mean(wear.roundness_filter(profile, upr))) == pytest.approx(profile.mean())
    columns = np.stack([profile, 2 * profile], axis=1)
    np.testing.assert_allclose(wear.roundness_filter(columns, upr)[:, 1],
                               2 * wear.roundness_filter(profile, upr), rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="undulations per revolution"):
        wear.roundness_filter(profile, 0.0)


def test_a_spinning_journal_under_its_weight_wears_as_archard_says():
    model, sol = _one_revolution()
    force = np.asarray(sol.sensors["force"])[:, 0]
    np.testing.assert_allclose(force, MASS * G, rtol=2e-3)  # it rests on the bore
    t = float(sol.ts[-1])
    speed = OMEGA * R
    state = np.asarray(sol.internal[-1])
    bore, journal = state[:CELLS], state[CELLS:]
    cell = 2 * math.pi / CELLS
    # Archard's volume, from the force as simulated
    work = scipy.integrate.trapezoid(force * speed, np.asarray(sol.ts))
    np.testing.assert_allclose(bore.sum() * cell * (R + C) * L, K_WEAR[0] * work, rtol=1e-4)
    np.testing.assert_allclose(journal.sum() * cell * R * L, K_WEAR[1] * work, rtol=1e-4)
    # the bore: the strip stays at the bottom (angle −π/2 from x̂ about ẑ)
    half_width, peak = hertz.line_contact(MASS * G, L, R, -(R + C), MODULUS)
    x = (R + C) * (wear.wrap_angle((np.arange(CELLS) + 0.5) * cell + math.pi / 2))
    expected = [
        scipy.integrate.quad(
            lambda s: float(peak) * math.sqrt(max(1 - (s / float(half_width)) ** 2, 0.0)),
            xi - 0.5 * cell * (R + C), xi + 0.5 * cell * (R + C), points=[-half_width, half_width],
        )[0] / (cell * (R + C)) * K_WEAR[0] * speed * t
        for xi in x
    ]  # fmt: skip
    np.testing.assert_allclose(bore, expected, rtol=3e-3, atol=1e-4 * max(expected))
    # the journal: every point passed under the strip once, losing k P / L
    np.testing.assert_allclose(np.median(journal), K_WEAR[1] * MASS * G / L, rtol=3e-3)
    assert np.sum(np.abs(journal / (K_WEAR[1] * MASS * G / L) - 1) > 0.01) <= 2  # start, end


def test_a_worn_bore_lets_the_journal_sink_by_its_depth():
    worn = 3e-6  # m, uniform: the gap opens by it everywhere
    model = _journal_model(wear_coefficient=(1e-20, 1e-20), bore=worn)  # no more wear here
    start = jnp.concatenate([jnp.full(CELLS, worn), jnp.zeros(CELLS)])
    model = model.with_internal_state(start)
    ts = jnp.linspace(0.0, 2 * math.pi / OMEGA, 201)  # the grid of the test above: its program
    sol = simulate(model, *model.initial_state(), ts, rtol=1e-10, atol=1e-12)
    centre = np.asarray(sol.sensors["centre"])
    np.testing.assert_allclose(np.asarray(sol.sensors["force"])[:, 0], MASS * G, rtol=2e-3)
    delta = (MASS * G / STIFFNESS) ** (2 / 3)
    np.testing.assert_allclose(centre[:, 1], -(C + delta + worn), atol=2e-9)


def test_a_journal_dropped_from_the_centre_has_the_gradients_of_its_differences():
    """A journal let go at the bore's centre (no contact direction there) falls, bounces and
    settles (the load passes through the smoothed contact's 1e-300 N on each rebound): the
    forward-mode derivative of its height and of the bore's worn volume with respect to the
    clearance, against central differences (steps 1e-3 and 1e-4 agree to 2e-4). Once, the
    angle at the centre and √P at micro-loads made it NaN."""

    def samples(clearance, adjoint=None):
        b = mb.ModelBuilder(gravity=(0.0, -G, 0.0))
        b.add_body(mb.RigidBody("journal", MASS, (0.01, 0.01, 0.02),
                                angular_velocity=(0.0, 0.0, OMEGA)))  # fmt: skip
        b.add_force("bearing", mb.WearingClearance(
            "ground", (0, 0, 0), (0, 0, 1), "journal", (0, 0, 0), (0, 0, 1), clearance,
            journal_radius=R, length=L, contact_modulus=MODULUS, wear_coefficient=K_WEAR,
            cells=CELLS, stiffness=STIFFNESS, damping=0.5, smoothing=1e-10))  # fmt: skip
        model = b.build()
        sol = simulate(model, *model.initial_state(), jnp.linspace(0.0, 0.03, 4), rtol=1e-10,
                       atol=1e-13, max_steps=100_000, adjoint=adjoint)  # fmt: skip
        return jnp.concatenate([sol.q[1:, 1], jnp.sum(sol.internal[1:, :CELLS], axis=1)])

    _, forward = jax.jvp(lambda c: samples(c, diffrax.ForwardMode()), (C,), (C,))
    h = 1e-4
    differences = (samples(C * (1 + h)) - samples(C * (1 - h))) / (2 * h)
    np.testing.assert_allclose(forward, differences, rtol=3e-3)


@pytest.mark.slow
def test_many_cycles_extrapolate_the_settled_rate_under_the_depth_step():
    """1000 revolutions from 2 simulated per update, no cell deepening by more than 3 nm per
    update: the journal's uniform loss k P/L per revolution and the bore's strip, times 1000;
    then the reverse-mode gradient of the worn volumes through the updates (schedule held; one
    compiled adjoint for the scan of updates): linear in k (``k ∂V/∂k = V``), each surface's
    volume independent of the other's coefficient."""
    k = (1e-16, 3e-16)
    model = _journal_model(wear_coefficient=k)
    q0, v0 = model.initial_state()
    period = 2 * math.pi / OMEGA
    options = dict(element="bearing", period=period, cycles=1000, settle_cycles=1,
                   cycles_per_update=2, max_depth_step=3e-9, progress=False, rtol=1e-10,
                   atol=1e-12)  # fmt: skip
    out = wear.predict_wear(model, q0, v0, **options)
    assert out.cycles[-1] == 1000 and len(out.schedule) >= 3
    assert out.simulated_cycles == 1 + 2 * len(out.schedule)
    steps = np.diff(np.max(np.asarray(out.bore), axis=1))
    assert np.all(steps <= 3e-9 * (1 + 1e-9)), steps
    np.testing.assert_allclose(np.median(out.journal[-1]), k[1] * MASS * G / L * 1000, rtol=3e-3)
    half_width, peak = hertz.line_contact(MASS * G, L, R, -(R + C), MODULUS)
    centre = float(wear.cell_pressures(-math.pi / 2, half_width / (R + C), peak, CELLS).max())
    np.testing.assert_allclose(out.bore[-1].max(), k[0] * centre * OMEGA * R * 1000 * period,
                               rtol=3e-3)  # fmt: skip

    def volumes(log_k):  # the worn volumes' depth sums, bore and journal
        worn = _journal_model(wear_coefficient=jnp.exp(log_k))
        held = wear.predict_wear(worn, q0, v0, **dict(options, schedule=out.schedule))
        return jnp.stack([jnp.sum(held.bore[-1]), jnp.sum(held.journal[-1])])

    x = jnp.log(jnp.asarray(k))
    jac = np.asarray(jax.jacrev(volumes)(x))
    np.testing.assert_allclose(np.diag(jac), volumes(x), rtol=1e-4)  # linear in k
    # each surface's wear does not feed back into the other's over these nanometres
    assert np.all(np.abs(jac[[0, 1], [1, 0]]) < 1e-4 * np.diag(jac))
