"""Benchmark: shock response spectrum, diffmbs (JAX) against a per-frequency SciPy reference.

A 50,000-sample synthetic shock record (20 kHz, 2.5 s), 100 log-spaced natural frequencies from
10 Hz to 2 kHz, 5 % damping, maximax SRS. The reference is what existing shock tools do: one
``scipy.signal.lfilter`` call per frequency with Smallwood's ramp-invariant coefficients, on the
record padded with zeros long enough (1.5 cycles of the lowest frequency) to catch the residual
peak, then ``max(abs(y))``. Both run in the same process on the same record.

Usage::

    python benchmarks/srs.py [--repeats 7] [--out benchmarks/results/srs.json]

The bar (issue): diffmbs at least 2x faster than the SciPy reference after compilation, with
agreement to 1e-9 (maximum relative difference over the frequencies). Compile time, gradient time
and a batch of 16 records are reported as well. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import scipy
from scipy.signal import lfilter

import diffmbs
from diffmbs.srs import ramp_invariant_coefficients, shock_response_spectrum

diffmbs.configure()  # float64, XLA CPU options

sys.path.insert(0, str(Path(__file__).resolve().parent))  # script or python -m
from _common import (  # noqa: E402
    first_call,
    machine_info,
    markdown_table,
    time_median,
    utc_timestamp,
    write_json_atomic,
)

DT = 5e-5  # 20 kHz
N_SAMPLES = 50_000  # 2.5 s
N_FREQ = 100
F_MIN, F_MAX = 10.0, 2_000.0
DAMPING = 0.05
BATCH = 16
SMOOTH = 0.01
SEED = 20_240_611
SPEEDUP_BAR = 2.0
AGREEMENT_BAR = 1e-9
TRUNCATED_SAMPLES = 400  # 20 ms: cut mid-shock so the residual governs at low frequencies
G = 9.80665  # m/s² per g


def shock_record(n: int = N_SAMPLES, dt: float = DT, seed: int = SEED) -> np.ndarray:
    """Synthetic pyroshock-like record in m/s²: decaying sinusoids plus a little white noise.

    Modes at 80, 350, 1200 and 3000 Hz with random amplitudes (tens of g), phases and decay times,
    under a fast rise envelope 1 − e^{−t/0.5 ms} so the first sample is exactly 0; everything
    decays to ~0 by the end of the 2.5 s record.
    """
    rng = np.random.default_rng(seed)
    t = np.arange(n) * dt
    rise = -np.expm1(-t / 5e-4)  # exactly 0 at t = 0
    x = np.zeros(n)
    for f in (80.0, 350.0, 1200.0, 3000.0):
        amp = rng.uniform(10.0, 40.0) * G
        tau = rng.uniform(0.03, 0.25)  # s
        phase = rng.uniform(0.0, 2.0 * np.pi)
        x += amp * np.exp(-t / tau) * np.sin(2.0 * np.pi * f * t + phase)
    x += 0.5 * G * rng.standard_normal(n) * np.exp(-t / 0.2)
    x *= rise
    x[0] = 0.0
    return x


def scipy_srs(x: np.ndarray, b: np.ndarray, a: np.ndarray, pad: int) -> np.ndarray:
    """Reference SRS: one ``lfilter`` per frequency on the record plus ``pad`` zeros; max |y|."""
    x_ext = np.concatenate([x, np.zeros(pad)]) if pad else x
    out = np.empty(b.shape[0])
    for i in range(b.shape[0]):
        out[i] = np.max(np.abs(lfilter(b[i], a[i], x_ext)))
    return out


def max_rel_diff(got, ref) -> float:
    got, ref = np.asarray(got), np.asarray(ref)
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


def truncated_record_check(x, freqs, b, a, pad, n_keep: int = TRUNCATED_SAMPLES) -> dict:
    """Agreement when the residual (free ringing after the record) governs: not timed.

    The full record decays to ~0, so its maximax peak always lies inside the record. Cut after
    ``n_keep`` samples the low-frequency peaks come from the ringing; there the padded ``lfilter``
    reference only sees that ringing at the samples and reads low by at most
    1 − cos(ω_d·dt/2), while diffmbs evaluates the continuous extrema in closed form.
    """
    xt = x[:n_keep]
    ref = scipy_srs(xt, b, a, pad)
    ref_primary = scipy_srs(xt, b, a, 0)
    got = np.asarray(shock_response_spectrum(xt, DT, freqs, damping=DAMPING))
    governs = ref > ref_primary * (1 + 1e-12)
    rel = (got - ref) / ref
    omega_d = 2 * np.pi * freqs * math.sqrt(1 - DAMPING**2)
    bound = 1 - np.cos(omega_d * DT / 2)
    return {
        "n_samples": n_keep,
        "residual_governs_n_freq": int(governs.sum()),
        "max_rel_diff": float(np.max(np.abs(rel))),
        "max_rel_diff_where_primary_governs": float(np.max(np.abs(rel[~governs]))),
        "sampling_bound_where_residual_governs": float(np.max(bound[governs], initial=0.0)),
        "within_sampling_bound": bool(np.all(np.abs(rel) <= np.where(governs, bound, 1e-9))),
        "diffmbs_ge_scipy": bool(np.all(got >= ref * (1 - 1e-12))),
    }


def ms(seconds: float) -> str:
    return f"{1e3 * seconds:.2f}"


def run(repeats: int) -> tuple[dict, str]:
    freqs = np.geomspace(F_MIN, F_MAX, N_FREQ)
    x = shock_record()
    xj = jnp.asarray(x)
    pad = math.ceil(1.5 / (F_MIN * DT))
    b, a = ramp_invariant_coefficients(freqs, DT, DAMPING)  # not timed (filter design)

    # --- SciPy reference ------------------------------------------------------------------------
    ref_maximax = scipy_srs(x, b, a, pad)
    ref_primary = scipy_srs(x, b, a, 0)
    t_scipy_maximax = time_median(lambda: scipy_srs(x, b, a, pad), repeats=repeats)
    t_scipy_primary = time_median(lambda: scipy_srs(x, b, a, 0), repeats=repeats)

    # --- diffmbs forward --------------------------------------------------------------------------
    def srs_fn(kind, smooth=None):
        return jax.jit(
            lambda acc: shock_response_spectrum(
                acc, DT, freqs, damping=DAMPING, kind=kind, smooth=smooth
            )
        )

    f_maximax = srs_fn("maximax")
    f_primary = srs_fn("primary")
    compile_maximax, srs_maximax = first_call(lambda: f_maximax(xj))
    compile_primary, srs_primary = first_call(lambda: f_primary(xj))
    t_maximax = time_median(lambda: f_maximax(xj), repeats=repeats)
    t_primary = time_median(lambda: f_primary(xj), repeats=repeats)

    # Unjitted public call, as a user would make it (validation + internal jit), for context.
    t_eager = time_median(
        lambda: shock_response_spectrum(x, DT, freqs, damping=DAMPING), repeats=repeats
    )

    # --- gradients --------------------------------------------------------------------------------
    grad_exact = jax.jit(
        jax.grad(lambda acc: jnp.sum(shock_response_spectrum(acc, DT, freqs, damping=DAMPING)))
    )
    compile_grad, g_exact = first_call(lambda: grad_exact(xj))
    t_grad = time_median(lambda: grad_exact(xj), repeats=repeats)

    f_smooth = srs_fn("maximax", SMOOTH)
    compile_smooth, srs_smooth = first_call(lambda: f_smooth(xj))
    t_smooth = time_median(lambda: f_smooth(xj), repeats=repeats)
    vg_smooth = jax.jit(
        jax.value_and_grad(
            lambda acc: jnp.sum(
                shock_response_spectrum(acc, DT, freqs, damping=DAMPING, smooth=SMOOTH)
            )
        )
    )
    compile_vg_smooth, (_, g_smooth) = first_call(lambda: vg_smooth(xj))
    t_vg_smooth = time_median(lambda: vg_smooth(xj), repeats=repeats)
    if not (np.all(np.isfinite(g_exact)) and np.all(np.isfinite(g_smooth))):
        raise RuntimeError("non-finite gradient")

    # --- batch of records -------------------------------------------------------------------------
    xb = jnp.asarray(np.stack([shock_record(seed=SEED + k) for k in range(BATCH)]))
    compile_batch, srs_batch = first_call(lambda: f_maximax(xb))
    t_batch = time_median(lambda: f_maximax(xb), repeats=max(3, repeats // 2))
    batch_vs_single = max_rel_diff(srs_batch[0], srs_maximax)

    # --- agreement --------------------------------------------------------------------------------
    diff_maximax = max_rel_diff(srs_maximax, ref_maximax)
    diff_primary = max_rel_diff(srs_primary, ref_primary)
    diff_maximax_vs_unpadded = max_rel_diff(srs_maximax, ref_primary)
    residual_governs = int(np.sum(ref_maximax > ref_primary * (1 + 1e-12)))
    residual_check = truncated_record_check(x, freqs, b, a, pad)

    speedup = t_scipy_maximax["median_s"] / t_maximax["median_s"]
    rows = [
        [
            f"maximax (SciPy: +{pad} zeros padding)",
            ms(t_maximax["median_s"]),
            ms(t_scipy_maximax["median_s"]),
            f"{speedup:.2f}",
            f"{diff_maximax:.2e}",
        ],
        [
            "primary (SciPy: no padding)",
            ms(t_primary["median_s"]),
            ms(t_scipy_primary["median_s"]),
            f"{t_scipy_primary['median_s'] / t_primary['median_s']:.2f}",
            f"{diff_primary:.2e}",
        ],
        [
            "maximax vs SciPy unpadded (SciPy's cheapest)",
            ms(t_maximax["median_s"]),
            ms(t_scipy_primary["median_s"]),
            f"{t_scipy_primary['median_s'] / t_maximax['median_s']:.2f}",
            f"{diff_maximax_vs_unpadded:.2e}",
        ],
    ]
    headers = ["case", "diffmbs (ms)", "SciPy (ms)", "ratio (SciPy/diffmbs)", "max rel. diff"]
    lines = [
        markdown_table(headers, rows),
        "",
        f"record: {N_SAMPLES} samples at {1 / DT:g} Hz; {N_FREQ} frequencies "
        f"{F_MIN:g}-{F_MAX:g} Hz (geomspace); damping {DAMPING}; median of {repeats} runs",
        f"compile (first call incl. run): maximax {ms(compile_maximax)} ms, "
        f"primary {ms(compile_primary)} ms, grad {ms(compile_grad)} ms, "
        f"smooth {ms(compile_smooth)} ms, smooth value_and_grad {ms(compile_vg_smooth)} ms, "
        f"batch {ms(compile_batch)} ms",
        f"gradient (exact maximax, jit(grad(sum SRS))): {ms(t_grad['median_s'])} ms "
        f"= {t_grad['median_s'] / t_maximax['median_s']:.2f}x forward",
        f"smooth={SMOOTH}: forward {ms(t_smooth['median_s'])} ms; value_and_grad "
        f"{ms(t_vg_smooth['median_s'])} ms = {t_vg_smooth['median_s'] / t_maximax['median_s']:.2f}"
        f"x exact forward",
        f"batch of {BATCH} records: {ms(t_batch['median_s'])} ms total, "
        f"{ms(t_batch['median_s'] / BATCH)} ms per record "
        f"= {t_batch['median_s'] / BATCH / t_maximax['median_s']:.2f}x single-record time",
        f"unjitted public call (validation + internal jit): {ms(t_eager['median_s'])} ms",
        f"frequencies where the residual (post-record) peak governs maximax: "
        f"{residual_governs}/{N_FREQ}",
        f"residual check (record cut to {residual_check['n_samples']} samples, residual governs "
        f"at {residual_check['residual_governs_n_freq']}/{N_FREQ}): max rel. diff "
        f"{residual_check['max_rel_diff']:.2e}, within the padded reference's sampling error "
        f"1-cos(w_d*dt/2) <= {residual_check['sampling_bound_where_residual_governs']:.2e}: "
        f"{residual_check['within_sampling_bound']}; diffmbs >= SciPy everywhere: "
        f"{residual_check['diffmbs_ge_scipy']}",
        f"bar: speedup {speedup:.2f}x (need >= {SPEEDUP_BAR:g}x): "
        f"{'PASS' if speedup >= SPEEDUP_BAR else 'FAIL'}; agreement {diff_maximax:.2e} "
        f"(need <= {AGREEMENT_BAR:g}): {'PASS' if diff_maximax <= AGREEMENT_BAR else 'FAIL'}",
    ]

    result = {
        "benchmark": "srs",
        "timestamp_utc": utc_timestamp(),
        "config": {
            "n_samples": N_SAMPLES,
            "dt_s": DT,
            "sample_rate_hz": 1 / DT,
            "n_freq": N_FREQ,
            "f_min_hz": F_MIN,
            "f_max_hz": F_MAX,
            "freq_spacing": "geomspace",
            "damping": DAMPING,
            "kind": "maximax",
            "scipy_padding_samples": pad,
            "smooth": SMOOTH,
            "batch": BATCH,
            "repeats": repeats,
            "seed": SEED,
            "record_peak_m_s2": float(np.max(np.abs(x))),
        },
        "timings_s": {
            "diffmbs_maximax": t_maximax,
            "diffmbs_primary": t_primary,
            "diffmbs_maximax_unjitted_public_call": t_eager,
            "diffmbs_grad_maximax": t_grad,
            "diffmbs_smooth_forward": t_smooth,
            "diffmbs_smooth_value_and_grad": t_vg_smooth,
            "diffmbs_batch": t_batch,
            "scipy_maximax_padded": t_scipy_maximax,
            "scipy_primary_unpadded": t_scipy_primary,
        },
        "compile_s": {
            "maximax": compile_maximax,
            "primary": compile_primary,
            "grad_maximax": compile_grad,
            "smooth_forward": compile_smooth,
            "smooth_value_and_grad": compile_vg_smooth,
            "batch": compile_batch,
        },
        "summary": {
            "speedup_maximax_vs_scipy_padded": speedup,
            "speedup_primary_vs_scipy_unpadded": t_scipy_primary["median_s"]
            / t_primary["median_s"],
            "speedup_maximax_vs_scipy_unpadded": t_scipy_primary["median_s"]
            / t_maximax["median_s"],
            "max_rel_diff_maximax": diff_maximax,
            "max_rel_diff_primary": diff_primary,
            "max_rel_diff_maximax_vs_scipy_unpadded": diff_maximax_vs_unpadded,
            "grad_over_forward": t_grad["median_s"] / t_maximax["median_s"],
            "smooth_value_and_grad_over_forward": t_vg_smooth["median_s"] / t_maximax["median_s"],
            "batch_per_record_s": t_batch["median_s"] / BATCH,
            "batch_per_record_over_single": t_batch["median_s"] / BATCH / t_maximax["median_s"],
            "batch_row0_vs_single_max_rel_diff": batch_vs_single,
            "residual_governs_n_freq": residual_governs,
            "residual_check_truncated_record": residual_check,
            "smooth_over_exact_max": float(np.max(np.asarray(srs_smooth) / ref_maximax)),
            "bar": {
                "speedup_required": SPEEDUP_BAR,
                "agreement_required": AGREEMENT_BAR,
                "speedup_pass": bool(speedup >= SPEEDUP_BAR),
                "agreement_pass": bool(diff_maximax <= AGREEMENT_BAR),
            },
        },
        "spectra": {
            "freqs_hz": freqs.tolist(),
            "diffmbs_maximax": np.asarray(srs_maximax).tolist(),
            "scipy_maximax_padded": ref_maximax.tolist(),
        },
        "machine": machine_info(),
        "scipy_version": scipy.__version__,
    }
    return result, "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed runs per case (median)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "results" / "srs.json",
        help="JSON output path (default: benchmarks/results/srs.json)",
    )
    args = parser.parse_args(argv)
    result, report = run(args.repeats)
    print(report)
    path = write_json_atomic(args.out, result)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
