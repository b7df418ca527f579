"""Benchmark: batches of the 3-D Medium Weight Shock Machine (test 1, joint coordinates, the 40
channel modes), many variants at once — the sweeps and population searches of a fit.

Each variant has its own hammer–anvil stiffness and channel modal damping (a grid over ×0.5–2
and 1–5 %); every run starts 1 mm below the anvil at the fall's speed and covers the blow and
``--window`` s after it, saved at 10 kHz, Tsit5 at rtol 1e-5 / atol 1e-8. Two ways, in one
process: ``diffmbs.simulate_batch`` (all variants in lockstep, one step size) and
``jax.vmap(simulate)`` (each its own steps), for batch sizes ``--sizes``, against the same
variants run one after another (the single run's time × the batch size). Wall times after
compile, median of ``--repeats``; the device is named in the JSON.

Usage::

    python benchmarks/mwsm3d_batch.py [--sizes 1,16,64] [--window 0.05] [--repeats 3]
                                      [--out benchmarks/results/mwsm3d_batch_cpu.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import diffmbs

diffmbs.configure()

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import machine_info, print_table, utc_timestamp, write_json_atomic  # noqa: E402

from diffmbs.integrate import simulate, simulate_batch  # noqa: E402
from diffmbs.models.mwsm3d import CHANNELS, mwsm3d  # noqa: E402

RATE = 10_000.0
OPTIONS = dict(rtol=1e-5, atol=1e-8, max_steps=50_000, throw=False)


def variants(machine, size: int):
    """The machine with ``size`` (impact stiffness, channel damping) pairs, leaves batched."""
    grid = np.linspace(0.0, 1.0, size)
    stiffness = float(machine.parameter("impact.stiffness")) * 2.0 ** (2 * grid - 1)
    damping = 0.01 + 0.04 * np.random.default_rng(0).permutation(grid)

    def one(k, zeta):
        model = machine.with_parameter("impact.stiffness", k)
        for name, *_ in CHANNELS:
            model = model.with_parameter(f"{name}.damping.ratios", zeta)
        return model

    return eqx.filter_vmap(one)(jnp.asarray(stiffness), jnp.asarray(damping))


def timed(fn, repeats: int) -> tuple[float, float, list[float]]:
    """``(first call s, median s, all s)`` of ``fn`` (results blocked on)."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    walls = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        walls.append(time.perf_counter() - t0)
    return first, float(np.median(walls)), walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,16,64")
    parser.add_argument("--window", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-vmap", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"
                                             / "mwsm3d_batch_cpu.json"))  # fmt: skip
    args = parser.parse_args()
    machine = mwsm3d(start="impact")
    q0, v0 = jax.jit(type(machine).initial_state)(machine)
    ts = jnp.arange(int(round(args.window * RATE)) + 1) / RATE
    single = lambda: simulate(machine, q0, v0, ts, **OPTIONS).sensors  # noqa: E731
    first, one_run, _ = timed(single, args.repeats)
    rows = [{"way": "simulate", "size": 1, "first_call_s": first, "wall_s": one_run,
             "per_simulation_ms": 1e3 * one_run, "vs_one_by_one": 1.0}]  # fmt: skip
    for size in (int(s) for s in args.sizes.split(",")):
        batch = variants(machine, size)
        ways = {"simulate_batch": lambda b=batch: simulate_batch(
            b, q0, v0, ts, system_axes=eqx.if_array(0), **OPTIONS).sensors}  # fmt: skip
        if not args.skip_vmap:
            ways["vmap(simulate)"] = lambda b=batch: eqx.filter_vmap(
                lambda m: simulate(m, q0, v0, ts, **OPTIONS).sensors)(b)  # fmt: skip
        for way, fn in ways.items():
            first, wall, walls = timed(fn, args.repeats)
            rows.append({"way": way, "size": size, "first_call_s": first, "wall_s": wall,
                         "walls_s": walls, "per_simulation_ms": 1e3 * wall / size,
                         "vs_one_by_one": one_run * size / wall})  # fmt: skip
            print(rows[-1], flush=True)
    print_table(["way", "variants", "first call s", "wall s", "ms / simulation",
                 "× one by one"],
                [[r["way"], r["size"], f"{r['first_call_s']:.1f}", f"{r['wall_s']:.3f}",
                  f"{r['per_simulation_ms']:.1f}", f"{r['vs_one_by_one']:.1f}"]
                 for r in rows])  # fmt: skip
    result = {"machine": machine_info(), "device": str(jax.devices()[0].device_kind),
              "utc": utc_timestamp(), "window_s": args.window, "rate_hz": RATE,
              "options": {k: v for k, v in OPTIONS.items() if k != "throw"}, "rows": rows}
    write_json_atomic(args.out, result)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
