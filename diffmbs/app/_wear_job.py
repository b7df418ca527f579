"""``diffmbs wear``: the wear of a job's model over ``[wear] cycles``, and the measured wear
profiles of ``diffmbs fit`` (:class:`~identification.WearProfileExperiment`).

A profile file is a CSV with a header and two columns: the angle on the surface in degrees
(``angle_deg``, from the body frame's x̂ about the surface's axis, as
:class:`~diffmbs.multibody.WearingClearance` measures it) and the profile in micrometres
(``radius_um``: for the bore its radius minus the journal's nominal radius, clearance and
worn depth; for the journal its loss of radius).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from diffmbs.io import atomic_write, write_csv_atomic
from diffmbs.wear import predict_wear, wear_element
from identification import WearProfileExperiment

from ._schema import ExperimentSpec, Job, load_job
from ._tables import ConfigError

__all__ = ["add_wear_command", "profile_experiment", "read_profile_csv", "run_wear_job"]

PROFILE_COLUMNS = ("angle_deg", "radius_um")


def read_profile_csv(path: Path, where: str) -> tuple[np.ndarray, np.ndarray]:
    """``(angles rad (n,), profile m (n,))`` from a profile file (module docstring); a
    :class:`ConfigError` names the column or row at fault."""
    try:
        table = np.genfromtxt(path, delimiter=",", names=True, dtype=float, encoding="utf-8")
    except ValueError as err:
        raise ConfigError(f"{where}: {path.name}: {err}") from None
    names = table.dtype.names or ()
    missing = [c for c in PROFILE_COLUMNS if c not in names]
    if missing:
        raise ConfigError(f"{where}: {path.name} has the columns {', '.join(names) or 'none'}; "
                          f"expected {', '.join(PROFILE_COLUMNS)}")  # fmt: skip
    table = np.atleast_1d(table)
    for column in PROFILE_COLUMNS:
        bad = ~np.isfinite(table[column])
        if bad.any():
            row = int(np.argmax(bad))
            raise ConfigError(f"{where}: {path.name} row {row + 1}: {column} is not a finite "
                              "number")  # fmt: skip
    if table.size < 2:
        raise ConfigError(f"{where}: {path.name} needs two rows or more")
    return np.radians(table["angle_deg"]), 1e-6 * table["radius_um"]


def profile_experiment(job: Job, i: int, spec: ExperimentSpec, options: dict):
    """The measured profile of ``job.experiments[i]`` as a
    :class:`~identification.WearProfileExperiment` over ``[wear] updates`` equal updates."""
    wear = job.wear
    angles, measured = read_profile_csv(spec.profile_path, f"experiments[{i}].profile")
    try:
        return WearProfileExperiment(
            spec.name, spec.model, wear.element, angles, measured, period=wear.period_s,
            schedule=wear.schedule(), surface=spec.profile_surface,
            settle_cycles=wear.settle_cycles, cycles_per_update=wear.cycles_per_update,
            simulate_kwargs=options,
        )  # fmt: skip
    except ValueError as err:
        raise ConfigError(f"experiments[{i}]: {err}") from None


def run_wear_job(job: Job | str | Path, out_dir, *, progress: bool = True) -> dict:
    """Wear the first experiment's model over ``[wear] cycles`` by
    :func:`~diffmbs.wear.predict_wear` (its step control); write into ``out_dir``
    ``profile.csv`` (angle, worn depth of the bore and of the journal after the last update,
    µm), ``wear_history.csv`` (cycles, deepest point and worn volume of each surface),
    ``wear.png`` and ``result.json`` — with ``[[parameters]]``, the gradient of the bore's
    deepest point and worn volume with respect to each (``θ ∂/∂θ``: per relative change), the
    updates held. Returns the JSON's content."""
    job = job if isinstance(job, Job) else load_job(job)
    if job.wear is None:
        raise ConfigError("wear: missing table (element, period_s, cycles)")
    wear, sim = job.wear, job.simulation
    spec = job.experiments[0]
    model = spec.model
    try:
        joint = wear_element(model, wear.element)
    except ValueError as err:
        raise ConfigError(f"wear.element: {err}") from None
    options = {"rtol": sim.rtol, "atol": sim.atol, "max_steps": sim.max_steps}
    settings = dict(element=wear.element, period=wear.period_s, cycles=wear.cycles,
                    settle_cycles=wear.settle_cycles, cycles_per_update=wear.cycles_per_update,
                    **options)  # fmt: skip
    q0, v0 = model.initial_state()
    started = time.perf_counter()
    worn = predict_wear(model, q0, v0, max_depth_step=wear.max_depth_step_m, progress=progress,
                        **settings)  # fmt: skip
    seconds = time.perf_counter() - started
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cells = joint.cells
    angles = 360.0 * (np.arange(cells) + 0.5) / cells
    bore, journal = np.asarray(worn.bore), np.asarray(worn.journal)
    write_csv_atomic(out_dir / "profile.csv", ["angle_deg", "bore_um", "journal_um"],
                     [angles, 1e6 * bore[-1], 1e6 * journal[-1]])  # fmt: skip
    areas = _cell_areas(joint)
    write_csv_atomic(
        out_dir / "wear_history.csv",
        ["cycles", "bore_deepest_um", "journal_deepest_um", "bore_volume_mm3",
         "journal_volume_mm3"],
        [np.asarray(worn.cycles, float), 1e6 * bore.max(axis=1), 1e6 * journal.max(axis=1),
         1e9 * areas[0] * bore.sum(axis=1), 1e9 * areas[1] * journal.sum(axis=1)],
    )  # fmt: skip
    _plot(out_dir / "wear.png", angles, worn, wear.element)
    report = {
        "element": wear.element,
        "cycles": wear.cycles,
        "simulated_cycles": worn.simulated_cycles,
        "schedule": list(worn.schedule),
        "seconds": seconds,
        "bore_deepest_m": float(bore[-1].max()),
        "journal_deepest_m": float(journal[-1].max()),
        "bore_volume_m3": float(areas[0] * bore[-1].sum()),
        "journal_volume_m3": float(areas[1] * journal[-1].sum()),
    }
    if job.parameters is not None:
        report["gradients"] = _gradients(job, spec, worn.schedule, settings, areas[0])
    atomic_write(out_dir / "result.json", json.dumps(report, indent=2) + "\n")
    return report


def _cell_areas(joint) -> tuple[float, float]:
    """The area of one cell (m²) of the bore and of the journal: worn volume = area × Σ depth."""
    arc = 2.0 * np.pi / joint.cells * float(joint.length)
    r = float(joint.journal_radius)
    return arc * (r + float(joint.clearance)), arc * r


def _gradients(job: Job, spec: ExperimentSpec, schedule, settings, cell_area) -> dict:
    """``θ ∂/∂θ`` of the bore's deepest point (m; its cell fixed) and worn volume (m³)."""
    space = job.parameters
    theta = np.array([p.initial for p in space.parameters])
    q0, v0 = spec.model.initial_state()

    def bore(values):
        model = space.apply(spec.model, values, spec.name)
        worn = predict_wear(model, q0, v0, schedule=schedule, progress=False,
                            adjoint=job.simulation.adjoint(), **settings)  # fmt: skip
        return worn.bore[-1], worn.bore[-1]

    jac, depth = jax.jacfwd(bore, has_aux=True)(jnp.asarray(theta))  # (cells, p), (cells,)
    jac = np.asarray(jac)
    deepest = int(np.argmax(np.asarray(depth)))
    return {
        p.name: {"deepest_m": float(jac[deepest, i] * theta[i]),
                 "volume_m3": float(cell_area * jac[:, i].sum() * theta[i])}
        for i, p in enumerate(space.parameters)
    }  # fmt: skip


def _plot(path: Path, angles, worn, element: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for k in np.unique(np.linspace(0, len(worn.cycles) - 1, 5).round().astype(int)):
        left.plot(angles, 1e6 * np.asarray(worn.bore[k]), label=f"{worn.cycles[k]:,} cycles")
    left.plot(angles, 1e6 * np.asarray(worn.journal[-1]), "k:", label="journal, last")
    left.set(xlabel="angle on the surface (°)", ylabel="worn depth (µm)",
             title=f"{element}: the bore's profile")  # fmt: skip
    left.legend(fontsize=8)
    right.plot(worn.cycles, 1e6 * np.asarray(worn.bore).max(axis=1), "o-", label="bore")
    right.plot(worn.cycles, 1e6 * np.asarray(worn.journal).max(axis=1), "s-", label="journal")
    right.set(xlabel="cycles", ylabel="deepest point (µm)", title="updates")
    right.legend()
    for axis in (left, right):
        axis.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


WEAR_DESCRIPTION = """\
Wear of the model's WearingClearance over many cycles ([wear] table: element, period_s,
cycles, settle_cycles, cycles_per_update, max_depth_step_m), by diffmbs.wear.predict_wear.

It writes under --out:
  profile.csv       angle_deg, bore_um, journal_um: the worn depths after the last update
  wear_history.csv  cycles, deepest point and worn volume of each surface after each update
  wear.png          the bore's profile after several updates; the deepest point per update
  result.json       the above in SI, the updates, and with [[parameters]] the gradient of
                    the bore's deepest point and worn volume with respect to each (θ ∂/∂θ)
"""


def add_wear_command(subparsers, add_job_command) -> None:
    parser = add_job_command(subparsers, "wear", "wear over many cycles (TOML job file)",
                             WEAR_DESCRIPTION)  # fmt: skip
    parser.set_defaults(run=_run_wear_command)


def _run_wear_command(args: argparse.Namespace) -> None:
    out_dir = args.out or Path("runs") / args.config.stem
    report = run_wear_job(args.config, out_dir)
    print(f"{report['cycles']:,} cycles ({report['simulated_cycles']} simulated, "
          f"{report['seconds']:.0f} s): bore {1e6 * report['bore_deepest_m']:.3g} µm, journal "
          f"{1e6 * report['journal_deepest_m']:.3g} µm deep")  # fmt: skip
    for name, gradient in report.get("gradients", {}).items():
        print(f"  θ ∂/∂θ {name}: deepest point {1e6 * gradient['deepest_m']:+.3g} µm, volume "
              f"{1e9 * gradient['volume_m3']:+.3g} mm³")  # fmt: skip
    print(f"report: {out_dir / 'result.json'}")
