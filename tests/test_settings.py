"""Global settings are opt-in (issue 20): ``import diffmbs`` leaves JAX alone,
``diffmbs.configure()`` sets float64 and the XLA CPU options, and float32 is refused by name."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import diffmbs
from diffmbs import _settings
from diffmbs._settings import cpu_flags, release_compiled_programs

PROBE = """
import json, os, jax
import diffmbs, diffmbs.multibody, diffmbs.wear, diffmbs.app, identification
from diffmbs._settings import _backend_started
before = {"x64": jax.config.jax_enable_x64, "flags": os.environ.get("XLA_FLAGS", ""),
          "backend": _backend_started()}
diffmbs.configure()
after = {"x64": jax.config.jax_enable_x64, "flags": os.environ.get("XLA_FLAGS", "")}
print(json.dumps([before, after]))
"""


def test_import_changes_nothing_and_configure_opts_in():
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         check=True)  # fmt: skip
    before, after = json.loads(out.stdout.strip().splitlines()[-1])
    assert before == {"x64": False, "flags": "", "backend": False}  # no array made at import
    assert after["x64"] is True
    assert after["flags"].split() == cpu_flags()


def test_float32_is_refused_with_the_fix_named():
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(RuntimeError, match=r"simulate: diffmbs computes in float64; call "
                                               r"diffmbs.configure\(\)"):  # fmt: skip
            diffmbs.simulate(None, jnp.zeros(1), jnp.zeros(1), jnp.zeros(2))
        with pytest.raises(RuntimeError, match="shock_response_spectrum: diffmbs computes"):
            diffmbs.shock_response_spectrum(jnp.zeros(100), 1e-4, [10.0, 100.0])
    finally:
        diffmbs.configure()
    assert jax.config.jax_enable_x64


def test_compiled_programs_are_dropped_only_past_the_memory_region_limit(monkeypatch):
    @jax.jit
    def double(x):
        return 2.0 * x

    double(jnp.ones(3))
    assert double._cache_size() == 1
    regions = _settings._memory_regions()
    if sys.platform.startswith("linux"):  # /proc/self/maps: this process maps many regions
        assert regions > 100
    assert not release_compiled_programs(max_regions=regions + 10_000)
    assert double._cache_size() == 1
    monkeypatch.setattr(_settings, "_memory_regions", lambda: 70_000)
    assert release_compiled_programs()
    assert double._cache_size() == 0
