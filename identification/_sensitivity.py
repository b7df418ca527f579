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
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs.io import atomic_write, write_csv_atomic
from identification._kernels import residual_rows_kernel, residuals_jacobian_kernel
from identification._problem import (
    Problem,
    central_differences,
    difference_rows,
    experiment_blocks,
)

__all__ = ["band_sensitivity", "save_identifiability", "save_sensitivity", "srs_sensitivity"]


def _unweighted(experiment):
    """``experiment`` with unit weights: an array leaf, so the compiled kernels still serve it,
    and its residuals are then ``SRS_dB − measured_dB`` (dB experiments) or
    ``(prediction − measured) / scale``."""
    if not hasattr(experiment, "weights"):
        return experiment  # a user's experiment without weights: its residuals as they are
    return eqx.tree_at(lambda e: e.weights, experiment, jnp.ones_like(experiment.weights))


def srs_sensitivity(
    problem: Problem, z: ArrayLike | None = None, *, jacobian: ArrayLike | None = None
) -> dict[str, np.ndarray]:
    """``∂ SRS_dB / ∂ ln θ`` per experiment, each of shape ``(n_freq, p)`` (dB per unit
    ``ln θ``); ``z`` defaults to ``problem.initial_z``. See the module docstring.

    Computed with the fit's own compiled Jacobian kernels (one per experiment structure,
    differentiated in the SI values ``v``, so ``v ∂/∂v`` is ``∂/∂ ln θ``): after a fit nothing
    is compiled again. ``jacobian``: the weighted ``∂r/∂z`` ``(m, p)`` at ``z`` if already
    known (:attr:`FitResult.jacobian_z`): an experiment whose weights and ``∂θ/∂z`` are all
    non-zero is then rescaled from it instead of simulated again."""
    z = problem.initial_z if z is None else jnp.asarray(z, dtype=float)
    values = np.asarray(problem.values(z))
    slopes = np.asarray(problem.space.dvalues_dz(z))
    if jacobian is not None and np.shape(jacobian) != (problem.n_residuals, problem.n_parameters):
        jacobian = None  # another problem's (a fit with parameters held)
    out = {}
    named = zip(experiment_blocks(problem), problem.experiment_names, strict=True)
    for (e, indices, paths), name in named:
        block = None if jacobian is None else _rescaled(
            np.asarray(jacobian)[problem.residual_slices[name]], e, values, slopes, indices)
        if block is None:
            block = _log_sensitivities(problem, _unweighted(e), paths, values, indices)
        out[name] = block if e.in_db else block * getattr(e, "scale", 1.0)
    return out


def _log_sensitivities(problem, experiment, paths, values, indices) -> np.ndarray:
    """``∂r/∂ ln θ`` ``(m_e, p)`` of one experiment (zero in the parameters not at ``indices``)
    at the parameters' ``values`` ``(p,)``: forward or reverse mode, or central differences
    over ``θ e^(±difference_step)``."""
    own = values[indices]
    if problem.jac == "differences":
        h = problem.difference_step
        rows = own * np.exp(np.asarray(difference_rows(jnp.zeros(len(own)), h)))
        jac = central_differences(residual_rows_kernel(experiment, paths, rows), h)[1]
    else:
        jac = residuals_jacobian_kernel(experiment, paths, own, problem.jac)[1] * own
    block = np.zeros((jac.shape[0], problem.n_parameters))
    block[:, indices] = np.asarray(jac)
    return block


def _rescaled(jac_z, experiment, values, slopes, indices) -> np.ndarray | None:
    """``∂r_unweighted/∂ ln θ`` from the weighted ``∂r/∂z`` rows of one experiment, or None
    where that cannot be undone (a zero weight, a parameter pinned where ``∂θ/∂z = 0``)."""
    weights = np.ravel(np.asarray(getattr(experiment, "weights", np.ones(jac_z.shape[0]))))
    if weights.shape != (jac_z.shape[0],) or np.any(weights == 0) or np.any(slopes[indices] == 0):
        return None
    block = np.zeros_like(jac_z)
    block[:, indices] = jac_z[:, indices] / weights[:, None] * (values / slopes)[indices]
    return block


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


def band_sensitivity(
    problem: Problem, sensitivities: dict[str, np.ndarray], per_octave: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Where in frequency each parameter acts: the rms of ``∂ SRS_dB / ∂ ln θ`` over the
    frequencies of every dB experiment in each band (``per_octave`` bands per octave, the
    edges at powers of two times 1 Hz), the largest over the experiments. Returns the bands'
    ``(lower, upper)`` edges (Hz, ``(n_bands, 2)``) and the table ``(p, n_bands)`` (dB per unit
    ln θ); bands no experiment samples are left out."""
    freqs = [np.asarray(e.abscissa) for e in problem.experiments if e.in_db]
    if not freqs:
        raise ValueError("band_sensitivity: no experiment is an SRS in dB")
    lo = np.floor(per_octave * np.log2(min(f.min() for f in freqs)))
    hi = np.ceil(per_octave * np.log2(max(f.max() for f in freqs)))
    edges = 2.0 ** (np.arange(lo, hi + 1) / per_octave)
    table = np.zeros((problem.n_parameters, len(edges) - 1))
    sampled = np.zeros(len(edges) - 1, dtype=bool)
    for e in problem.experiments:
        if not e.in_db:
            continue
        f, sens = np.asarray(e.abscissa), np.asarray(sensitivities[e.name])
        band = np.clip(np.searchsorted(edges, f, side="right") - 1, 0, len(edges) - 2)
        for b in np.unique(band):
            rms = np.sqrt(np.mean(sens[band == b] ** 2, axis=0))
            table[:, b] = np.where(rms > table[:, b], rms, table[:, b])
            sampled[b] = True
    return np.stack([edges[:-1], edges[1:]], axis=1)[sampled], table[:, sampled]


def save_identifiability(
    directory: str | Path, names: list[str], bands: np.ndarray, table: np.ndarray,
    relative_std: np.ndarray | None = None,
) -> dict[str, Path]:
    """``identifiability.csv`` (one row per band: its edges, then each parameter's rms
    sensitivity) and ``identifiability.png``: the table as a map (parameters × bands, dB per
    unit ln θ, log colours), beside the fitted relative standard deviations when given (log
    axis; ∞ — not identifiable — drawn at the right edge in grey), atomically."""
    from matplotlib.colors import LogNorm

    directory = Path(directory)
    paths = {"csv": write_csv_atomic(directory / "identifiability.csv",
                                     ["band_lower_hz", "band_upper_hz", *names],
                                     [bands[:, 0], bands[:, 1], *table])}  # fmt: skip
    panels = 2 if relative_std is not None else 1
    fig = Figure(figsize=(5.0 + 3.5 * panels, 1.2 + 0.45 * len(names)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, panels, squeeze=False, sharey=True,
                        width_ratios=[3, 1.4][:panels])[0]  # fmt: skip
    positive = table[table > 0]
    floor = max(positive.max() * 1e-4, positive.min()) if positive.size else 1e-6
    image = axes[0].imshow(np.where(table > floor, table, floor), aspect="auto", cmap="viridis",
                           norm=LogNorm(vmin=floor, vmax=max(floor * 10, table.max())))  # fmt: skip
    axes[0].set_xticks(range(len(bands)), [f"{np.sqrt(a * b):.3g}" for a, b in bands],
                       rotation=60, fontsize="small")  # fmt: skip
    axes[0].set_yticks(range(len(names)), names)
    axes[0].set_xlabel("band centre (Hz)")
    axes[0].set_title("where each parameter moves the SRS")
    fig.colorbar(image, ax=axes[0], label="rms ∂SRS_dB/∂ln θ (dB)")
    if relative_std is not None:
        rel = np.asarray(relative_std, dtype=float)
        finite = np.isfinite(rel)
        right = max(1.0, 3 * rel[finite].max()) if finite.any() else 10.0
        axes[1].barh(range(len(names)), np.where(finite, rel, right),
                     color=["C0" if ok else "0.7" for ok in finite])  # fmt: skip
        axes[1].axvline(1.0, color="C3", linestyle="--", linewidth=1)
        axes[1].set_xscale("log")
        axes[1].set_xlabel("relative std (grey: not identifiable)")
        axes[1].set_title("how well the fit pins it")
    paths["png"] = atomic_write(directory / "identifiability.png",
                                lambda tmp: fig.savefig(tmp, dpi=120))  # fmt: skip
    return paths
