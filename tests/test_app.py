"""The application layer (``diffmbs.app``): models from the registry, an import path and an
entry point; sensor channels of vector sensors; and a multibody model fitted from a job file to
records made by another simulator (SciPy), recovering that simulator's parameters."""

import runpy
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest

import diffmbs.multibody as mb
from diffmbs.app import (
    ConfigError,
    _models,
    load_job,
    main,
    problem_from_job,
    run_sensitivity_job,
)
from diffmbs.channels import channel, flat_channels
from identification import load_result

ROOT = Path(__file__).resolve().parents[1]
DROP = ROOT / "data" / "multibody"
TRUTH = runpy.run_path(str(DROP / "make_records.py"))["TRUTH"]  # the other simulator's values

MINIMAL = """
[model]
name = "{name}"
{options}
[simulation]
duration_s = 0.01
sample_rate_hz = 1000.0
sensor = "{sensor}"
"""


def write(tmp_path, text, name="job.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def drop_job(tmp_path, **replace) -> Path:
    """The bundled drop-table job with absolute paths (so it can live in ``tmp_path``)."""
    text = (DROP / "drop_fit.toml").read_text()
    for name in ("drop_table.toml", "drop_slow_srs.csv", "drop_fast_srs.csv"):
        text = text.replace(f'"{name}"', f'"{(DROP / name).as_posix()}"')
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return write(tmp_path, text)


def test_multibody_model_from_a_job_with_parameters_set_by_element_name():
    job = load_job(DROP / "drop_fit.toml")
    slow, fast = (e.model for e in job.experiments)
    assert isinstance(slow, mb.JointCoordinateModel)
    # per-test initial speeds, set through the parameter contract; the rest from the description
    np.testing.assert_allclose(slow.initial_state()[1], [-1.5, 0.0], atol=1e-12)
    np.testing.assert_allclose(fast.initial_state()[1], [-3.0, 0.0], atol=1e-12)
    assert float(fast.parameter("impact.stiffness")) == 5.0e9
    assert job.parameters.names == (
        "mount.stiffness", "mount.damping", "impact.stiffness", "impact.damping"
    )  # fmt: skip
    np.testing.assert_allclose(job.parameters.initial, [6.3e6, 2500.0, 5e9, 0.3])
    # units from the model's fields, for reports
    assert [p.units for p in job.parameters.parameters] == ["N/m", "N s/m", "N/m^n", "s/m"]
    assert slow.parameter_paths()["table.velocity"] == ((3,), "m/s")


def test_models_from_an_import_path_and_an_entry_point(tmp_path, monkeypatch):
    options = "sensors = false\n[model.parameters]\n\"spring.stiffness\" = 123.0"
    text = MINIMAL.format(name="multibody_models:four_bar", options="", sensor="x")
    assert isinstance(load_job(write(tmp_path, text)).experiments[0].model, mb.MultibodyModel)

    entry = EntryPoint("rig", "multibody_models:four_bar", _models.ENTRY_POINT_GROUP)
    monkeypatch.setattr(_models, "entry_points", lambda group: [entry])
    job = load_job(write(tmp_path, MINIMAL.format(name="rig", options="", sensor="x")))
    assert job.model_name == "rig" and "crank" in job.experiments[0].model.bodies.names

    with pytest.raises(ConfigError, match=r"model\.parameters: parameter 'spring.stiffness'"):
        load_job(write(tmp_path, MINIMAL.format(name="rig", options=options, sensor="x")))
    with pytest.raises(ConfigError, match=r"model\.name: cannot import 'no_such_module:f'"):
        load_job(write(tmp_path, MINIMAL.format(name="no_such_module:f", options="",
                                                sensor="x")))  # fmt: skip
    with pytest.raises(ConfigError, match=r"model\.name: unknown model 'rug'; one of .*entry"):
        load_job(write(tmp_path, MINIMAL.format(name="rug", options="", sensor="x")))


@pytest.mark.parametrize(
    "old, new, match",
    [
        ('"equipment_acceleration[2]"', '"equipment_acceleration"',
         r"sensor channel 'equipment_acceleration' does not exist; the channels are "
         r"equipment_acceleration\[0\], equipment_acceleration\[1\], equipment_acceleration\[2\]"),
        ('"equipment_acceleration[2]"', '"equipment_acceleration[3]"', r"\[3\]' does not exist"),
        ('description = "', 'description = "missing_', r"model\.description: file not found"),
        ('coordinates = "joint"', 'coordinates = "minimal"', r"model\.coordinates: 'minimal'"),
        ('"table.velocity[2]" = -1.5', '"table.speed" = -1.5',
         r"experiments\[0\]\.model\.parameters: parameter 'table.speed'"),
        ('name = "mount.damping"', 'name = "mount.dumping"', r"parameters\[1\]\.path: .*dumping"),
    ],
)  # fmt: skip
def test_multibody_job_errors_name_the_key(tmp_path, old, new, match):
    with pytest.raises(ConfigError, match=match):
        problem_from_job(load_job(drop_job(tmp_path, **{old: new})))


def test_channels_of_vector_sensors():
    sensors = {"a": np.arange(6.0).reshape(2, 3), "e": np.array([1.0, 2.0])}
    np.testing.assert_array_equal(channel(sensors, "a[1]"), [1.0, 4.0])
    assert list(flat_channels(sensors)) == ["a[0]", "a[1]", "a[2]", "e"]
    for bad in ("a", "e[0]", "b", "a[x]"):
        with pytest.raises(ValueError, match="sensor channel"):
            channel(sensors, bad)
    # a matrix sensor (a rotation matrix over two samples): entries in row-major order
    matrix = {"R": np.arange(18.0).reshape(2, 3, 3)}
    np.testing.assert_array_equal(channel(matrix, "R[5]"), [5.0, 14.0])  # (i, j) = (1, 2)
    assert list(flat_channels(matrix)) == [f"R[{k}]" for k in range(9)]
    with pytest.raises(ValueError, match=r"'R\[9\]' does not exist"):
        channel(matrix, "R[9]")


@pytest.mark.long
def test_multibody_fit_from_a_job_file_recovers_the_other_simulators_parameters(tmp_path, capsys):
    """``diffmbs fit`` on the bundled job: the drop table started 1.2–4× off every parameter,
    fitted to two SRS made by SciPy from the equations of motion written out by hand; the fit
    must land on SciPy's values (the two simulators differ only by the contact's 1 µm onset
    smoothing and their integration errors). Then ``sensitivity`` on the same job (``sweep``:
    test_sweep_job)."""
    out = tmp_path / "fit"
    assert main(["fit", str(DROP / "drop_fit.toml"), "--out", str(out)]) == 0
    report = capsys.readouterr().out
    assert "drop_fast: rms" in report
    result = load_result(out)
    fitted = result["parameters"]
    for name, truth in TRUTH.items():
        assert fitted[name] == pytest.approx(truth, rel=1e-4), name
    assert result["loss_history"][0] > 1.0 and result["loss_history"][-1] < 1e-6

    paths = run_sensitivity_job(DROP / "drop_fit.toml", tmp_path / "sensitivity")
    sensitivity = np.genfromtxt(paths["csv_drop_fast"], delimiter=",", names=True)
    # The mount's resonance dominates the SRS near it: +1 % stiffness moves the peak up.
    assert np.max(np.abs(sensitivity["mountstiffness"])) > 1.0

