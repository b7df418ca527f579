"""Make the synthetic "measured" slider acceleration of this folder (run from the repository root).

    python data/slider_crank/make_record.py

The record comes from a model that differs in structure from the one the fit job uses
(``fit.toml``: maximal coordinates, regularised Coulomb friction, the recorder simulated at
100 kHz):

* joint coordinates (``diffmbs.multibody.in_joint_coordinates``: a tree with the loop closed by
  constraints — other equations, other constraint solve);
* friction with stick: ``BristleFriction`` (an elastic stick point per journal end, three
  states each, static coefficient 1.25× the dynamic one);
* integrated at rtol 1e-10 (Tsit5), the slider's velocity sampled at 1 MHz;
* a recorder: the acceleration through a 4-pole Butterworth anti-alias filter at 2 kHz
  (``diffmbs.recorder``, which tests/test_recorder.py checks against ``scipy.signal.lsim``),
  sampled at 10 kHz, plus white noise of 2 % of the record's RMS (seeded).

Truth values: ``TRUTH`` below and README.md. Writes ``slider_acceleration.csv`` (time s,
acceleration m/s² along the guide, Y).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import diffmbs
from diffmbs.contact import damping_from_restitution
from diffmbs.friction import BristleFriction
from diffmbs.io import write_csv_atomic
from diffmbs.models.slider_crank import slider_crank
from diffmbs.multibody import in_joint_coordinates
from diffmbs.recorder import Butterworth, Recorder

HERE = Path(__file__).resolve().parent
RESTITUTION, IMPACT_SPEED = 0.7, 0.1  # 1, m/s: the truth's contact damping
TRUTH = {
    "crank_bearing.clearance": 3.5e-4,  # m (the design value is 0.5 mm)
    "crank_bearing.stiffness": 3.0e10,  # N/m^1.5
    "crank_bearing.damping": float(damping_from_restitution(RESTITUTION, IMPACT_SPEED)),  # s/m
    "crank_bearing.friction.mu": 0.08,  # the bristle's dynamic coefficient
}
MU_STATIC = 1.25 * TRUTH["crank_bearing.friction.mu"]
DURATION_S, RATE_HZ = 0.15, 10_000.0
ANTI_ALIAS = Butterworth(cutoff_hz=2000.0, order=4)
NOISE = 0.02  # of the record's RMS
SEED = 901


def truth_model():
    """The truth: the slider-crank in joint coordinates with bristle friction."""
    friction = BristleFriction(MU_STATIC, TRUTH["crank_bearing.friction.mu"], k_stick=1e6,
                               c_stick=60.0, v_stick=1e-3)  # fmt: skip
    return in_joint_coordinates(slider_crank(
        TRUTH["crank_bearing.clearance"], stiffness=TRUTH["crank_bearing.stiffness"],
        restitution=RESTITUTION, impact_speed=IMPACT_SPEED, friction=friction))  # fmt: skip


def record(oversample: int = 100, rtol: float = 1e-10):
    """``(times (n,) s, noiseless record (n,) m/s², noisy record (n,) m/s²)``."""
    ts = np.arange(round(DURATION_S * RATE_HZ) + 1) / RATE_HZ
    recorder = Recorder(ANTI_ALIAS, oversample=oversample, differentiate=True)
    fine_ts = recorder.fine_times(ts)
    model = truth_model()
    solution = diffmbs.simulate(model, *model.initial_state(), fine_ts, rtol=rtol,
                                atol=rtol * 1e-3, max_steps=400_000)  # fmt: skip
    velocity = np.asarray(solution.sensors["slider_velocity"])[:, 1]
    clean = np.asarray(recorder.record(velocity, fine_ts[1] - fine_ts[0]))
    rms = float(np.sqrt(np.mean(clean**2)))
    noisy = clean + NOISE * rms * np.random.default_rng(SEED).standard_normal(clean.size)
    return ts, clean, noisy


def main() -> None:
    diffmbs.configure()
    ts, _, noisy = record()
    write_csv_atomic(HERE / "slider_acceleration.csv", ["time_s", "acceleration_m_s2"],
                     [ts, noisy])  # fmt: skip
    print(f"wrote {HERE / 'slider_acceleration.csv'}: {ts.size} samples")


if __name__ == "__main__":
    main()
