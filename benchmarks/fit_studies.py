"""Benchmark: does the fit find the truth? The studies and method table of issue 21.

Problem (``tests/lumped_study.py``): the 8-parameter lumped MWSM model (k_channel, ζ_channel,
K_impact, χ_impact, K_stop, χ_stop, k_bed, ζ_bed; log-bounded), two SRS records (2 ft and 3 ft,
475 kg, 0.1 s at 10 kHz, 10 Hz–1 kHz at 6 per octave), 1 % noise, starts 2–5× off a truth.
Success: the final loss is at most 1.1× the truth basin's minimum (LM started at the truth).

1. **Calibration**: ``--truths`` random truths, data from the model itself. Success rate, and
   for every parameter reported as estimated (identifiable, not at a bound) how often the truth
   lies in its 95 % interval. Bars: success ≥ 19/20, coverage 85–100 %.
2. **Recovery**: the same with data from the independent SciPy simulator
   ``tests/reference_mwsm.py``; relative errors of the estimated parameters, discrepancy flags.
   **Structural** (``--studies structural``): that simulator with contact exponent 1.3 where
   the model has 1.5, a discrepancy the SRS can absorb into effective stiffnesses.
3. **Methods** on one truth (the issue's: k_channel 1.2e7, χ_impact 0.25, K_stop 5e9, χ_stop
   0.6, …) with reference data, from ``--starts`` starts: global CMA-ES + LM (diffmbs's
   default), 16-sample multistart + LM (the former default), ``scipy.optimize.
   differential_evolution`` (vectorised: each generation one batch), CMA-ES alone, and
   ``scipy.optimize.least_squares`` with a 2-point finite-difference Jacobian. Every model run
   counts: a forward-mode Jacobian is charged at its measured cost in simulations.

Usage::

    python benchmarks/fit_studies.py [--truths 20] [--starts 5] [--quick]
                                        [--out benchmarks/results/fit_studies.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from scipy.optimize import differential_evolution, least_squares

import diffmbs
import identification as idf
from identification._problem import evaluate, residuals_and_jacobian

diffmbs.configure()
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import lumped_study as study  # noqa: E402
from _common import (  # noqa: E402
    Tracker,
    machine_info,
    print_table,
    utc_timestamp,
    write_json_atomic,
)

ISSUE_TRUTH = {"k_channel": 1.2e7, "zeta_channel": 0.04, "k_impact": 2e10, "chi_impact": 0.25,
               "k_stop": 5e9, "chi_stop": 0.6, "k_bed": 1.54e7, "zeta_bed": 0.05}  # fmt: skip
SUCCESS = 1.1


STRUCTURAL_EXPONENT = 1.3


def study_data(kind: str, truth: dict, rng) -> dict:
    if kind == "calibration":
        return study.own_data(truth, rng)
    exponent = STRUCTURAL_EXPONENT if kind == "structural" else 1.5
    return study.reference_data(truth, rng, contact_exponent=exponent)


def study_run(kind: str, n: int, search: idf.CMAES) -> dict:
    cases = []
    for i in range(n):
        rng = np.random.default_rng(2000 + i)
        truth = study.random_truth(rng)
        start = study.start_from(truth, rng)
        data = study_data(kind, truth, rng)
        problem = study.problem(data, start)
        t0 = time.perf_counter()
        result = idf.global_fit(problem, search, seed=i, progress=False)
        seconds = time.perf_counter() - t0
        a = study.assess(problem, result, truth)
        a.update(seconds=seconds, simulations=result.search["total_simulations"],
                 jacobians=result.search["total_jacobians"])  # fmt: skip
        cases.append(a)
        print(f"{kind} {i}: ratio {a['ratio']:.3f}, covered {sum(a['covered'].values())}/"
              f"{len(a['covered'])}, discrepancy {a['discrepancy']}, {seconds:.1f} s", flush=True)
    covered = [c for a in cases for c in a["covered"].values()]
    by_parameter = {
        name: {"covered": sum(a["covered"].get(name, False) for a in cases),
               "estimated": sum(name in a["covered"] for a in cases),
               "median_abs_relative_error": float(np.median(
                   [abs(a["relative_error"][name]) for a in cases]))}
        for name in study.NAMES
    }  # fmt: skip
    estimated_errors = [abs(a["relative_error"][k]) for a in cases for k in a["covered"]]
    return {
        "cases": cases,
        "success": sum(a["ratio"] <= SUCCESS for a in cases),
        "n": n,
        "coverage": float(np.mean(covered)),
        "by_parameter": by_parameter,
        "intervals": len(covered),
        "median_abs_relative_error_estimated": float(np.median(estimated_errors)),
        "p90_abs_relative_error_estimated": float(np.quantile(estimated_errors, 0.9)),
        "discrepancy_flags": sum(a["discrepancy"] for a in cases),
        "median_seconds": float(np.median([a["seconds"] for a in cases])),
    }


def jacobian_cost(problem) -> float:
    """Wall time of one forward-mode Jacobian over one simulation (median of 5)."""
    z = problem.initial_z
    residuals_and_jacobian(problem, z)[1].block_until_ready()
    evaluate(problem, z)[0].block_until_ready()
    tj, ts = [], []
    for _ in range(5):
        t = time.perf_counter()
        residuals_and_jacobian(problem, z)[1].block_until_ready()
        tj.append(time.perf_counter() - t)
        t = time.perf_counter()
        evaluate(problem, z)[0].block_until_ready()
        ts.append(time.perf_counter() - t)
    return float(np.median(tj) / np.median(ts))


def compare_at(problem, s, gens, quick, target, basin, jac_cost, rows) -> None:
    """Every method from ``problem``'s start; appends one run to each list of ``rows``."""
    space = problem.space
    d = len(space)

    def finish(name, t0, loss, sims, jacs, reached_at=None):
        rows[name].append({"loss": float(loss), "ok": bool(loss <= target),
                           "simulations": int(sims), "jacobians": int(jacs),
                           "simulation_equivalents": float(sims + jacs * jac_cost),
                           "seconds": time.perf_counter() - t0,
                           "reached_at": reached_at})  # fmt: skip
        print(f"start {s} {name}: loss {loss:.4g} ({loss / basin:.2f}× basin), {sims} sims + "
              f"{jacs} Jacobians, {time.perf_counter() - t0:.1f} s", flush=True)  # fmt: skip

    t0 = time.perf_counter()
    r = idf.global_fit(problem, idf.CMAES(generations=gens), seed=s, progress=False)
    finish("global CMA-ES + LM", t0, r.loss, r.search["total_simulations"],
           r.search["total_jacobians"])  # fmt: skip

    t0 = time.perf_counter()
    starts = idf.multistart(problem, 16, seed=s)
    r = idf.fit(problem, z0=starts.z[0], max_iterations=40, progress=False)
    finish("multistart 16 + LM", t0, r.loss, 16 + r.evaluations["simulations"],
           r.evaluations["jacobians"])  # fmt: skip

    t0 = time.perf_counter()
    tracker = Tracker(target)

    def de_loss(u):  # (d, S) with vectorized=True
        u = np.atleast_2d(np.asarray(u).T)
        z = np.asarray(space.to_unconstrained(space.from_box(np.clip(u, 1e-6, 1 - 1e-6))))
        losses = idf.batched_loss(problem, z, batch_size=64)
        tracker.record(losses)
        return np.where(np.isfinite(losses), losses, 1e6)

    res = differential_evolution(de_loss, [(0.0, 1.0)] * d, popsize=7, maxiter=gens * 2,
                                 seed=s, vectorized=True, polish=False, tol=0.0,
                                 x0=space.to_box(space.initial))  # fmt: skip
    finish("differential evolution", t0, res.fun, tracker.simulations, 0, tracker.reached_at)

    t0 = time.perf_counter()
    found = idf.global_search(problem, idf.CMAES(generations=gens * 2), seed=s, progress=False)
    reached = np.flatnonzero(found.best_history <= target)
    finish("CMA-ES alone", t0, found.loss[0], found.evaluations, 0,
           int((reached[0] + 1) * 64) if reached.size else None)  # fmt: skip

    t0 = time.perf_counter()

    def fd_residuals(z):
        return np.nan_to_num(np.asarray(problem.residuals(jnp.asarray(z))), nan=60.0)

    box = (np.full(d, -14.0), np.full(d, 14.0))  # z of log_bounded: the box's inside
    res = least_squares(fd_residuals, np.asarray(problem.initial_z), jac="2-point", bounds=box,
                        max_nfev=200 if quick else 400, x_scale="jac")  # fmt: skip
    finish("least_squares (FD Jacobian)", t0, float(np.mean(res.fun**2)),
           res.nfev + res.njev * d, 0)  # fmt: skip


def methods_run(n_starts: int, quick: bool) -> dict:
    rng = np.random.default_rng(77)
    data = study.reference_data(ISSUE_TRUTH, rng)
    base = study.problem(data, ISSUE_TRUTH)
    basin = idf.fit(base, z0=study.truth_z(base, ISSUE_TRUTH), max_iterations=60,
                    progress=False).loss  # fmt: skip
    target = SUCCESS * basin
    jac_cost = jacobian_cost(base)
    rows: dict[str, list[dict]] = {k: [] for k in ("global CMA-ES + LM", "multistart 16 + LM",
                                                    "differential evolution", "CMA-ES alone",
                                                    "least_squares (FD Jacobian)")}  # fmt: skip
    gens = 10 if quick else 30
    for s in range(n_starts):
        start = study.start_from(ISSUE_TRUTH, np.random.default_rng(500 + s))
        problem = study.problem(data, start)
        compare_at(problem, s, gens, quick, target, basin, jac_cost, rows)

    summary = []
    for name, runs in rows.items():
        summary.append({
            "method": name,
            "success": sum(r["ok"] for r in runs), "n": len(runs),
            "median_simulation_equivalents": float(np.median(
                [r["simulation_equivalents"] for r in runs])),
            "median_seconds": float(np.median([r["seconds"] for r in runs])),
            "spread_seconds": [float(np.min([r["seconds"] for r in runs])),
                               float(np.max([r["seconds"] for r in runs]))],
            "median_loss_over_basin": float(np.median([r["loss"] for r in runs]) / basin),
        })  # fmt: skip
    return {"basin_loss": basin, "target": target, "jacobian_cost_in_simulations": jac_cost,
            "runs": rows, "summary": summary}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--truths", type=int, default=20)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 truths, 2 starts, fewer gens")
    parser.add_argument("--studies", default="calibration,recovery,methods",
                        help="comma-separated: calibration, recovery, structural, methods")
    parser.add_argument("--out", default=str(HERE / "results" / "fit_studies.json"))
    args = parser.parse_args(argv)
    truths, starts = (2, 2) if args.quick else (args.truths, args.starts)
    search = idf.CMAES()
    out = {"date": utc_timestamp(), "machine": machine_info(), "search": repr(search)}
    studies = args.studies.split(",")
    kinds = [k for k in ("calibration", "recovery", "structural") if k in studies]
    for kind in kinds:
        out[kind] = study_run(kind, truths, search)
    if "methods" in studies:
        out["methods"] = methods_run(starts, args.quick)
    for kind in kinds:
        s = out[kind]
        print(f"{kind}: success {s['success']}/{s['n']}, coverage {100 * s['coverage']:.0f} % "
              f"of {s['intervals']} intervals, median |error| of estimated parameters "
              f"{100 * s['median_abs_relative_error_estimated']:.1f} % (90th percentile "
              f"{100 * s['p90_abs_relative_error_estimated']:.0f} %), discrepancy flagged "
              f"{s['discrepancy_flags']}/{s['n']}, median {s['median_seconds']:.1f} s "
              "per fit")  # fmt: skip
        print("  by parameter (covered/estimated, median |error|): " + ", ".join(
            f"{n} {v['covered']}/{v['estimated']} {100 * v['median_abs_relative_error']:.0f} %"
            for n, v in s["by_parameter"].items()))  # fmt: skip
    if "methods" not in out:
        print(f"written: {write_json_atomic(args.out, out)}")
        return
    print_table(
        ["method", "success", "simulations (Jacobians at cost)", "median s", "loss / basin"],
        [[r["method"], f"{r['success']}/{r['n']}", f"{r['median_simulation_equivalents']:.0f}",
          f"{r['median_seconds']:.1f}", f"{r['median_loss_over_basin']:.2f}"]
         for r in out["methods"]["summary"]],
    )  # fmt: skip
    print(f"written: {write_json_atomic(args.out, out)}")


if __name__ == "__main__":
    main()
