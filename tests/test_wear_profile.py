"""identification.WearProfileExperiment: fitting the wear coefficient and the clearance to a
measured bore profile.

The record is not simulated: a journal resting under its weight and spinning wears its bore
by Archard's law under the Hertz strip that stays at the bottom, so after ``N`` revolutions the
bore's radius minus the journal's nominal radius is ``c + k_w v t p̄(θ)`` with ``p̄`` the
semi-ellipse's mean over each cell (``scipy.integrate.quad``; the strip from the closed-form
Hertz width) — measured at 36 angles with noise of 5 nm. The fit starts 2× off in both and must
cover the truth within its reported 99 % intervals; the experiment's input errors name what is
wrong.
"""

import math

import numpy as np
import pytest
import scipy.integrate
from test_wear import CELLS, MASS, MODULUS, OMEGA, C, G, L, R, _journal_model

import identification as idf
from diffmbs import hertz

K_TRUE = 2e-13  # 1/Pa, the bore's
REVOLUTIONS = 200
NOISE = 5e-9  # m


def closed_form_profile(angles, clearance, k_wear):
    """``c + k v t p̄(θ)`` (m) at ``angles`` (rad, from x̂ about ẑ; the strip at −π/2)."""
    b, p0 = (float(x) for x in hertz.line_contact(MASS * G, L, R, -(R + clearance), MODULUS))
    radius = R + clearance
    cell = 2 * math.pi / CELLS
    centres = (np.arange(CELLS) + 0.5) * cell
    arc = radius * (np.angle(np.exp(1j * (centres + math.pi / 2))))  # from the strip's centre

    def mean_pressure(x):
        return scipy.integrate.quad(
            lambda s: p0 * math.sqrt(max(1 - (s / b) ** 2, 0.0)), x - 0.5 * cell * radius,
            x + 0.5 * cell * radius, points=[-b, b])[0] / (cell * radius)  # fmt: skip

    depth = np.array([mean_pressure(x) for x in arc]) * k_wear * OMEGA * R * REVOLUTIONS * (
        2 * math.pi / OMEGA)  # fmt: skip
    # the model's map is linear between cell centres, periodic: read it there
    position = np.mod(angles / cell - 0.5, CELLS)
    below = np.floor(position).astype(int)
    frac = position - below
    return clearance + (1 - frac) * depth[below] + frac * depth[(below + 1) % CELLS]


def experiment(model, angles, measured, **overrides):
    options = dict(period=2 * math.pi / OMEGA, schedule=(REVOLUTIONS,), settle_cycles=0,
                   cycles_per_update=1,
                   simulate_kwargs={"rtol": 1e-8, "atol": 1e-12, "max_steps": 50_000})  # fmt: skip
    options.update(overrides)
    return idf.WearProfileExperiment("bore", model, "bearing", angles, measured, **options)


def test_the_wear_coefficient_and_the_clearance_are_fitted_to_a_closed_form_profile():
    angles = np.radians(np.arange(36) * 10.0 + 3.0)
    rng = np.random.default_rng(11)
    measured = closed_form_profile(angles, C, K_TRUE) + NOISE * rng.standard_normal(angles.size)
    space = idf.ParameterSpace([
        idf.Parameter("clearance", "bearing.clearance", 5e-5, 1e-3, 2 * C),
        idf.Parameter("k_bore", "bearing.wear_coefficient[0]", 1e-15, 1e-11, 2 * K_TRUE),
    ])  # fmt: skip
    problem = idf.Problem(space, [experiment(_journal_model(), angles, measured)])
    result = idf.fit(problem, progress=False, max_iterations=20)
    assert result.converged, result.message
    truth = np.log([C, K_TRUE])
    errors = (np.asarray(result.z) - truth) / np.asarray(result.std_z)
    assert np.all(np.abs(errors) < 2.58), errors  # within the 99 % intervals
    # the noise is what is left: s ≈ 5 nm (in the experiment's µm)
    assert 0.5 < math.sqrt(result.s2) / (NOISE / 1e-6) < 1.5, result.s2


def test_bad_input_names_the_item():
    model, angles = _journal_model(), np.radians(np.arange(4) * 90.0)
    with pytest.raises(ValueError, match="surface must be 'bore' or 'journal'"):
        experiment(model, angles, np.full(4, C), surface="shaft")
    with pytest.raises(ValueError, match="no force element 'bearings'"):
        idf.WearProfileExperiment("bore", model, "bearings", angles, np.full(4, C), period=0.1,
                                  schedule=(10,))  # fmt: skip
    with pytest.raises(ValueError, match=r"angles has 3 values, expected 4"):
        experiment(model, angles[:3], np.full(4, C))
    with pytest.raises(ValueError, match=r"measured\[2\] = nan is not finite"):
        experiment(model, angles, np.array([C, C, np.nan, C]))
    with pytest.raises(ValueError, match="each of at least cycles_per_update = 2"):
        experiment(model, angles, np.full(4, C), schedule=(1,), cycles_per_update=2)
