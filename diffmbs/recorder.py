"""What a data recorder does to a signal before it is sampled: its analog anti-alias filter.

A measured acceleration is never the point value of the acceleration at the sample times: the
recorder's anti-alias filter (an analog low-pass, most often a Butterworth) sees the continuous
signal first. Impacts in a simulation last microseconds, far less than a sampling interval, so
the simulated acceleration read at the samples aliases them — each sample hits or misses a
spike by chance. :class:`Recorder` reproduces the recorder instead: the simulation is sampled
``oversample`` times finer than the record, the analog filter is applied exactly for an input
that is linear between those fine samples (first-order hold, as ``scipy.signal.lsim``), and the
output is read at the record's samples.

With ``differentiate=True`` the input is the *velocity* and the output is the filtered
*acceleration*, ``d/dt (H v) = C A x + C B v``: a velocity linear between fine samples is an
acceleration equal to each interval's mean, which is exact however short the impacts are (the
velocity is continuous through them), where sampling the acceleration is not.

The filter starts in the steady state of the signal's first value (the recorder ran before the
record, with the signal constant). Everything here is linear in the signal, so it is
differentiable and batchable; ``cutoff_hz``, ``order`` and the sampling are structure.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

__all__ = ["Butterworth", "Recorder"]


class Butterworth(eqx.Module):
    """Analog Butterworth low-pass of ``order`` (≥ 1) and ``cutoff_hz`` (−3 dB, Hz), unit DC
    gain: ``|H(iω)|² = 1 / (1 + (ω/ω_c)^(2n))``."""

    cutoff_hz: float = eqx.field(static=True)
    order: int = eqx.field(static=True, default=4)

    def __check_init__(self):
        if not (math.isfinite(self.cutoff_hz) and self.cutoff_hz > 0):
            raise ValueError(f"Butterworth.cutoff_hz must be positive, got {self.cutoff_hz}")
        if int(self.order) != self.order or self.order < 1:
            raise ValueError(f"Butterworth.order must be an integer >= 1, got {self.order}")

    def state_space(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(A (n, n), B (n,), C (n,))`` of ``ẋ = A x + B u, y = C x``: a cascade of
        second-order sections (and one first-order section for odd n), each state scaled to
        the output's unit, so every entry is O(ω_c) whatever the order (a companion form's
        entries grow as ω_cⁿ)."""
        omega = 2.0 * math.pi * self.cutoff_hz
        n = int(self.order)
        a = np.zeros((n, n))
        b = np.zeros(n)
        row = 0
        previous = None  # the output state of the section before: this section's input
        if n % 2:
            a[0, 0] = -omega
            b[0] = omega
            previous, row = 0, 1
        for k in range(n // 2):
            zeta = math.sin(math.pi * (2 * k + 1) / (2 * n))  # the pole pair's damping
            y, dy = row, row + 1  # y and ẏ/ω of this section
            a[y, dy] = omega
            a[dy, y], a[dy, dy] = -omega, -2.0 * zeta * omega
            if previous is None:
                b[dy] = omega
            else:
                a[dy, previous] = omega
            previous, row = y, row + 2
        c = np.zeros(n)
        c[previous] = 1.0
        return a, b, c


class Recorder(eqx.Module):
    """A recorder's anti-alias ``filter`` (a :class:`Butterworth`) between a simulated signal
    and its record (see the module docstring).

    - ``oversample``: fine samples per record interval at which the signal is taken (linear
      between them); the filter's cutoff should lie well below their rate.
    - ``differentiate``: the signal is a velocity and the record its filtered derivative.
    """

    filter: Butterworth
    oversample: int = eqx.field(static=True, default=10)
    differentiate: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if int(self.oversample) != self.oversample or self.oversample < 1:
            raise ValueError(f"Recorder.oversample must be an integer >= 1, got {self.oversample}")

    def fine_times(self, ts: ArrayLike) -> np.ndarray:
        """The times ``(k (n − 1) + 1,)`` s at which to sample the signal for a record at the
        uniform times ``ts`` ``(n,)`` s (k = ``oversample``)."""
        ts = np.asarray(ts, dtype=float)
        steps = np.diff(ts)
        if ts.ndim != 1 or ts.size < 2 or not np.allclose(steps, steps[0], rtol=1e-6, atol=0):
            raise ValueError("a Recorder needs uniform record times (at least two)")
        k = int(self.oversample)
        return ts[0] + np.arange((ts.size - 1) * k + 1) * (steps[0] / k)

    def _discretized(self, dt: float):
        """Exact step of the filter over ``dt`` for an input linear across it:
        ``x₁ = Φ x₀ + Γ₀ u₀ + Γ₁ (u₁ − u₀)``."""
        a, b, _ = self.filter.state_space()
        n = a.shape[0]
        augmented = np.zeros((n + 2, n + 2))
        augmented[:n, :n] = a * dt
        augmented[:n, n] = b * dt
        augmented[n, n + 1] = 1.0
        step = jax.scipy.linalg.expm(jnp.asarray(augmented))
        return step[:n, :n], step[:n, n], step[:n, n + 1]

    def record(self, fine_signal: Array, fine_dt: float) -> Array:
        """The record ``(..., n)`` of a signal sampled at :meth:`fine_times` every ``fine_dt``
        s: ``fine_signal`` ``(..., k (n − 1) + 1)`` (time last, any unit)."""
        fine_signal = jnp.asarray(fine_signal)
        if (fine_signal.shape[-1] - 1) % int(self.oversample):
            raise ValueError(
                f"Recorder.record: {fine_signal.shape[-1]} fine samples are not "
                f"oversample ({self.oversample}) × intervals + 1"
            )
        a, b, c = self.filter.state_space()
        phi, gamma0, gamma1 = self._discretized(float(fine_dt))
        # steady state of the first value: A x + B u = 0; the DC gain is 1, so x = u (each state
        # is scaled to the output) — except the ẏ/ω states, which are 0
        steady = jnp.asarray(-np.linalg.solve(a, b))
        u = jnp.moveaxis(fine_signal, -1, 0)

        def step(x, pair):
            u0, u1 = pair
            x1 = x @ phi.T + gamma0 * u0[..., None] + gamma1 * (u1 - u0)[..., None]
            return x1, x1

        x0 = u[0][..., None] * steady
        _, states = jax.lax.scan(step, x0, (u[:-1], u[1:]))
        states = jnp.concatenate([x0[None], states], axis=0)[:: int(self.oversample)]
        if self.differentiate:
            out = states @ jnp.asarray(a.T @ c) + u[:: int(self.oversample)] * float(c @ b)
        else:
            out = states @ jnp.asarray(c)
        return jnp.moveaxis(out, 0, -1)
