"""Make the synthetic "measured" wheel acceleration of this folder (run from the repository root).

    python data/gear_rig/make_record.py

A spur pair on a test rig (``diffmbs.models.gear_rig``): the pinion turned at 50 rad/s, the
wheel braked by 20 ± 30 N·m at 40 Hz, which reverses the load twice every 25 ms, so the teeth
cross their backlash and rattle.
A tangential accelerometer on the wheel's rim (50 mm from the axis) records the wheel's dynamic
transmission error as an acceleration. The record comes from a model that differs in structure
from the one the fit job uses (``fit.toml``: body coordinates, the recorder simulated 10× finer
than the record, rtol 1e-8):

* joint coordinates (``diffmbs.multibody.in_joint_coordinates``: the wheel's angle and the
  pinion's prescribed one as the coordinates — other equations, no constraint solve);
* integrated at rtol 1e-10, the rim's speed sampled at 1 MHz;
* a recorder: the acceleration through a 4-pole Butterworth anti-alias filter at 5 kHz
  (``diffmbs.recorder``), sampled at 20 kHz, plus white noise of 2 % of the record's RMS
  (seeded).

Truth values: ``TRUTH`` below and README.md. Writes ``wheel_acceleration.csv`` (time s,
tangential acceleration m/s²).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import diffmbs
from diffmbs.io import write_csv_atomic
from diffmbs.models.gear_rig import gear_rig
from diffmbs.multibody import in_joint_coordinates
from diffmbs.recorder import Butterworth, Recorder

HERE = Path(__file__).resolve().parent
TRUTH = {
    "mesh.stiffness": 2.0e8,  # N/m (ISO 6336's c'b: 2.54e8)
    "mesh.damping": 2500.0,  # N·s/m per tooth pair
    "mesh.allowance": 4.0e-5,  # m (the drawing's: 30 µm)
    "mesh.mu": 0.06,
}
DURATION_S, RATE_HZ = 0.06, 20_000.0
ANTI_ALIAS = Butterworth(cutoff_hz=5000.0, order=4)
NOISE = 0.02  # of the record's RMS
SEED = 28


def truth_model():
    """The truth: the rig in joint coordinates at the ``TRUTH`` values."""
    return in_joint_coordinates(gear_rig(**{k.split(".")[1]: v for k, v in TRUTH.items()}))


def record(oversample: int = 50, rtol: float = 1e-10):
    """``(times (n,) s, noiseless record (n,) m/s², noisy record (n,) m/s²)``."""
    ts = np.arange(round(DURATION_S * RATE_HZ) + 1) / RATE_HZ
    recorder = Recorder(ANTI_ALIAS, oversample=oversample, differentiate=True)
    fine_ts = recorder.fine_times(ts)
    model = truth_model()
    solution = diffmbs.simulate(model, *model.initial_state(), fine_ts, rtol=rtol,
                                atol=rtol * 1e-3, max_steps=400_000)  # fmt: skip
    rim_speed = np.asarray(solution.sensors["wheel_rim_velocity"])[:, 1]
    clean = np.asarray(recorder.record(rim_speed, fine_ts[1] - fine_ts[0]))
    rms = float(np.sqrt(np.mean(clean**2)))
    noisy = clean + NOISE * rms * np.random.default_rng(SEED).standard_normal(clean.size)
    return ts, clean, noisy


def main() -> None:
    diffmbs.configure()
    ts, _, noisy = record()
    write_csv_atomic(HERE / "wheel_acceleration.csv", ["time_s", "acceleration_m_s2"],
                     [ts, noisy])  # fmt: skip
    print(f"wrote {HERE / 'wheel_acceleration.csv'}: {ts.size} samples")


if __name__ == "__main__":
    main()
