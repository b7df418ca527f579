"""Dense symmetric positive-definite solves that are safe to ``vmap`` on CPU and differentiable.

Why this module exists: jaxlib 0.10's CPU LAPACK kernels split a *batched* call (``vmap`` of a
Cholesky factorisation or triangular solve) over XLA's intra-op thread pool and block on the
pieces. When as many batched calls run at once as the pool has threads (two on a 2-core
machine, e.g. two independent factorisations of one KKT solve), every pool thread waits for
work queued behind it and the program hangs for ever. ``vmap(simulate)`` of a constrained model
and the vectorised step Jacobians of :class:`diffmbs.adjoint.DiscreteAdjoint` both do this.

Here every LAPACK call sits behind :func:`jax.custom_batching.custom_vmap`: unbatched it is the
usual kernel; batched on the CPU backend it becomes a ``lax.map`` of unbatched calls (the same
kernels, one matrix at a time; no thread-pool fan-out); on GPU it is the native batched kernel.
Small batched matrices (up to :data:`UNROLL_MAX` rows) skip LAPACK on CPU: the factorisation and
the substitutions are written out in array operations vectorised over the batch.
A solve whose factor is not batched (the tangents of ``jacfwd`` share one factor) becomes one
call with the batch as extra right-hand-side columns.
``custom_vmap`` functions cannot be differentiated, so LAPACK only ever sees values without
tangents: the factor is computed from ``stop_gradient`` inputs and derivatives of the solution go
through :func:`jax.lax.custom_linear_solve` (implicit differentiation, ``ẋ = A⁻¹(ḃ − Ȧx)``,
which reuses the same factor), exactly as differentiating the LAPACK solve would.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax.custom_batching import custom_vmap
from jaxtyping import Array

__all__ = ["cho_solve", "cholesky_factor", "matvec", "spd_solve", "svd_factor", "tmatvec"]


UNROLL_MAX = 8
"""Batched matrices up to this size are factorised and solved on CPU by plain array operations
written out column by column (vectorised over the batch): no LAPACK call at all, and no
``lax.map`` of thousands of tiny calls (the vectorised adjoint of a 2-DOF model: 1.7× faster).
Larger ones are mapped one at a time: the written-out graph grows as n², and at 16 a modal
model's vectorised adjoint took 20 % longer to compile and run."""


def _cholesky_unrolled(a: Array) -> Array:
    """Lower Cholesky factor of ``a`` ``(..., n, n)`` column by column (NaN where ``a`` is not
    positive definite)."""
    n = a.shape[-1]
    below = jnp.arange(n)
    cols: list[Array] = []
    for j in range(n):
        v = a[..., :, j]
        for k in range(j):
            v = v - cols[k] * cols[k][..., j : j + 1]
        cols.append(jnp.where(below >= j, v / jnp.sqrt(v[..., j : j + 1]), 0.0))
    return jnp.stack(cols, axis=-1)


def _cho_solve_unrolled(low: Array, b: Array) -> Array:
    """``(L Lᵀ)⁻¹ b`` for ``low`` ``(n, n)`` and ``b`` ``(n,)`` or ``(n, k)``, by substitution."""
    n = low.shape[-1]
    y = b.reshape(n, -1)
    row = jnp.arange(n)[:, None]
    for i in range(n):  # L y = b
        yi = y[i] / low[i, i]
        y = jnp.where(row == i, yi, y - (low[:, i : i + 1] * (row > i)) * yi)
    for i in reversed(range(n)):  # Lᵀ x = y
        xi = y[i] / low[i, i]
        y = jnp.where(row == i, xi, y - (low[i, :, None] * (row < i)) * xi)
    return y.reshape(b.shape)


def _map_rule(fn: Callable[..., Array], wrapped: Callable[..., Array], unrolled=None):
    """``custom_vmap`` rule: on CPU ``unrolled`` (vectorised over the batch) for matrices of at
    most :data:`UNROLL_MAX` rows, else a ``lax.map`` of ``wrapped`` over the batch; elsewhere
    the native batched kernel (``vmap`` of ``fn``)."""

    def rule(axis_size, in_batched, *args):
        in_axes = tuple(0 if b else None for b in in_batched)
        if jax.default_backend() != "cpu":
            out = jax.vmap(fn, in_axes=in_axes)(*args)
            return out, jax.tree.map(lambda _: True, out)
        if unrolled is not None and args[0].shape[-1] <= UNROLL_MAX:
            return jax.vmap(unrolled, in_axes=in_axes)(*args), True
        batched = tuple(a for a, b in zip(args, in_batched, strict=True) if b)

        def one(xs):
            it = iter(xs)
            # `wrapped`, not `fn`: an enclosing vmap of this map is caught by the rule again.
            return wrapped(*(next(it) if b else a for a, b in zip(args, in_batched, strict=True)))

        out = jax.lax.map(one, batched)
        return out, jax.tree.map(lambda _: True, out)

    return rule


def _cho_solve_impl(low: Array, b: Array) -> Array:
    return jsl.cho_solve((low, True), b)


_cholesky = custom_vmap(jnp.linalg.cholesky)
_cholesky.def_vmap(_map_rule(jnp.linalg.cholesky, _cholesky, _cholesky_unrolled))
_cho_solve = custom_vmap(_cho_solve_impl)
_cho_solve_map = _map_rule(_cho_solve_impl, _cho_solve, _cho_solve_unrolled)


@_cho_solve.def_vmap
def _cho_solve_rule(axis_size, in_batched, low, b):
    if in_batched[0]:
        return _cho_solve_map(axis_size, in_batched, low, b)
    # One factor, many right-hand sides (tangents of jacfwd, say): a single call with the
    # batch as extra columns; no batched matrix, so nothing to fan out.
    cols = jnp.moveaxis(b, 0, -1)
    x = _cho_solve(low, cols.reshape(cols.shape[0], -1)).reshape(cols.shape)
    return jnp.moveaxis(x, -1, 0), True


def _svd_impl(a: Array) -> tuple[Array, Array, Array]:
    return tuple(jnp.linalg.svd(a, full_matrices=True))


_svd = custom_vmap(_svd_impl)
_svd.def_vmap(_map_rule(_svd_impl, _svd))


def svd_factor(a: Array) -> tuple[Array, Array, Array]:
    """Full SVD ``(u (m, m), s (min(m, n),), vt (n, n))`` of ``a`` ``(m, n)``, carrying no
    gradient (the solves built on it are differentiated implicitly, as :func:`spd_solve`)."""
    return _svd(jax.lax.stop_gradient(a))


def cho_solve(low: Array, b: Array) -> Array:
    """``(L Lᵀ)⁻¹ b`` for a factor ``low`` from :func:`cholesky_factor` and ``b`` ``(n,)``; no
    implicit derivative (use :func:`spd_solve` where ``a`` carries tangents)."""
    return _cho_solve(jax.lax.stop_gradient(low), b)


def matvec(m: Array, x: Array) -> Array:
    """``m x`` as an elementwise product and a sum over the last axis; broadcasts
    (``m`` ``(..., r, c)``, ``x`` ``(..., c)``). Why not ``@``: XLA on CPU runs every ``dot``
    as a separate library call, while this fuses with its neighbours — for the small matrices
    of one model evaluation (and the many more of its ``vjp``) that halves their cost."""
    return jnp.sum(m * x[..., None, :], axis=-1)


def tmatvec(m: Array, x: Array) -> Array:
    """``mᵀ x`` like :func:`matvec` (``m`` ``(..., r, c)``, ``x`` ``(..., r)``)."""
    return jnp.sum(m * x[..., :, None], axis=-2)


def cholesky_factor(a: Array) -> Array:
    """Lower Cholesky factor of the symmetric matrix ``a`` ``(n, n)``, carrying no gradient
    (NaN entries where ``a`` is not positive definite, as LAPACK reports it)."""
    return _cholesky(jax.lax.stop_gradient(a))


def spd_solve(a: Array, b: Array, low: Array | None = None) -> Array:
    """``a⁻¹ b`` for symmetric positive-definite ``a`` ``(n, n)`` and ``b`` ``(n,)``.

    ``low``: ``cholesky_factor(a)`` if already computed. Differentiable in ``a`` and ``b`` in
    forward and reverse mode (implicitly, through the same factor).
    """
    low = cholesky_factor(a) if low is None else jax.lax.stop_gradient(low)
    return jax.lax.custom_linear_solve(
        lambda x: matvec(a, x), b, solve=lambda _, r: _cho_solve(low, r), symmetric=True
    )
