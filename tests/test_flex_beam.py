"""Beam finite elements against closed forms.

References: Euler–Bernoulli natural frequencies ω = (βL)² √(EI/ρAL⁴) with βL the roots of
cos βL cosh βL = −1 (cantilever) and = +1 (free–free), found here with scipy.optimize.brentq;
the Timoshenko cantilever tip deflection PL³/3EI + PL/κGA; the Timoshenko frequency equation of
a simply supported beam (a quadratic in ω² for w = sin(nπx/L)); axial and torsional rods,
ω_n = (2n − 1)π/2L · √(E/ρ) and · √(G It/ρ Ip); rigid-body motions as null vectors of K;
invariance of the spectrum under a rotation of the whole beam. Eigenvalues of the references
come from scipy.linalg.eigh, never from the code under test.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize

import diffmbs  # noqa: F401
from diffmbs.flex import (
    BeamModel,
    EulerBernoulli,
    Material,
    RectangularSection,
    Timoshenko,
    beam_line,
    rigid_body_modes,
)

STEEL = Material(210e9, 7850.0, 0.3)
SECTION = RectangularSection(0.02, 0.01)  # width (y) 20 mm, height (z) 10 mm
PROPS = SECTION.properties()
E, RHO, G = 210e9, 7850.0, float(STEEL.G)
A, IY, IZ = float(PROPS.area), float(PROPS.iy), float(PROPS.iz)


def roots(sign, n):
    """First n positive roots βL of cos x cosh x = sign, excluding x = 0: near (k + ½)π for
    the cantilever (sign −1) and (k + 3/2)π for the free–free beam (sign +1)."""
    f = lambda x: np.cos(x) * np.cosh(x) - sign
    first = 0.5 if sign < 0 else 1.5
    return [
        scipy.optimize.brentq(f, (k + first) * np.pi - 1.2, (k + first) * np.pi + 1.2)
        for k in range(n)
    ]


def straight_beam(n_el, length=1.0, theory=None, section=SECTION, direction=(1.0, 0.0, 0.0)):
    nodes, el = beam_line([0.0, 0.0, 0.0], length * np.asarray(direction), n_el)
    return BeamModel(nodes, el, section, STEEL, theory=theory)


def eig(fe, free):
    k, m = np.asarray(fe.stiffness), np.asarray(fe.mass)
    sub = np.ix_(free, free)
    lam, vec = scipy.linalg.eigh(k[sub], m[sub])
    return np.sqrt(np.abs(lam)), vec


def planar_free_dofs(n_nodes, keep, clamp_root=True, pinned=()):
    """Free DOFs keeping only the components ``keep`` at every node."""
    dofs = [6 * p + c for p in range(n_nodes) for c in keep]
    if clamp_root:
        dofs = [d for d in dofs if d >= 6]
    return np.array([d for d in dofs if d not in pinned])


@pytest.mark.parametrize("plane", ["z", "y"])
def test_cantilever_bending_converges_to_euler_bernoulli(plane):
    keep, inertia = ((2, 4), IY) if plane == "z" else ((1, 5), IZ)
    scale = np.sqrt(E * inertia / (RHO * A))
    exact = np.array(roots(-1, 4)) ** 2 * scale
    errors = []
    for n_el in (2, 4, 8, 16):
        fe = straight_beam(n_el, theory=EulerBernoulli(rotary_inertia=False)).assemble()
        omega, _ = eig(fe, planar_free_dofs(n_el + 1, keep))
        errors.append(np.abs(omega[:3] / exact[:3] - 1))
    errors = np.array(errors)
    assert errors[-1, 0] < 2e-7 and errors[-1].max() < 5e-5
    # Hermite cubics: frequency error O(h⁴), a factor ≈ 16 per halving.
    ratios = errors[:-1] / errors[1:]
    assert np.all(ratios[1:] > 12), ratios


def test_free_free_bending_matches_euler_bernoulli():
    n_el = 16
    fe = straight_beam(n_el, theory=EulerBernoulli(rotary_inertia=False)).assemble()
    omega, vec = eig(fe, np.arange(fe.n_dof))
    elastic = omega[6:]
    modes = vec[:, 6:]
    ux, uy, uz = (np.sum(modes[c::6] ** 2, axis=0) for c in range(3))
    moving = ux + uy + uz > 1e-12 * np.sum(modes**2, axis=0)  # not torsion
    bending_z = elastic[moving & (uz > 0.99 * (ux + uy + uz))]
    bending_y = elastic[moving & (uy > 0.99 * (ux + uy + uz))]
    exact_z = np.array(roots(1, 3)) ** 2 * np.sqrt(E * IY / (RHO * A))
    exact_y = np.array(roots(1, 2)) ** 2 * np.sqrt(E * IZ / (RHO * A))
    np.testing.assert_allclose(bending_z[:3], exact_z, rtol=2e-4)
    np.testing.assert_allclose(bending_y[:2], exact_y, rtol=2e-4)
    assert np.all(omega[:6] < 1e-4 * elastic[0])


def test_rigid_body_modes_are_null_vectors_in_any_orientation():
    direction = np.array([1.0, 2.0, -3.0]) / np.sqrt(14.0)
    base = straight_beam(8).assemble()
    tilted = straight_beam(8, direction=direction).assemble()
    for fe in (base, tilted):
        k, r = np.asarray(fe.stiffness), np.asarray(rigid_body_modes(fe))
        assert np.max(np.abs(k @ r)) < 1e-9 * np.max(np.abs(k))
    w0, _ = eig(base, np.arange(base.n_dof))
    w1, _ = eig(tilted, np.arange(tilted.n_dof))
    np.testing.assert_allclose(w1[6:], w0[6:], rtol=1e-10)


@pytest.mark.parametrize("n_el", [1, 5])
def test_timoshenko_cantilever_tip_deflection_is_exact(n_el):
    length, load = 0.3, 2e3
    section = RectangularSection(0.04, 0.08)  # stubby: L/h ≈ 4
    p = section.properties()
    fe = straight_beam(n_el, length, Timoshenko(), section).assemble()
    k = np.asarray(fe.stiffness)
    free = np.arange(6, fe.n_dof)
    for comp, inertia, shear in ((2, p.iy, p.shear_area_z), (1, p.iz, p.shear_area_y)):
        f = np.zeros(fe.n_dof)
        f[6 * n_el + comp] = load
        u = np.linalg.solve(k[np.ix_(free, free)], f[free])
        exact = load * length**3 / (3 * E * float(inertia)) + load * length / (G * float(shear))
        assert u[6 * n_el + comp - 6] == pytest.approx(exact, rel=1e-12)
        bending_only = load * length**3 / (3 * E * float(inertia))
        assert exact / bending_only - 1 > 0.01  # shear matters for this beam


def timoshenko_ss_frequencies(n_modes, length, p, kappa_area):
    """Lower roots ω of det [ρAω² − κGAα², κGAα; κGAα, ρIω² − EIα² − κGA] = 0, α = nπ/L."""
    out = []
    for n in range(1, n_modes + 1):
        a = n * np.pi / length
        ka = G * kappa_area
        ri = RHO * float(p.iy)
        c2 = RHO * A * ri
        c1 = -(RHO * A * (E * float(p.iy) * a**2 + ka) + ri * ka * a**2)
        c0 = ka * a**2 * E * float(p.iy) * a**2
        lam = np.roots([c2, c1, c0])
        out.append(np.sqrt(np.min(lam.real)))
    return np.array(out)


def test_timoshenko_simply_supported_stubby_beam():
    length = 0.05  # L/h = 5
    exact = timoshenko_ss_frequencies(3, length, PROPS, float(PROPS.shear_area_z))
    omega = []
    for n_el in (20, 40):
        fe = straight_beam(n_el, length, Timoshenko()).assemble()
        pinned = (2, 6 * n_el + 2)
        free = planar_free_dofs(n_el + 1, (2, 4), clamp_root=False, pinned=pinned)
        omega.append(eig(fe, free)[0][:3])
    coarse, fine = omega
    np.testing.assert_allclose(fine, exact, rtol=1e-3)
    # With Φ = 12EI/κGAℓ² ≫ 1 the element interpolation tends to linear: O(h²) convergence,
    # so the Richardson extrapolation (4 ω_h/2 − ω_h)/3 is far closer.
    np.testing.assert_allclose((coarse - exact) / (fine - exact), 4.0, rtol=0.01)
    np.testing.assert_allclose((4 * fine - coarse) / 3, exact, rtol=5e-6)
    euler = (np.arange(1, 4) * np.pi / length) ** 2 * np.sqrt(E * IY / (RHO * A))
    assert np.all(euler / exact - 1 > 0.03)  # the Timoshenko beam is markedly softer


@pytest.mark.parametrize("kind", ["axial", "torsion"])
def test_rod_frequencies_and_convergence(kind):
    comp = 0 if kind == "axial" else 3
    speed = (
        np.sqrt(E / RHO)
        if kind == "axial"
        else np.sqrt(G * float(PROPS.torsion) / (RHO * float(PROPS.polar)))
    )
    exact = (2 * np.arange(1, 4) - 1) * np.pi / 2 * speed  # L = 1 m
    errors = []
    for n_el in (8, 16):
        fe = straight_beam(n_el).assemble()
        omega, _ = eig(fe, planar_free_dofs(n_el + 1, (comp,)))
        errors.append(omega[:3] / exact - 1)
    errors = np.abs(np.array(errors))
    assert errors[-1, 0] < 5e-4 and errors[-1].max() < 2e-2
    # linear elements, consistent mass: O(h²), a factor ≈ 4 per halving.
    assert errors[0, 0] / errors[1, 0] == pytest.approx(4.0, rel=0.01)


def test_rotary_inertia_lowers_frequencies_slightly():
    free = planar_free_dofs(9, (2, 4))
    with_ri, _ = eig(straight_beam(8, theory=EulerBernoulli()).assemble(), free)
    without, _ = eig(straight_beam(8, theory=EulerBernoulli(rotary_inertia=False)).assemble(), free)
    rel = 1 - with_ri[:3] / without[:3]
    assert np.all(rel > 0) and np.all(rel < 1e-3)


def test_element_sections_and_orientation():
    nodes, el = beam_line([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], 4)
    other = RectangularSection(0.01, 0.02)  # the same bar turned 90° about its axis
    turned = BeamModel(nodes, el, [SECTION, other], STEEL, element_section=[1, 1, 1, 1])
    rotated = BeamModel(nodes, el, SECTION, STEEL, orientation=jnp.array([0.0, 1.0, 0.0]))
    np.testing.assert_allclose(
        np.asarray(turned.assemble().stiffness),
        np.asarray(rotated.assemble().stiffness),
        rtol=1e-12,
        atol=1e-6,
    )
