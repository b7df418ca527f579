"""Draw ``gearbox_start.png`` (the README's figure): the ship gearbox of SEEDS 000 started from
rest — the shafts' speeds, and the mesh's efficiency, 1 − friction loss ÷ engine power, over a
mesh cycle's running mean. Run from the repository root (about a minute on one core):

    python docs/images/make_gearbox_figure.py
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import jax.numpy as jnp  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import diffmbs  # noqa: E402

diffmbs.configure()

from diffmbs.models.ship_gearbox import NOMINAL_SPEED, PAIR, ship_gearbox  # noqa: E402


def main() -> None:
    model = ship_gearbox(mu=0.05)
    ts = jnp.linspace(0.0, 8.0, 8001)
    sol = diffmbs.simulate(model, *model.initial_state(), ts, rtol=1e-6, atol=1e-8,
                           max_steps=2_000_000)  # fmt: skip
    t = np.asarray(ts)
    pinion = np.asarray(sol.sensors["pinion_speed"])[:, 2]
    wheel = np.asarray(sol.sensors["wheel_speed"])[:, 2]
    engine = np.asarray(sol.sensors["engine_output"])[:, 2] * pinion
    friction = sum(np.asarray(sol.sensors[f"mesh_{side}_output"])[:, 2]
                   for side in ("left", "right"))  # fmt: skip
    window = 25  # 25 ms: several mesh cycles at every speed past the first second
    kernel = np.ones(window) / window
    mean_engine = np.convolve(engine, kernel, mode="same")
    mean_friction = np.convolve(friction, kernel, mode="same")
    running = (t > 0.5) & (t < t[-1] - 0.02)
    fig, (speeds, efficiency) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=90)
    rpm = 60.0 / (2.0 * math.pi)
    speeds.plot(t, rpm * pinion, label=f"pinion (engine), z {PAIR.teeth[0]}")
    speeds.plot(t, -rpm * wheel, label=f"wheel (propeller), z {PAIR.teeth[1]}")
    speeds.axhline(rpm * NOMINAL_SPEED, ls=":", color="grey")
    speeds.set(xlabel="time (s)", ylabel="speed (rpm)", title="start from rest")
    speeds.legend(fontsize=8)
    efficiency.plot(t[running], 100.0 * (1.0 - mean_friction / mean_engine)[running])
    efficiency.set(xlabel="time (s)", ylabel="efficiency (%)", ylim=(99.0, 100.0),
                   title="the teeth's friction (μ = 0.05)")  # fmt: skip
    fig.tight_layout()
    out = Path(__file__).resolve().parent / "gearbox_start.png"
    fig.savefig(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
