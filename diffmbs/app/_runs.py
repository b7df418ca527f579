"""What the job commands do: simulate, fit and sensitivity of a :class:`~diffmbs.app.Job`
(sweeps: :mod:`diffmbs.app._sweep_job`).

Each function takes a job (or its path) and an output folder, writes its files atomically and
returns what it computed; the command line (:mod:`diffmbs.app.cli`) only parses arguments and
prints.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

import numpy as np

from diffmbs.channels import flat_channels
from diffmbs.integrate import DIAGNOSES, FAILURES, simulate
from diffmbs.io import write_csv_atomic
from identification import (
    FitResult,
    Problem,
    band_sensitivity,
    fit,
    fit_in_stages,
    global_fit,
    multistart,
    plot_corner,
    profile_likelihood,
    sample_posterior,
    save_identifiability,
    save_sensitivity,
    srs_sensitivity,
)
from identification._problem import evaluate
from identification._stages import check_stageable, stage_problem

from ._problem_job import _frequencies, _job, problem_from_job
from ._schema import ExperimentSpec, Job
from ._tables import ConfigError

__all__ = [
    "output_lock",
    "run_fit_job",
    "run_sensitivity_job",
    "simulate_experiment",
]


def _failure(job: Job, experiment: ExperimentSpec, solution) -> ConfigError:
    """A failed simulation of a job's experiment as one line naming what to change."""
    index = [e.name for e in job.experiments].index(experiment.name)
    status = int(solution.status)
    steps = int(solution.stats["num_steps"])
    reason = FAILURES[status]
    if status == 1:
        advice = (f"raise [simulation] max_steps (now {job.simulation.max_steps}) or loosen "
                  "rtol/atol")  # fmt: skip
    else:
        advice = DIAGNOSES[int(solution.diagnosis)]
    return ConfigError(
        f"experiments[{index}] ({experiment.name}): the simulation failed at t = "
        f"{float(solution.t_reached):.6g} s after {steps} steps: {reason}; {advice}"
    )


def simulate_experiment(job: Job, experiment: ExperimentSpec):
    """Simulate one experiment of a job: ``(times s (n,), sensor channels in SI {name: (n,)}
    (see :mod:`diffmbs.channels`), SRS frequencies Hz)``. A failed simulation raises a
    :class:`ConfigError` naming the experiment and what to change."""
    ts = job.simulation.sample_times()
    q0, v0 = experiment.model.initial_state()
    sim = job.simulation
    solution = simulate(experiment.model, q0, v0, ts, rtol=sim.rtol, atol=sim.atol,
                        max_steps=sim.max_steps, throw=False)  # fmt: skip
    if int(solution.status) != 0:
        raise _failure(job, experiment, solution)
    sensors = {name: np.asarray(values) for name, values in flat_channels(solution.sensors).items()}
    if sim.sensor not in sensors:
        raise ConfigError(
            f"simulation.sensor: {sim.sensor!r} is not a sensor channel of model "
            f"{job.model_name!r}; one of {', '.join(sensors)}"
        )
    return ts, sensors, _frequencies(job, experiment)


def run_fit_job(
    job: Job | str | Path, out_dir, *, resume=False, progress=True, max_iterations=None
) -> FitResult:
    """Fit the job (a :class:`Job` or its path); write the report into ``out_dir``: the fit's
    ``result.json`` and figures, ``sensitivity_*.csv/png`` and ``identifiability.csv/png`` (per
    octave band, beside the relative standard deviations) at the fitted values, and the
    checkpoints (``global.npz`` and ``refine_<i>.npz`` after a global stage, else
    ``checkpoint.npz``). With ``resume=True`` the checkpoints left in ``out_dir`` by an
    interrupted run are continued and the result is the same as an uninterrupted run's.

    With a global stage (``[fit] global``, by default whenever every parameter has finite
    bounds) this is :func:`~identification.global_fit`; otherwise the fitter runs from the
    initial values, or from the best of ``multistart`` Latin-hypercube samples."""
    job = _job(job)
    settings = job.fit
    if max_iterations is not None and max_iterations < 1:
        raise ConfigError(f"max_iterations: must be >= 1, got {max_iterations}")
    out_dir = Path(out_dir)
    with output_lock(out_dir):
        status = _status_printer(progress)
        status(f"compiling the model and simulating the initial parameters of {job.path.name}")
        problem = problem_from_job(job)
        _check_initial_simulations(job, problem)
        result = _fit(problem, settings, out_dir, max_iterations, resume, progress, status)
        _uncertainty_extras(problem, result, settings, out_dir, resume=resume, status=status)
        status("sensitivities and report")
        sensitivities = srs_sensitivity(problem, result.z, jacobian=result.jacobian_z)
        _save_sensitivities(out_dir, problem, sensitivities, result.relative_std)
        result.save(out_dir, srs_unit=(job.srs.units, job.srs.scale))  # result.json last
    return result


def _status_printer(progress: bool):
    """One line per phase on stderr (the long compiles would otherwise be silent)."""

    def status(message: str) -> None:
        if progress:
            print(f"diffmbs fit: {message} ...", file=sys.stderr, flush=True)

    return status


_HELD: set[Path] = set()  # output folders this process holds (the lock is re-entrant)


@contextlib.contextmanager
def output_lock(out_dir: Path):
    """Hold an exclusive lock on ``out_dir`` (created) for a run: a second run into the same
    folder is refused with a :class:`ConfigError`. The lock is ``fcntl.flock`` on
    ``out_dir/.lock``, released by the system when the process ends, however it ends, so a
    killed run leaves no stale lock and ``--resume`` works at once. Re-entrant within a
    process (the command line holds it around a command that takes it again)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = out_dir.resolve()
    if key in _HELD:
        yield
        return
    with open(out_dir / ".lock", "a+") as handle:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(
                f"--out {out_dir}: another diffmbs run is writing into this folder; wait for "
                "it to finish or choose another --out"
            ) from None
        _HELD.add(key)
        try:
            yield
        finally:
            _HELD.discard(key)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fit(problem, settings, out_dir, max_iterations, resume, progress, status) -> FitResult:
    """The global stage and local fits, or the local fit alone (see :func:`run_fit_job`); with
    ``[fit] stages`` both run in the first stage (its window, its free parameters) and the local
    fitter then goes on through the stages to the whole record
    (:func:`~identification.fit_in_stages`)."""
    iterations = max_iterations or settings.max_iterations
    stages = settings.stages
    for i, stage in enumerate(stages):
        unknown = [n for n in stage.free or () if n not in problem.space.names]
        if unknown:
            raise ConfigError(f"fit.stages[{i}].free: {unknown} are not fitted parameters; have "
                              f"{', '.join(problem.space.names)}")  # fmt: skip
    # The global stage (or multistart) runs in the first stage: its window, its free parameters.
    first, free = problem, list(range(problem.n_parameters))
    if stages:
        try:
            check_stageable(problem)
            first, free = stage_problem(problem, stages[0], problem.initial_z)
        except ValueError as err:
            raise ConfigError(f"fit.stages: {err}") from None

    def every_parameter(z_first) -> np.ndarray:  # a point of the first stage, held ones added
        z = np.array(problem.initial_z, dtype=float)
        z[free] = z_first
        return z

    search = settings.search(first.space)
    start = None
    if search is not None:
        local_fits = settings.refine + settings.refine_initial
        status(f"global search ({search.population_size} candidates × {search.generations} "
               f"generations), then {local_fits} local fit{'s' * (local_fits != 1)}"
               + (f", in the first stage ({stages[0].label()})" if stages else ""))  # fmt: skip
        start = global_fit(
            first, search, settings.fitter(), n_refine=settings.refine,
            refine_initial=settings.refine_initial, max_iterations=iterations,
            seed=settings.seed, checkpoint_dir=out_dir,
            checkpoint_every=settings.checkpoint_every, resume=resume, progress=progress,
        )  # fmt: skip
        if not stages:
            return start
    checkpoint = out_dir / "checkpoint.npz"
    z0 = None if start is None else every_parameter(start.z)
    if start is None and settings.multistart and not (resume and checkpoint.exists()):
        status(f"multistart: {settings.multistart} samples")
        starts = multistart(first, settings.multistart, seed=settings.seed, n_best=1)
        z0 = every_parameter(starts.z[0])
        if starts.loss[0] > float(first.loss(first.initial_z)):
            z0 = None  # the configured initial values are better than every sample
    if stages:
        status(f"local fits in stages ({'; '.join(s.label() for s in stages)}), then the "
               "whole record")  # fmt: skip
        refined = start is not None and settings.refine + settings.refine_initial > 0
        result = fit_in_stages(problem, stages, settings.fitter(), z0=z0,
                               max_iterations=iterations, checkpoint_dir=out_dir,
                               checkpoint_every=settings.checkpoint_every, resume=resume,
                               progress=progress, first_fit=start if refined else None)  # fmt: skip
        if start is not None:  # the global stage's losses are the first stage's: not the fit's
            result.search = {k: v for k, v in start.search.items() if k != "plausible"}
        return result
    status("local fit")
    return fit(problem, settings.fitter(), z0=z0, max_iterations=iterations,
               checkpoint=checkpoint, checkpoint_every=settings.checkpoint_every, resume=resume,
               progress=progress)  # fmt: skip


def _check_initial_simulations(job: Job, problem: Problem) -> None:
    """Refuse a fit whose simulations fail at the initial parameters (a budget too small, a
    model that cannot start), naming the experiment and the cause, before any search."""
    residuals, _ = evaluate(problem, problem.initial_z)
    residuals = np.asarray(residuals)
    sim = job.simulation
    for spec in job.experiments:
        if np.all(np.isfinite(residuals[problem.residual_slices[spec.name]])):
            continue
        if spec.profile_path is not None:
            index = [e.name for e in job.experiments].index(spec.name)
            raise ConfigError(f"experiments[{index}] ({spec.name}): the wear prediction at the "
                              "initial parameters is not finite; raise [simulation] max_steps "
                              "(per simulated cycle) or loosen rtol/atol")  # fmt: skip
        model = problem.model(problem.initial_z, spec.name)
        solution = simulate(model, *model.initial_state(), sim.sample_times(), rtol=sim.rtol,
                            atol=sim.atol, max_steps=sim.max_steps, throw=False)  # fmt: skip
        if int(solution.status) != 0:
            raise _failure(job, spec, solution)
        raise ConfigError(
            f"experiments[{[e.name for e in job.experiments].index(spec.name)}] ({spec.name}): "
            "the misfit at the "
            "initial parameters is not finite although the simulation succeeds"
        )


def _uncertainty_extras(problem, result, settings, out_dir: Path, *, resume, status) -> None:
    """The ``[fit] profiles`` and ``posterior`` of the report, into ``result`` (and
    ``corner.png``, ``posterior_samples.csv``, the chain's checkpoint ``posterior.npz``)."""
    names = settings.profiled(problem.space)
    if names:
        status(f"profile likelihood of {', '.join(names)}")
        result.profiles = {
            name: profile_likelihood(problem, result, name).to_dict() for name in names
        }
    if settings.posterior == "nuts":
        status(f"posterior: {settings.posterior_warmup} + {settings.posterior_samples} NUTS steps")
        posterior = sample_posterior(
            problem, result, num_samples=settings.posterior_samples,
            num_warmup=settings.posterior_warmup, seed=settings.seed,
            checkpoint=out_dir / "posterior.npz", resume=resume, progress=False,
        )  # fmt: skip
        result.posterior = posterior.to_dict()
        plot_corner(posterior, out_dir / "corner.png")
        write_csv_atomic(out_dir / "posterior_samples.csv", list(posterior.names),
                         list(posterior.samples.T))  # fmt: skip


def run_sensitivity_job(job: Job | str | Path, out_dir) -> dict[str, Path]:
    """``∂ SRS_dB / ∂ ln θ`` of every experiment at the parameters' initial values (see
    :func:`~identification.srs_sensitivity`), written as ``sensitivity_<test>.csv/png`` and
    ``identifiability.csv/png``;
    returns the written files by label."""
    problem = problem_from_job(job, measured=False)
    return _save_sensitivities(out_dir, problem, srs_sensitivity(problem))


def _save_sensitivities(out_dir, problem, sensitivities, relative_std=None) -> dict[str, Path]:
    """``sensitivity_<test>.csv/png`` and, where a test is an SRS, ``identifiability.csv/png``
    (the sensitivities per octave band, beside the fit's relative standard deviations)."""
    paths = save_sensitivity(out_dir, problem, sensitivities)
    if any(e.in_db for e in problem.experiments):
        bands, table = band_sensitivity(problem, sensitivities)
        found = save_identifiability(out_dir, list(problem.space.names), bands, table,
                                     relative_std)  # fmt: skip
        paths.update({f"identifiability_{k}": v for k, v in found.items()})
    return paths
