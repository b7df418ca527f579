"""Study: do the slider-crank fit's reported uncertainties cover its truth at their rate?

The record of ``data/slider_crank`` (``make_record.py``: another structure — joint coordinates,
bristle friction — and its own recorder run) is made again without noise, once; then
``--records`` noise realisations (2 % of its RMS, seeds 0, 1, …) are each fitted by
Levenberg–Marquardt on the whole record as ``data/slider_crank/fit.toml`` ends, started from
the truth (the job's global stage and bands find that basin: ``data/slider_crank/README.md``).
For each parameter: the mean and spread of (fitted − truth)/σ and how often the truth lies in
the reported 95 % interval. A mean well away from 0 is a bias of structure that σ (noise alone)
does not contain.

Usage::

    python benchmarks/clearance_coverage.py [--records 20] [--out results/clearance_coverage.json]
"""

from __future__ import annotations

import argparse
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
    default_out = ROOT / "benchmarks" / "results" / "clearance_coverage.json"
    parser.add_argument("--out", default=str(default_out))
    args = parser.parse_args()

    job = load_job(ROOT / "data" / "slider_crank" / "fit.toml")
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
                     "z": z_scores.tolist(), "loss": result.loss, "message": result.message})
        print(f"seed {seed}: z = {np.round(z_scores, 2).tolist()}", flush=True)
    z = np.array([r["z"] for r in rows])
    table = []
    summary = {}
    for j, name in enumerate(names):
        inside = float(np.mean(np.abs(z[:, j]) <= 1.96))
        summary[name] = {"mean_z": float(z[:, j].mean()), "std_z": float(z[:, j].std(ddof=1)),
                         "coverage_95": inside,
                         "relative_std": float(np.median([r["std"][j] for r in rows]) / truth[j])}
        table.append([name, f"{z[:, j].mean():+.2f}", f"{z[:, j].std(ddof=1):.2f}",
                      f"{100 * inside:.0f} %", f"{summary[name]['relative_std']:.2e}"])
    print_table(["parameter", "mean z", "sd of z", "truth in 95 % interval", "σ / truth"], table)
    write_json_atomic(args.out, {"study": "clearance_coverage", "date": utc_timestamp(),
                                 "machine": machine_info(), "records": args.records,
                                 "wall_s": time.perf_counter() - started,
                                 "summary": summary, "fits": rows})
    print(f"wrote {args.out}")


def _with_measured(experiment, measured):
    return idf.TimeHistoryExperiment(
        experiment.name, experiment.model, experiment.sensor, experiment.ts, measured,
        experiment.weights, None, experiment.simulate_kwargs, experiment.recorder)


if __name__ == "__main__":
    main()
