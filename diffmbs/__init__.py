"""diffmbs: differentiable multibody dynamics in JAX for parameter identification.

Importing diffmbs switches JAX to float64 (``jax_enable_x64``): simulation and fitting run in
double precision.

It also sets two XLA CPU options, appended to ``XLA_FLAGS`` unless it already names them (they
take effect when diffmbs is imported before JAX's first computation):

* ``--xla_cpu_multi_thread_eigen=false``: one thread per kernel. Simulations are long chains of
  small operations, where the intra-op thread pool only adds synchronisation (gradients ran
  1.5× faster without it); parallelism comes from ``vmap`` batches and devices instead.
* on jaxlib 0.10, ``--xla_cpu_experimental_ynn_fusion_type=``: small reductions stay out of
  YNNPACK (see ``_xla_cpu_flags``).

Known issue (jaxlib 0.10, CPU): batched LAPACK calls can deadlock XLA's thread pool; the
equations of motion avoid them (:mod:`diffmbs._linalg`).
"""

import importlib.metadata
import os


def _xla_cpu_flags() -> list[str]:
    flags = ["--xla_cpu_multi_thread_eigen=false"]
    try:
        jaxlib = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        jaxlib = ""
    # jaxlib 0.10 hands small reductions to YNNPACK fusions, 2–7× slower than XLA's own loops on
    # these float64 graphs (the pose Jacobian of a 30-link chain: 1.0 ms → 0.14 ms; `make demo`
    # 12 % faster). The flag is experimental: set only where it is known to exist, since XLA
    # aborts on unknown flags.
    if jaxlib.startswith("0.10."):
        flags.append("--xla_cpu_experimental_ynn_fusion_type=")
    return flags


for _flag in _xla_cpu_flags():
    if _flag.split("=")[0].lstrip("-") not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
del _flag

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

from diffmbs import contact, selection, srs  # noqa: E402
from diffmbs.derivatives import (  # noqa: E402
    DerivativeCheckError,
    DerivativeReport,
    check_derivatives,
)
from diffmbs.integrate import (  # noqa: E402
    SimulationError,
    SimulationOptions,
    Solution,
    simulate,
    simulate_batch,
)
from diffmbs.srs import octave_frequencies, shock_response_spectrum  # noqa: E402
from diffmbs.system import MechanicalSystem  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "DerivativeCheckError",
    "DerivativeReport",
    "MechanicalSystem",
    "SimulationError",
    "Solution",
    "check_derivatives",
    "contact",
    "octave_frequencies",
    "selection",
    "shock_response_spectrum",
    "SimulationOptions",
    "simulate",
    "simulate_batch",
    "srs",
]
