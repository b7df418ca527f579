"""Shared test configuration."""

import jax
import pytest


@pytest.fixture(autouse=True, scope="module")
def _drop_compiled_programs():
    """Free each module's compiled programs when it ends. A worker that compiles hundreds of
    programs otherwise approaches the kernel's memory-map limit (``vm.max_map_count``), where
    LLVM fails with "Unable to allocate section memory" (seen in a long benchmark process)."""
    yield
    jax.clear_caches()
