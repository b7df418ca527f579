"""Hertz's elastic contact: the size of the contact patch and its pressure (SI units).

What wear needs (Archard: ``dh = k p v dt``) is the pressure where the surfaces touch, which a
penalty contact force alone does not give. Hertz's theory gives it from the normal force ``P``,
the surfaces' curvatures and the materials (Johnson, *Contact Mechanics*, 1985, §4.2–4.3):

* materials: ``1/E* = (1 − ν₁²)/E₁ + (1 − ν₂²)/E₂`` (:func:`contact_modulus`);
* **line contact** of two parallel cylinders over a length ``L`` (:func:`line_contact`): with
  ``1/R = 1/R₁ + 1/R₂`` (a concave surface — a bearing's bore around its journal — has a
  negative radius), the half-width ``b = √(4 P R / (π L E*))`` and the peak pressure
  ``p₀ = 2P/(π b L)``, the pressure ``p₀ √(1 − x²/b²)`` across the strip;
* **point contact** in general (:func:`point_contact`): the principal radii of each surface
  ``(R₁, R₁')``, ``(R₂, R₂')`` at an angle ``θ`` between their first planes give the relative
  curvatures ``A' ≤ B'`` by

      A' + B' = ½ (1/R₁ + 1/R₁' + 1/R₂ + 1/R₂'),
      B' − A' = ½ √((1/R₁ − 1/R₁')² + (1/R₂ − 1/R₂')² + 2 (1/R₁ − 1/R₁')(1/R₂ − 1/R₂') cos 2θ),

  and the patch is an ellipse of semi-axes ``a ≥ b`` (``a`` along ``A'``) with eccentricity
  ``e² = 1 − b²/a²`` solving ``B'/A' = (E(e)/(1 − e²) − K(e)) / (K(e) − E(e))`` (``K``, ``E``
  the complete elliptic integrals), then ``a³ = 3 P (K − E) / (2π E* e² A')``, ``b = a√(1 − e²)``,
  ``p₀ = 3P/(2π a b)``, the pressure ``p₀ √(1 − x²/a² − y²/b²)``. Equal curvatures give
  Hertz's circle, ``a³ = 3 P R / (4 E*)``.

Everything is a pure function of arrays (``jit``/``vmap``/``grad``-able). The eccentricity is
found by bisection without gradient and polished by two Newton steps, which carry the exact
derivative (the implicit function theorem's, at the converged root). The elliptic integrals
come from the arithmetic–geometric mean in a fixed number of steps.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

__all__ = [
    "PointContact",
    "contact_modulus",
    "elliptic_integrals",
    "line_contact",
    "point_contact",
    "relative_curvatures",
]

_AGM_STEPS = 12  # quadratic convergence: 1e-16 from m = 1 − 1e-12 in 8 steps
_BISECTION_STEPS = 64
_LARGEST_LOG = 40.0  # −ln(1 − e²) up to 40: a/b up to e²⁰ ≈ 5e8


def contact_modulus(
    young_1: ArrayLike, poisson_1: ArrayLike, young_2: ArrayLike, poisson_2: ArrayLike
) -> Array:
    """Hertz's contact modulus ``E*`` (Pa) of two materials (Young's moduli in Pa)."""
    return 1.0 / ((1.0 - jnp.square(poisson_1)) / young_1 + (1.0 - jnp.square(poisson_2)) / young_2)


def line_contact(
    force: ArrayLike, length: ArrayLike, radius_1: ArrayLike, radius_2: ArrayLike,
    modulus: ArrayLike,
) -> tuple[Array, Array]:  # fmt: skip
    """Two parallel cylinders pressed together by ``force`` (N) over ``length`` (m).

    Args:
        force: normal force ``P`` (N), ≥ 0; radii (m), negative for a concave surface (the
            bore of a bearing: the relative radius ``1/(1/R₁ + 1/R₂)`` must be positive);
            ``modulus``: ``E*`` (Pa, :func:`contact_modulus`). Any broadcastable shapes.

    Returns:
        ``(b, p₀)``: the half-width of the contact strip (m) and the peak pressure (Pa).
    """
    radius = 1.0 / (1.0 / jnp.asarray(radius_1, float) + 1.0 / jnp.asarray(radius_2, float))
    squared = 4.0 * force * radius / (math.pi * length * modulus)
    loaded = squared > 0  # no infinite slope of √ at no load
    half_width = jnp.where(loaded, jnp.sqrt(jnp.where(loaded, squared, 1.0)), 0.0)
    peak = jnp.where(loaded, 2.0 * force / (math.pi * jnp.where(loaded, half_width, 1.0)
                                              * length), 0.0)  # fmt: skip
    return half_width, peak


def relative_curvatures(
    radii_1: ArrayLike, radii_2: ArrayLike, angle: ArrayLike = 0.0
) -> tuple[Array, Array]:
    """``(A', B')`` (1/m), ``A' ≤ B'``: the relative curvatures of two surfaces.

    Args:
        radii_1: ``(..., 2)`` principal radii of the first surface (m; negative where
            concave, ``inf`` flat).
        radii_2: the second surface's, alike.
        angle: between the planes of their first radii (rad).
    """
    k1 = 1.0 / jnp.asarray(radii_1, float)
    k2 = 1.0 / jnp.asarray(radii_2, float)
    d1, d2 = k1[..., 0] - k1[..., 1], k2[..., 0] - k2[..., 1]
    total = 0.5 * (jnp.sum(k1, axis=-1) + jnp.sum(k2, axis=-1))
    squared = d1**2 + d2**2 + 2.0 * d1 * d2 * jnp.cos(2.0 * jnp.asarray(angle, float))
    positive = squared > 0
    half_difference = 0.5 * jnp.where(positive, jnp.sqrt(jnp.where(positive, squared, 1.0)), 0.0)
    return 0.5 * (total - half_difference), 0.5 * (total + half_difference)


def elliptic_integrals(m: ArrayLike) -> tuple[Array, Array]:
    """``(K(m), E(m))``: the complete elliptic integrals of the first and second kind for the
    parameter ``m = e²`` in ``[0, 1)`` (as ``scipy.special.ellipk``/``ellipe``), by the
    arithmetic–geometric mean."""
    m = jnp.asarray(m, float)
    a, b = jnp.ones_like(m), jnp.sqrt(1.0 - m)
    c_sum, weight = 0.5 * m, 0.5  # Σ 2^(n−1) c_n², c_0² = m
    for _ in range(_AGM_STEPS):
        c = 0.5 * (a - b)
        a, b = 0.5 * (a + b), jnp.sqrt(a * b)
        weight = 2.0 * weight
        c_sum = c_sum + weight * c**2
    k = math.pi / (2.0 * a)
    return k, k * (1.0 - c_sum)


def _ratio_residual(s: Array, target: Array) -> Array:
    """``B'/A'`` of the ellipse with ``1 − e² = exp(−s)``, minus ``target``, in logarithms."""
    m = -jnp.expm1(-s)
    k, e = elliptic_integrals(m)
    return jnp.log(e * jnp.exp(s) - k) - jnp.log(k - e) - jnp.log(target)


def _log_aspect(ratio: Array) -> Array:
    """``s = −ln(1 − e²) = 2 ln(a/b)`` for ``ratio = B'/A' > 1``."""
    target = jax.lax.stop_gradient(ratio)

    def halve(_, bracket):  # a fixed trip count: a scan, nothing differentiated through it
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        above = _ratio_residual(mid, target) > 0
        return jnp.where(above, lo, mid), jnp.where(above, mid, hi)

    start = (jnp.full_like(target, 1e-9), jnp.full_like(target, _LARGEST_LOG))
    lo, hi = jax.lax.fori_loop(0, _BISECTION_STEPS, halve, start)
    s = 0.5 * (lo + hi)
    for _ in range(2):  # Newton, differentiable: the exact derivative at the root
        value, slope = jax.jvp(lambda x: _ratio_residual(x, ratio), (s,), (jnp.ones_like(s),))
        s = s - value / slope
    return s


class PointContact(NamedTuple):
    """:func:`point_contact`'s result."""

    a: Array  # semi-axis along the smaller relative curvature (m)
    b: Array  # semi-axis along the larger, b ≤ a (m)
    peak_pressure: Array  # p₀ (Pa)


def point_contact(
    force: ArrayLike, curvature_a: ArrayLike, curvature_b: ArrayLike, modulus: ArrayLike
) -> PointContact:
    """Hertz's elliptic contact (module docstring) of relative curvatures ``A' ≤ B'`` (1/m,
    :func:`relative_curvatures`; both > 0) under ``force`` (N) with modulus ``E*`` (Pa).

    Returns:
        :class:`PointContact` ``(a, b, p₀)``, broadcast shapes.
    """
    force = jnp.asarray(force, float)
    a_curv, b_curv = jnp.asarray(curvature_a, float), jnp.asarray(curvature_b, float)
    ratio = b_curv / a_curv
    elongated = ratio > 1.0 + 1e-9
    s = _log_aspect(jnp.where(elongated, ratio, 2.0))
    m = -jnp.expm1(-s)
    k, e = elliptic_integrals(m)
    # (K − E)/e² → π/4 for a circle; a³ = 3P (K − E) / (2π E* e² A')
    shape = jnp.where(elongated, (k - e) / m, math.pi / 4.0)
    mean_curvature = jnp.where(elongated, a_curv, 0.5 * (a_curv + b_curv))
    cubed = 3.0 * force * shape / (2.0 * math.pi * modulus * mean_curvature)
    loaded = cubed > 0  # no infinite slope of ∛ at no load
    a = jnp.where(loaded, jnp.cbrt(jnp.where(loaded, cubed, 1.0)), 0.0)
    b = a * jnp.where(elongated, jnp.exp(-0.5 * s), 1.0)
    peak = jnp.where(loaded, 3.0 * force / (2.0 * math.pi * jnp.where(loaded, a * b, 1.0)), 0.0)
    return PointContact(a, b, peak)
