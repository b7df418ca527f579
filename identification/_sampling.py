"""Space-filling samples over the parameters' box, and multi-start ranking.

:func:`multistart` samples starting points (Latin hypercube or Halton) and ranks them by one
vmapped evaluation of the loss; :func:`batched_loss` is that evaluation, in fixed-size chunks so
that one compiled program serves any number of points.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike

from identification._parameters import ParameterSpace
from identification._problem import Problem, batched_loss_rows

__all__ = ["Starts", "batched_loss", "halton", "latin_hypercube", "multistart", "sample_values"]


def latin_hypercube(n: int, d: int, seed: int | np.random.Generator = 0) -> np.ndarray:
    """Latin hypercube sample of ``n`` points in ``(0, 1)^d``, shape ``(n, d)``: along every
    dimension each of the ``n`` equal bins holds exactly one point (placed at random inside the
    middle 90 % of its bin, so no point lies on a bin edge or on the cube's boundary)."""
    if n < 1 or d < 1:
        raise ValueError(f"need n >= 1 and d >= 1, got {n}, {d}")
    rng = np.random.default_rng(seed)
    u = np.empty((n, d))
    for j in range(d):
        u[:, j] = (rng.permutation(n) + rng.uniform(0.05, 0.95, n)) / n
    return u


_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79)


def halton(n: int, d: int, seed: int = 0) -> np.ndarray:
    """The Halton sequence in ``(0, 1)^d`` (bases 2, 3, 5, …), points ``seed + 1 … seed + n``,
    shape ``(n, d)``; at most 22 dimensions."""
    if d > len(_PRIMES):
        raise ValueError(f"halton supports at most {len(_PRIMES)} dimensions, got {d}")
    out = np.empty((n, d))
    for j in range(d):
        base = _PRIMES[j]
        for i in range(n):
            k, f, x = i + 1 + seed, 1.0, 0.0
            while k > 0:
                f /= base
                x += f * (k % base)
                k //= base
            out[i, j] = x
    return out


def sample_values(
    space: ParameterSpace, n: int, *, method: str = "lhs", seed: int = 0
) -> np.ndarray:
    """``n`` parameter sets in SI, shape ``(n, p)``, spread uniformly over each parameter's
    sampling box (``log θ`` between the bounds for ``"log"`` and ``"log_bounded"``, ``θ`` for
    ``"linear"`` and ``"bounded"``; see :meth:`Parameter.sampling_box`). ``method``: ``"lhs"``,
    ``"halton"`` or ``"sobol"`` (scrambled Sobol' points, SciPy's; ``n`` a power of 2, which
    keeps their balance)."""
    d = len(space)
    if method == "lhs":
        u = latin_hypercube(n, d, seed)
    elif method == "halton":
        u = halton(n, d, seed)
    elif method == "sobol":
        if n < 1 or n & (n - 1):
            raise ValueError(f"Sobol' points keep their balance only in powers of 2; got n = {n}")
        from scipy.stats import qmc  # a dependency of jax

        u = qmc.Sobol(d, scramble=True, seed=seed).random_base2(n.bit_length() - 1)
    else:
        raise ValueError(f"method must be 'lhs', 'halton' or 'sobol', got {method!r}")
    return space.from_box(u)


class Starts(NamedTuple):
    """Result of :func:`multistart`: the ``n_best`` best points ``z`` ``(n_best, p)`` and their
    ``loss`` ``(n_best,)`` (ascending), and every sample ``samples`` ``(n, p)`` with ``losses``
    ``(n,)`` (non-finite losses are ``inf``)."""

    z: np.ndarray
    loss: np.ndarray
    samples: np.ndarray
    losses: np.ndarray


def batched_loss(problem: Problem, zs: ArrayLike, *, batch_size: int = 256) -> np.ndarray:
    """The loss at every row of ``zs`` ``(n, p)``, shape ``(n,)``; non-finite losses (failed
    simulations) become ``inf``.

    Rows are evaluated ``batch_size`` at a time in one ``jax.vmap`` (lockstep integration), the
    last chunk padded by repeating its first row, so a single compiled program of batch
    ``min(n, batch_size)`` serves every call with the same chunk shape (the generations of a
    global search, for one). ``batch_size`` bounds the memory: the batch's states and saved
    outputs live at once."""
    zs = np.asarray(zs, dtype=np.float64)
    if zs.ndim != 2 or zs.shape[1] != problem.n_parameters:
        raise ValueError(f"zs must have shape (n, {problem.n_parameters}), got {zs.shape}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = len(zs)
    size = min(n, batch_size)
    out = np.empty(n)
    for start in range(0, n, size):
        chunk = zs[start : start + size]
        padded = np.concatenate([chunk, np.repeat(chunk[:1], size - len(chunk), axis=0)])
        losses = batched_loss_rows(problem, jnp.asarray(padded))
        out[start : start + len(chunk)] = np.asarray(losses)[: len(chunk)]
    return np.where(np.isfinite(out), out, math.inf)


def multistart(
    problem: Problem,
    n_starts: int,
    *,
    method: str = "lhs",
    seed: int = 0,
    n_best: int = 1,
) -> Starts:
    """Sample ``n_starts`` points over the parameters' bounds (:func:`sample_values`), evaluate
    the loss at all of them in one ``jax.vmap``, and return the ``n_best`` best, to be refined
    with :func:`fit` (``z0=starts.z[i]``)."""
    if not 1 <= n_best <= n_starts:
        raise ValueError(f"need 1 <= n_best <= n_starts, got {n_best} and {n_starts}")
    values = sample_values(problem.space, n_starts, method=method, seed=seed)
    zs = np.asarray(problem.space.to_unconstrained(values))
    losses = batched_loss(problem, zs)
    order = np.argsort(losses, kind="stable")[:n_best]
    return Starts(zs[order], losses[order], zs, losses)
