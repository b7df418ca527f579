"""Beam cross-sections and materials.

A section is an ``equinox.Module`` whose float fields are its dimensions (m), so a gradient
with respect to a web thickness flows through :meth:`AbstractSection.properties` into the
finite-element matrices. Section axes follow Eurocode 3: the beam axis is local ``x``, local
``z`` runs along the height ``h`` (the web of an I or C section) and local ``y`` along the
flanges; ``Iy = ∫ z² dA`` is the strong-axis second moment of a rolled I section.

Root fillets (radius ``r``) are included exactly: each fillet adds a spandrel (an ``r × r``
square minus a quarter disc) of area ``(1 − π/4) r²`` with its centroid ``0.2234 r`` from the
corner and its own second moment ``0.007544 r⁴``. The torsion constant of an I section is the
ArcelorMittal catalogue formula (rectangles with Roark's end correction plus the
El Darwish–Johnston fillet term); that of a channel uses the same rectangles and Roark's
L-junction fillet term. The shear areas used by the Timoshenko element are those of Eurocode 3
for shear along the web and 5/6 of the flange area for shear along the flanges (rectangles:
5/6 of the area both ways).

Verified (``tests/test_flex_sections.py``) against the ArcelorMittal sales-programme tables:
HEB 100 (A 26.04 cm², Iy 449.5 cm⁴, Iz 167.3 cm⁴, It 9.25 cm⁴, Avz 9.04 cm²) and UPE 100
(A 12.5 cm², Iy 207 cm⁴, Iz 38.3 cm⁴, It 2.01 cm⁴); rectangles against the torsion
coefficients of Timoshenko & Goodier.
"""

from __future__ import annotations

import abc
import math

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from diffmbs import selection

__all__ = [
    "AbstractSection",
    "ChannelSection",
    "GeneralSection",
    "ISection",
    "Material",
    "RectangularSection",
    "SectionProperties",
]

_SPANDREL_AREA = 1.0 - math.pi / 4.0  # × r²
_SPANDREL_OFFSET = (5.0 / 6.0 - math.pi / 4.0) / _SPANDREL_AREA  # × r, centroid from corner
_SPANDREL_OWN = (1.0 - 5.0 * math.pi / 16.0) - _SPANDREL_AREA * _SPANDREL_OFFSET**2  # × r⁴


def _as_float(x) -> Array:
    return jnp.asarray(x, dtype=jnp.result_type(float))


class Material(eqx.Module):
    """Linear elastic isotropic material (SI). Fields: Young's modulus ``E`` (Pa), density
    ``rho`` (kg/m³), Poisson's ratio ``nu`` (–); shear modulus ``G = E / (2 (1 + ν))``."""

    E: Array = eqx.field(converter=_as_float)
    rho: Array = eqx.field(converter=_as_float)
    nu: Array = eqx.field(converter=_as_float, default=0.3)

    @property
    def G(self) -> Array:
        """Shear modulus (Pa)."""
        return self.E / (2.0 * (1.0 + self.nu))

    @classmethod
    def steel(cls) -> Material:
        """Structural steel: E = 210 GPa, ρ = 7850 kg/m³, ν = 0.3 (EN 1993-1-1 §3.2.6)."""
        return cls(210e9, 7850.0, 0.3)


class SectionProperties(eqx.Module):
    """Properties of a cross-section about its centroid (all scalars, SI).

    - ``area`` A (m²);
    - ``iy`` = ∫ z² dA and ``iz`` = ∫ y² dA (m⁴): bending in the local x–z and x–y planes;
    - ``torsion`` St Venant torsion constant It (m⁴), warping neglected;
    - ``shear_area_y``, ``shear_area_z`` (m²): κA for shear forces along y and along z.
    """

    area: Array
    iy: Array
    iz: Array
    torsion: Array
    shear_area_y: Array
    shear_area_z: Array

    @property
    def polar(self) -> Array:
        """Polar second moment about the centroid, ``Iy + Iz`` (m⁴): the torsional inertia."""
        return self.iy + self.iz


class AbstractSection(eqx.Module):
    """A beam cross-section; its float fields (dimensions, m) are differentiable parameters."""

    @abc.abstractmethod
    def properties(self) -> SectionProperties:
        """Area, second moments, torsion constant and shear areas (SI)."""

    @abc.abstractmethod
    def outline(self) -> Array:
        """Section points ``(y, z)`` relative to the centroid (m), shape ``(n, 2)``: the
        vertices of the convex hull, where the peak normal stress of combined axial force and
        bending occurs."""


class GeneralSection(AbstractSection):
    """A section given by its properties (imported from a table or another code).

    ``outline`` (m, shape ``(n, 2)``) lists the extreme fibres for stress recovery; by default
    none (empty)."""

    area: Array = eqx.field(converter=_as_float)
    iy: Array = eqx.field(converter=_as_float)
    iz: Array = eqx.field(converter=_as_float)
    torsion: Array = eqx.field(converter=_as_float)
    shear_area_y: Array = eqx.field(converter=_as_float)
    shear_area_z: Array = eqx.field(converter=_as_float)
    points: Array = eqx.field(converter=_as_float, default=((),))

    def properties(self) -> SectionProperties:
        return SectionProperties(
            self.area, self.iy, self.iz, self.torsion, self.shear_area_y, self.shear_area_z
        )

    def outline(self) -> Array:
        return self.points.reshape(-1, 2)


class RectangularSection(AbstractSection):
    """Solid rectangle, ``width`` along y and ``height`` along z (m).

    The torsion constant is the exact Saint-Venant series (Timoshenko & Goodier §109),
    ``It = a b³/3 [1 − (192 b)/(π⁵ a) Σ_{n odd} tanh(nπa/2b)/n⁵]``, a ≥ b, ten terms
    (relative truncation error below 1e-7)."""

    width: Array = eqx.field(converter=_as_float)
    height: Array = eqx.field(converter=_as_float)

    def properties(self) -> SectionProperties:
        b, h = self.width, self.height
        area = b * h
        # selection's pair takes (ḃ, ḣ) or (ḣ, ḃ), never ḃ twice, even at b = h
        long, short = selection.maximum(b, h), selection.minimum(b, h)
        n = jnp.arange(1, 21, 2, dtype=area.dtype)
        series = jnp.sum(jnp.tanh(n * jnp.pi * long / (2 * short)) / n**5)
        torsion = long * short**3 / 3 * (1 - 192 / jnp.pi**5 * short / long * series)
        return SectionProperties(
            area, b * h**3 / 12, h * b**3 / 12, torsion, 5 / 6 * area, 5 / 6 * area
        )

    def outline(self) -> Array:
        y, z = self.width / 2, self.height / 2
        return jnp.stack([jnp.stack([sy * y, sz * z]) for sy in (1, -1) for sz in (1, -1)])


class ISection(AbstractSection):
    """Doubly symmetric rolled I/H section: height ``h``, flange width ``b``, web thickness
    ``tw``, flange thickness ``tf``, root radius ``r`` (m). HEB 100 is
    ``ISection(0.100, 0.100, 0.006, 0.010, 0.012)``.

    A = 2 b tf + (h − 2tf) tw + 4 A_s;
    Iy = [b h³ − (b − tw)(h − 2tf)³]/12 + 4 [I_s + A_s (h/2 − tf − d)²];
    Iz = [2 tf b³ + (h − 2tf) tw³]/12 + 4 [I_s + A_s (tw/2 + d)²];
    It = ⅔ (b − 0.63 tf) tf³ + ⅓ (h − 2tf) tw³ + 2 (tw/tf)(0.145 + 0.1 r/tf) D⁴,
    D = ((r + tw/2)² + (r + tf)² − r²)/(2r + tf);
    Avz = A − 2 b tf + (tw + 2r) tf (EN 1993-1-1 §6.2.6), Avy = 5/6 · 2 b tf;
    with the fillet spandrel A_s, d, I_s of the module docstring.
    """

    h: Array = eqx.field(converter=_as_float)
    b: Array = eqx.field(converter=_as_float)
    tw: Array = eqx.field(converter=_as_float)
    tf: Array = eqx.field(converter=_as_float)
    r: Array = eqx.field(converter=_as_float, default=0.0)

    def properties(self) -> SectionProperties:
        h, b, tw, tf, r = self.h, self.b, self.tw, self.tf, self.r
        a_s, d, i_s = _SPANDREL_AREA * r**2, _SPANDREL_OFFSET * r, _SPANDREL_OWN * r**4
        hw = h - 2 * tf
        area = 2 * b * tf + hw * tw + 4 * a_s
        iy = (b * h**3 - (b - tw) * hw**3) / 12 + 4 * (i_s + a_s * (h / 2 - tf - d) ** 2)
        iz = (2 * tf * b**3 + hw * tw**3) / 12 + 4 * (i_s + a_s * (tw / 2 + d) ** 2)
        dd = ((r + tw / 2) ** 2 + (r + tf) ** 2 - r**2) / (2 * r + tf)
        torsion = (
            2 / 3 * (b - 0.63 * tf) * tf**3
            + hw * tw**3 / 3
            + 2 * (tw / tf) * (0.145 + 0.1 * r / tf) * dd**4
        )
        avz = selection.maximum(area - 2 * b * tf + (tw + 2 * r) * tf, hw * tw)
        return SectionProperties(area, iy, iz, torsion, 5 / 6 * 2 * b * tf, avz)

    def outline(self) -> Array:
        y, z = self.b / 2, self.h / 2
        return jnp.stack([jnp.stack([sy * y, sz * z]) for sy in (1, -1) for sz in (1, -1)])


class ChannelSection(AbstractSection):
    """Parallel-flange channel (UPE-type C section): height ``h``, flange width ``b``, web
    thickness ``tw``, flange thickness ``tf``, root radius ``r`` (m). The web lies along z with
    its back at ``y = −centroid_offset``; the flanges point towards +y.

    A = 2 b tf + (h − 2tf) tw + 2 A_s; centroid from the back of the web
    e = [b² tf + (h − 2tf) tw²/2 + 2 A_s (tw + d)]/A;
    Iy = [b h³ − (b − tw)(h − 2tf)³]/12 + 2 [I_s + A_s (h/2 − tf − d)²];
    Iz = Σ (own + parallel-axis) of flanges, web and fillets about y = e;
    It = 2 b tf³ [⅓ − 0.21 (tf/b)(1 − tf⁴/(12 b⁴))] + ⅓ (h − 2tf) tw³ + 2 α D⁴ (Roark,
    Table 10.7: rectangles and the L-junction term α = (tw/tf)(0.07 + 0.076 r/tf),
    D = 2 [(3r + tw + tf) − √(2 (2r + tw)(2r + tf))], valid for tw ≤ tf);
    Avz = A − 2 b tf + (tw + r) tf (EN 1993-1-1 §6.2.6), Avy = 5/6 · 2 b tf.

    The shear centre lies on the far side of the web (:meth:`shear_centre_offset`); the beam
    element puts the axis at the centroid and ignores the coupling of bending and torsion that
    this offset causes (see ``docs/guide/flexible_bodies.md``).
    """

    h: Array = eqx.field(converter=_as_float)
    b: Array = eqx.field(converter=_as_float)
    tw: Array = eqx.field(converter=_as_float)
    tf: Array = eqx.field(converter=_as_float)
    r: Array = eqx.field(converter=_as_float, default=0.0)

    def centroid_offset(self) -> Array:
        """Distance from the back of the web to the centroid, e (m)."""
        h, b, tw, tf, r = self.h, self.b, self.tw, self.tf, self.r
        a_s, d = _SPANDREL_AREA * r**2, _SPANDREL_OFFSET * r
        area = 2 * b * tf + (h - 2 * tf) * tw + 2 * a_s
        return (b**2 * tf + (h - 2 * tf) * tw**2 / 2 + 2 * a_s * (tw + d)) / area

    def shear_centre_offset(self) -> Array:
        """Thin-walled distance from the web mid-line to the shear centre, on the side away
        from the flanges, ``3 b'² tf / (6 b' tf + h' tw)`` with ``b' = b − tw/2``,
        ``h' = h − tf`` (m)."""
        bp, hp = self.b - self.tw / 2, self.h - self.tf
        return 3 * bp**2 * self.tf / (6 * bp * self.tf + hp * self.tw)

    def properties(self) -> SectionProperties:
        h, b, tw, tf, r = self.h, self.b, self.tw, self.tf, self.r
        a_s, d, i_s = _SPANDREL_AREA * r**2, _SPANDREL_OFFSET * r, _SPANDREL_OWN * r**4
        hw = h - 2 * tf
        area = 2 * b * tf + hw * tw + 2 * a_s
        e = self.centroid_offset()
        iy = (b * h**3 - (b - tw) * hw**3) / 12 + 2 * (i_s + a_s * (h / 2 - tf - d) ** 2)
        iz = (
            2 * (tf * b**3 / 12 + b * tf * (b / 2 - e) ** 2)
            + hw * tw**3 / 12
            + hw * tw * (tw / 2 - e) ** 2
            + 2 * (i_s + a_s * (tw + d - e) ** 2)
        )
        alpha = (tw / tf) * (0.07 + 0.076 * r / tf)
        dd = 2 * ((3 * r + tw + tf) - jnp.sqrt(2 * (2 * r + tw) * (2 * r + tf)))
        flange = b * tf**3 * (1 / 3 - 0.21 * (tf / b) * (1 - tf**4 / (12 * b**4)))
        torsion = 2 * flange + hw * tw**3 / 3 + 2 * alpha * dd**4
        avz = area - 2 * b * tf + (tw + r) * tf
        return SectionProperties(area, iy, iz, torsion, 5 / 6 * 2 * b * tf, avz)

    def outline(self) -> Array:
        e, z = self.centroid_offset(), self.h / 2
        return jnp.stack([jnp.stack([y, sz * z]) for y in (-e, self.b - e) for sz in (1, -1)])
