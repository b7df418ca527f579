"""One simulation in phases, each with its own solver (``simulate(solver=SolverPhases(...))``).

Why: a test's stretches differ in what limits the step. The shock machine's hammer falls for
1.4 s while the supporting channels ring gently on their stiff modes, where a linearly implicit
solver (:class:`~diffmbs.RosenbrockW`) takes ~1,100 steps and an explicit one ~4,000; after the
blow the response itself must be resolved to 2 kHz, where a 5th-order explicit solver takes the
fewest steps. Where a phase ends changes only the cost, never the answer: each phase is
integrated to the same tolerance.

Each phase is a separate ``diffrax.diffeqsolve`` from the state where the previous one stopped,
with its own adjoint (:class:`~diffmbs.adjoint.DiscreteAdjoint` for an explicit phase,
diffrax's checkpointed adjoint for the others, unless one adjoint is given for all); every phase
saves at the sample times, clipped to its span, and each sample is taken from the phase that
contains it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

__all__ = ["SolverPhases"]


class SolverPhases(eqx.Module):
    """Integrate with ``solvers[0]`` until ``switch_times[0]`` (s), then with ``solvers[1]``,
    and so on; the last solver runs to the last sample time. Switch times at or after the last
    sample time leave the later solvers unused. Pass it as ``simulate(solver=...)``.

    ``switch_times`` ``(n_phases − 1,)`` is an array leaf: changing it does not recompile."""

    solvers: tuple[diffrax.AbstractSolver, ...]
    switch_times: Array

    def __init__(self, solvers: Sequence[diffrax.AbstractSolver], switch_times: ArrayLike):
        self.solvers = tuple(solvers)
        self.switch_times = jnp.atleast_1d(jnp.asarray(switch_times, dtype=float))
        if len(self.solvers) < 2 or self.switch_times.shape != (len(self.solvers) - 1,):
            raise ValueError(
                f"SolverPhases: {len(self.solvers)} solvers need {len(self.solvers) - 1} switch "
                f"times, got {self.switch_times.shape[0]}"
            )
        if not isinstance(self.switch_times, jax.core.Tracer) and np.any(
            np.diff(np.asarray(self.switch_times)) <= 0
        ):
            raise ValueError(f"SolverPhases: switch times must increase: {self.switch_times}")


def _between(x: Array, low: Array, high: Array) -> Array:
    """``x`` limited to ``[low, high]`` by comparisons (``jnp.clip``'s tangent goes to whichever
    operand tests bit-equal to the result, which XLA's fused copies can break)."""
    return jnp.where(x < low, low, jnp.where(x > high, high, x))


def _select_rows(take: Array, new: Array, old: Array) -> Array:
    """``new`` where ``take`` ``(n_t,)``, else ``old`` (leaves ``(n_t, ...)``)."""
    return jnp.where(take.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)


def integrate_phases(integrate_one: Callable, phases: SolverPhases, adjoints, y0, ts, t0):
    """``integrate_one(y0, ts, t0, solver, adjoint) → (ys, t_end, y_end, result, stats)`` (one
    diffrax solve from ``t0`` saving at ``ts``, which end at its end time) chained over the
    phases; returns the same tuple for the whole span. A phase that fails ends the run: its
    result and end time are reported, and the later phases' samples are not used."""
    t_start, y, result, stats, ys = t0, y0, diffrax.RESULTS.successful, None, None
    t_report, y_report = ts[-1], y0
    bounds = [*phases.switch_times, ts[-1]]
    for k, (solver, adjoint) in enumerate(zip(phases.solvers, adjoints, strict=True)):
        ok_so_far = result == diffrax.RESULTS.successful
        t_stop = _between(bounds[k], t_start, ts[-1])
        ys_k, t_end, y_end, result_k, stats_k = integrate_one(
            y, _between(ts, t_start, t_stop), t_start, solver, adjoint
        )
        if ys is None:
            ys, stats = ys_k, dict(stats_k)
        else:
            take = (ts > t_start) & ok_so_far
            ys = jax.tree.map(functools.partial(_select_rows, take), ys_k, ys)
            stats = {
                key: stats[key] if key == "max_steps" else stats[key] + stats_k[key]
                for key in stats
            }
        t_report = jnp.where(ok_so_far, t_end, t_report)
        y_report = jax.tree.map(functools.partial(jnp.where, ok_so_far), y_end, y_report)
        result = diffrax.RESULTS.where(ok_so_far, result_k, result)
        y, t_start = y_end, t_stop
    return ys, t_report, y_report, result, stats
