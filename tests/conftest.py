"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing); it
shares compiled programs between workers through a persistent cache, and keeps each worker
below the kernel's limit on memory regions (see ``MAX_MEMORY_REGIONS``)."""

import gc
import os
from pathlib import Path

import pytest

# One persistent XLA compilation cache for the session's workers and the processes they start
# (set before JAX is imported: it reads these at import). Many tests compile the same programs
# (the lumped machine's simulation, a fit's loss and Jacobian) in different processes; a fresh
# checkout starts with it empty, and `make clean` removes it.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / "build" / "jax-cache")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

# The suite's XLA options (compile_options.py), set before JAX starts; subprocesses inherit it.
from compile_options import SUITE_XLA_FLAGS  # noqa: E402

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {SUITE_XLA_FLAGS}".strip()

import jax  # noqa: E402

import diffmbs  # noqa: E402

diffmbs.configure()

# XLA's CPU backend maps each live compiled program's code and data into ~3 memory regions of
# the process, and Linux refuses a process more than vm.max_map_count (65,530 by default)
# regions: a worker that keeps ~20,000 programs alive then crashes inside the compiler
# (a segmentation fault; CI saw one 81 % into the suite). Programs stay alive in the jit caches
# of every function compiled so far, so past this many regions a worker drops them all
# (recompiling what it needs again, mostly from the persistent cache above).
MAX_MEMORY_REGIONS = 30_000


def _memory_regions() -> int:
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux: no such limit to keep clear of
        return 0


def pytest_runtest_teardown(item, nextitem):
    if _memory_regions() > MAX_MEMORY_REGIONS:
        jax.clear_caches()
        gc.collect()


SLOW = os.environ.get("DIFFMBS_SLOW_TESTS") == "1"


def pytest_collection_modifyitems(config, items):
    """``long`` tests (a minute or so each, alone in their xdist scope) go first, so that
    xdist's scheduler, which hands out scopes in this order after the groups, does not leave
    one worker running a long test while the other idles at the end. ``slow`` tests (checks
    another test already makes on a cheaper case) run only with ``DIFFMBS_SLOW_TESTS=1``
    (``make test-slow``)."""
    items.sort(key=lambda item: "long" not in item.keywords)  # stable: same order everywhere
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: DIFFMBS_SLOW_TESTS=1 (make test-slow) runs it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
