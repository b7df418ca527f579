"""The identification study of issue 21: the 8-parameter lumped MWSM fit from starts 2–5× off.

Two SRS records (2 ft and 3 ft drops, 475 kg equipment, 0.1 s at 10 kHz, 5 %-damped maximax
SRS 10 Hz–1 kHz at 6 per octave) fitted for k_channel, ζ_channel, K_impact, χ_impact, K_stop,
χ_stop, k_bed and ζ_bed (log-bounded over :data:`BOX`). Data come either from the model under
test (*calibration*: the truth is reachable exactly) or from the independent NumPy/SciPy
simulator :mod:`reference_mwsm` (*recovery under discrepancy*: its own contact onset, sample
rate and SRS), with 1 % multiplicative noise. Used by ``tests/test_identification_study.py``
(a few seeded truths) and ``benchmarks/fit_studies.py`` (20 truths and the method table).
"""

from __future__ import annotations

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import reference_mwsm

import identification as idf
from diffmbs.models.mwsm import LumpedContactModel
from diffmbs.srs import octave_frequencies

PATHS = {
    "k_channel": "k_channel",
    "zeta_channel": "zeta_channel",
    "k_impact": "impact.stiffness",
    "chi_impact": "impact.damping",
    "k_stop": "stops.stiffness",
    "chi_stop": "stops.damping",
    "k_bed": "k_bed",
    "zeta_bed": "zeta_bed",
}
NAMES = tuple(PATHS)
BOX = {
    "k_channel": (2e6, 1e8),
    "zeta_channel": (0.005, 0.3),
    "k_impact": (1e9, 1e12),
    "chi_impact": (0.02, 2.0),
    "k_stop": (1e9, 1e12),
    "chi_stop": (0.02, 2.0),
    "k_bed": (1e6, 1e8),
    "zeta_bed": (0.005, 0.3),
}
DROPS_FT = (2.0, 3.0)
EQUIPMENT_KG = 475.0
DURATION_S, RATE_HZ = 0.1, 10_000.0
FREQS = octave_frequencies(10.0, 1000.0, 6)
NOISE = 0.01  # relative, on each SRS value


def random_truth(rng: np.random.Generator) -> dict[str, float]:
    """Log-uniform inside the middle 60 % (in log) of every parameter's box."""
    u = rng.uniform(0.2, 0.8, len(NAMES))
    return {n: float(np.exp(np.log(BOX[n][0]) + ui * np.log(BOX[n][1] / BOX[n][0])))
            for n, ui in zip(NAMES, u, strict=True)}  # fmt: skip


def start_from(truth: dict[str, float], rng: np.random.Generator) -> dict[str, float]:
    """Every parameter 2–5× off the truth, up or down at random, kept inside its box."""
    out = {}
    for n in NAMES:
        factor = rng.uniform(2.0, 5.0) ** rng.choice([-1, 1])
        lo, hi = BOX[n]
        out[n] = float(np.clip(truth[n] * factor, lo * 1.01, hi / 1.01))
    return out


def _models() -> dict[str, LumpedContactModel]:
    return {f"drop_{h:g}ft": LumpedContactModel.from_machine(equipment_kg=EQUIPMENT_KG,
                                                             drop_height_ft=h)
            for h in DROPS_FT}  # fmt: skip


def problem(data: dict[str, np.ndarray], start: dict[str, float]) -> idf.Problem:
    """The fitting problem on measured SRS ``data`` (experiment → (len(FREQS),) m/s²)."""
    ts = np.arange(round(DURATION_S * RATE_HZ) + 1) / RATE_HZ
    space = idf.ParameterSpace(
        [idf.Parameter(n, PATHS[n], *BOX[n], initial=start[n], transform="log_bounded")
         for n in NAMES]
    )  # fmt: skip
    experiments = [
        idf.SRSExperiment(name, model, "equipment_acceleration", ts, FREQS, data[name],
                          simulate_kwargs={"adjoint": diffrax.ForwardMode()})
        for name, model in _models().items()
    ]  # fmt: skip
    return idf.Problem(space, experiments)


def noisy(srs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return srs * np.exp(NOISE * rng.standard_normal(srs.shape))


def own_data(truth: dict[str, float], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The model under test's SRS at ``truth``, with noise (calibration data)."""
    template = problem({f"drop_{h:g}ft": np.ones_like(FREQS) for h in DROPS_FT}, truth)
    clean = template.predictions(template.initial_z)
    return {name: noisy(np.asarray(clean[name]), rng) for name in template.experiment_names}


def reference_data(
    truth: dict[str, float], rng: np.random.Generator, contact_exponent: float = 1.5
) -> dict[str, np.ndarray]:
    """The independent simulator's SRS at ``truth``, with noise (discrepancy data). With
    ``contact_exponent`` other than the model's 1.5 the data carry a structural discrepancy."""
    return {
        f"drop_{h:g}ft": noisy(reference_mwsm.simulate_srs(
            truth, FREQS, drop_height_ft=h, equipment_kg=EQUIPMENT_KG, duration_s=DURATION_S,
            contact_exponent=contact_exponent), rng)
        for h in DROPS_FT
    }  # fmt: skip


def truth_z(p: idf.Problem, truth: dict[str, float]) -> np.ndarray:
    return np.asarray(p.space.to_unconstrained(np.array([truth[n] for n in NAMES])))


def assess(p: idf.Problem, result: idf.FitResult, truth: dict[str, float]) -> dict:
    """The fit against the truth: the truth basin's minimum (LM started at the truth), the
    loss ratio, and for each parameter reported as estimated (identifiable, not at a bound)
    whether the truth lies in its 95 % interval ``ẑ ± 1.96 σ_z``, and its relative error."""
    at_truth = idf.fit(p, z0=truth_z(p, truth), max_iterations=40, progress=False,
                       solver_checks=0)  # only its loss is used
    basin = min(at_truth.loss, result.loss)
    zt = truth_z(p, truth)
    covered, error = {}, {}
    for i, n in enumerate(NAMES):
        estimated = result.identifiable[n] and n not in result.at_bounds
        if estimated and np.isfinite(result.std_z[i]):
            covered[n] = bool(abs(result.z[i] - zt[i]) <= 1.96 * result.std_z[i])
        error[n] = result.parameters[n] / truth[n] - 1.0
    return {
        "loss": result.loss,
        "truth_basin_loss": basin,
        "ratio": result.loss / basin,
        "covered": covered,
        "relative_error": error,
        "at_bounds": dict(result.at_bounds),
        "discrepancy": bool(result.discrepancy["detected"]),
        "converged": result.converged,
    }


def with_measured(p: idf.Problem, data: dict[str, np.ndarray]) -> idf.Problem:
    """``p`` with other measured spectra (same shapes)."""
    return idf.Problem(p.space, [eqx.tree_at(lambda e: e.measured, e, jnp.asarray(data[e.name]))
                                 for e in p.experiments])  # fmt: skip
