"""A job's experiments as a :class:`~identification.Problem`: the measured spectra and records
read, the simulations set up as the job says."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from diffmbs.io import LAB_FORMATS, read_record, read_spectrum_csv
from diffmbs.srs import octave_frequencies
from identification import (
    Parameter,
    ParameterSpace,
    Problem,
    SRSExperiment,
    TimeHistoryExperiment,
)

from ._schema import ExperimentSpec, Job, load_job
from ._tables import ConfigError
from ._wear_job import profile_experiment

__all__ = ["problem_from_job"]


def _job(job: Job | str | Path) -> Job:
    return job if isinstance(job, Job) else load_job(job)


def _frequencies(job: Job, experiment: ExperimentSpec) -> np.ndarray:
    """The experiment's measured frequencies, else the ``[srs]`` band, Hz."""
    if experiment.srs_path is not None:
        return read_spectrum_csv(experiment.srs_path)[0]
    srs = job.srs
    return octave_frequencies(srs.f_min, srs.f_max, srs.per_octave)


def problem_from_job(job: Job | str | Path, *, measured: bool = True) -> Problem:
    """A :class:`~identification.Problem` with one :class:`~identification.SRSExperiment` per
    job experiment, over the job's ``[[parameters]]``.

    Measured SRS files are in the job's ``[srs] units``; simulations use forward-mode
    derivatives (``[simulation] derivatives``) so that Jacobians by ``jax.jacfwd`` work. With
    ``measured=False`` an experiment without an SRS file is evaluated over the ``[srs]`` band
    against a flat 1 m/s² placeholder (for sweeps of predictions and for sensitivities, which do
    not depend on the measurement).
    """
    job = _job(job)
    space = job.require_parameters()
    sim = job.simulation
    options = {"adjoint": sim.adjoint(), "rtol": sim.rtol, "atol": sim.atol,
               "max_steps": sim.max_steps}  # fmt: skip
    experiments = []
    for i, spec in enumerate(job.experiments):
        if spec.profile_path is not None:  # a worn surface's profile
            experiments.append(profile_experiment(job, i, spec, options))
            continue
        record = _record(job, i, spec) if spec.history_path is not None and measured else None
        if spec.srs_path is None and record is not None:  # a record alone
            experiments.append(_history_experiment(job, i, spec, record, None, options))
            continue
        if spec.srs_path is not None:
            freqs, values = read_spectrum_csv(spec.srs_path)
            values = values * job.srs.scale
        elif measured:
            raise ConfigError(f"experiments[{i}]: a fit needs measured data: give 'srs' and/or "
                              "'history', or 'profile'")  # fmt: skip
        else:
            freqs = _frequencies(job, spec)
            values = np.ones_like(freqs)
        try:
            experiments.append(
                SRSExperiment(spec.name, spec.model, sim.sensor, sim.sample_times(), freqs,
                              values, damping=job.srs.damping, kind=job.srs.kind,
                              simulate_kwargs=options, record=record)  # fmt: skip
            )
            if record is not None and spec.history_weight > 0:
                experiments.append(_history_experiment(job, i, spec, record, len(freqs), options))
        except ValueError as err:
            raise ConfigError(f"experiments[{i}]: {err}") from err
    if not measured:  # no records in this problem: per-test values apply to the tests alone
        space = ParameterSpace([_without_histories(p) for p in space.parameters])
    try:
        return Problem(space, experiments, **job.fit.problem_jacobian)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def _without_histories(prm: Parameter) -> Parameter:
    if prm.experiments is None:
        return prm
    tests = tuple(e for e in prm.experiments if not e.endswith(":history"))
    return Parameter(prm.name, prm.path, prm.lower, prm.upper, prm.initial, prm.transform,
                     tests, prm.units)  # fmt: skip


def _record(job: Job, i: int, spec: ExperimentSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(times s, values SI)`` of a test's measured record (``history``), t = 0 the model's
    start; samples before it (a pretrigger) kept, samples after ``[simulation] duration_s``
    dropped."""
    path, channel = spec.history_path, spec.history_channel
    # A CSV record is in its history_units, else the [srs] unit; the lab formats state theirs.
    units = None if path.suffix.lower() in LAB_FORMATS else (spec.history_units or job.srs.units)
    where = f"experiments[{i}].history"
    try:
        record = read_record(path, units=units, channels=None if channel is None else [channel])
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None
    if len(record.channels) != 1:
        raise ConfigError(
            f"{where}: {path.name} has the channels {', '.join(record.channels)}; name the one "
            f"of {job.simulation.sensor!r} with history_channel"
        )
    (measured,) = record.channels.values()
    kept = record.time <= job.simulation.duration_s * (1 + 1e-9)
    if np.count_nonzero(kept & (record.time >= 0.0)) < 2:
        raise ConfigError(f"{where}: {path.name} has fewer than two samples between t = 0 (the "
                          f"model's start) and simulation.duration_s = "
                          f"{job.simulation.duration_s:g} s")  # fmt: skip
    return record.time[kept], measured[kept]


def _history_experiment(job: Job, i: int, spec: ExperimentSpec, record, n_srs: int | None,
                        options):  # fmt: skip
    """The measured ``record`` of a test as a :class:`~identification.TimeHistoryExperiment`,
    sample by sample from t = 0 (the model's start: align the record's trigger to it), through
    the test's recorder, residuals scaled by the record's RMS. Beside the test's SRS (``n_srs``
    points) it is ``"<test>:history"``, weighted so that it counts ``history_weight`` times as
    much as the SRS; alone it is the test."""
    times, measured = record
    times, measured = times[times >= 0.0], measured[times >= 0.0]
    weight = spec.history_weight * (1.0 if n_srs is None else np.sqrt(n_srs / measured.size))
    name = spec.name if n_srs is None else f"{spec.name}:history"
    try:
        return TimeHistoryExperiment(name, spec.model, job.simulation.sensor, times, measured,
                                     weights=np.full(measured.size, weight),
                                     simulate_kwargs=options, recorder=spec.recorder)  # fmt: skip
    except ValueError as err:
        raise ConfigError(f"experiments[{i}].history: {err}") from None
