"""Batched forward runs over many parameter sets (``jax.vmap``, chunked, optionally sharded).

``sweep(problem, values)`` evaluates every experiment's prediction (or residuals, or the loss)
for each row of ``values`` (shape ``(n, p)``, SI). Rows are processed in chunks of
``chunk_size`` (the last chunk is padded by repeating its final row, so one compiled function
serves every chunk), which bounds memory. With several local devices (GPUs, or CPU devices from
``XLA_FLAGS=--xla_force_host_platform_device_count=N``), each chunk is sharded across them along
the batch axis (``jax.sharding.NamedSharding``) and the chunk size rounded up to a multiple of
the device count.

Helpers make the parameter sets: :func:`grid_values` (a full factorial grid, evenly spaced in
each parameter's sampling coordinate, bounds included) and :func:`lhs_values` (a Latin
hypercube, see :func:`~identification.sample_values`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from identification._parameters import ParameterSpace
from identification._problem import Problem
from identification._sampling import sample_values

__all__ = ["grid_values", "lhs_values", "sweep"]


def _one(problem: Problem, values: Array, output: str):
    if output == "loss":
        return jnp.mean(
            jnp.concatenate(
                [
                    jnp.ravel(e.residuals(problem.space.apply(e.model, values, e.name)))
                    for e in problem.experiments
                ]
            )
            ** 2
        )
    out = {}
    for e in problem.experiments:
        model = problem.space.apply(e.model, values, e.name)
        out[e.name] = e.predict(model) if output == "predictions" else e.residuals(model)
    return out


@eqx.filter_jit
def _batched(problem: Problem, values: Array, output: str):
    return jax.vmap(lambda v: _one(problem, v, output))(values)


def sweep(
    problem: Problem,
    values_batch: ArrayLike,
    *,
    output: Literal["predictions", "residuals", "loss"] = "predictions",
    chunk_size: int = 64,
    devices: Sequence[jax.Device] | None = None,
) -> dict[str, np.ndarray] | np.ndarray:
    """Evaluate ``problem`` at each parameter set.

    Args:
        problem: the problem (its experiments' models and data).
        values_batch: parameter sets, SI, shape ``(n, p)``, columns in ``problem.space`` order.
        output: ``"predictions"`` (experiment name → ``(n, n_i)`` predicted curves),
            ``"residuals"`` (name → ``(n, m_i)`` weighted residuals) or ``"loss"`` (``(n,)``).
        chunk_size: rows per compiled batch (memory bound).
        devices: devices to shard each chunk over; default all local devices.

    Failed simulations give NaN rows (see :mod:`identification._experiments`).
    """
    if output not in ("predictions", "residuals", "loss"):
        raise ValueError(f"output must be 'predictions', 'residuals' or 'loss', got {output!r}")
    values = np.asarray(values_batch, dtype=np.float64)
    p = problem.n_parameters
    if values.ndim != 2 or values.shape[1] != p:
        raise ValueError(f"values_batch must have shape (n, {p}), got {values.shape}")
    if values.shape[0] == 0:
        raise ValueError("values_batch is empty")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    devices = list(jax.local_devices() if devices is None else devices)
    sharding = None
    if len(devices) > 1:
        chunk_size = -(-chunk_size // len(devices)) * len(devices)
        mesh = jax.sharding.Mesh(np.array(devices), ("batch",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
    n = values.shape[0]
    chunk_size = min(chunk_size, n) if sharding is None else chunk_size
    pieces = []
    for start in range(0, n, chunk_size):
        chunk = values[start : start + chunk_size]
        rows = chunk.shape[0]
        if rows < chunk_size:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], chunk_size - rows, axis=0)])
        batch = jnp.asarray(chunk) if sharding is None else jax.device_put(chunk, sharding)
        result = _batched(problem, batch, output)
        pieces.append(jax.tree_util.tree_map(lambda x, k=rows: np.asarray(x)[:k], result))
    return jax.tree_util.tree_map(lambda *xs: np.concatenate(xs, axis=0), *pieces)


def grid_values(space: ParameterSpace, n_per_dim: int | Sequence[int]) -> np.ndarray:
    """Full factorial grid, shape ``(Π nᵢ, p)``, SI: ``nᵢ`` points per parameter evenly
    spaced in its sampling coordinate (``ln θ`` for ``"log"``, ``θ`` otherwise), bounds
    included; the last parameter varies fastest."""
    counts = [n_per_dim] * len(space) if isinstance(n_per_dim, int) else list(n_per_dim)
    if len(counts) != len(space) or min(counts) < 1:
        raise ValueError(f"n_per_dim must be a positive int or {len(space)} positive ints")
    axes = []
    for prm, k in zip(space.parameters, counts, strict=True):
        lo, hi = prm.sampling_box()
        s = np.linspace(lo, hi, k) if k > 1 else np.array([0.5 * (lo + hi)])
        axes.append(np.exp(s) if prm.log_scale else s)
    return np.array(list(itertools.product(*axes)), dtype=np.float64).reshape(-1, len(space))


def lhs_values(space: ParameterSpace, n: int, *, seed: int = 0) -> np.ndarray:
    """Latin hypercube over the parameters' bounds, shape ``(n, p)``, SI."""
    return sample_values(space, n, method="lhs", seed=seed)
