"""Reverse mode through a simulation by the discrete adjoint of its accepted steps (layer 4).

:class:`DiscreteAdjoint` is the adjoint strategy that :func:`diffmbs.integrate.simulate` uses
by default. It differentiates the numerical solution exactly as computed — the sequence of
accepted Runge–Kutta steps and the dense-output interpolation that produced the saved samples
— with the step sizes held fixed (the usual "discretise-then-optimise" derivative; the
controller's choice of steps is not differentiated, which changes the gradient by the order of
the solver tolerance).

Forward pass: one adaptive ``diffrax.diffeqsolve`` that also saves the state at the end of every
accepted step (``SaveAt(steps=True)``; memory ``max_steps × n_state`` floats) or, for larger
models, every step's dense information with its stage increments (``SaveAt(dense=True)``;
``max_steps × (n_stages + 2) × n_state`` floats), so the backward pass need not recompute them.

Backward pass, given the cotangents ``ȳ_j`` of the samples ``y(t_j)``:

1. Every sample is a *linear* function of its step's dense information ``D_n`` (``y0``, ``y1``
   and the stage derivatives ``k``; the interpolant is a polynomial in ``(t − t_n)/h_n``). Its
   transpose maps ``ȳ_j`` to ``D̄_n``. Samples are grouped by step, so the buffer of ``D̄`` has
   one row per step that holds a sample (at most ``len(ts)`` rows), not one per step.
2. One ``lax.while_loop`` from the last accepted step down to the first takes step ``n`` from
   its stored start ``y_n`` and pulls ``(ȳ_{n+1}, D̄_n)`` back through it, accumulating
   the parameter cotangent: for small states through the step Jacobians, otherwise through
   the step's stages written out backwards (:func:`_explicit_rk_step_vjp`, one ``vjp`` of the
   vector field per stage, w.r.t. the state and the parameters at once, at the stage inputs
   stored by the forward pass or recomputed). The loop runs exactly
   the accepted-step count (under ``vmap``, the largest of the batch), so it costs a few
   forward steps per step and no checkpoint bookkeeping.

Only the parameters the caller differentiates (the leaves ``jax.grad`` perturbs) are pulled
back; a gradient w.r.t. a few masses does not pay for every frame and inertia of the model.

The backward pass is itself not differentiable (no second derivatives) and forward mode
(``jax.jvp``/``jax.jacfwd``) is not available through this adjoint (it is a ``custom_vjp``):
use ``adjoint=diffrax.ForwardMode()`` there. The end state saved for failure diagnosis carries
no gradient.

Works with any diffrax solver whose ``step`` is a pure function of the step's start state and
whose interpolation is linear in its dense information: all explicit Runge–Kutta methods
(``Tsit5``, ``Dopri5``, ``Dopri8``, ``Heun``, …). Implicit solvers keep diffrax's
``RecursiveCheckpointAdjoint``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.flatten_util
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jaxtyping import Array, PyTree

__all__ = ["DiscreteAdjoint", "solve_with_discrete_adjoint"]


class DiscreteAdjoint(eqx.Module):
    """Reverse-mode adjoint of the accepted explicit Runge–Kutta steps (see the module
    docstring). Pass as ``simulate(..., adjoint=DiscreteAdjoint())``; the default for explicit
    solvers. Memory: the state at every accepted step, ``max_steps × n_state`` floats, or
    ``n_stages + 2`` times that with stored stages (below).

    ``jacobian_max_state``, ``jacobian_max_equations``: up to this many state variables, for
    a vector field of up to this many (top-level) jaxpr equations, the state cotangent goes
    through explicit step Jacobians (one vectorised ``jacfwd``, ``n_state`` tangents per step:
    cheap for small, overhead-bound models such as the lumped shock machine, 182 equations,
    where it is 8 % faster) and the parameter cotangents through one ``vjp`` vectorised over
    a chunk of steps (:meth:`backward_path` ``"jacobians"``). Otherwise, through one ``vjp``
    per stage of every step, state and parameters together: better when a step is expensive
    (a 2-link chain in joint coordinates, 629 equations and 4 states: gradient ÷ forward 3.3
    instead of 5.3).

    ``stage_store_max_floats``: on that stage-wise path the forward pass keeps every step's
    stage increments (``"stored stages"``) while ``max_steps × (n_stages + 2) × n_state`` is at
    most this (2²⁵ floats, 256 MiB in float64, per trajectory: under ``vmap`` the batch
    multiplies it), and the backward pass does not re-run the stages; above it they are
    recomputed from the stored step starts (``"stages"``).
    ``chunk``: steps processed per iteration of the backward loop; ``None``: 64 with step
    Jacobians (vectorised over the chunk), 8 otherwise (a ``scan`` inside the chunk). The
    earliest chunk is filled with masked dead steps, so a short simulation pays for up to
    ``chunk − 1`` extra steps; one loop body (not a second one for the remainder) keeps the
    compiled backward pass at half the size.
    """

    chunk: int | None = eqx.field(static=True, default=None)
    jacobian_max_state: int = eqx.field(static=True, default=16)
    jacobian_max_equations: int = eqx.field(static=True, default=400)
    stage_store_max_floats: int = eqx.field(static=True, default=2**25)

    def backward_path(self, vector_field, solver, t0, y0, args, max_steps: int) -> str:
        """How the backward pass pulls a step back: ``"jacobians"``, ``"stored stages"`` or
        ``"stages"`` (see the class docstring)."""
        n_state = jax.flatten_util.ravel_pytree(y0)[0].shape[0]
        if n_state <= self.jacobian_max_state and (
            _equations(eqx.filter_make_jaxpr(vector_field)(t0, y0, args)[0])
            <= self.jacobian_max_equations
        ):
            return "jacobians"
        n_dense = solver.tableau.num_stages + 2
        if max_steps * n_dense * n_state <= self.stage_store_max_floats:
            return "stored stages"
        return "stages"


def _equations(jaxpr) -> int:
    """The top-level equations of a vector field's jaxpr, looking through the one call a
    jitted vector field is."""
    eqns = jaxpr.eqns
    while len(eqns) == 1 and eqns[0].primitive.name in ("jit", "pjit"):
        eqns = eqns[0].params["jaxpr"].jaxpr.eqns
    return len(eqns)


def _zeros_like_tree(tree: PyTree) -> PyTree:
    return jtu.tree_map(jnp.zeros_like, tree)


def _materialise(cotangent: PyTree, primal: PyTree) -> PyTree:
    """Symbolic-zero (``None``) cotangents as arrays of zeros."""
    return jtu.tree_map(
        lambda c, p: jnp.zeros_like(p) if c is None else c,
        cotangent,
        primal,
        is_leaf=lambda x: x is None,
    )


def _save_at(ts: Array, store: str | None) -> diffrax.SaveAt:
    # The samples, the last accepted state (t1, or where a failed solve stopped), and when
    # differentiating, for the backward pass, the end of every accepted step (``"steps"``) or
    # its whole dense information, stages included (``"dense"``).
    subs = (diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True))
    if store == "steps":
        subs += (diffrax.SubSaveAt(steps=True),)
    return diffrax.SaveAt(subs=subs, dense=store == "dense")


def _butcher(tableau) -> tuple[int, Array, Array]:
    """Stage count, the full lower-triangular matrix ``a`` (s, s) and the nodes ``c`` (s,)."""
    n_stages = tableau.num_stages
    a = np.zeros((n_stages, n_stages))
    for i, row in enumerate(tableau.a_lower):
        a[i + 1, : i + 1] = row
    return n_stages, jnp.asarray(a), jnp.asarray(np.concatenate([[tableau.c1], tableau.c]))

def _explicit_rk_step(tableau, vector_field, t_start, t_stop, y_start, args, projection=None):
    """One explicit Runge–Kutta step from the Butcher tableau. Returns ``(y_stop, dense)`` with
    diffrax's dense information ``dict(y0, y1, k)``, ``k`` the stage increments ``h·f_i``
    stacked on a leading axis. The stages are a ``lax.scan``, so the vector field is traced
    once (compile time), as in diffrax. (Its ``vjp`` is slow — the scan stacks every stage's
    residuals —; larger models go through :func:`_explicit_rk_step_vjp` instead.)"""
    n_stages, a, c = _butcher(tableau)
    h = t_stop - t_start

    def combine(weights, ks):
        return jtu.tree_map(lambda y, k: y + jnp.tensordot(weights, k, axes=1), y_start, ks)

    def stage(ks, i):
        f = vector_field(t_start + c[i] * h, combine(a[i], ks), args)
        return jtu.tree_map(lambda k, f_i: k.at[i].set(h * f_i), ks, f), None

    ks = jtu.tree_map(lambda y: jnp.zeros((n_stages,) + y.shape, y.dtype), y_start)
    ks, _ = jax.lax.scan(stage, ks, jnp.arange(n_stages))
    y_stop = combine(jnp.asarray(tableau.b_sol), ks)
    if projection is not None:  # diffmbs's ProjectedSolver: the step ends on the manifold
        y_stop = projection(t_stop, y_stop, args)
    return y_stop, dict(y0=y_start, y1=y_stop, k=ks)



def _explicit_rk_step_vjp(tableau, vector_field, t_start, t_stop, y_start, args_of, params,
                          cotangent, ks=None, projection=None):
    """``(p̄, ȳ_start)`` of :func:`_explicit_rk_step` for ``cotangent = (ȳ_stop, D̄)``, with
    ``args = args_of(params)``: the stages' adjoint written out. The stage inputs
    ``Y_i = y + Σ_j a_ij k_j`` come from the stage increments ``ks`` stored by the forward
    pass (a pytree like ``y_start`` with a leading stage axis), or without them from a
    forward ``scan`` of the stages; a backward ``scan`` takes ``k̄_i`` (from ``ȳ_stop``
    through ``b_i`` and from ``D̄``), pulls it through ``k_i = h f(t_i, Y_i)`` with one ``vjp``
    and passes ``Ȳ_i`` on to ``ȳ`` and to the earlier stages (``k̄_j += a_ij Ȳ_i``). Each loop
    traces the vector field once, and unlike the ``vjp`` of the step's ``scan`` nothing is
    stacked but the stage inputs (n_stages × n_state floats)."""
    n_stages, a, c = _butcher(tableau)
    h = t_stop - t_start
    y_flat, unflatten = jax.flatten_util.ravel_pytree(y_start)
    ravel = lambda tree: jax.flatten_util.ravel_pytree(tree)[0]  # noqa: E731

    def increment(p, t, y):
        return h * ravel(vector_field(t, unflatten(y), args_of(p)))

    def stage(ks, i):
        y_i = y_flat + a[i] @ ks
        return ks.at[i].set(increment(params, t_start + c[i] * h, y_i)), y_i

    if ks is None:
        ks = jnp.zeros((n_stages, y_flat.shape[0]), y_flat.dtype)
        ks, stage_inputs = jax.lax.scan(stage, ks, jnp.arange(n_stages))
    else:
        ks = jax.vmap(ravel)(ks)
        stage_inputs = y_flat + a @ ks

    y_stop_bar, dense_bar = cotangent
    stop_bar = ravel(y_stop_bar) + ravel(dense_bar["y1"])
    p_bar = _zeros_like_tree(params)
    if projection is not None:  # back through the end-of-step projection first
        y_raw = y_flat + jnp.asarray(tableau.b_sol) @ ks
        project = lambda p, y: ravel(projection(t_stop, unflatten(y), args_of(p)))  # noqa: E731
        p_bar, stop_bar = jax.vjp(project, params, y_raw)[1](stop_bar)
    k_bar = jax.vmap(ravel)(dense_bar["k"]) + jnp.asarray(tableau.b_sol)[:, None] * stop_bar

    def adjoint_stage(carry, i):
        k_bar, y_bar, p_bar = carry
        fn = lambda p, y: increment(p, t_start + c[i] * h, y)  # noqa: E731
        p_i, y_i = jax.vjp(fn, params, stage_inputs[i])[1](k_bar[i])
        k_bar = k_bar + a[i][:, None] * y_i
        return (k_bar, y_bar + y_i, jtu.tree_map(jnp.add, p_bar, p_i)), None

    init = (k_bar, stop_bar + ravel(dense_bar["y0"]), p_bar)
    (_, y_bar, p_bar), _ = jax.lax.scan(adjoint_stage, init, jnp.arange(n_stages)[::-1])
    return p_bar, unflatten(y_bar)

def check_supported(solver: diffrax.AbstractSolver) -> None:
    """Raise if ``solver`` is not an explicit Runge–Kutta method (what the adjoint replays)."""
    if not isinstance(solver, diffrax.AbstractERK):
        raise ValueError(
            f"DiscreteAdjoint replays explicit Runge–Kutta steps; {type(solver).__name__} is "
            "not one. Use adjoint=diffrax.RecursiveCheckpointAdjoint() with this solver."
        )


@eqx.filter_custom_vjp
def solve_with_discrete_adjoint(
    dynamic: tuple[PyTree, PyTree],
    static: PyTree,
    vector_field: Callable,
    solver: diffrax.AbstractSolver,
    stepsize_controller: diffrax.AbstractStepSizeController,
    ts: Array,
    t0: Array,
    dt0: Array | None,
    max_steps: int,
    adjoint: DiscreteAdjoint,
) -> tuple[PyTree, Any]:
    """Solve ``ẏ = vector_field(t, y, args)`` from ``y0`` and save at ``ts``.

    ``dynamic = (params, y0)`` is what is differentiated: ``params`` is the inexact-array part
    of the vector field's ``args``, recombined with ``static`` by ``eqx.combine``. Returns
    ``(ys, (t_end, y_end, result, stats))``: ``ys`` leaves of shape ``(len(ts), ...)``, then
    the last accepted time and state, diffrax's ``RESULTS`` and step statistics (no gradient).
    """
    del adjoint
    out, _ = forward_solve(
        dynamic, static, vector_field, solver, stepsize_controller, ts, t0, dt0, max_steps,
        store=None,
    )
    return out


def forward_solve(dynamic, static, vector_field, solver, controller, ts, t0, dt0, max_steps,
                  store, adjoint=None):
    """The diffrax solve behind :func:`solve_with_discrete_adjoint` (and :func:`simulate`'s
    other adjoints, passed as ``adjoint``; default: not differentiated here). Returns
    ``((ys, (t_end, y_end, result, stats)), residuals)``, ``residuals`` for the backward pass
    when ``store`` is ``"steps"`` or ``"dense"``, else ``None``."""
    params, y0 = dynamic
    args = eqx.combine(params, static)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        solver,
        t0,
        ts[-1],
        dt0,
        y0,
        args=args,
        saveat=_save_at(ts, store),
        stepsize_controller=controller,
        adjoint=diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint,
        max_steps=max_steps,
        throw=False,
    )
    ys, y_end = sol.ys[:2]
    end = (sol.ts[1][-1], jtu.tree_map(lambda x: x[-1], y_end), sol.result, sol.stats)
    num_accepted = sol.stats["num_accepted_steps"]
    if store is None:
        return (ys, end), None
    if store == "steps":
        return (ys, end), (sol.ts[2], sol.ys[2], num_accepted, None)
    # t_{n+1}, y_{n+1} and the stage increments of step n, padded to max_steps
    dense = sol.interpolation
    return (ys, end), (dense.ts[1:], dense.infos["y1"], num_accepted, dense.infos["k"])


def _fwd(perturbed, dynamic, static, vector_field, solver, controller, ts, t0, dt0,
         max_steps, adjoint):
    del perturbed
    params, y0 = dynamic
    path = adjoint.backward_path(
        vector_field, solver, t0, y0, eqx.combine(params, static), max_steps
    )
    store = "dense" if path == "stored stages" else "steps"
    return forward_solve(
        dynamic, static, vector_field, solver, controller, ts, t0, dt0, max_steps, store
    )


def _bwd(residuals, cotangent, perturbed, dynamic, static, vector_field, solver,
         controller, ts, t0, dt0, max_steps, adjoint):
    del controller, dt0
    t_steps, y_steps, num_accepted, stored_ks = residuals
    all_params, y0 = dynamic
    # Only the parameters the caller differentiates get cotangents (``None`` for the rest):
    # a gradient w.r.t. a few masses does not pull back through every frame and inertia.
    params, fixed = eqx.partition(all_params, perturbed[0])
    args_of = lambda p: eqx.combine(p, fixed, static)  # noqa: E731
    ys_bar = _materialise(cotangent[0], jtu.tree_map(lambda x: jnp.broadcast_to(
        x, (ts.shape[0],) + x.shape), y0))

    projection = getattr(solver, "projection", None)  # diffmbs's ProjectedSolver

    def step(params_, y_start, t_start, t_stop):
        return _explicit_rk_step(
            solver.tableau, vector_field, t_start, t_stop, y_start, args_of(params_), projection
        )

    def step_start(n):
        """Start time and state of accepted step ``n`` (0-based)."""
        previous = jnp.maximum(n - 1, 0)
        t_start = jnp.where(n == 0, t0, t_steps[previous])
        y_start = jtu.tree_map(
            lambda first, stored: jnp.where(n == 0, first, stored[previous]), y0, y_steps
        )
        return t_start, y_start

    # 1. Cotangent of each step's dense information, summed over the samples it produced.
    dense_shape = jax.eval_shape(step, params, y0, t0, t0)[1]
    dense_zero = jtu.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), dense_shape)
    sample_step = jnp.clip(
        jnp.searchsorted(t_steps, ts, side="left"), 0, jnp.maximum(num_accepted - 1, 0)
    )

    def dense_cotangent(t, n, y_bar):
        t_start, _ = step_start(n)

        def sample(dense):
            return solver.interpolation_cls(t0=t_start, t1=t_steps[n], **dense).evaluate(t)

        (dense_bar,) = jax.linear_transpose(sample, dense_zero)(y_bar)
        return dense_bar

    per_sample = jax.vmap(dense_cotangent)(ts, sample_step, ys_bar)
    first_of_step = jnp.concatenate([jnp.ones((1,), bool), sample_step[1:] != sample_step[:-1]])
    group = jnp.cumsum(first_of_step) - 1
    group_dense_bar = jtu.tree_map(lambda x: jnp.zeros_like(x).at[group].add(x), per_sample)

    def step_cotangent(n):
        """``(ȳ_{n+1} placeholder, D̄_n)``: the dense cotangent of step ``n`` (zero if none)."""
        j = jnp.minimum(jnp.searchsorted(sample_step, n, side="left"), ts.shape[0] - 1)
        has_samples = (sample_step[j] == n) & (n < num_accepted)
        return jtu.tree_map(lambda x: jnp.where(has_samples, x[group[j]], 0.0), group_dense_bar)

    # 2. Pull back through the accepted steps, last to first, `chunk` steps at a time: small,
    #    cheap models by step Jacobians (`jacobian_chunk`), the others stage by stage
    #    (`vjp_chunk`); see DiscreteAdjoint.
    _, unflatten = jax.flatten_util.ravel_pytree(y0)
    small_state = (
        adjoint.backward_path(vector_field, solver, t0, y0, args_of(params), max_steps)
        == "jacobians"
    )
    chunk = adjoint.chunk or (64 if small_state else 8)

    def params_pullback(n, cotangent):
        t_start, y_start = step_start(n)
        return jax.vjp(lambda p: step(p, y_start, t_start, t_steps[n]), params)[1](cotangent)[0]

    def jacobians(n):
        """Flattened ``∂y_{n+1}/∂y_n`` ``(n_state, n_state)`` and ``∂D_n/∂y_n``
        ``(n_dense, n_state)`` of step ``n``, in one forward-mode pass."""
        t_start, y_start = step_start(n)

        def outputs(y_flat):
            y_stop, dense = step(params, unflatten(y_flat), t_start, t_steps[n])
            return jax.flatten_util.ravel_pytree(y_stop)[0], jax.flatten_util.ravel_pytree(dense)[0]

        return jax.jacfwd(outputs)(jax.flatten_util.ravel_pytree(y_start)[0])

    def jacobian_chunk(y_bar, params_bar, steps, dense_bars):
        """Small models: the step Jacobians, vectorised over the chunk, then a matrix-vector
        recursion for the state cotangents (a sequential vjp of a tiny model is dominated by
        per-operation overhead; this is ~3× cheaper there and costs O(n_state²) per step);
        then the chunk's parameter cotangents in one vectorised vjp."""
        live = steps >= 0
        n_safe = jnp.maximum(steps, 0)
        state_jac, dense_jac = jax.vmap(jacobians)(n_safe)
        dense_flat = jax.vmap(lambda d: jax.flatten_util.ravel_pytree(d)[0])(dense_bars)
        dense_terms = jnp.einsum("kdn,kd->kn", dense_jac, dense_flat)

        def recurse(a, inputs):
            jac, dense_term, is_live = inputs
            return jnp.where(is_live, jac.T @ a + dense_term, a), jnp.where(is_live, a, 0.0)

        a, stop_bars = jax.lax.scan(
            recurse, jax.flatten_util.ravel_pytree(y_bar)[0], (state_jac, dense_terms, live)
        )
        if not jtu.tree_leaves(params):  # only the initial state is differentiated
            return unflatten(a), params_bar
        p_bars = jax.vmap(params_pullback)(n_safe, (jax.vmap(unflatten)(stop_bars), dense_bars))
        params_bar = jtu.tree_map(
            lambda total, x: total
            + jnp.sum(jnp.where(live.reshape((-1,) + (1,) * (x.ndim - 1)), x, 0.0), axis=0),
            params_bar,
            p_bars,
        )
        return unflatten(a), params_bar

    def vjp_chunk(y_bar, params_bar, steps, dense_bars):
        """Larger models: each step's stages pulled back in turn, w.r.t. the state and the
        parameters together (one re-evaluation of the step serves both)."""

        def pull_step(carry, n, dense_bar):
            t_start, y_start = step_start(n)
            ks = None if stored_ks is None else jtu.tree_map(lambda k: k[n], stored_ks)
            p_bar, y_start_bar = _explicit_rk_step_vjp(
                solver.tableau, vector_field, t_start, t_steps[n], y_start,
                args_of, params, (carry[0], dense_bar), ks, projection,
            )  # fmt: skip
            return y_start_bar, jtu.tree_map(jnp.add, carry[1], p_bar)

        def recurse(carry, inputs):
            # `cond`: the earliest chunk's dead steps cost nothing (a `where` computed them:
            # chain30 with Dopri8, 52 steps in chunks of 8, spent 7 % of its backward on
            # them); under `vmap` it becomes that `where` again.
            n, dense_bar, is_live = inputs
            skip = lambda c, *_: c  # noqa: E731
            return jax.lax.cond(is_live, pull_step, skip, carry, n, dense_bar), None

        live = steps >= 0
        inputs = (jnp.maximum(steps, 0), dense_bars, live)
        return jax.lax.scan(recurse, (y_bar, params_bar), inputs)[0]

    def chunk_body(carry, size):
        last, y_bar, params_bar = carry
        steps = last - jnp.arange(size)  # descending; negative: before the first step
        dense_bars = jax.vmap(step_cotangent)(steps)
        pull = jacobian_chunk if small_state else vjp_chunk
        return (last - size, *pull(y_bar, params_bar, steps, dense_bars))

    # One loop body: a second loop for the remainder (a quarter chunk at a time) doubled the
    # compiled backward pass (lumped MWSM gradient compile 13.7 → 9.2 s without it) for a
    # few dead steps fewer.
    carry = (num_accepted - 1, _zeros_like_tree(y0), _zeros_like_tree(params))
    _, y0_bar, params_bar = jax.lax.while_loop(
        lambda c: c[0] >= 0, functools.partial(chunk_body, size=chunk), carry
    )
    return params_bar, y0_bar


solve_with_discrete_adjoint.def_fwd(_fwd)
solve_with_discrete_adjoint.def_bwd(_bwd)
