"""Study: do the slider-crank fit's reported uncertainties cover its truth at their rate?

The record of ``data/slider_crank`` (``make_record.py``: another structure — joint coordinates,
bristle friction — and its own recorder run) is made again without noise, once; then
``--records`` noise realisations (2 % of its RMS, seeds 0, 1, …) are each fitted by
Levenberg–Marquardt on the whole record as ``data/slider_crank/fit.toml`` ends, started from
the truth (the job's global stage and bands find that basin: ``data/slider_crank/README.md``).
For each parameter: the mean and spread of (fitted − truth)/σ and how often the truth lies in
the reported 95 % interval. A mean well away from 0 is a bias of structure that σ (noise alone)
does not contain. ``--rtol``/``--atol`` run the fits at other tolerances than the job's:
at ``rtol = 1e-6`` the solver's step sequence scatters the fits by about one σ of the noise
(``identification._jitter``), which the reported σ then include.

Usage::

    python benchmarks/clearance_coverage.py [--records 20] [--rtol R --atol A] [--out FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

import diffmbs

diffmbs.configure()  # before make_record computes anything

import identification as idf  # noqa: E402
from diffmbs.app import load_job, problem_from_job  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "data" / "slider_crank"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, print_table, utc_timestamp, write_json_atomic  # noqa: E402
from make_record import NOISE, TRUTH, record  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--rtol", type=float, default=None, help="default: the job's")
    parser.add_argument("--atol", type=float, default=None, help="default: the job's")
    parser.add_argument("--out", default=None,
                        help="default results/clearance_coverage[_rtol<R>].json")  # fmt: skip
    args = parser.parse_args()

    job = load_job(ROOT / "data" / "slider_crank" / "fit.toml")
    tolerances = {k: v for k, v in (("rtol", args.rtol), ("atol", args.atol)) if v is not None}
    job = dataclasses.replace(job, simulation=dataclasses.replace(job.simulation, **tolerances))
    suffix = f"_rtol{args.rtol:g}" if args.rtol is not None else ""
    out = args.out or str(ROOT / "benchmarks" / "results" / f"clearance_coverage{suffix}.json")
    problem = problem_from_job(job)
    (experiment,) = problem.experiments
    ts = np.asarray(experiment.ts)
    started = time.perf_counter()
    record_ts, whole_clean, _ = record()  # 150 ms; the noise is 2 % of its RMS
    assert np.allclose(record_ts[: ts.size], ts)
    clean, full_rms = whole_clean[: ts.size], float(np.sqrt(np.mean(whole_clean**2)))
    names = problem.space.names
    truth = np.array([TRUTH[p.path] for p in problem.space.parameters])
    z_truth = problem.space.to_unconstrained(truth)
    rows = []
    for seed in range(args.records):
        noisy = clean + NOISE * full_rms * np.random.default_rng(seed).standard_normal(clean.size)
        realisation = idf.Problem(problem.space, [_with_measured(experiment, noisy)])
        result = idf.fit(realisation, idf.LevenbergMarquardt(), z0=z_truth,
                         max_iterations=args.iterations, progress=False)
        values = np.array([result.parameters[n] for n in names])
        z_scores = (values - truth) / result.std
        rows.append({"seed": seed, "values": values.tolist(), "std": result.std.tolist(),
                     "z": z_scores.tolist(), "loss": result.loss, "message": result.message,
                     "jitter_sigma": result.solver_jitter["sigma"].tolist()})
        print(f"seed {seed}: z = {np.round(z_scores, 2).tolist()}", flush=True)
    z = np.array([r["z"] for r in rows])
    table = []
    summary = {}
    for j, name in enumerate(names):
        inside = float(np.mean(np.abs(z[:, j]) <= 1.96))
        jitter = float(np.median([r["jitter_sigma"][j] for r in rows]))
        summary[name] = {"mean_z": float(z[:, j].mean()), "std_z": float(z[:, j].std(ddof=1)),
                         "coverage_95": inside, "median_jitter_sigma": jitter,
                         "relative_std": float(np.median([r["std"][j] for r in rows]) / truth[j])}
        table.append([name, f"{z[:, j].mean():+.2f}", f"{z[:, j].std(ddof=1):.2f}",
                      f"{100 * inside:.0f} %", f"{summary[name]['relative_std']:.2e}",
                      f"{jitter:.2f}"])
    print_table(["parameter", "mean z", "sd of z", "truth in 95 % interval", "σ / truth",
                 "jitter / noise σ"], table)  # fmt: skip
    write_json_atomic(out, {"study": "clearance_coverage", "date": utc_timestamp(),
                            "machine": machine_info(), "records": args.records,
                            "rtol": job.simulation.rtol, "atol": job.simulation.atol,
                            "wall_s": time.perf_counter() - started,
                            "summary": summary, "fits": rows})
    print(f"wrote {out}")


def _with_measured(experiment, measured):
    return idf.TimeHistoryExperiment(
        experiment.name, experiment.model, experiment.sensor, experiment.ts, measured,
        experiment.weights, None, experiment.simulate_kwargs, experiment.recorder)


if __name__ == "__main__":
    main()
