"""Study: do the slider-crank fit's reported uncertainties cover its truth at their rate?

The record of ``data/slider_crank`` (``make_record.py``: another structure — joint coordinates,
bristle friction — and its own recorder run) is made again without noise, once, and fitted
from the truth (Levenberg–Marquardt on the whole record, as ``data/slider_crank/fit.toml``
ends): that fit's offset from the truth, in σ, is the bias the structure leaves. Then

* ``--records`` noise realisations (2 % of the record's RMS, seeds 0, 1, …) are each fitted
  the same way (the job's global stage and bands find that basin: ``data/slider_crank/README.md``);
* ``--draws`` more realisations are "fitted" by the Gauss–Newton step from the clean fit,
  ``Δz = −J⁺ r``: what each full fit gives when the misfit is quadratic over the spread of the
  noise. The full fits check that (their difference from the step, in σ, is reported), and the
  draws give the coverage with a binomial error of ~0.5 % instead of ~5 % from 20 fits.

For each parameter: the mean and spread of (fitted − truth)/σ and how often the truth lies in
the reported 95 % interval. ``--rtol``/``--atol`` run the fits at other tolerances than the
job's: at ``rtol = 1e-6`` the solver's step sequence scatters the fits by about one σ of the
noise (``identification._jitter``), which the reported σ then include.

Usage::

    python benchmarks/clearance_coverage.py [--records 20] [--draws 2000] [--rtol R --atol A]
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
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--draws", type=int, default=2000)
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
    noise_of = lambda seed: (  # noqa: E731
        NOISE * full_rms * np.random.default_rng(seed).standard_normal(clean.size))
    clean_problem = idf.Problem(problem.space, [_with_measured(experiment, clean)])
    reference = idf.fit(clean_problem, idf.LevenbergMarquardt(), z0=z_truth,
                        max_iterations=args.iterations, progress=False)  # fmt: skip
    r_clean, jac = map(np.asarray, clean_problem.residuals_and_jacobian(reference.z))
    unit = (np.asarray(idf.Problem(problem.space, [_with_measured(experiment, clean + 1.0)])
                       .residuals(reference.z)) - r_clean)  # residual per unit of the record
    pinv = np.linalg.pinv(jac)

    def linearised(seed):
        return reference.z - pinv @ (r_clean + unit * noise_of(seed))

    rows = []
    for seed in range(args.records):
        noisy = clean + noise_of(seed)
        realisation = idf.Problem(problem.space, [_with_measured(experiment, noisy)])
        result = idf.fit(realisation, idf.LevenbergMarquardt(), z0=z_truth,
                         max_iterations=args.iterations, progress=False)  # fmt: skip
        values = np.array([result.parameters[n] for n in names])
        z_scores = (values - truth) / result.std
        step_gap = (result.z - linearised(seed)) / result.std_z
        rows.append({"seed": seed, "values": values.tolist(), "std": result.std.tolist(),
                     "std_z": result.std_z.tolist(),
                     "z": z_scores.tolist(), "gap_to_step": step_gap.tolist(),
                     "loss": result.loss, "message": result.message,
                     "jitter_sigma": result.solver_jitter["sigma"].tolist()})  # fmt: skip
        print(f"seed {seed}: z = {np.round(z_scores, 2).tolist()}, "
              f"gap to the step {np.round(step_gap, 2).tolist()}", flush=True)  # fmt: skip
    std_z = np.median([r["std_z"] for r in rows], axis=0)  # σ in the fit's coordinates z
    drawn = np.array([linearised(args.records + k) for k in range(args.draws)])
    z_drawn = (drawn - z_truth) / std_z
    z = np.array([r["z"] for r in rows])
    gap = np.abs(np.array([r["gap_to_step"] for r in rows])).max(axis=0)
    bias = (reference.z - z_truth) / std_z
    table, summary = [], {}
    for j, name in enumerate(names):
        inside = float(np.mean(np.abs(z[:, j]) <= 1.96))
        inside_drawn = float(np.mean(np.abs(z_drawn[:, j]) <= 1.96))
        relative = float(np.median([r["std"][j] for r in rows]) / truth[j])
        jitter = float(np.median([r["jitter_sigma"][j] for r in rows]))
        summary[name] = {"bias_z": float(bias[j]), "mean_z": float(z[:, j].mean()),
                         "std_z": float(z[:, j].std(ddof=1)), "coverage_95": inside,
                         "largest_gap_to_step": float(gap[j]),
                         "draws_std_z": float(z_drawn[:, j].std(ddof=1)),
                         "draws_coverage_95": inside_drawn, "median_jitter_sigma": jitter,
                         "relative_std": relative}  # fmt: skip
        table.append([name, f"{bias[j]:+.2f}", f"{z[:, j].mean():+.2f} / {z[:, j].std(ddof=1):.2f}",
                      f"{100 * inside:.0f} %", f"{gap[j]:.2f}",
                      f"{z_drawn[:, j].std(ddof=1):.2f}", f"{100 * inside_drawn:.1f} %",
                      f"{relative:.2e}", f"{jitter:.2f}"])  # fmt: skip
    print_table(["parameter", "bias (σ)", f"{args.records} fits: mean / sd of z", "covered",
                 "largest |fit − step| (σ)", f"{args.draws} steps: sd of z", "covered",
                 "σ / truth", "jitter / noise σ"], table)  # fmt: skip
    write_json_atomic(out, {"study": "clearance_coverage", "date": utc_timestamp(),
                            "machine": machine_info(), "records": args.records,
                            "draws": args.draws, "rtol": job.simulation.rtol,
                            "atol": job.simulation.atol,
                            "wall_s": time.perf_counter() - started,
                            "summary": summary, "fits": rows})  # fmt: skip
    print(f"wrote {out}")


def _with_measured(experiment, measured):
    return idf.TimeHistoryExperiment(
        experiment.name, experiment.model, experiment.sensor, experiment.ts, measured,
        experiment.weights, None, experiment.simulate_kwargs, experiment.recorder)


if __name__ == "__main__":
    main()
