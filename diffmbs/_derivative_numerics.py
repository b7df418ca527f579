"""The numerical half of :func:`diffmbs.derivatives.check_derivatives`: one function's compiled
forward- and reverse-mode derivatives against the same derivatives evaluated op by op and
against central finite differences.

A :class:`Target` is a function ``fn(x, p, t) → y`` of the state inputs ``x`` (``(n_x,)``: ``q``,
or ``q`` and ``v`` concatenated), the parameter vector ``p`` (``(n_p,)``, the model's float leaves
raveled) and the time ``t`` (held fixed here), with a flat output ``y`` (``(n_out,)``). Inputs are
numbered ``0 … n_x + n_p − 1`` (state, then parameters) and named for the report.

The compiled forward derivative is ``jit(vmap(jvp))`` over the sampled states with a tangent per
state, one call per input (a one-hot tangent, so every column is attributed to its input). The
hazard this hunts depends on the primal values only, and batching the tangent basis under
``vmap`` (``jacfwd``) changes XLA's fusions enough to hide it, so the columns are not batched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

__all__ = ["Comparison", "Settings", "Target", "compare_target"]

_FLOAT_BUDGET = 2.5e7  # floats kept per Jacobian stack (samples × outputs × inputs), ~200 MB
_FD_CHUNK_FLOATS = 4e6  # floats per vectorised batch of finite-difference evaluations
_OP_BY_OP_MAX = 256  # tangents per op-by-op evaluation


class Target(NamedTuple):
    """One function to check; see the module docstring."""

    name: str
    fn: Callable[[Array, Array, Array], Array]
    uses_v: bool
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    params: Array
    time_differentiated: bool = False


class Settings(NamedTuple):
    """Sample counts and tolerances (see :func:`diffmbs.derivatives.check_derivatives`)."""

    op_by_op_samples: int
    fd_samples: int
    fd_step: float
    rtol: float
    fd_rtol: float
    floor: float
    max_inputs: int
    seed: int


@dataclasses.dataclass(frozen=True)
class Comparison:
    """The worst disagreement of one comparison of one function's derivatives.

    ``relative_error``: ``|compiled − reference|`` (less the reference's own error estimate,
    for finite differences) over the derivative's scale (see
    :func:`~diffmbs.derivatives.check_derivatives`); ``inf`` for a non-finite derivative whose
    reference is finite. ``input``/``output`` name the worst entry ``∂output/∂input`` (a reverse
    comparison's output is the random combination ``uᵀ·``); ``sample`` is the state's index
    (0 is the state given), ``q``/``v`` the state; ``compiled``/``reference`` the two values.
    ``samples``/``inputs``: how many states and inputs were compared."""

    function: str
    kind: str
    relative_error: float
    tolerance: float
    input: str
    output: str
    sample: int
    q: tuple[float, ...]
    v: tuple[float, ...]
    compiled: float
    reference: float
    samples: int
    inputs: int

    @property
    def passed(self) -> bool:
        return bool(self.relative_error <= self.tolerance)


# --------------------------------------------------------------------------- Jacobians


def _state(target: Target, qs: Array, vs: Array) -> Array:
    return jnp.concatenate([qs, vs], axis=-1) if target.uses_v else qs


def _compiled_forward(target, xs, t, columns) -> np.ndarray:
    """``(S, n_out, len(columns))``: ``jit(vmap(jvp))``, one one-hot tangent per call."""
    p = target.params

    def jvp(x, p_, dx, dp):
        return jax.jvp(lambda x_, p__: target.fn(x_, p__, t), (x, p_), (dx, dp))[1]

    run = jax.jit(jax.vmap(jvp, in_axes=(0, None, 0, 0)))
    n_s, n_x = xs.shape
    out = []
    for i in columns:
        tangent = np.zeros((n_s, n_x + p.shape[0]))
        tangent[:, i] = 1.0
        dx, dp = jnp.asarray(tangent[:, :n_x], xs.dtype), jnp.asarray(tangent[:, n_x:], p.dtype)
        out.append(np.asarray(run(xs, p, dx, dp)))
    return np.stack(out, axis=-1)


def _compiled_reverse(target, xs, t, cotangents) -> np.ndarray:
    """``(S, n_x + n_p)``: ``jit(vmap(vjp))`` with one cotangent per state."""

    def vjp(x, p_, u):
        gx, gp = jax.vjp(lambda x_, p__: target.fn(x_, p__, t), x, p_)[1](u)
        return jnp.concatenate([gx, gp])

    return np.asarray(jax.jit(jax.vmap(vjp, in_axes=(0, None, 0)))(xs, target.params, cotangents))


def _op_by_op(target, xs, t, columns) -> np.ndarray:
    """``(S, n_out, len(columns))``: forward-mode derivatives evaluated one operation at a time
    (``jax.disable_jit``; slow: every operation is compiled alone, once per shape). The tangents
    go in batches padded to a multiple of 16, so that functions of a model with nearly the same
    number of inputs share those per-operation executables (their compilation is most of the
    cost: ~0.05 s each, a few hundred for a small multibody model)."""
    n_x, p = xs.shape[1], target.params
    batch = min(_OP_BY_OP_MAX, -(-len(columns) // 16) * 16)
    basis = np.eye(n_x + p.shape[0])[np.asarray(columns)]
    basis = np.concatenate([basis, np.zeros((-len(columns) % batch, basis.shape[1]))])

    def jvp(x, dx, dp):
        return jax.jvp(lambda x_, p_: target.fn(x_, p_, t), (x, p), (dx, dp))[1]

    def tangents(b):
        return jnp.asarray(b[:, :n_x], xs.dtype), jnp.asarray(b[:, n_x:], p.dtype)

    out = []
    with jax.disable_jit():
        for x in xs:
            cols = [
                np.asarray(jax.vmap(jvp, in_axes=(None, 0, 0))(x, *tangents(b)))
                for b in np.split(basis, len(basis) // batch)
            ]
            out.append(np.concatenate(cols)[: len(columns)].T)
    return np.stack(out)


def _finite_differences(target, xs, t, columns, steps, typical):
    """Fourth-order central differences ``(S, n_out, len(columns))`` and an error estimate of
    the same shape: the distance to the second-order difference plus the round-off of the
    output over the step (so kinks and cancellation are not mistaken for errors). ``steps``
    and ``typical``: ``(len(columns),)``."""
    p = target.params
    n_s, n_x = xs.shape
    run = jax.jit(jax.vmap(lambda x, p_: target.fn(x, p_, t)))
    offsets = np.array([-2.0, -1.0, 1.0, 2.0])
    n_out = jax.eval_shape(target.fn, xs[0], p, t).shape[0]
    chunk = max(1, int(_FD_CHUNK_FLOATS // max(1, n_s * 4 * (n_x + p.shape[0] + n_out))))
    values = []
    for start in range(0, len(columns), chunk):
        cols = np.asarray(columns[start : start + chunk])
        basis = np.zeros((len(cols), n_x + p.shape[0]))
        basis[np.arange(len(cols)), cols] = steps[start : start + chunk]
        delta = offsets[None, :, None] * basis[:, None, :]  # (c, 4, n_in)
        x_pert = np.asarray(xs)[:, None, None, :] + delta[None, :, :, :n_x]
        p_pert = np.asarray(p) + delta[:, :, n_x:]
        p_pert = np.broadcast_to(p_pert, (n_s, *delta.shape[:2], p.shape[0]))
        rows = n_s * len(cols) * 4
        y = run(
            jnp.asarray(x_pert.reshape(rows, n_x), xs.dtype),
            jnp.asarray(p_pert.reshape(rows, p.shape[0]), p.dtype),
        )
        values.append(np.asarray(y).reshape(n_s, len(cols), 4, n_out))
    y = np.concatenate(values, axis=1)  # (S, n_cols, 4, n_out)
    h = steps[None, :, None]
    d2 = (y[:, :, 2] - y[:, :, 1]) / (2 * h)
    d2_wide = (y[:, :, 3] - y[:, :, 0]) / (4 * h)
    d4 = (4 * d2 - d2_wide) / 3
    # Round-off of y is ε times the size of the terms that make it up, which may cancel (a
    # constraint at an assembled state, the gyroscopic torque of a symmetric body): at least
    # |y| and the largest change of any output under a typical change of any input.
    largest = np.max(np.where(np.isfinite(d4), np.abs(d4), 0.0) * typical[None, :, None],
                     initial=0.0)  # fmt: skip
    size = np.maximum(np.max(np.abs(y), axis=2), largest)
    noise = np.abs(d4 - d2) + 10 * np.finfo(float).eps * size / h
    return np.moveaxis(d4, 1, 2), np.moveaxis(noise, 1, 2)


# --------------------------------------------------------------------------- comparisons


def _scales(reference: np.ndarray, typical: np.ndarray, floor: float) -> np.ndarray:
    """``(n_out, n_in)`` scale of each derivative entry: its largest magnitude over the samples
    plus ``floor`` times the largest change of any output under a typical change of any input
    (per unit of this input), so entries that are zero up to round-off everywhere (a gyroscopic
    torque of an isotropic body) are not judged relative to themselves."""
    mags = np.max(np.where(np.isfinite(reference), np.abs(reference), 0.0), axis=0)
    largest = np.max(mags * typical[None, :], initial=0.0)
    return mags + floor * largest / typical[None, :] + np.finfo(float).tiny


def _excess(compiled, reference, noise):
    """``|compiled − reference| − noise`` (≥ 0); ``inf`` where only the reference is finite,
    0 where the reference is not finite (nothing to compare)."""
    ok = np.isfinite(reference)
    diff = np.where(ok, np.abs(np.where(ok, compiled, 0.0) - np.where(ok, reference, 0.0)), 0.0)
    diff = np.where(ok & ~np.isfinite(compiled), np.inf, diff)
    return np.maximum(diff - np.where(ok, noise, 0.0), 0.0)


class _Context(NamedTuple):
    target: Target
    qs: np.ndarray
    vs: np.ndarray
    columns: np.ndarray


def _report(ctx, kind, tol, rel, compiled, reference, out_names) -> Comparison:
    """The :class:`Comparison` at the worst entry of ``rel`` (``(S, n_out, n_cols)``)."""
    flat = np.nan_to_num(rel, nan=0.0, posinf=np.inf)
    s, o, c = np.unravel_index(int(np.argmax(flat)), flat.shape)
    return Comparison(
        ctx.target.name, kind, float(flat[s, o, c]), tol, ctx.target.input_names[ctx.columns[c]],
        out_names[o], int(s), tuple(map(float, ctx.qs[s])), tuple(map(float, ctx.vs[s])),
        float(compiled[s, o, c]), float(reference[s, o, c]), rel.shape[0], len(ctx.columns),
    )  # fmt: skip


def _forward_comparison(ctx, kind, tol, floor, typical, compiled, reference, noise):
    scale = _scales(reference, typical, floor)
    rel = _excess(compiled, reference, noise) / scale[None]
    return _report(ctx, kind, tol, rel, compiled, reference, ctx.target.output_names)


def _reverse_comparison(ctx, kind, tol, floor, typical, reverse, jac, noise, u):
    """Reverse-mode ``uᵀJ`` against the contraction of a Jacobian stack ``jac``."""
    scale = _scales(jac, typical, floor)
    reference = np.einsum("so,soi->si", u, np.where(np.isfinite(jac), jac, np.nan))
    denom = np.einsum("so,oi->si", np.abs(u), scale)
    rel = _excess(reverse, reference, np.einsum("so,soi->si", np.abs(u), noise)) / denom
    return _report(ctx, kind, tol, rel[:, None], reverse[:, None], reference[:, None], ("uᵀ·f",))


def compare_target(
    target: Target,
    qs: Array,
    vs: Array,
    t: Array,
    typical_state: np.ndarray,
    settings: Settings,
) -> tuple[Comparison, ...]:
    """Every comparison of ``target``'s derivatives at the states ``(qs[s], vs[s])``.

    ``typical_state``: ``(n_x,)`` typical magnitudes of the state inputs (steps and scales).
    The first ``settings.op_by_op_samples`` states are evaluated op by op, the first
    ``settings.fd_samples`` by finite differences; forward against reverse uses them all."""
    xs = _state(target, qs, vs)
    n_x = xs.shape[1]
    n_in = n_x + target.params.shape[0]
    n_out = jax.eval_shape(target.fn, xs[0], target.params, t).shape[0]
    rng = np.random.default_rng(settings.seed)
    columns = np.arange(n_in)
    affordable = max(1, int(_FLOAT_BUDGET // max(1, xs.shape[0] * n_out)))
    if n_in > min(settings.max_inputs, affordable):  # a random subset, reported as such
        columns = np.sort(rng.choice(n_in, min(settings.max_inputs, affordable), replace=False))
    params = np.abs(np.asarray(target.params))
    typical = np.concatenate([typical_state, np.where(params > 0, params, 1.0)])
    typ = typical[columns]
    ctx = _Context(target, np.asarray(qs), np.asarray(vs), columns)
    fwd = _compiled_forward(target, xs, t, columns)
    rows = np.max(np.where(np.isfinite(fwd), np.abs(fwd), 0.0) * typ, axis=(0, 2))
    u = rng.standard_normal((xs.shape[0], n_out)) / np.where(rows > 0, rows, 1.0)
    rev = _compiled_reverse(target, xs, t, jnp.asarray(u))[:, columns]
    floor, tol, fd_tol = settings.floor, settings.rtol, settings.fd_rtol
    found = [
        _reverse_comparison(ctx, "forward vs reverse (both compiled)", tol, floor, typ, rev, fwd,
                            np.zeros_like(fwd), u),
    ]  # fmt: skip
    n_e = min(settings.op_by_op_samples, xs.shape[0])
    if n_e:
        eager = _op_by_op(target, xs[:n_e], t, columns)
        zero = np.zeros_like(eager)
        found += [
            _forward_comparison(ctx, "forward (compiled) vs op-by-op", tol, floor, typ,
                                fwd[:n_e], eager, zero),
            _reverse_comparison(ctx, "reverse (compiled) vs op-by-op", tol, floor, typ,
                                rev[:n_e], eager, zero, u[:n_e]),
        ]  # fmt: skip
    n_f = min(settings.fd_samples, xs.shape[0])
    if n_f:
        fd, noise = _finite_differences(target, xs[:n_f], t, columns, settings.fd_step * typ, typ)
        found += [
            _forward_comparison(ctx, "forward (compiled) vs finite differences", fd_tol, floor,
                                typ, fwd[:n_f], fd, noise),
            _reverse_comparison(ctx, "reverse (compiled) vs finite differences", fd_tol, floor,
                                typ, rev[:n_f], fd, noise, u[:n_f]),
        ]  # fmt: skip
    return tuple(found)
