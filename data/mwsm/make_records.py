"""Make the synthetic "measured" MWSM records in this folder (run from the repository root).

    python data/mwsm/make_records.py

Real Medium Weight Shock Machine records are confidential, so these stand in for them. They
come from a *truth model that differs structurally* from diffmbs.models.LumpedContactModel,
the model the demo fits:
- the anvil table is two masses joined by a spring (a compliant anvil), not one rigid mass;
- the equipment is a base with an internal resonator (an extra resonance), not one mass.

The simulated equipment-base acceleration then passes through a measurement chain: white
accelerometer noise, a causal 4-pole Butterworth anti-aliasing filter at 2.5 kHz, and
decimation from 100 kHz to 10 kHz. Needs scipy (a dev dependency) for the filter. The truth
values are in TRUTH and in README.md.
"""

from __future__ import annotations

from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import scipy.signal

import diffmbs
from diffmbs.contact import damping_from_restitution, hunt_crossley_force
from diffmbs.io import write_csv_atomic
from diffmbs.models.mwsm import ANVIL_LB, BED_LB, EQUIPMENT_KG, FT, HAMMER_LB, INCH, LB, G
from diffmbs.srs import octave_frequencies, shock_response_spectrum
from diffmbs.system import MechanicalSystem

HERE = Path(__file__).resolve().parent

TRUTH = {
    "k_impact_N_per_m1.5": 8.0e10,
    "e_impact": 0.40,
    "k_stop_N_per_m1.5": 1.5e11,
    "e_stop": 0.45,
    "bed_Hz": 3.5,
    "zeta_bed": 0.05,
    "channel_Hz": 52.0,  # of the whole equipment mass on the channels
    "zeta_channel": 0.06,
    "anvil_lower_fraction": 0.4,  # of the anvil mass below the anvil spring (struck part)
    "anvil_internal_Hz": 350.0,  # the two anvil masses against each other
    "zeta_anvil": 0.02,
    "equipment_internal_fraction": 0.15,  # of the equipment mass on the internal resonator
    "equipment_internal_Hz": 180.0,
    "zeta_internal": 0.03,
}
DROP_HEIGHTS_FT = (1.0, 2.0)
DURATION_S = 0.15
SIM_RATE_HZ = 100_000.0
DECIMATION = 10  # → 10 kHz records
ANTI_ALIAS_HZ = 2_500.0
NOISE_RMS_G = 0.05
SRS_BAND_HZ = (5.0, 1000.0)
SEED = 901


class TruthModel(MechanicalSystem):
    """q = (hammer, anvil lower, anvil top, bed, equipment base, equipment internal), m, up."""

    masses: jnp.ndarray
    k_impact: float
    chi_impact: float
    k_stop: float
    chi_stop: float
    travel: float
    k_anvil: float
    c_anvil: float
    k_bed: float
    c_bed: float
    k_channel: float
    c_channel: float
    k_internal: float
    c_internal: float
    impact_speed: float
    smoothing: float = eqx.field(static=True, default=1e-6)

    def mass(self, q):
        return jnp.diag(self.masses)

    def forces(self, t, q, v):
        h, a1, a2, b, e1, e2 = q
        vh, va1, va2, vb, ve1, ve2 = v
        eps = self.smoothing
        f_imp = hunt_crossley_force(h - a1, vh - va1, self.k_impact, self.chi_impact, 1.5, eps)
        f_low = hunt_crossley_force(b - a1, vb - va1, self.k_stop, self.chi_stop, 1.5, eps)
        f_up = hunt_crossley_force(
            a1 - b - self.travel, va1 - vb, self.k_stop, self.chi_stop, 1.5, eps
        )
        f_anv = self.k_anvil * (a2 - a1) + self.c_anvil * (va2 - va1)  # down on the top
        f_ch = self.k_channel * (e1 - a2) + self.c_channel * (ve1 - va2)  # down on the base
        f_int = self.k_internal * (e2 - e1) + self.c_internal * (ve2 - ve1)
        f_bed = self.k_bed * b + self.c_bed * vb
        weight = self.masses * G
        return jnp.stack(
            [
                -f_imp,
                f_imp + f_low - f_up + f_anv,
                -f_anv + f_ch,
                -f_low + f_up - f_bed,
                -f_ch + f_int,
                -f_int,
            ]
        ) - weight

    def sensors(self, t, q, v, vdot):
        return {"equipment_acceleration": vdot[4]}

    def initial_state(self):
        """Static equilibrium under gravity, hammer 1 mm below the anvil moving up at v0."""
        m_h, m_a1, m_a2, m_b, m_e1, m_e2 = self.masses
        m_e = m_e1 + m_e2
        x_b = -(m_a1 + m_a2 + m_b + m_e) * G / self.k_bed
        ds = ((m_a1 + m_a2 + m_e) * G / self.k_stop) ** (1 / 1.5)
        delta = ds + self.smoothing * jnp.log(-jnp.expm1(-ds / self.smoothing))
        x_a1 = x_b - delta
        x_a2 = x_a1 - (m_a2 + m_e) * G / self.k_anvil
        x_e1 = x_a2 - m_e * G / self.k_channel
        x_e2 = x_e1 - m_e2 * G / self.k_internal
        q0 = jnp.stack([x_a1 - 1e-3, x_a1, x_a2, x_b, x_e1, x_e2])
        v0 = jnp.zeros(6).at[0].set(self.impact_speed)
        return q0, v0


def truth_model(drop_height_ft: float) -> TruthModel:
    t = TRUTH
    m_h, m_a, m_b, m_e = HAMMER_LB * LB, ANVIL_LB * LB, BED_LB * LB, EQUIPMENT_KG
    m_a1 = t["anvil_lower_fraction"] * m_a
    m_a2 = m_a - m_a1
    m_e2 = t["equipment_internal_fraction"] * m_e
    m_e1 = m_e - m_e2
    v0 = float(np.sqrt(2 * G * drop_height_ft * FT))

    def spring(mass, hz, zeta):
        k = mass * (2 * np.pi * hz) ** 2
        return k, 2 * zeta * np.sqrt(k * mass)

    k_anvil, c_anvil = spring(m_a1 * m_a2 / m_a, t["anvil_internal_Hz"], t["zeta_anvil"])
    k_bed, c_bed = spring(m_a + m_b + m_e, t["bed_Hz"], t["zeta_bed"])
    k_ch, c_ch = spring(m_e, t["channel_Hz"], t["zeta_channel"])
    k_int, c_int = spring(m_e2, t["equipment_internal_Hz"], t["zeta_internal"])
    return TruthModel(
        masses=jnp.array([m_h, m_a1, m_a2, m_b, m_e1, m_e2]),
        k_impact=t["k_impact_N_per_m1.5"],
        chi_impact=float(damping_from_restitution(t["e_impact"], v0)),
        k_stop=t["k_stop_N_per_m1.5"],
        chi_stop=float(damping_from_restitution(t["e_stop"], 0.545 * v0)),
        travel=3.0 * INCH,
        k_anvil=k_anvil,
        c_anvil=c_anvil,
        k_bed=k_bed,
        c_bed=c_bed,
        k_channel=k_ch,
        c_channel=c_ch,
        k_internal=k_int,
        c_internal=c_int,
        impact_speed=v0,
    )


def measure(drop_height_ft: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(time s, measured equipment acceleration in g) of one test."""
    model = truth_model(drop_height_ft)
    ts = np.arange(int(round(DURATION_S * SIM_RATE_HZ)) + 1) / SIM_RATE_HZ
    sol = diffmbs.simulate(model, *model.initial_state(), ts, rtol=1e-10, atol=1e-12)
    accel_g = np.asarray(sol.sensors["equipment_acceleration"]) / G
    noisy = accel_g + rng.normal(0.0, NOISE_RMS_G, accel_g.shape)
    b, a = scipy.signal.butter(4, ANTI_ALIAS_HZ, fs=SIM_RATE_HZ)
    filtered = scipy.signal.lfilter(b, a, noisy)
    return ts[::DECIMATION], filtered[::DECIMATION]


def main() -> None:
    rng = np.random.default_rng(SEED)
    freqs = octave_frequencies(*SRS_BAND_HZ, per_octave=12)
    for height in DROP_HEIGHTS_FT:
        t, accel_g = measure(height, rng)
        stem = f"test_{height:g}ft"
        write_csv_atomic(
            HERE / f"{stem}_accel.csv", ["time_s", "equipment_accel_g"], [t, accel_g]
        )
        srs = np.asarray(shock_response_spectrum(accel_g, t[1] - t[0], freqs))
        write_csv_atomic(HERE / f"{stem}_srs.csv", ["frequency_Hz", "maximax_g"], [freqs, srs])
        print(f"{stem}: peak {np.abs(accel_g).max():.1f} g, SRS max {srs.max():.1f} g")


if __name__ == "__main__":
    main()
