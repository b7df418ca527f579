"""Benchmark: gears (issue 28) — the ship gearbox's start from rest against SciPy on the same
equations, the gear rig's gradient against its forward run, and a batch of rig variants
against a loop.

* **The gearbox's start** (``diffmbs.models.ship_gearbox``, from rest, ``--t-end`` s, default
  the study's 8 s). Accuracy is the largest error of the pinion's speed over the run against a
  reference by diffmbs (Tsit5, rtol 1e-10). Each integrator runs at the loosest rtol of 1e-5,
  1e-6, … (atol = rtol/100) whose error is ≤ ``--target`` (rad/s); diffmbs is then timed
  (median of ``--repeats`` after compile). **SciPy** ``solve_ivp`` (LSODA, Radau) on
  diffmbs's own equations — a ``jax.jit`` vector field and its ``jax.jacfwd`` Jacobian, NumPy in
  and out — one timed run each. Bar: diffmbs faster.
* **Gradient ÷ forward** on the gear rig (``diffmbs.models.gear_rig``, 60 ms, rtol 1e-8):
  ``jax.grad`` of the mean squared transmission error with respect to the mesh's stiffness,
  damping, allowance and friction, against the forward simulation and loss, interleaved,
  ``max_steps`` twice the forward's steps (it sizes the adjoint's store). Bar: ≤ 4×.
* **Batch**: 64 rig variants (stiffness ±20 %) by ``simulate_batch`` (lockstep) against the 64
  run one after another (the single run's median × 64).
* **Mesh contact**: the rig under a steady 20 N·m (no ripple), 0.1 s at rtol 1e-8, with the
  analytic element, with faceted teeth (``FacetedGearMesh``, 16, 32, 64 vertices a flank) and
  with rigid-elastic teeth (``RigidElasticGearMesh``, ``gear_rig(elastic_teeth=True)``):
  wall time after compile, steps, and after the first 20 ms the mesh load's mean and standard
  deviation, its rms difference from the analytic element's, and the transmission error's mean
  and peak-to-peak — the ripple coarse tooth meshes give. And the gearbox running steadily at
  its nominal speed (0.2 s, rtol 1e-7) with analytic and faceted (16, 32) teeth: wall time,
  the teeth's efficiency, the load.

Usage::

    python benchmarks/gears.py [--t-end 8] [--repeats 3] [--out benchmarks/results/gears.json]
    python benchmarks/gears.py --mesh-only    # the mesh-contact sections into the same JSON
    python benchmarks/gears.py --start-only   # the gearbox's start against SciPy, the same way
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import diffmbs
from diffmbs.models.gear_rig import gear_rig
from diffmbs.models.ship_gearbox import NOMINAL_SPEED, ship_gearbox
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

RTOLS = (1e-5, 1e-6, 1e-7, 1e-8, 1e-9)
MESH = ("mesh.stiffness", "mesh.damping", "mesh.allowance", "mesh.mu")
BATCH = 64


def gearbox_start(args, out) -> None:
    model = ship_gearbox()
    q0, v0 = model.initial_state()
    nq = q0.size
    ts = jnp.linspace(0.0, args.t_end, round(20 * args.t_end) + 1)

    def run(rtol):
        sol = diffmbs.simulate(model, q0, v0, ts, rtol=rtol, atol=rtol / 100,
                               max_steps=5_000_000)  # fmt: skip
        return sol.sensors["pinion_speed"][:, 2], sol.stats["num_steps"]

    reference = np.asarray(jax.jit(lambda: run(1e-10))()[0])

    def error(y):
        return float(np.max(np.abs(np.asarray(y) - reference)))

    tries = []
    for rtol in RTOLS:
        compile_s, (y, steps) = first_call(jax.jit(lambda r=rtol: run(r)))
        tries.append({"rtol": rtol, "error_rad_s": error(y), "steps": int(steps)})
        print(f"diffmbs: rtol {rtol:g}, error {tries[-1]['error_rad_s']:.2e} rad/s")
        if tries[-1]["error_rad_s"] <= args.target:
            break
    rtol = tries[-1]["rtol"]
    timing = time_median(jax.jit(lambda: run(rtol)), repeats=args.repeats)
    out["diffmbs"] = {"tries": tries, "rtol": rtol, "compile_s": compile_s, **timing}

    @jax.jit
    def field(t, y):
        q, v = y[:nq], y[nq:]
        vdot = accelerations(model, t, q, v, kkt_solver=model.default_kkt_solver(), check=False)[0]
        return jnp.concatenate([model.qdot(q, v), vdot])

    jacobian = jax.jit(jax.jacfwd(field, argnums=1))
    y0 = np.concatenate([np.asarray(q0), np.asarray(v0)])
    np.asarray(field(0.0, y0)), np.asarray(jacobian(0.0, y0))  # compile
    out["scipy"] = {"rhs_call": time_median(lambda: np.asarray(field(0.0, y0)), repeats=50),
                    "methods": {}}  # fmt: skip
    spin = model.v_slice("pinion").start + 5  # the pinion's ω_z in v
    for method in ("LSODA", "Radau"):
        tries = []
        for rtol_s in RTOLS:
            t0 = time.perf_counter()
            sol = solve_ivp(lambda t, y: np.asarray(field(t, y)), (0.0, args.t_end), y0,
                            method=method, t_eval=np.asarray(ts), rtol=rtol_s,
                            atol=rtol_s / 100,
                            jac=lambda t, y: np.asarray(jacobian(t, y)))  # fmt: skip
            wall = time.perf_counter() - t0
            err = error(sol.y[nq + spin]) if sol.success else float("inf")
            tries.append({"rtol": rtol_s, "error_rad_s": err, "nfev": int(sol.nfev),
                          "njev": int(sol.njev), "wall_s": wall, "success": bool(sol.success)})
            print(f"SciPy {method}: rtol {rtol_s:g}, error {err:.2e} rad/s, {wall:.1f} s")
            if err <= args.target or wall > args.scipy_budget:
                break
        out["scipy"]["methods"][method] = {"tries": tries, "matched": tries[-1]}
    matched = [m["matched"] for m in out["scipy"]["methods"].values()
               if m["matched"]["error_rad_s"] <= args.target]  # fmt: skip
    best = min((m["wall_s"] for m in matched), default=float("inf"))
    out["speedup_vs_scipy"] = best / out["diffmbs"]["median_s"]
    out["bar_faster_than_scipy"] = pass_fail(out["speedup_vs_scipy"] > 1.0)


def rig_gradient_and_batch(args, out) -> None:
    model = gear_rig(stiffness=2.0e8, damping=2500.0, allowance=4e-5, mu=0.06)
    q0, v0 = model.initial_state()
    ts = jnp.linspace(0.0, 0.06, 1201)
    options = dict(rtol=1e-8, atol=1e-11, max_steps=40_000)
    steps = int(diffmbs.simulate(model, q0, v0, ts, **options).stats["num_steps"])

    def loss(x):
        m = model
        for name, value in zip(MESH, x, strict=True):
            m = m.with_parameter(name, value)
        sol = diffmbs.simulate(m, q0, v0, ts, **{**options, "max_steps": 2 * steps})
        return jnp.mean(sol.sensors["mesh_output"][:, 1] ** 2)

    x0 = jnp.array([float(model.parameter(name)) for name in MESH])
    value, grad = jax.jit(loss), jax.jit(jax.grad(loss))
    compile_grad_s, _ = first_call(lambda: grad(x0))
    first_call(lambda: value(x0))
    timed = time_interleaved({"forward": lambda: value(x0), "gradient": lambda: grad(x0)},
                             repeats=args.repeats)  # fmt: skip
    ratio = timed["gradient"]["median_s"] / timed["forward"]["median_s"]
    out["gradient"] = {**timed, "ratio": ratio, "compile_s": compile_grad_s, "steps": steps,
                       "parameters": MESH, "bar": 4.0,
                       "result": pass_fail(ratio <= 4.0)}  # fmt: skip

    stiffness = 2.0e8 * np.linspace(0.8, 1.2, BATCH)
    batch = eqx.filter_vmap(lambda k: model.with_parameter("mesh.stiffness", k))(
        jnp.asarray(stiffness))  # fmt: skip
    single = jax.jit(lambda: diffmbs.simulate(model, q0, v0, ts, **options).sensors)
    lockstep = jax.jit(lambda: diffmbs.simulate_batch(
        batch, q0, v0, ts, system_axes=eqx.if_array(0), **options).sensors)  # fmt: skip
    first_call(single)
    compile_batch_s, _ = first_call(lockstep)
    one = time_median(single, repeats=args.repeats)
    many = time_median(lockstep, repeats=args.repeats)
    out["batch"] = {"size": BATCH, "single": one, "batch": many, "compile_s": compile_batch_s,
                    "loop_s": BATCH * one["median_s"],
                    "speedup": BATCH * one["median_s"] / many["median_s"]}  # fmt: skip


def mesh_contact(args, out) -> None:
    ts = jnp.linspace(0.0, 0.1, 2001)
    settled = ts > 0.02
    runs, reference = {}, None
    for points in (None, 16, 32, 64, "elastic"):
        model = (gear_rig(ripple_torque=0.0, elastic_teeth=True) if points == "elastic"
                 else gear_rig(ripple_torque=0.0, mesh_points=points))  # fmt: skip
        q0, v0 = model.initial_state()
        run = jax.jit(lambda m=model, q0=q0, v0=v0: diffmbs.simulate(
            m, q0, v0, ts, rtol=1e-8, atol=1e-11, max_steps=400_000))  # fmt: skip
        compile_s, sol = first_call(run)
        timed = time_median(run, repeats=args.repeats)
        load, error = (np.asarray(sol.sensors["mesh_output"][settled, i]) for i in (0, 1))
        reference = load if points is None else reference
        name = {None: "analytic", "elastic": "rigid-elastic"}.get(points, f"faceted {points}")
        runs[name] = {
            **timed, "compile_s": compile_s, "steps": int(sol.stats["num_steps"]),
            "load_mean_N": float(load.mean()), "load_std_N": float(load.std()),
            "load_rms_difference_N": float(np.sqrt(np.mean((load - reference) ** 2))),
            "te_mean_m": float(error.mean()), "te_peak_to_peak_m": float(np.ptp(error))}
    out["mesh_contact"] = {"t_end_s": 0.1, "settled_after_s": 0.02, "rtol": 1e-8,
                           "mean_torque_Nm": 20.0, "runs": runs}  # fmt: skip
    print_table(["mesh", "wall 0.1 s (s)", "steps", "load mean ± std (N)",
                 "rms from analytic (N)", "TE mean, p-p (µm)"],
                [[name, f"{r['median_s']:.2f} ({r['min_s']:.2f}–{r['max_s']:.2f})",
                  str(r["steps"]), f"{r['load_mean_N']:.0f} ± {r['load_std_N']:.0f}",
                  f"{r['load_rms_difference_N']:.0f}",
                  f"{1e6 * r['te_mean_m']:.2f}, {1e6 * r['te_peak_to_peak_m']:.2f}"]
                 for name, r in runs.items()])  # fmt: skip


def gearbox_mesh(args, out) -> None:
    """The gearbox running steadily at its nominal speed, 0.2 s (rtol 1e-7): the analytic
    element against faceted teeth — wall time, steps, the teeth's efficiency and the load."""
    ts = jnp.linspace(0.0, 0.2, 2001)
    late = np.asarray(ts) > 0.05
    runs = {}
    for points in (None, 16, 32):
        model = ship_gearbox(initial_speed=NOMINAL_SPEED, ramp_s=1e-3, slices=4,
                             mesh_points=points)  # fmt: skip
        q0, v0 = model.initial_state()
        run = jax.jit(lambda m=model, q0=q0, v0=v0: diffmbs.simulate(
            m, q0, v0, ts, rtol=1e-7, atol=1e-9, max_steps=400_000).sensors)  # fmt: skip
        compile_s, sensors = first_call(run)
        timed = time_median(run, repeats=args.repeats)
        pinion, wheel = (np.asarray(sensors[f"{g}_speed"])[late, 2] for g in ("pinion", "wheel"))
        engine = np.asarray(sensors["engine_output"])[late, 2] * pinion
        propeller = -np.asarray(sensors["propeller_output"])[late, 2] * wheel
        load = sum(np.asarray(sensors[f"mesh_{side}_output"])[late, 0]
                   for side in ("left", "right"))  # fmt: skip
        runs["analytic" if points is None else f"faceted {points}"] = {
            **timed, "compile_s": compile_s, "efficiency": float(propeller.mean() / engine.mean()),
            "load_mean_N": float(load.mean()), "load_std_N": float(load.std())}
    out["gearbox_mesh"] = {"t_end_s": 0.2, "settled_after_s": 0.05, "rtol": 1e-7, "slices": 4,
                           "runs": runs}  # fmt: skip
    print_table(["gearbox's teeth", "wall 0.2 s (s)", "efficiency", "load mean ± std (kN)"],
                [[name, f"{r['median_s']:.1f} ({r['min_s']:.1f}–{r['max_s']:.1f})",
                  f"{100 * r['efficiency']:.2f} %",
                  f"{r['load_mean_N'] / 1e3:.1f} ± {r['load_std_N'] / 1e3:.1f}"]
                 for name, r in runs.items()])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--t-end", type=float, default=8.0, help="s of the gearbox's start")
    parser.add_argument("--target", type=float, default=1e-3, help="rad/s: the pinion's speed")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scipy-budget", type=float, default=1800.0,
                        help="s: a SciPy method stops tightening past this wall time")  # fmt: skip
    parser.add_argument("--out", default="benchmarks/results/gears.json")
    parser.add_argument("--mesh-only", action="store_true",
                        help="only the mesh-contact sections, into --out's other results")
    parser.add_argument("--start-only", action="store_true",
                        help="only the gearbox's start against SciPy, into --out's other results")
    args = parser.parse_args()
    if args.mesh_only or args.start_only:
        out = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}
        sections = {"mesh_contact": mesh_contact, "gearbox_mesh": gearbox_mesh} if (
            args.mesh_only) else {"start": gearbox_start}  # fmt: skip
        for name, section in sections.items():
            section(args, out)
            key = name if name != "start" else "diffmbs"
            out[key]["machine"], out[key]["date"] = machine_info(), utc_timestamp()
        if args.start_only:
            out["t_end_s"], out["target_rad_s"] = args.t_end, args.target
        write_json_atomic(args.out, out)
        return
    out = {"machine": machine_info(), "date": utc_timestamp(), "t_end_s": args.t_end,
           "target_rad_s": args.target}  # fmt: skip
    rig_gradient_and_batch(args, out)
    mesh_contact(args, out)
    gearbox_mesh(args, out)
    gearbox_start(args, out)
    d = out["diffmbs"]
    rows = [["diffmbs Tsit5", f"{d['rtol']:g}", f"{d['tries'][-1]['error_rad_s']:.1e}",
             f"{d['median_s']:.2f} ({d['min_s']:.2f}–{d['max_s']:.2f})",
             f"{d['tries'][-1]['steps']} steps"]]  # fmt: skip
    for method, m in out["scipy"]["methods"].items():
        t = m["matched"]
        rows.append([f"SciPy {method}", f"{t['rtol']:g}", f"{t['error_rad_s']:.1e}",
                     f"{t['wall_s']:.1f}", f"{t['nfev']} f, {t['njev']} J"])
    print_table(["integrator", "rtol", "speed error (rad/s)", f"wall {args.t_end:g} s (s)",
                 "work"], rows)  # fmt: skip
    g, b = out["gradient"], out["batch"]
    print(f"start: {out['speedup_vs_scipy']:.1f}× the faster matched SciPy "
          f"({out['bar_faster_than_scipy']}); rig gradient ÷ forward {g['ratio']:.2f} "
          f"({g['result']}); batch of {b['size']}: {b['batch']['median_s']:.2f} s against a loop "
          f"of {b['loop_s']:.1f} s ({b['speedup']:.1f}×)")  # fmt: skip
    write_json_atomic(args.out, out)


if __name__ == "__main__":
    main()
