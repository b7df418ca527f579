"""A cantilever on a base moving harmonically: steady state of the FFR model against the full FE
model.

The base (the floating frame, held by constraints) moves as z_b = Z sin Ωt; the beam has three
fixed-interface bending modes and Rayleigh damping D = α M_ff + β K_ff. References, computed
here from the full FE matrices with numpy/scipy:

- the truncated modal superposition: scipy.linalg.eigh of (K_ii, M_ii), the same three modes,
  q_k = Γ_k Ω² Z / (ω_k² − Ω² + iΩ(α + βω_k²)) with Γ = φᵀ M r (r: rigid translation in z);
- the full harmonic solution (K − Ω²M + iΩC) U = M r Ω² Z with C = αM + βK on all DOFs, which
  the three-mode model approximates (modal truncation).
"""

import jax.numpy as jnp
import numpy as np
import scipy.linalg

import diffmbs  # noqa: F401
from diffmbs import simulate
from diffmbs.flex import (
    BeamModel,
    FixedInterfaceModes,
    FreeModalBody,
    Material,
    RayleighDamping,
    RectangularSection,
    beam_line,
    modal_data,
)

N_EL, LENGTH = 6, 0.5
NODES, ELEMENTS = beam_line([0.0, 0.0, 0.0], [LENGTH, 0.0, 0.0], N_EL)
BEAM = BeamModel(NODES, ELEMENTS, RectangularSection(0.03, 0.01), Material.steel())
PLANAR = [6 * p + c for p in range(1, N_EL + 1) for c in (2, 4)]  # uz, ry off the root
HELD = tuple(d for d in range(6 * (N_EL + 1)) if d not in PLANAR)
Z, OMEGA = 1e-3, 150.0  # base amplitude (m), excitation (rad/s); ω₁ ≈ 210 rad/s


class BaseDriven(FreeModalBody):
    """The floating frame follows R = (0, 0, Z sin Ωt) without rotating."""

    def constraints(self, t, q):
        base = jnp.array([0.0, 0.0, Z * jnp.sin(OMEGA * t)])
        return jnp.concatenate([q[:3] - base, q[4:7]])


def rayleigh(omega1, omega2, zeta):
    beta = 2 * zeta / (omega1 + omega2)
    return omega1 * omega2 * beta, beta  # α = 2ζω₁ω₂/(ω₁+ω₂)


def harmonic_fit(t, y):
    """Complex amplitude c with y ≈ Im(c e^{iΩt})."""
    basis = np.column_stack([np.sin(OMEGA * t), np.cos(OMEGA * t)])
    a, b = np.linalg.lstsq(basis, y, rcond=None)[0]
    return a + 1j * b


def test_base_excited_cantilever_reaches_the_modal_steady_state():
    fe = BEAM.assemble()
    k, m = np.asarray(fe.stiffness), np.asarray(fe.mass)
    sub = np.ix_(PLANAR, PLANAR)
    lam, phi = scipy.linalg.eigh(k[sub], m[sub])
    alpha, beta = rayleigh(np.sqrt(lam[0]), np.sqrt(lam[1]), 0.2)
    r = np.zeros(fe.n_dof)
    r[2::6] = 1.0  # rigid translation in z
    force = (m @ r)[PLANAR] * OMEGA**2 * Z  # −(M r) z̈_b, complex amplitude
    tip = PLANAR.index(6 * N_EL + 2)

    # Truncated modal superposition (three modes) and the full harmonic solution.
    gamma = phi[:, :3].T @ force
    q_ref = gamma / (lam[:3] - OMEGA**2 + 1j * OMEGA * (alpha + beta * lam[:3]))
    modal = phi[tip, :3] @ q_ref
    c = alpha * m[sub] + beta * k[sub]
    full = np.linalg.solve(k[sub] - OMEGA**2 * m[sub] + 1j * OMEGA * c, force)[tip]

    data = modal_data(fe, FixedInterfaceModes(HELD, n_modes=3)(fe))
    np.testing.assert_allclose(np.asarray(data.frequencies_hz()) * 2 * np.pi, np.sqrt(lam[:3]),
                               rtol=1e-10)  # fmt: skip
    body = BaseDriven(data.invariants, data.modal_stiffness, RayleighDamping(alpha, beta))
    q0, v0 = body.initial_state(velocity=(0.0, 0.0, Z * OMEGA))
    ts = jnp.linspace(0.40, 0.50, 201)  # transients decay as exp(−ζω₁t) = exp(−42 t)
    sol = simulate(body, q0, v0, ts, t0=0.0, rtol=1e-9, atol=1e-12)
    u_tip = np.asarray(sol.q[:, 7:]) @ np.asarray(data.translations[N_EL, 2])
    got = harmonic_fit(np.asarray(ts), u_tip)
    assert abs(got - modal) < 1e-7 * abs(modal)  # measured 6e-9
    assert abs(got - full) < 3e-4 * abs(full)  # truncation to three modes: measured 9e-5
    # The base follows the prescribed motion.
    np.testing.assert_allclose(np.asarray(sol.q[:, 2]), Z * np.sin(OMEGA * np.asarray(ts)),
                               atol=1e-10)  # fmt: skip
    assert abs(modal) > 0.5 * Z  # a resonant amplification, not a rigid ride
    assert float(sol.constraint_drift) < 1e-10
