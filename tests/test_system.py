"""The constrained mechanical system: derived kinematics and the KKT solve, against hand algebra.

References: the constraint Jacobians, velocity and acceleration right-hand sides of small systems
written out by hand; the pendulum tension from Newton's law along the string; the known structure
of redundant constraints (same motion, reaction shared); central finite differences.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from systems import G, Pendulum

import diffmbs  # noqa: F401
from diffmbs.system import (
    AugmentedLagrangianKKT,
    LeastSquaresKKT,
    MechanicalSystem,
    NullSpaceKKT,
    acceleration_rhs,
    accelerations,
    constraint_jacobian,
    constraint_terms,
    mass_is_definite,
    n_constraints,
    project_state,
    velocity_constraints,
)


class Driven(MechanicalSystem):
    """Mass whose x is prescribed, x = A sin(ωt), written A sin(ωt) − x = 0; y free."""

    m: float = 2.0
    amp: float = 0.1
    omega: float = 30.0

    def mass(self, q):
        return self.m * jnp.eye(2)

    def forces(self, t, q, v):
        return jnp.array([0.0, -self.m * G])

    def constraints(self, t, q):
        return jnp.array([self.amp * jnp.sin(self.omega * t) - q[0]])


class Wheel(MechanicalSystem):
    """Unit vector q = (cos θ, sin θ) as coordinates, angular rate v = (θ̇,) as velocity:
    a non-identity kinematic map q̇ = θ̇ (−q₁, q₀). Constraint: cos θ = c(t) = 0.5 + 0.1 t²."""

    inertia: float = 0.3

    def mass(self, q):
        return self.inertia * jnp.eye(1)

    def forces(self, t, q, v):
        return jnp.zeros(1)

    def qdot(self, q, v):
        return v[0] * jnp.array([-q[1], q[0]])

    def constraints(self, t, q):
        return jnp.array([q[0] - (0.5 + 0.1 * t**2)])


class Free(MechanicalSystem):
    """Two coordinates with a given (possibly singular) mass matrix, optional q₁ = 0."""

    m: jax.Array
    fix_second: bool = eqx.field(static=True, default=False)

    def mass(self, q):
        return jnp.diag(self.m)

    def forces(self, t, q, v):
        return jnp.array([1.0, 2.0])

    def constraints(self, t, q):
        return q[1:] if self.fix_second else jnp.zeros((0,))


def pendulum_state(theta, theta_dot, length):
    q = length * jnp.array([jnp.sin(theta), -jnp.cos(theta)])
    v = length * theta_dot * jnp.array([jnp.cos(theta), jnp.sin(theta)])
    return q, v


# --------------------------------------------------------------------------- interface


def test_interface_defaults_and_abstract_methods():
    class NoForces(MechanicalSystem):
        def mass(self, q):
            return jnp.eye(1)

    with pytest.raises(TypeError):
        NoForces()

    sys_ = Free(jnp.array([1.0, 2.0]))
    q, v = jnp.array([0.3, 0.4]), jnp.array([1.0, -1.0])
    assert sys_.constraints(0.0, q).shape == (0,)
    assert n_constraints(sys_, 0.0, q) == 0
    np.testing.assert_array_equal(sys_.qdot(q, v), v)
    assert sys_.sensors(0.0, q, v, v) == {}
    vdot, lam = accelerations(sys_, 0.0, q, v)
    np.testing.assert_allclose(vdot, [1.0, 1.0], rtol=1e-15)
    assert lam.shape == (0,)


# --------------------------------------------------------------------------- derived kinematics


def test_pendulum_jacobian_and_rhs_by_hand():
    pend = Pendulum()
    q, v = jnp.array([0.5, -1.1]), jnp.array([0.8, 0.2])
    np.testing.assert_allclose(constraint_jacobian(pend, 0.0, q, v), [[1.0, -2.2]], rtol=1e-15)
    phi, phidot, gamma = constraint_terms(pend, 0.0, q, v)
    np.testing.assert_allclose(phi, [0.25 + 1.21 - 1.69], rtol=1e-14)
    np.testing.assert_allclose(phidot, [2 * (0.5 * 0.8 - 1.1 * 0.2)], rtol=1e-14)
    # Φ̈ = 2 q·v̇ + 2 |v|²  →  γ = −2 |v|².
    np.testing.assert_allclose(gamma, [-2 * (0.64 + 0.04)], rtol=1e-14)


def test_prescribed_motion_rhs_has_explicit_time_terms():
    drv = Driven()
    t, q, v = 0.21, jnp.array([0.05, 0.3]), jnp.array([1.5, -0.2])
    a, w = drv.amp, drv.omega
    np.testing.assert_allclose(constraint_jacobian(drv, t, q, v), [[-1.0, 0.0]])
    np.testing.assert_allclose(
        velocity_constraints(drv, t, q, v), [a * w * np.cos(w * t) - 1.5], rtol=1e-14
    )
    # Φ̈ = −A ω² sin ωt − ẍ = Φ_v v̇ − γ  →  γ = A ω² sin ωt.
    np.testing.assert_allclose(
        acceleration_rhs(drv, t, q, v), [a * w**2 * np.sin(w * t)], rtol=1e-14
    )


def test_nonidentity_kinematic_map_enters_jacobian_and_rhs():
    wheel = Wheel()
    theta, omega, t = 0.9, 2.5, 0.4
    q, v = jnp.array([np.cos(theta), np.sin(theta)]), jnp.array([omega])
    # Φ = cos θ − c(t):  Φ_v = −sin θ,  Φ̇ = −sin θ ω − 0.2 t,
    # Φ̈ = −sin θ ω̇ − cos θ ω² − 0.2  →  γ = cos θ ω² + 0.2.
    np.testing.assert_allclose(constraint_jacobian(wheel, t, q, v), [[-np.sin(theta)]])
    np.testing.assert_allclose(
        velocity_constraints(wheel, t, q, v), [-np.sin(theta) * omega - 0.2 * t], rtol=1e-14
    )
    np.testing.assert_allclose(
        acceleration_rhs(wheel, t, q, v), [np.cos(theta) * omega**2 + 0.2], rtol=1e-14
    )


# --------------------------------------------------------------------------- equations of motion


@pytest.mark.parametrize(
    "kkt", [LeastSquaresKKT(), AugmentedLagrangianKKT(), NullSpaceKKT()], ids=["lsq", "al", "ns"]
)
def test_pendulum_accelerations_match_newton(kkt):
    pend = Pendulum()
    theta, theta_dot = 0.7, -1.9
    q, v = pendulum_state(theta, theta_dot, pend.length)
    vdot, lam = accelerations(pend, 0.0, q, v, kkt_solver=kkt)
    # Along the rod: T − m g cos θ = m L θ̇²; across: θ̈ = −(g/L) sin θ.
    tension = pend.m * (G * np.cos(theta) + pend.length * theta_dot**2)
    theta_ddot = -G / pend.length * np.sin(theta)
    ref = pend.length * np.array(
        [
            theta_ddot * np.cos(theta) - theta_dot**2 * np.sin(theta),
            theta_ddot * np.sin(theta) + theta_dot**2 * np.cos(theta),
        ]
    )
    np.testing.assert_allclose(vdot, ref, rtol=1e-10, atol=1e-12)
    # Constraint force −Φ_vᵀ λ = −2 λ q has magnitude 2 λ L = T.
    np.testing.assert_allclose(2 * lam[0] * pend.length, tension, rtol=1e-10)


def test_baumgarte_terms_enter_only_off_the_manifold():
    pend = Pendulum()
    q, v = pendulum_state(0.3, 1.0, pend.length)
    a0, _ = accelerations(pend, 0.0, q, v, baumgarte=(0.0, 0.0))
    a1, _ = accelerations(pend, 0.0, q, v, baumgarte=(50.0, 50.0))
    np.testing.assert_allclose(a1, a0, rtol=1e-10, atol=1e-12)
    # Off the manifold: Φ̈ = −2αΦ̇ − β²Φ exactly.
    q_off, v_off = 1.01 * q, v + 0.02 * q
    alpha, beta = 7.0, 11.0
    a, _ = accelerations(pend, 0.0, q_off, v_off, baumgarte=(alpha, beta))
    phi, phidot, gamma = constraint_terms(pend, 0.0, q_off, v_off)
    jac = constraint_jacobian(pend, 0.0, q_off, v_off)
    np.testing.assert_allclose(jac @ a - gamma, -2 * alpha * phidot - beta**2 * phi, rtol=1e-10)


@pytest.mark.parametrize(
    "kkt", [LeastSquaresKKT(), AugmentedLagrangianKKT(), NullSpaceKKT()], ids=["lsq", "al", "ns"]
)
def test_redundant_constraints_same_motion_shared_reaction(kkt):
    single, double = Pendulum(), Pendulum(copies=2)
    q, v = pendulum_state(1.1, 0.6, single.length)
    a1, lam1 = accelerations(single, 0.0, q, v, kkt_solver=kkt)
    a2, lam2 = accelerations(double, 0.0, q, v, kkt_solver=kkt)
    assert np.all(np.isfinite(a2)) and np.all(np.isfinite(lam2))
    np.testing.assert_allclose(a2, a1, rtol=1e-9)
    np.testing.assert_allclose(lam2, [lam1[0] / 2] * 2, rtol=1e-9)

    # Derivatives through the rank-deficient solve: finite and equal to the regular ones.
    @jax.jit
    def jac(system):
        return jax.jacrev(lambda q_: accelerations(system, 0.0, q_, v, kkt_solver=kkt)[0])(q)

    j1, j2 = jac(single), jac(double)
    assert np.all(np.isfinite(j2))
    np.testing.assert_allclose(j2, j1, rtol=1e-8, atol=1e-10)


def test_accelerations_gradient_matches_finite_differences():
    """Both KKT solvers against central differences, and against each other (the SVD
    pseudo-inverse rules of lineax and the implicit Cholesky solve are independent). The
    step is 1e-4: the augmented Lagrangian's multipliers carry ~1e-11 relative round-off
    (ρ = 1e6), which a 1e-6 step would amplify to 1e-5."""
    q, v = pendulum_state(0.4, 1.2, 1.3)
    p = jnp.array([0.7, 1.3])
    grads = []
    for kkt in (LeastSquaresKKT(), AugmentedLagrangianKKT(), NullSpaceKKT()):

        @jax.jit
        def f(p, kkt=kkt):
            m, length = p
            pendulum = Pendulum(m=m, length=length)
            return accelerations(pendulum, 0.0, q * length / 1.3, v, kkt_solver=kkt)[1][0]

        grad = jax.jit(jax.grad(f))(p)
        h = 1e-4
        fd = [(f(p.at[i].add(h)) - f(p.at[i].add(-h))) / (2 * h) for i in range(2)]
        np.testing.assert_allclose(grad, fd, rtol=1e-6)
        grads.append(grad)
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-9)
    np.testing.assert_allclose(grads[2], grads[0], rtol=1e-9)


def test_singular_mass_matrix_is_an_error_unless_the_constraints_fix_it():
    q, v = jnp.zeros(2), jnp.zeros(2)
    singular = Free(jnp.array([1.0, 0.0]))
    with pytest.raises(Exception, match="mass matrix is singular"):
        accelerations(singular, 0.0, q, v)
    with pytest.raises(Exception, match="mass matrix is singular"):
        jax.jit(lambda q_: accelerations(singular, 0.0, q_, v))(q)
    with pytest.raises(Exception, match="mass matrix is singular"):
        accelerations(Free(jnp.array([1.0, -2.0])), 0.0, q, v)
    vdot, _ = accelerations(singular, 0.0, q, v, check=False)
    assert np.all(np.isnan(vdot))
    # A massless coordinate held by a constraint is fine: its acceleration is the constraint's.
    vdot, lam = accelerations(Free(jnp.array([1.0, 0.0]), fix_second=True), 0.0, q, v)
    np.testing.assert_allclose(vdot, [1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(lam, [2.0], rtol=1e-12)  # M v̇ + Φ_vᵀ λ = Q, Φ_v = [0, 1]
    assert bool(mass_is_definite(jnp.diag(jnp.array([1.0, 0.0])), jnp.array([[0.0, 1.0]])))
    assert not bool(mass_is_definite(jnp.diag(jnp.array([1.0, 0.0])), jnp.array([[1.0, 0.0]])))


def test_vmap_and_jit_over_parameters():
    q, v = pendulum_state(0.5, 0.0, 1.0)
    lengths = jnp.linspace(0.5, 2.0, 5)

    def lam(length):
        return accelerations(Pendulum(length=length), 0.0, q * length, v)[1][0]

    batched = jax.jit(jax.vmap(lam))(lengths)
    # 1e-10: the default augmented Lagrangian's multipliers carry ~1e-11 relative round-off
    # (penalty 1e6), so a differently fused evaluation differs at that level.
    np.testing.assert_allclose(batched, [lam(x) for x in lengths], rtol=1e-10)


def test_project_state_onto_position_and_velocity_constraints():
    pend = Pendulum(copies=2)  # redundant on purpose
    q, v = jnp.array([0.9, -1.0]), jnp.array([0.3, 0.7])
    qp, vp = project_state(pend, 0.0, q, v, iterations=5)
    assert abs(float(jnp.linalg.norm(qp)) - pend.length) < 1e-14
    assert abs(float(qp @ vp)) < 1e-14
    # Minimum-norm corrections: q moves radially, v loses exactly its radial part (M ∝ I).
    np.testing.assert_allclose(qp, q * pend.length / jnp.linalg.norm(q), rtol=1e-12)
    np.testing.assert_allclose(vp, v - (v @ qp) / (qp @ qp) * qp, rtol=1e-12)


def _whitened_reference(mass, jac, force, rhs):
    """NumPy M-whitened least squares (L = chol M, B = Φ L⁻ᵀ):
    v̇ = L⁻ᵀ (B⁺ c + (I − B⁺B) L⁻¹ Q), independent of the solvers under test."""
    low = np.linalg.cholesky(mass)
    b = np.linalg.solve(low, jac.T).T
    b_pinv = np.linalg.pinv(b, rcond=1e-13)
    y = b_pinv @ rhs + (np.eye(mass.shape[0]) - b_pinv @ b) @ np.linalg.solve(low, force)
    return np.linalg.solve(low.T, y)


@pytest.mark.parametrize("inertia", [1e-3, 1e-6, 1e-9, 1e-12])
def test_null_space_solve_is_exact_for_tiny_inertias(inertia):
    """A planar bar (x, y, θ) pinned 1 m from its centre: the pin rows become nearly parallel
    once scaled by the mass matrix (what defeated the augmented Lagrangian); the null-space
    solve is exact against the whitened reference and flags nothing."""
    theta, omega = 0.7, -1.3
    mass = np.diag([1.0, 1.0, inertia])
    jac = np.array([[1.0, 0.0, np.sin(theta)], [0.0, 1.0, -np.cos(theta)]])  # pin at −(cos, sin)
    force = np.array([0.3, -9.81, 0.0])
    rhs = omega**2 * np.array([np.cos(theta), np.sin(theta)])
    vdot, lam, ok = NullSpaceKKT()(*(jnp.asarray(x) for x in (mass, jac, force, rhs)))
    assert bool(ok)
    reference = _whitened_reference(mass, jac, force, rhs)
    # Round-off grows as the inertia shrinks (the whitening divides by √J): at 1e-12 kg·m²
    # the two computations differed by 1.4e-10 (relative) on an AMD EPYC with AVX-512.
    np.testing.assert_allclose(vdot, reference, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(mass @ vdot + jac.T @ np.asarray(lam), force, atol=1e-10)


def test_contradicting_constraints_are_flagged():
    """The same coordinate driven twice to different accelerations: no solution, not ok."""
    mass, jac = jnp.eye(2), jnp.array([[1.0, 0.0], [1.0, 0.0]])
    _, _, ok = NullSpaceKKT()(mass, jac, jnp.zeros(2), jnp.array([1.0, 2.0]))
    assert not bool(ok)
    _, _, ok = NullSpaceKKT()(mass, jac, jnp.zeros(2), jnp.array([1.0, 1.0]))
    assert bool(ok)
