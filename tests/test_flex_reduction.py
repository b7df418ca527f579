"""Reductions, static response, stress recovery and reports on a cantilevered channel.

References: the Timoshenko cantilever tip deflection PL³/3EI + PL/κGA; the root bending
stress σ = −M c / I of beam theory (M = PL); the modal effective-mass fractions of a uniform
Euler–Bernoulli cantilever (0.6131, 0.1883, 0.0647: Γₙ² / (m ∫φₙ²) with the closed-form mode
shapes, integrated here with numpy); eigenvalues from scipy.linalg.eigh of the full matrices.
"""

import functools

import equinox as eqx
import jax
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
import scipy.optimize

import diffmbs  # noqa: F401
from diffmbs.flex import (
    BeamModel,
    ChannelSection,
    CraigBampton,
    EulerBernoulli,
    FixedInterfaceModes,
    FlexDataError,
    FreeFreeModes,
    Material,
    RectangularSection,
    Timoshenko,
    beam_line,
    beam_stress_modes,
    reduction_report,
    rigid_body_modes,
    section_stress_points,
)

STEEL = Material(210e9, 7850.0, 0.3)
UPE100 = ChannelSection(0.100, 0.055, 0.0045, 0.0075, 0.010)
P = UPE100.properties()
LENGTH, N_EL, LOAD = 1.2, 8, 5e3
NODES, ELEMENTS = beam_line([0.0, 0.0, 0.0], [LENGTH, 0.0, 0.0], N_EL)
BEAM = BeamModel(NODES, ELEMENTS, UPE100, STEEL, theory=Timoshenko())


@functools.cache  # built on first use, not at collection (every test worker imports this file)
def fe():
    return BEAM.assemble()


ROOT, TIP = tuple(range(6)), tuple(range(6 * N_EL, 6 * N_EL + 6))  # fe().dofs(0), (N_EL)
E, G = 210e9, float(STEEL.G)


def static_tip(basis, comp):
    """Reduced static solution for a tip load along ``comp``; returns (u, q)."""
    f = np.zeros(fe().n_dof)
    f[TIP[comp]] = LOAD
    shapes = np.asarray(basis.shapes)
    q = np.linalg.solve(np.asarray(basis.stiffness), shapes.T @ f)
    return shapes @ q, q


def exact_tip(inertia, shear_area):
    return LOAD * LENGTH**3 / (3 * E * inertia) + LOAD * LENGTH / (G * shear_area)


@pytest.mark.parametrize("orthonormalize", [True, False])
def test_craig_bampton_static_response_is_exact(orthonormalize):
    basis = CraigBampton(TIP, n_modes=2, fixed=ROOT, orthonormalize=orthonormalize)(fe())
    assert basis.n_modes == 6 + 2 and basis.orthonormal == orthonormalize
    for comp, inertia, shear in ((2, P.iy, P.shear_area_z), (1, P.iz, P.shear_area_y)):
        u, _ = static_tip(basis, comp)
        assert u[TIP[comp]] == pytest.approx(exact_tip(float(inertia), float(shear)), rel=1e-11)


def test_normal_modes_static_response_converges_with_mode_count():
    exact = exact_tip(float(P.iy), float(P.shear_area_z))
    errors = []
    for n in (1, 4, 8, 16, 24):
        u, _ = static_tip(FixedInterfaceModes(ROOT, n_modes=n)(fe()), 2)
        errors.append(abs(u[TIP[2]] / exact - 1))
    assert np.all(np.diff(errors) <= 1e-15) and errors[0] > 1e-2 and errors[-1] < 1e-3
    assert errors[-1] < errors[0] / 30


def test_root_bending_stress_from_modal_stresses():
    basis = CraigBampton(TIP, n_modes=2, fixed=ROOT)(fe())
    points = section_stress_points(BEAM, element=0, xi=0.0)
    s = np.asarray(beam_stress_modes(BEAM, basis, points))
    y = np.array([float(p.y) for p in points])
    z = np.array([float(p.z) for p in points])
    moment = LOAD * LENGTH
    # Load along +z: bending about y, σ = −M z / Iy; the extreme fibres are at z = ±h/2.
    _, q = static_tip(basis, 2)
    np.testing.assert_allclose(s @ q, -moment * z / float(P.iy), rtol=1e-10)
    assert np.max(np.abs(s @ q)) == pytest.approx(moment * 0.05 / float(P.iy), rel=1e-10)
    # Load along +y: bending about z, σ = −M y / Iz; the flange tips (y = b − e) are critical.
    _, q = static_tip(basis, 1)
    np.testing.assert_allclose(s @ q, -moment * y / float(P.iz), rtol=1e-10)
    e = float(UPE100.centroid_offset())
    assert np.max(np.abs(s @ q)) == pytest.approx(moment * (0.055 - e) / float(P.iz), rel=1e-10)


def test_stress_from_normal_modes_converges():
    points = section_stress_points(BEAM, element=0, xi=0.0)[:1]
    exact = -LOAD * LENGTH * float(points[0].z) / float(P.iy)
    errors = []
    for n in (2, 8, 24):
        basis = FixedInterfaceModes(ROOT, n_modes=n)(fe())
        _, q = static_tip(basis, 2)
        errors.append(abs(float((beam_stress_modes(BEAM, basis, points) @ q)[0]) / exact - 1))
    assert errors[0] > errors[1] > errors[2] and errors[2] < 0.03


def cantilever_shape_fractions(n):
    """Effective-mass fractions of the Euler–Bernoulli cantilever modes (closed-form shapes)."""
    out = []
    for k in range(n):
        f = lambda x: np.cos(x) * np.cosh(x) + 1
        bl = scipy.optimize.brentq(f, (k + 0.5) * np.pi - 1.2, (k + 0.5) * np.pi + 1.2)
        sigma = (np.cosh(bl) + np.cos(bl)) / (np.sinh(bl) + np.sin(bl))
        phi = lambda x, bl=bl, s=sigma: (
            np.cosh(bl * x) - np.cos(bl * x) - s * (np.sinh(bl * x) - np.sin(bl * x))
        )
        gamma = scipy.integrate.quad(phi, 0, 1)[0]
        norm = scipy.integrate.quad(lambda x, phi=phi: phi(x) ** 2, 0, 1)[0]
        out.append(gamma**2 / norm)
    return np.array(out)


def test_report_effective_masses_of_a_slender_cantilever():
    nodes, el = beam_line([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], 16)
    beam = BeamModel(nodes, el, RectangularSection(0.02, 0.01), STEEL, theory=EulerBernoulli(False))
    fe = beam.assemble()
    basis = FixedInterfaceModes(fe.dofs(0), n_modes=12)(fe)
    report = reduction_report(fe, basis)
    eff = np.array(report.effective_mass)
    z_modes = eff[:, 2] > 1e-6 * report.total_mass
    np.testing.assert_allclose(
        eff[z_modes, 2][:3] / report.total_mass, cantilever_shape_fractions(3), rtol=2e-3
    )
    assert report.total_mass == pytest.approx(7850 * 2e-4 * 1.0, rel=1e-12)
    text = str(report)
    assert "fixed-interface" in text and "effective-mass fraction" in text
    assert '"frequencies_hz"' in report.to_json()


def test_cutoff_selection_counts_modes_and_needs_concrete_matrices():
    k, m = np.asarray(fe().stiffness), np.asarray(fe().mass)
    free = np.setdiff1d(np.arange(fe().n_dof), ROOT)
    freq = np.sqrt(scipy.linalg.eigh(k[np.ix_(free, free)], m[np.ix_(free, free)])[0]) / (2 * np.pi)
    cutoff = 0.5 * (freq[4] + freq[5])
    basis = FixedInterfaceModes(ROOT, cutoff_hz=cutoff)(fe())
    assert basis.n_modes == 5
    np.testing.assert_allclose(np.asarray(basis.frequencies_hz()), freq[:5], rtol=1e-10)
    with pytest.raises(FlexDataError, match="cutoff_hz"):
        jax.jit(lambda fe: FixedInterfaceModes(ROOT, cutoff_hz=cutoff)(fe).shapes)(fe())


def test_free_free_modes_are_mean_axis_and_orthonormal():
    basis = FreeFreeModes(n_modes=6)(fe())
    shapes, k, m = (np.asarray(x) for x in (basis.shapes, fe().stiffness, fe().mass))
    np.testing.assert_allclose(shapes.T @ m @ shapes, np.eye(6), atol=1e-10)
    lam_kept = np.asarray(basis.stiffness).diagonal()
    np.testing.assert_allclose(shapes.T @ k @ shapes, np.diag(lam_kept), atol=1e-11 * lam_kept[-1])
    # Mass-orthogonal to the six rigid-body motions: Tisserand mean axes.
    rigid = np.asarray(rigid_body_modes(fe()))
    assert np.max(np.abs(shapes.T @ m @ rigid)) < 1e-10 * np.max(np.abs(m @ rigid))
    lam = scipy.linalg.eigh(k, m, eigvals_only=True)
    np.testing.assert_allclose(np.diag(np.asarray(basis.stiffness)), lam[6:12], rtol=1e-9)


def test_craig_bampton_free_floating_spans_static_modes():
    # Interface at both ends, no support: rigid-body content removed, 12 + 3 − 6 shapes.
    basis = CraigBampton(ROOT + TIP, n_modes=3)(fe())
    assert basis.n_modes == 9 and basis.kinds == ("craig-bampton",) * 9
    shapes, m = np.asarray(basis.shapes), np.asarray(fe().mass)
    np.testing.assert_allclose(shapes.T @ m @ shapes, np.eye(9), atol=1e-10)
    # The lowest free–free frequency is approximated from above.
    exact = FreeFreeModes(n_modes=1)(fe()).frequencies_hz()[0]
    f = np.asarray(basis.frequencies_hz())
    assert f[0] >= float(exact) * (1 - 1e-12) and f[0] < float(exact) * 1.01


def test_reduction_errors_name_the_problem():
    with pytest.raises(FlexDataError, match="exactly one of n_modes and cutoff_hz"):
        FreeFreeModes(n_modes=3, cutoff_hz=100.0)
    with pytest.raises(FlexDataError, match="n_modes: 500 requested"):
        FixedInterfaceModes(ROOT, n_modes=500)(fe())
    with pytest.raises(FlexDataError, match="interface: holding these DOFs"):
        FixedInterfaceModes(fe().dofs(0, "translations"), n_modes=2)(fe())
    with pytest.raises(FlexDataError, match="interface: holding these DOFs"):
        CraigBampton(fe().dofs(N_EL, "translations"), n_modes=2)(fe())
    with pytest.raises(FlexDataError, match="interface: a DOF is listed both"):
        CraigBampton(TIP, n_modes=2, fixed=TIP[:1])(fe())
    grounded = eqx.tree_at(lambda f: f.stiffness, fe(), fe().stiffness.at[2, 2].add(1e6))
    with pytest.raises(FlexDataError, match="stiffness: K does not annihilate"):
        FreeFreeModes(n_modes=2)(grounded)
    nodes, _ = beam_line([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], 3)
    apart = BeamModel(nodes, [(0, 1), (2, 3)], UPE100, STEEL).assemble()
    with pytest.raises(FlexDataError, match="mechanism or disconnected"):
        FreeFreeModes(n_modes=2)(apart)
