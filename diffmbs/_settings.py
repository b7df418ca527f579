"""Global JAX settings diffmbs needs, applied only when the user opts in (layer 0).

``import diffmbs`` changes nothing global. :func:`configure` switches JAX to float64 (simulation
and fitting need double precision: contact stiffnesses of 1e10 N/m^1.5 and drifts of 1e-10 m do
not fit in float32) and adds two XLA CPU options. The command line calls it; scripts and
notebooks call it once, before their first JAX computation. Entry points that would silently lose
accuracy in float32 (``simulate``, ``simulate_batch``, the SRS) check :func:`require_float64`.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import warnings

import jax

__all__ = ["configure", "cpu_flags", "release_compiled_programs", "require_float64"]


def cpu_flags() -> list[str]:
    """The XLA CPU options :func:`configure` adds:

    * ``--xla_cpu_multi_thread_eigen=false``: one thread per kernel. Simulations are long chains
      of small operations, where the intra-op thread pool only adds synchronisation (gradients
      ran 1.5× faster without it); parallelism comes from ``vmap`` batches and devices instead.
    * on jaxlib 0.10, ``--xla_cpu_experimental_ynn_fusion_type=``: small reductions stay out of
      YNNPACK, 2–7× slower than XLA's own loops on these float64 graphs (the pose Jacobian of a
      30-link chain: 1.0 ms → 0.14 ms; ``make demo`` 12 % faster). Experimental: set only where
      it is known to exist, since XLA aborts on unknown flags.
    """
    flags = ["--xla_cpu_multi_thread_eigen=false"]
    try:
        jaxlib = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        jaxlib = ""
    if jaxlib.startswith("0.10."):
        flags.append("--xla_cpu_experimental_ynn_fusion_type=")
    return flags


def _backend_started() -> bool:
    from jax._src import xla_bridge  # private: no public "has the backend started" query

    return bool(getattr(xla_bridge, "_backends", {}))


def configure(*, float64: bool = True, xla_cpu_flags: bool = True) -> None:
    """Opt in to diffmbs's global settings: ``jax_enable_x64`` and :func:`cpu_flags` (appended
    to ``XLA_FLAGS`` unless already named there). Call it before the first JAX computation: the
    XLA options are read when the backend starts (a warning says so when it is too late; float64
    takes effect for arrays created afterwards either way)."""
    if float64:
        jax.config.update("jax_enable_x64", True)
    if xla_cpu_flags:
        current = os.environ.get("XLA_FLAGS", "")
        missing = [f for f in cpu_flags() if f.split("=")[0].lstrip("-") not in current]
        if missing and _backend_started():
            warnings.warn(
                "diffmbs.configure: JAX's backend has already started, so the XLA CPU options "
                f"{' '.join(missing)} take no effect; call configure() before computing",
                stacklevel=2,
            )
        elif missing:
            os.environ["XLA_FLAGS"] = " ".join([current, *missing]).strip()


def require_float64(where: str) -> None:
    """Raise if JAX runs in float32: ``where`` would silently lose accuracy."""
    if not jax.config.jax_enable_x64:
        raise RuntimeError(
            f"{where}: diffmbs computes in float64; call diffmbs.configure() at the start of the "
            "program (or set JAX_ENABLE_X64=1)"
        )


MAX_MEMORY_REGIONS = 30_000
"""Memory regions past which :func:`release_compiled_programs` drops JAX's compiled programs.

XLA's CPU backend maps each compiled kernel's code and data into memory regions of the process
(a 3-D shock-machine simulation maps ~2,800, its static equilibrium ~6,500), and Linux refuses a
process more than ``vm.max_map_count`` regions (65,530 by default): past it the compiler fails
inside LLVM ("Cannot allocate memory") or the process crashes. Programs stay alive in the jit
caches of every function compiled so far, so a long fit (a batched global search, then the
Jacobians of its refinements) can reach the limit in one process."""


def _memory_regions() -> int:
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:  # not Linux: no such limit to keep clear of
        return 0


def release_compiled_programs(max_regions: int = MAX_MEMORY_REGIONS) -> bool:
    """Drop every compiled JAX program (``jax.clear_caches``) when this process maps more than
    ``max_regions`` memory regions (see :data:`MAX_MEMORY_REGIONS`); returns whether it did.
    Called at the start of every global search and local fit and before a fit job's
    sensitivities; what is needed again is recompiled."""
    if _memory_regions() <= max_regions:
        return False
    jax.clear_caches()
    gc.collect()
    return True
