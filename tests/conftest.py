"""The test session opts in to diffmbs's global settings (float64, XLA CPU options), as a
program using diffmbs does once at its start (``import diffmbs`` alone changes nothing); it
shares small compiled programs between workers through a persistent cache, and keeps each worker
below the kernel's limit on memory regions (``diffmbs._settings.MAX_MEMORY_REGIONS``)."""

import os
from pathlib import Path

import pytest

# One persistent XLA compilation cache for the session's workers and the processes they start
# (set before JAX is imported: it reads these at import); a fresh checkout starts with it empty,
# and `make clean` removes it. It holds the smaller programs only: JAX stores no program with a
# host callback, and every simulation has one (diffrax's check of its save times), so a
# simulation, a fit's loss or its Jacobian is compiled again in each process (ARCHITECTURE.md).
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR", str(Path(__file__).resolve().parents[1] / "build" / "jax-cache")
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.5")

# The suite's XLA options (compile_options.py), set before JAX starts; subprocesses inherit it.
from compile_options import SUITE_XLA_FLAGS  # noqa: E402

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {SUITE_XLA_FLAGS}".strip()


import diffmbs  # noqa: E402
from diffmbs._settings import release_compiled_programs  # noqa: E402

diffmbs.configure()


def pytest_runtest_teardown(item, nextitem):
    # a worker keeps the programs of every test it ran: past the kernel's limit on memory
    # regions it would crash inside the compiler (CI saw one 81 % into the suite)
    release_compiled_programs()


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
