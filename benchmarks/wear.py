"""Benchmark: wear of the four-bar's clearance joint (``diffmbs.models.four_bar``) over 100
crank turns, simulated whole and extrapolated by ``diffmbs.wear.predict_wear``.

The wear coefficients are raised (accelerated wear, ``--wear``: 1e-12 1/Pa on the bore, half
that on the journal) so that 100 cycles wear micrometres and the extrapolation's depth step
is what limits it. Measured, one run each after compile (the compile is reported apart):

* **whole**: 100 cycles simulated (``simulate``), the maps from the internal states — the
  reference profile, after the same settling cycle;
* **extrapolated**: ``predict_wear`` with 2 cycles per update and a depth step of
  ``--step`` (m), then with half that step: wall time, simulated cycles, cost per worn cycle,
  and each profile's largest difference from the reference, relative to the reference's
  deepest point.

Usage::

    python benchmarks/wear.py [--cycles 100] [--step 6e-8] [--out benchmarks/results/wear.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import diffmbs

diffmbs.configure()

from diffmbs import simulate, wear  # noqa: E402
from diffmbs.models.four_bar import four_bar_with_wear  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_info, print_table, utc_timestamp, write_json_atomic  # noqa: E402

OPTIONS = {"rtol": 1e-8, "atol": 1e-10, "max_steps": 400_000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--step", type=float, default=6e-8, help="depth step (m)")
    parser.add_argument("--wear", type=float, default=1e-12, help="bore's coefficient (1/Pa)")
    parser.add_argument("--rpm", type=float, default=300.0)
    default_out = Path(__file__).resolve().parent / "results" / "wear.json"
    parser.add_argument("--out", default=str(default_out))
    args = parser.parse_args()

    model = four_bar_with_wear(wear_coefficient=(args.wear, 0.5 * args.wear), speed_rpm=args.rpm)
    q0, v0 = model.initial_state()
    period = 60.0 / args.rpm
    cells = 120
    rows = model.internal_slices()["C"]
    wear_rows = slice(rows.stop - 2 * cells, rows.stop)
    started = time.perf_counter()
    settle = simulate(model, q0, v0, jnp.array([0.0, period]), **OPTIONS)
    compile_s = time.perf_counter() - started
    z = settle.internal[-1].at[wear_rows].set(0.0)  # the settling turn's wear discarded
    ts = period * (1.0 + jnp.arange(args.cycles + 1))
    started = time.perf_counter()
    whole = simulate(model.with_internal_state(z), settle.q[-1], settle.v[-1], ts, **OPTIONS)
    whole_s = time.perf_counter() - started
    reference = np.asarray(whole.internal[-1][wear_rows])
    deepest = float(reference.max())
    rows_out, results = [], {}
    rows_out.append(["simulated whole", f"{whole_s:.1f}", str(args.cycles),
                     f"{whole_s / args.cycles:.2f}", "reference", f"{deepest:.3e}"])  # fmt: skip
    for label, step in (("extrapolated", args.step), ("extrapolated, step / 2", args.step / 2)):
        kwargs = dict(element="C", period=period, cycles=args.cycles, settle_cycles=1,
                      cycles_per_update=2, max_depth_step=step, progress=False,
                      **OPTIONS)  # fmt: skip
        wear.predict_wear(model, q0, v0, **dict(kwargs, cycles=2))  # compile
        started = time.perf_counter()
        out = wear.predict_wear(model, q0, v0, **kwargs)
        wall = time.perf_counter() - started
        profile = np.concatenate([np.asarray(out.bore[-1]), np.asarray(out.journal[-1])])
        error = float(np.abs(profile - reference).max()) / deepest
        results[label] = {"step_m": step, "wall_s": wall, "schedule": list(out.schedule),
                          "simulated_cycles": out.simulated_cycles, "error": error,
                          "deepest_m": float(profile.max())}  # fmt: skip
        rows_out.append([label, f"{wall:.1f}", str(out.simulated_cycles),
                         f"{wall / args.cycles:.2f}", f"{100 * error:.1f} %",
                         f"{float(profile.max()):.3e}"])  # fmt: skip
    print_table(["run", "wall (s)", "simulated cycles", "s per worn cycle",
                 "largest profile difference / deepest", "deepest (m)"], rows_out)  # fmt: skip
    write_json_atomic(args.out, {
        "benchmark": "wear", "date": utc_timestamp(), "machine": machine_info(),
        "cycles": args.cycles, "rpm": args.rpm, "wear_coefficient": args.wear,
        "first_simulation_with_compile_s": compile_s, "whole_s": whole_s,
        "reference_deepest_m": deepest, "extrapolated": results,
    })  # fmt: skip
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
