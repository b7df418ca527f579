"""Hunt–Crossley continuous contact laws in JAX: force, damping from restitution, one-sided stops.

The normal force of a Hunt–Crossley (1975) contact is

    F = K δⁿ (1 + χ δ̇),

with δ (m) the penetration (overlap; δ > 0 in contact), δ̇ (m/s) its rate (δ̇ > 0 approaching,
δ̇ < 0 separating), K the contact stiffness (N/mⁿ; n = 1.5 for Hertzian point contact, n = 1 for
a linear spring) and χ the hysteresis damping factor (s/m). Everything here is a pure function of
arrays (broadcasting, ``jit``/``vmap``/``grad``-able), float64, SI units.

Regularisation
--------------
* **Smooth onset.** A hard switch at δ = 0 makes impact times, and so gradients, jump near grazing.
  The penetration is replaced by

      δ_s = ε · softplus(δ / ε) = ε · ln(1 + exp(δ / ε)),

  a C^∞ function with δ_s → δ for δ ≫ ε (error ε·e^(−δ/ε)), δ_s = ε ln 2 at δ = 0 and
  δ_s ≈ ε e^(δ/ε) → 0 for δ ≪ −ε. ε (``smoothing``, m) must be much smaller than the
  penetrations of interest (e.g. 1e-9 m against 1e-4–1e-2 m): the force is then exact to a
  relative error of order ε/δ where it matters, and the energy exchanged through the onset
  zone is of order K ε^(n+1), negligible. The power δ_sⁿ is evaluated as exp(n ln δ_s) with a
  log-softplus that is exact for very negative arguments, so there is no 0**n, no log 0, no
  overflow and no NaN (value or gradient) for any δ, including δ = 0 and δ ≪ −ε, and the
  exponent may itself be differentiated.
* **No tensile (sticky) force.** For fast separation, δ̇ < −1/χ, the factor (1 + χ δ̇) would
  turn negative and the contact would pull. It is clamped with ``max(1 + χ δ̇, 0)``: the force is
  continuous (it is zero at the clamp), only its derivative in δ̇ has a kink there, and the
  gradient is finite everywhere (at the tie it is the unclamped side's; the clamp is
  :func:`diffmbs.selection.maximum`, whose tangent does not depend on bit equality). A smooth
  clamp was not chosen
  because it would either add force where the law gives none or change the law near
  δ̇ = −1/χ; a free impact never reaches the clamp (the separation speed tends to 1/χ at most).
  Hence F ≥ 0 always.

Damping from a coefficient of restitution
-----------------------------------------
For a point mass m hitting the contact at speed v₀, m v dv/dδ = −K δⁿ (1 + χ v) separates into
v dv / (1 + χv) = −(K/m) δⁿ dδ. Compression (v: v₀ → 0, δ: 0 → δ_max) and restitution
(v: 0 → −e v₀, δ: δ_max → 0) have equal and opposite δ-integrals, so with
∫ v/(1+χv) dv = v/χ − ln(1 + χv)/χ² and x = χ v₀

    x − ln(1 + x) = −e x − ln(1 − e x),

independent of K, n and m. Its positive root x(e) is the exact damping (``law="exact"``).
The classical closed forms are approximations of it: Hunt–Crossley χ = 3(1−e)/(2v₀) and
Lankarani–Nikravesh χ = 3(1−e²)/(4v₀) are its first-order expansion about e = 1 and are good only
for e close to 1; Flores et al. χ = 8(1−e)/(5 e v₀) and Gonthier et al. χ = (1−e²)/(e v₀) are
usable over the whole range. :func:`restitution_from_damping` is the inverse of the exact law (the
e that a given χ really produces), which quantifies each law's error.
"""

from __future__ import annotations

import math
from typing import Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jaxtyping import Array, ArrayLike

from diffmbs import selection
from diffmbs.parameters import check_physical_value

__all__ = [
    "DAMPING_LAWS",
    "AbstractHuntCrossley",
    "OneSidedStop",
    "as_float_leaf",
    "contact_energy",
    "damping_from_restitution",
    "hunt_crossley_force",
    "restitution_from_damping",
    "smooth_penetration",
]

DampingLaw = Literal["exact", "hunt_crossley", "lankarani_nikravesh", "flores", "gonthier"]
DAMPING_LAWS: tuple[str, ...] = (
    "exact",
    "hunt_crossley",
    "lankarani_nikravesh",
    "flores",
    "gonthier",
)
"""The laws of :func:`damping_from_restitution` (``law=``): ``"exact"`` solves the contact's own
equation of motion for χ; the others are the closed forms of the literature."""

# Below this value of δ/ε, ln(softplus(z)) is evaluated as z − e^z / 2 (error < e^(2z) ~ 1e-17).
_LOG_SOFTPLUS_SWITCH = -20.0


# --------------------------------------------------------------------------- contact force


def _as_float(value: ArrayLike) -> Array:
    """``value`` as a JAX array of a floating dtype (integers become the default float; a float32
    array stays float32 for GPU sweeps, Python scalars are weak and adopt the other operands')."""
    arr = jnp.asarray(value)
    return arr if jnp.issubdtype(arr.dtype, jnp.floating) else arr.astype(float)


def _log_softplus(z: Array) -> Array:
    """ln(ln(1 + e^z)), exact to round-off for every finite z, with finite gradients."""
    z_lo = selection.minimum(z, _LOG_SOFTPLUS_SWITCH)
    z_hi = selection.maximum(z, _LOG_SOFTPLUS_SWITCH)  # softplus(z_hi) >= 2e-9: its log is safe
    low = z_lo - 0.5 * jnp.exp(z_lo)
    high = jnp.log(jnp.logaddexp(z_hi, 0.0))
    return jnp.where(z < _LOG_SOFTPLUS_SWITCH, low, high)


def smooth_penetration(penetration: ArrayLike, smoothing: ArrayLike = 1e-6) -> Array:
    """Regularised penetration δ_s = ε · softplus(δ/ε) (m), > 0 for finite δ, → δ for δ ≫ ε.

    Args:
        penetration: δ (m), any shape; δ > 0 is overlap.
        smoothing: ε (m), > 0, broadcast against ``penetration``.

    Returns:
        δ_s (m), the broadcast shape. Numerically safe: no overflow for δ/ε ≫ 1, exact
        (underflowing to 0) for δ/ε ≪ −1.
    """
    delta, eps = _as_float(penetration), _as_float(smoothing)
    return eps * jnp.logaddexp(delta / eps, 0.0)


def _smooth_power(penetration: Array, exponent: Array, smoothing: Array) -> Array:
    """δ_sⁿ computed as exp(n (ln ε + ln softplus(δ/ε))): no 0**n, finite gradients everywhere."""
    log_ds = jnp.log(smoothing) + _log_softplus(penetration / smoothing)
    return jnp.exp(exponent * log_ds)


def hunt_crossley_force(
    penetration: ArrayLike,
    penetration_rate: ArrayLike,
    stiffness: ArrayLike,
    damping: ArrayLike,
    exponent: ArrayLike = 1.5,
    smoothing: ArrayLike = 1e-6,
) -> Array:
    """Hunt–Crossley normal contact force F = K δ_sⁿ max(1 + χ δ̇, 0) ≥ 0 (N).

    All arguments broadcast against each other (e.g. a batch of contacts, or a grid of
    parameters); the result has the broadcast shape. Every argument may be traced and
    differentiated; the value and gradient are finite for all finite inputs, including δ = 0,
    δ ≪ −ε, δ̇ = 0 and δ̇ ≪ −1/χ.

    Args:
        penetration: δ (m); δ > 0 is overlap, δ < 0 a gap.
        penetration_rate: δ̇ (m/s); > 0 approaching (compression), < 0 separating.
        stiffness: K (N/mⁿ), ≥ 0.
        damping: χ (s/m), ≥ 0 (hysteresis damping factor; see :func:`damping_from_restitution`).
        exponent: n (dimensionless), ≥ 1 recommended (1.5 Hertzian, 1 linear).
        smoothing: ε (m), > 0: length scale of the smooth onset, δ_s = ε softplus(δ/ε). Must be
            much smaller than the penetrations of interest; at δ = 0 the force is K (ε ln 2)ⁿ, for
            δ ≫ ε it is the unregularised law to a relative error n e^(−δ/ε) ε/δ.

    Returns:
        F (N), the normal force pushing the bodies apart; never negative (no tensile force: the
        damping factor is clamped at 0 for δ̇ < −1/χ).
    """
    delta = _as_float(penetration)
    rate = _as_float(penetration_rate)
    stiffness = _as_float(stiffness)
    damping = _as_float(damping)
    exponent = _as_float(exponent)
    smoothing = _as_float(smoothing)
    elastic = stiffness * _smooth_power(delta, exponent, smoothing)
    dissipative = selection.maximum(1.0 + damping * rate, 0.0)
    return elastic * dissipative


def contact_energy(
    penetration: ArrayLike, stiffness: ArrayLike, exponent: float = 1.5, smoothing: float = 1e-6
) -> Array:
    """Elastic energy ``K δ_sⁿ⁺¹ / (n+1)`` (J) of the contact at penetration δ (m), with the
    smoothed penetration of :func:`hunt_crossley_force` (exact for ``δ ≫ ε``, finite
    derivatives everywhere)."""
    ds = smoothing * jnp.logaddexp(0.0, _as_float(penetration) / smoothing)
    pos = ds > 0
    power = jnp.where(pos, jnp.where(pos, ds, 1.0) ** (exponent + 1), 0.0)
    return _as_float(stiffness) * power / (exponent + 1)


def as_float_leaf(x: ArrayLike) -> Array:
    """Converter for parameter fields: a float64 JAX array (a traced value passes through)."""
    if isinstance(x, jax.core.Tracer):
        return x
    return jnp.asarray(x, dtype=float)


class AbstractHuntCrossley(eqx.Module):
    """The parameter set of a Hunt–Crossley contact, declared here once and inherited by every
    contact and stop of diffmbs (:class:`OneSidedStop`, the lumped models' impacts and stops,
    the multibody sphere/point–plane and sphere–sphere contacts, length stops), so each element
    names them alike (``"impact.stiffness"``, ``"impact.damping"``) and with units.

    Keyword-only fields (they follow the geometry of the element in its constructor):
        stiffness: K (N/mⁿ), a parameter.
        damping: χ (s/m), a parameter (from a restitution: :func:`damping_from_restitution`).
        exponent: n, static (1.5 Hertzian, 1 linear).
        smoothing: ε (m), static: the onset length scale (see :func:`hunt_crossley_force`).
    """

    stiffness: Array = eqx.field(kw_only=True, converter=as_float_leaf,
                                 metadata={"units": "N/m^n"})  # fmt: skip
    damping: Array = eqx.field(kw_only=True, default=0.0, converter=as_float_leaf,
                               metadata={"units": "s/m"})  # fmt: skip
    exponent: float = eqx.field(kw_only=True, static=True, default=1.5)
    smoothing: float = eqx.field(kw_only=True, static=True, default=1e-6)

    def __check_init__(self):
        # Concrete values only (a traced one belongs to a fit); names the element's class.
        for name in ("stiffness", "damping", "smoothing"):
            check_physical_value(name, getattr(self, name), f"{type(self).__name__}.{name}")

    def contact_force(self, penetration: ArrayLike, penetration_rate: ArrayLike) -> Array:
        """Contact force (N, ≥ 0) at penetration δ (m) and rate δ̇ (m/s); broadcasts."""
        return hunt_crossley_force(penetration, penetration_rate, self.stiffness, self.damping,
                                   self.exponent, self.smoothing)  # fmt: skip

    def contact_energy(self, penetration: ArrayLike) -> Array:
        """Elastic energy (J) at penetration δ (m) (:func:`contact_energy`)."""
        return contact_energy(penetration, self.stiffness, self.exponent, self.smoothing)


class OneSidedStop(AbstractHuntCrossley):
    """A one-sided stop (e.g. hammer–anvil impact, anvil upper/lower stop): the Hunt–Crossley
    parameter set alone (stiffness and damping may be arrays for a stack of stops).

    Call it with the penetration and its rate, or use :meth:`force_from_gap` with the gap
    (g = −δ, open when g > 0) and its rate.
    """

    def __call__(self, penetration: ArrayLike, penetration_rate: ArrayLike) -> Array:
        """Contact force (N, ≥ 0) for penetration δ (m) and rate δ̇ (m/s); broadcasts."""
        return self.contact_force(penetration, penetration_rate)

    def force_from_gap(self, gap: ArrayLike, gap_rate: ArrayLike) -> Array:
        """Contact force (N, ≥ 0) for gap g = −δ (m, > 0 open) and its rate ġ (m/s)."""
        return self(-_as_float(gap), -_as_float(gap_rate))

    @classmethod
    def from_restitution(
        cls,
        stiffness: ArrayLike,
        restitution: ArrayLike,
        impact_speed: ArrayLike,
        *,
        law: DampingLaw = "exact",
        exponent: float = 1.5,
        smoothing: float = 1e-6,
    ) -> OneSidedStop:
        """Stop whose damping reproduces ``restitution`` at ``impact_speed`` (m/s) by ``law``."""
        chi = damping_from_restitution(restitution, impact_speed, law=law)
        return cls(stiffness=stiffness, damping=chi, exponent=float(exponent),
                   smoothing=float(smoothing))  # fmt: skip


# --------------------------------------------------------------------------- restitution


def _concrete(value) -> np.ndarray | None:
    """The value as a NumPy array, or None when it is traced (no check is possible then)."""
    try:
        return np.asarray(value, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _check(name: str, value, *, low: float, low_open: bool, high: float | None = None) -> None:
    arr = _concrete(value)
    if arr is None:
        return
    bad = ~np.isfinite(arr) | ((arr <= low) if low_open else (arr < low))
    if high is not None:
        bad |= arr > high
    if np.any(bad):
        first = arr[bad].ravel()[0] if arr.ndim else float(arr)
        lo = "(" if low_open else "["
        hi = f"{high}]" if high is not None else "inf)"
        raise ValueError(f"{name} must lie in {lo}{low}, {hi}; got {first!r}")


def _series(z: Array, coeffs: tuple[float, ...]) -> Array:
    out = jnp.zeros_like(z)
    for c in reversed(coeffs):
        out = out * z + c
    return out


_FACT = [float(math.factorial(k)) for k in range(40)]
_R_RADIUS = 0.25  # alternating series in z: 30 terms reach 0.25**30 < 1e-18 inside this radius
_R_COEFFS = tuple((-1.0) ** k / (k + 2) for k in range(30))
_R1_COEFFS = tuple((-1.0) ** (k + 1) / (k + 3) for k in range(30))
_RHO_COEFFS = tuple((-1.0) ** k / _FACT[k + 2] for k in range(24))  # |s| < 1: 1/26! < 1e-26
_RHO1_COEFFS = tuple((-1.0) ** (k + 1) / _FACT[k + 3] for k in range(24))


def _r(z: Array) -> Array:
    """r(z) = (z − ln(1+z)) / z² = Σ (−z)^k / (k+2), for z > −1; stable at z = 0."""
    small = jnp.abs(z) < _R_RADIUS
    z_big = jnp.where(small, 1.0, z)
    big = (z_big - jnp.log1p(z_big)) / z_big**2
    return jnp.where(small, _series(z, _R_COEFFS), big)


def _r1(z: Array) -> Array:
    """r₁(z) = (r(z) − 1/2) / z = Σ (−1)^(k+1) z^k / (k+3); stable at z = 0."""
    small = jnp.abs(z) < _R_RADIUS
    z_big = jnp.where(small, 1.0, z)
    big = (_r(z_big) - 0.5) / z_big
    return jnp.where(small, _series(z, _R1_COEFFS), big)


def _rho(s: Array) -> Array:
    """ρ(s) = (s − 1 + e^(−s)) / s² = Σ (−s)^k / (k+2)!; stable at s = 0."""
    small = jnp.abs(s) < 1.0
    s_big = jnp.where(small, 1.0, s)
    big = (s_big + jnp.expm1(-s_big)) / s_big**2
    return jnp.where(small, _series(s, _RHO_COEFFS), big)


def _rho1_small(s: Array) -> Array:
    """ρ₁(s) = (ρ(s) − 1/2) / s = Σ (−1)^(k+1) s^k / (k+3)! for |s| < 1."""
    return _series(s, _RHO1_COEFFS)


def _phi1(s: Array) -> Array:
    """φ₁(s) = (1 − e^(−s)) / s (= 1 − s ρ(s) for |s| < 1); stable at s = 0."""
    small = jnp.abs(s) < 1.0
    s_big = jnp.where(small, 1.0, s)
    return jnp.where(small, 1.0 - s * _rho(s), -jnp.expm1(-s_big) / s_big)


# The exact-law equation, written without cancellation. With s = −ln(1 − e x) ≥ 0, so that
# e x = 1 − e^(−s) and x = s φ₁(s) / e, both sides carry a factor x² that is divided out:
#     x − ln(1+x) = x² r(x),    −e x − ln(1 − e x) = s − 1 + e^(−s) = s² ρ(s),
# and the equation becomes  H(s) = φ₁(s)² r(x(s)) − e² ρ(s) = 0.  H(0) = (1 − e²)/2 ≥ 0, H < 0
# for large s, and H has exactly one sign change (x − ln(1+x) + e x + ln(1 − e x) divided by x² is
# strictly decreasing in x). Since s − 1 ≤ s − 1 + e^(−s) = x − ln(1+x) < x < 1/e, the root lies
# in [0, 1 + 1/e]. Near e = 1 the root is s ≈ 3(1 − e)/2 and the two terms of H agree to O(1 − e);
# for s < 1, H is therefore evaluated as the sum of terms each known to relative round-off,
#     H = (1 − e)(1 + e) ρ + φ₁² x r₁(x) − s ρ (1 + φ₁)/2 − s ρ₁(s)
# (using φ₁ − 1 = −s ρ and ρ = 1/2 + s ρ₁), which keeps the root accurate to round-off as e → 1.
_N_ITER = 24  # bracketed Newton: measured ≤ 10 steps to round-off over e ∈ [1e-8, 1]


def _x_of_s(s: Array, e: Array) -> Array:
    return s * _phi1(s) / e


def _h_forward(s: Array, e: Array) -> Array:
    phi1, rho, x = _phi1(s), _rho(s), _x_of_s(s, e)
    s_lo = selection.minimum(s, 0.5)  # differentiated: the Newton steps use dH/ds
    near = (
        (1.0 - e) * (1.0 + e) * rho
        + phi1**2 * x * _r1(x)
        - s * rho * (1.0 + phi1) / 2.0
        - s * _rho1_small(s_lo)
    )
    far = phi1**2 * _r(x) - e**2 * rho
    return jnp.where(s < 0.5, near, far)


def _bracketed_newton(fun, lo: Array, hi: Array, guess: Array) -> Array:
    """Root of a scalar ``fun`` decreasing through zero on [lo, hi] (fun(lo) ≥ 0 ≥ fun(hi)).

    Newton steps, replaced by bisection whenever they leave the current bracket; a fixed number
    of iterations (``lax.fori_loop``), no data-dependent loop. Elementwise (use with ``vmap``).
    """
    grad = jax.grad(fun)

    def body(_, carry):
        lo, hi, s = carry
        h = fun(s)
        dh = grad(s)
        lo = jnp.where(h > 0, s, lo)
        hi = jnp.where(h > 0, hi, s)
        step = jnp.where(dh < 0, h / jnp.where(dh < 0, dh, -1.0), jnp.inf)
        newton = s - step
        # XLA may evaluate fun twice with different rounding (fusion, FMA), so a converged
        # Newton step can land an ulp outside the bracket: clip such steps instead of bisecting.
        slack = 8.0 * jnp.finfo(s.dtype).eps * (jnp.abs(s) + jnp.abs(step))
        ok = (newton >= lo - slack) & (newton <= hi + slack) & jnp.isfinite(newton)
        # Not differentiated (the roots are custom_jvp primals): jnp.clip is safe here.
        s_new = jnp.where(ok, jnp.clip(newton, lo, hi), 0.5 * (lo + hi))
        return lo, hi, s_new

    _, _, root = lax.fori_loop(0, _N_ITER, body, (lo, hi, guess))
    return root


def _exact_x_scalar(e: Array) -> Array:
    # Initial guess: the e → 1 expansion x ≈ 3(1−e²)/(2(1+e³)) mapped to s, blended with the
    # e → 0 asymptote s ≈ 1 + 1/e − ln(1 + 1/e); both lie inside the bracket.
    # (The guess, like the whole solve, is _exact_x's primal: jnp.minimum is not differentiated.)
    x_near1 = 3.0 * (1.0 - e**2) / (2.0 * (1.0 + e**3))
    s_near1 = -jnp.log1p(-jnp.minimum(e * x_near1, 0.5))
    s_near0 = 1.0 + 1.0 / e - jnp.log1p(1.0 / e)
    guess = jnp.where(e > 0.5, s_near1, s_near0)
    s = _bracketed_newton(lambda s: _h_forward(s, e), jnp.zeros_like(e), 1.0 + 1.0 / e, guess)
    return jnp.where(e >= 1.0, 0.0, _x_of_s(s, e))


@jax.jit
def _exact_x_impl(e: Array) -> Array:
    return jnp.reshape(jax.vmap(_exact_x_scalar)(jnp.ravel(e)), jnp.shape(e))


@jax.custom_jvp
def _exact_x(e: Array) -> Array:
    """x = χ v₀ of the exact law, elementwise, for e ∈ (0, 1]."""
    return _exact_x_impl(e)


def _dx_de(x: Array, e: Array) -> Array:
    """dx/de on the root, by the implicit function theorem (limit −3/2 at e = 1, x = 0).

    Φ(x, e) = x − ln(1+x) + e x + ln(1 − e x): Φ_x = x/(1+x) − e² x/(1 − e x), Φ_e = −e x²/(1−ex),
    so dx/de = −Φ_e/Φ_x = e x (1+x) / ((1+e)(1 − e − e x)).
    """
    at_one = x <= 0.0
    den = (1.0 + e) * ((1.0 - e) - e * x)
    val = e * x * (1.0 + x) / jnp.where(at_one, 1.0, den)
    return jnp.where(at_one, -1.5, val)


@_exact_x.defjvp
def _exact_x_jvp(primals, tangents):
    (e,), (de,) = primals, tangents
    x = _exact_x(e)
    return x, _dx_de(x, e) * de


def _h_inverse(s: Array, w: Array) -> Array:
    """s √ρ(s) − W: increasing in s; its root gives s for a target W = √(x − ln(1+x))."""
    return w - s * jnp.sqrt(_rho(s))


def _exact_e_scalar(x: Array) -> Array:
    # x − ln(1+x) = s − 1 + e^(−s) for s, then e = (1 − e^(−s)) / x. Written as W = s √ρ(s) with
    # W = x √r(x) (both sides are positive square roots), which is well conditioned at x → 0.
    x_pos = jnp.where(x > 0, x, 1.0)
    w = x_pos * jnp.sqrt(_r(x_pos))
    hi = 1.0 + w**2 + 2.0 * w  # s √ρ(s) = √(s − 1 + e^(−s)) ≥ √(s − 1): the root is ≤ 1 + W²
    guess = jnp.where(w < 1.0, jnp.sqrt(2.0) * w, 1.0 + w**2)
    s = _bracketed_newton(lambda s: _h_inverse(s, w), jnp.zeros_like(x), hi, guess)
    e = -jnp.expm1(-s) / x_pos
    return jnp.where(x > 0, jnp.minimum(e, 1.0), 1.0)  # _exact_e's primal: not differentiated


@jax.jit
def _exact_e_impl(x: Array) -> Array:
    return jnp.reshape(jax.vmap(_exact_e_scalar)(jnp.ravel(x)), jnp.shape(x))


@jax.custom_jvp
def _exact_e(x: Array) -> Array:
    """e produced by x = χ v₀ ≥ 0 under the exact law, elementwise."""
    return _exact_e_impl(x)


@_exact_e.defjvp
def _exact_e_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    e = _exact_e(x)
    at_zero = x <= 0.0
    dxde = _dx_de(x, e)
    dedx = jnp.where(at_zero, -2.0 / 3.0, 1.0 / jnp.where(at_zero, 1.0, dxde))
    return e, dedx * dx


def damping_from_restitution(
    restitution: ArrayLike,
    impact_speed: ArrayLike,
    law: DampingLaw = "exact",
) -> Array:
    """Hunt–Crossley damping χ (s/m) that gives coefficient of restitution e at impact speed v₀.

    Args:
        restitution: e ∈ (0, 1] (dimensionless); broadcasts with ``impact_speed``.
        impact_speed: v₀ > 0 (m/s), the approach speed at first contact.
        law: ``"exact"`` (default): the χ that reproduces e exactly for F = K δⁿ (1 + χ δ̇) on a
            point mass (independent of K, n, m; see the module docstring), solved to machine
            precision by a fixed number of bracketed Newton steps, differentiable (implicit
            function theorem); e = 1 gives χ = 0.
            ``"hunt_crossley"``: χ = 3(1−e)/(2v₀); ``"lankarani_nikravesh"``: χ = 3(1−e²)/(4v₀)
            (linearisations about e = 1: within 2 % of the target e for e ≥ 0.9, but a target
            of 0.3 gives 0.58 and 0.68); ``"flores"``: χ = 8(1−e)/(5 e v₀) and
            ``"gonthier"``: χ = (1−e²)/(e v₀) (within 0.05 of the target e over 0.1–0.95;
            Gonthier's is near-exact for e ≤ 0.3 but overdamps by 4/3 in 1−e as e → 1).
            Measured by simulation in ``tests/test_contact.py``.

    Returns:
        χ (s/m), the broadcast shape of ``restitution`` and ``impact_speed``.

    Raises:
        ValueError: for an unknown ``law``, or (when the values are concrete, not traced) for
            ``restitution`` outside (0, 1] or ``impact_speed`` ≤ 0, naming the argument.
    """
    if law not in DAMPING_LAWS:
        raise ValueError(f"law must be one of {DAMPING_LAWS}; got {law!r}")
    _check("restitution", restitution, low=0.0, low_open=True, high=1.0)
    _check("impact_speed", impact_speed, low=0.0, low_open=True)
    e = jnp.asarray(restitution, dtype=float)
    v0 = jnp.asarray(impact_speed, dtype=float)
    e, v0 = jnp.broadcast_arrays(e, v0)
    if law == "exact":
        return _exact_x(e) / v0
    if law == "hunt_crossley":
        return 1.5 * (1.0 - e) / v0
    if law == "lankarani_nikravesh":
        return 0.75 * (1.0 - e**2) / v0
    if law == "flores":
        return 1.6 * (1.0 - e) / (e * v0)
    return (1.0 - e**2) / (e * v0)  # gonthier


def restitution_from_damping(damping: ArrayLike, impact_speed: ArrayLike) -> Array:
    """Coefficient of restitution e ∈ (0, 1] that damping χ really produces at impact speed v₀.

    The inverse of ``damping_from_restitution(..., law="exact")``: exact for F = K δⁿ (1 + χ δ̇)
    on a point mass, whatever K, n and m. Use it to quantify the error of the approximate laws,
    e.g. ``restitution_from_damping(damping_from_restitution(0.5, v0, "hunt_crossley"), v0)``.

    Args:
        damping: χ ≥ 0 (s/m); broadcasts with ``impact_speed``.
        impact_speed: v₀ > 0 (m/s).

    Returns:
        e (dimensionless), the broadcast shape; χ = 0 gives e = 1. Differentiable.

    Raises:
        ValueError: (concrete values only) ``damping`` < 0 or ``impact_speed`` ≤ 0.
    """
    _check("damping", damping, low=0.0, low_open=False)
    _check("impact_speed", impact_speed, low=0.0, low_open=True)
    chi = jnp.asarray(damping, dtype=float)
    v0 = jnp.asarray(impact_speed, dtype=float)
    return _exact_e(chi * v0)
