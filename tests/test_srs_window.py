"""An SRS over a window (``SRSExperiment.windowed``, ``Stage(until_s=...)``): the measured
record's first part against a simulation that short, checked against scipy."""

import jax
import numpy as np
import pytest

import diffmbs
import identification as idf
from diffmbs.models import LumpedContactModel
from diffmbs.srs import octave_frequencies, shock_response_spectrum

scipy_signal = pytest.importorskip("scipy.signal")

DT = 1e-4
FREQS = octave_frequencies(10.0, 1000.0, 3)
SENSOR = "equipment_acceleration"


def maximax_by_lsim(record: np.ndarray, dt: float, f: float, zeta: float = 0.05) -> float:
    """The largest |absolute acceleration| of a base-excited oscillator at rest, by
    ``scipy.signal.lsim`` on a grid 16× finer (the input linear between samples, ramping to
    zero one sample after the last): at the record's samples, and at any time of the free
    ringing after the ramp (the residual response, sampled at dt/16)."""
    w, fine = 2 * np.pi * f, 16
    system = scipy_signal.lti([2 * zeta * w, w**2], [1.0, 2 * zeta * w, w**2])
    knots = np.arange(record.size + 1) * dt
    t = np.arange((record.size + int(0.2 / dt)) * fine) * (dt / fine)
    u = np.interp(t, knots, np.append(record, 0.0), right=0.0)
    _, response, _ = scipy_signal.lsim(system, u, t)
    primary = np.abs(response[: record.size * fine : fine]).max()
    return float(max(primary, np.abs(response[record.size * fine :]).max()))


@pytest.fixture(scope="module")
def record_experiment():
    """The lumped machine's own 2-ft record over 0.1 s, 5 ms of pretrigger (zeros) before it,
    as the record of an SRS experiment whose SRS is the whole record's."""
    model = LumpedContactModel.from_machine(drop_height_ft=2.0)
    ts = np.arange(1001) * DT
    solution = diffmbs.simulate(model, *model.initial_state(), ts)
    signal = np.asarray(solution.sensors[SENSOR])
    times = np.concatenate([np.arange(-50, 0) * DT, ts])
    record = np.concatenate([np.zeros(50), signal])
    srs = shock_response_spectrum(record, DT, FREQS)
    experiment = idf.SRSExperiment("drop", model, SENSOR, ts, FREQS, srs, record=(times, record))
    return experiment, times, record


def test_a_window_compares_the_srs_of_the_records_first_part(record_experiment):
    experiment, times, record = record_experiment
    window = experiment.windowed(0.02)
    np.testing.assert_allclose(window.ts, np.arange(201) * DT)  # the simulation ends there
    first = record[times <= 0.02 + 1e-12]  # pretrigger included
    expected = [maximax_by_lsim(first, DT, f) for f in FREQS]
    np.testing.assert_allclose(window.measured, expected, rtol=1e-6)
    # The window changes the spectrum at the low frequencies, whose peak comes late.
    assert abs(np.log10(window.measured[0] / experiment.measured[0])) > 0.05
    # The model that made the record misfits its window by round-off.
    assert float(np.max(np.abs(window.residuals(experiment.model)))) < 1e-6
    assert window.windowed(0.01).ts.shape == (101,)  # a window keeps its record


def test_a_stage_windows_srs_and_needs_their_record(record_experiment):
    experiment, _, _ = record_experiment
    space = idf.ParameterSpace([idf.Parameter("k_channel", "k_channel", 5e6, 2e8, 3e7)])
    problem = idf.Problem(space, [experiment])
    staged = idf.in_stage(problem, idf.Stage(until_s=0.03))
    assert staged.experiments[0].ts.shape == (301,)
    assert idf.in_stage(problem, idf.Stage(band_hz=100.0)).experiments[0].ts.shape == (1001,)

    bare = idf.SRSExperiment("bare", experiment.model, SENSOR, experiment.ts, FREQS,
                             experiment.measured)  # fmt: skip
    with pytest.raises(ValueError, match=r"experiment 'bare': a window \(until_s = 0.03 s\)"):
        bare.windowed(0.03)
    with pytest.raises(ValueError, match="no time-history experiment and no SRS with its"):
        idf.fit_in_stages(idf.Problem(space, [bare]), [idf.Stage(until_s=0.03)])


def test_a_record_below_the_spectrums_nyquist_is_refused(record_experiment):
    experiment, times, record = record_experiment
    with pytest.raises(ValueError, match=r"'drop': frequency [\d.]+ Hz .* of the record"):
        idf.SRSExperiment("drop", experiment.model, SENSOR, experiment.ts, FREQS,
                          experiment.measured, record=(times[::8], record[::8]))  # fmt: skip


def test_records_of_other_lengths_leave_one_compiled_kernel(record_experiment):
    """Kernels are keyed by an experiment's structure and shapes: the record an SRS holds for
    its windows is not part of them."""
    from identification._kernels import anonymous

    experiment, times, record = record_experiment
    shorter = idf.SRSExperiment("other", experiment.model, SENSOR, experiment.ts, FREQS,
                                experiment.measured, record=(times[:-7], record[:-7]))  # fmt: skip
    keys = [(jax.tree.structure(twin), [np.shape(x) for x in jax.tree.leaves(twin)])
            for twin in (anonymous(experiment), anonymous(shorter))]
    assert keys[0] == keys[1]
    assert anonymous(shorter).record is None and shorter.record.shape == (1044,)
