"""Fitting time histories of impacts from far away: a continuation in the misfit's bandwidth
(and window).

A record of impacts is a train of spikes whose times move with the parameters (a clearance
sets how long the journal flies). Compared sample by sample, the misfit of two such trains has
a basin as narrow as one spike — ±1.5 % around the clearance of the slider-crank's record
(data/slider_crank) — and is flat and rough outside it. Low-passed, the spikes of record and
prediction overlap and the basin widens (±10 % at 100 Hz there, one bowl over the whole range
at 30 Hz). :func:`fit_in_stages` fits through a sequence of :class:`Stage` s — a band, a window,
the parameters to free — each started where the one before ended, and ends on the whole
record: the coarse stages keep the fit in the basin, the last one gives the precision (and
the reported uncertainty). Where the start is far, a global search belongs in the first stage
(the job files run it there).

An SRS is staged by its window: the SRS of the test's first ``until_s`` seconds (a simulation
that short) against the SRS of the measured record's first part. A shock's maximax SRS reaches
its value early at all but the lowest frequencies, so the window keeps most of the spectrum and
leaves out the late record, whose dependence on the parameters can be chaotic where impacts
repeat (the 3-D shock machine's table rattling on its stops, data/mwsm3d/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from identification._experiments import SRSExperiment
from identification._fit import fit
from identification._fitters import AbstractFitter
from identification._problem import Problem, holding
from identification._results import FitResult
from identification._time_history import TimeHistoryExperiment

__all__ = ["Stage", "check_stageable", "fit_in_stages", "in_stage", "stage_problem"]


class Stage(NamedTuple):
    """One stage of :func:`fit_in_stages`: time histories compared up to ``band_hz`` (Hz) and
    up to ``until_s`` (s; later samples weigh 0), SRS over the window up to ``until_s`` (the
    simulations end there), the parameters named in ``free`` fitted and the others held.
    ``None``: the whole band, the whole record, every parameter.

    Hold what a stage cannot see: a parameter with no effect on a stage's misfit gets the
    largest steps of a scaled fitter (Marquardt's scaling divides by its tiny sensitivity) and
    leaves it wherever they end — the slider-crank's contact stiffness went to its bound while
    the first impact alone fixed the clearance."""

    band_hz: float | None = None
    until_s: float | None = None
    free: tuple[str, ...] | None = None

    def label(self) -> str:
        text = "all" if self.band_hz is None else f"{self.band_hz:g} Hz"
        text += "" if self.until_s is None else f" to {self.until_s:g} s"
        return text + ("" if self.free is None else f" ({', '.join(self.free)})")


def in_stage(problem: Problem, stage: Stage) -> Problem:
    """``problem`` with every :class:`~identification.TimeHistoryExperiment` compared as
    ``stage`` says, and with a window (``until_s``) every :class:`~identification.SRSExperiment`
    over the window (:meth:`~identification.SRSExperiment.windowed`: a shorter simulation, its
    measured record needed); other experiments unchanged."""
    if stage.band_hz is None and stage.until_s is None:
        return problem
    experiments = []
    for e in problem.experiments:
        if isinstance(e, TimeHistoryExperiment):
            e = e.in_stage(stage.band_hz, stage.until_s)
        elif isinstance(e, SRSExperiment) and stage.until_s is not None:
            e = e.windowed(stage.until_s)
        experiments.append(e)
    return Problem(problem.space, experiments, jac=problem.jac,
                   difference_step=problem.difference_step)


def check_stageable(problem: Problem) -> None:
    """Raise unless ``problem`` has something a stage changes: a time history, or an SRS with
    its measured record."""
    if not any(isinstance(e, TimeHistoryExperiment)
               or (isinstance(e, SRSExperiment) and e.record is not None)
               for e in problem.experiments):  # fmt: skip
        raise ValueError("the problem has no time-history experiment and no SRS with its "
                         "measured record to stage")  # fmt: skip


def _checked(stages: Sequence[Stage | tuple], names: tuple[str, ...]) -> list[Stage]:
    out = [Stage(*s) for s in stages]
    for i, stage in enumerate(out):
        for value in stage[:2]:
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"stages[{i}]: expected positive numbers or None, got {stage}")
        unknown = [n for n in stage.free or () if n not in names]
        if unknown or (stage.free is not None and not stage.free):
            raise ValueError(f"stages[{i}].free: {unknown or 'empty'}; the parameters are "
                             f"{', '.join(names)}")  # fmt: skip
    return out


def _free(problem: Problem, stage: Stage) -> list[int]:
    if stage.free is None:
        return list(range(problem.n_parameters))
    return [problem.space.index(name) for name in stage.free]


def stage_problem(problem: Problem, stage: Stage, z: ArrayLike) -> tuple[Problem, list[int]]:
    """``(the problem of stage, the indices of its free parameters)``: ``problem`` compared as
    ``stage`` says (:func:`in_stage`), the parameters outside ``stage.free`` held at their
    values at ``z`` (unconstrained, every parameter); its ``z`` is ``z[free]``."""
    staged, free = in_stage(problem, stage), _free(problem, stage)
    held = [j for j in range(problem.n_parameters) if j not in free]
    if held:
        values = np.asarray(problem.space.from_unconstrained(jnp.asarray(z, dtype=float)))
        staged = holding(staged, held, values[held])
    return staged, free


def fit_in_stages(
    problem: Problem,
    stages: Sequence[Stage | tuple],
    fitter: AbstractFitter | None = None,
    *,
    z0: ArrayLike | None = None,
    max_iterations: int = 50,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 2,
    resume: bool = False,
    progress: bool = True,
    first_fit: FitResult | None = None,
) -> FitResult:
    """Fit ``problem`` through ``stages`` and then as given, each stage with ``fitter`` (default
    Levenberg–Marquardt) for at most ``max_iterations`` from where the stage before ended (the
    first from ``z0``, default the initial values). ``first_fit``: the first stage's fit, done
    already (a global stage and its refinement, over :func:`stage_problem` of the first stage
    at ``z0``): the stages go on from its end.

    Returns the last stage's :class:`~identification.FitResult` (its uncertainty is the whole
    record's); its ``stages`` list every stage's label, band, window, free parameters, start
    and end loss, the parameters it ended at (SI), iterations and message.
    ``checkpoint_dir``: each stage's checkpoint ``stage_<i>.npz`` (every ``checkpoint_every``
    iterations); ``resume`` continues them.
    """
    stages = _checked(stages, problem.space.names)
    check_stageable(problem)
    folder = None if checkpoint_dir is None else Path(checkpoint_dir)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    done, result = [], None
    z = np.asarray(problem.initial_z if z0 is None else z0, dtype=float)
    last = len(stages)
    for i, stage in enumerate([*stages, Stage()]):
        if i == 0 and first_fit is not None:  # done: no staged problem to build
            z, result = z.copy(), first_fit
            z[_free(problem, stage)] = first_fit.z
            done.append(_record(problem, stage, z, result))
            continue
        staged, free = stage_problem(problem, stage, z)
        result = fit(
            staged, fitter, z0=z[free], max_iterations=max_iterations,
            checkpoint=None if folder is None else folder / f"stage_{i}.npz",
            checkpoint_every=checkpoint_every, resume=resume, progress=progress,
            solver_checks=4 if i == last else 0,
        )  # fmt: skip
        z = z.copy()
        z[free] = result.z
        done.append(_record(problem, stage, z, result))
    result.stages = done
    return result


def _record(problem: Problem, stage: Stage, z: np.ndarray, result: FitResult) -> dict:
    values = np.asarray(problem.space.from_unconstrained(z)).tolist()
    return {"stage": stage.label(), "band_hz": stage.band_hz, "until_s": stage.until_s,
            "free": None if stage.free is None else list(stage.free),
            "parameters": dict(zip(problem.space.names, values, strict=True)),
            "start_loss": result.loss_history[0], "loss": result.loss,
            "iterations": result.iterations, "message": result.message}  # fmt: skip
