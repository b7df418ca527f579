"""Make the synthetic "measured" 3-D MWSM records in this folder (run from the repository root).

    python data/mwsm3d/make_records.py          # ~10 min on 2 cores

Real Medium Weight Shock Machine records are confidential, so these stand in for them. They
come from a *truth machine that differs structurally* from the one the fit job builds
(``diffmbs.models.mwsm3d.mwsm3d`` at its defaults):

- the anvil table is compliant: a struck lower plate (40 % of its mass, with the stops) and an
  upper plate carrying the channels, joined by a spring (``anvil_hz`` = 450 Hz);
- each supporting channel has 16 fixed-interface modes, not 10; test 2's beam 12, not 8;
- the blow lands 30 mm off the table's centre line (``impact_offset``), so the table rocks;
- contact, bed and damping values differ from the defaults (TRUTH).

Each test is the study's sequence: static equilibrium with the hammer held, release, the fall,
the blow and 0.5 s after it, simulated at rtol 1e-7 and saved at 50 kHz from 50 ms before the
blow. The top-face acceleration then passes through a measurement chain: white accelerometer
noise, a causal 4-pole Butterworth anti-aliasing filter at 2.5 kHz, and decimation to 10 kHz.
The records' time is counted from the blow (the trigger), so t = 0 is where a fit's model
starts (``start = "impact"``: 1 mm above the anvil, 0.3–0.4 ms before contact). Needs scipy
(a dev dependency) for the filter. The truth values are in TRUTH and README.md.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import scipy.signal

import diffmbs

diffmbs.configure()

import jax.numpy as jnp  # noqa: E402

from diffmbs.contact import damping_from_restitution  # noqa: E402
from diffmbs.io import write_csv_atomic  # noqa: E402
from diffmbs.models import FT, G  # noqa: E402
from diffmbs.models._mwsm3d_parts import Geometry  # noqa: E402
from diffmbs.models.mwsm import NRL_VELOCITY_RATIO  # noqa: E402
from diffmbs.models.mwsm3d import mwsm3d  # noqa: E402
from diffmbs.srs import octave_frequencies, shock_response_spectrum  # noqa: E402

HERE = Path(__file__).resolve().parent

TRUTH = {  # keywords of mwsm3d; every test shares them
    "k_impact": 8.0e10,  # N/m^1.5, hammer–anvil
    "e_impact": 0.40,
    "k_stop": 1.5e11,  # N/m^1.5, all four stop points together
    "e_stop": 0.45,
    "bed_hz": 3.5,
    "zeta_bed": 0.05,
    "channel_damping": 0.03,  # modal damping ratio of every channel mode
    # structural differences from the fitted machine
    "anvil_hz": 450.0,
    "anvil_fraction": 0.4,
    "modes_per_channel": 16,
    "beam_modes": 12,  # test 2's beam (the rigid tests have none)
    "impact_offset": 0.03,  # m
}
TESTS = (  # (file stem, equipment, drop height ft)
    ("rigid_1ft", "rigid", 1.0),
    ("rigid_2ft", "rigid", 2.0),
    ("flexible_2ft", "flexible", 2.0),
)
BEFORE_S, AFTER_S = 0.05, 0.5  # record from 50 ms before the blow to 0.5 s after it
SIM_RATE_HZ = 50_000.0
DECIMATION = 5  # → 10 kHz records
ANTI_ALIAS_HZ = 2_500.0
NOISE_RMS_G = 0.1
SRS_BAND_HZ = (5.0, 1000.0)
SEED = 9013


def truth_parameters() -> dict[str, float]:
    """TRUTH in the fit jobs' parameters (SI; the names of ``fit.toml``): what a fit of these
    records should recover. The stops' χ depends on the impact speed (e_stop at 0.545 of it)
    and the jobs fit one for all tests: its value here is the 2-ft one (1.30 s/m at 1 ft)."""
    machine = Geometry.bed_mass + Geometry.anvil_mass + Geometry.block_mass
    k_bed = machine * (2 * math.pi * TRUTH["bed_hz"]) ** 2
    upper_plate = (1.0 - TRUTH["anvil_fraction"]) * Geometry.anvil_mass
    speed = {h: math.sqrt(2 * G * h * FT) for _, _, h in TESTS}
    chi = lambda e, v: float(damping_from_restitution(e, v))  # noqa: E731
    truth = {
        "k_impact": TRUTH["k_impact"],
        "k_stop": TRUTH["k_stop"] / 4,  # each of the four stop points
        "chi_stop": chi(TRUTH["e_stop"], NRL_VELOCITY_RATIO * speed[2.0]),
        "k_bed": k_bed,
        "c_bed": 2 * TRUTH["zeta_bed"] * math.sqrt(k_bed * machine),
        "zeta_channels": TRUTH["channel_damping"],
        "k_anvil": upper_plate * (2 * math.pi * TRUTH["anvil_hz"]) ** 2,
        "impact_offset": TRUTH["impact_offset"],
    }
    for stem, _, height in TESTS:
        truth[f"chi_impact@{stem}"] = chi(TRUTH["e_impact"], speed[height])
    return truth


def measure(equipment: str, drop_height_ft: float, rng: np.random.Generator):
    """``(time since the blow s, measured top-face vertical acceleration g)`` of one test."""
    model = mwsm3d(equipment=equipment, drop_height_ft=drop_height_ft, **TRUTH)
    blow = model.full.fall_time
    n = int(round((BEFORE_S + AFTER_S) * SIM_RATE_HZ))
    ts = blow - BEFORE_S + np.arange(n + 1) / SIM_RATE_HZ
    sol = diffmbs.simulate(model, *model.initial_state(), jnp.asarray(ts), t0=0.0, rtol=1e-7,
                           atol=1e-10, max_steps=400_000)  # fmt: skip
    accel_g = np.asarray(sol.sensors["equipment_acceleration"])[:, 2] / G
    noisy = accel_g + rng.normal(0.0, NOISE_RMS_G, accel_g.shape)
    b, a = scipy.signal.butter(4, ANTI_ALIAS_HZ, fs=SIM_RATE_HZ)
    filtered = scipy.signal.lfilter(b, a, noisy)
    first = -int(round(BEFORE_S * SIM_RATE_HZ / DECIMATION))
    return (first + np.arange(filtered[::DECIMATION].size)) * DECIMATION / SIM_RATE_HZ, \
        filtered[::DECIMATION]


def main() -> None:
    rng = np.random.default_rng(SEED)
    freqs = octave_frequencies(*SRS_BAND_HZ, per_octave=12)
    for stem, equipment, height in TESTS:
        t, accel_g = measure(equipment, height, rng)
        write_csv_atomic(HERE / f"{stem}_accel.csv", ["time_s", "equipment_accel_g"],
                         [t, accel_g])  # fmt: skip
        srs = np.asarray(shock_response_spectrum(accel_g, t[1] - t[0], freqs))
        write_csv_atomic(HERE / f"{stem}_srs.csv", ["frequency_Hz", "maximax_g"], [freqs, srs])
        print(f"{stem}: peak {np.abs(accel_g).max():.1f} g, SRS max {srs.max():.1f} g",
              flush=True)


if __name__ == "__main__":
    main()
