"""Benchmark: the 3-D slider-crank of SEEDS 001 with 0.5 mm of clearance in the crank bearing
(``diffmbs.models.slider_crank``), 1 s simulated, against SciPy on the same equations.

* **Matched accuracy.** Impacts make the motion chaotic: two correct solutions at different
  tolerances part after a few hundred milliseconds, so accuracy is measured where it is defined,
  on the slider's position over the first ``--window`` s (the journal's first impacts), against
  a reference run by diffmbs (Tsit5, rtol 1e-11). Each integrator runs at the loosest rtol of
  1e-5, 1e-6, … (atol = rtol/1000) whose error there is ≤ ``--target`` (10 µm, 2 % of the
  clearance); then the whole second
  is timed at that rtol.
* **diffmbs**: ``simulate`` (Tsit5, the default adjoint), jitted, median and spread of
  ``--repeats`` runs after compile; steps taken.
* **SciPy** ``solve_ivp`` (LSODA and Radau) on diffmbs's own index-1 equations (the model's
  KKT strategy, the augmented Lagrangian): a ``jax.jit`` vector field and its ``jax.jacfwd``
  Jacobian, NumPy in and out (the same equations, so the comparison is of the integrators and
  their overheads). One timed run each.
* **Gradient ÷ forward**: ``jax.grad`` of the mean squared slider acceleration over the second
  with respect to (clearance, contact stiffness, contact damping), against the forward
  simulation and loss, timed in turn, both with ``max_steps`` twice the steps the forward
  took (it sizes the adjoint's store). Bar: ≤ 4×.
* **Exudyn**: not run — it has no revolute joint with clearance; it would need the force as a
  Python user function, which is not the same program. Recorded as such.

Usage::

    python benchmarks/slider_crank.py [--repeats 5] [--out benchmarks/results/slider_crank.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import diffmbs
from diffmbs.models.slider_crank import CLEARANCE, slider_crank
from diffmbs.system import accelerations

diffmbs.configure()

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    first_call,
    machine_info,
    pass_fail,
    print_table,
    time_interleaved,
    time_median,
    utc_timestamp,
    write_json_atomic,
)

T_END, SAMPLES = 1.0, 1001
RTOLS = (1e-5, 1e-6, 1e-7, 1e-8, 1e-9)
PARAMETERS = ("crank_bearing.clearance", "crank_bearing.stiffness", "crank_bearing.damping")
MAX_STEPS = 1_000_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--window", type=float, default=0.1, help="s: where accuracy is measured")
    parser.add_argument("--target", type=float, default=1e-5, help="m: slider position error")
    parser.add_argument("--out", default="benchmarks/results/slider_crank.json")
    args = parser.parse_args()

    model = slider_crank(CLEARANCE)
    q0, v0 = model.initial_state()
    nq = q0.size
    ts = jnp.linspace(0.0, T_END, SAMPLES)
    window = np.asarray(ts) <= args.window

    def run(rtol, m=model):
        sol = diffmbs.simulate(m, q0, v0, ts, rtol=rtol, atol=rtol / 1000, max_steps=MAX_STEPS)
        return sol.sensors["slider_position"][:, 1], sol.stats["num_steps"]

    reference = np.asarray(jax.jit(lambda: run(1e-11))()[0])

    def error(y):
        return float(np.max(np.abs(np.asarray(y)[window] - reference[window])))

    out = {"machine": machine_info(), "date": utc_timestamp(), "window_s": args.window,
           "target_m": args.target, "t_end_s": T_END}  # fmt: skip

    # ---- diffmbs at matched accuracy
    tries = []
    for rtol in RTOLS:
        compile_s, (y, steps) = first_call(jax.jit(lambda r=rtol: run(r)))
        tries.append({"rtol": rtol, "error_m": error(y), "steps": int(steps)})
        if tries[-1]["error_m"] <= args.target:
            break
    rtol = tries[-1]["rtol"]
    forward = jax.jit(lambda: run(rtol))
    timing = time_median(forward, repeats=args.repeats)
    out["diffmbs"] = {"tries": tries, "rtol": rtol, "compile_s": compile_s, **timing}
    print(f"diffmbs: rtol {rtol:g}, error {tries[-1]['error_m']:.2e} m, "
          f"{tries[-1]['steps']} steps, {timing['median_s']:.3f} s")  # fmt: skip

    # ---- SciPy on the same equations
    @jax.jit
    def field(t, y):
        q, v = y[:nq], y[nq:]
        vdot = accelerations(model, t, q, v, kkt_solver=model.default_kkt_solver(), check=False)[0]
        return jnp.concatenate([model.qdot(q, v), vdot])

    jacobian = jax.jit(jax.jacfwd(field, argnums=1))
    y0 = np.concatenate([np.asarray(q0), np.asarray(v0)])
    np.asarray(field(0.0, y0)), np.asarray(jacobian(0.0, y0))  # compile
    rhs_call = time_median(lambda: np.asarray(field(0.0, y0)), repeats=50)
    out["scipy"] = {"rhs_call": rhs_call, "methods": {}}
    slider_y = model.q_slice("slider").start + 1  # the slider's y in q
    for method in ("LSODA", "Radau"):
        tries = []
        for rtol_s in RTOLS:
            t0 = time.perf_counter()
            sol = solve_ivp(lambda t, y: np.asarray(field(t, y)), (0.0, T_END), y0,
                            method=method, t_eval=np.asarray(ts), rtol=rtol_s,
                            atol=rtol_s / 1000,
                            jac=lambda t, y: np.asarray(jacobian(t, y)))  # fmt: skip
            wall = time.perf_counter() - t0
            err = error(sol.y[slider_y]) if sol.success else float("inf")
            tries.append({"rtol": rtol_s, "error_m": err, "nfev": int(sol.nfev),
                          "njev": int(sol.njev), "wall_s": wall, "success": bool(sol.success)})
            print(f"SciPy {method}: rtol {rtol_s:g}, error {err:.2e} m, {wall:.1f} s")
            if err <= args.target:
                break
        out["scipy"]["methods"][method] = {"tries": tries, "matched": tries[-1]}

    # ---- gradient / forward; max_steps sizes the adjoint's store: twice the steps taken keeps
    # the stage increments in memory (DiscreteAdjoint's "stored stages"), where a budget of
    # 1e6 steps would make the backward pass recompute them (ratio 6.8 against 3.9 on 0.3 s)
    gradient_max_steps = 2 * int(out["diffmbs"]["tries"][-1]["steps"])

    def loss(x):
        m = model
        for name, value in zip(PARAMETERS, x, strict=True):
            m = m.with_parameter(name, value)
        sol = diffmbs.simulate(m, q0, v0, ts, rtol=rtol, atol=rtol / 1000,
                               max_steps=gradient_max_steps)  # fmt: skip
        return jnp.mean(sol.sensors["slider_acceleration"][:, 1] ** 2)

    x0 = jnp.array([float(model.parameter(name)) for name in PARAMETERS])
    value = jax.jit(loss)
    grad = jax.jit(jax.grad(loss))
    compile_grad_s, _ = first_call(lambda: grad(x0))
    first_call(lambda: value(x0))
    timed = time_interleaved({"forward": lambda: value(x0), "gradient": lambda: grad(x0)},
                             repeats=args.repeats)  # fmt: skip
    ratio = timed["gradient"]["median_s"] / timed["forward"]["median_s"]
    out["gradient"] = {**timed, "ratio": ratio, "compile_s": compile_grad_s,
                       "parameters": PARAMETERS, "max_steps": gradient_max_steps, "bar": 4.0,
                       "result": pass_fail(ratio <= 4.0)}  # fmt: skip
    out["exudyn"] = {"run": False, "reason": "no revolute joint with clearance in Exudyn; a "
                     "Python user-function force would not be the same program"}  # fmt: skip

    best_scipy = min(m["matched"]["wall_s"] for m in out["scipy"]["methods"].values())
    out["speedup_vs_scipy"] = best_scipy / out["diffmbs"]["median_s"]
    out["bar_faster_than_scipy"] = pass_fail(out["speedup_vs_scipy"] > 1.0)
    rows = [["diffmbs Tsit5", f"{rtol:g}", f"{out['diffmbs']['tries'][-1]['error_m']:.1e}",
             f"{out['diffmbs']['median_s']:.3f} ({out['diffmbs']['min_s']:.3f}–"
             f"{out['diffmbs']['max_s']:.3f})", f"{out['diffmbs']['tries'][-1]['steps']} steps"]]
    for method, m in out["scipy"]["methods"].items():
        t = m["matched"]
        rows.append([f"SciPy {method}", f"{t['rtol']:g}", f"{t['error_m']:.1e}",
                     f"{t['wall_s']:.2f}", f"{t['nfev']} f, {t['njev']} J"])
    print_table(["integrator", "rtol", f"error ≤ {args.window} s (m)", "wall 1 s (s)", "work"],
                rows)  # fmt: skip
    print(f"speed-up against the faster SciPy: {out['speedup_vs_scipy']:.1f}× "
          f"({out['bar_faster_than_scipy']}); gradient ÷ forward {ratio:.2f} "
          f"({out['gradient']['result']}); compile {compile_s:.1f} s forward, "
          f"{compile_grad_s:.1f} s gradient")  # fmt: skip
    write_json_atomic(args.out, out)


if __name__ == "__main__":
    main()
