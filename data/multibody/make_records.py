"""Make the synthetic "measured" drop-table records in this folder (run from the repository root).

    python data/multibody/make_records.py

The records come from a *different simulator* than the one the job fits with: the drop table of
``drop_table.toml`` written out as its two vertical equations of motion and integrated by SciPy
(DOP853, rtol 1e-11, the contact's start and end located as events), with the plain
Hunt–Crossley law F = K δ^1.5 (1 + χ δ̇) (no smoothing, no clamp: it does not go negative
here). The accelerometer reads the equipment's acceleration plus g (0 in free fall). Its
5 %-damped maximax SRS (diffmbs.srs, which tests/test_srs.py checks against SciPy) is written
from 10 Hz to 1 kHz, 12 per octave. Truth values: TRUTH below and README.md. Needs scipy (a dev
dependency).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.integrate

import diffmbs
from diffmbs.io import write_csv_atomic
from diffmbs.srs import octave_frequencies, shock_response_spectrum

HERE = Path(__file__).resolve().parent
G = 9.81  # m/s², as drop_table.toml
TABLE_KG, EQUIPMENT_KG = 400.0, 100.0
UNDERSIDE_M = 0.1  # contact point below the table's origin
GAP_M = 1e-4  # initial gap between the underside and the pad
FREE_LENGTH_M = 0.5
TRUTH = {
    "mount.stiffness": 4.0e6,  # N/m (~32 Hz with the equipment)
    "mount.damping": 1500.0,  # N s/m (~3.8 % of critical)
    "impact.stiffness": 2.0e10,  # N/m^1.5
    "impact.damping": 0.25,  # s/m (Hunt–Crossley χ)
}
IMPACT_SPEEDS = {"drop_slow": 1.5, "drop_fast": 3.0}  # m/s
DURATION_S, RATE_HZ = 0.1, 10_000.0
SRS_BAND_HZ, PER_OCTAVE = (10.0, 1000.0), 12


def rhs(t, y, contact: bool):
    """``y = (z_table, z_equipment, ż_table, ż_equipment)`` (m, m/s), origins of the bodies."""
    z_t, z_e, w_t, w_e = y
    k, c = TRUTH["mount.stiffness"], TRUTH["mount.damping"]
    tension = k * (z_e - z_t - FREE_LENGTH_M) + c * (w_e - w_t)  # pulls the two together
    force = 0.0
    if contact:
        delta, rate = UNDERSIDE_M - z_t, -w_t
        force = TRUTH["impact.stiffness"] * max(delta, 0.0) ** 1.5 * (
            1.0 + TRUTH["impact.damping"] * rate
        )
    a_t = -G + (force + tension) / TABLE_KG
    a_e = -G - tension / EQUIPMENT_KG
    return np.array([w_t, w_e, a_t, a_e])


def touch(t, y, contact):
    """The underside reaches the pad (free flight ends)."""
    return UNDERSIDE_M - y[0]


def release(t, y, contact):
    """The underside leaves the pad (contact ends)."""
    return UNDERSIDE_M - y[0]


touch.terminal, touch.direction = True, 1.0
release.terminal, release.direction = True, -1.0


def record(speed: float) -> tuple[np.ndarray, np.ndarray]:
    """``(t (n,), accelerometer reading (n,) m/s²)``: the equipment's acceleration plus g."""
    ts = np.arange(int(round(DURATION_S * RATE_HZ)) + 1) / RATE_HZ
    y = np.array([UNDERSIDE_M + GAP_M, UNDERSIDE_M + GAP_M + FREE_LENGTH_M, -speed, -speed])
    t, contact, reading = 0.0, False, np.full(ts.shape, np.nan)
    while t < ts[-1]:
        sol = scipy.integrate.solve_ivp(
            rhs, (t, ts[-1]), y, method="DOP853", rtol=1e-11, atol=1e-13, args=(contact,),
            events=release if contact else touch, dense_output=True,
        )  # fmt: skip
        inside = (ts >= t) & (ts <= sol.t[-1])
        if inside.any():
            states = sol.sol(ts[inside])
            reading[inside] = [rhs(0.0, s, contact)[3] + G for s in states.T]
        t, y, contact = sol.t[-1], sol.y[:, -1], not contact
    assert np.all(np.isfinite(reading))
    return ts, reading


def main() -> None:
    diffmbs.configure()
    freqs = octave_frequencies(*SRS_BAND_HZ, PER_OCTAVE)
    for name, speed in IMPACT_SPEEDS.items():
        ts, reading = record(speed)
        srs = np.asarray(shock_response_spectrum(reading, 1.0 / RATE_HZ, freqs, damping=0.05))
        write_csv_atomic(HERE / f"{name}_accel.csv", ["time_s", "equipment_accel_g"],
                         [ts, reading / 9.80665])  # fmt: skip
        write_csv_atomic(HERE / f"{name}_srs.csv", ["frequency_Hz", "maximax_g"],
                         [freqs, srs / 9.80665])  # fmt: skip
        print(f"{name}: peak {np.max(np.abs(reading)) / 9.80665:.1f} g")


if __name__ == "__main__":
    main()
