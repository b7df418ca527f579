"""Make the synthetic "measured" bore profile of this folder (run from the repository root).

    python data/four_bar_wear/make_record.py

A four-bar (``diffmbs.models.four_bar``) turning at 100 rpm wears the clearance joint between
its coupler and its rocker for 100,000 cycles; a roundness instrument then reads the rocker's
bore through its Gaussian filter at 50 undulations per revolution (ISO 12181-2's default,
``diffmbs.wear.roundness_filter``): its radius minus the journal's nominal radius (clearance
plus worn depth) every 5°. The record comes from a model that differs in structure from the fit
job's (``fit.toml``: body coordinates, 240 cells of 1.5°, four equal updates of one simulated
cycle):

* joint coordinates (``diffmbs.multibody.in_joint_coordinates``): other equations, the loop
  opened at the clearance joint;
* maps of 480 cells (0.75°);
* the wear extrapolated under depth control (no cell deeper by more than 0.1 µm per update,
  two simulated cycles per update, two settling cycles), integrated at rtol 1e-9;
* read at 72 angles offset by 1° from the cells, plus white noise of 0.1 µm (seeded).

Truth values: ``TRUTH`` below and README.md. Writes ``bore_profile.csv`` (angle_deg,
radius_um).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import diffmbs

diffmbs.configure()  # before the model module computes its constants

from diffmbs.io import write_csv_atomic  # noqa: E402
from diffmbs.models.four_bar import four_bar_with_wear  # noqa: E402
from diffmbs.multibody import in_joint_coordinates  # noqa: E402
from diffmbs.wear import interpolate_periodic, predict_wear, roundness_filter  # noqa: E402

HERE = Path(__file__).resolve().parent
SPEED_RPM = 100.0
TRUTH = {"clearance": 2.0e-4, "k_bore": 1.0e-14}  # m, 1/Pa
K_JOURNAL = 1.0e-15  # 1/Pa (not fitted: the job holds it)
CYCLES = 100_000
NOISE = 1e-7  # m
SEED = 27
FILTER_UPR = 50.0  # the instrument's roundness filter, undulations per revolution


def truth_profile(progress: bool = True):
    """``(angles deg (72,), radius minus the journal's nominal radius m (72,))`` as the
    instrument reads it (filtered), noise-free."""
    model = in_joint_coordinates(four_bar_with_wear(
        clearance=TRUTH["clearance"], speed_rpm=SPEED_RPM, cells=480,
        wear_coefficient=(TRUTH["k_bore"], K_JOURNAL)))  # fmt: skip
    q0, v0 = model.initial_state()
    worn = predict_wear(model, q0, v0, element="C", period=60.0 / SPEED_RPM, cycles=CYCLES,
                        settle_cycles=2, cycles_per_update=2, max_depth_step=1e-7,
                        progress=progress, rtol=1e-9, atol=1e-12, max_steps=400_000)  # fmt: skip
    angles = np.arange(72) * 5.0 + 1.0
    depth = interpolate_periodic(roundness_filter(worn.bore[-1], FILTER_UPR), np.radians(angles))
    print(f"{len(worn.schedule)} updates, {worn.simulated_cycles} cycles simulated")
    return angles, TRUTH["clearance"] + np.asarray(depth)


def main() -> None:
    angles, radius = truth_profile()
    measured = radius + NOISE * np.random.default_rng(SEED).standard_normal(radius.size)
    write_csv_atomic(HERE / "bore_profile.csv", ["angle_deg", "radius_um"],
                     [angles, 1e6 * measured])  # fmt: skip
    print(f"deepest {1e6 * (radius.max() - TRUTH['clearance']):.3f} µm; wrote bore_profile.csv")


if __name__ == "__main__":
    main()
