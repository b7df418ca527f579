"""A fitting problem: a parameter space and the experiments it is fitted to, as functions of z.

:class:`Problem` turns a :class:`~identification.ParameterSpace` and a set of experiments into
pure functions of the unconstrained vector ``z`` (shape ``(p,)``):

* ``residuals(z)`` ``(m,)``: every experiment's weighted residuals, concatenated in order, each
  computed on its own model with the parameters that apply to it written in;
* ``loss(z)`` ``()``: ``mean(residuals²)`` (dB² for spectra);
* ``jacobian(z)`` ``(m, p)``: ``∂residuals/∂z``.

Derivatives. ``jac="fwd"`` (default) uses forward mode (``jax.jacfwd``, one tangent per
parameter): the natural choice for the handful of parameters of a shock-machine model, and what
simulate-based experiments need ``adjoint=diffrax.ForwardMode()`` (the default of
:class:`~identification.SRSExperiment`) or :class:`diffmbs.ForwardSensitivity` for. The gradient
of ``loss`` is then also taken in forward mode, ``∇loss = 2 Jᵀ r / m``, through a custom VJP,
so reverse-mode users of the loss (optax's L-BFGS line search, ``jax.grad``) work without
reverse-mode differentiation of the simulation.
``jac="bwd"`` uses reverse mode (``jax.jacrev``, one cotangent per residual: cheaper when
``m < p``) and needs a reverse-mode adjoint in the simulations
(the default :class:`diffmbs.adjoint.DiscreteAdjoint`).

``jac="differences"`` takes central differences over ``±difference_step`` in z (in
:func:`residuals_and_jacobian`, each experiment's ``2p + 1`` runs in one ``jax.vmap``): the
slope over the distance a fitter's step moves, not at a point. Use it where the misfit is
rough on a finer scale than that, so that the exact derivative, however exact, does not
predict the change over a step: a record whose late part depends chaotically on the
parameters (the 3-D shock machine's table rattling on its stops: its SRS below 7 Hz has exact
derivatives of 10²–10⁴ dB per unit ln k where the change over 1 % in k is 0.04 dB). It costs
about as much as a forward-mode Jacobian with error control and needs no adjoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from identification._experiments import AbstractExperiment
from identification._kernels import (
    anonymous,
    evaluate_kernel,
    kernel_arguments,
    residual_rows_kernel,
    residuals_jacobian_kernel,
    sum_squares_batch_kernel,
    sum_squares_grad_kernel,
)
from identification._parameters import ParameterSpace

__all__ = [
    "JACOBIANS",
    "Problem",
    "holding",
    "batched_loss_rows",
    "evaluate",
    "loss_and_grad",
    "residuals_and_jacobian",
]


JACOBIANS: tuple[str, ...] = ("fwd", "bwd", "differences")
"""How :class:`Problem` takes ``∂residuals/∂z`` (``jac=``; see the module docstring)."""


class Problem(eqx.Module):
    """Parameters ``space`` fitted jointly to ``experiments``; see the module docstring.

    ``Problem`` is a pytree (an ``equinox.Module``): its measured data and model leaves are
    arrays, so problems of the same structure share compiled code. Construction validates that
    experiment names are unique, that every per-test parameter names existing experiments, and
    that every parameter path resolves in each experiment's model (ValueError naming the
    parameter otherwise).
    """

    space: ParameterSpace
    experiments: tuple[AbstractExperiment, ...]
    jac: str = eqx.field(static=True)
    difference_step: float = eqx.field(static=True)

    def __init__(
        self,
        space: ParameterSpace,
        experiments: Sequence[AbstractExperiment] | AbstractExperiment,
        *,
        jac: Literal["fwd", "bwd", "differences"] = "fwd",
        difference_step: float = 1e-2,
    ):
        if isinstance(experiments, AbstractExperiment):
            experiments = (experiments,)
        experiments = tuple(experiments)
        if not experiments:
            raise ValueError("Problem needs at least one experiment")
        names = [e.name for e in experiments]
        for e in experiments:
            if not isinstance(e, AbstractExperiment):
                raise TypeError(f"expected experiments, got {type(e).__name__}")
            if names.count(e.name) > 1:
                raise ValueError(f"duplicate experiment name {e.name!r}")
        for prm in space.parameters:
            if prm.experiments is not None:
                for name in prm.experiments:
                    if name not in names:
                        raise ValueError(
                            f"parameter {prm.name!r} applies to experiment {name!r}, which is "
                            f"not in the problem (experiments: {', '.join(names)})"
                        )
        for e in experiments:
            space.validate(e.model, e.name)
        unused = [p.name for p in space.parameters if not any(p.applies_to(n) for n in names)]
        if unused:
            raise ValueError(f"parameters {unused} apply to no experiment")
        if jac not in JACOBIANS:
            raise ValueError(f"jac must be one of {', '.join(JACOBIANS)}, got {jac!r}")
        if not 0.0 < difference_step < 1.0:
            raise ValueError(f"difference_step must be in (0, 1) (a step in z), got "
                             f"{difference_step!r}")  # fmt: skip
        self.space = space
        self.experiments = experiments
        self.jac = jac
        self.difference_step = float(difference_step)

    # ---------------------------------------------------------------- sizes and names

    @property
    def n_parameters(self) -> int:
        return len(self.space)

    @property
    def experiment_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.experiments)

    def experiment(self, name: str) -> AbstractExperiment:
        for e in self.experiments:
            if e.name == name:
                return e
        raise KeyError(f"no experiment named {name!r}")

    @property
    def residual_slices(self) -> dict[str, slice]:
        """Where each experiment's residuals sit in ``residuals(z)`` (static shapes)."""
        z = jax.ShapeDtypeStruct((self.n_parameters,), jnp.float64)
        out, start = {}, 0
        for e in self.experiments:
            n = jax.eval_shape(lambda z_, e_=e: self._residuals_of(e_, z_), z).shape[0]
            out[e.name] = slice(start, start + n)
            start += n
        return out

    @property
    def n_residuals(self) -> int:
        return max(s.stop for s in self.residual_slices.values())

    # ---------------------------------------------------------------- functions of z

    @property
    def initial_z(self) -> Array:
        return self.space.initial_z

    def values(self, z: ArrayLike) -> Array:
        """SI parameter values ``(p,)`` at ``z``."""
        return self.space.from_unconstrained(z)

    def model(self, z: ArrayLike, experiment: str) -> Any:
        """The model of ``experiment`` with the parameters at ``z`` written in."""
        return self.space.apply(self.experiment(experiment).model, self.values(z), experiment)

    def _residuals_of(self, e: AbstractExperiment, z: ArrayLike) -> Array:
        model = self.space.apply(e.model, self.values(z), e.name)
        return jnp.ravel(e.residuals(model))

    def predictions(self, z: ArrayLike) -> dict[str, Array]:
        """Each experiment's prediction at ``z`` (same shape as its ``measured``)."""
        vals = self.values(z)
        return {
            e.name: e.predict(self.space.apply(e.model, vals, e.name)) for e in self.experiments
        }

    def evaluate(self, z: ArrayLike) -> tuple[Array, dict[str, Array]]:
        """``(residuals (m,), predictions)`` from one simulation per experiment."""
        preds = self.predictions(jnp.asarray(z, dtype=float))
        r = jnp.concatenate(
            [jnp.ravel(e.residuals_from_prediction(preds[e.name])) for e in self.experiments]
        )
        return r, preds

    def residuals(self, z: ArrayLike) -> Array:
        """All weighted residuals at ``z``, shape ``(m,)``."""
        z = jnp.asarray(z, dtype=float)
        return jnp.concatenate([self._residuals_of(e, z) for e in self.experiments])

    def jacobian(self, z: ArrayLike) -> Array:
        """``∂residuals/∂z`` at ``z``, shape ``(m, p)`` (forward or reverse mode or
        differences, ``jac``)."""
        return self.residuals_and_jacobian(z)[1]

    def residuals_and_jacobian(self, z: ArrayLike) -> tuple[Array, Array]:
        """``(r (m,), J (m, p))``, sharing the primal evaluation."""
        z = jnp.asarray(z, dtype=float)
        if self.jac == "differences":
            rows = jax.vmap(self.residuals)(difference_rows(z, self.difference_step))
            return central_differences(rows, self.difference_step)
        if self.jac == "fwd":
            jac, r = jax.jacfwd(lambda z_: (self.residuals(z_),) * 2, has_aux=True)(z)
        else:
            jac, r = jax.jacrev(lambda z_: (self.residuals(z_),) * 2, has_aux=True)(z)
        return r, jac

    def loss(self, z: ArrayLike) -> Array:
        """``mean(residuals(z)²)``, a scalar; differentiable in either mode (see module)."""
        z = jnp.asarray(z, dtype=float)
        if self.jac != "bwd":
            return _loss_fwd_grad(z, self)
        return jnp.mean(self.residuals(z) ** 2)

    def value_and_grad(self, z: ArrayLike) -> tuple[Array, Array]:
        """``(loss (), ∇loss (p,))`` at ``z``."""
        return jax.value_and_grad(self.loss)(jnp.asarray(z, dtype=float))


# --------------------------------------------------------------------------- compiled kernels
# Shared by every fitter and by the results, so that switching fitter, resuming or computing the
# covariance does not compile the model again. Each experiment runs in kernels compiled for its
# structure (identification._kernels), so tests of one model structure share them too.


@eqx.filter_jit
def _values_and_slopes(space, z: Array) -> tuple[Array, Array]:
    """SI values and ``∂θ/∂z`` at ``z`` ``(..., p)``: one small program, not many eager ops."""
    return space.from_unconstrained(z), space.dvalues_dz(z)


def experiment_blocks(problem: Problem):
    """``(anonymous experiment, indices into z, paths)`` of each experiment, in order."""
    for e in problem.experiments:
        indices, paths = kernel_arguments(problem.space, e)
        yield anonymous(e), np.asarray(indices, dtype=int), paths


def evaluate(problem: Problem, z: Array) -> tuple[Array, dict[str, Array]]:
    """:meth:`Problem.evaluate`, compiled per experiment structure: ``(residuals (m,),
    predictions)``."""
    values = np.asarray(_values_and_slopes(problem.space, jnp.asarray(z, dtype=float))[0])
    rs, predictions = [], {}
    named = zip(experiment_blocks(problem), problem.experiment_names, strict=True)
    for (e, indices, paths), name in named:
        r, predictions[name] = evaluate_kernel(e, paths, values[indices])
        rs.append(np.asarray(r))
    return jnp.asarray(np.concatenate(rs)), predictions


def residuals_and_jacobian(problem: Problem, z: Array) -> tuple[Array, Array]:
    """:meth:`Problem.residuals_and_jacobian`, compiled per experiment structure: ``(r (m,),
    J (m, p))``; each experiment's block differentiated in its own parameters only."""
    z = jnp.asarray(z, dtype=float)
    values, slopes = map(np.asarray, _values_and_slopes(problem.space, z))
    rs, blocks = [], []
    for e, indices, paths in experiment_blocks(problem):
        if problem.jac == "differences":
            r, jac_z = _differences_in_z(problem, e, indices, paths, np.asarray(z))
        else:
            r, jac_values = residuals_jacobian_kernel(e, paths, values[indices], problem.jac)
            jac_z = np.asarray(jac_values) * slopes[indices]
        block = np.zeros((r.shape[0], problem.n_parameters))
        block[:, indices] = jac_z
        rs.append(np.asarray(r))
        blocks.append(block)
    return jnp.asarray(np.concatenate(rs)), jnp.asarray(np.concatenate(blocks))


def difference_rows(centre: Array, step: float) -> Array:
    """``centre`` ``(p,)`` and its central-difference neighbours ``centre ± step e_i``:
    shape ``(2p + 1, p)``, the centre first."""
    steps = step * jnp.eye(centre.shape[0], dtype=centre.dtype)
    return jnp.concatenate([centre[None], centre + steps, centre - steps])


def central_differences(rows: Array, step: float) -> tuple[Array, Array]:
    """``(f at the centre (m,), (f(+) − f(−)) / 2 step (m, p))`` from ``f`` at
    :func:`difference_rows` ``(2p + 1, m)``."""
    p = (rows.shape[0] - 1) // 2
    return rows[0], (rows[1 : p + 1] - rows[p + 1 :]).T / (2.0 * step)


def _differences_in_z(problem: Problem, experiment, indices, paths, z: np.ndarray):
    """``(r (m_e,), ∂r/∂z over ±difference_step (m_e, p_e))`` of one experiment: its
    ``2p_e + 1`` runs at ``z`` and along its own parameters, in one vmap."""
    h = problem.difference_step
    zs = np.repeat(z[None], 2 * len(indices) + 1, axis=0)
    zs[:, indices] = difference_rows(jnp.asarray(z[indices]), h)
    values = np.asarray(_values_and_slopes(problem.space, jnp.asarray(zs))[0])
    r, jac_z = central_differences(residual_rows_kernel(experiment, paths, values[:, indices]), h)
    return r, np.asarray(jac_z)


def batched_loss_rows(problem: Problem, zs: Array) -> Array:
    """The loss at every row of ``zs`` ``(n, p)``, shape ``(n,)``: each experiment's rows in
    one ``jax.vmap`` compiled per structure."""
    values = np.asarray(_values_and_slopes(problem.space, jnp.asarray(zs, dtype=float))[0])
    total, m = 0.0, 0
    for e, indices, paths in experiment_blocks(problem):
        sum_squares, m_e = sum_squares_batch_kernel(e, paths, values[:, indices])
        total, m = total + np.asarray(sum_squares), m + m_e
    return jnp.asarray(total / m)


def _value_and_grad(problem: Problem, z: Array) -> tuple[Array, Array]:
    values, slopes = map(np.asarray, _values_and_slopes(problem.space, jnp.asarray(z, dtype=float)))
    total, grad, m = 0.0, np.zeros(problem.n_parameters), 0
    for e, indices, paths in experiment_blocks(problem):
        sum_squares, grad_values, m_e = sum_squares_grad_kernel(e, paths, values[indices])
        total, m = total + float(sum_squares), m + m_e
        grad[indices] += np.asarray(grad_values) * slopes[indices]
    return jnp.asarray(total / m), jnp.asarray(grad / m)


def loss_and_grad(problem: Problem, z: ArrayLike) -> tuple[Array, Array]:
    """``(loss, ∇loss (p,))``; with ``jac="fwd"`` or ``"differences"`` from the compiled
    :func:`residuals_and_jacobian` (``∇loss = 2 Jᵀ r / m``), else by reverse mode."""
    z = jnp.asarray(z, dtype=float)
    if problem.jac != "bwd":
        r, jac = residuals_and_jacobian(problem, z)
        return jnp.mean(r**2), 2.0 * (jac.T @ r) / r.shape[0]
    return _value_and_grad(problem, z)


@eqx.filter_custom_vjp
def _loss_fwd_grad(z, problem):
    return jnp.mean(problem.residuals(z) ** 2)


@_loss_fwd_grad.def_fwd
def _loss_fwd_grad_fwd(perturbed, z, problem):
    del perturbed
    r, jac = problem.residuals_and_jacobian(z)
    grad = 2.0 * (jac.T @ r) / r.shape[0]
    return jnp.mean(r**2), grad


@_loss_fwd_grad.def_bwd
def _loss_fwd_grad_bwd(grad, cotangent, perturbed, z, problem):
    del perturbed, z, problem
    return cotangent * grad


def holding(problem: Problem, indices: Sequence[int], values: ArrayLike) -> Problem:
    """The problem over every parameter but those at ``indices``, which are held at ``values``
    (SI, shape ``(len(indices),)``) in the models of the experiments they apply to (as
    leaves: problems holding other values share compiled programs)."""
    space = problem.space
    indices = [int(i) for i in indices]
    held = ParameterSpace([space.parameters[i] for i in indices])
    rest = ParameterSpace([p for i, p in enumerate(space.parameters) if i not in indices])
    values = jnp.asarray(values, dtype=float)
    experiments = [
        eqx.tree_at(lambda e: e.model, e, held.apply(e.model, values, e.name))
        for e in problem.experiments
    ]
    return Problem(rest, experiments, jac=problem.jac, difference_step=problem.difference_step)
