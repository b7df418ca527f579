"""Job files: every mistake is one ValueError naming the key; `diffmbs simulate` end to end."""

from pathlib import Path

import numpy as np
import pytest

import diffmbs  # noqa: F401
from diffmbs.app import ConfigError, load_job, main
from diffmbs.io import read_spectrum_csv
from diffmbs.models import LumpedContactModel

DEMO = Path(__file__).resolve().parents[1] / "data" / "mwsm" / "fit_demo.toml"

GOOD = """
[model]
name = "lumped_contact"
channel_hz = 60.0
[simulation]
duration_s = 0.02
sample_rate_hz = 10000.0
sensor = "equipment_acceleration"
[srs]
units = "g"
f_min = 20.0
f_max = 800.0
[[experiments]]
name = "a"
model = { drop_height_ft = 1.5 }
"""


def write(tmp_path, text):
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def test_demo_job_loads_with_per_test_models():
    job = load_job(DEMO)
    assert [e.name for e in job.experiments] == ["drop_1ft", "drop_2ft"]
    speeds = [float(e.model.impact_speed) for e in job.experiments]
    # √(2 g h) with h = 1 ft and 2 ft, computed here from the definition of the foot.
    np.testing.assert_allclose(speeds, np.sqrt(2 * 9.80665 * 0.3048 * np.array([1.0, 2.0])))
    channel = job.experiments[0].model
    np.testing.assert_allclose(
        float(channel.k_channel), 325.0 * (2 * np.pi * 75.0) ** 2, rtol=1e-12
    )
    assert job.simulation.sample_times()[-1] == pytest.approx(0.15)


@pytest.mark.parametrize(
    "old, new, match",
    [
        ('name = "lumped_contact"', 'name = "lumped"', r"model\.name: unknown model 'lumped'"),
        ('name = "lumped_contact"', "", r"model\.name: missing; one of lumped_contact"),
        ("channel_hz = 60.0", "chanel_hz = 60.0", r"model\.chanel_hz: unknown key"),
        ("duration_s = 0.02", "duration_s = -1.0", r"simulation\.duration_s: must be positive"),
        ('units = "g"', 'units = "G"', r"srs\.units"),
        ("f_min = 20.0", "f_min = 2000.0", r"srs: f_min"),
        ("model = { drop_height_ft = 1.5 }", 'srs = "nope.csv"', r"experiments\[0\]\.srs: file"),
        (
            "model = { drop_height_ft = 1.5 }",
            "model = { drop_heigth_ft = 1.5 }",
            r"experiments\[0\]\.model\.drop_heigth_ft: unknown key",
        ),
        ('name = "a"', "name = 3", r"experiments\[0\]\.name"),
        ("[srs]", "[srss]", r"job\.srss: unknown key"),
        ('sensor = "equipment_acceleration"', "sensor = 1", r"simulation\.sensor"),
        (
            'sensor = "equipment_acceleration"',
            'sensor = "equipment_acceleration"\nderivatives = "exact"',
            r"^simulation\.derivatives: 'exact' is not one of steps, controlled$",
        ),
        ("[srs]", '[fit]\njacobian = "fd"\n[srs]',
         r"^fit\.jacobian: 'fd' is not one of exact, differences$"),
        ("[srs]", "[fit]\ndifference_step = 0.0\n[srs]",
         r"^fit\.difference_step: must be in \(0, 1\)"),
        # Model options out of their physical range name the option, not a later symptom.
        (
            "channel_hz = 60.0",
            "channel_hz = -60.0",
            r"^model\.channel_hz: must be a finite positive number, got -60\.0$",
        ),
        (
            "channel_hz = 60.0",
            "channel_hz = 60.0\nequipment_kg = 0.0",
            r"^model\.equipment_kg: must be a finite positive number",
        ),
        (
            "channel_hz = 60.0",
            "channel_hz = 60.0\nk_impact = inf",
            r"^model\.k_impact: must be a finite number, got inf$",
        ),
        (
            "channel_hz = 60.0",
            "channel_hz = 60.0\ne_impact = 1.5",
            r"^model\.e_impact: must be a number in \(0, 1\]",
        ),
        (
            "model = { drop_height_ft = 1.5 }",
            "model = { drop_height_ft = -1.0 }",
            r"^experiments\[0\]\.model\.drop_height_ft: must be a finite number >= 0",
        ),
        (
            "model = { drop_height_ft = 1.5 }",
            "model = 5",
            r"^experiments\[0\]\.model: expected a table",
        ),
    ],
)
def test_job_errors_name_the_key(tmp_path, old, new, match):
    assert old in GOOD
    with pytest.raises(ConfigError, match=match):
        load_job(write(tmp_path, GOOD.replace(old, new, 1)))


def test_missing_file_and_bad_toml(tmp_path):
    with pytest.raises(ConfigError, match="job file not found"):
        load_job(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match="job.toml"):
        load_job(write(tmp_path, "[model\nname="))


def test_simulate_command_writes_time_history_and_srs(tmp_path, capsys):
    job = write(tmp_path, GOOD)
    assert main(["simulate", str(job), "--out", str(tmp_path / "out")]) == 0
    history = np.genfromtxt(tmp_path / "out" / "a_timehistory.csv", delimiter=",", names=True)
    assert history["time_s"][-1] == pytest.approx(0.02)
    # The CLI's accelerations are in g; compare with the model simulated directly.
    model = LumpedContactModel.from_machine(channel_hz=60.0, drop_height_ft=1.5)
    sol = diffmbs.simulate(model, *model.initial_state(), history["time_s"])
    np.testing.assert_allclose(
        history["equipment_acceleration_g"],
        np.asarray(sol.sensors["equipment_acceleration"]) / 9.80665,
        rtol=1e-6,
        atol=1e-9,
    )
    freqs, srs = read_spectrum_csv(tmp_path / "out" / "a_srs.csv")
    assert freqs[0] == pytest.approx(20.0) and np.all(srs > 0)
    assert (tmp_path / "out" / "a_srs.png").stat().st_size > 1000


def test_simulate_command_reports_bad_sensor(tmp_path, capsys):
    job = write(tmp_path, GOOD.replace('"equipment_acceleration"', '"hammer_acceleration"'))
    assert main(["simulate", str(job), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "simulation.sensor" in err and "equipment_acceleration" in err
    assert len(err.strip().splitlines()) == 1


def test_a_step_budget_too_small_is_named_by_simulate_and_fit(tmp_path, capsys):
    text = GOOD.replace("sensor =", "max_steps = 10\nsensor =")
    job = write(tmp_path, text)
    assert main(["simulate", str(job), "--out", str(tmp_path / "sim")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("diffmbs: error: experiments[0] (a): the simulation failed at t = ")
    assert "after 10 steps" in err and "raise [simulation] max_steps (now 10)" in err
    (tmp_path / "a_srs.csv").write_text("frequency_Hz,maximax_g\n20,1.0\n100,2.0\n800,1.0\n")
    fit_text = text.replace('name = "a"\n', 'name = "a"\nsrs = "a_srs.csv"\n') + (
        '[[parameters]]\nname = "k_channel"\nlower = 1e6\nupper = 1e9\n'
    )
    fit_job = write(tmp_path, fit_text)
    assert main(["fit", str(fit_job), "--out", str(tmp_path / "fit")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # status lines, then the error
    errors = [line for line in lines if line.startswith("diffmbs: error:")]
    assert len(errors) == 1 and "raise [simulation] max_steps (now 10)" in errors[0]
    assert not (tmp_path / "fit" / "result.json").exists()


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_max_iterations_must_be_a_positive_integer(tmp_path, capsys, value):
    assert main(["fit", str(DEMO), "--max-iterations", value, "--out", str(tmp_path)]) == 2
    assert "--max-iterations" in capsys.readouterr().err


STOPS = """
[[parameters]]
name = "k_contacts"
path = ["stops.stiffness", "impact.stiffness"]
lower = 1.0e9
upper = 1.0e13
"""


def test_a_parameter_may_set_several_paths(tmp_path):
    """``path = [...]`` sets every listed model value to the one parameter (initial: the first
    path's value in the model); a bad entry is named."""
    (prm,) = load_job(write(tmp_path, GOOD + STOPS)).parameters.parameters
    assert prm.paths == ("stops.stiffness", "impact.stiffness") and prm.initial == 1e11
    with pytest.raises(ConfigError, match=r"parameters\[0\]\.path: expected a path or a list"):
        load_job(write(tmp_path, GOOD + STOPS.replace('"impact.stiffness"', "3")))
    with pytest.raises(ConfigError, match=r"parameters\[0\]\.path: .*'impact\.stifness'"):
        load_job(write(tmp_path, GOOD + STOPS.replace("impact.stiffness", "impact.stifness")))
