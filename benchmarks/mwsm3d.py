"""Benchmark: the 3-D Medium Weight Shock Machine (diffmbs.models.mwsm3d) against the study's
times and SciPy on the same equations.

In one process:

1. **Forward, the study's test** (``--tests rigid:joint,rigid:full,flexible:joint``: equipment
   and coordinates): static equilibrium with the hammer held, release, 1.394 s of fall and
   0.5 s after the blow (1.894 s), saved at 10 kHz (outputs in chunks of 64), at the bundled
   jobs' rtol 1e-4 / atol 1e-7, with the machine's solver (Rosenbrock–W through 98 % of the
   fall, then Tsit5) and with Tsit5 throughout; first call (trace + compile + run) and the
   median of three runs after compile, against the study's 170 s (rigid equipment) and 550 s
   (flexible). Bar: ≥ 30× (≤ 5.7 s).
2. **Accuracy**: the top-face SRS (5 %, 10 Hz–2 kHz) of the 0.5 s after the blow (``start =
   "impact"``) at rtol 1e-4, 1e-5 and 1e-6: its change in dB when the tolerance is tightened 10×.
3. **SciPy** ``solve_ivp`` (Radau, LSODA) on the same equations of motion (the compiled
   right-hand side of ``diffmbs.system.accelerations`` in joint coordinates, called from SciPy
   with NumPy arrays) over
   the first ``--scipy-window`` s after the blow, against diffmbs on the same window, at
   matched SRS accuracy (the SRS of each against a tight diffmbs reference).
4. **Gradient** of a top-face SRS misfit with respect to 8 parameters over ``--gradient-window``
   s after the blow: reverse mode (``jax.grad``, the discrete adjoint) against the forward run;
   compile times and the ratio. Bar: ≤ 4×.

Usage::

    python benchmarks/mwsm3d.py [--tests rigid:joint] [--scipy-window 0.02]
                                [--gradient-window 0.02]
                                [--out benchmarks/results/mwsm3d.json]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import diffmbs

diffmbs.configure()

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    block_until_ready,
    first_call,
    machine_info,
    print_table,
    utc_timestamp,
    write_json_atomic,
)

from diffmbs.integrate import simulate  # noqa: E402
from diffmbs.models.mwsm3d import mwsm3d  # noqa: E402
from diffmbs.srs import shock_response_spectrum  # noqa: E402
from diffmbs.system import accelerations  # noqa: E402

STUDY_S = {"rigid": 170.0, "flexible": 550.0}  # SEEDS.md 002: 2 min 50 s and 9 min 10 s
RATE = 10_000.0
FREQS = np.geomspace(10.0, 2000.0, 48)
G = 9.80665


def _srs(accel: np.ndarray) -> np.ndarray:
    return np.asarray(shock_response_spectrum(jnp.asarray(accel) / G, 1.0 / RATE, FREQS))


def _times(duration: float):
    return jnp.arange(int(round(duration * RATE)) + 1) / RATE


RTOL, ATOL = 1e-4, 1e-7  # data/mwsm3d/*.toml
REPEATS = 3


def forward_test(equipment: str, coordinates: str, solver: str = "default") -> dict:
    machine = mwsm3d(equipment=equipment, coordinates=coordinates)
    init = jax.jit(type(machine).initial_state)
    compile_init, (q0, v0) = first_call(lambda: init(machine))
    ts = _times(1.894)
    chosen = {"default": None, "tsit5": diffrax.Tsit5()}[solver]

    def run():
        return simulate(machine, q0, v0, ts, rtol=RTOL, atol=ATOL, max_steps=400_000,
                        output_chunk=64, solver=chosen)  # fmt: skip

    first, sol = first_call(run)
    walls = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        sol = block_until_ready(run())
        walls.append(time.perf_counter() - t0)
    wall = float(np.median(walls))
    return {
        "equipment": equipment,
        "coordinates": coordinates,
        "solver": repr(machine.default_solver() if chosen is None else chosen),
        "rtol": RTOL,
        "atol": ATOL,
        "n_q": int(q0.shape[0]),
        "initial_state_first_call_s": compile_init,
        "simulate_first_call_s": first,
        "simulate_s": wall,
        "simulate_s_runs": walls,
        "steps": int(sol.stats["num_accepted_steps"]),
        "rejected": int(sol.stats["num_rejected_steps"]),
        "study_s": STUDY_S[equipment],
        "speedup": STUDY_S[equipment] / wall,
        "peak_g": float(np.max(np.abs(np.asarray(sol.sensors["equipment_acceleration"])[:, 2]))
                        / G),
    }  # fmt: skip


def accuracy() -> dict:
    machine = mwsm3d(start="impact")
    q0, v0 = jax.jit(type(machine).initial_state)(machine)
    ts = _times(0.5)
    out, spectra = {}, {}
    for rtol in (1e-4, 1e-5, 1e-6):
        t0 = time.perf_counter()
        sol = block_until_ready(simulate(machine, q0, v0, ts, rtol=rtol, atol=rtol * 1e-3,
                                         max_steps=400_000))  # fmt: skip
        spectra[rtol] = _srs(np.asarray(sol.sensors["equipment_acceleration"])[:, 2])
        out[f"rtol_{rtol:g}"] = {"wall_s_with_compile": time.perf_counter() - t0,
                                 "steps": int(sol.stats["num_accepted_steps"])}  # fmt: skip
    for loose, tight in ((1e-4, 1e-5), (1e-5, 1e-6)):
        db = 20 * np.log10(spectra[loose] / spectra[tight])
        out[f"srs_change_db_{loose:g}_to_{tight:g}"] = float(np.max(np.abs(db)))
    return out


def scipy_comparison(window: float) -> dict:
    from scipy.integrate import solve_ivp

    machine = mwsm3d(start="impact")
    q0, v0 = jax.jit(type(machine).initial_state)(machine)
    n_q = q0.shape[0]

    @jax.jit
    def rhs(t, y):
        q, v = y[:n_q], y[n_q:]
        vdot, _ = accelerations(machine, t, q, v, check=False)
        return jnp.concatenate([machine.qdot(q, v), vdot])

    def f(t, y):
        return np.asarray(rhs(t, jnp.asarray(y)))

    ts = _times(window)
    reference = simulate(machine, q0, v0, ts, rtol=1e-9, atol=1e-12, max_steps=400_000)
    ref_srs = _srs(np.asarray(reference.sensors["equipment_acceleration"])[:, 2])
    y0 = np.concatenate([np.asarray(q0), np.asarray(v0)])
    f(0.0, y0)  # compile
    rows = {}
    for method in ("Radau", "LSODA"):
        t0 = time.perf_counter()
        sol = solve_ivp(f, (0.0, window), y0, method=method, t_eval=np.asarray(ts), rtol=1e-6,
                        atol=1e-9)  # fmt: skip
        wall = time.perf_counter() - t0
        accel = np.array([np.asarray(rhs(t, jnp.asarray(y)))[n_q:] for t, y in
                          zip(sol.t, sol.y.T, strict=True)])  # fmt: skip
        # the top-face sensor from the states: through the model's sensors at each sample
        sensor = jax.vmap(lambda q, v, vd: machine.sensors(0.0, q, v, vd)[
            "equipment_acceleration"][2])  # fmt: skip
        a = np.asarray(sensor(jnp.asarray(sol.y[:n_q].T), jnp.asarray(sol.y[n_q:].T),
                              jnp.asarray(accel)))  # fmt: skip
        rows[method] = {"wall_s": wall, "nfev": int(sol.nfev), "success": bool(sol.success),
                        "srs_error_db": float(np.max(np.abs(20 * np.log10(_srs(a) / ref_srs))))}
    run = lambda: simulate(machine, q0, v0, ts, rtol=1e-6, atol=1e-9, max_steps=400_000)  # noqa: E731
    block_until_ready(run())
    t0 = time.perf_counter()
    sol = block_until_ready(run())
    wall = time.perf_counter() - t0
    rows["diffmbs Tsit5"] = {"wall_s": wall, "steps": int(sol.stats["num_accepted_steps"]),
                             "srs_error_db": float(np.max(np.abs(20 * np.log10(_srs(
                                 np.asarray(sol.sensors["equipment_acceleration"])[:, 2])
                                 / ref_srs))))}  # fmt: skip
    return {"window_s": window, **rows}


GRADIENT_PARAMETERS = ("impact.stiffness", "impact.damping", "lower_stops.stiffness",
                       "upper_stops.stiffness", "bed_springs.stiffness[2]",
                       "A_standard.damping.ratios", "B_standard.damping.ratios",
                       "clamp_A_standard_0.stiffness[2]")  # fmt: skip


def gradient(window: float) -> dict:
    machine = mwsm3d(start="impact")
    q0, v0 = jax.jit(type(machine).initial_state)(machine)
    ts = _times(window)
    p0 = jnp.array([float(np.asarray(machine.parameter(n))) for n in GRADIENT_PARAMETERS])
    target = jnp.asarray(np.full(FREQS.size, 50.0))

    def loss(z):
        model = machine
        for name, value in zip(GRADIENT_PARAMETERS, p0 * jnp.exp(z), strict=True):
            model = model.with_parameter(name, value)
        sol = simulate(model, q0, v0, ts, rtol=1e-6, atol=1e-9, max_steps=100_000)
        accel = sol.sensors["equipment_acceleration"][:, 2] / G
        spectrum = shock_response_spectrum(accel, 1.0 / RATE, FREQS, smooth=0.01)
        return jnp.mean((20 * jnp.log10(spectrum / target)) ** 2)

    z = jnp.zeros(len(GRADIENT_PARAMETERS))
    forward, grad = jax.jit(loss), jax.jit(jax.grad(loss))
    forward_compile, _ = first_call(lambda: forward(z))
    grad_compile, g = first_call(lambda: grad(z))
    times = {}
    for name, fn in (("forward", forward), ("gradient", grad)):
        t0 = time.perf_counter()
        block_until_ready(fn(z))
        times[name] = time.perf_counter() - t0
    return {"window_s": window, "parameters": list(GRADIENT_PARAMETERS),
            "forward_first_call_s": forward_compile, "gradient_first_call_s": grad_compile,
            "forward_s": times["forward"], "gradient_s": times["gradient"],
            "ratio": times["gradient"] / times["forward"],
            "finite": bool(np.all(np.isfinite(np.asarray(g))))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", default="rigid:joint,rigid:joint:tsit5,flexible:joint",
                        help="comma list of equipment:coordinates[:solver], solver 'default' "
                             "(the machine's: Rosenbrock-W through the fall, then Tsit5) or "
                             "'tsit5' (throughout)")  # fmt: skip
    parser.add_argument("--scipy-window", type=float, default=0.02)
    parser.add_argument("--gradient-window", type=float, default=0.02)
    parser.add_argument("--skip", default="", help="comma list of forward, accuracy, scipy, "
                                                   "gradient")  # fmt: skip
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "mwsm3d.json"))
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    result = {"machine": machine_info(), "utc": utc_timestamp()}
    if "forward" not in skip:
        result["forward"] = [forward_test(*t.split(":")) for t in args.tests.split(",")]
        print_table(["equipment", "coordinates", "solver", "q", "first call s",
                     "run s (median, min-max)", "steps", "study s", "speed-up"],
                    [[r["equipment"], r["coordinates"], r["solver"][:28], r["n_q"],
                      f"{r['simulate_first_call_s']:.1f}",
                      f"{r['simulate_s']:.1f} ({min(r['simulate_s_runs']):.1f}-"
                      f"{max(r['simulate_s_runs']):.1f})", r["steps"], r["study_s"],
                      f"{r['speedup']:.1f}×"] for r in result["forward"]])  # fmt: skip
    if "accuracy" not in skip:
        result["accuracy"] = accuracy()
        print(result["accuracy"])
    if "scipy" not in skip:
        result["scipy"] = scipy_comparison(args.scipy_window)
        print(result["scipy"])
    if "gradient" not in skip:
        result["gradient"] = gradient(args.gradient_window)
        print(result["gradient"])
    write_json_atomic(args.out, result)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
