"""Checkpoint files shared by the fit loop, the global search and the posterior sampler: one
``.npz`` with a JSON ``meta`` record, the leaves of a state pytree (``leaf_<i>``) and any named
arrays, written atomically (:func:`diffmbs.io.atomic_write`), so a reader sees the old file or
the complete new one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import numpy as np

from diffmbs.io import atomic_write

__all__ = ["load_npz", "save_npz"]


def save_npz(path: Path, meta: dict, state: Any, **arrays) -> None:
    """Write ``meta`` (JSON-able; ``n_leaves`` is added), the array leaves of ``state`` and
    ``arrays`` to ``path`` atomically."""
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(state)]
    record = np.array(json.dumps({**meta, "n_leaves": len(leaves)}))
    payload = {f"leaf_{i}": x for i, x in enumerate(leaves)}

    def write(tmp: Path) -> None:
        with open(tmp, "xb") as f:
            np.savez(f, meta=record, **{k: np.asarray(v) for k, v in arrays.items()}, **payload)

    atomic_write(path, write)


def load_npz(path: Path) -> tuple[dict, list[np.ndarray], dict[str, np.ndarray]]:
    """``(meta, state leaves, named arrays)`` of a file written by :func:`save_npz`."""
    with np.load(path) as data:
        meta = json.loads(str(data["meta"]))
        leaves = [np.array(data[f"leaf_{i}"]) for i in range(meta["n_leaves"])]
        named = {k: np.array(data[k]) for k in data.files
                 if k != "meta" and not k.startswith("leaf_")}  # fmt: skip
    return meta, leaves, named
