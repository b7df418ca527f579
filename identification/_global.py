"""Global search over the parameters' box, then local refinement from the best distinct points.

An SRS throws away phase, so its misfit has many local minima: a least-squares fit started 2–5×
off stops in one of them and reports it with confidence. :func:`global_fit` first searches the
whole box with a population strategy whose generations are evaluated as one batch
(:func:`~identification.batched_loss`: lockstep ``jax.vmap``, fixed-size chunks, so one
compiled program serves every generation), then runs a local fitter (Levenberg–Marquardt by
default) from the ``n_refine`` best candidates that lie apart from each other, and keeps the
best end.

Strategies are :class:`AbstractGlobalSearch` objects working in *unit-box coordinates*
``u ∈ [0, 1]^p`` (:meth:`~identification.ParameterSpace.from_box`: ``log θ`` or ``θ`` scaled
between the bounds), so one step size suits stiffnesses and damping ratios alike. A strategy
may propose points outside the box: they are evaluated at the nearest point of the box and
ranked with a penalty growing with their distance from it (the box is where the model is
meant to be valid). Concrete strategy: :class:`CMAES`, covariance-matrix adaptation from
``evosax`` (maintained, JAX-native, its state a pytree of arrays, which is all a checkpoint
needs).

The search checkpoints its state, its random key and its archive of the best points after
every generation (atomically), so an interrupted run resumes where it stopped and ends where an
uninterrupted one does, and a finished search resumed with more ``generations`` goes on from its
last generation (the budget is not part of the strategy's identity). Each refinement
checkpoints through :func:`~identification.fit`; a refinement whose candidate has changed (the
search went on) starts again from its new candidate.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import math
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike
from tqdm.auto import tqdm

from diffmbs._settings import release_compiled_programs
from identification._checkpoint import load_npz, save_npz
from identification._fit import checkpoint_start, fit
from identification._fitters import AbstractFitter, LevenbergMarquardt
from identification._problem import Problem
from identification._profile import plausible_ranges
from identification._results import FitResult
from identification._sampling import batched_loss

__all__ = ["CMAES", "AbstractGlobalSearch", "GlobalSearchResult", "global_fit", "global_search"]

BOX_EPS = 1e-6
"""Candidates are evaluated at ``u`` clipped to ``[BOX_EPS, 1 − BOX_EPS]``: a bounded transform
maps the box's faces to ``z = ±∞``."""

FAILED_LOSS = 1e300
"""What a strategy is told for a failed simulation (a non-finite loss): ranked last."""


class AbstractGlobalSearch(eqx.Module):
    """A population strategy in unit-box coordinates (see the module docstring).

    ``init(key, u0) -> state`` starts it around ``u0`` ``(p,)``; ``ask(key, state) ->
    (population (population_size, p), state)`` proposes points; ``tell(key, state,
    population, losses) -> state`` gives their (penalised) losses ``(population_size,)``, lower
    is better. States are pytrees of arrays. ``generations`` is the default budget.
    """

    population_size: eqx.AbstractVar[int]
    generations: eqx.AbstractVar[int]

    @abc.abstractmethod
    def init(self, key: Array, u0: Array) -> Any: ...

    @abc.abstractmethod
    def ask(self, key: Array, state: Any) -> tuple[Array, Any]: ...

    @abc.abstractmethod
    def tell(self, key: Array, state: Any, population: Array, losses: Array) -> Any: ...


class CMAES(AbstractGlobalSearch):
    """CMA-ES (Hansen's covariance-matrix adaptation, ``evosax.algorithms.CMA_ES``, with
    negative weights) started at ``u0`` with step ``sigma0`` (a fraction of the box's width).

    Defaults (64 × 30 = 1,920 simulations) reach the basin of the global minimum of the
    8-parameter lumped MWSM problem from starts 2–5× off in the calibration study
    (``benchmarks/fit_studies.py``); a GPU affords thousands per generation.
    """

    population_size: int = eqx.field(static=True, default=64)
    generations: int = eqx.field(static=True, default=30)
    sigma0: float = eqx.field(static=True, default=0.3)

    def _algorithm(self, n_dims: int):
        return _cma_es(self.population_size, n_dims)

    def _params(self, algorithm):
        return algorithm.default_params.replace(std_init=jnp.asarray(self.sigma0))

    def init(self, key, u0):
        algorithm = self._algorithm(len(u0))
        return algorithm.init(key, jnp.asarray(u0, dtype=float), self._params(algorithm))

    def ask(self, key, state):
        algorithm = self._algorithm(state.mean.shape[0])
        return algorithm.ask(key, state, self._params(algorithm))

    def tell(self, key, state, population, losses):
        algorithm = self._algorithm(state.mean.shape[0])
        state, _ = algorithm.tell(key, population, losses, state, self._params(algorithm))
        return state


@functools.cache
def _cma_es(population_size: int, n_dims: int):
    # One instance per shape: evosax jits ask/tell with the instance as a static argument, so a
    # new instance would compile them again.
    from evosax.algorithms import CMA_ES  # evosax imports flax: pay for it only when used

    return CMA_ES(population_size=population_size, solution=jnp.zeros(n_dims))


class GlobalSearchResult(NamedTuple):
    """What :func:`global_search` found: the best points ``z`` ``(k, p)`` (unconstrained) and
    their ``loss`` ``(k,)``, ascending, at most ``k`` of them and at least ``min_distance``
    apart; ``evaluations`` (simulations of each experiment, every one counted);
    ``best_history`` ``(generations,)``: the best loss so far after each generation;
    ``archive_z`` ``(m, p)`` and ``archive_loss`` ``(m,)``: the best points seen, ascending."""

    z: np.ndarray
    loss: np.ndarray
    evaluations: int
    best_history: np.ndarray
    archive_z: np.ndarray
    archive_loss: np.ndarray


def _penalised(u: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """Losses for ranking: failed runs last, points outside the box behind every point inside
    that is not much worse (the penalty is the population's median loss per 0.1 of distance,
    squared)."""
    outside = np.sum((u - np.clip(u, 0.0, 1.0)) ** 2, axis=1)
    finite = np.isfinite(losses)
    scale = float(np.median(losses[finite])) if finite.any() else 1.0
    ranked = np.where(finite, losses, FAILED_LOSS)
    return ranked + max(scale, 1e-12) * 100.0 * outside


def _distinct_best(u: np.ndarray, losses: np.ndarray, k: int, min_distance: float) -> np.ndarray:
    """Indices of up to ``k`` lowest finite losses whose points are at least ``min_distance``
    apart (max-norm in the box), greedily from the best."""
    chosen: list[int] = []
    for i in np.argsort(losses, kind="stable"):
        if not np.isfinite(losses[i]) or len(chosen) == k:
            break
        if all(np.max(np.abs(u[i] - u[j])) >= min_distance for j in chosen):
            chosen.append(int(i))
    return np.array(chosen, dtype=int)


def _strategy_identity(search: AbstractGlobalSearch) -> str:
    """The strategy's ``repr`` without its budget: a checkpoint resumes under more (or fewer)
    ``generations``."""
    fields = (f for f in dataclasses.fields(search) if f.name != "generations")
    return f"{type(search).__name__}(" + ", ".join(
        f"{f.name}={getattr(search, f.name)!r}" for f in fields) + ")"  # fmt: skip


def _load_search(path: Path, meta: dict, template: Any):
    saved, leaves, arrays = load_npz(path)
    for field in ("format", "strategy", "parameters", "experiments", "seed"):
        if saved.get(field) != meta[field]:
            raise ValueError(
                f"checkpoint {path}: {field} {saved.get(field)!r} differs from this run's "
                f"{meta[field]!r}"
            )
    treedef = jax.tree_util.tree_structure(template)
    state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(x) for x in leaves])
    key = jax.random.wrap_key_data(jnp.asarray(arrays.pop("key")))
    return state, key, arrays, int(saved["generation"])


def global_search(
    problem: Problem,
    search: AbstractGlobalSearch | None = None,
    *,
    u0: ArrayLike | None = None,
    generations: int | None = None,
    seed: int = 0,
    n_best: int = 3,
    min_distance: float = 0.05,
    batch_size: int = 256,
    archive_size: int = 256,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> GlobalSearchResult:
    """Run ``search`` (default :class:`CMAES`) over the box of ``problem``'s parameters (all
    bounds must be finite) for ``generations`` (default the strategy's), starting around ``u0``
    (unit-box coordinates, default the parameters' initial values).

    Each generation is one :func:`~identification.batched_loss` call (chunks of
    ``batch_size``). The ``archive_size`` best points seen are kept; the result holds the
    ``n_best`` best of them that are ``min_distance`` apart (max-norm in the box).
    ``checkpoint`` (``.npz``) is written after every generation; with ``resume`` an existing one
    is continued up to ``generations`` (the strategy's settings other than its budget, the
    parameters, experiments and seed must match).
    """
    search = CMAES() if search is None else search
    generations = search.generations if generations is None else int(generations)
    space = problem.space
    for prm in space.parameters:
        prm.sampling_box()  # raises, naming the parameter, if a bound is infinite
    u_start = space.to_box(space.initial) if u0 is None else np.asarray(u0, dtype=np.float64)
    u_start = np.clip(u_start, BOX_EPS, 1.0 - BOX_EPS)
    meta = {
        "format": "identification.global_search checkpoint v1",
        "strategy": _strategy_identity(search),
        "parameters": list(space.names),
        "experiments": list(problem.experiment_names),
        "seed": int(seed),
    }
    path = None if checkpoint is None else Path(checkpoint)
    key = jax.random.key(seed)
    key, init_key = jax.random.split(key)
    state = search.init(init_key, jnp.asarray(u_start))
    archive_u = np.empty((0, len(space)))
    archive_loss = np.empty(0)
    history: list[float] = []
    generation = 0
    if resume and path is not None and path.exists():
        state, key, arrays, generation = _load_search(path, meta, state)
        archive_u, archive_loss = arrays["archive_u"], arrays["archive_loss"]
        history = arrays["best_history"].tolist()
    release_compiled_programs()  # room for the batched programs (see MAX_MEMORY_REGIONS)
    bar = tqdm(total=generations, initial=min(generation, generations), disable=not progress,
               desc=type(search).__name__, leave=False)  # fmt: skip
    try:
        while generation < generations:
            key, ask_key, tell_key = jax.random.split(key, 3)
            population, state = search.ask(ask_key, state)
            u = np.asarray(population, dtype=np.float64)
            u_eval = np.clip(u, BOX_EPS, 1.0 - BOX_EPS)
            z = np.asarray(space.to_unconstrained(space.from_box(u_eval)))
            losses = batched_loss(problem, z, batch_size=batch_size)
            state = search.tell(tell_key, state, population, jnp.asarray(_penalised(u, losses)))
            archive_u = np.concatenate([archive_u, u_eval])
            archive_loss = np.concatenate([archive_loss, losses])
            keep = np.argsort(archive_loss, kind="stable")[:archive_size]
            archive_u, archive_loss = archive_u[keep], archive_loss[keep]
            history.append(float(archive_loss[0]))
            generation += 1
            bar.update(1)
            bar.set_postfix(best=f"{history[-1]:.4g}")
            if path is not None:
                save_npz(path, {**meta, "generation": generation}, state,
                         key=jax.random.key_data(key), archive_u=archive_u,
                         archive_loss=archive_loss, best_history=np.asarray(history))  # fmt: skip
    finally:
        bar.close()
    best = _distinct_best(archive_u, archive_loss, n_best, min_distance)
    z_best = np.asarray(space.to_unconstrained(space.from_box(archive_u[best])))
    return GlobalSearchResult(
        z_best.reshape(len(best), len(space)),
        archive_loss[best],
        generation * search.population_size,
        np.asarray(history),
        np.asarray(space.to_unconstrained(space.from_box(archive_u))).reshape(-1, len(space)),
        archive_loss,
    )


def global_fit(
    problem: Problem,
    search: AbstractGlobalSearch | None = None,
    fitter: AbstractFitter | None = None,
    *,
    n_refine: int = 3,
    refine_initial: bool = True,
    max_iterations: int = 50,
    seed: int = 0,
    batch_size: int = 256,
    checkpoint_dir: str | Path | None = None,
    checkpoint_every: int = 2,
    resume: bool = False,
    progress: bool = True,
) -> FitResult:
    """:func:`global_search`, then ``fitter`` (default Levenberg–Marquardt, ``max_iterations``
    each) from its ``n_refine`` best distinct points and (``refine_initial``) from the
    parameters' initial values. Returns the :class:`~identification.FitResult` with the lowest
    loss; its ``search`` field records the global stage: strategy, evaluations, best loss by
    generation, every refinement's start loss, end loss and message, and ``plausible``, the
    ranges spanned by the search's points as good as the fit
    (:func:`~identification.plausible_ranges`).

    ``checkpoint_dir``: the search's checkpoint (``global.npz``) and each refinement's
    (``refine_<i>.npz``, every ``checkpoint_every`` iterations) go there; with ``resume`` the
    run continues from them.
    """
    search = CMAES() if search is None else search
    fitter = LevenbergMarquardt() if fitter is None else fitter
    folder = None if checkpoint_dir is None else Path(checkpoint_dir)
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    found = global_search(
        problem, search, seed=seed, n_best=n_refine, batch_size=batch_size, progress=progress,
        checkpoint=None if folder is None else folder / "global.npz", resume=resume,
    )  # fmt: skip
    starts = [*found.z, *([np.asarray(problem.initial_z)] if refine_initial else [])]
    results = []
    for i, z0 in enumerate(starts):
        path = None if folder is None else folder / f"refine_{i}.npz"
        results.append(
            fit(
                problem,
                fitter,
                z0=z0,
                max_iterations=max_iterations,
                progress=progress,
                checkpoint=path,
                checkpoint_every=checkpoint_every,
                # a search resumed with more generations may have moved the candidate
                resume=resume and path is not None and checkpoint_start(path) == tuple(z0),
            )  # fmt: skip
        )
    best = min(results, key=lambda r: r.loss if math.isfinite(r.loss) else math.inf)
    best.search = {
        "strategy": repr(search),
        "evaluations": found.evaluations,
        "total_simulations": found.evaluations
        + sum(r.evaluations.get("simulations", 0) for r in results),
        "total_jacobians": sum(r.evaluations.get("jacobians", 0) for r in results),
        "best_history": found.best_history.tolist(),
        # the archive's points as good as the fit: inner bounds of the profile intervals
        "plausible": plausible_ranges(problem, best, found.archive_z, found.archive_loss),
        "refinements": [
            {"start": "initial values" if i == len(found.z) else f"candidate {i}",
             "start_loss": r.loss_history[0] if r.loss_history else math.nan,
             "loss": r.loss, "converged": r.converged, "message": r.message}
            for i, r in enumerate(results)
        ],
    }  # fmt: skip
    return best
