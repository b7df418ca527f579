"""Fitting jobs from TOML job files: the ``[[parameters]]`` and ``[fit]`` tables.

The model, simulation, SRS and experiment tables are those of :mod:`diffmbs.config`. This module
adds::

    [[parameters]]
    name = "k_channel"          # label in reports
    path = "k_channel"          # attribute path into the model (SI value); default: name
    lower = 1.0e6               # bounds, SI
    upper = 1.0e8
    initial = 4.0e7             # optional; default: the value in the first experiment's model
    transform = "log_bounded"   # log_bounded (default) | log | bounded | linear
    per_experiment = false      # true: one parameter per experiment, named "name@experiment"
    units = "N/m"

    [fit]
    method = "levenberg_marquardt"   # | gauss_newton | adam | lbfgs
    max_iterations = 25
    multistart = 16                  # LHS samples scored in one vmap before refining; 0 = off
    seed = 0
    checkpoint_every = 2

:func:`run_fit_job` writes ``result.json`` and figures, ``sensitivity_*.csv/png`` and the
checkpoint ``checkpoint.npz`` (used by ``resume=True``) into the output folder.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import diffrax
import numpy as np

from diffmbs.config import ConfigError, Job, check_keys, load_job
from diffmbs.io import read_spectrum_csv
from diffmbs.parameters import ParameterError, get_parameter
from identification._experiments import SRSExperiment
from identification._fit import LBFGS, Adam, GaussNewton, LevenbergMarquardt, fit, multistart
from identification._parameters import TRANSFORMS, Parameter, ParameterSpace
from identification._problem import Problem
from identification._results import FitResult
from identification._sensitivity import save_sensitivity, srs_sensitivity

__all__ = ["FIT_METHODS", "FitSettings", "problem_from_job", "run_fit_job"]

FIT_METHODS = {
    "levenberg_marquardt": LevenbergMarquardt,
    "gauss_newton": GaussNewton,
    "adam": Adam,
    "lbfgs": LBFGS,
}
_PARAMETER_KEYS = {
    "name", "path", "lower", "upper", "initial", "transform", "per_experiment", "units",
}


class FitSettings:
    """The ``[fit]`` table: method, iteration budget, multi-start and checkpoint cadence."""

    def __init__(self, table: Mapping[str, Any], where: str = "fit"):
        check_keys(
            table, {"method", "max_iterations", "multistart", "seed", "checkpoint_every"}, where
        )
        self.method = table.get("method", "levenberg_marquardt")
        if self.method not in FIT_METHODS:
            raise ConfigError(
                f"{where}.method: {self.method!r} is not one of {', '.join(FIT_METHODS)}"
            )
        self.max_iterations = _integer(table, "max_iterations", where, 25, minimum=1)
        self.multistart = _integer(table, "multistart", where, 0, minimum=0)
        self.seed = _integer(table, "seed", where, 0, minimum=0)
        self.checkpoint_every = _integer(table, "checkpoint_every", where, 2, minimum=1)

    def fitter(self):
        return FIT_METHODS[self.method]()


def _integer(table, key, where, default, minimum) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}.{key}: expected an integer >= {minimum}, got {value!r}")
    return value


def _parameters(job: Job) -> ParameterSpace:
    tables = job.raw.get("parameters")
    if not isinstance(tables, list) or not tables:
        raise ConfigError("parameters: expected one or more [[parameters]] tables to fit")
    names = [e.name for e in job.experiments]
    parameters = []
    for i, table in enumerate(tables):
        where = f"parameters[{i}]"
        check_keys(table, _PARAMETER_KEYS, where)
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.name: missing or not a string")
        path = table.get("path", name)
        for key in ("lower", "upper"):
            if key not in table:
                raise ConfigError(f"{where}.{key}: missing (bounds in SI units)")
        lower, upper = table["lower"], table["upper"]
        if not (_is_number(lower) and _is_number(upper)):
            raise ConfigError(f"{where}: lower and upper must be numbers")
        if not lower < upper:
            raise ConfigError(f"{where}: lower ({lower:g}) must be below upper ({upper:g})")
        transform = table.get("transform", "log_bounded")
        if transform not in TRANSFORMS:
            raise ConfigError(f"{where}.transform: {transform!r} is not one of {TRANSFORMS}")
        groups = [(e,) for e in names] if table.get("per_experiment", False) else [None]
        for experiments in groups:
            label = name if experiments is None else f"{name}@{experiments[0]}"
            model = job.experiments[0 if experiments is None else names.index(experiments[0])]
            initial = table.get("initial")
            if initial is None:
                initial = _model_value(model.model, path, f"{where}.path")
            if not _is_number(initial) or not lower <= initial <= upper:
                raise ConfigError(f"{where}.initial: {initial!r} is outside [{lower:g}, {upper:g}]")
            try:
                parameters.append(
                    Parameter(
                        label, path, lower, upper, float(initial), transform,
                        experiments=experiments, units=table.get("units", ""),
                    )
                )
            except ValueError as err:
                raise ConfigError(f"{where}: {err}") from err
    try:
        return ParameterSpace(parameters)
    except ValueError as err:
        raise ConfigError(f"parameters: {err}") from err


def _is_number(x) -> bool:
    return not isinstance(x, bool) and isinstance(x, int | float) and math.isfinite(x)


def _model_value(model, path: str, where: str) -> float:
    try:
        value = np.asarray(get_parameter(model, path))
    except ParameterError as err:
        raise ConfigError(f"{where}: {err}") from None
    if value.size != 1:
        raise ConfigError(f"{where}: {path!r} is not a scalar; give 'initial'")
    return float(value)


def problem_from_job(job: Job) -> Problem:
    """A :class:`Problem` with one :class:`SRSExperiment` per job experiment.

    Measured SRS files are in the job's ``[srs] units``; simulations use forward-mode
    derivatives (``diffrax.ForwardMode``) so that Jacobians by ``jax.jacfwd`` work.
    """
    space = _parameters(job)
    scale = job.srs.scale
    sim = job.simulation
    experiments = []
    for i, spec in enumerate(job.experiments):
        if spec.srs_path is None:
            raise ConfigError(f"experiments[{i}].srs: missing; a fit needs measured data")
        freqs, values = read_spectrum_csv(spec.srs_path)
        experiments.append(
            SRSExperiment(
                spec.name,
                spec.model,
                sim.sensor,
                sim.sample_times(),
                freqs,
                values * scale,
                damping=job.srs.damping,
                kind=job.srs.kind,
                simulate_kwargs={
                    "adjoint": diffrax.ForwardMode(),
                    "rtol": sim.rtol,
                    "atol": sim.atol,
                    "max_steps": sim.max_steps,
                },
            )
        )
    try:
        return Problem(space, experiments)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def run_fit_job(
    path, out_dir, *, resume: bool = False, progress: bool = True, max_iterations=None
) -> FitResult:
    """Fit the job file at ``path``; write the report into ``out_dir``; return the result.

    With ``resume=True`` a checkpoint left in ``out_dir`` by an interrupted run is continued
    and the result is the same as an uninterrupted run's.
    """
    job = load_job(path)
    settings = FitSettings(job.raw.get("fit", {}))
    problem = problem_from_job(job)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    checkpoint = out_dir / "checkpoint.npz"
    z0 = None
    if settings.multistart and not (resume and checkpoint.exists()):
        starts = multistart(problem, settings.multistart, seed=settings.seed, n_best=1)
        z0 = starts.z[0]
        if starts.loss[0] > float(problem.loss(problem.initial_z)):
            z0 = None  # the configured initial values are better than every sample
    result = fit(
        problem,
        settings.fitter(),
        z0=z0,
        max_iterations=max_iterations or settings.max_iterations,
        checkpoint=checkpoint,
        checkpoint_every=settings.checkpoint_every,
        resume=resume,
        progress=progress,
    )
    result.save(out_dir)
    save_sensitivity(out_dir, problem, srs_sensitivity(problem, result.z))
    return result
