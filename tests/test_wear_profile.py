"""Wear jobs (``diffmbs wear``, profile experiments of ``diffmbs fit``) and
identification.WearProfileExperiment: fitting the wear coefficient and the clearance to a
measured bore profile.

The record is not simulated: a journal resting under its weight and spinning wears its bore
by Archard's law under the Hertz strip that stays at the bottom, so after ``N`` revolutions the
bore's radius minus the journal's nominal radius is ``c + k_w v t p̄(θ)`` with ``p̄`` the
semi-ellipse's mean over each cell (``scipy.integrate.quad``; the strip from the closed-form
Hertz width) — measured at 36 angles with noise of 5 nm. The fit starts 2× off in both and must
cover the truth within its reported 99 % intervals; ``diffmbs wear``'s profile is the closed
form's; bad input names the key, column or row.
"""

import json
import math

import numpy as np
import pytest
import scipy.integrate
from test_wear import CELLS, MASS, MODULUS, OMEGA, C, G, L, R, _journal_model

import identification as idf
from diffmbs import hertz
from diffmbs.app import load_job, main, problem_from_job, run_wear_job
from diffmbs.io import write_csv_atomic

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


JOB = """
[model]
name = "test_wear:_journal_model"
wear_coefficient = [{k_start}, 3e-13]

[wear]
element = "bearing"
period_s = {period}
cycles = {cycles}
settle_cycles = 0
cycles_per_update = 1
{wear_extra}

[simulation]
rtol = 1e-8
atol = 1e-12
max_steps = 50000
{rest}
"""
PARAMETERS = """
[[parameters]]
name = "clearance"
path = "bearing.clearance"
lower = 5e-5
upper = 1e-3
{clearance_initial}

[[parameters]]
name = "k_bore"
path = "bearing.wear_coefficient[0]"
lower = 1e-15
upper = 1e-11
"""


def write_job(folder, *, k_start=K_TRUE, cycles=REVOLUTIONS, wear_extra="", rest=""):
    path = folder / "job.toml"
    path.write_text(JOB.format(k_start=k_start, period=2 * math.pi / OMEGA, cycles=cycles,
                               wear_extra=wear_extra, rest=rest))  # fmt: skip
    return path


def test_a_job_fits_the_wear_coefficient_and_the_clearance_to_a_closed_form_profile(tmp_path):
    """``diffmbs fit`` of a profile experiment, from 2× off in both: the truth within the
    reported 99 % intervals, the residuals' spread the noise's."""
    angles = np.arange(36) * 10.0 + 3.0
    rng = np.random.default_rng(11)
    measured = closed_form_profile(np.radians(angles), C, K_TRUE)
    measured += NOISE * rng.standard_normal(angles.size)
    write_csv_atomic(tmp_path / "bore.csv", ["angle_deg", "radius_um"], [angles, 1e6 * measured])
    rest = ('[[experiments]]\nname = "bore"\nprofile = "bore.csv"\n'
            + PARAMETERS.format(clearance_initial=f"initial = {2 * C}")
            + '[fit]\nglobal = "none"\nmax_iterations = 20\n')  # fmt: skip
    job = write_job(tmp_path, k_start=2 * K_TRUE, wear_extra="updates = 1", rest=rest)
    assert main(["fit", str(job), "--out", str(tmp_path / "fit")]) == 0
    report = json.loads((tmp_path / "fit" / "result.json").read_text())
    assert report["converged"], report["message"]
    fitted = np.array([report["parameters"][n] for n in ("clearance", "k_bore")])
    errors = np.log(fitted / [C, K_TRUE]) / np.asarray(report["relative_std"])
    assert np.all(np.abs(errors) < 2.58), errors  # within the 99 % intervals
    assert 0.5 < math.sqrt(report["s2"]) / (NOISE / 1e-6) < 1.5, report["s2"]  # µm residuals


def test_the_wear_command_writes_the_profiles(tmp_path):
    """``diffmbs wear``: the bore's profile after 200 revolutions is the closed form's (the
    strip's cells to 0.5 %); the depth control splits them into updates no deeper than its
    step. (Its gradients: notebooks/03b_wear.ipynb, in the suite.)"""
    job = write_job(tmp_path, wear_extra="max_depth_step_m = 4e-8")
    assert main(["wear", str(job), "--out", str(tmp_path / "wear")]) == 0
    out = tmp_path / "wear"
    profile = np.genfromtxt(out / "profile.csv", delimiter=",", names=True)
    cell = 360.0 / CELLS
    np.testing.assert_allclose(profile["angle_deg"], (np.arange(CELLS) + 0.5) * cell)
    expected = closed_form_profile(np.radians(profile["angle_deg"]), C, K_TRUE) - C
    np.testing.assert_allclose(1e-6 * profile["bore_um"], expected, rtol=5e-3,
                               atol=1e-3 * expected.max())  # fmt: skip
    history = np.genfromtxt(out / "wear_history.csv", delimiter=",", names=True)
    assert history["cycles"][-1] == REVOLUTIONS and len(history) >= 3
    assert np.all(np.diff(history["bore_deepest_um"]) <= 0.04 * (1 + 1e-9))
    report = json.loads((out / "result.json").read_text())
    np.testing.assert_allclose(report["bore_deepest_m"], expected.max(), rtol=5e-3)
    assert "gradients" not in report  # no [[parameters]]
    assert (out / "wear.png").stat().st_size > 10_000


def test_wear_jobs_name_what_is_wrong(tmp_path):
    (tmp_path / "bad.csv").write_text("angle,radius_um\n0,1\n90,2\n")
    (tmp_path / "nan.csv").write_text("angle_deg,radius_um\n0,1\n90,nan\n")
    cases = {
        '[[experiments]]\nname = "b"\nprofile = "bad.csv"\n' + PARAMETERS.format(
            clearance_initial=""): "has the columns angle, radius_um; expected angle_deg",
        '[[experiments]]\nname = "b"\nprofile = "nan.csv"\n' + PARAMETERS.format(
            clearance_initial=""): "nan.csv row 2: radius_um is not a finite number",
        '[[experiments]]\nname = "b"\nprofile = "nan.csv"\nprofile_surface = "shaft"\n':
            "profile_surface: 'bore' or 'journal'",
        '[[experiments]]\nname = "b"\nprofile = "nan.csv"\nprofile_filter_upr = -50.0\n':
            r"experiments\[0\].profile_filter_upr: must be positive",
    }  # fmt: skip
    for rest, message in cases.items():
        job = write_job(tmp_path, rest=rest)
        with pytest.raises(ValueError, match=message):
            problem_from_job(load_job(job))
    job = write_job(tmp_path, wear_extra="updates = 300")
    with pytest.raises(ValueError, match="wear.cycles: 200 cycles cannot make 300 updates"):
        load_job(job)
    job = write_job(tmp_path)
    job.write_text(job.read_text().replace('element = "bearing"', 'element = "bearings"'))
    with pytest.raises(ValueError, match="wear.element: no force element 'bearings'"):
        run_wear_job(job, tmp_path / "out", progress=False)
    no_wear = tmp_path / "no_wear.toml"
    no_wear.write_text('[model]\nname = "test_wear:_journal_model"\n[simulation]\n'
                       'duration_s = 0.1\nsample_rate_hz = 1000.0\n[[experiments]]\n'
                       'name = "b"\nprofile = "nan.csv"\n')  # fmt: skip
    with pytest.raises(ValueError, match=r"experiments\[0\].profile: a wear profile needs the "
                                         r"\[wear\] table"):  # fmt: skip
        load_job(no_wear)


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
