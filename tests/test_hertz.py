"""Hertz's contact formulas against published worked examples, the closed form of a circle, and
SciPy's elliptic integrals and root finder; gradients against central differences.

References: R. L. Norton, *Machine Design: An Integrated Approach*, 4th ed., Example 7-2 (a crane
wheel on a rail: half-width 0.0518 in, peak pressure 70 243 psi); *Marks' Calculations for
Machine Design* (2005), §3, Example 2 (a railway wheel on a rail: b² = 8.14e-6 m²); A. P. Boresi
and R. J. Schmidt, *Advanced Mechanics of Materials*, ch. 17 (contact stresses), Example 1 (two
crossed curved bodies: σ_max = −1597 MPa from coefficients read off charts)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize
import scipy.special

import diffmbs
from diffmbs import hertz

diffmbs.configure()

INCH, LBF, PSI = 0.0254, 4.4482216152605, 6894.757293168


def test_line_contact_matches_norton_and_marks_worked_examples():
    modulus = hertz.contact_modulus(30e6 * PSI, 0.28, 30e6 * PSI, 0.28)
    b, peak = hertz.line_contact(5000 * LBF, 0.875 * INCH, 6.0 * INCH, jnp.inf, modulus)
    np.testing.assert_allclose(b / INCH, 0.0518, rtol=1e-3)
    np.testing.assert_allclose(peak / PSI, 70243, rtol=2e-4)
    modulus = hertz.contact_modulus(210e9, 0.3, 210e9, 0.3)
    b, _ = hertz.line_contact(147500.0, 0.1, 0.5, jnp.inf, modulus)
    np.testing.assert_allclose(b**2, 8.14e-6, rtol=1e-3)


def test_a_journal_in_its_bore_is_the_strip_of_the_relative_radius():
    """A bore (negative radius) around its journal: 1/R = 1/r − 1/(r + c); the strip's load
    integrates to the force."""
    modulus = hertz.contact_modulus(210e9, 0.3, 110e9, 0.34)  # steel journal, bronze bushing
    r, c, length, force = 0.01, 2e-4, 0.02, 800.0
    b, peak = hertz.line_contact(force, length, r, -(r + c), modulus)
    relative = r * (r + c) / c
    np.testing.assert_allclose(b, np.sqrt(4 * force * relative / (np.pi * length * modulus)))
    np.testing.assert_allclose(np.pi / 2 * peak * b * length, force, rtol=1e-12)


def test_elliptic_integrals_match_scipy():
    m = np.array([0.0, 1e-8, 0.1, 0.5, 0.9, 0.999, 1 - 1e-9])
    k, e = hertz.elliptic_integrals(m)
    np.testing.assert_allclose(k, scipy.special.ellipk(m), rtol=1e-13)
    np.testing.assert_allclose(e, scipy.special.ellipe(m), rtol=1e-13)


def _scipy_point_contact(force, a_curv, b_curv, modulus):
    """An independent solution of the same equations: SciPy's integrals and brentq."""

    def residual(m):
        k, e = scipy.special.ellipk(m), scipy.special.ellipe(m)
        return (e / (1 - m) - k) / (k - e) - b_curv / a_curv

    m = scipy.optimize.brentq(residual, 1e-12, 1 - 1e-15, xtol=1e-16, rtol=1e-15)
    k, e = scipy.special.ellipk(m), scipy.special.ellipe(m)
    a = (3 * force * (k - e) / (2 * np.pi * modulus * m * a_curv)) ** (1 / 3)
    b = a * np.sqrt(1 - m)
    return a, b, 3 * force / (2 * np.pi * a * b)


def test_point_contact_is_hertz_circle_for_a_ball_and_scipy_for_ellipses():
    modulus = hertz.contact_modulus(210e9, 0.3, 210e9, 0.3)
    radius, force = 0.01, 100.0
    a_curv, b_curv = hertz.relative_curvatures([radius, radius], [np.inf, np.inf])
    a, b, peak = hertz.point_contact(force, a_curv, b_curv, modulus)
    circle = (3 * force * radius / (4 * modulus)) ** (1 / 3)
    np.testing.assert_allclose([a, b], [circle, circle], rtol=1e-12)
    np.testing.assert_allclose(peak, 3 * force / (2 * np.pi * circle**2), rtol=1e-12)
    # a ball in a cylindrical bore (the 3-D clearance joint's journal end), ratios 1.5 to 1e4
    for clearance in (5e-3, 2e-4, 1e-6):
        bore = -(radius + clearance)
        a_curv, b_curv = hertz.relative_curvatures([radius, radius], [bore, np.inf])
        ours = hertz.point_contact(force, a_curv, b_curv, modulus)
        reference = _scipy_point_contact(force, float(a_curv), float(b_curv), float(modulus))
        np.testing.assert_allclose(ours, reference, rtol=1e-9)


def test_point_contact_matches_boresi_example_to_its_charts_reading():
    """Boresi's solution reads ``b = C_b (PΔ)^⅓`` and ``σ_max = C_σ b/Δ`` off charts at
    B/A = 1.50 (C_b = 0.77, C_σ = 0.724: σ_max = 1597 MPa); the exact coefficients lie within
    that reading (C_b 0.798, C_σ 0.718: 1642 MPa)."""
    young, poisson, force = 200e9, 0.29, 4.5e3
    modulus = hertz.contact_modulus(young, poisson, young, poisson)
    a_curv, b_curv = hertz.relative_curvatures([0.060, 0.130], [0.080, 0.200], math.pi / 3)
    np.testing.assert_allclose(b_curv / a_curv, 1.50, atol=0.005)
    _, b, peak = hertz.point_contact(force, a_curv, b_curv, modulus)
    delta = 2 * (1 - poisson**2) / (young * (a_curv + b_curv))
    np.testing.assert_allclose(b / (force * delta) ** (1 / 3), 0.77, rtol=0.04)
    np.testing.assert_allclose(peak * delta / b, 0.724, rtol=0.01)
    np.testing.assert_allclose(peak / 1e6, 1597.0, rtol=0.03)


def test_gradients_match_central_differences_and_vanish_without_load():
    modulus = hertz.contact_modulus(210e9, 0.3, 110e9, 0.34)

    def patch(x):
        force, bore = x
        a_curv, b_curv = hertz.relative_curvatures(
            jnp.array([0.01, 0.01]), jnp.stack([bore, jnp.inf])
        )
        out = hertz.point_contact(force, a_curv, b_curv, modulus)
        strip = hertz.line_contact(force, 0.02, 0.01, bore, modulus)
        return jnp.array([out.a, out.b, out.peak_pressure / 1e9, strip[0], strip[1] / 1e9])

    x = jnp.array([300.0, -0.0102])
    jac = np.asarray(jax.jacfwd(patch)(x))
    for j, step in enumerate((1e-3, 1e-9)):
        dx = np.zeros(2)
        dx[j] = step
        fd = (np.asarray(patch(x + dx)) - np.asarray(patch(x - dx))) / (2 * step)
        np.testing.assert_allclose(jac[:, j], fd, rtol=1e-5)
    none = jax.jacfwd(patch)(jnp.array([0.0, -0.0102]))
    assert np.all(np.isfinite(np.asarray(none)))
