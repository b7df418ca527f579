"""Involute spur and helical gear pairs: geometry, backlash, contact ratios and ISO 6336-1 mesh
stiffness (SI units; ../shared/SEEDS.md 000 and 004).

A pair of external gears is given by the normal module ``m_n``, the tooth numbers ``z₁, z₂``,
the normal pressure angle ``α_n``, the helix angle ``β`` (0: spur), the profile shift
coefficients ``x₁, x₂``, the face width ``b`` and the working centre distance ``a``
(:class:`GearPair`). From these (ISO 21771; Niemann–Winter):

* transverse module and pressure angle ``m_t = m_n / cos β``, ``tan α_t = tan α_n / cos β``;
  reference radii ``r = z m_t / 2``, base radii ``r_b = r cos α_t``, base helix
  ``sin β_b = sin β cos α_n``, transverse base pitch ``p_bt = π m_t cos α_t``;
* working pressure angle ``cos α_wt = (r_b1 + r_b2) / a`` and working pitch radii
  ``r_w = r_b / cos α_wt``;
* tip radii ``r_a = r + m_n (h_a* + x)`` (no tip shortening); the transverse contact ratio

      ε_α = (√(r_a1² − r_b1²) + √(r_a2² − r_b2²) − a sin α_wt) / p_bt,

  the path of contact ``g_α = ε_α p_bt`` and the overlap ratio ``ε_β = b sin β / (π m_n)``;
* backlash: the transverse tooth thickness on the working circle
  ``s_w = 2 r_w (s_t / (2r) + inv α_t − inv α_wt)`` with ``s_t = m_t (π/2 + 2x tan α_n) − A``
  (``A`` the thickness allowance, transverse, at the reference circle),
  ``inv α = tan α − α``; the circular backlash ``j_wt = 2π r_w1 / z₁ − s_w1 − s_w2`` and along
  the line of action ``j_bt = j_wt cos α_wt`` (:func:`backlash`);
* stiffness, ISO 6336-1 method B: the theoretical single stiffness ``c'_th = 1/q'`` with
  ``q' = C₁ + C₂/z_n1 + C₃/z_n2 + C₄ x₁ + C₅ x₁/z_n1 + C₆ x₂ + C₇ x₂/z_n2 + C₈ x₁² + C₉ x₂²``
  (mm·µm/N, virtual teeth ``z_n = z / (cos² β_b cos β)``), the single stiffness
  ``c' = c'_th C_M C_R C_B cos β`` (``C_M = 0.8``; the gear blank factor ``C_R = 1`` for solid
  gears and ``C_R = 1 + ln(b_s/b) / (5 exp(s_R / (5 m_n)))`` for a rimmed gear of web thickness
  ``b_s`` and rim thickness ``s_R``, with ``b_s/b`` held to [0.2, 1.2] and ``s_R/m_n`` to ≥ 1;
  ``C_B = (1 + 0.5 (1.2 − h_fP/m_n)) (1 − 0.02 (20° − α_n))``) and the mesh stiffness
  ``c_γα = c' (0.75 ε_α + 0.25)``, ``c_γβ = 0.85 c_γα`` — per unit face width, N/(mm·µm),
  so ``c_γα · b`` is the mesh's mean stiffness along the line of action (1 N/(mm·µm) =
  1e9 N/m²) (:func:`iso_6336_stiffness`; checked against ISO/TR 6336-30 example 1).

Tooth outlines for mesh contact (:func:`tooth_profile`, :func:`tooth_mesh`): the involute flank
at radius ``r`` lies at the polar angle ``±(s_t/(2r) + inv α_t − inv α_r)`` from the tooth's
middle, ``cos α_r = r_b / r``; its radius of curvature there is ``ρ = √(r² − r_b²)``, the
distance along the line of action from the base circle.

Everything is a pure function of floats or arrays (``jit``/``grad``-able), except
:func:`tooth_mesh` (a ``trimesh.Trimesh``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

__all__ = [
    "GearPair",
    "GearPairGeometry",
    "MeshStiffness",
    "backlash",
    "gear_blank_factor",
    "involute",
    "iso_6336_stiffness",
    "pair_geometry",
    "tooth_mesh",
    "tooth_profile",
    "working_thickness",
]

# ISO 6336-1 (method B): the coefficients of q' (mm·µm/N)
_Q_COEFFICIENTS = (0.04723, 0.15551, 0.25791, -0.00635, -0.11654, -0.00193, -0.24188, 0.00529,
                   0.00182)  # fmt: skip
_N_PER_MM_UM = 1e9  # 1 N/(mm·µm) in N/m² (stiffness per unit face width)


class GearPair(NamedTuple):
    """An external gear pair (SI; angles in rad).

    ``module``: normal module m_n (m); ``teeth``: (z₁, z₂); ``pressure_angle``: α_n;
    ``helix_angle``: β (0 spur); ``shifts``: profile shift coefficients (x₁, x₂);
    ``face_width``: b (m); ``centre_distance``: the working a (m);
    ``thickness_allowances``: transverse tooth-thickness allowances at the reference circles
    (m, each ≥ 0: they make backlash); ``addendum``: h_a* (1 for the standard basic rack);
    ``dedendum``: h_fP*/m_n of the basic rack (1.25; ISO's rack D: 1.4).
    """

    module: float
    teeth: tuple[int, int]
    pressure_angle: float
    helix_angle: float
    shifts: tuple[float, float]
    face_width: float
    centre_distance: float
    thickness_allowances: tuple[float, float] = (0.0, 0.0)
    addendum: float = 1.0
    dedendum: float = 1.25


def involute(angle: ArrayLike) -> Array:
    """``inv α = tan α − α`` (rad)."""
    angle = jnp.asarray(angle, float)
    return jnp.tan(angle) - angle


class GearPairGeometry(NamedTuple):
    """:func:`pair_geometry`'s result (SI, rad): each ``(2,)`` field for (gear 1, gear 2)."""

    transverse_module: Array
    transverse_pressure_angle: Array
    working_pressure_angle: Array
    base_helix_angle: Array
    reference_radii: Array  # (2,)
    base_radii: Array  # (2,)
    working_radii: Array  # (2,)
    tip_radii: Array  # (2,)
    base_pitch: Array  # transverse
    contact_ratio: Array  # ε_α
    overlap_ratio: Array  # ε_β
    path_of_contact: Array  # g_α (m)
    virtual_teeth: Array  # (2,)


def pair_geometry(pair: GearPair, centre_distance: ArrayLike | None = None) -> GearPairGeometry:
    """The pair's geometry (module docstring) at its working centre distance, or at
    ``centre_distance`` (m) where given (a shaft that moves)."""
    a = jnp.asarray(pair.centre_distance if centre_distance is None else centre_distance, float)
    z = jnp.asarray(pair.teeth, float)
    x = jnp.asarray(pair.shifts, float)
    alpha_n, beta = pair.pressure_angle, pair.helix_angle
    m_t = pair.module / math.cos(beta)  # β's sign is the hand (gear 1's): cos β, sin |β|
    alpha_t = math.atan(math.tan(alpha_n) / math.cos(beta))
    radii = 0.5 * z * m_t
    base = radii * math.cos(alpha_t)
    working_angle = jnp.arccos(jnp.sum(base) / a)
    tips = radii + pair.module * (pair.addendum + x)
    pitch = math.pi * m_t * math.cos(alpha_t)
    path = (jnp.sum(jnp.sqrt(tips**2 - base**2)) - a * jnp.sin(working_angle))
    base_helix = math.asin(math.sin(abs(beta)) * math.cos(alpha_n))
    return GearPairGeometry(
        transverse_module=jnp.asarray(m_t),
        transverse_pressure_angle=jnp.asarray(alpha_t),
        working_pressure_angle=working_angle,
        base_helix_angle=jnp.asarray(base_helix),
        reference_radii=radii,
        base_radii=base,
        working_radii=base / jnp.cos(working_angle),
        tip_radii=tips,
        base_pitch=jnp.asarray(pitch),
        contact_ratio=path / pitch,
        overlap_ratio=jnp.asarray(pair.face_width * math.sin(abs(beta)) / (math.pi * pair.module)),
        path_of_contact=path,
        virtual_teeth=z / (math.cos(base_helix) ** 2 * math.cos(beta)),
    )  # fmt: skip


def working_thickness(pair: GearPair, centre_distance: ArrayLike | None = None,
                      allowances: ArrayLike | None = None,
                      geometry: GearPairGeometry | None = None) -> Array:  # fmt: skip
    """The transverse tooth thicknesses ``(2,)`` (m) on the working pitch circles (module
    docstring), the ``allowances`` (m, ``(2,)``; default the pair's) taken off; ``geometry``:
    the pair's at that centre distance, if already computed."""
    g = pair_geometry(pair, centre_distance) if geometry is None else geometry
    x = jnp.asarray(pair.shifts, float)
    allowances = pair.thickness_allowances if allowances is None else allowances
    thickness = (g.transverse_module * (0.5 * math.pi + 2.0 * x * math.tan(pair.pressure_angle))
                 - jnp.asarray(allowances, float))  # fmt: skip
    return 2.0 * g.working_radii * (
        thickness / (2.0 * g.reference_radii) + involute(g.transverse_pressure_angle)
        - involute(g.working_pressure_angle))  # fmt: skip


def backlash(pair: GearPair, centre_distance: ArrayLike | None = None,
             allowances: ArrayLike | None = None,
             geometry: GearPairGeometry | None = None) -> tuple[Array, Array]:  # fmt: skip
    """``(j_wt, j_bt)`` (m): the circular backlash on the working pitch circle and the backlash
    along the line of action (transverse), at the pair's or the given centre distance and
    thickness allowances (``geometry``: as :func:`working_thickness`)."""
    g = pair_geometry(pair, centre_distance) if geometry is None else geometry
    pitch = 2.0 * math.pi * g.working_radii[0] / pair.teeth[0]
    circular = pitch - jnp.sum(working_thickness(pair, centre_distance, allowances, g))
    return circular, circular * jnp.cos(g.working_pressure_angle)


class MeshStiffness(NamedTuple):
    """:func:`iso_6336_stiffness`'s result, per unit face width (N/m², i.e. N/m per m of face;
    1 N/(mm·µm) = 1e9 N/m²)."""

    theoretical_single: Array  # c'_th
    single: Array  # c'
    mesh: Array  # c_γα
    mesh_helix: Array  # c_γβ = 0.85 c_γα


def gear_blank_factor(pair: GearPair, web_thickness: float, rim_thickness: float) -> float:
    """ISO 6336-1's gear blank factor C_R = 1 + ln(b_s/b) / (5 exp(s_R / (5 m_n))) of a rimmed
    gear, web thickness b_s and rim thickness s_R (m); b_s/b is held to [0.2, 1.2] and s_R/m_n
    to ≥ 1, as the standard says (a web as wide as the face gives 1, the solid gear's)."""
    for name, value in (("web_thickness", web_thickness), ("rim_thickness", rim_thickness)):
        if not value > 0.0:
            raise ValueError(f"gear_blank_factor: {name} must be > 0 (m), got {value}")
    web = min(max(web_thickness / pair.face_width, 0.2), 1.2)
    rim = max(rim_thickness / pair.module, 1.0)
    return 1.0 + math.log(web) / (5.0 * math.exp(rim / 5.0))


def iso_6336_stiffness(pair: GearPair, *, web_thickness: float | None = None,
                       rim_thickness: float | None = None) -> MeshStiffness:  # fmt: skip
    """ISO 6336-1 method B (module docstring) for gears of steel. Solid gears by default; for a
    rimmed gear (usually the wheel) give its ``web_thickness`` b_s and ``rim_thickness`` s_R (m,
    s_R radially from the root circle to the rim's bore), which set the gear blank factor C_R
    of the pair (:func:`gear_blank_factor`)."""
    blank = 1.0
    if web_thickness is not None or rim_thickness is not None:
        if web_thickness is None or rim_thickness is None:
            raise ValueError("iso_6336_stiffness: a rimmed gear needs both web_thickness and "
                             "rim_thickness (m); give neither for solid gears")  # fmt: skip
        blank = gear_blank_factor(pair, web_thickness, rim_thickness)
    g = pair_geometry(pair)
    zn1, zn2 = g.virtual_teeth[0], g.virtual_teeth[1]
    x1, x2 = pair.shifts
    c = _Q_COEFFICIENTS
    q = (c[0] + c[1] / zn1 + c[2] / zn2 + c[3] * x1 + c[4] * x1 / zn1 + c[5] * x2
         + c[6] * x2 / zn2 + c[7] * x1**2 + c[8] * x2**2)  # fmt: skip
    theoretical = 1.0 / q
    c_b = ((1.0 + 0.5 * (1.2 - pair.dedendum))
           * (1.0 - 0.02 * (20.0 - math.degrees(pair.pressure_angle))))  # fmt: skip
    single = theoretical * 0.8 * blank * c_b * math.cos(pair.helix_angle)
    mesh = single * (0.75 * g.contact_ratio + 0.25)
    return MeshStiffness(*(_N_PER_MM_UM * s for s in (theoretical, single, mesh, 0.85 * mesh)))


def tooth_profile(pair: GearPair, gear: int, points: int,
                  allowance: ArrayLike | None = None) -> Array:  # fmt: skip
    """One tooth's two involute flanks as ``points`` vertices each, ``(2, points, 2)`` (m), in
    the gear's transverse frame (x along the tooth's middle, y = z × x): flank 0 at +y, flank 1
    at −y, each from its lowest active point to the tip, the vertices a constant step apart in
    the radius of curvature ρ (so equally spaced along the line of action; module docstring).
    ``gear``: 0 or 1; ``allowance`` (m, transverse at the reference circle; default the
    pair's) thins the tooth. The lowest point is a quarter base pitch below the start of the
    active profile at the pair's centre distance (the mate's tip circle), not below the base
    or the root circle."""
    if gear not in (0, 1) or points < 2:
        raise ValueError(f"tooth_profile: gear must be 0 or 1 and points ≥ 2, got {gear}, "
                         f"{points}")  # fmt: skip
    g = pair_geometry(pair)
    a = jnp.asarray(pair.centre_distance, float)
    r_b, r_a, r_ref = g.base_radii[gear], g.tip_radii[gear], g.reference_radii[gear]
    r_b_mate, r_a_mate = g.base_radii[1 - gear], g.tip_radii[1 - gear]
    start = a * jnp.sin(g.working_pressure_angle) - jnp.sqrt(r_a_mate**2 - r_b_mate**2)
    root = r_ref - pair.module * (pair.dedendum - pair.shifts[gear])
    lowest = jnp.sqrt(jnp.where(root > r_b, root**2 - r_b**2, 0.0))
    low = jnp.where(start - 0.25 * g.base_pitch > lowest, start - 0.25 * g.base_pitch, lowest)
    rho = low + (jnp.sqrt(r_a**2 - r_b**2) - low) * jnp.linspace(0.0, 1.0, points)
    radius = jnp.sqrt(r_b**2 + rho**2)
    allowance = pair.thickness_allowances[gear] if allowance is None else allowance
    thickness = (g.transverse_module * (0.5 * math.pi + 2.0 * pair.shifts[gear]
                                        * math.tan(pair.pressure_angle)) - allowance)  # fmt: skip
    roll = rho / r_b  # tan α_r
    half = (thickness / (2.0 * r_ref) + involute(g.transverse_pressure_angle)
            - (roll - jnp.arctan(roll)))  # fmt: skip
    flank = jnp.stack([radius * jnp.cos(half), radius * jnp.sin(half)], axis=-1)
    return jnp.stack([flank, flank * jnp.array([1.0, -1.0])])


def tooth_mesh(pair: GearPair, gear: int, points: int):
    """One tooth of gear ``gear`` as a closed triangle mesh (``trimesh.Trimesh``, m): the
    :func:`tooth_profile` outline (flanks, a straight tip and a straight root chord: a convex
    polygon) extruded over the face width, z from −b/2 to b/2, in the gear's frame (a helical
    gear's twist is not drawn). Usable as STL, or for mass properties
    (:meth:`diffmbs.multibody.RigidBody.from_mesh`)."""
    import numpy as np
    import trimesh

    flanks = np.asarray(tooth_profile(pair, gear, points))
    outline = np.concatenate([flanks[1], flanks[0][::-1]])  # counter-clockwise
    n = len(outline)
    half = 0.5 * pair.face_width
    vertices = np.concatenate([np.c_[outline, np.full(n, -half)], np.c_[outline, np.full(n, half)]])
    i = np.arange(n)
    j = (i + 1) % n
    sides = np.concatenate([np.c_[i, j, j + n], np.c_[i, j + n, i + n]])
    fan = np.arange(1, n - 1)
    caps = np.concatenate([np.c_[np.zeros_like(fan), fan + 1, fan],  # z = −b/2, facing −z
                           np.c_[np.full_like(fan, n), fan + n, fan + n + 1]])  # fmt: skip
    return trimesh.Trimesh(vertices, np.concatenate([sides, caps]), process=False)
