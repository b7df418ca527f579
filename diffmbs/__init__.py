"""diffmbs: differentiable multibody dynamics in JAX for parameter identification.

Importing diffmbs changes no global setting. Call :func:`diffmbs.configure` once, before the
first JAX computation: it switches JAX to float64 (simulation and fitting need it; ``simulate``
and the SRS refuse float32 with a message saying so) and adds two XLA CPU options
(:func:`diffmbs._settings.cpu_flags`). The command line does this itself.

Known issue (jaxlib 0.10, CPU): batched LAPACK calls can deadlock XLA's thread pool; the
equations of motion avoid them (:mod:`diffmbs._linalg`).
"""

from diffmbs import contact, selection, srs
from diffmbs._settings import configure
from diffmbs.derivatives import (
    DerivativeCheckError,
    DerivativeReport,
    check_derivatives,
)
from diffmbs.integrate import (
    ForwardSensitivity,
    RosenbrockW,
    SimulationError,
    SimulationOptions,
    Solution,
    SolverPhases,
    simulate,
    simulate_batch,
)
from diffmbs.srs import octave_frequencies, shock_response_spectrum
from diffmbs.system import MechanicalSystem

__version__ = "0.1.0"
__all__ = [
    "configure",
    "DerivativeCheckError",
    "DerivativeReport",
    "ForwardSensitivity",
    "MechanicalSystem",
    "RosenbrockW",
    "SimulationError",
    "Solution",
    "check_derivatives",
    "contact",
    "octave_frequencies",
    "selection",
    "shock_response_spectrum",
    "SimulationOptions",
    "SolverPhases",
    "simulate",
    "simulate_batch",
    "srs",
]
