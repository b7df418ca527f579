"""Small helpers shared by the benchmark scripts: timing, machine info, JSON output, tables.

Nothing here is specific to one benchmark. Times are wall-clock seconds from
``time.perf_counter``; every timed call waits for its JAX result with ``block_until_ready`` so
asynchronous dispatch does not make a call look faster than it is.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "Tracker",
    "block_until_ready",
    "first_call",
    "limit_cores",
    "machine_info",
    "markdown_table",
    "pass_fail",
    "print_table",
    "time_interleaved",
    "time_median",
    "utc_timestamp",
    "write_json_atomic",
]


def block_until_ready(x: Any) -> Any:
    """Wait until every JAX array in the pytree ``x`` is computed; return ``x``.

    Non-JAX leaves (NumPy arrays, floats, ``None``) are passed through unchanged, so the same
    helper can time NumPy/SciPy reference code.
    """
    try:
        import jax
    except ImportError:  # pragma: no cover - benchmarks of pure NumPy code
        return x
    return jax.block_until_ready(x)


def first_call(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn()`` once (e.g. the first call of a jitted function: trace + compile + run).

    Returns ``(seconds, result)``, the result already blocked on.
    """
    t0 = time.perf_counter()
    out = block_until_ready(fn())
    return time.perf_counter() - t0, out


def time_median(fn: Callable[[], Any], *, repeats: int = 7, warmup: int = 1) -> dict[str, Any]:
    """Median wall time of ``fn()`` over ``repeats`` calls after ``warmup`` untimed calls.

    Each call is blocked on (``block_until_ready``) before the clock stops. Returns a dict with
    ``median_s``, ``min_s``, ``max_s``, ``repeats``, ``warmup`` and all ``times_s``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        block_until_ready(fn())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "repeats": repeats,
        "warmup": warmup,
        "times_s": times,
    }


def time_interleaved(
    fns: dict[str, Callable[[], Any]], *, repeats: int = 7, warmup: int = 1
) -> dict[str, dict[str, Any]]:
    """Like :func:`time_median` for several functions, called in turn within each repeat.

    On a shared machine the load drifts over seconds; interleaving puts every function under
    the same drift, so ratios between them (gradient / forward) are fairer than from two
    separate timing runs. Returns ``{name: time_median-style dict}``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        for fn in fns.values():
            block_until_ready(fn())
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            block_until_ready(fn())
            times[name].append(time.perf_counter() - t0)
    return {
        name: {
            "median_s": statistics.median(ts),
            "min_s": min(ts),
            "max_s": max(ts),
            "repeats": repeats,
            "warmup": warmup,
            "times_s": ts,
        }
        for name, ts in times.items()
    }


def limit_cores(n: int | None) -> list[int] | None:
    """Restrict this process to ``n`` of its usable CPU cores (Linux ``sched_setaffinity``).

    Must run before JAX's CPU backend starts (the first computation): XLA sizes its thread
    pool from the cores the process may use. With ``n = 1`` XLA runs single-threaded, which
    for small models is faster than its 2-thread pool on a 2-core machine (see
    benchmarks/README.md). Returns the cores now used, or ``None`` when ``n`` is ``None``.
    """
    if n is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise SystemExit("--cores needs os.sched_setaffinity (Linux)")
    usable = sorted(os.sched_getaffinity(0))
    if not 1 <= n <= len(usable):
        raise SystemExit(f"--cores must be between 1 and {len(usable)}, got {n}")
    os.sched_setaffinity(0, usable[:n])
    return usable[:n]


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """Where the numbers were measured: CPU, cores, OS, Python and library versions, JAX device."""
    info: dict[str, Any] = {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "versions": {
            name: _version(name) for name in ("jax", "jaxlib", "numpy", "scipy", "equinox")
        },
        "env": {k: os.environ[k] for k in ("XLA_FLAGS", "JAX_PLATFORMS") if k in os.environ},
    }
    if hasattr(os, "sched_getaffinity"):
        info["usable_cores"] = len(os.sched_getaffinity(0))
    try:
        import jax

        info["jax_backend"] = jax.default_backend()
        info["jax_devices"] = [str(d) for d in jax.devices()]
        info["jax_device_kind"] = jax.devices()[0].device_kind
        info["jax_enable_x64"] = bool(jax.config.jax_enable_x64)
    except Exception as exc:  # noqa: BLE001 - machine info must never stop a benchmark
        info["jax_error"] = repr(exc)
    return info


def utc_timestamp() -> str:
    """Current time, ISO 8601 in UTC, to the second."""
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat()


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (temp file in the same folder + os.replace).

    Parent folders are created. A reader never sees a half-written file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, allow_nan=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub-flavoured Markdown table; cells are converted with ``str``, columns padded."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def pass_fail(ok: bool) -> str:
    """``"PASS"`` or ``"FAIL"`` for a bar."""
    return "PASS" if ok else "FAIL"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print :func:`markdown_table` to stdout."""
    print(markdown_table(headers, rows))


class Tracker:
    """Counts the simulations of a derivative-free search and records when its best loss
    first reaches ``target``: :meth:`record` takes the losses of one call, each costing
    ``simulations_per_loss`` simulations (one per experiment of the problem)."""

    def __init__(self, target: float, simulations_per_loss: int = 1):
        self.target, self.simulations, self.best = target, 0, np.inf
        self.per_loss = simulations_per_loss
        self.reached_at: int | None = None
        self.t0 = time.perf_counter()
        self.reached_seconds: float | None = None
        self.best_history: list[tuple[int, float]] = []  # (simulations, best loss) per call

    def record(self, losses) -> None:
        losses = np.atleast_1d(np.asarray(losses, dtype=float))
        for value in losses:
            self.simulations += self.per_loss
            self.best = min(self.best, value if np.isfinite(value) else np.inf)
            if self.reached_at is None and self.best <= self.target:
                self.reached_at = self.simulations
                self.reached_seconds = time.perf_counter() - self.t0
        self.best_history.append((self.simulations, float(self.best)))
