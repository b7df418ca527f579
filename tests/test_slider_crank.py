"""The 3-D slider-crank of SEEDS 001 (diffmbs/models/slider_crank.py, data/slider_crank/): the
ideal mechanism against its closed-form kinematics and the conservation of energy, and the
source's observations with 0.5 mm of clearance: the journal bounces around its bearing, and the
clearance lowers the slider's amplitude and lengthens its period, more in velocity than in
position."""

import functools
import math
from pathlib import Path

import jax.numpy as jnp
import matplotlib.image
import numpy as np
import pytest

import diffmbs
import diffmbs.multibody as mb
from diffmbs.models.slider_crank import CLEARANCE, CRANK, ROD, SLIDER_START, slider_crank
from diffmbs.plotting import plot_journal_orbit

diffmbs.configure()

DATA = Path(__file__).resolve().parents[1] / "data" / "slider_crank"
TS = jnp.linspace(0.0, 1.0, 1001)  # s: the source's second, at 1 ms
SHARED = pytest.mark.xdist_group("slider_crank_001")  # one worker: the ideal run is shared


@functools.cache
def motion(clearance, rtol=1e-6):
    """``(slider position (n, 3), slider velocity (n, 3), journal centre (n, 3), crank angle
    (n,), mechanical energy (n,), contact forces (n, 2) or None)`` at ``TS``."""
    model = slider_crank(clearance)
    q0, v0 = model.initial_state()
    sol = diffmbs.simulate(model, q0, v0, TS, rtol=rtol, atol=1e-3 * rtol, max_steps=400_000)
    s = {k: np.asarray(v) for k, v in sol.sensors.items()}
    q = np.asarray(sol.q)
    w, y = q[:, 3], q[:, 5]  # the crank's quaternion: a rotation about Y (tilted a little)
    angle = -np.unwrap(2.0 * np.arctan2(y, w))  # turning about −Y
    contact = s.get("contact_force")
    return s["slider_position"], s["slider_velocity"], s["journal"], angle, s["energy"], contact


def _closed_form_slider(angle):
    """Slider Y (m) at crank angle θ (about −Y): the pin (−r sin θ, 0, r cos θ) is ROD from the
    slider (0, y, z_s)."""
    pin_x, pin_z = -CRANK * np.sin(angle), CRANK * np.cos(angle)
    return np.sqrt(ROD**2 - pin_x**2 - (pin_z - SLIDER_START[2]) ** 2)


@SHARED
def test_the_ideal_mechanism_follows_its_kinematics_and_keeps_its_energy():
    position, _, journal, angle, energy, _ = motion(None, rtol=1e-9)
    assert angle[-1] > 2 * math.pi  # more than one turn in the second
    np.testing.assert_allclose(position[:, 1], _closed_form_slider(angle), atol=1e-8)
    np.testing.assert_allclose(position[:, [0, 2]] - SLIDER_START[[0, 2]], 0.0, atol=1e-9)
    np.testing.assert_allclose(journal, 0.0, atol=1e-9)
    np.testing.assert_allclose(energy, energy[0], rtol=1e-7)


def _cycle(velocity):
    """The time (s) the slider first comes back to its start (its velocity turns upward)."""
    ts = np.asarray(TS)
    turns = np.flatnonzero((velocity[:-1] < 0) & (velocity[1:] >= 0))
    return ts[turns[0] + 1]


@SHARED
@pytest.mark.slow  # a second of chaotic impacts, ~40 s: make test-slow (notebook 03 runs it)
def test_clearance_lengthens_the_period_and_lowers_the_amplitude_more_in_velocity(tmp_path):
    """The source's observations over its 1 s (restitution 0.9): with 0.5 mm of clearance the
    journal falls from the bearing's centre and bounces around inside it (its centre within the
    clearance but for the contact's µm of penetration, its ends touching and leaving the wall
    again and again), the impacts take
    energy, the cycle lengthens and the slider's amplitude (RMS about the mean) drops — more in
    velocity than in position. Impacts make the motion chaotic, sensitive to the tolerance and
    to the KKT solver's round-off; measured at rtol 1e-6, 1e-7, 1e-8: RMS ratios 0.97, 0.94,
    0.97 in position, 0.77, 0.87, 0.77 in velocity; cycle 0.60 → 0.76, 0.70, 0.76 s."""
    ideal_y, ideal_v = (x[:, 1] for x in motion(None, rtol=1e-9)[:2])
    position, velocity, journal, _, energy, contact = motion(CLEARANCE)
    y, v = position[:, 1], velocity[:, 1]
    assert 0.5 * CLEARANCE < np.hypot(journal[:, 0], journal[:, 2]).max() < 1.01 * CLEARANCE
    touching = contact > 1.0  # N, at either end of the journal
    assert np.count_nonzero(touching[1:] & ~touching[:-1]) >= 10  # it bounces
    assert np.all(np.diff(energy) < 1e-6) and energy[-1] < energy[0] - 0.01  # J: impacts take it
    assert _cycle(v) > 1.05 * _cycle(ideal_v)
    position_ratio, velocity_ratio = np.std(y) / np.std(ideal_y), np.std(v) / np.std(ideal_v)
    assert velocity_ratio < position_ratio < 1.0, (velocity_ratio, position_ratio)
    # the orbit figure: an image of the requested size; a wrong shape is named
    figure = plot_journal_orbit({"0.5 mm": journal[:, [0, 2]]}, CLEARANCE, title="orbit",
                                path=tmp_path / "orbit.png")  # fmt: skip
    assert matplotlib.image.imread(figure).shape[:2] == (900, 975)  # 6 × 6.5 in at 150 dpi
    with pytest.raises(ValueError, match=r"orbits\['bad'\] must be \(n, 2\)"):
        plot_journal_orbit({"bad": journal}, CLEARANCE, title="", path=tmp_path / "x.png")


def test_the_toml_model_is_the_builders():
    """data/slider_crank/slider_crank.toml describes the builder's model: the same initial
    state, mass matrix, forces and sensors at the start."""
    built, described = slider_crank(), mb.model_from_toml(DATA / "slider_crank.toml")
    q0, v0 = built.initial_state()
    for a, b in zip(built.initial_state(), described.initial_state(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(described.forces(0.0, q0, v0), built.forces(0.0, q0, v0),
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    assert float(jnp.max(jnp.abs(described.constraints(0.0, q0)))) < 1e-12
    assert set(described.sensor_names) == set(built.sensor_names)
