"""The four-bar of the wear study (diffmbs.models.four_bar) and its model description file.

References (not from the code): the ideal linkage's rocker angle from the loop-closure
equations solved by ``scipy.optimize.fsolve``; Archard's volume ``V = k ∫ P v_s dt`` with the
sliding speed from the bodies' rigid motion at the contact point (``v + ω × r`` of coupler and
rocker, tangential part; the journal's orbit in its clearance adds ~10 % to ``r Δω`` at 300
rpm); the description file against the builder.
"""

import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.optimize

import diffmbs
import diffmbs.multibody as mb
from diffmbs import simulate
from diffmbs.models.four_bar import JOURNAL_RADIUS, LENGTHS, four_bar_with_wear
from diffmbs.wear import wear_element

diffmbs.configure()

DATA = Path(__file__).resolve().parents[1] / "data" / "four_bar_wear"
K_WEAR = (1e-13, 5e-14)  # 1/Pa: raised, so one turn wears measurably
SHARED = pytest.mark.xdist_group("four_bar_one_turn")  # one worker simulates the turn


@functools.cache
def one_turn():
    model = four_bar_with_wear(wear_coefficient=K_WEAR, cells=60)
    ts = jnp.linspace(0.0, 0.2, 2001)  # one crank turn at 300 rpm
    return model, simulate(model, *model.initial_state(), ts, rtol=1e-8, atol=1e-11,
                           max_steps=100_000)  # fmt: skip


def rocker_angle_closed_loop(crank_angle: float, guess: float) -> float:
    """The ideal linkage's rocker angle (rad, from the ground's x̂) by loop closure."""
    a, b, c, d = (LENGTHS[k] for k in ("crank", "coupler", "rocker", "ground"))

    def closure(x):
        coupler, rocker = x
        along = a * math.cos(crank_angle) + b * math.cos(coupler) - d - c * math.cos(rocker)
        across = a * math.sin(crank_angle) + b * math.sin(coupler) - c * math.sin(rocker)
        return [along, across]

    return float(scipy.optimize.fsolve(closure, [0.4, guess], xtol=1e-13)[1])


@SHARED
def test_the_mechanism_follows_the_ideal_linkage_within_its_clearance():
    model, sol = one_turn()
    assert bool(sol.successful)
    rocker = np.asarray(sol.sensors["rocker_angle"])[:, 0]
    ts = np.asarray(sol.ts)
    start = rocker_angle_closed_loop(0.0, 1.2)
    expected = [rocker_angle_closed_loop(2 * math.pi * 5.0 * t, start) for t in ts[::100]]
    expected = np.unwrap(np.asarray(expected))
    turned = expected - expected[0]
    # the journal moves within its clearance (0.2 mm) at the rocker's 0.3 m: ~1e-3 rad
    np.testing.assert_allclose(rocker[0] - rocker[::100], turned, atol=2e-3)  # D: ground in rocker
    assert np.ptp(turned) > 0.5  # it does rock
    eccentricity = np.linalg.norm(np.asarray(sol.sensors["journal"] - sol.sensors["bore"]),
                                  axis=1)  # fmt: skip
    # within the clearance but for the contact's penetration (~20 µm at the first impact,
    # falling from the bore's centre: ~800 N on 1e10 N/m^1.5)
    assert 1.0e-4 < eccentricity[1000:].min() and eccentricity.max() < 1.15 * 2e-4


@SHARED
def test_one_turn_wears_the_volume_archard_gives():
    model, sol = one_turn()
    joint = wear_element(model, "C")
    force = np.asarray(sol.sensors["contact_force"])[:, 0]
    gap = np.asarray(sol.sensors["journal"] - sol.sensors["bore"])
    normal = gap / np.maximum(np.linalg.norm(gap, axis=1, keepdims=True), 1e-30)
    point = np.asarray(sol.sensors["journal"]) + JOURNAL_RADIUS * normal  # on the bore
    velocity = {}
    for name in ("coupler", "rocker"):  # of the body's material point there: v + ω × r
        state = jax.vmap(lambda q, v, name=name: model.body_state(name, q, v))(sol.q, sol.v)
        arm = point - np.asarray(state.com_position)
        velocity[name] = np.asarray(state.velocity) + np.cross(state.angular_velocity, arm)
    relative = velocity["coupler"] - velocity["rocker"]
    along = np.sum(relative * normal, axis=1, keepdims=True)
    sliding = np.linalg.norm(relative - along * normal, axis=1)
    work = scipy.integrate.trapezoid(force * sliding, np.asarray(sol.ts))
    states = np.asarray(sol.internal[-1][model.internal_slices()["C"]])
    bore, journal = (np.asarray(x) for x in joint.maps(states))
    cell = 2 * math.pi / joint.cells * float(joint.length)
    volume_bore = bore.sum() * cell * (JOURNAL_RADIUS + float(joint.clearance))
    volume_journal = journal.sum() * cell * JOURNAL_RADIUS
    np.testing.assert_allclose(volume_bore, K_WEAR[0] * work, rtol=2e-3)
    np.testing.assert_allclose(volume_journal, K_WEAR[1] * work, rtol=2e-3)


def test_the_description_file_is_the_builders_model():
    built, described = four_bar_with_wear(), mb.model_from_toml(DATA / "four_bar.toml")
    for a, b in zip(built.initial_state(), described.initial_state(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
    q, v = built.initial_state()
    # shift the coupler so that the journal presses on the bore (contact and friction act)
    shifted = q.at[built.q_slice("coupler").start + 1].add(-2.05e-4)
    for model in (built, described):
        assert float(model.element_output("C", 0.0, shifted, v)[0]) > 1.0
    np.testing.assert_allclose(described.forces(0.0, shifted, v), built.forces(0.0, shifted, v),
                               rtol=1e-12, atol=1e-9)  # fmt: skip
    rates = (model.internal_rate(0.0, shifted, v) for model in (described, built))
    np.testing.assert_allclose(*rates, rtol=1e-12, atol=1e-30)
    assert set(described.sensor_names) == set(built.sensor_names)


@pytest.mark.slow  # ~6 min on 2 cores: the turns at rtol 1e-10 of the differences
def test_worn_volume_derivatives_at_100_rpm():
    """The bore's worn volume after one update (one simulated turn from a settled state,
    extrapolated over 250,000) and its derivatives with respect to ln k and ln c by
    :class:`diffmbs.ForwardSensitivity` at rtol 1e-7. References: Archard's law is linear in k
    (``k ∂V/∂k = V`` while one turn's wear cannot change the loads), and central differences
    of runs at rtol 1e-10 (step 1e-4 in ln c). Measured: within 2e-5 and 2.1e-3 (tangents
    carried along the steps, ``diffrax.ForwardMode``: ∂V/∂ln c 1.1e4 times the difference)."""
    from diffmbs.wear import predict_wear

    model = four_bar_with_wear(speed_rpm=100.0, clearance=2e-4, wear_coefficient=(1e-14, 1e-15))
    q0, v0 = model.initial_state()
    settle = simulate(model, q0, v0, jnp.array([0.0, 0.6]), rtol=1e-9, atol=1e-13,
                      max_steps=400_000)  # fmt: skip
    start = (settle.q[-1], settle.v[-1], settle.internal[-1])

    def volume(log_scale, rtol, adjoint=None):
        c, k = jnp.array([2e-4, 1e-14]) * jnp.exp(log_scale)
        worn = model.with_parameter("C.clearance", c).with_parameter(
            "C.wear_coefficient", jnp.stack([k, 1e-15])).with_internal_state(start[2])
        options = {} if adjoint is None else {"adjoint": adjoint}
        prediction = predict_wear(worn, start[0], start[1], element="C", period=0.6,
                                  cycles=250_000, settle_cycles=0, cycles_per_update=1,
                                  schedule=[250_000], progress=False, rtol=rtol,
                                  atol=1e-4 * rtol, max_steps=400_000, **options)  # fmt: skip
        return jnp.sum(prediction.bore[-1])  # m (× a cell's area: m³)

    zero = jnp.zeros(2)
    value = float(volume(zero, 1e-7))
    slope = np.asarray(jax.jacfwd(lambda z: volume(z, 1e-7, diffmbs.ForwardSensitivity()))(zero))
    assert abs(slope[1] / value - 1) < 1e-4
    step = jnp.array([1e-4, 0.0])
    difference = float(volume(step, 1e-10) - volume(-step, 1e-10)) / 2e-4
    assert abs(slope[0] / difference - 1) < 1e-2
