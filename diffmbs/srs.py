"""Shock response spectrum (SRS): Smallwood's ramp-invariant SDOF filter (ISO 18431-4) in JAX.

The SRS of an acceleration record is the peak response of a bank of single-degree-of-freedom
(SDOF) oscillators, one per natural frequency, whose base follows the record. This module computes
it exactly for a piecewise-linear input (ramp invariance, Smallwood 1981), as one ``lax.scan`` over
time that advances every oscillator at once, and it is ``jit``-, ``vmap``- and ``grad``-able.

Conventions
-----------
* ``accel`` has time on its last axis; leading axes are independent records.
* Units are those of ``accel``: an SRS of absolute acceleration comes back in the same unit;
  ``pseudo_velocity`` is in (unit · s), e.g. m/s for m/s² input.
* As in ISO 18431-4 and ``scipy.signal.lfilter``, the input is zero before its first sample
  (the oscillators are at rest one sample earlier) and ramps to zero one sample after its last;
  after that the oscillators ring freely, and that residual response is evaluated in closed form,
  so nobody has to pad a record by hand.
* ``dt``, ``freqs``, ``damping`` and ``kind`` describe the analysis and must be concrete Python or
  NumPy values; only ``accel`` may be traced (differentiated, batched).

Numerics
--------
The recursion is the state-space realisation of the ramp-invariant filter (relative displacement
and velocity as state). Its coefficients are integrals of the SDOF impulse response, evaluated by a
Taylor series in ω·dt: with ω·dt ≤ 2π/10 (enforced, see below) 30 terms reach round-off, and no
term cancels, which is where the textbook closed forms lose digits for ω·dt ≪ 1. The equivalent
direct-form coefficients (Smallwood's b, a) are available from :func:`ramp_invariant_coefficients`.

Below 10 samples per cycle, peak picking on the samples under-reads the SRS (up to 5 % at 10
samples per cycle for a sinusoid, 30 % at 4). With ``upsample=True`` (default) the frequencies
below 10 samples per cycle are computed on a record resampled internally by an integer factor
with a band-limited (Kaiser-windowed sinc) interpolator to at least 32 samples per cycle; with
``upsample=False`` a ``ValueError`` names the frequency and the sample rate needed. The rule
reads the oscillator's frequency, as ISO 18431-4 does; a low-frequency oscillator driven by
content near Nyquist also carries that content in its response, so for such records call
:func:`upsample_record` first (that is what published spectra computed on the raw samples do not).
"""

from __future__ import annotations

import functools
import math
from typing import Literal, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from diffmbs import selection
from diffmbs._settings import require_float64

__all__ = [
    "KINDS",
    "RampInvariantSDOF",
    "octave_frequencies",
    "ramp_invariant_coefficients",
    "ramp_invariant_sdof",
    "shock_response_spectrum",
    "upsample_record",
]

SRSKind = Literal[
    "maximax",
    "primary_positive",
    "primary_negative",
    "primary",
    "residual",
    "pseudo_velocity",
    "pseudo_acceleration",
]
KINDS: tuple[str, ...] = SRSKind.__args__
"""The kinds of spectrum ``shock_response_spectrum(kind=...)`` computes."""

MIN_SAMPLES_PER_CYCLE = 10
"""Below this many samples per cycle at the highest frequency the SRS is resampled (or refused)."""
TARGET_SAMPLES_PER_CYCLE = 32
"""Internal resampling raises the sample rate to at least this many samples per cycle, where
peak picking reads a sinusoid's peak at worst 1 − cos(π/32) = 0.5 % low."""

_SERIES_TERMS = 30
_SCAN_UNROLL = 8

# What each kind reads: which response, how the samples are reduced, and over which window.
# reducer: "abs" -> max |y|, "pos" -> max y, "neg" -> max(-y).
_KIND_PLAN = {
    "maximax": ("acceleration", "abs", True, True),
    "primary": ("acceleration", "abs", True, False),
    "primary_positive": ("acceleration", "pos", True, False),
    "primary_negative": ("acceleration", "neg", True, False),
    "residual": ("acceleration", "abs", False, True),
    "pseudo_velocity": ("displacement", "abs", True, True),
    "pseudo_acceleration": ("displacement", "abs", True, True),
}


class RampInvariantSDOF(NamedTuple):
    """Discrete ramp-invariant model of a bank of base-excited SDOF oscillators.

    State x = (z, ż): relative displacement and velocity of each oscillator. With the shifted
    state ξ_k = x_k − feedthrough · u_k the recursion is ξ_{k+1} = Φ ξ_k + Γ u_k, exact when the
    base acceleration u is linear between samples. Shapes: ``(n_freq,)`` for the scalars,
    ``(n_freq, 2, 2)`` for Φ, ``(n_freq, 2)`` for Γ and the feedthrough.
    """

    omega: jax.Array  # natural angular frequencies ω, rad/s
    sigma: jax.Array  # decay rate ζω, 1/s
    omega_d: jax.Array  # damped angular frequency ω√(1−ζ²), rad/s
    phi: jax.Array  # state transition e^{A dt}
    gamma: jax.Array  # input vector of the shifted-state recursion
    feedthrough: jax.Array  # x_k = ξ_k + feedthrough · u_k


def ramp_invariant_sdof(freqs, dt: float, damping: float = 0.05) -> RampInvariantSDOF:
    """Ramp-invariant discretisation of z̈ + 2ζωż + ω²z = −u for each frequency in ``freqs``.

    Args:
        freqs: natural frequencies, Hz, shape ``(n_freq,)``.
        dt: sample interval, s.
        damping: viscous damping ratio ζ (fraction of critical), 0 ≤ ζ < 1.
    """
    freqs = jnp.asarray(freqs, dtype=jnp.float64)
    omega = 2.0 * jnp.pi * freqs
    sigma = damping * omega
    omega_d = omega * math.sqrt(1.0 - damping**2)

    # Impulse response g(t) of z for a unit initial velocity: g'' + 2σg' + ω²g = 0, g(0)=0, g'(0)=1.
    # With c_k = g^(k)(0)·dt^(k−1): c_0 = 0, c_1 = 1, c_{k+2} = −2σdt·c_{k+1} − (ω dt)²·c_k, and
    #   g(dt) = dt Σ c_k/k!,  g'(dt) = Σ c_{k+1}/k!,  ∫g = dt² Σ c_k/(k+1)!,  ∫∫g = dt³ Σ c_k/(k+2)!
    a1 = 2.0 * sigma * dt
    a2 = (omega * dt) ** 2
    c = [jnp.zeros_like(omega), jnp.ones_like(omega)]
    for _ in range(_SERIES_TERMS + 1):
        c.append(-a1 * c[-1] - a2 * c[-2])
    fact = [float(math.factorial(k)) for k in range(_SERIES_TERMS + 3)]
    g = dt * sum(c[k] / fact[k] for k in range(_SERIES_TERMS))
    g_dot = sum(c[k + 1] / fact[k] for k in range(_SERIES_TERMS))
    g_int = dt**2 * sum(c[k] / fact[k + 1] for k in range(_SERIES_TERMS))
    g_int2 = dt**3 * sum(c[k] / fact[k + 2] for k in range(_SERIES_TERMS))

    phi = jnp.stack(
        [
            jnp.stack([g_dot + 2.0 * sigma * g, g], axis=-1),
            jnp.stack([-(omega**2) * g, g_dot], axis=-1),
        ],
        axis=-2,
    )
    # Input u enters as −u in ż. Exact integration of a ramp u(t) = u_k + (u_{k+1} − u_k) t/dt:
    # x_{k+1} = Φ x_k + gamma_0 u_k + feedthrough u_{k+1}.
    feedthrough = -jnp.stack([g_int2 / dt, g_int / dt], axis=-1)
    gamma_0 = -jnp.stack([g_int - g_int2 / dt, g - g_int / dt], axis=-1)
    gamma = jnp.einsum("fij,fj->fi", phi, feedthrough) + gamma_0
    return RampInvariantSDOF(omega, sigma, omega_d, phi, gamma, feedthrough)


def _output_row(sdof: RampInvariantSDOF, response: str) -> jax.Array:
    """Row C with y = C x for the response read off the state, shape ``(n_freq, 2)``."""
    if response == "displacement":
        return jnp.stack([jnp.ones_like(sdof.omega), jnp.zeros_like(sdof.omega)], axis=-1)
    if response == "acceleration":  # absolute acceleration of the mass: −ω²z − 2ζωż
        return jnp.stack([-(sdof.omega**2), -2.0 * sdof.sigma], axis=-1)
    raise ValueError(f"unknown response {response!r}")


def ramp_invariant_coefficients(
    freqs,
    dt: float,
    damping: float = 0.05,
    response: Literal["absolute_acceleration", "relative_displacement"] = "absolute_acceleration",
) -> tuple[np.ndarray, np.ndarray]:
    """Smallwood's direct-form filter coefficients, for use with ``scipy.signal.lfilter``.

    For ``response="absolute_acceleration"`` these are the ISO 18431-4 coefficients
    b = (1 − S, 2(S − C), E² − S), a = (1, −2C, E²) with E = e^{−ζω dt}, C = E cos(ω_d dt),
    S = E sin(ω_d dt)/(ω_d dt); ``"relative_displacement"`` gives its counterpart (output z per
    unit base acceleration, in s²). Returns ``(b, a)``, each of shape ``(n_freq, 3)``.
    """
    name = {"absolute_acceleration": "acceleration", "relative_displacement": "displacement"}
    if response not in name:
        raise ValueError(f"response must be one of {sorted(name)}, got {response!r}")
    sdof = ramp_invariant_sdof(np.asarray(freqs, dtype=np.float64), dt, damping)
    b, a = _direct_form(sdof, _output_row(sdof, name[response]))
    return np.asarray(b), np.asarray(a)


def _direct_form(sdof: RampInvariantSDOF, row: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Transfer function of y = C x as (b, a), each ``(n_freq, 3)``, with a[:, 0] = 1."""
    phi, gamma = sdof.phi, sdof.gamma
    d = jnp.sum(row * sdof.feedthrough, axis=-1)
    trace = phi[:, 0, 0] + phi[:, 1, 1]
    det = phi[:, 0, 0] * phi[:, 1, 1] - phi[:, 0, 1] * phi[:, 1, 0]
    # C adj(zI − Φ) Γ = z (C·Γ) + [c0(−Φ22 Γ0 + Φ12 Γ1) + c1(Φ21 Γ0 − Φ11 Γ1)]
    const = row[:, 0] * (-phi[:, 1, 1] * gamma[:, 0] + phi[:, 0, 1] * gamma[:, 1]) + row[:, 1] * (
        phi[:, 1, 0] * gamma[:, 0] - phi[:, 0, 0] * gamma[:, 1]
    )
    b = jnp.stack([d, jnp.sum(row * gamma, axis=-1) - d * trace, const + d * det], axis=-1)
    a = jnp.stack([jnp.ones_like(trace), -trace, det], axis=-1)
    return b, a


def octave_frequencies(f_min: float, f_max: float, per_octave: int = 12) -> np.ndarray:
    """Log-spaced natural frequencies f_min·2^(k/per_octave) up to f_max (inclusive within 1e-9).

    MIL-STD-810 asks for at least 12 frequencies per octave. Returns a float64 array in Hz.
    """
    if not (np.isfinite(f_min) and np.isfinite(f_max) and 0 < f_min <= f_max):
        raise ValueError(f"need 0 < f_min <= f_max, got f_min={f_min}, f_max={f_max}")
    if int(per_octave) != per_octave or per_octave < 1:
        raise ValueError(f"per_octave must be a positive integer, got {per_octave}")
    n = math.floor(per_octave * math.log2(f_max / f_min) + 1e-9)
    return f_min * 2.0 ** (np.arange(n + 1) / per_octave)


def _kaiser_sinc_interpolator(factor: int, half_width: int = 10, beta: float = 5.0) -> np.ndarray:
    """Low-pass FIR for integer upsampling, the design of ``scipy.signal.resample_poly``."""
    half_len = half_width * factor
    m = np.arange(-half_len, half_len + 1, dtype=np.float64)
    taps = np.sinc(m / factor) * np.kaiser(2 * half_len + 1, beta)
    return taps * (factor / taps.sum())


def upsample_record(accel, factor: int) -> jax.Array:
    """Band-limited integer upsampling along the last axis (zeros outside the record).

    Equivalent to ``scipy.signal.resample_poly(accel, factor, 1, axis=-1)``; differentiable.
    Output shape ``accel.shape[:-1] + (factor * n,)``.
    """
    accel = jnp.asarray(accel, dtype=jnp.float64)
    if factor == 1:
        return accel
    taps = jnp.asarray(_kaiser_sinc_interpolator(factor))
    half_len = (taps.shape[0] - 1) // 2
    n = accel.shape[-1]

    def one(x):
        stuffed = jnp.zeros(n * factor, dtype=x.dtype).at[::factor].set(x)
        return jnp.convolve(stuffed, taps, mode="full")[half_len : half_len + n * factor]

    flat = accel.reshape(-1, n)
    return jax.vmap(one)(flat).reshape(accel.shape[:-1] + (n * factor,))


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _validated_analysis(dt, freqs, damping, kind, upsample) -> tuple[float, np.ndarray, int]:
    """Check the analysis settings; return (dt, freqs, upsampling factor)."""
    if _is_traced(dt) or _is_traced(freqs) or _is_traced(damping):
        raise TypeError(
            "dt, freqs and damping must be concrete values (they fix the filter bank); "
            "only accel may be traced by jit/vmap/grad"
        )
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if np.ndim(dt) != 0 or not np.isrealobj(dt):
        raise ValueError(
            f"dt must be one positive number (the sample interval in s), got "
            f"{'complex ' if not np.isrealobj(dt) else ''}shape {np.shape(dt)}"
        )
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive finite sample interval in seconds, got {dt}")
    damping = float(damping)
    if not (math.isfinite(damping) and 0.0 <= damping < 1.0):
        raise ValueError(f"damping ratio must satisfy 0 <= damping < 1, got {damping}")
    freqs = np.asarray(freqs, dtype=np.float64)
    if freqs.ndim != 1 or freqs.size == 0:
        raise ValueError(f"freqs must be a non-empty 1-D array of Hz, got shape {freqs.shape}")
    bad = ~np.isfinite(freqs) | (freqs <= 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"freqs[{i}] = {freqs[i]} Hz: natural frequencies must be positive")
    fs = 1.0 / dt
    f_top = float(freqs.max())
    if f_top >= fs / 2:
        raise ValueError(
            f"frequency {f_top:g} Hz is at or above the Nyquist frequency {fs / 2:g} Hz "
            f"of the record (sample rate {fs:g} Hz)"
        )
    factor = 1
    if fs / f_top < MIN_SAMPLES_PER_CYCLE:
        if not upsample:
            raise ValueError(
                f"frequency {f_top:g} Hz has only {fs / f_top:.3g} samples per cycle at "
                f"{fs:g} Hz; the SRS would read low. Use a sample rate of at least "
                f"{MIN_SAMPLES_PER_CYCLE * f_top:g} Hz, or upsample=True"
            )
        factor = math.ceil(TARGET_SAMPLES_PER_CYCLE * f_top * dt)
    return dt, freqs, factor


def _validated_record(accel) -> jax.Array:
    if not _is_traced(accel):
        arr = np.asarray(accel)
        if arr.ndim == 0 or arr.shape[-1] < 2:
            raise ValueError(
                f"accel must have time on its last axis with at least 2 samples, "
                f"got shape {arr.shape}"
            )
        if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
            raise ValueError(
                f"accel must be real numbers, got dtype {arr.dtype}"
                + (" (pass the real part explicitly)" if np.iscomplexobj(arr) else "")
            )
        finite = np.isfinite(arr)
        if not finite.all():
            where = tuple(int(i) for i in np.unravel_index(int(np.argmin(finite)), arr.shape))
            raise ValueError(f"accel has a non-finite value {arr[where]} at index {where}")
        return jnp.asarray(arr, dtype=jnp.float64)
    if accel.ndim == 0 or accel.shape[-1] < 2:
        raise ValueError(f"accel must have at least 2 samples on its last axis: {accel.shape}")
    if jnp.iscomplexobj(accel):
        raise ValueError(f"accel must be real numbers, got dtype {accel.dtype}")
    accel = jnp.asarray(accel, dtype=jnp.float64)
    return eqx.error_if(
        accel,
        ~jnp.all(jnp.isfinite(accel)),
        "shock_response_spectrum: accel has a NaN or infinite sample (under jit the index "
        "cannot be named; call it once without jit to find it)",
    )


def _signed(y, reducer: str):
    if reducer == "abs":
        return jnp.abs(y)
    return y if reducer == "pos" else -y


def _slope(y, reducer: str):
    """d _signed(y) / dy."""
    if reducer == "abs":
        return jnp.sign(y)
    return jnp.full_like(y, 1.0 if reducer == "pos" else -1.0)


class _FilterBank(NamedTuple):
    """Direct-form coefficients of one response for every oscillator; each ``(3, n_freq)``."""

    b: jax.Array
    a: jax.Array  # a[0] = 1
    sigma: jax.Array  # (n_freq,)
    omega_d: jax.Array  # (n_freq,)


def _free_ringing_extrema(y0, y1, dt, sigma, omega_d):
    """y0 and the first two extrema for t ≥ 0 of a free damped oscillation through y0, y1.

    y(t) = e^{−σt}(α cos ω_d t + β sin ω_d t) with y(0) = y0 and y(dt) = y1. Every later extremum
    is smaller in magnitude than one of these of the same sign, so the three values bound the
    free (residual) response exactly. Returns shape ``(3,) + y0.shape``.
    """
    alpha = y0
    beta = (y1 * jnp.exp(sigma * dt) - y0 * jnp.cos(omega_d * dt)) / jnp.sin(omega_d * dt)
    # ẏ ∝ P cos θ − Q sin θ with θ = ω_d t; extrema at θ = atan2(P, Q) + mπ.
    p = omega_d * beta - sigma * alpha
    q = sigma * beta + omega_d * alpha
    at_rest = (p == 0) & (q == 0)
    theta_star = jnp.arctan2(jnp.where(at_rest, 0.0, p), jnp.where(at_rest, 1.0, q))
    theta_1 = jnp.mod(theta_star, jnp.pi)

    def value(theta):
        return jnp.exp(-sigma * theta / omega_d) * (alpha * jnp.cos(theta) + beta * jnp.sin(theta))

    return jnp.stack([y0, value(theta_1), value(theta_1 + jnp.pi)])


def _residual_candidates(bank: _FilterBank, s1, s2, dt: float, reducer: str):
    """Signed peak candidates of the free ringing from the filter state one sample after the
    record, when the input has ramped to zero. Shape ``(3, n_freq)``."""
    y1 = -bank.a[1] * s1 + s2  # the next output with zero input
    return _signed(_free_ringing_extrema(s1, y1, dt, bank.sigma, bank.omega_d), reducer)


def _peak_scan(u, bank: _FilterBank, reducer: str, primary: bool, track: bool = False):
    """Run the filter bank over one record ``(n,)``, keeping the running peak of the signed
    response (and, with ``track``, the sample index of the peak and d(peak)/dy there).

    Transposed direct form, 9 flops a step per oscillator. Returns the final filter state
    (s1, s2), the peak, its index and its slope, each ``(n_freq,)``.
    """
    (b0, b1, b2), (_, a1, a2) = bank.b, bank.a
    zero = jnp.zeros_like(b0)

    def step(carry, xs):
        u_k, k = xs
        s1, s2, peak, index, slope = carry
        y = b0 * u_k + s1
        if primary:
            v = _signed(y, reducer)
            if track:
                better = v > peak
                index = jnp.where(better, k, index)
                slope = jnp.where(better, _slope(y, reducer), slope)
            peak = jnp.maximum(peak, v)  # value only: _exact_peaks's JVP reads the tracked index
        return (b1 * u_k - a1 * y + s2, b2 * u_k - a2 * y, peak, index, slope), None

    init = (zero, zero, jnp.full_like(b0, -jnp.inf), jnp.zeros(b0.shape, jnp.int32), zero)
    steps = jnp.arange(u.shape[0], dtype=jnp.int32) if track else jnp.zeros(u.shape[0], jnp.int32)
    carry, _ = jax.lax.scan(step, init, (u, steps), unroll=_SCAN_UNROLL)
    return carry


@functools.partial(jax.custom_jvp, nondiff_argnums=(2, 3, 4, 5))
def _exact_peaks(u, bank: _FilterBank, dt: float, reducer: str, primary: bool, residual: bool):
    """Exact peak of one record's response for every oscillator, ``(n_freq,)``.

    The derivative is sparse: a peak depends on the record through one response sample (or the
    filter state at the end, for a residual peak). The JVP therefore filters the tangent and
    reads it at the peak's sample: a linear scan, which JAX transposes into one backward pass of
    the filter bank for reverse mode, instead of differentiating the running maximum step by step.
    Tangents of ``bank`` (the analysis settings, which are static) are ignored.
    """
    s1, s2, peak, _, _ = _peak_scan(u, bank, reducer, primary)
    if residual:  # the primal of a custom_jvp: jnp.maximum and .max are not differentiated here
        peak = jnp.maximum(peak, _residual_candidates(bank, s1, s2, dt, reducer).max(axis=0))
    return peak


@_exact_peaks.defjvp
def _exact_peaks_jvp(dt, reducer, primary, residual, primals, tangents):
    u, bank = primals
    u_dot = tangents[0]
    s1, s2, peak, index, slope = _peak_scan(u, bank, reducer, primary, track=True)
    (b0, b1, b2), (_, a1, a2) = bank.b, bank.a

    def step(carry, xs):
        u_k, k = xs
        t1, t2, peak_dot = carry
        y_dot = b0 * u_k + t1
        peak_dot = peak_dot + jnp.where(index == k, slope * y_dot, 0.0)
        return (b1 * u_k - a1 * y_dot + t2, b2 * u_k - a2 * y_dot, peak_dot), None

    zero = jnp.zeros_like(peak)
    steps = jnp.arange(u.shape[0], dtype=jnp.int32)
    (t1, t2, peak_dot), _ = jax.lax.scan(
        step, (zero, zero, zero), (u_dot, steps), unroll=_SCAN_UNROLL
    )
    if not primary:
        peak_dot = zero
    if residual:
        candidates, candidates_dot = jax.jvp(
            lambda s1, s2: _residual_candidates(bank, s1, s2, dt, reducer), (s1, s2), (t1, t2)
        )
        best = candidates.max(axis=0)  # values only: the tangent is selected by won_primary/argmax
        won_primary = (peak >= best) if primary else jnp.zeros(peak.shape, bool)
        weight = jax.nn.one_hot(candidates.argmax(axis=0), 3, axis=0) * ~won_primary
        peak_dot = jnp.where(won_primary, peak_dot, 0.0) + (weight * candidates_dot).sum(axis=0)
        peak = jnp.maximum(peak, best)
    return peak, peak_dot


def _soft_peak_sums(u, bank, dt, reducer, primary, residual, shift, scale):
    """Σ exp((v − shift)/scale) over every signed response sample v (and residual candidate)."""
    (b0, b1, b2), (_, a1, a2) = bank.b, bank.a
    zero = jnp.zeros_like(b0)

    def step(carry, u_k):
        s1, s2, total = carry
        y = b0 * u_k + s1
        if primary:
            total = total + jnp.exp((_signed(y, reducer) - shift) / scale)
        return (b1 * u_k - a1 * y + s2, b2 * u_k - a2 * y, total), None

    (s1, s2, total), _ = jax.lax.scan(step, (zero, zero, zero), u, unroll=_SCAN_UNROLL)
    if residual:
        candidates = _residual_candidates(bank, s1, s2, dt, reducer)
        total = total + jnp.exp((candidates - shift) / scale).sum(axis=0)
    return total


@eqx.filter_jit
def _spectrum(records, dt: float, freqs, damping: float, kind: str, smooth):
    response, reducer, primary, residual = _KIND_PLAN[kind]
    sdof = ramp_invariant_sdof(freqs, dt, damping)
    b, a = _direct_form(sdof, _output_row(sdof, response))
    bank = _FilterBank(b.T, a.T, sdof.sigma, sdof.omega_d)
    peaks = jax.vmap(lambda u: _exact_peaks(u, bank, dt, reducer, primary, residual))(records)
    if smooth is not None:
        # Log-sum-exp over every sample with temperature smooth·peak. Log-sum-exp is invariant
        # to the shift, so the shift carries no gradient; the temperature does. The floor
        # √tiny keeps 1/scale finite for a record at rest (peak 0), whose gradient is then 0
        # instead of 0·∞ = NaN.
        shift = jax.lax.stop_gradient(peaks)
        scale = smooth * selection.maximum(peaks, math.sqrt(jnp.finfo(peaks.dtype).tiny))
        sums = jax.vmap(
            lambda u, p, s: _soft_peak_sums(u, bank, dt, reducer, primary, residual, p, s)
        )(records, shift, scale)
        peaks = shift + scale * jnp.log(sums)
    if kind == "pseudo_velocity":
        peaks = peaks * sdof.omega
    elif kind == "pseudo_acceleration":
        peaks = peaks * sdof.omega**2
    return peaks


def shock_response_spectrum(
    accel,
    dt: float,
    freqs,
    *,
    damping: float = 0.05,
    kind: SRSKind = "maximax",
    smooth: float | None = None,
    upsample: bool = True,
) -> jax.Array:
    """Shock response spectrum of one or more acceleration records.

    Args:
        accel: base acceleration, shape ``(..., n_samples)``; any unit (the SRS comes back in it).
        dt: sample interval, s.
        freqs: natural frequencies, Hz, shape ``(n_freq,)``, each below Nyquist.
        damping: damping ratio ζ of the oscillators (0.05 ⇔ Q = 10).
        kind: which peak to report —
            ``"maximax"``: max |absolute acceleration| over the record and the free ringing after;
            ``"primary"``: max |absolute acceleration| during the record;
            ``"primary_positive"`` / ``"primary_negative"``: largest positive / negative
            (as a magnitude) absolute acceleration during the record;
            ``"residual"``: max |absolute acceleration| of the free ringing after the record;
            ``"pseudo_velocity"``: ω · max |relative displacement| (record and ringing);
            ``"pseudo_acceleration"``: ω² · max |relative displacement| (record and ringing).
        smooth: ``None`` for the exact maximum (default). A positive number τ replaces the maximum
            by the log-sum-exp over all response samples with temperature τ·peak, so a gradient
            sees every near-peak sample, not one. The result exceeds the exact peak by at most
            τ·peak·ln(n_samples + 3) and typically by a few τ·peak (τ = 0.01 → ≲ 0.3 dB).
        upsample: if the record has fewer than 10 samples per cycle at the highest frequency,
            resample it internally (band-limited) to at least 32; if ``False``, raise instead.

    Returns:
        SRS, shape ``accel.shape[:-1] + (n_freq,)``, float64.
    """
    require_float64("shock_response_spectrum")
    dt, freqs_np, factor = _validated_analysis(dt, freqs, damping, kind, upsample)
    if smooth is not None and not (_is_traced(smooth) or (math.isfinite(smooth) and smooth > 0)):
        raise ValueError(f"smooth must be None or a positive temperature, got {smooth}")
    accel = _validated_record(accel)
    batch_shape = accel.shape[:-1]
    records = accel.reshape((-1, accel.shape[-1]))

    def spectrum(records, dt, freqs):
        return _spectrum(records, dt, jnp.asarray(freqs), float(damping), kind, smooth)

    if factor == 1:
        peaks = spectrum(records, dt, freqs_np)
    else:
        # Only the under-sampled frequencies see the resampled record, so a frequency's value
        # never depends on which other frequencies were asked for.
        coarse = freqs_np * dt * MIN_SAMPLES_PER_CYCLE > 1.0
        fine_idx, coarse_idx = np.flatnonzero(~coarse), np.flatnonzero(coarse)
        parts = [spectrum(upsample_record(records, factor), dt / factor, freqs_np[coarse_idx])]
        if fine_idx.size:
            parts.append(spectrum(records, dt, freqs_np[fine_idx]))
        order = np.argsort(np.concatenate([coarse_idx, fine_idx]))
        peaks = jnp.concatenate(parts, axis=-1)[:, order]
    return peaks.reshape(batch_shape + (freqs_np.size,))
