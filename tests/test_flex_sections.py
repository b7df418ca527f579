"""Beam sections against catalogue tables, polygon integrals and Saint-Venant torsion.

References: the ArcelorMittal sales-programme tables for HEB 100 (A 26.04 cm², Iy 449.5 cm⁴,
Iz 167.3 cm⁴, It 9.25 cm⁴, Avz 9.04 cm², Wel,y 89.91 cm³) and UPE 100 (A 12.5 cm², Iy 207 cm⁴,
Iz 38.3 cm⁴, It 2.01 cm⁴, centroid 1.91 cm from the web back); Green's-theorem integrals over
the section outline traced as a polygon (fillets as 4000-segment arcs); the torsion
coefficients k₁ (It = k₁ a b³) of Timoshenko & Goodier's table for rectangles.
"""

import jax
import numpy as np
import pytest

import diffmbs  # noqa: F401
from diffmbs.flex import ChannelSection, GeneralSection, ISection, Material, RectangularSection

CM2, CM4 = 1e-4, 1e-8


def polygon_properties(points):
    """Area, centroid (y, z) and centroidal ∫z² dA, ∫y² dA of a simple polygon (Green)."""
    y, z = np.asarray(points).T
    y1, z1 = np.roll(y, -1), np.roll(z, -1)
    cross = y * z1 - y1 * z
    area = cross.sum() / 2
    cy = ((y + y1) * cross).sum() / (6 * area)
    cz = ((z + z1) * cross).sum() / (6 * area)
    izz = ((z * z + z * z1 + z1 * z1) * cross).sum() / 12 - area * cz**2
    iyy = ((y * y + y * y1 + y1 * y1) * cross).sum() / 12 - area * cy**2
    return abs(area), (cy, cz), abs(izz), abs(iyy)


def arc(center, r, a0, a1, n=4000):
    t = np.linspace(a0, a1, n)
    return list(zip(center[0] + r * np.cos(t), center[1] + r * np.sin(t), strict=True))


def i_outline(h, b, tw, tf, r):
    hh, bb, ww = h / 2, b / 2, tw / 2
    return (
        [(-bb, -hh), (bb, -hh), (bb, -hh + tf)]
        + arc((ww + r, -hh + tf + r), r, -np.pi / 2, -np.pi)
        + arc((ww + r, hh - tf - r), r, np.pi, np.pi / 2)
        + [(bb, hh - tf), (bb, hh), (-bb, hh), (-bb, hh - tf)]
        + arc((-ww - r, hh - tf - r), r, np.pi / 2, 0)
        + arc((-ww - r, -hh + tf + r), r, 0, -np.pi / 2)
        + [(-bb, -hh + tf)]
    )


def channel_outline(h, b, tw, tf, r):
    hh = h / 2
    return (
        [(0, -hh), (b, -hh), (b, -hh + tf)]
        + arc((tw + r, -hh + tf + r), r, -np.pi / 2, -np.pi)
        + arc((tw + r, hh - tf - r), r, np.pi, np.pi / 2)
        + [(b, hh - tf), (b, hh), (0, hh)]
    )


HEB100 = ISection(0.100, 0.100, 0.006, 0.010, 0.012)
UPE100 = ChannelSection(0.100, 0.055, 0.0045, 0.0075, 0.010)


def test_heb100_matches_catalogue():
    p = HEB100.properties()
    assert float(p.area) / CM2 == pytest.approx(26.04, abs=0.005)
    assert float(p.iy) / CM4 == pytest.approx(449.5, abs=0.05)
    assert float(p.iz) / CM4 == pytest.approx(167.3, abs=0.05)
    assert float(p.torsion) / CM4 == pytest.approx(9.25, abs=0.005)
    assert float(p.shear_area_z) / CM2 == pytest.approx(9.04, abs=0.005)
    w_el = float(p.iy) / 0.05 / 1e-6  # cm³
    assert w_el == pytest.approx(89.91, abs=0.01)


def test_upe100_matches_catalogue():
    p = UPE100.properties()
    assert float(p.area) / CM2 == pytest.approx(12.5, abs=0.05)
    assert float(p.iy) / CM4 == pytest.approx(207, rel=0.005)
    assert float(p.iz) / CM4 == pytest.approx(38.3, rel=0.005)
    assert float(UPE100.centroid_offset()) * 100 == pytest.approx(1.91, abs=0.005)
    # Roark's thin-walled torsion constant with the L-junction term: 4 % under the table.
    assert float(p.torsion) / CM4 == pytest.approx(2.01, rel=0.05)


@pytest.mark.parametrize("r", [0.0, 0.012])
def test_i_section_matches_polygon_integrals(r):
    sec = ISection(0.1, 0.1, 0.006, 0.010, r)
    p = sec.properties()
    area, (cy, cz), iy, iz = polygon_properties(i_outline(0.1, 0.1, 0.006, 0.010, r))
    assert abs(cy) < 1e-12 and abs(cz) < 1e-12
    assert float(p.area) == pytest.approx(area, rel=1e-6)
    assert float(p.iy) == pytest.approx(iy, rel=1e-6)
    assert float(p.iz) == pytest.approx(iz, rel=1e-6)


@pytest.mark.parametrize("r", [0.0, 0.010])
def test_channel_matches_polygon_integrals(r):
    dims = (0.1, 0.055, 0.0045, 0.0075, r)
    sec = ChannelSection(*dims)
    p = sec.properties()
    area, (cy, cz), iy, iz = polygon_properties(channel_outline(*dims))
    assert abs(cz) < 1e-12
    assert float(sec.centroid_offset()) == pytest.approx(cy, rel=1e-6)
    assert float(p.area) == pytest.approx(area, rel=1e-6)
    assert float(p.iy) == pytest.approx(iy, rel=1e-6)
    assert float(p.iz) == pytest.approx(iz, rel=1e-6)
    out = np.asarray(sec.outline())
    assert out[:, 0].min() == pytest.approx(-cy) and out[:, 0].max() == pytest.approx(0.055 - cy)


@pytest.mark.parametrize(
    ("ratio", "k1"), [(1.0, 0.141), (1.5, 0.196), (2.0, 0.229), (3.0, 0.263), (10.0, 0.312)]
)
def test_rectangle_torsion_matches_saint_venant_table(ratio, k1):
    a, b = 0.01 * ratio, 0.01
    for sec in (RectangularSection(a, b), RectangularSection(b, a)):
        assert float(sec.properties().torsion) / (a * b**3) == pytest.approx(k1, abs=6e-4)


def test_section_properties_are_differentiable():
    # ∂Iy/∂h of a rectangle is b h²/4; of the I section, by central differences.
    g = jax.grad(lambda h: RectangularSection(0.02, h).properties().iy)(0.03)
    assert float(g) == pytest.approx(0.02 * 0.03**2 / 4, rel=1e-12)
    f = lambda tw: ISection(0.1, 0.1, tw, 0.01, 0.012).properties().torsion
    eps = 1e-7
    fd = (f(0.006 + eps) - f(0.006 - eps)) / (2 * eps)
    assert float(jax.grad(f)(0.006)) == pytest.approx(float(fd), rel=1e-6)


def test_general_section_and_material():
    sec = GeneralSection(1e-3, 2e-7, 1e-7, 5e-8, 8e-4, 8e-4)
    p = sec.properties()
    assert float(p.polar) == pytest.approx(3e-7)
    assert sec.outline().shape == (0, 2)
    steel = Material.steel()
    assert float(steel.G) == pytest.approx(210e9 / 2.6)
