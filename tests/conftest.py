"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing).

The session's xdist workers and the notebooks' kernels share one on-disk JAX compilation cache
(under ``.pytest_cache``): many programs (the lumped MWSM's, the 3-D machine's forward run) are
compiled in more than one process, and XLA's compile is most of their cost. Environment
variables, so that the kernels, started as subprocesses, inherit them."""

import os
from pathlib import Path

import jax
import pytest

import diffmbs

os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".pytest_cache" / "jax")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "1")
# jax may be imported before this file (by a plugin), after it read its environment
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs",
                  float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
diffmbs.configure()

SLOW = os.environ.get("DIFFMBS_SLOW_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """``slow`` tests (checks another test already makes on a cheaper case) run only with
    ``DIFFMBS_SLOW_TESTS=1`` (``make test-slow``)."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: DIFFMBS_SLOW_TESTS=1 (make test-slow) runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
