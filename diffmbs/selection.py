"""Differentiable selections (max, min, clip, hypot) whose tangents never test float equality.

Why not ``jnp.maximum`` & co. in differentiated code: JAX's JVP of ``lax.max``/``lax.min`` — and so
of ``jnp.maximum``, ``jnp.minimum``, ``jnp.clip``, ``jnp.hypot`` and of the ``reduce_max``/
``reduce_min`` behind ``jnp.max``, ``x.max(axis)`` and ``jnp.amax`` — hands the tangent to the
operand that is *bit-equal* to the result (``x == max(x, y)``; half to each at a tie). Under
``jit``, XLA may copy the cheap producers of an operand (``sin``, ``cos``, ``mul``, ``add``) into
several fusions, and on FMA-capable CPUs the copies can differ in the last bit. Then neither
operand equals the result and the tangent is silently dropped (or halved). Whether it happens
depends on how XLA fuses the whole program: a function can be right alone and wrong inside a
simulation. (``jit(jvp(hypot∘legs))`` of Andrews' squeezer was wrong at 62 of 2000 random
angles, by up to 200 %.)

The functions here choose a tangent with one comparison of the operands instead: whichever copy
of the operands the comparison sees, one operand's whole tangent is taken. Where two copies
disagree, the operands are equal to within rounding, and either one-sided derivative is valid.
Values are those of the ``jnp`` functions (NaN propagates). At an exact tie, ``maximum(a, b)``
takes ``a``'s tangent and ``minimum(a, b)`` takes ``b``'s. So the pair
``(maximum(a, b), minimum(a, b))`` always carries ``(ȧ, ḃ)`` or ``(ḃ, ȧ)``, and a function of
both is differentiated as if ``a > b``. ``jnp.abs``, ``jnp.sort``, ``jnp.logaddexp`` (so
``jax.nn.softplus``), ``jax.nn.relu`` and ``jax.scipy.special.logsumexp`` are safe as they are:
their JVPs select on the operand's sign or order, or use no selection (``logsumexp``'s max is a
``stop_gradient``ed shift).

Use these in any model code that is differentiated (force laws, user laws, losses). Inputs are
arrays or scalars of any real dtype (integers become floats) and any unit; the result is in the
unit of the inputs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import Array
from jax.typing import ArrayLike

__all__ = ["clip", "hypot", "max", "maximum", "min", "minimum"]


def _floats(*xs: ArrayLike) -> list[Array]:
    """The arguments as arrays of one common real floating dtype (no broadcasting)."""
    dtype = jnp.result_type(*xs)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        raise TypeError("diffmbs.selection: complex values have no ordering")
    if not jnp.issubdtype(dtype, jnp.floating):
        dtype = jnp.result_type(dtype, float)
    return [jnp.asarray(x, dtype=dtype) for x in xs]


@jax.custom_jvp
def _maximum(a: Array, b: Array) -> Array:
    return jnp.maximum(a, b)


@_maximum.defjvp
def _maximum_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    return jnp.maximum(a, b), jnp.where(a >= b, da, db)


@jax.custom_jvp
def _minimum(a: Array, b: Array) -> Array:
    return jnp.minimum(a, b)


@_minimum.defjvp
def _minimum_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    return jnp.minimum(a, b), jnp.where(a < b, da, db)


@jax.custom_jvp
def _hypot(a: Array, b: Array) -> Array:
    return jnp.hypot(a, b)


@_hypot.defjvp
def _hypot_jvp(primals, tangents):
    (a, b), (da, db) = primals, tangents
    h = _hypot(a, b)
    positive = h > 0
    h_safe = jnp.where(positive, h, 1.0)
    return h, jnp.where(positive, (a / h_safe) * da + (b / h_safe) * db, 0.0)


def maximum(a: ArrayLike, b: ArrayLike) -> Array:
    """Elementwise ``max(a, b)``, broadcast shape; the tangent is ``ȧ`` where ``a ≥ b``, else
    ``ḃ`` (values bit-equal to ``jnp.maximum``)."""
    return _maximum(*_floats(a, b))


def minimum(a: ArrayLike, b: ArrayLike) -> Array:
    """Elementwise ``min(a, b)``, broadcast shape; the tangent is ``ȧ`` where ``a < b``, else
    ``ḃ`` (values bit-equal to ``jnp.minimum``)."""
    return _minimum(*_floats(a, b))


def clip(x: ArrayLike, lo: ArrayLike | None = None, hi: ArrayLike | None = None) -> Array:
    """``x`` limited to ``[lo, hi]`` (either bound may be None), broadcast shape; as
    ``jnp.clip``, ``hi`` wins where ``lo > hi``. The tangent is ``ẋ`` inside the interval (and at
    ``x = lo``), ``lȯ`` below it, ``hi̇`` above it (and at ``x = hi``)."""
    out = x
    if lo is not None:
        out = maximum(out, lo)
    if hi is not None:
        out = minimum(out, hi)
    return _floats(out)[0]


def hypot(a: ArrayLike, b: ArrayLike) -> Array:
    """``√(a² + b²)`` without overflow or underflow (``jnp.hypot``'s value), broadcast shape.

    Tangent ``(a ȧ + b ḃ) / h``, formed as ``(a/h) ȧ + (b/h) ḃ`` (no overflow); 0 at
    ``h = 0``, where the norm has no derivative (as :func:`diffmbs.rotations.safe_norm`).
    """
    return _hypot(*_floats(a, b))


def _reduce(x: ArrayLike, axis: int | None, keepdims: bool, arg) -> Array:
    (x,) = _floats(x)
    if axis is None:
        flat = x.reshape(-1)
        out = jnp.take_along_axis(flat, arg(flat, axis=0, keepdims=True), axis=0)
        return out.reshape((1,) * x.ndim) if keepdims else out.reshape(())
    out = jnp.take_along_axis(x, arg(x, axis=axis, keepdims=True), axis=axis)
    return out if keepdims else jnp.squeeze(out, axis=axis)


def max(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Array:
    """Largest entry of ``x`` along ``axis`` (None: all entries), the shape of ``jnp.max``'s.

    Written as a gather at ``jnp.argmax``: the index is an integer with no derivative, and the
    tangent is the gather of ``ẋ`` at that same index, so it is one entry's whole tangent; no
    float result is compared with anything. At a tie, the first of the equal entries (as
    ``argmax``); NaN propagates.
    """
    return _reduce(x, axis, keepdims, jnp.argmax)


def min(x: ArrayLike, axis: int | None = None, keepdims: bool = False) -> Array:
    """Smallest entry of ``x`` along ``axis`` (None: all entries): :func:`max` with ``argmin``."""
    return _reduce(x, axis, keepdims, jnp.argmin)
