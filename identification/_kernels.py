"""The compiled kernels of a :class:`~identification.Problem`: one per experiment *structure*.

The tests of a joint fit often share one model structure: the same machine dropped from two
heights differs only in array leaves (the initial state, the measured spectrum) and in the
experiment's name. Compiled as one program, a problem would compile that machine's simulation
once per test. Here each experiment is run by kernels compiled for its structure — the
experiment with its name blanked (:func:`anonymous`), and the model paths of the parameters
that apply to it — so tests of one structure share one compiled simulation, and the compile
time of a joint fit grows with the number of distinct structures, not of tests.

Each kernel takes the SI values of the experiment's own parameters ``(p_e,)`` (the chain rule
to ``z`` is applied by the caller, :func:`dvalues_dz` being diagonal), so a forward-mode Jacobian
pushes one tangent per parameter that applies to the experiment, not one per parameter of the
problem.
"""

from __future__ import annotations

import copy
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs.parameters import set_parameter
from identification._experiments import AbstractExperiment

__all__ = [
    "anonymous",
    "kernel_arguments",
    "evaluate_kernel",
    "residual_rows_kernel",
    "residuals_jacobian_kernel",
    "sum_squares_batch_kernel",
    "sum_squares_grad_kernel",
]

Paths = tuple[tuple[str, ...], ...]
"""The model paths set by each parameter applying to an experiment (static)."""


def anonymous(experiment: AbstractExperiment) -> AbstractExperiment:
    """``experiment`` with its (static) name blanked and without the measured record an SRS may
    hold (only its windows use it: records of other lengths would key other programs), so that
    compiled kernels are keyed by its structure alone. Its name is used only in reports and
    construction errors."""
    record = getattr(experiment, "record", None)
    if experiment.name == "" and record is None:
        return experiment
    twin = copy.copy(experiment)
    object.__setattr__(twin, "name", "")  # a frozen dataclass field: the copy is private
    if record is not None:
        object.__setattr__(twin, "record", None)
        object.__setattr__(twin, "record_ts", None)
    return twin


def _model(experiment: AbstractExperiment, paths: Paths, values: Array) -> Any:
    model = experiment.model
    for i, parameter_paths in enumerate(paths):
        for path in parameter_paths:
            model = set_parameter(model, path, values[i])
    return model


def _residuals(experiment: AbstractExperiment, paths: Paths, values: Array) -> Array:
    return jnp.ravel(experiment.residuals(_model(experiment, paths, values)))


@eqx.filter_jit
def evaluate_kernel(experiment: AbstractExperiment, paths: Paths, values: Array):
    """``(residuals (m_e,), prediction)`` of ``experiment`` at its parameters' ``values``."""
    prediction = experiment.predict(_model(experiment, paths, values))
    return jnp.ravel(experiment.residuals_from_prediction(prediction)), prediction


@eqx.filter_jit
def residuals_jacobian_kernel(
    experiment: AbstractExperiment, paths: Paths, values: Array, mode: str
) -> tuple[Array, Array]:
    """``(r (m_e,), ∂r/∂values (m_e, p_e))``, by forward (``mode="fwd"``) or reverse mode."""
    differentiate = jax.jacfwd if mode == "fwd" else jax.jacrev
    jac, r = differentiate(lambda v: (_residuals(experiment, paths, v),) * 2, has_aux=True)(values)
    return r, jac


@eqx.filter_jit
def residual_rows_kernel(experiment: AbstractExperiment, paths: Paths, rows: Array) -> Array:
    """The residuals ``(n, m_e)`` at each row of parameter values ``rows`` ``(n, p_e)``, in one
    ``jax.vmap`` (lockstep integration): the runs of a Jacobian by differences."""
    return jax.vmap(lambda v: _residuals(experiment, paths, v))(rows)


@eqx.filter_jit
def sum_squares_batch_kernel(
    experiment: AbstractExperiment, paths: Paths, values: Array
) -> tuple[Array, int]:
    """``(Σ r² at each row of values (n, p_e), shape (n,); m_e)``, in one ``jax.vmap``
    (lockstep integration)."""
    r = jax.vmap(lambda v: _residuals(experiment, paths, v))(values)
    return jnp.sum(r**2, axis=1), r.shape[1]


@eqx.filter_jit
def sum_squares_grad_kernel(
    experiment: AbstractExperiment, paths: Paths, values: Array
) -> tuple[Array, Array, int]:
    """``(Σ r², ∂Σ r²/∂values (p_e,), m_e)`` by reverse mode."""

    def sum_squares(v):
        r = _residuals(experiment, paths, v)
        return jnp.sum(r**2), r.shape[0]

    (total, m), grad = jax.value_and_grad(sum_squares, has_aux=True)(values)
    return total, grad, m


def kernel_arguments(space: Any, experiment: AbstractExperiment) -> tuple[tuple[int, ...], Paths]:
    """``(indices into z of the parameters applying to experiment, their paths)``."""
    indices = space.applying_to(experiment.name)
    return indices, tuple(space.parameters[i].paths for i in indices)
