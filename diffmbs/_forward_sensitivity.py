"""Forward-mode derivatives under error control: the sensitivity equations integrated with the
state, the step-size controller watching both (layer 4).

Why. ``diffrax.ForwardMode`` (and, in reverse, :class:`~diffmbs.adjoint.DiscreteAdjoint`)
differentiate the accepted steps: the step sizes are chosen for the state, and the tangents
ride along. That derivative is exact for the discrete map, but it is the ODE's only where the
steps also resolve the tangent's dynamics, and they need not. A four-bar's journal riding on
its bore is quasi-static: the controller takes steps of 2e-4 s, which its contact mode (7 kHz)
and its rolling friction (``μN/v_ε``, an eigenvalue of −3e4 1/s, outside the explicit method's
stability region) never show in the state — the friction saturates, the state stays put — but
which the tangent, linear, sees in full: its derivative w.r.t. the clearance came out 10⁷ times
the one of central differences after 30 ms (``tests/test_forward_sensitivity.py``).

What. The tangent ``ẏ`` obeys ``d(ẏ)/dt = ∂f/∂y · ẏ + ∂f/∂θ · θ̇``; here it is integrated as
part of the state, ``(y, ẏ)``, by the same solver, so the controller limits the local error of
both (the error norm is the larger of the state's and the tangent's, each scaled by the run's
``atol + rtol |·|``): steps shrink where the tangent needs them. Each direction is solved as
a unit relative change of the parameters it moves (``max|θ̇| / max|θ|`` per array) and scaled
back, so the tangents are of the states' size whatever units the caller differentiates in
(along an SI unit of a wear coefficient of 1e-14 1/Pa they were 10¹⁴ times the states, and
the absolute tolerance could not be met where they crossed zero). A projecting solver
(:class:`~diffmbs._projection.ProjectedSolver`) pushes the tangent through its projection's
derivative. Under ``jax.jacfwd`` every direction rides in
one solve (a ``custom_vmap`` over the directions): each stage linearises the model's equations
once and applies that to every tangent, and the controller watches them all.

The state's values come from a separate solve of the state alone, so they do not depend on
being differentiated. Where the tangent's solve fails (step budget) its tangents are NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array

from diffmbs._projection import ProjectedSolver
from diffmbs.adjoint import forward_solve

__all__ = ["ForwardSensitivity", "solve_with_forward_sensitivity"]


class ForwardSensitivity(eqx.Module):
    """Forward-mode derivatives (``jax.jvp``, ``jax.jacfwd``) whose local error the step-size
    controller limits with the state's (module docstring). Pass as
    ``simulate(..., adjoint=ForwardSensitivity())``. Any solver; reverse mode is not
    supported (use :class:`~diffmbs.adjoint.DiscreteAdjoint`). Costs one forward solve more
    than ``diffrax.ForwardMode`` (the state alone, for its values) and more steps where the
    tangents need them (``benchmarks/forward_sensitivity.py``)."""


class _JointNorm(eqx.Module):
    """The largest of ``norm`` of the state's scaled error and of each tangent's (leaves
    ``(directions, ...)``)."""

    norm: Callable

    def __call__(self, pair):
        # The controller's decision, never differentiated (stop_gradient: no max tangent hazard)
        state, tangents = jax.lax.stop_gradient(pair)
        own, worst = self.norm(state), jnp.max(jax.vmap(self.norm)(tangents))
        return jnp.where(worst > own, worst, own)


class _WithTangents(eqx.Module):
    """``(g, ∂g/∂(θ, y) · (θ̇_k, ẏ_k) for each direction k)`` of
    ``g = fn(t, y, combine(θ, static))`` at ``((y, ẏ), (θ, θ̇))`` (``ẏ``, ``θ̇`` leaves
    ``(directions, ...)``): the vector field of the state and its tangents, or its step
    projection. One linearisation serves every direction."""

    fn: Callable = eqx.field(static=True)
    static: Any  # the arguments' non-differentiable part (its arrays stay arrays)

    def __call__(self, t, pair, args):
        (y, y_dots), (params, params_dots) = pair, args
        value, linear = jax.linearize(
            lambda p, y_: self.fn(t, y_, eqx.combine(p, self.static)), params, y
        )
        return value, jax.vmap(linear)(params_dots, y_dots)


def _tangent_solve(params, y0, params_dots, y0_dots, *, static, vector_field, solver,
                   controller, ts, t0, dt0, max_steps):  # fmt: skip
    """The tangents ``(ys_dot (directions, n_t, ...), y_end_dot (directions, ...))`` of the
    solve from ``(params, y0)`` along the directions ``(params_dots, y0_dots)`` (leaves
    ``(directions, ...)``), integrated with the state under one error control (NaN where that
    solve fails)."""
    if isinstance(solver, ProjectedSolver):
        solver = ProjectedSolver(solver.solver, _WithTangents(solver.projection, static))
    if hasattr(controller, "norm"):  # an adaptive controller (fixed steps: the same steps)
        controller = eqx.tree_at(lambda c: c.norm, controller, _JointNorm(controller.norm))
    # Each direction as a unit relative change of the parameters it moves (scaled back after):
    # the tolerances' atol is absolute, and along an SI unit of a 1e-14 coefficient the
    # tangents are 1e14 times the states — any crossing zero then wants steps none meets.
    # (a scale that cancels exactly: computed from stop_gradient inputs, so no max tangent)
    held_dots, held = jax.lax.stop_gradient((params_dots, params))
    sizes = jnp.stack([_relative_size(d, p) for d, p in zip(
        jtu.tree_leaves(held_dots), jtu.tree_leaves(held), strict=True)] or [jnp.zeros(
            jtu.tree_leaves(y0_dots)[0].shape[:1])])  # fmt: skip
    size = jnp.max(sizes, axis=0)
    size = jnp.where(size > 0, size, 1.0)  # (directions,)
    shrink = lambda tree: jtu.tree_map(  # noqa: E731
        lambda x: x / size.reshape((-1,) + (1,) * (x.ndim - 1)), tree)
    params_dots, y0_dots = shrink(params_dots), shrink(y0_dots)
    pair_params, pair_static = eqx.partition((params, params_dots), eqx.is_array)
    (ys, end), _ = forward_solve(
        (pair_params, (y0, y0_dots)), pair_static, _WithTangents(vector_field, static), solver,
        controller, ts, t0, dt0, max_steps, store=None,
    )  # fmt: skip
    failed = end[2] != diffrax.RESULTS.successful
    ys_dot = jtu.tree_map(lambda x: jnp.moveaxis(x, 1, 0), ys[1])  # directions first
    def grow(x):
        return jnp.where(failed, jnp.nan, x * size.reshape((-1,) + (1,) * (x.ndim - 1)))

    return jtu.tree_map(grow, (ys_dot, end[1][1]))


def _relative_size(direction: Array, value: Array) -> Array:
    """How large each direction (leading axis) is against the leaf's own size: ``max|ḋ| /
    max|value|`` (0 for a leaf of zeros). Called on stop_gradient inputs only."""
    reach = jnp.max(jnp.abs(direction.reshape(direction.shape[0], -1)), axis=1)
    size = jnp.max(jnp.abs(value)) if value.size else jnp.zeros(())
    return jnp.where(size > 0, reach / jnp.where(size > 0, size, 1.0), 0.0)


def _directions(params, y0, params_dot, y0_dot, options):
    """:func:`_tangent_solve` of one direction (leaves as the primal's), and under ``vmap``
    over directions alone (``jax.jacfwd``) of all of them in one solve."""
    arrays, rest = eqx.partition(options, eqx.is_array)  # traced tolerances, times

    def one(params, y0, params_dot, y0_dot, arrays):
        add = lambda tree: jtu.tree_map(lambda x: x[None], tree)  # noqa: E731
        out = _tangent_solve(params, y0, add(params_dot), add(y0_dot),
                             **eqx.combine(arrays, rest))  # fmt: skip
        return jtu.tree_map(lambda x: x[0], out)

    @jax.custom_batching.custom_vmap
    def directions(params, y0, params_dot, y0_dot, arrays):
        return one(params, y0, params_dot, y0_dot, arrays)

    @directions.def_vmap
    def _rule(axis_size, in_batched, params, y0, params_dot, y0_dot, arrays):
        primal_batched = any(jtu.tree_leaves((in_batched[0], in_batched[1], in_batched[4])))
        if primal_batched:  # variants of the model (vmap of a fit): one solve each
            axes = tuple(jtu.tree_map(lambda b: 0 if b else None, b) for b in in_batched)
            out = jax.vmap(one, in_axes=axes)(params, y0, params_dot, y0_dot, arrays)
        else:
            spread = lambda tree, batched: jtu.tree_map(  # noqa: E731
                lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))),
                tree, batched)  # fmt: skip
            out = _tangent_solve(params, y0, spread(params_dot, in_batched[2]),
                                 spread(y0_dot, in_batched[3]), **eqx.combine(arrays, rest))
        return out, jtu.tree_map(lambda _: True, out)

    return directions(params, y0, params_dot, y0_dot, arrays)


def solve_with_forward_sensitivity(dynamic, **options):
    """Solve ``ẏ = vector_field(t, y, combine(params, static))`` from ``y0``
    (``dynamic = (params, y0)``; keywords ``static``, ``vector_field``, ``solver``,
    ``controller``, ``ts``, ``t0``, ``dt0``, ``max_steps``), save at ``ts``: ``(ys, (t_end,
    y_end, result, stats))`` as :func:`~diffmbs.adjoint.solve_with_discrete_adjoint`; its
    forward-mode derivative by the error-controlled sensitivity equations (module
    docstring)."""
    ys, (t_end, y_end, result, stats) = _solve(dynamic, **options)
    return ys, (t_end, y_end, eqx.tree_at(lambda r: r._value, diffrax.RESULTS.successful,
                                          result), stats)  # fmt: skip


@eqx.filter_custom_jvp
def _solve(dynamic, *, static, vector_field, solver, controller, ts, t0, dt0, max_steps):
    """:func:`solve_with_forward_sensitivity` with diffrax's result as its integer code."""
    (ys, (t_end, y_end, result, stats)), _ = forward_solve(
        dynamic, static, vector_field, solver, controller, ts, t0, dt0, max_steps, store=None
    )
    return ys, (t_end, y_end, result._value, stats)


@_solve.def_jvp
def _solve_jvp(primals, tangents, *, static, vector_field, solver, controller, ts, t0, dt0,
               max_steps):  # fmt: skip
    (dynamic,), (dynamic_dot,) = primals, tangents
    options = dict(static=static, vector_field=vector_field, solver=solver,
                   controller=controller, ts=ts, t0=t0, dt0=dt0, max_steps=max_steps)  # fmt: skip
    out = _solve(dynamic, **options)
    (params, y0) = dynamic
    params_dot, y0_dot = jtu.tree_map(
        lambda d, x: d if d is not None or x is None else jnp.zeros_like(x), dynamic_dot, dynamic,
        is_leaf=lambda d: d is None,
    )
    ys_dot, y_end_dot = _directions(params, y0, params_dot, y0_dot, options)
    no_tangent = {name: None for name in out[1][3]}  # the step counts
    return out, (ys_dot, (None, y_end_dot, None, no_tangent))
