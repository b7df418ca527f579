"""The recorder's anti-alias filter against SciPy (``scipy.signal.butter``, ``freqs``, ``lsim``)
and against closed forms of a pulse far shorter than a sample."""

import jax
import numpy as np
import pytest
import scipy.signal

import diffmbs  # noqa: F401
from diffmbs.recorder import Butterworth, Recorder


def _scipy_system(cutoff_hz: float, order: int) -> scipy.signal.StateSpace:
    zpk = scipy.signal.butter(order, 2 * np.pi * cutoff_hz, analog=True, output="zpk")
    return scipy.signal.StateSpace(*scipy.signal.zpk2ss(*zpk))


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5, 8])
def test_the_filter_is_scipys_butterworth(order):
    a, b, c = Butterworth(150.0, order).state_space()
    omega = 2 * np.pi * np.array([1.0, 50.0, 150.0, 400.0, 3000.0])
    ours = [c @ np.linalg.solve(1j * w * np.eye(order) - a, b) for w in omega]
    numerator, denominator = scipy.signal.butter(order, 2 * np.pi * 150.0, analog=True)
    _, theirs = scipy.signal.freqs(numerator, denominator, omega)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)
    assert abs(abs(ours[2]) - 2**-0.5) < 1e-12  # −3 dB at the cutoff


@pytest.mark.parametrize("differentiate", [False, True])
def test_the_record_is_scipys_lsim_from_steady_state(differentiate):
    """lsim holds its input linear between samples, as the recorder does; the filter starts in
    the steady state of the first value. With ``differentiate`` the output is ``d/dt`` of the
    filtered signal, ``C A x`` (C B = 0 for a 4-pole filter)."""
    rng = np.random.default_rng(0)
    ts = np.linspace(0.0, 0.1, 101)
    recorder = Recorder(Butterworth(150.0, 4), oversample=7, differentiate=differentiate)
    fine = recorder.fine_times(ts)
    signal = 1.0 + np.sin(2 * np.pi * 60 * fine) + 0.3 * rng.standard_normal(fine.size)
    ours = np.asarray(recorder.record(signal, fine[1] - fine[0]))
    system = _scipy_system(150.0, 4)
    x0 = -np.linalg.solve(system.A, system.B[:, 0] * signal[0])
    _, outputs, states = scipy.signal.lsim(system, signal, fine, X0=x0)
    expected = (states @ (system.C @ system.A).T)[:, 0] if differentiate else outputs
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(ours, expected[::7], rtol=0, atol=1e-11 * scale)


def test_an_impact_shorter_than_a_sample_is_recorded_from_the_velocity():
    """A half-sine acceleration pulse of 50 µs (a contact) recorded at 1 kHz through a 200 Hz
    filter: read from the velocity sampled k times finer, against lsim of the pulse itself on a
    0.1 µs grid. The pulse's impulse is exact; only where inside a fine interval it acts is
    lost, an error that falls as 1/k². Sampling the acceleration instead misses
    the pulse (every fine sample falls outside it)."""
    width, start, peak = 5e-5, 0.01012, 2000.0  # s, s, m/s²
    ts = np.arange(31) * 1e-3
    dense = np.arange(round(0.03 / 1e-7) + 1) * 1e-7
    inside = (dense > start) & (dense < start + width)
    pulse = np.where(inside, peak * np.sin(np.pi * (dense - start) / width), 0.0)
    _, expected, _ = scipy.signal.lsim(_scipy_system(200.0, 4), pulse, dense)
    expected = expected[::10_000]
    size = np.max(np.abs(expected))
    assert size > 1.0  # the record does show the impact

    errors = {}
    for oversample in (10, 100):
        recorder = Recorder(Butterworth(200.0, 4), oversample=oversample, differentiate=True)
        fine = recorder.fine_times(ts)
        phase = np.clip((fine - start) / width, 0.0, 1.0)
        velocity = peak * width / np.pi * (1.0 - np.cos(np.pi * phase))  # ∫ of the pulse
        ours = np.asarray(recorder.record(velocity, fine[1] - fine[0]))
        errors[oversample] = np.max(np.abs(ours - expected)) / size
    # measured 3.3e-3 and 6.1e-6: second order in Δt
    assert errors[100] < 3e-5 and errors[10] / errors[100] > 50

    sampled = Recorder(Butterworth(200.0, 4), oversample=10)
    fine = sampled.fine_times(ts)
    acceleration = np.where((fine > start) & (fine < start + width),
                            peak * np.sin(np.pi * (fine - start) / width), 0.0)  # fmt: skip
    assert np.max(np.abs(np.asarray(sampled.record(acceleration, fine[1] - fine[0])))) == 0.0


def test_the_record_is_linear_and_differentiable():
    ts = np.linspace(0.0, 0.05, 51)
    recorder = Recorder(Butterworth(100.0, 3), oversample=4)
    fine = recorder.fine_times(ts)
    dt = fine[1] - fine[0]

    def last(gain):
        return recorder.record(gain * np.sin(2 * np.pi * 30 * fine), dt)[-1]

    assert abs(jax.grad(last)(2.0) - last(1.0)) < 1e-12


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="cutoff_hz"):
        Butterworth(-1.0)
    with pytest.raises(ValueError, match="order"):
        Butterworth(10.0, 0)
    with pytest.raises(ValueError, match="oversample"):
        Recorder(Butterworth(10.0), oversample=0)
    with pytest.raises(ValueError, match="uniform"):
        Recorder(Butterworth(10.0)).fine_times([0.0, 0.1, 0.3])
    with pytest.raises(ValueError, match="oversample"):
        Recorder(Butterworth(10.0), oversample=3).record(np.zeros(11), 1e-3)
