"""Benchmark: gradients of the MWSM contact model (fidelity c) and fitting it to SRS data.

Model: :class:`diffmbs.models.mwsm.LumpedContactModel` (hammer, anvil, bed, equipment, Hunt–Crossley
impact and stops). Parameters θ = (impact.stiffness, impact.damping, k_channel, zeta_channel,
stops.stiffness, stops.damping), used in log space z = log θ. Loss everywhere: residuals
r = 20·log10(SRS_sim / SRS_ref) (dB, 5 % damped maximax SRS in g of the
``equipment_acceleration`` sensor), loss = mean(r²).

Three comparisons, in one process:

1. **Forward vs gradient** over 0.5 s saved at 20 kHz (10,001 samples), SRS 5 Hz–2 kHz at 12 per
   octave, reference curve = the model's own SRS at perturbed parameters: forward (simulate + SRS
   + loss), reverse-mode ``jax.grad`` (default ``DiscreteAdjoint``), forward-mode
   ``jax.jacfwd`` of the residual vector (``diffrax.ForwardMode``); ratios and compile times.
   Bar: gradient ≤ 4× forward. All timed functions are called in turn within each repeat
   (interleaved), so they see the same load drift.
2. **AD vs central finite differences**: one AD gradient against 2P = 12 forward runs (step h in
   log space), time and agreement.
3. **Fit vs derivative-free global optimisation** on the two synthetic tests of ``data/mwsm``
   (1 ft and 2 ft, shared θ, 0.15 s at 10 kHz): bounded Levenberg–Marquardt (J by ``jacfwd``)
   against ``scipy.optimize.differential_evolution`` (serial, and vectorised with ``jax.vmap``).
   Bar: LM needs ≥ 20× fewer simulations to reach 1.05 × the LM final loss.

Usage::

    python benchmarks/mwsm.py [--quick] [--repeats 5] [--cores N]
                              [--out benchmarks/results/mwsm.json]

``--cores 1`` runs XLA single-threaded (its thread pool is sized from the usable cores).

See benchmarks/README.md for what is counted and how.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import scipy
from scipy.optimize import differential_evolution

import diffmbs
import identification as idf
from diffmbs.adjoint import DiscreteAdjoint
from diffmbs.integrate import DEFAULT_MAX_STEPS
from diffmbs.models.mwsm import G, LumpedContactModel
from diffmbs.srs import octave_frequencies, shock_response_spectrum

diffmbs.configure()  # float64, XLA CPU options

sys.path.insert(0, str(Path(__file__).resolve().parent))  # script or python -m
from _common import (  # noqa: E402
    first_call,
    limit_cores,
    machine_info,
    markdown_table,
    pass_fail,
    time_interleaved,
    time_median,
    utc_timestamp,
    write_json_atomic,
)

PARAMS = ("impact.stiffness", "impact.damping", "k_channel", "zeta_channel", "stops.stiffness",
          "stops.damping")  # fmt: skip
# Box around the from_machine() defaults: θ0/f ≤ θ ≤ θ0·f (contact stiffnesses ±10×, others ±5×).
BOUND_FACTORS = {
    "impact.stiffness": 10.0,
    "impact.damping": 5.0,
    "k_channel": 5.0,
    "zeta_channel": 5.0,
    "stops.stiffness": 10.0,
    "stops.damping": 5.0,
}
DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "mwsm"
HEIGHTS_FT = (1.0, 2.0)
DAMPING = 0.05
DEFAULT_RTOL = 1e-8  # simulate's default
TIGHT_RTOL = 1e-11  # accuracy check of the gradient against FD (not timed)
FAIL_DB = 60.0  # residual (dB) given to every frequency of a failed simulation

# Case 1/2: fidelity (c), 0.5 s at 20 kHz.
GRAD_FS = 2e4
GRAD_N = 10_001
GRAD_FMIN, GRAD_FMAX, GRAD_PER_OCTAVE = 5.0, 2000.0, 12
REF_PERTURBATION = 0.2 * np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])  # log-space, reference θ
GRAD_BAR = 4.0

# Case 3: fit, 0.15 s at 10 kHz.
FIT_FS = 1e4
FIT_N = 1501
SPEEDUP_BAR = 20.0
TARGET_FACTOR = 1.05
SEED = 901


# --------------------------------------------------------------------------------- model + loss


def with_params(model: LumpedContactModel, z) -> LumpedContactModel:
    """``model`` with θ = exp(z) in the six parameter fields (order :data:`PARAMS`)."""
    for i, name in enumerate(PARAMS):
        model = model.with_parameter(name, jnp.exp(z[i]))
    return model


def default_log_params(model: LumpedContactModel) -> np.ndarray:
    return np.log(np.array([float(model.parameter(n)) for n in PARAMS]))


def log_bounds(z0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    half = np.log(np.array([BOUND_FACTORS[n] for n in PARAMS]))
    return z0 - half, z0 + half


def srs_db(
    model, z, ts, dt, freqs, *, adjoint=None, max_steps=DEFAULT_MAX_STEPS, rtol=DEFAULT_RTOL
):
    """(SRS in dB re 1 g at ``freqs``, success flag, solver step count) for parameters ``z``.

    Tolerances: ``rtol`` and ``atol = rtol / 100`` (simulate's defaults 1e-8, 1e-10)."""
    m = with_params(model, z)
    sol = diffmbs.simulate(
        m,
        *m.initial_state(),
        ts,
        adjoint=adjoint,
        max_steps=max_steps,
        rtol=rtol,
        atol=rtol * 1e-2,
        throw=False,
    )
    accel_g = sol.sensors["equipment_acceleration"] / G
    ok = sol.successful
    accel_g = jnp.where(ok, accel_g, 0.0)  # keep the SRS finite; the residual is replaced below
    srs = shock_response_spectrum(accel_g, dt, freqs, damping=DAMPING)
    return 20.0 * jnp.log10(srs), ok, sol.stats["num_steps"]


def make_residual(models, ts, dt, freqs, ref_db, *, adjoint=None, max_steps=None, rtol=None):
    """z ↦ concatenated dB residuals of all ``models`` against ``ref_db`` (one row per model)."""
    kw = {} if max_steps is None else {"max_steps": max_steps}
    if rtol is not None:
        kw["rtol"] = rtol

    def residual(z):
        parts = []
        for model, ref in zip(models, ref_db, strict=True):
            s, ok, _ = srs_db(model, z, ts, dt, freqs, adjoint=adjoint, **kw)
            parts.append(jnp.where(ok, s - ref, FAIL_DB))
        return jnp.concatenate(parts)

    return residual


def ms(seconds: float) -> str:
    return f"{1e3 * seconds:.1f}"


# --------------------------------------------------------------------------------- case 1 and 2


def fd_check_tight(model, ts, dt, freqs, ref_db, z0, fd_step_tight):
    """Untimed: AD gradient vs central FD, both at rtol 1e-11, where FD is not swamped by the
    adaptive step-size noise of rtol 1e-8."""
    res = make_residual([model], ts, dt, freqs, [ref_db], rtol=TIGHT_RTOL)

    def loss(z):
        return jnp.mean(res(z) ** 2)

    f, g = jax.jit(loss), jax.jit(jax.grad(loss))
    g_ad = np.asarray(g(jnp.asarray(z0)))
    eye = np.eye(len(PARAMS))
    g_fd = np.array(
        [
            (
                float(f(jnp.asarray(z0 + fd_step_tight * e)))
                - float(f(jnp.asarray(z0 - fd_step_tight * e)))
            )
            / (2.0 * fd_step_tight)
            for e in eye
        ]
    )
    rel = np.abs(g_ad - g_fd) / np.abs(g_fd)
    return {
        "rtol": TIGHT_RTOL,
        "fd_step_log": fd_step_tight,
        "grad_ad": g_ad.tolist(),
        "grad_fd": g_fd.tolist(),
        "rel_diff": rel.tolist(),
        "max_rel_diff": float(np.max(rel)),
    }


def bench_gradient(
    repeats: int, variants: bool, fd_step: float, tight_check: bool
) -> tuple[dict, list[str]]:
    model = LumpedContactModel.from_machine()  # 2 ft
    ts = jnp.arange(GRAD_N) / GRAD_FS
    dt = 1.0 / GRAD_FS
    freqs = octave_frequencies(GRAD_FMIN, GRAD_FMAX, GRAD_PER_OCTAVE)
    z0 = default_log_params(model)
    z_ref = z0 + REF_PERTURBATION
    ref_db, ok_ref, _ = jax.jit(lambda z: srs_db(model, z, ts, dt, freqs))(jnp.asarray(z_ref))
    if not bool(ok_ref):
        raise RuntimeError("reference simulation failed")
    ref_db = np.asarray(ref_db)
    zj = jnp.asarray(z0)

    residual = make_residual([model], ts, dt, freqs, [ref_db])
    residual_fwd_mode = make_residual(
        [model], ts, dt, freqs, [ref_db], adjoint=diffrax.ForwardMode()
    )

    def loss(z):
        return jnp.mean(residual(z) ** 2)

    f_loss = jax.jit(loss)
    f_grad = jax.jit(jax.grad(loss))
    f_jac = jax.jit(jax.jacfwd(residual_fwd_mode))
    f_steps = jax.jit(lambda z: srs_db(model, z, ts, dt, freqs)[2])

    rows, compile_s = [], {}
    timed = {"forward": f_loss, "grad_reverse": f_grad, "jacfwd_residual": f_jac}
    compile_s["forward"], loss0 = first_call(lambda: f_loss(zj))
    compile_s["grad_reverse"], g_ad = first_call(lambda: f_grad(zj))
    compile_s["jacfwd_residual"], jac = first_call(lambda: f_jac(zj))
    n_steps = int(f_steps(zj))
    g_ad = np.asarray(g_ad)
    # Gradient of the loss from the forward-mode Jacobian: (2/n) Jᵀ r.
    r0 = np.asarray(jax.jit(residual)(zj))
    g_from_jac = 2.0 / r0.size * np.asarray(jac).T @ r0

    labels = {
        "forward": "forward: simulate + SRS + loss",
        "grad_reverse": "jax.grad, default DiscreteAdjoint (max_steps 200,000)",
        "jacfwd_residual": f"jax.jacfwd of the {r0.size} residuals, ForwardMode",
    }
    extra = {}
    if variants:
        # Same gradient, other reverse-mode adjoints.
        for key, label, kw in (
            (
                "grad_reverse_sequential",
                "jax.grad, DiscreteAdjoint(jacobian_max_state=0): one vjp per step",
                {"adjoint": DiscreteAdjoint(jacobian_max_state=0)},
            ),
            (
                "grad_reverse_checkpointed",
                "jax.grad, diffrax RecursiveCheckpointAdjoint (max_steps 200,000)",
                {"adjoint": diffrax.RecursiveCheckpointAdjoint()},
            ),
        ):
            res_v = make_residual([model], ts, dt, freqs, [ref_db], **kw)
            f_v = jax.jit(jax.grad(lambda z, res_v=res_v: jnp.mean(res_v(z) ** 2)))
            compile_s[key], g_v = first_call(lambda f_v=f_v: f_v(zj))
            timed[key] = f_v
            labels[key] = label
            extra[key] = float(np.max(np.abs(np.asarray(g_v) - g_ad)) / np.max(np.abs(g_ad)))

    # Interleaved: every repeat calls each function once, so all see the same load drift.
    timings = time_interleaved(
        {key: (lambda f=f: f(zj)) for key, f in timed.items()}, repeats=repeats
    )
    t_fwd = timings["forward"]["median_s"]
    t_fwd_min = timings["forward"]["min_s"]
    for key, label in labels.items():
        med, mn = timings[key]["median_s"], timings[key]["min_s"]
        rows.append(
            [
                label,
                ms(med),
                ms(mn),
                f"{med / t_fwd:.2f}",
                f"{mn / t_fwd_min:.2f}",
                f"{compile_s[key]:.1f}",
            ]
        )

    # ---- case 2: central finite differences (2P forward runs) -------------------------------
    p = len(PARAMS)
    eye = np.eye(p)

    def fd_gradient():
        vals = []
        for i in range(p):
            for sgn in (1.0, -1.0):
                vals.append(f_loss(jnp.asarray(z0 + sgn * fd_step * eye[i])))
        vals = np.asarray(jax.block_until_ready(vals))
        return (vals[0::2] - vals[1::2]) / (2.0 * fd_step)

    g_fd = fd_gradient()
    timings["fd_gradient"] = time_median(fd_gradient, repeats=max(2, repeats // 2), warmup=0)
    t_fd = timings["fd_gradient"]["median_s"]
    t_grad = timings["grad_reverse"]["median_s"]
    t_jac = timings["jacfwd_residual"]["median_s"]
    rel = np.abs(g_ad - g_fd) / np.abs(g_fd)
    rel_norm = float(np.linalg.norm(g_ad - g_fd) / np.linalg.norm(g_fd))
    rel_jac = float(np.max(np.abs(g_from_jac - g_ad) / np.abs(g_ad)))

    ratio = t_grad / t_fwd
    grad_pass = ratio <= GRAD_BAR
    ratio_min = timings["grad_reverse"]["min_s"] / t_fwd_min
    table1 = markdown_table(
        ["case", "median (ms)", "min (ms)", "× forward (median)", "× forward (min)", "compile (s)"],
        rows,
    )
    table2 = markdown_table(
        ["method", "forward runs", "median (ms)", "× forward"],
        [
            ["AD: jax.grad (reverse)", "-", ms(t_grad), f"{t_grad / t_fwd:.2f}"],
            ["AD: jax.jacfwd of residuals (forward mode)", "-", ms(t_jac), f"{t_jac / t_fwd:.2f}"],
            [f"central FD, h = {fd_step:g} in log θ", 2 * p, ms(t_fd), f"{t_fd / t_fwd:.2f}"],
        ],
    )
    table2b = markdown_table(
        ["parameter", "dL/dlogθ AD (reverse)", "central FD", "rel. diff"],
        [[n, f"{g_ad[i]:+.6e}", f"{g_fd[i]:+.6e}", f"{rel[i]:.1e}"] for i, n in enumerate(PARAMS)],
    )
    lines = [
        "### 1. Forward vs gradient (fidelity c, 0.5 s at 20 kHz)",
        "",
        table1,
        "",
        f"{GRAD_N} samples at {GRAD_FS:g} Hz, {freqs.size} SRS frequencies "
        f"{freqs[0]:g}–{freqs[-1]:.0f} Hz (12/octave), {n_steps} solver steps (Tsit5, rtol 1e-8), "
        f"loss at θ0 = {float(loss0):.3f} dB² against the SRS at θ0·exp(±0.2); "
        f"median of {repeats}",
        f"bar: gradient {ratio:.2f}× forward (need ≤ {GRAD_BAR:g}×): {pass_fail(grad_pass)}"
        + ("" if grad_pass else f" — {ratio / GRAD_BAR:.2f}× over the bar")
        + f" (min/min: {ratio_min:.2f}×, {pass_fail(ratio_min <= GRAD_BAR)})",
        f"gradient from the jacfwd Jacobian (2/n·Jᵀr) vs jax.grad: max rel. diff {rel_jac:.1e}",
        "",
        "### 2. AD gradient vs central finite differences",
        "",
        table2,
        "",
        table2b,
        "",
        f"FD / AD(reverse) time: {t_fd / t_grad:.2f}; max rel. diff {float(np.max(rel)):.1e}, "
        f"‖g_AD − g_FD‖/‖g_FD‖ = {rel_norm:.1e} (rtol 1e-8: FD carries the adaptive step-size "
        "noise, about 1e-8/h of the loss scale)",
    ]
    tight = None
    if tight_check:
        tight = fd_check_tight(model, ts, dt, freqs, ref_db, z0, 1e-5)
        lines.append(
            f"accuracy check (untimed), both at rtol {TIGHT_RTOL:g}, FD h = 1e-5: max rel. diff "
            f"AD vs FD {tight['max_rel_diff']:.1e} over the {len(PARAMS)} parameters"
        )
    result = {
        "config": {
            "model": "LumpedContactModel.from_machine() (2 ft)",
            "n_samples": GRAD_N,
            "sample_rate_hz": GRAD_FS,
            "duration_s": (GRAD_N - 1) / GRAD_FS,
            "freqs_hz": freqs.tolist(),
            "reference_log_perturbation": REF_PERTURBATION.tolist(),
            "solver_steps": n_steps,
            "repeats": repeats,
            "fd_step_log": fd_step,
        },
        "timings_s": timings,
        "compile_s": compile_s,
        "loss_at_theta0": float(loss0),
        "grad_ad": g_ad.tolist(),
        "grad_fd": g_fd.tolist(),
        "grad_fd_rel_diff": rel.tolist(),
        "grad_fd_max_rel_diff": float(np.max(rel)),
        "grad_fd_norm_rel_diff": rel_norm,
        "grad_from_jacfwd_max_rel_diff": rel_jac,
        "grad_variant_max_rel_diff": extra,
        "fd_check_tight_rtol": tight,
        "summary": {
            "grad_over_forward": ratio,
            "grad_over_forward_min_over_min": ratio_min,
            "jacfwd_over_forward": t_jac / t_fwd,
            "fd_over_forward": t_fd / t_fwd,
            "fd_over_grad": t_fd / t_grad,
            **{
                f"{k}_over_forward": timings[k]["median_s"] / t_fwd
                for k in extra  # other reverse-mode adjoints
            },
            "bar": {"grad_over_forward_max": GRAD_BAR, "pass": bool(grad_pass)},
        },
    }
    return result, lines


# --------------------------------------------------------------------------------- case 3


class Trace:
    """Every loss evaluation of an optimiser: simulations, wall time since start, best loss."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.sims: list[float] = []  # cumulative simulations after each event
        self.sim_equiv: list[float] = []  # cumulative simulation-equivalents (wall / forward)
        self.wall: list[float] = []
        self.best: list[float] = []
        self.n_loss_evals = 0

    def add(self, loss: float, sims: float, sim_equiv: float) -> None:
        prev_s = self.sims[-1] if self.sims else 0.0
        prev_e = self.sim_equiv[-1] if self.sim_equiv else 0.0
        prev_b = self.best[-1] if self.best else np.inf
        self.sims.append(prev_s + sims)
        self.sim_equiv.append(prev_e + sim_equiv)
        self.wall.append(time.perf_counter() - self.t0)
        self.best.append(min(prev_b, loss if np.isfinite(loss) else np.inf))

    def first_reaching(self, target: float) -> dict | None:
        idx = np.flatnonzero(np.asarray(self.best) <= target)
        if idx.size == 0:
            return None
        i = int(idx[0])
        return {
            "event": i + 1,
            "simulations": self.sims[i],
            "simulation_equivalents": self.sim_equiv[i],
            "wall_s": self.wall[i],
            "best_loss": self.best[i],
        }

    def to_json(self) -> dict:
        return {
            "simulations": self.sims,
            "simulation_equivalents": self.sim_equiv,
            "wall_s": self.wall,
            "best_loss": self.best,
        }


def load_tests():
    freqs, meas_db = None, []
    for h in HEIGHTS_FT:
        d = np.loadtxt(DATA_DIR / f"test_{h:g}ft_srs.csv", delimiter=",", skiprows=1)
        if freqs is None:
            freqs = d[:, 0]
        elif not np.allclose(freqs, d[:, 0]):
            raise ValueError("the two tests have different SRS frequencies")
        meas_db.append(20.0 * np.log10(d[:, 1]))
    return freqs, meas_db


def fit_problem(models, ts, freqs, meas_db, z0, lo, hi) -> idf.Problem:
    """The product's fitting problem on the same data, parameters and log-space box: shared
    ``log_bounded`` parameters, one :class:`identification.SRSExperiment` per test."""
    space = idf.ParameterSpace(
        [
            idf.Parameter(n, n, np.exp(lo[i]), np.exp(hi[i]), np.exp(z0[i]), "log_bounded")
            for i, n in enumerate(PARAMS)
        ]
    )
    experiments = [
        idf.SRSExperiment(
            f"drop_{h:g}ft",
            model,
            "equipment_acceleration",
            ts,
            freqs,
            10.0 ** (db / 20.0) * G,
            damping=DAMPING,
        )  # fmt: skip
        for h, model, db in zip(HEIGHTS_FT, models, meas_db, strict=True)
    ]
    return idf.Problem(space, experiments)


def levenberg_marquardt(problem: idf.Problem, t_res, *, max_iter, ftol=1e-4):
    """The product's fitter, ``identification.fit`` with ``LevenbergMarquardt`` (Nielsen damping),
    from the box centre. Counts 2 simulations per residual evaluation and per Jacobian (2 tests):
    the start costs one Jacobian, each iteration one residual evaluation plus one Jacobian when
    the step is accepted; simulation-equivalents = wall time / (residual time / 2)."""
    n_tests = len(HEIGHTS_FT)
    trace = Trace()
    t_sim = t_res / n_tests
    last = {"t": time.perf_counter(), "accepted": 0}

    def callback(iteration, state):
        now = time.perf_counter()
        accepted = int(state.accepted)
        sims = n_tests * (1 + (accepted - last["accepted"]) + (1 if iteration == 1 else 0))
        trace.n_loss_evals += 1
        trace.add(float(state.loss), sims, (now - last["t"]) / t_sim)
        last.update(t=now, accepted=accepted)

    fitter = idf.LevenbergMarquardt(ftol=ftol)
    idf.fit(problem, fitter, max_iterations=1, progress=False)  # compile outside the timing
    last["t"] = trace.t0 = time.perf_counter()
    result = idf.fit(problem, fitter, max_iterations=max_iter, progress=False, callback=callback)
    values = np.array([result.parameters[n] for n in PARAMS])
    return {
        "z": np.log(values),
        "loss": float(result.loss),
        "trace": trace,
        "n_jacobians": 1 + last["accepted"],
        "n_accepted": last["accepted"],
        "loss_history": list(result.loss_history),
        "stop": result.message,
    }


def run_de(loss_fn, bounds, z0, *, popsize, maxiter, vectorized, tol):
    """scipy differential_evolution, counting every loss evaluation (2 simulations each)."""
    n_tests = len(HEIGHTS_FT)
    trace = Trace()

    if vectorized:

        def func(x):  # x: (P, S)
            vals = np.asarray(loss_fn(jnp.asarray(x.T)))
            for v in vals:
                trace.n_loss_evals += 1
                trace.add(float(v), n_tests, n_tests)
            return vals

    else:

        def func(x):
            v = float(loss_fn(jnp.asarray(x)))
            trace.n_loss_evals += 1
            trace.add(v, n_tests, n_tests)
            return v

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # vectorized forces updating='deferred'
        res = differential_evolution(
            func,
            bounds,
            seed=SEED,
            popsize=popsize,
            maxiter=maxiter,
            polish=False,
            tol=tol,
            x0=z0,
            vectorized=vectorized,
            updating="deferred" if vectorized else "immediate",
        )
    return {"z": res.x, "loss": float(res.fun), "nit": int(res.nit), "trace": trace, "res": res}


def bench_fit(args) -> tuple[dict, list[str]]:
    freqs, meas_db = load_tests()
    ts = jnp.arange(FIT_N) / FIT_FS
    dt = 1.0 / FIT_FS
    models = [LumpedContactModel.from_machine(drop_height_ft=h) for h in HEIGHTS_FT]
    # Shared θ; start from the from_machine() defaults (2 ft: its chi values are for v0 at 2 ft).
    z0 = default_log_params(LumpedContactModel.from_machine())
    lo, hi = log_bounds(z0)
    residual = make_residual(models, ts, dt, freqs, meas_db)
    residual_fm = make_residual(models, ts, dt, freqs, meas_db, adjoint=diffrax.ForwardMode())
    problem = fit_problem(models, ts, freqs, meas_db, z0, lo, hi)

    def loss(z):  # the product's loss, as a function of log θ (what DE searches)
        return problem.loss(problem.space.to_unconstrained(jnp.exp(z)))

    f_res = jax.jit(residual)
    f_jac = jax.jit(jax.jacfwd(residual_fm))
    f_loss = jax.jit(loss)
    f_loss_vec = jax.jit(jax.vmap(loss))
    zj = jnp.asarray(z0)
    compile_s = {}
    compile_s["residual"], r0 = first_call(lambda: f_res(zj))
    compile_s["jacfwd"], _ = first_call(lambda: f_jac(zj))
    compile_s["loss"], _ = first_call(lambda: f_loss(zj))
    t_res = time_median(lambda: f_res(zj), repeats=args.repeats)
    t_jac = time_median(lambda: f_jac(zj), repeats=args.repeats)
    loss0 = float(np.mean(np.asarray(r0) ** 2))

    # ---- (a) LM --------------------------------------------------------------------------------
    lm = levenberg_marquardt(problem, t_res["median_s"], max_iter=args.lm_iter)
    lm_trace: Trace = lm["trace"]
    target = TARGET_FACTOR * lm["loss"]

    # ---- (b) DE (serial, jitted loss) ----------------------------------------------------------
    bounds = list(zip(lo, hi, strict=True))
    de = run_de(
        f_loss, bounds, z0, popsize=args.de_popsize, maxiter=args.de_maxiter,
        vectorized=False, tol=args.de_tol,
    )  # fmt: skip
    de_runs = {"serial": de}
    if not args.no_vectorized:
        s = args.de_popsize * len(PARAMS)
        compile_s["loss_vmap"], _ = first_call(lambda: f_loss_vec(jnp.tile(zj, (s, 1))))
        de_runs["vectorized"] = run_de(
            f_loss_vec, bounds, z0, popsize=args.de_popsize, maxiter=args.de_maxiter,
            vectorized=True, tol=args.de_tol,
        )  # fmt: skip

    lm_hit = lm_trace.first_reaching(target)
    rows, summary = [], {}
    lm_total = {
        "simulations": lm_trace.sims[-1],
        "simulation_equivalents": lm_trace.sim_equiv[-1],
        "wall_s": lm_trace.wall[-1],
    }
    rows.append(
        [
            "LM (jacfwd J)",
            f"{lm['loss']:.4f}",
            f"{lm_trace.n_loss_evals} res + {lm['n_jacobians']} J",
            f"{lm_hit['simulations']:.0f} ({lm_hit['simulation_equivalents']:.0f} sim-eq.)",
            f"{lm_hit['wall_s']:.2f}",
            f"{lm_total['simulations']:.0f} ({lm_total['simulation_equivalents']:.0f} sim-eq.)",
            f"{lm_total['wall_s']:.2f}",
        ]
    )
    for name, run in de_runs.items():
        tr: Trace = run["trace"]
        hit = tr.first_reaching(target)
        entry = {
            "final_loss": run["loss"],
            "nit": run["nit"],
            "loss_evaluations": tr.n_loss_evals,
            "simulations": tr.sims[-1],
            "wall_s": tr.wall[-1],
            "reached_lm_target": hit is not None,
            "at_lm_target": hit,
            "theta": np.exp(run["z"]).tolist(),
        }
        if hit is not None:
            ratio = hit["simulations"] / lm_hit["simulations"]
            ratio_eq = hit["simulations"] / lm_hit["simulation_equivalents"]
            basis = f"both to LM final × {TARGET_FACTOR}"
            lm_at = lm_hit
        else:
            # DE never got there: compare at DE's best (LM's first point that good) instead.
            lm_at = lm_trace.first_reaching(run["loss"])
            de_at = tr.first_reaching(run["loss"])
            entry["at_de_best"] = de_at
            entry["lm_at_de_best"] = lm_at
            ratio = de_at["simulations"] / lm_at["simulations"]
            ratio_eq = de_at["simulations"] / lm_at["simulation_equivalents"]
            hit = de_at
            basis = f"DE never reached LM final × {TARGET_FACTOR}: both to DE's best"
            entry["lower_bound_ratio_total_de_over_lm_target"] = tr.sims[-1] / lm_hit["simulations"]
        entry.update(
            {
                "comparison_basis": basis,
                "sim_ratio_de_over_lm": ratio,
                "sim_ratio_de_over_lm_sim_equivalents": ratio_eq,
                "wall_ratio_de_over_lm": hit["wall_s"] / lm_at["wall_s"],
            }
        )
        summary[f"de_{name}"] = entry
        if name == "serial":
            bar_ratio, bar_ratio_eq = ratio, ratio_eq
        reached = "yes" if entry["reached_lm_target"] else "no (→ its best)"
        rows.append(
            [
                f"DE {name} (pop {args.de_popsize}×{len(PARAMS)}, maxiter {args.de_maxiter})",
                f"{run['loss']:.4f}",
                f"{tr.n_loss_evals} loss",
                f"{hit['simulations']:.0f} [reached: {reached}]",
                f"{hit['wall_s']:.2f}",
                f"{tr.sims[-1]:.0f}",
                f"{tr.wall[-1]:.2f}",
            ]
        )
    bar_pass = bar_ratio >= SPEEDUP_BAR
    bar_pass_eq = bar_ratio_eq >= SPEEDUP_BAR

    theta_rows = []
    theta0 = np.exp(z0)
    for i, n in enumerate(PARAMS):
        row = [n, f"{theta0[i]:.4g}", f"{np.exp(lm['z'][i]):.4g}"]
        row += [f"{np.exp(run['z'][i]):.4g}" for run in de_runs.values()]
        row.append(f"{np.exp(lo[i]):.3g}–{np.exp(hi[i]):.3g}")
        theta_rows.append(row)
    r_lm = np.asarray(f_res(jnp.asarray(lm["z"])))

    table3 = markdown_table(
        [
            "method",
            "final loss (dB²)",
            "evaluations",
            "sims to target",
            "wall to target (s)",
            "sims total",
            "wall total (s)",
        ],
        rows,
    )
    table3b = markdown_table(
        ["parameter", "θ0 (from_machine)", "LM"] + [f"DE {k}" for k in de_runs] + ["bounds"],
        theta_rows,
    )
    de_s = summary["de_serial"]
    lines = [
        "### 3. Fit: Levenberg–Marquardt vs differential evolution (2 tests, 0.15 s at 10 kHz)",
        "",
        table3,
        "",
        table3b,
        "",
        f"loss at θ0 {loss0:.4f} dB² (rms {np.sqrt(loss0):.2f} dB); LM final {lm['loss']:.4f} dB² "
        f"(rms {np.sqrt(lm['loss']):.2f} dB, {100 * np.mean(np.abs(r_lm) < 3):.0f} % of "
        f"{r_lm.size} residuals within ±3 dB) after {lm['n_accepted']} accepted steps, "
        f"stop: {lm['stop']}; target = {TARGET_FACTOR} × LM final = {target:.4f} dB²",
        f"one residual evaluation (2 simulations) {ms(t_res['median_s'])} ms; one jacfwd Jacobian "
        f"(2 simulations with {len(PARAMS)} tangents) {ms(t_jac['median_s'])} ms "
        f"= {2 * t_jac['median_s'] / t_res['median_s']:.1f} simulation-equivalents",
        "compile (s): " + ", ".join(f"{k} {v:.1f}" for k, v in compile_s.items()),
    ]
    for name in de_runs:
        e = summary[f"de_{name}"]
        lines.append(
            f"DE {name}: {e['comparison_basis']}; simulations DE/LM = "
            f"{e['sim_ratio_de_over_lm']:.1f} (LM counted in simulation-equivalents: "
            f"{e['sim_ratio_de_over_lm_sim_equivalents']:.1f}); wall DE/LM = "
            f"{e['wall_ratio_de_over_lm']:.1f}"
            + (
                f"; DE's whole budget / LM's simulations to the LM target = "
                f"{e['lower_bound_ratio_total_de_over_lm_target']:.1f} (a lower bound)"
                if not e["reached_lm_target"]
                else ""
            )
        )
    lines.append(
        f"bar: LM ≥ {SPEEDUP_BAR:g}× fewer simulations than serial DE: {bar_ratio:.1f}× → "
        f"{pass_fail(bar_pass)} (Jacobian = 2 simulations); with the Jacobian counted at its "
        f"wall time (simulation-equivalents): {bar_ratio_eq:.1f}× → {pass_fail(bar_pass_eq)}"
        + ("" if de_s["reached_lm_target"] else "; DE did not reach the LM target (see above)")
    )

    result = {
        "config": {
            "tests_ft": list(HEIGHTS_FT),
            "n_samples": FIT_N,
            "sample_rate_hz": FIT_FS,
            "freqs_hz": freqs.tolist(),
            "params": list(PARAMS),
            "theta0": theta0.tolist(),
            "bounds_theta": [np.exp(lo).tolist(), np.exp(hi).tolist()],
            "lm_max_iter": args.lm_iter,
            "de": {
                "popsize": args.de_popsize,
                "maxiter": args.de_maxiter,
                "tol": args.de_tol,
                "seed": SEED,
                "polish": False,
                "x0": "theta0",
                "updating": {"serial": "immediate", "vectorized": "deferred"},
            },
            "target_factor": TARGET_FACTOR,
        },
        "compile_s": compile_s,
        "timings_s": {"residual_2_sims": t_res, "jacfwd_2_sims": t_jac},
        "jacobian_simulation_equivalents": 2 * t_jac["median_s"] / t_res["median_s"],
        "loss_at_theta0": loss0,
        "lm": {
            "final_loss": lm["loss"],
            "theta": np.exp(lm["z"]).tolist(),
            "loss_history": lm["loss_history"],
            "n_residual_evaluations": lm_trace.n_loss_evals,
            "n_jacobians": lm["n_jacobians"],
            "n_accepted": lm["n_accepted"],
            "stop": lm["stop"],
            "at_target": lm_hit,
            "total": lm_total,
            "fraction_within_3db": float(np.mean(np.abs(r_lm) < 3)),
            "trace": lm_trace.to_json(),
        },
        "target_loss": target,
        "de": summary,
        "bar": {
            "min_sim_ratio": SPEEDUP_BAR,
            "sim_ratio_serial_de_over_lm": bar_ratio,
            "pass": bool(bar_pass),
            "sim_ratio_serial_de_over_lm_sim_equivalents": bar_ratio_eq,
            "pass_sim_equivalents": bool(bar_pass_eq),
            "de_reached_lm_target": bool(de_s["reached_lm_target"]),
        },
    }
    return result, lines


# --------------------------------------------------------------------------------- main


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller DE")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs (default 7/3)")
    parser.add_argument("--fd-step", type=float, default=1e-3, help="FD step in log θ")
    parser.add_argument("--no-fd-check", action="store_true", help="skip the rtol 1e-11 check")
    parser.add_argument("--no-grad-variants", action="store_true", help="skip the other adjoints")
    parser.add_argument("--lm-iter", type=int, default=40, help="max LM iterations")
    parser.add_argument("--de-popsize", type=int, default=None, help="DE popsize (default 8/5)")
    parser.add_argument("--de-maxiter", type=int, default=None, help="DE maxiter (default 30/8)")
    parser.add_argument("--de-tol", type=float, default=0.01, help="DE tol (scipy default)")
    parser.add_argument("--no-vectorized", action="store_true", help="skip the vmap DE variant")
    parser.add_argument("--skip-gradient", action="store_true", help="only run case 3")
    parser.add_argument("--skip-fit", action="store_true", help="only run cases 1 and 2")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "mwsm.json",
        help="JSON output path (default: benchmarks/results/mwsm.json)",
    )
    parser.add_argument(
        "--cores", type=int, default=None,
        help="run on this many CPU cores (XLA sizes its thread pool from them; default: all)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    cores = limit_cores(args.cores)
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.de_popsize = args.de_popsize or (5 if args.quick else 8)
    args.de_maxiter = args.de_maxiter or (8 if args.quick else 30)
    variants = not (args.quick or args.no_grad_variants)

    t_start = time.perf_counter()
    result = {"benchmark": "mwsm", "timestamp_utc": utc_timestamp(), "quick": args.quick,
              "cores": cores}  # fmt: skip
    lines = []
    if not args.skip_gradient:
        result["gradient"], l12 = bench_gradient(
            args.repeats, variants, args.fd_step, not (args.quick or args.no_fd_check)
        )
        lines += l12 + [""]
        print("\n".join(l12) + "\n", flush=True)
    if not args.skip_fit:
        result["fit"], l3 = bench_fit(args)
        print("\n".join(l3), flush=True)
        lines += l3
    result["total_wall_s"] = time.perf_counter() - t_start
    result["machine"] = machine_info()
    result["versions"] = {"scipy": scipy.__version__, "diffrax": diffrax.__version__}
    result["report"] = "\n".join(lines)
    path = write_json_atomic(args.out, result)
    print(f"\ntotal {result['total_wall_s']:.0f} s; wrote {path}")


if __name__ == "__main__":
    main()
