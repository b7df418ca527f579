"""End-to-end identification on the lumped MWSM model: recovery from same-model data, the bundled
(structurally different) data within ±3 dB, job-file errors, and resume after a real kill."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs
import identification as idf
from diffmbs.app import ConfigError, load_job, main, problem_from_job, run_fit_job
from diffmbs.models import LumpedContactModel
from diffmbs.srs import octave_frequencies, shock_response_spectrum

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "mwsm" / "fit_demo.toml"


def test_recovers_every_parameter_from_same_model_data_started_50_percent_off():
    """Noise-free SRS of the fitted model itself, two drop heights, start ±50 % off: LM must
    return the true values (all four are identifiable here) to 1 %."""
    truth = {"k_channel": 3.0e7, "zeta_channel": 0.06, "impact.damping": 0.4, "stops.damping": 0.35}
    start = {"k_channel": 1.5, "zeta_channel": 0.5, "impact.damping": 1.5, "stops.damping": 0.5}
    ts = np.arange(1501) / 1e4
    freqs = octave_frequencies(10.0, 1000.0, 12)
    experiments = []
    for height in (1.0, 2.0):
        model = LumpedContactModel.from_machine(drop_height_ft=height)
        true_model = model
        for name, value in truth.items():
            true_model = true_model.with_parameter(name, value)
        sol = diffmbs.simulate(true_model, *true_model.initial_state(), ts)
        measured = shock_response_spectrum(sol.sensors["equipment_acceleration"], 1e-4, freqs)
        experiments.append(
            idf.SRSExperiment(
                f"drop_{height:g}ft", model, "equipment_acceleration", ts, freqs, measured
            )
        )
    space = idf.ParameterSpace(
        [idf.Parameter(n, n, v / 10, v * 10, v * start[n], "log_bounded") for n, v in truth.items()]
    )
    result = idf.fit(
        idf.Problem(space, experiments), idf.LevenbergMarquardt(), max_iterations=40,
        progress=False,
    )
    for name, value in truth.items():
        assert result.identifiable[name]
        assert result.parameters[name] == pytest.approx(value, rel=1e-2), name


@pytest.mark.long
def test_demo_job_fits_the_bundled_data_within_3_db(tmp_path):
    result = run_fit_job(DEMO, tmp_path, progress=False)
    # Its own stopping rule ends it, with no parameter on a bound, and the global stage's best
    # local fit is the one reported.
    assert result.converged and not result.at_bounds, result.message
    assert result.loss == min(r["loss"] for r in result.search["refinements"])
    # The records come from a structurally different machine (data/mwsm/README.md): the
    # residuals are structured, the fit says so and widens its intervals.
    assert result.discrepancy["detected"] and result.discrepancy["inflation"] > 2.0
    assert "model discrepancy" in result.message
    for name, experiment in result.experiments.items():
        assert experiment["misfit"]["within_3db"] >= 0.9, name
    # The report: JSON with the parameters and their uncertainty, figures, sensitivities.
    report = json.loads((tmp_path / "result.json").read_text())
    assert set(report["parameters"]) == set(result.parameter_names)
    assert len(report["loss_history"]) == result.iterations + 1
    assert report["loss_history"][-1] < report["loss_history"][0]
    for name in ("convergence.png", "correlation.png", "srs_drop_1ft.png", "srs_drop_2ft.png"):
        assert (tmp_path / name).stat().st_size > 1000, name
    sensitivity = np.genfromtxt(tmp_path / "sensitivity_drop_2ft.csv", delimiter=",", names=True)
    assert len(sensitivity) == len(result.experiments["drop_2ft"]["measured"])
    for name in sensitivity.dtype.names:  # finite also for parameters pinned at a bound
        assert np.isfinite(sensitivity[name]).all(), name
    bands = np.genfromtxt(tmp_path / "identifiability.csv", delimiter=",", names=True)
    assert bands.dtype.names[2:] == tuple(n.replace("@", "") for n in result.parameter_names)
    assert (tmp_path / "identifiability.png").stat().st_size > 10_000
    # result.json is written last: its presence means a complete report.
    newest = max(p.stat().st_mtime_ns for p in tmp_path.iterdir() if p.suffix in (".png", ".csv"))
    assert (tmp_path / "result.json").stat().st_mtime_ns >= newest


FIT_JOB = """
[model]
name = "lumped_contact"
channel_hz = 70.0
[simulation]
duration_s = 0.15
sample_rate_hz = 10000.0
sensor = "equipment_acceleration"
[[experiments]]
name = "drop_2ft"
srs = "{srs}"
model = {{ drop_height_ft = 2.0 }}
[[parameters]]
name = "k_channel"
lower = 5.0e6
upper = 2.0e8
[[parameters]]
name = "zeta_channel"
lower = 0.005
upper = 0.3
[fit]
population = 8
generations = 6
refine = 1
max_iterations = 8
checkpoint_every = 1
"""


def write_job(tmp_path, text=None) -> Path:
    path = tmp_path / "job.toml"
    srs = (ROOT / "data" / "mwsm" / "test_2ft_srs.csv").as_posix()
    path.write_text((text or FIT_JOB).format(srs=srs))
    return path


@pytest.mark.parametrize(
    "old, new, match",
    [
        ("lower = 5.0e6", "lower = 5.0e9", r"parameters\[0\]: lower .* must be below upper"),
        ("lower = 5.0e6", "lowr = 5.0e6", r"parameters\[0\]\.lowr: unknown key"),
        ('name = "k_channel"', 'name = "k_chanel"', r"parameters\[0\]\.path: .*'k_chanel'"),
        ("max_iterations = 8", "max_iterations = 0", r"fit\.max_iterations"),
        ("[fit]", '[fit]\nmethod = "newton"', r"fit\.method: 'newton'"),
        ("upper = 0.3", "upper = 0.3\ntransform = \"cubic\"", r"parameters\[1\]\.transform"),
        ("upper = 0.3", 'upper = 0.3\nper_experiment = "false"',
         r"parameters\[1\]\.per_experiment: expected true or false"),
        ("refine = 1", "refine = 1\nrefine_initial = 0", r"fit\.refine_initial: expected true"),
    ],
)
def test_fit_job_errors_name_the_key(tmp_path, old, new, match):
    assert old in FIT_JOB
    with pytest.raises(ConfigError, match=match):
        problem_from_job(load_job(write_job(tmp_path, FIT_JOB.replace(old, new, 1))))


def test_fit_command_errors_are_one_line(tmp_path, capsys):
    job = write_job(tmp_path, FIT_JOB.replace("lower = 5.0e6", "lower = 5.0e9", 1))
    assert main(["fit", str(job), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("diffmbs: error: parameters[0]") and len(err.splitlines()) == 1


@pytest.mark.slow  # suite time; the library's resume is tested in test_identification_fit etc.
def test_resume_after_a_kill_gives_the_uninterrupted_result(tmp_path):
    text = FIT_JOB.replace("duration_s = 0.15", "duration_s = 0.04")
    job = write_job(tmp_path, text.replace("refine = 1", "refine = 1\nrefine_initial = false"))
    whole = run_fit_job(job, tmp_path / "whole", progress=False)
    assert [r["start"] for r in whole.search["refinements"]] == ["candidate 0"]

    out = tmp_path / "killed"  # killed in the middle of the global stage
    checkpoint = out / "global.npz"
    process = subprocess.Popen(
        [sys.executable, "-m", "diffmbs", "fit", str(job), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    deadline = time.monotonic() + 240
    while not checkpoint.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert checkpoint.exists(), "the fit wrote no checkpoint before it was killed"
    with np.load(checkpoint) as data:
        done = json.loads(str(data["meta"]))["generation"]
    assert done < 6, "the kill came too late to interrupt the global stage"

    resumed = run_fit_job(job, out, resume=True, progress=False)
    assert resumed.iterations == whole.iterations
    np.testing.assert_allclose(resumed.z, whole.z, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(resumed.loss_history, whole.loss_history, rtol=1e-12)
    assert resumed.search["best_history"] == whole.search["best_history"]

    # the finished fit goes on when its job asks for more generations
    job.write_text(job.read_text().replace("generations = 6", "generations = 8"))
    longer = run_fit_job(job, out, resume=True, progress=False)
    assert longer.search["evaluations"] == 8 * 8
    assert longer.search["best_history"][:6] == whole.search["best_history"]


@pytest.mark.slow  # ~30 s: make test-slow; profiles, NUTS: test_identification, test_posterior
def test_report_carries_profiles_and_a_posterior_on_request(tmp_path):
    text = (FIT_JOB.replace("duration_s = 0.15", "duration_s = 0.04")
            .replace("population = 8\ngenerations = 6\nrefine = 1\n",
                     'global = "none"\nprofiles = ["k_channel"]\nposterior = "nuts"\n'
                     "posterior_samples = 8\nposterior_warmup = 24\n"))  # fmt: skip
    assert 'global = "none"' in text  # the edits above applied
    result = run_fit_job(write_job(tmp_path, text), tmp_path / "out", progress=False)
    report = json.loads((tmp_path / "out" / "result.json").read_text())
    profile = report["profiles"]["k_channel"]
    assert profile["lower"] < result.parameters["k_channel"] < profile["upper"]
    posterior = report["posterior"]
    assert posterior["samples"] == 8 and set(posterior["intervals"]) == {"k_channel",
                                                                          "zeta_channel"}
    lo, median, hi = posterior["intervals"]["k_channel"]
    assert lo <= median <= hi
    # Eight draws after a short warmup may not mix (on some CPUs the chain sticks at one
    # value): then the summary must say so rather than report a zero-width interval.
    # (r-hat is NaN, written as null, for a chain that never moved).
    r_hats = [math.inf if r is None else r for r in posterior["r_hat"].values()]
    if max(r_hats) > 1.1 or not lo < hi:
        assert "the chain has not mixed" in result.summary()
    samples = np.genfromtxt(tmp_path / "out" / "posterior_samples.csv", delimiter=",",
                            names=True)  # fmt: skip
    assert len(samples) == 8 and np.all(samples["k_channel"] > 0)
    assert (tmp_path / "out" / "corner.png").stat().st_size > 5000
    assert "profile 95 % interval of k_channel: [" in result.summary()


def test_a_second_run_into_the_same_folder_is_refused(tmp_path, capsys):
    job = write_job(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(  # another process writing into out/
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a+'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(out / ".lock")], stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["fit", str(job), "--out", str(out)]) == 2
    finally:
        holder.kill()
        holder.wait()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "another diffmbs run is writing into this folder" in err
    assert not (out / "result.json").exists()


def test_a_measured_record_is_fitted_jointly_with_its_srs(tmp_path):
    """[[experiments]] history = the record: a second, time-domain experiment of the same test
    (its per-test parameters too), weighted to count as much as the SRS."""
    record = (ROOT / "data" / "mwsm" / "test_2ft_accel.csv").as_posix()
    text = (FIT_JOB.replace('srs = "{srs}"', f'srs = "{{srs}}"\nhistory = "{record}"')
            .replace("population = 8\ngenerations = 6\nrefine = 1\n", 'global = "none"\n')
            .replace("max_iterations = 8", "max_iterations = 4")
            + '[[parameters]]\nname = "chi_impact"\npath = "impact.damping"\nlower = 0.02\n'
              "upper = 2.0\nper_experiment = true\n")  # fmt: skip
    assert 'global = "none"' in text and "history =" in text  # the edits above applied
    job = write_job(tmp_path, text)
    problem = problem_from_job(load_job(job))
    assert problem.experiment_names == ("drop_2ft", "drop_2ft:history")
    chi = problem.space.parameters[problem.space.index("chi_impact@drop_2ft")]
    assert chi.experiments == ("drop_2ft", "drop_2ft:history")
    history = problem.experiment("drop_2ft:history")
    srs = problem.experiment("drop_2ft")
    # Σ w² over the record equals the SRS's point count: both count alike.
    assert float(jnp.sum(history.weights**2)) == pytest.approx(len(srs.abscissa), rel=1e-12)
    result = run_fit_job(job, tmp_path / "out", progress=False)
    assert result.loss_history[-1] < result.loss_history[0]
    assert (tmp_path / "out" / "history_drop_2ft_history.png").stat().st_size > 1000


def _record_job(tmp_path, extra_experiment="", fit='global = "none"\nmax_iterations = 3\n'):
    record = (ROOT / "data" / "mwsm" / "test_2ft_accel.csv").as_posix()
    text = f"""
[model]
name = "lumped_contact"
channel_hz = 70.0
[simulation]
duration_s = 0.04
sample_rate_hz = 10000.0
sensor = "equipment_acceleration"
[[experiments]]
name = "drop_2ft"
history = "{record}"
history_units = "g"
model = {{ drop_height_ft = 2.0 }}
{extra_experiment}
[[parameters]]
name = "k_channel"
lower = 5.0e6
upper = 2.0e8
[[parameters]]
name = "zeta_channel"
lower = 0.005
upper = 0.3
[fit]
{fit}"""
    path = tmp_path / "job.toml"
    path.write_text(text)
    return path


def test_a_record_alone_is_fitted_through_its_recorder_in_stages(tmp_path):
    """An experiment with a record and no SRS: the record up to duration_s, through the
    recorder's filter (against scipy.signal.lsim of the simulated sensor), fitted in the band
    up to 200 Hz over its first 20 ms (the channel's stiffness alone) and then whole."""
    scipy_signal = pytest.importorskip("scipy.signal")
    job = _record_job(
        tmp_path,
        "recorder = { cutoff_hz = 800.0, order = 2, oversample = 4 }",
        'global = "none"\nmax_iterations = 3\n'
        'stages = [{ band_hz = 200.0, until_s = 0.02, free = ["k_channel"] }]\n',
    )
    problem = problem_from_job(load_job(job))
    (experiment,) = problem.experiments
    assert problem.experiment_names == ("drop_2ft",) and not experiment.in_db
    assert experiment.ts.shape == (401,) and float(experiment.ts[-1]) == pytest.approx(0.04)
    record = np.genfromtxt(ROOT / "data" / "mwsm" / "test_2ft_accel.csv", delimiter=",",
                           names=True)  # fmt: skip
    np.testing.assert_allclose(experiment.measured, record["equipment_accel_g"][:401] * 9.80665)

    model = experiment.model
    fine = np.arange(1601) * 2.5e-5
    sensor = diffmbs.simulate(model, *model.initial_state(), fine, rtol=1e-8, atol=1e-10)
    signal = np.asarray(sensor.sensors["equipment_acceleration"])
    zpk = scipy_signal.butter(2, 2 * np.pi * 800.0, analog=True, output="zpk")
    system = scipy_signal.StateSpace(*scipy_signal.zpk2ss(*zpk))
    x0 = -np.linalg.solve(system.A, system.B[:, 0] * signal[0])
    _, expected, _ = scipy_signal.lsim(system, signal, fine, X0=x0)
    predicted = np.asarray(experiment.predict(model))
    np.testing.assert_allclose(predicted, expected[::4], atol=1e-5 * np.abs(expected).max())

    result = run_fit_job(job, tmp_path / "out", progress=False)
    first, whole = result.stages
    assert first["stage"] == "200 Hz to 0.02 s (k_channel)" and whole["stage"] == "all"
    start = problem.space.initial[1]
    assert first["parameters"]["zeta_channel"] == pytest.approx(start, rel=1e-12)  # held
    assert first["parameters"]["k_channel"] != pytest.approx(problem.space.initial[0])
    assert first["loss"] < first["start_loss"] and whole["loss"] <= whole["start_loss"]
    assert "stages: 200 Hz to 0.02 s (k_channel)" in result.summary()
    report = json.loads((tmp_path / "out" / "result.json").read_text())
    assert report["stages"][1]["band_hz"] is None
    assert (tmp_path / "out" / "history_drop_2ft.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "extra, fit, match",
    [
        ("recorder = { cutoff_hz = -1.0 }", "", r"experiments\[0\]\.recorder\.cutoff_hz"),
        ("recorder = { cutoff_hz = 1e3, oversamples = 2 }", "",
         r"experiments\[0\]\.recorder\.oversamples: unknown key"),
        ('history_units = "furlong"', "", r"experiments\[0\]\.history_units"),
        ("", "stages = [{ band_hz = -3.0 }]", r"fit\.stages\[0\]\.band_hz"),
        ("", "stages = [{ free = [] }]", r"fit\.stages\[0\]\.free"),
    ],
)
def test_record_job_errors_name_the_key(tmp_path, extra, fit, match):
    text = _record_job(tmp_path, extra, fit).read_text()
    if "furlong" in extra:
        text = text.replace('history_units = "g"\n', "")
    (tmp_path / "job.toml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        problem_from_job(load_job(tmp_path / "job.toml"))


def test_a_stage_frees_only_fitted_parameters(tmp_path):
    job = _record_job(tmp_path, fit='global = "none"\nstages = [{ free = ["k_chanel"] }]\n')
    with pytest.raises(ConfigError, match=r"fit\.stages\[0\]\.free: \['k_chanel'\]"):
        run_fit_job(job, tmp_path / "out", progress=False)


def test_stages_need_a_record(tmp_path):
    stages = '[fit]\nstages = [{{ band_hz = 30.0 }}]\nglobal = "none"'
    job = write_job(tmp_path, FIT_JOB.replace("[fit]", stages))
    with pytest.raises(ConfigError, match=r"fit\.stages: the problem has no time-history "
                                          "experiment and no SRS with its measured record"):
        run_fit_job(job, tmp_path / "out", progress=False)


def test_an_srs_job_searches_over_a_window_of_its_records_then_fits_them_whole(tmp_path):
    """history_weight = 0: the record is not fitted but windows the SRS. The global stage and
    its local fit compare the SRS of the first 50 ms (a 50 ms simulation) with the SRS of the
    record's first 50 ms, its pretrigger included, over the stage's free parameter (the other
    held at its start); the last fit frees both over the whole 0.15 s."""
    source = np.genfromtxt(ROOT / "data" / "mwsm" / "test_2ft_accel.csv", delimiter=",",
                           names=True)  # fmt: skip
    times = np.arange(-20, source.size) * 1e-4  # 2 ms of pretrigger, at rest
    accel = np.concatenate([np.zeros(20), source["equipment_accel_g"]])
    record = tmp_path / "record.csv"
    diffmbs.io.write_csv_atomic(record, ["time_s", "equipment_accel_g"], [times, accel])
    text = FIT_JOB.replace('srs = "{srs}"', f'srs = "{{srs}}"\nhistory = "{record.as_posix()}"'
                           "\nhistory_weight = 0.0").replace(  # fmt: skip
        "population = 8\ngenerations = 6", "population = 6\ngenerations = 2"
    ).replace("max_iterations = 8", 'max_iterations = 3\nstages = [{{ until_s = 0.05, free = '
                                     '["k_channel"] }}]') + (
        '[[parameters]]\nname = "chi_impact"\npath = "impact.damping"\nlower = 0.02\n'
        "upper = 2.0\nper_experiment = true\n")  # fmt: skip
    assert "history_weight = 0.0" in text and "until_s" in text and "generations = 2" in text
    job = write_job(tmp_path, text)
    problem = problem_from_job(load_job(job))
    (srs,) = problem.experiments  # the record alone is not fitted
    chi = problem.space.parameters[problem.space.index("chi_impact@drop_2ft")]
    assert chi.experiments == ("drop_2ft",)
    assert float(srs.record_ts[0]) == pytest.approx(-2e-3) and srs.record.shape == (1521,)
    result = run_fit_job(job, tmp_path / "out", progress=False)
    assert result.search["evaluations"] == 12
    first, whole = result.stages
    assert first["until_s"] == 0.05 and whole["until_s"] is None
    zeta_start = problem.space.initial[1]
    assert first["parameters"]["zeta_channel"] == pytest.approx(zeta_start, rel=1e-12)  # held
    assert result.parameters["zeta_channel"] != pytest.approx(zeta_start, rel=1e-6)
    z = problem.space.to_unconstrained(
        jnp.asarray([first["parameters"][n] for n in problem.space.names]))  # fmt: skip
    window = idf.in_stage(problem, idf.Stage(until_s=0.05))
    assert window.experiments[0].ts.shape == (501,)
    assert float(window.loss(z)) == pytest.approx(first["loss"], rel=1e-6)
    assert float(problem.loss(z)) == pytest.approx(whole["start_loss"], rel=1e-6)
    assert whole["start_loss"] != pytest.approx(first["loss"], rel=1e-3)  # not the same misfit

    fitted = job.with_name("fitted.toml")  # the record fitted too: from t = 0 on
    fitted.write_text(job.read_text().replace("history_weight = 0.0", "history_weight = 1.0"))
    history = problem_from_job(load_job(fitted)).experiment("drop_2ft:history")
    assert float(history.ts[0]) == 0.0 and history.ts.shape == (1501,)
