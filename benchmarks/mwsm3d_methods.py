"""Benchmark: derivative-free methods on the bundled 3-D shock-machine fit, beside diffmbs's.

The loss is the one ``diffmbs fit data/mwsm3d/fit.toml`` minimises (the same
:class:`identification.Problem`, built from the job; every candidate is one simulation per test),
from the job's start values (2–5× off the truth), with a budget cap:

* ``scipy.optimize.differential_evolution`` — what the study's approach amounts to: on the box of
  the fitted coordinates, ``popsize=4`` (44 candidates per generation for 11 parameters), each
  generation one batch through :func:`identification.batched_loss` (``vectorized=True``),
  ``x0`` the job's start, ``polish=False``, ``tol=0``, ``seed=0``; ``--de-candidates`` in all;
* ``scipy.optimize.least_squares`` with a 2-point finite-difference Jacobian on the residuals in
  the fitted coordinates, at most ``--lsq-steps`` accepted-or-rejected steps (``max_nfev``;
  SciPy's ``trf`` does not count the Jacobian's ``p`` evaluations there, they are counted here).

Target: 1.1× the misfit at the truth (``data/mwsm3d/make_records.py``). Reported per method: the
simulations and seconds until the best loss first reached the target (or that it did not within
the budget), the best loss and its history against simulations. The diffmbs row (global CMA-ES,
Levenberg–Marquardt) is read from ``--fit-json``, written by ``benchmarks/mwsm3d_fit.py`` on the
same machine (an hour-long checkpointed run of its own; its timestamp is printed beside it).

Usage::

    python benchmarks/mwsm3d_methods.py [--de-candidates 264] [--lsq-steps 6]
                                        [--json benchmarks/results/mwsm3d_methods.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import diffmbs

diffmbs.configure()

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import Tracker, machine_info, print_table, utc_timestamp, write_json_atomic  # noqa: E402
from scipy.optimize import differential_evolution, least_squares  # noqa: E402

import identification as idf  # noqa: E402
from diffmbs.app import load_job, problem_from_job  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "data" / "mwsm3d"))
from make_records import truth_parameters  # noqa: E402

SUCCESS = 1.1
DE_POPSIZE = 4


def run_differential_evolution(problem, tracker: Tracker, candidates: int, seed: int) -> dict:
    space = problem.space
    d = problem.n_parameters
    population = DE_POPSIZE * d

    def loss(u):  # (d, S) with vectorized=True
        u = np.atleast_2d(np.asarray(u).T)
        z = np.asarray(space.to_unconstrained(space.from_box(np.clip(u, 1e-9, 1 - 1e-9))))
        losses = idf.batched_loss(problem, z, batch_size=population)
        tracker.record(losses)
        print(f"differential evolution: {tracker.simulations} simulations, best "
              f"{tracker.best:.4g} dB²", flush=True)  # fmt: skip
        return np.where(np.isfinite(losses), losses, 1e6)

    generations = max(candidates // population - 1, 1)  # the initial population is one more
    t0 = time.perf_counter()
    res = differential_evolution(loss, [(0.0, 1.0)] * d, popsize=DE_POPSIZE, maxiter=generations,
                                 seed=seed, vectorized=True, updating="deferred", polish=False,
                                 tol=0.0, x0=space.to_box(space.initial))  # fmt: skip
    return {"loss": float(res.fun), "seconds": time.perf_counter() - t0,
            "population": population, "generations": generations}  # fmt: skip


def run_least_squares(problem, tracker: Tracker, steps: int) -> dict:
    d = problem.n_parameters

    def residuals(z):
        r = np.nan_to_num(np.asarray(problem.residuals(jnp.asarray(z))), nan=60.0)
        tracker.record(np.mean(r**2))
        return r

    box = (np.full(d, -14.0), np.full(d, 14.0))  # z of bounded transforms: the box's inside
    t0 = time.perf_counter()
    res = least_squares(residuals, np.asarray(problem.initial_z), jac="2-point", bounds=box,
                        max_nfev=steps, x_scale="jac")  # fmt: skip
    return {"loss": float(np.mean(res.fun**2)), "seconds": time.perf_counter() - t0,
            "nfev": int(res.nfev), "njev": int(res.njev)}  # fmt: skip


def diffmbs_row(path: Path, n_tests: int) -> dict | None:
    """The fit of ``benchmarks/mwsm3d_fit.py``: simulations in all (a Jacobian charged as
    there: ``2p + 1`` simulations per test by differences, ``1 + p`` by forward mode) and to
    the target."""
    if not path.exists():
        return None
    fit = json.loads(path.read_text())
    search = fit["search"]
    p = len(fit["parameters"])
    per_jacobian = fit.get("simulations_per_jacobian", 1 + p)  # older runs: forward mode
    total = (search["total_simulations"] + search["total_jacobians"] * per_jacobian) * n_tests
    return {"loss": fit["loss"], "simulations": int(total),
            "reached_at": fit["simulations_to_1p1_truth_loss"],
            "timestamp": fit["timestamp"], "loss_truth": fit["loss_truth"]}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", default=str(ROOT / "data" / "mwsm3d" / "fit.toml"))
    parser.add_argument("--de-candidates", type=int, default=264)
    parser.add_argument("--lsq-steps", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--fit-json", default=str(HERE / "results" / "mwsm3d_fit.json"))
    parser.add_argument("--json", default=str(HERE / "results" / "mwsm3d_methods.json"))
    args = parser.parse_args(argv)

    problem = problem_from_job(load_job(args.job))
    n_tests = len(problem.experiment_names)
    truth = truth_parameters()
    theta = np.array([truth[n] for n in problem.space.names])
    loss_truth = float(problem.loss(problem.space.to_unconstrained(theta)))
    target = SUCCESS * loss_truth
    print(f"target {target:.4g} dB² (1.1× the truth's {loss_truth:.4g})", flush=True)

    rows = {}
    if args.de_candidates > 0:
        tracker = Tracker(target, simulations_per_loss=n_tests)
        out = run_differential_evolution(problem, tracker, args.de_candidates, args.seed)
        rows["differential evolution"] = {**out, "simulations": tracker.simulations,
                                          "reached_at": tracker.reached_at,
                                          "reached_seconds": tracker.reached_seconds,
                                          "best_history": tracker.best_history}  # fmt: skip
    if args.lsq_steps > 0:
        tracker = Tracker(target, simulations_per_loss=n_tests)
        out = run_least_squares(problem, tracker, args.lsq_steps)
        rows["least_squares (FD Jacobian)"] = {**out, "simulations": tracker.simulations,
                                               "reached_at": tracker.reached_at,
                                               "reached_seconds": tracker.reached_seconds,
                                               "best_history": tracker.best_history}  # fmt: skip

    fit = diffmbs_row(Path(args.fit_json), n_tests)
    table = []
    if fit is not None:
        table.append([f"diffmbs: CMA-ES + LM ({fit['timestamp']})", fit["simulations"],
                      fit["reached_at"] or "not reached", f"{fit['loss']:.4g}", "-"])  # fmt: skip
    for name, r in rows.items():
        table.append([name, r["simulations"], r["reached_at"] or "not reached",
                      f"{r['loss']:.4g}", f"{r['seconds']:.0f}"])  # fmt: skip
    print_table(["method", "simulations", "to 1.1× truth loss", "best loss dB²", "s"], table)
    write_json_atomic(Path(args.json), {
        "benchmark": "mwsm3d_methods", "timestamp": utc_timestamp(), "machine": machine_info(),
        "job": Path(args.job).name, "loss_truth": loss_truth, "target": target,
        "de_candidates": args.de_candidates, "lsq_steps": args.lsq_steps, "methods": rows,
        "diffmbs": fit,
    })  # fmt: skip


if __name__ == "__main__":
    main()
