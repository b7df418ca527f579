"""``diffmbs wear``: the wear of a job's model over ``[wear] cycles``, and the measured wear
profiles of ``diffmbs fit`` (:class:`~identification.WearProfileExperiment`).

A profile file is a CSV with a header and two columns: the angle on the surface in degrees
(``angle_deg``, from the body frame's x̂ about the surface's axis, as
:class:`~diffmbs.multibody.WearingClearance` measures it) and the profile in micrometres
(``radius_um``: for the bore its radius minus the journal's nominal radius, clearance and
worn depth; for the journal its loss of radius); for a joint whose maps run along the axis
too (:class:`~diffmbs.multibody.CrownedWearingClearance`) a third, ``axial_mm``: the position
along the surface's axis from its centre.
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


def read_profile_csv(path: Path, where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(angles rad (n,), profile m (n,), axial positions m (n,) or None)`` from a profile
    file (module docstring); a :class:`ConfigError` names the column or row at fault."""
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
    columns = PROFILE_COLUMNS + (("axial_mm",) if "axial_mm" in names else ())
    for column in columns:
        bad = ~np.isfinite(table[column])
        if bad.any():
            row = int(np.argmax(bad))
            raise ConfigError(f"{where}: {path.name} row {row + 1}: {column} is not a finite "
                              "number")  # fmt: skip
    if table.size < 2:
        raise ConfigError(f"{where}: {path.name} needs two rows or more")
    axial = 1e-3 * table["axial_mm"] if "axial_mm" in names else None
    return np.radians(table["angle_deg"]), 1e-6 * table["radius_um"], axial


def profile_experiment(job: Job, i: int, spec: ExperimentSpec, options: dict):
    """The measured profile of ``job.experiments[i]`` as a
    :class:`~identification.WearProfileExperiment` over ``[wear] updates`` equal updates."""
    wear = job.wear
    where = f"experiments[{i}].profile"
    angles, measured, axial = read_profile_csv(spec.profile_path, where)
    try:
        return WearProfileExperiment(
            spec.name, spec.model, wear.element, angles, measured, period=wear.period_s,
            schedule=wear.schedule(), surface=spec.profile_surface,
            settle_cycles=wear.settle_cycles, cycles_per_update=wear.cycles_per_update,
            simulate_kwargs=options, axial=axial, filter_upr=spec.profile_filter_upr,
        )  # fmt: skip
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None


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
    _write_profile(out_dir / "profile.csv", joint, worn)
    steps = len(worn.cycles)
    bore = np.asarray(worn.bore).reshape(steps, -1)  # (updates + 1, cells of a map)
    journal = np.asarray(worn.journal).reshape(steps, -1)
    areas = [float(a) for a in joint.cell_areas()]
    write_csv_atomic(
        out_dir / "wear_history.csv",
        ["cycles", "bore_deepest_um", "journal_deepest_um", "bore_volume_mm3",
         "journal_volume_mm3"],
        [np.asarray(worn.cycles, float), 1e6 * bore.max(axis=1), 1e6 * journal.max(axis=1),
         1e9 * areas[0] * bore.sum(axis=1), 1e9 * areas[1] * journal.sum(axis=1)],
    )  # fmt: skip
    _plot(out_dir / "wear.png", joint, worn, wear.element)
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


def _write_profile(path: Path, joint, worn) -> None:
    """``profile.csv``: the worn depths after the last update (µm) at the maps' cell centres —
    by angle; on maps along the axis too, one row per cell with each surface's axial
    position (mm)."""
    angles = 360.0 * (np.arange(joint.cells) + 0.5) / joint.cells
    bore, journal = np.asarray(worn.bore[-1]), np.asarray(worn.journal[-1])
    if bore.ndim == 1:
        write_csv_atomic(path, ["angle_deg", "bore_um", "journal_um"],
                         [angles, 1e6 * bore, 1e6 * journal])  # fmt: skip
        return
    along = [1e3 * np.asarray(joint.axial_centres(s)) for s in ("bore", "journal")]
    grid = [np.meshgrid(angles, x, indexing="ij") for x in along]  # (cells, axial) each
    write_csv_atomic(path, ["angle_deg", "bore_axial_mm", "bore_um", "journal_axial_mm",
                            "journal_um"],
                     [grid[0][0].ravel(), grid[0][1].ravel(), 1e6 * bore.ravel(),
                      grid[1][1].ravel(), 1e6 * journal.ravel()])  # fmt: skip


def _gradients(job: Job, spec: ExperimentSpec, schedule, settings, cell_area) -> dict:
    """``θ ∂/∂θ`` of the bore's deepest point (m; its cell fixed) and worn volume (m³), taken
    along relative changes (tangents of the states' size, as error-controlled derivatives'
    tolerances assume)."""
    space = job.parameters
    theta = jnp.asarray([p.initial for p in space.parameters])
    scale = jnp.where(theta != 0, jnp.abs(theta), 1.0)
    q0, v0 = spec.model.initial_state()

    def bore(relative):
        model = space.apply(spec.model, theta + scale * relative, spec.name)
        worn = predict_wear(model, q0, v0, schedule=schedule, progress=False,
                            adjoint=job.simulation.adjoint(), **settings)  # fmt: skip
        return worn.bore[-1], worn.bore[-1]

    jac, depth = jax.jacfwd(bore, has_aux=True)(jnp.zeros_like(theta))  # (*map, p), map
    jac = np.asarray(jac).reshape(-1, theta.size) * np.asarray(theta / scale)  # θ ∂/∂θ
    depth = np.asarray(depth).reshape(-1)
    deepest = int(np.argmax(depth))
    return {
        p.name: {"deepest_m": float(jac[deepest, i]),
                 "volume_m3": float(cell_area * jac[:, i].sum())}
        for i, p in enumerate(space.parameters)
    }  # fmt: skip


def _plot(path: Path, joint, worn, element: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    angles = 360.0 * (np.arange(joint.cells) + 0.5) / joint.cells
    last = 1e6 * np.asarray(worn.bore[-1])
    if last.ndim == 1:
        for k in np.unique(np.linspace(0, len(worn.cycles) - 1, 5).round().astype(int)):
            left.plot(angles, 1e6 * np.asarray(worn.bore[k]), label=f"{worn.cycles[k]:,} cycles")
        left.plot(angles, 1e6 * np.asarray(worn.journal[-1]), "k:", label="journal, last")
        left.set(xlabel="angle on the surface (°)", ylabel="worn depth (µm)",
                 title=f"{element}: the bore's profile")  # fmt: skip
        left.legend(fontsize=8)
        left.grid(alpha=0.3)
    else:  # a map over angle × axial position
        edges = 1e3 * np.asarray(joint.axial_edges()[0])
        image = left.pcolormesh(np.linspace(0.0, 360.0, joint.cells + 1), edges, last.T)
        fig.colorbar(image, ax=left, label="worn depth (µm)")
        left.set(xlabel="angle on the bore (°)", ylabel="axial position (mm)",
                 title=f"{element}: the bore after {worn.cycles[-1]:,} cycles")  # fmt: skip
    steps = len(worn.cycles)
    for surface, marker in (("bore", "o-"), ("journal", "s-")):
        deepest = np.asarray(getattr(worn, surface)).reshape(steps, -1).max(axis=1)
        right.plot(worn.cycles, 1e6 * deepest, marker, label=surface)
    right.set(xlabel="cycles", ylabel="deepest point (µm)", title="updates")
    right.legend()
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


WEAR_DESCRIPTION = """\
Wear of the model's WearingClearance over many cycles ([wear] table: element, period_s,
cycles, settle_cycles, cycles_per_update, max_depth_step_m), by diffmbs.wear.predict_wear.

It writes under --out:
  profile.csv       angle_deg, bore_um, journal_um: the worn depths after the last update
                    (maps along the axis too: one row per cell, with bore_axial_mm and
                    journal_axial_mm)
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
