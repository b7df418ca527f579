"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing).

The session's xdist workers and the notebooks' kernels share one on-disk JAX compilation cache
(under ``.pytest_cache``): many programs (the lumped MWSM's, the 3-D machine's forward run) are
compiled in more than one process, and XLA's compile is most of their cost. Environment
variables, so that the kernels, started as subprocesses, inherit them."""

import os
from pathlib import Path

os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "2")

import diffmbs  # noqa: E402

diffmbs.configure()
