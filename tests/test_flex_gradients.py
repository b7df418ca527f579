"""Gradients through the whole chain — sections, beam elements, eigen-decomposition, invariants,
FFR equations of motion — against central finite differences and closed forms.

References: central differences (relative step 1e-5, so truncation ≈ 1e-10 relative); the
exact scaling of every frequency with √E (E and G = E/2(1+ν) scale together); and ∂ω/∂h =
ω/h for the bending frequency of an Euler–Bernoulli beam without rotary inertia, whose
rectangular section has I/A = h²/12.
"""

import jax
import jax.numpy as jnp
import numpy as np

import diffmbs  # noqa: F401
from diffmbs.flex import (
    BeamModel,
    EulerBernoulli,
    FixedInterfaceModes,
    FreeFreeModes,
    FreeModalBody,
    Material,
    ModalDampingRatios,
    RectangularSection,
    beam_line,
    modal_data,
    node_acceleration,
)
from diffmbs.rotations import quat_to_matrix
from diffmbs.system import accelerations

N_EL = 4
NODES, ELEMENTS = beam_line([0.0, 0.0, 0.0], [0.6, 0.0, 0.0], N_EL)
ROOT = tuple(range(6))
E0, H0, ZETA0 = 210e9, 0.012, 0.03
Q = jnp.array([0.0, 0.1, 0.0, 0.9, 0.2, -0.3, 0.1, 2e-3, -1e-3, 5e-4])
V = jnp.array([0.1, 0.2, -0.1, 1.5, -2.0, 3.0, 0.5, 0.3, -0.2])


def tip_acceleration(e, h, zeta):
    """World acceleration of the free end of a clamped-frame cantilever body (three modes),
    at the state (Q, V), from the equations of motion."""
    beam = BeamModel(NODES, ELEMENTS, RectangularSection(0.02, h), Material(e, 7850.0, 0.3))
    fe = beam.assemble()
    data = modal_data(fe, FixedInterfaceModes(ROOT, n_modes=3)(fe))
    body = FreeModalBody.from_modal_data(data, ModalDampingRatios(zeta), (0.0, 0.0, -9.81))
    vdot, _ = accelerations(body, 0.0, Q, V)
    a = quat_to_matrix(Q[3:7])
    node = data.node(N_EL)
    return node_acceleration(vdot[:3], a, V[3:6], vdot[3:6], Q[7:], V[6:], vdot[6:], node)


def central_difference(f, x, rel=1e-5):
    step = rel * x
    return (f(x + step) - f(x - step)) / (2 * step)


def test_node_acceleration_gradient_matches_finite_differences():
    f = jax.jit(lambda x: tip_acceleration(x[0], x[1], x[2]))
    x0 = jnp.array([E0, H0, ZETA0])
    jac = np.asarray(jax.jit(jax.jacrev(f))(x0))  # (3 components, 3 parameters)
    assert np.all(np.isfinite(jac))
    for j, name in enumerate(("E", "h", "zeta")):
        step = jnp.zeros(3).at[j].set(1e-5 * x0[j])
        fd = np.asarray((f(x0 + step) - f(x0 - step)) / (2 * step[j]))
        assert np.abs(fd).max() > 0, name  # the parameter matters
        np.testing.assert_allclose(jac[:, j], fd, rtol=2e-6, atol=1e-7 * np.abs(fd).max(),
                                   err_msg=name)  # fmt: skip


def frequencies(e, h, n_modes=4):
    beam = BeamModel(NODES, ELEMENTS, RectangularSection(0.02, h), Material(e, 7850.0, 0.3),
                     theory=EulerBernoulli(rotary_inertia=False))  # fmt: skip
    fe = beam.assemble()
    return FreeFreeModes(n_modes=n_modes)(fe).frequencies_hz()


def test_frequency_gradients_through_the_deflated_eigenproblem():
    f = jax.jit(frequencies)
    f0 = np.asarray(f(E0, H0))
    d_e = np.asarray(jax.jit(jax.jacfwd(frequencies, argnums=0))(E0, H0))
    np.testing.assert_allclose(d_e, f0 / (2 * E0), rtol=1e-9)
    d_h = np.asarray(jax.jit(jax.jacrev(frequencies, argnums=1))(E0, H0))
    # Bending in the x–z plane (height h): ω ∝ h exactly. Identify those modes by ∂ω/∂h.
    z_modes = np.isclose(d_h, f0 / H0, rtol=1e-8)
    assert z_modes.sum() >= 2
    fd = np.asarray(central_difference(lambda h: f(E0, h), H0))
    np.testing.assert_allclose(d_h, fd, rtol=1e-7, atol=1e-8 * np.abs(fd).max())
