"""Scaled sensitivities of the predicted spectra to the parameters.

``srs_sensitivity(problem, z)[name][k, j] = ∂ SRS_dB(f_k) / ∂ ln θ_j`` — how many dB the
predicted spectrum of experiment ``name`` at its ``k``-th frequency moves per unit change of
``ln θ_j`` (so a 1 % increase of ``θ_j`` moves it by about ``0.01 ×`` that). Computed by
autodiff (forward mode for ``Problem(jac="fwd")``) with respect to ``s`` in ``θ = θ₀ eˢ`` at
``s = 0``, i.e. ``θ ∂/∂θ``, directly in the model's parameters and not through the fitting
transforms: it stays finite for a parameter pinned at a bound of a ``"bounded"`` or
``"log_bounded"`` transform, where ``∂z/∂ ln θ`` is infinite. For ``"linear"`` parameters
it is the scaled sensitivity ``θ ∂/∂θ``, also defined for ``θ ≤ 0``. Parameters that do not
apply to an experiment have zero columns. For experiments whose misfit is not in dB, the
sensitivity is of the prediction itself, in its unit, ``∂ y / ∂ ln θ``.

Columns of similar shape mean parameters the spectrum cannot tell apart (see also the
correlations of :class:`~identification.FitResult`).
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs import selection
from diffmbs.io import atomic_write, write_csv_atomic
from identification._problem import Problem

__all__ = ["save_sensitivity", "srs_sensitivity"]


@eqx.filter_jit
def _jacobians(problem: Problem, values: Array) -> dict[str, Array]:
    """``∂ level / ∂s`` at ``s = 0`` with the parameters set to ``values · eˢ``."""
    out = {}
    for e in problem.experiments:

        def level(s, e=e):
            model = problem.space.apply(e.model, values * jnp.exp(s), e.name)
            pred = e.predict(model)
            if e.in_db:
                return 20.0 * jnp.log10(selection.maximum(pred, jnp.finfo(pred.dtype).tiny))
            return pred

        s0 = jnp.zeros_like(values)
        out[e.name] = jax.jacfwd(level)(s0) if problem.jac == "fwd" else jax.jacrev(level)(s0)
    return out


def srs_sensitivity(problem: Problem, z: ArrayLike | None = None) -> dict[str, np.ndarray]:
    """``∂ SRS_dB / ∂ ln θ`` per experiment, each of shape ``(n_freq, p)`` (dB per unit
    ``ln θ``); ``z`` defaults to ``problem.initial_z``. See the module docstring."""
    z = problem.initial_z if z is None else jnp.asarray(z, dtype=float)
    jacs = _jacobians(problem, problem.values(z))
    return {name: np.asarray(j) for name, j in jacs.items()}


def save_sensitivity(
    directory: str | Path,
    problem: Problem,
    sensitivities: dict[str, np.ndarray],
) -> dict[str, Path]:
    """Write, for each experiment, ``sensitivity_<name>.csv`` (first column the abscissa, e.g.
    ``frequency_hz``, then one column per parameter, dB per unit ln θ) and
    ``sensitivity_<name>.png`` (the columns against frequency), atomically. Returns label →
    path."""
    directory = Path(directory)
    names = list(problem.space.names)
    paths: dict[str, Path] = {}
    for e in problem.experiments:
        sens = np.asarray(sensitivities[e.name])
        x = np.asarray(e.abscissa)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in e.name)
        x_name = "frequency_hz" if e.in_db else "x"
        paths[f"csv_{e.name}"] = write_csv_atomic(
            directory / f"sensitivity_{safe}.csv",
            [x_name, *names],
            [x, *[sens[:, j] for j in range(sens.shape[1])]],
        )
        fig = Figure(figsize=(8.0, 5.0), layout="constrained")
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        for j, n in enumerate(names):
            if np.any(sens[:, j] != 0):
                ax.plot(x, sens[:, j], marker="o", markersize=3, label=n)
        if e.in_db and np.all(x > 0):
            ax.set_xscale("log")
        ax.axhline(0.0, color="black", linewidth=0.6)
        ax.set_xlabel(e.abscissa_label)
        unit = "dB" if e.in_db else e.units
        ax.set_ylabel(f"∂ level / ∂ ln θ ({unit})")
        ax.set_title(f"{e.name}: scaled sensitivities")
        ax.grid(True, which="both", alpha=0.4)
        ax.legend(loc="best", fontsize="small")
        paths[f"png_{e.name}"] = atomic_write(
            directory / f"sensitivity_{safe}.png", lambda tmp, f=fig: f.savefig(tmp, dpi=120)
        )
    return paths
