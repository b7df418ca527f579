"""Benchmark: the bundled 3-D shock-machine fit (``data/mwsm3d/fit.toml``) against its truth.

Runs what ``diffmbs fit data/mwsm3d/fit.toml`` runs (:func:`diffmbs.app.run_fit_job`: the
global stage, Levenberg–Marquardt, sensitivities, report) into ``--out``, resuming from the
checkpoints found there, and compares the fitted parameters with the truth of
``data/mwsm3d/make_records.py``: the ratio, and how many reported standard deviations (in the
fit's own coordinates) separate them, and whether the truth lies in the reported 95 % interval
(the local one, ±1.96 σ, or the wider range of the global stage's points as good as the fit,
:func:`identification.plausible_ranges`). Also: the misfit at the start and at the truth, how many
simulations the fit took to first reach 1.1× the misfit at the truth, and the wall time of
the run (a resumed run times only what it computed).

Usage::

    python benchmarks/mwsm3d_fit.py [--out runs/mwsm3d_fit]
                                    [--json benchmarks/results/mwsm3d_fit.json]
                                    [--population N] [--generations G] [--refine R]

``--population``/``--generations``/``--refine`` replace the job's ``[fit]`` settings (a larger
global stage on a GPU); with a finished run in ``--out``, more generations extend its search.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import diffmbs

diffmbs.configure()

import numpy as np  # noqa: E402
from _common import machine_info, print_table, utc_timestamp, write_json_atomic  # noqa: E402

from diffmbs.app import load_job, problem_from_job, run_fit_job  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "data" / "mwsm3d"))
from make_records import truth_parameters  # noqa: E402

SUCCESS = 1.1  # "reached": a loss at most this many times the loss at the truth


def simulations_per_jacobian(job, p: int) -> int:
    """A Jacobian's cost in simulations per test: ``2p + 1`` runs by differences, ``1 + p``
    for forward mode (its ``p`` tangents ride along one run, charged as ``p`` runs)."""
    return 2 * p + 1 if job.fit.jacobian == "differences" else 1 + p


def first_reached(result, target: float, n_experiments: int, per_jacobian: int,
                  window: float | None = None) -> float | None:
    """Simulations run when the best loss first fell to ``target``: the global stage's
    generations (a candidate is one simulation per test), then the refinement's iterations
    (each a Jacobian, charged as ``per_jacobian`` simulations, and its trial simulation).

    ``window``: the global stage and its refinements ran over the tests' first part, that
    share of a simulation (``[fit] stages``); their losses are that window's, not comparable
    with ``target``, and their runs are charged at that share."""
    search = result.search or {}
    spent = search.get("evaluations", 0) * n_experiments
    if window is None:
        population = search.get("evaluations", 0) // max(len(search.get("best_history", [])), 1)
        for g, best in enumerate(search.get("best_history", []), start=1):
            if best <= target:
                return g * population * n_experiments
    else:
        runs = search.get("total_simulations", 0) + search.get("total_jacobians", 0) * per_jacobian
        spent = runs * n_experiments * window
    per_iteration = (per_jacobian + 1) * n_experiments
    for i, loss in enumerate(result.loss_history):
        if loss <= target:
            return spent + i * per_iteration
    return None


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", default=str(ROOT / "data" / "mwsm3d" / "fit.toml"))
    parser.add_argument("--out", default=str(ROOT / "runs" / "mwsm3d_fit"))
    parser.add_argument("--json", default=str(HERE / "results" / "mwsm3d_fit.json"))
    for setting in ("population", "generations", "refine"):
        parser.add_argument(f"--{setting}", type=int, help=f"replaces the job's [fit] {setting}")
    args = parser.parse_args(argv)

    job = load_job(args.job)
    overrides = {k: getattr(args, k) for k in ("population", "generations", "refine")
                 if getattr(args, k) is not None}  # fmt: skip
    job = dataclasses.replace(job, fit=dataclasses.replace(job.fit, **overrides))
    problem = problem_from_job(job)
    truth = truth_parameters()
    names = list(problem.space.names)
    theta_truth = np.array([truth[n] for n in names])
    z_truth = np.asarray(problem.space.to_unconstrained(theta_truth))
    loss_truth = float(problem.loss(z_truth))
    loss_start = float(problem.loss(problem.initial_z))
    print(f"loss at the start {loss_start:.4g} dB², at the truth {loss_truth:.4g} dB²", flush=True)

    t0 = time.perf_counter()
    result = run_fit_job(job, args.out, resume=True, progress=True)
    seconds = time.perf_counter() - t0

    plausible = (result.search or {}).get("plausible", {}).get("ranges", {})
    rows = []
    for i, name in enumerate(names):
        sigma = float(result.std_z[i])
        gap = abs(float(result.z[i]) - float(z_truth[i]))
        low, high = plausible.get(name, (result.parameters[name],) * 2)
        within_sigma = bool(np.isfinite(sigma) and gap <= 1.96 * sigma)
        rows.append({
            "parameter": name, "fitted": result.parameters[name], "truth": truth[name],
            "ratio": result.parameters[name] / truth[name], "std_z": sigma,
            "sigmas_from_truth": gap / sigma if np.isfinite(sigma) and sigma > 0 else None,
            "plausible": [low, high], "identifiable": bool(result.identifiable[name]),
            "at_bound": result.at_bounds.get(name),
            # inside the reported 95 % interval: the local one or the plausible range
            "covered": within_sigma or low <= truth[name] <= high,
        })  # fmt: skip
    print_table(
        ["parameter", "fitted", "truth", "ratio", "σ_z", "|Δz|/σ_z", "plausible range",
         "truth covered"],
        [[r["parameter"], f"{r['fitted']:.4g}", f"{r['truth']:.4g}", f"{r['ratio']:.3f}",
          f"{r['std_z']:.3g}",
          "-" if r["sigmas_from_truth"] is None else f"{r['sigmas_from_truth']:.2f}",
          f"{r['plausible'][0]:.3g}–{r['plausible'][1]:.3g}", "yes" if r["covered"] else "no"]
         for r in rows],
    )  # fmt: skip
    n_tests = len(problem.experiment_names)
    per_jacobian = simulations_per_jacobian(job, len(names))
    stages = job.fit.stages
    window = stages[0].until_s / job.simulation.duration_s if stages else None
    reached = first_reached(result, SUCCESS * loss_truth, n_tests, per_jacobian, window)
    covered = sum(r["covered"] for r in rows)
    print(result.summary())
    print(f"loss {result.loss:.4g} dB² ({result.loss / loss_truth:.2f}× the truth's); the "
          f"truth inside {covered}/{len(rows)} reported 95 % intervals; 1.1× the truth's loss "
          f"after {reached if reached is None else round(reached)} simulations; "
          f"{seconds:.0f} s", flush=True)
    write_json_atomic(Path(args.json), {
        "benchmark": "mwsm3d_fit", "timestamp": utc_timestamp(), "machine": machine_info(),
        "job": Path(args.job).name, "fit_overrides": overrides, "seconds_this_run": seconds,
        "loss_start": loss_start, "loss_truth": loss_truth, "loss": result.loss,
        "loss_history": result.loss_history, "message": result.message,
        "search": result.search, "evaluations": result.evaluations,
        "discrepancy": result.discrepancy, "parameters": rows,
        "covered": covered, "simulations_to_1p1_truth_loss": reached,
        "simulations_per_jacobian": per_jacobian,
    })  # fmt: skip


if __name__ == "__main__":
    main()
