"""``diffmbs sweep``: a job's parameter sets run in batches on every device of every process,
written as one table (CSV and Parquet) and a picture, resumable after a kill.

Several processes (machines, or processes on one machine) join with
``jax.distributed.initialize`` (:func:`join_processes`); each computes its devices' rows of
every chunk (:func:`identification.sweep`) and keeps its finished rows in
``<out>/sweep_chunks/``; process 0 writes the results. The processes must share the output
folder.
"""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs.io import atomic_write, write_csv_atomic
from identification import grid_values, sample_values, sweep

from ._problem_job import _job, problem_from_job
from ._schema import Job

__all__ = ["join_processes", "run_sweep_job"]

LOSS_COLUMN = "loss_dB2"


def join_processes(coordinator: str, processes: int, process_id: int) -> None:
    """Join a run of ``processes`` processes (``jax.distributed.initialize``) through the
    coordinator ``host:port`` (process 0 listens there). Call before any JAX computation."""
    if not 0 <= process_id < processes:
        raise ValueError(f"--process-id: {process_id} is not in 0 … {processes - 1}")
    jax.distributed.initialize(coordinator, num_processes=processes, process_id=process_id)


def run_sweep_job(
    job: Job | str | Path, out_dir, *, resume: bool = False, progress: bool = True
) -> Path:
    """The misfit (with measured data) or the SRS of every experiment (without) at the
    parameter sets of ``[sweep]``, in batches of ``chunk_size`` over every device (of every
    joined process). Process 0 writes ``sweep.csv`` and ``sweep.parquet`` (one row per set:
    the parameters in SI, then ``loss_dB2`` or one column per experiment and frequency) and
    ``sweep.png``; finished rows stay in ``sweep_chunks/`` for ``resume``. Returns the
    CSV's path."""
    job = _job(job)
    out_dir = Path(out_dir)
    measured = all(e.srs_path is not None for e in job.experiments)
    problem = problem_from_job(job, measured=measured)
    space, design = problem.space, job.sweep
    if design.design == "grid":
        values = grid_values(space, design.samples)
    else:
        values = sample_values(space, design.samples, method=design.design, seed=design.seed)
    output = "loss" if measured else "predictions"
    result = sweep(problem, values, output=output, chunk_size=design.chunk_size,
                   checkpoint=out_dir / "sweep_chunks", resume=resume,
                   progress=progress)  # fmt: skip
    columns = [f"{name} [{p.units or 'SI'}]" for name, p in zip(space.names, space.parameters,
                                                                 strict=True)]  # fmt: skip
    data = list(values.T)
    if measured:
        columns.append(LOSS_COLUMN)
        data.append(result)
    else:
        for name, srs in result.items():
            freqs = problem.experiment(name).abscissa
            columns += [f"{name} {f:.6g} Hz [{job.srs.units}]" for f in freqs]
            data += list(np.asarray(srs).T / job.srs.scale)
    csv = out_dir / "sweep.csv"
    if jax.process_index() == 0:
        write_csv_atomic(csv, columns, data)
        write_parquet_atomic(out_dir / "sweep.parquet", columns, data)
        if measured:
            plot_losses(out_dir / "sweep.png", values, np.asarray(result), space)
        else:
            plot_spectra(out_dir / "sweep.png", problem, result, job.srs.units, job.srs.scale)
    return csv


def write_parquet_atomic(path: Path, header: list[str], columns: list[np.ndarray]) -> Path:
    """Equal-length float64 columns as a Parquet file (Apache Arrow's writer), atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pairs = zip(header, columns, strict=True)
    table = pa.table({name: np.asarray(c, dtype=np.float64) for name, c in pairs})
    return atomic_write(path, lambda tmp: pq.write_table(table, str(tmp)))


def plot_losses(path: Path, values: np.ndarray, losses: np.ndarray, space) -> Path:
    """The misfit against each parameter (one panel each; log axes for log-scaled ones), the
    best set marked: which parameters shape the misfit, and where its valley lies."""
    p = values.shape[1]
    cols = min(p, 3)
    rows = -(-p // cols)
    fig = _figure((4.2 * cols, 3.2 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    finite = np.isfinite(losses)
    best = int(np.argmin(np.where(finite, losses, np.inf))) if finite.any() else None
    panels = zip(list(axes.flat)[:p], space.names, space.parameters, strict=True)
    for j, (ax, name, prm) in enumerate(panels):
        ax.scatter(values[finite, j], losses[finite], s=8, alpha=0.6)
        if best is not None:
            ax.scatter(values[best, j], losses[best], s=60, marker="*", color="C3", label="best")
        ax.set_xscale("log" if prm.log_scale else "linear")
        ax.set_yscale("log")
        ax.set_xlabel(f"{name} [{prm.units or 'SI'}]")
        ax.set_ylabel("misfit (dB²)")
    for ax in list(axes.flat)[p:]:
        ax.set_visible(False)
    failed = int((~finite).sum())
    fig.suptitle(f"sweep: {len(losses)} sets" + (f", {failed} failed" if failed else ""))
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))


def plot_spectra(path: Path, problem, spectra: dict, units: str, scale: float) -> Path:
    """Each experiment's simulated SRS over the sweep: its median and its 5–95 % and min–max
    bands against frequency."""
    fig = _figure((5.0 * len(spectra), 3.6))
    axes = fig.subplots(1, len(spectra), squeeze=False)
    for ax, (name, srs) in zip(axes.flat, spectra.items(), strict=True):
        freqs = problem.experiment(name).abscissa
        srs = np.asarray(srs) / scale
        ax.fill_between(freqs, np.nanmin(srs, 0), np.nanmax(srs, 0), alpha=0.2, label="min–max")
        ax.fill_between(freqs, *np.nanpercentile(srs, [5, 95], axis=0), alpha=0.4,
                        label="5–95 %")  # fmt: skip
        ax.plot(freqs, np.nanmedian(srs, 0), label="median")
        ax.set(xscale="log", yscale="log", xlabel="frequency (Hz)", ylabel=f"SRS ({units})",
               title=name)  # fmt: skip
        ax.legend(fontsize=8)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png"))


def _figure(size: tuple[float, float]) -> Figure:
    """A figure on its own Agg canvas: no pyplot, so no global state (a notebook's backend
    stays as it was) and nothing to close."""
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig
