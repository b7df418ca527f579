"""The resumable fitting loop: :func:`fit` runs a fitter (see :mod:`identification._fitters`)
as a Python loop of compiled iterations, with progress, checkpoints and resume.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike
from tqdm.auto import tqdm

from diffmbs._settings import release_compiled_programs
from identification._checkpoint import load_npz, save_npz
from identification._fitters import CONVERGED_REASONS, REASONS, AbstractFitter, LevenbergMarquardt
from identification._problem import Problem
from identification._results import FitResult

__all__ = ["fit"]


def _fitter_id(fitter: AbstractFitter) -> str:
    return repr(fitter)


def _save_checkpoint(path: Path, fitter, problem, state, z0, history, iteration) -> None:
    dynamic, _ = eqx.partition(state, eqx.is_array)
    meta = {
        "format": "identification.fit checkpoint v1",
        "fitter": _fitter_id(fitter),
        "parameters": list(problem.space.names),
        "experiments": list(problem.experiment_names),
        "iteration": int(iteration),
    }
    save_npz(path, meta, dynamic, z0=np.asarray(z0),
             history=np.asarray(history, dtype=np.float64))  # fmt: skip


def checkpoint_start(path: Path) -> tuple[float, ...] | None:
    """The start ``z0`` a fit's checkpoint at ``path`` was run from (``None``: no checkpoint)."""
    if not path.exists():
        return None
    return tuple(float(x) for x in load_npz(path)[2]["z0"])


def _load_checkpoint(path: Path, fitter, problem, z0_template):
    meta, leaves, named = load_npz(path)
    if meta.get("parameters") != list(problem.space.names):
        raise ValueError(
            f"checkpoint {path}: parameters {meta.get('parameters')} differ from the "
            f"problem's {list(problem.space.names)}"
        )
    if meta.get("experiments") != list(problem.experiment_names):
        raise ValueError(
            f"checkpoint {path}: experiments {meta.get('experiments')} differ from the "
            f"problem's {list(problem.experiment_names)}"
        )
    if meta.get("fitter") != _fitter_id(fitter):
        raise ValueError(
            f"checkpoint {path} was written by {meta.get('fitter')}, not {_fitter_id(fitter)}"
        )
    z0 = named["z0"]
    history = [float(x) for x in named["history"]]
    # The template's structure (and its non-array parts) from a fresh init at z0: one model
    # evaluation, through the same compiled kernel the result needs anyway.
    template = fitter.init(problem, jnp.asarray(z0))
    dynamic_t, static = eqx.partition(template, eqx.is_array)
    treedef = jax.tree_util.tree_structure(dynamic_t)
    if treedef.num_leaves != len(leaves):
        raise ValueError(f"checkpoint {path}: the state does not match {_fitter_id(fitter)}")
    like = jax.tree_util.tree_leaves(dynamic_t)
    restored = [
        np.asarray(x) if isinstance(t, np.ndarray | np.generic) else jnp.asarray(x)
        for x, t in zip(leaves, like, strict=True)
    ]
    dynamic = jax.tree_util.tree_unflatten(treedef, restored)
    return eqx.combine(dynamic, static), jnp.asarray(z0), history, int(meta["iteration"])


def fit(
    problem: Problem,
    fitter: AbstractFitter | None = None,
    *,
    z0: ArrayLike | None = None,
    max_iterations: int = 100,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 2,
    resume: bool = False,
    progress: bool = True,
    callback: Callable[[int, Any], bool | None] | None = None,
    solver_checks: int = 4,
) -> FitResult:
    """Minimise ``problem`` with ``fitter`` (default :class:`LevenbergMarquardt`).

    A Python loop of jitted iterations, so that it can show progress, checkpoint and resume:

    - ``z0`` ``(p,)``: start (default ``problem.initial_z``);
    - ``max_iterations``: total iterations, counting those of a resumed run;
    - ``checkpoint``: file (``.npz``) to which the fitter state, ``z0``, the loss history and
      the iteration count are written atomically every ``checkpoint_every`` iterations and at
      the end;
    - ``resume``: if ``checkpoint`` exists, continue from it (the problem, its parameters, the
      start ``z0`` and the fitter settings must match; ValueError otherwise). The arrays are
      restored bit for bit and every iteration is the same compiled function, so a resumed
      fit ends exactly where an uninterrupted one does;
    - ``progress``: a tqdm bar with the loss;
    - ``callback(iteration, state)``: called after each iteration; returning ``True`` stops;
    - ``solver_checks``: simulations near the optimum that measure the solver's jitter
      (:func:`~identification._jitter.solver_jitter`; 0: none).

    Returns a :class:`~identification.FitResult` (with covariance and per-experiment misfits).
    """
    fitter = LevenbergMarquardt() if fitter is None else fitter
    if checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be >= 1, got {checkpoint_every}")
    path = None if checkpoint is None else Path(checkpoint)
    if path is not None and path.suffix != ".npz":
        path = path.with_suffix(path.suffix + ".npz") if path.suffix else path.with_suffix(".npz")
    z_start = problem.initial_z if z0 is None else jnp.asarray(z0, dtype=float)
    if z_start.shape != (problem.n_parameters,):
        raise ValueError(f"z0 must have shape ({problem.n_parameters},), got {z_start.shape}")
    release_compiled_programs()  # room for the Jacobian's programs (see MAX_MEMORY_REGIONS)
    if resume and path is not None and path.exists():
        saved = checkpoint_start(path)
        if not np.array_equal(np.asarray(saved), np.asarray(z_start)):
            raise ValueError(
                f"checkpoint {path} was started from z0 = {list(saved)}, not from this fit's "
                f"{np.asarray(z_start).tolist()}: resuming it would continue another fit "
                "(remove the checkpoint, or resume with the same start)"
            )
        state, z_start, history, iteration = _load_checkpoint(path, fitter, problem, z_start)
    else:
        state = fitter.init(problem, z_start)
        history = [float(state.loss)]
        iteration = 0
    bar = tqdm(
        total=max_iterations,
        initial=min(iteration, max_iterations),
        disable=not progress,
        desc=type(fitter).__name__,
        leave=False,
    )
    stopped_by_callback = False
    try:
        while iteration < max_iterations and not fitter.done(state):
            state = fitter.step(problem, state)
            iteration += 1
            history.append(float(state.loss))
            bar.update(1)
            bar.set_postfix(loss=f"{history[-1]:.4g}")
            if path is not None and iteration % checkpoint_every == 0:
                _save_checkpoint(path, fitter, problem, state, z_start, history, iteration)
            if callback is not None and callback(iteration, state):
                stopped_by_callback = True
                break
    finally:
        bar.close()
    if path is not None:
        _save_checkpoint(path, fitter, problem, state, z_start, history, iteration)
    reason_index = int(getattr(state, "reason", 0))
    if reason_index > 0:
        message = REASONS[reason_index]
    elif stopped_by_callback:
        message = "stopped by the callback"
    else:
        message = "maximum number of iterations reached"
    return FitResult.from_problem(
        problem,
        np.asarray(state.z),
        loss_history=history,
        iterations=iteration,
        converged=reason_index in CONVERGED_REASONS,
        fitter=_fitter_id(fitter),
        message=message,
        evaluations=fitter.evaluations(state, iteration),
        solver_checks=solver_checks,
    )
