"""Benchmark: forward-mode Jacobians carried along the state's steps (``diffrax.ForwardMode``)
against the same under error control (``diffmbs.ForwardSensitivity``): cost and accuracy.

Cases, each a fit's Jacobian ``∂r/∂z`` at the job's start:

* **lumped MWSM** — ``data/mwsm/fit_demo.toml`` (SRS residuals of two tests, its parameters):
  a problem where carried tangents are right;
* **stick–slip block** — the block on a belt of ``tests/test_forward_sensitivity.py`` (x(t),
  ln stiffness and ln friction): one where they are not.

Reported per case and method: median wall time of the Jacobian after compile (spread: min–max of
``--repeats``), and its largest relative column error against central differences (step 1e-3 in
z) of residuals simulated at rtol ``--reference-rtol``.

Usage::

    python benchmarks/forward_sensitivity.py [--repeats 3] [--out results/....json]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import diffmbs

diffmbs.configure()

from diffmbs.app import load_job, problem_from_job  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    machine_info,
    print_table,
    time_median,
    utc_timestamp,
    write_json_atomic,
)
from test_forward_sensitivity import RTOL, THETA, displacement  # noqa: E402

METHODS = {"carried (ForwardMode)": diffrax.ForwardMode, "controlled (ForwardSensitivity)":
           diffmbs.ForwardSensitivity}  # fmt: skip


def column_error(jacobian: np.ndarray, reference: np.ndarray) -> float:
    norms = np.linalg.norm(reference, axis=0)
    return float(np.max(np.linalg.norm(jacobian - reference, axis=0) / norms))


def mwsm_case(reference_rtol: float):
    """``(jacobian_of(method) -> fn, reference (m, p))`` of the demo job's problem."""
    job = load_job(ROOT / "data" / "mwsm" / "fit_demo.toml")
    z0 = jnp.asarray(job.parameters.to_unconstrained(
        jnp.asarray([p.initial for p in job.parameters.parameters])))  # fmt: skip

    def problem_with(derivatives: str, rtol: float | None = None):
        simulation = dataclasses.replace(job.simulation, derivatives=derivatives,
                                         rtol=rtol or job.simulation.rtol)  # fmt: skip
        return problem_from_job(dataclasses.replace(job, simulation=simulation))

    def jacobian_of(method):
        problem = problem_with("steps" if method is diffrax.ForwardMode else "controlled")
        return lambda: eqx.filter_jit(lambda p, z: p.jacobian(z))(problem, z0)

    precise = problem_with("steps", reference_rtol)
    residuals = eqx.filter_jit(lambda p, z: p.residuals(z))
    step = 1e-3
    columns = [(np.asarray(residuals(precise, z0 + step * e))
                - np.asarray(residuals(precise, z0 - step * e))) / (2 * step)
               for e in np.eye(z0.size)]  # fmt: skip
    reference = np.stack(columns, axis=1)
    return jacobian_of, reference


def block_case(reference_rtol: float):
    step = 1e-5
    reference = np.stack([
        (np.asarray(displacement(THETA + step * e, reference_rtol))
         - np.asarray(displacement(THETA - step * e, reference_rtol))) / (2 * step)
        for e in np.eye(2)], axis=1)  # fmt: skip

    def jacobian_of(method):
        run = eqx.filter_jit(jax.jacfwd(lambda p: displacement(p, RTOL, method())))
        return lambda: run(THETA)

    return jacobian_of, reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reference-rtol", type=float, default=1e-11)
    default_out = Path(__file__).resolve().parent / "results" / "forward_sensitivity.json"
    parser.add_argument("--out", default=str(default_out))
    args = parser.parse_args()

    rows = []
    for case, build in (("lumped MWSM (demo job)", mwsm_case),
                        ("stick-slip block", block_case)):  # fmt: skip
        jacobian_of, reference = build(args.reference_rtol)
        for label, method in METHODS.items():
            run = jacobian_of(method)
            timing = time_median(run, repeats=args.repeats)
            jacobian = np.asarray(run())
            rows.append({"case": case, "method": label, "median_s": timing["median_s"],
                         "min_s": timing["min_s"], "max_s": timing["max_s"],
                         "column_error": column_error(jacobian, reference)})  # fmt: skip
    print_table(
        ["case", "derivatives", "Jacobian (s)", "spread (s)", "largest column error"],
        [[r["case"], r["method"], f"{r['median_s']:.2f}", f"{r['min_s']:.2f}–{r['max_s']:.2f}",
          f"{r['column_error']:.2g}"] for r in rows],
    )  # fmt: skip
    write_json_atomic(args.out, {"benchmark": "forward_sensitivity", "date": utc_timestamp(),
                                 "machine": machine_info(), "rows": rows})  # fmt: skip


if __name__ == "__main__":
    main()
