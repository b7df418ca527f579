"""diffmbs: differentiable multibody dynamics in JAX for parameter identification.

Importing diffmbs switches JAX to float64 (``jax_enable_x64``): simulation and fitting run in
double precision.
"""

import jax

jax.config.update("jax_enable_x64", True)

from diffmbs import contact, srs  # noqa: E402
from diffmbs.integrate import SimulationError, Solution, simulate  # noqa: E402
from diffmbs.srs import octave_frequencies, shock_response_spectrum  # noqa: E402
from diffmbs.system import MechanicalSystem  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "MechanicalSystem",
    "SimulationError",
    "Solution",
    "contact",
    "octave_frequencies",
    "shock_response_spectrum",
    "simulate",
    "srs",
]
