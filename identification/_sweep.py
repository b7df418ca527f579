"""Batched forward runs over many parameter sets (``jax.vmap``, chunked, over the devices).

``sweep(problem, values)`` evaluates every experiment's prediction (or residuals, or the loss)
for each row of ``values`` (shape ``(n, p)``, SI). Rows are processed in chunks of
``chunk_size`` (the last chunk is padded by repeating its final row, so one compiled function
serves every chunk), which bounds memory. With several devices (GPUs, CPU devices from
``XLA_FLAGS=--xla_force_host_platform_device_count=N``, or the devices of several processes
joined by ``jax.distributed.initialize``), each chunk is split into equal shares, one per
device, the chunk size rounded up to a multiple of the device count; each device runs its share
as a batch of its own (its own compiled program, dispatched in turn: GPUs run them at once, CPU
devices take turns, so on CPUs several processes are the way to several cores), each process
keeps its devices' rows, and the processes exchange them once, at the end (an all-gather, over
Gloo on CPUs). Not ``shard_map``: the models' linear solves (``lineax``, in the static
equilibrium and the joint reactions) refuse its sharded vectors (lineax issue #185). Not one
sharded ``vmap`` either: the batched adaptive solver's loop runs until every row is done, so
each of its steps would wait on all the devices (measured 5× slower than one device on two CPU
devices). Finished rows can be kept in a folder, so that a killed sweep resumes where it
stopped.

Helpers make the parameter sets: :func:`grid_values` (a full factorial grid, evenly spaced in
each parameter's sampling coordinate, bounds included) and :func:`lhs_values` (a Latin
hypercube, see :func:`~identification.sample_values`).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jaxtyping import Array, ArrayLike
from tqdm.auto import tqdm

from identification._checkpoint import load_npz, save_npz
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
    """``_one`` over the rows of ``values``, in one ``jax.vmap``."""
    return jax.vmap(lambda v: _one(problem, v, output))(values)


class _ChunkFiles:
    """Each process's finished rows of each chunk, ``chunk_<k>_p<i>.npz`` in ``folder`` (row
    indices and results, written atomically, so a kill leaves whole files only). Each carries
    the sweep's identity (parameters, experiments, output, chunk size, process count and a
    hash of the parameter sets): resuming a different sweep is refused, naming what differs."""

    def __init__(self, folder: Path, identity: dict):
        self.folder, self.identity = folder, identity

    def path(self, k: int, process: int) -> Path:
        return self.folder / f"chunk_{k:05d}_p{process}.npz"

    def finished(self, n_chunks: int, processes: int) -> np.ndarray:
        """Chunks whose files exist for every process."""
        done = np.zeros(n_chunks, dtype=bool)
        for k in range(n_chunks):
            paths = [self.path(k, i) for i in range(processes)]
            for path in paths:
                if path.exists():
                    meta = load_npz(path)[0]
                    for key, value in self.identity.items():
                        if meta.get(key) != value:
                            raise ValueError(
                                f"checkpoint {path}: {key} {meta.get(key)!r} differs from this "
                                f"sweep's {value!r} (remove the folder to start over)"
                            )
            done[k] = all(path.exists() for path in paths)
        return done

    def clear(self) -> None:
        for path in self.folder.glob("chunk_*.npz"):
            path.unlink()

    def save(self, k: int, piece: dict[str, np.ndarray]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        save_npz(self.path(k, jax.process_index()), self.identity, None, **piece)

    def load(self, k: int) -> dict[str, np.ndarray]:
        return load_npz(self.path(k, jax.process_index()))[2]


def _identity(problem: Problem, values: np.ndarray, output: str, chunk_size: int) -> dict:
    return {
        "format": "identification.sweep chunk v2",
        "parameters": list(problem.space.names),
        "experiments": [e.name for e in problem.experiments],
        "output": output,
        "chunk_size": int(chunk_size),
        "processes": jax.process_count(),
        "values_sha256": hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest(),
    }


def sweep(
    problem: Problem,
    values_batch: ArrayLike,
    *,
    output: Literal["predictions", "residuals", "loss"] = "predictions",
    chunk_size: int = 64,
    devices: Sequence[jax.Device] | None = None,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = False,
) -> dict[str, np.ndarray] | np.ndarray:
    """Evaluate ``problem`` at each parameter set.

    Args:
        problem: the problem (its experiments' models and data).
        values_batch: parameter sets, SI, shape ``(n, p)``, columns in ``problem.space`` order.
        output: ``"predictions"`` (experiment name → ``(n, n_i)`` predicted curves),
            ``"residuals"`` (name → ``(n, m_i)`` weighted residuals) or ``"loss"`` (``(n,)``).
        chunk_size: rows per chunk, split equally among the devices (memory bound); rounded
            up to a multiple of the number of devices.
        devices: devices to split each chunk among; default ``jax.devices()``: every device of
            every process. In a multi-process run (``jax.distributed.initialize``) every
            process calls ``sweep`` with the same arguments and computes its devices' rows of
            each chunk; the rows are gathered once, at the end, so every process receives the
            whole result.
        checkpoint: folder for the finished rows (``chunk_<k>_p<i>.npz``, each process its
            own); with several processes it must be one folder that all of them see.
        resume: skip the chunks already in ``checkpoint`` (it must hold this same sweep, with
            as many processes); without it a sweep starts over.
        progress: a progress bar over the chunks (process 0).

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
    devices = list(jax.devices() if devices is None else devices)
    processes = len({d.process_index for d in devices})
    n = values.shape[0]
    share = -(-min(chunk_size, n) // len(devices))  # rows per device in each chunk
    chunk_size = share * len(devices)
    mine = [(j, d) for j, d in enumerate(devices) if d.process_index == jax.process_index()]
    n_chunks = -(-n // chunk_size)
    files = None
    done = np.zeros(n_chunks, dtype=bool)
    if checkpoint is not None:
        files = _ChunkFiles(Path(checkpoint), _identity(problem, values, output, chunk_size))
        if jax.process_index() == 0:
            if resume:
                done = files.finished(n_chunks, processes)
            else:
                files.clear()
        if processes > 1:  # every process skips the same chunks, after process 0 has cleared
            done = np.asarray(multihost_utils.broadcast_one_to_all(done))
    pieces = []  # this process's rows: {"rows": global indices (−1: padding), leaf: values}
    chunks = tqdm(range(n_chunks), desc="sweep", unit="chunk", initial=0,
                  disable=not progress or jax.process_index() != 0)  # fmt: skip
    for k in chunks:
        if done[k]:
            pieces.append(files.load(k))
            continue
        chunk = values[k * chunk_size : (k + 1) * chunk_size]
        rows = chunk.shape[0]
        if rows < chunk_size:
            chunk = np.concatenate([chunk, np.repeat(chunk[-1:], chunk_size - rows, axis=0)])
        results = [(j, _batched(problem, jax.device_put(chunk[j * share : (j + 1) * share], d),
                                output)) for j, d in mine]  # fmt: skip
        piece = _own_rows(results, k * chunk_size, share, n)
        if files is not None:
            files.save(k, piece)
        pieces.append(piece)
    own = {key: np.concatenate([piece[key] for piece in pieces]) for key in pieces[0]}
    if processes > 1:  # one gather for the whole sweep (equal shapes: padding included)
        own = {key: np.asarray(multihost_utils.process_allgather(x, tiled=True))
               for key, x in own.items()}  # fmt: skip
    order = np.argsort(own["rows"], kind="stable")
    order = order[own["rows"][order] >= 0]
    merged = {key: x[order] for key, x in own.items() if key != "rows"}
    return merged[_LOSS] if output == "loss" else merged


_LOSS = "__loss__"


def _as_dict(result) -> dict:
    return result if isinstance(result, dict) else {_LOSS: result}


def _own_rows(results: list, first: int, share: int, n: int) -> dict[str, np.ndarray]:
    """This process's rows of a chunk (``results``: (device's place j in the device list, its
    share's result), in the chunk's order), with their global indices under ``"rows"`` (−1
    for the padding past ``n``)."""
    out: dict[str, list] = {"rows": []}
    for j, result in results:
        index = first + j * share + np.arange(share)
        out["rows"].append(np.where(index < n, index, -1))
        for key, x in _as_dict(result).items():
            out.setdefault(key, []).append(np.asarray(x))
    return {key: np.concatenate(parts) for key, parts in out.items()}


def grid_values(space: ParameterSpace, n_per_dim: int | Sequence[int]) -> np.ndarray:
    """Full factorial grid, shape ``(Π nᵢ, p)``, SI: ``nᵢ`` points per parameter evenly
    spaced in its sampling coordinate (``ln θ`` for ``"log"`` and ``"log_bounded"``, ``θ``
    otherwise), bounds included; the last parameter varies fastest."""
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
