"""Floating frame of reference: invariants, equations of motion and simulations of one body.

References, none from the code under test:
- mass, centre of mass and inertia of an L-shaped frame of two prismatic rods, in closed form
  (m L²/12 plus the section's rotary inertia ρ I L, parallel-axis theorem);
- the quadratic velocity forces re-derived here by automatic differentiation of the kinetic
  energy ½ vᵀ M(q) v (Boltzmann–Hamel equations with body-frame angular velocity);
- node velocity and acceleration as time derivatives (``jax.jvp``) of the node position;
- virtual power of a node force and of gravity;
- the natural frequencies of the full FE model (scipy.linalg.eigh);
- conservation of energy, linear and angular momentum of a free tumbling body;
- a rigid body integrated with SciPy (Euler's equations about the centre of mass).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import diffmbs  # noqa: F401
from diffmbs import simulate
from diffmbs.flex import (
    BeamModel,
    FreeFreeModes,
    FreeModalBody,
    Material,
    RectangularSection,
    ffr_gravity_forces,
    ffr_mass_matrix,
    ffr_quadratic_velocity_forces,
    modal_data,
    node_acceleration,
    node_angular_velocity,
    node_generalized_force,
    node_position,
    node_rotation,
    node_velocity,
)

RHO, WIDTH, HEIGHT, L1, L2 = 7850.0, 0.03, 0.02, 0.5, 0.3
SECTION = RectangularSection(WIDTH, HEIGHT)
NODES = np.array([[0, 0, 0], [L1 / 2, 0, 0], [L1, 0, 0], [L1, L2 / 2, 0], [L1, L2, 0]], float)
BEAM = BeamModel(NODES, [(0, 1), (1, 2), (2, 3), (3, 4)], SECTION, Material(210e9, RHO, 0.3))


@functools.cache  # built on first use, not at collection (every test worker imports this file)
def fe():
    return BEAM.assemble()


@functools.cache
def free_modes(n):
    """The frame's modal data with ``n`` free–free elastic modes."""
    return modal_data(fe(), FreeFreeModes(n_modes=n)(fe()))


TIP = 4


def quat_matrix(p):
    w, x, y, z = np.asarray(p) / np.linalg.norm(p)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def quat_rate(p, w):
    p0, v = p[0], p[1:]
    return 0.5 * np.concatenate([[-v @ w], p0 * w + np.cross(v, w)])


def frame_mass_properties():
    """Mass, centre of mass and inertia about the centre of mass of the L frame (rods)."""
    area, iy, iz = WIDTH * HEIGHT, WIDTH * HEIGHT**3 / 12, HEIGHT * WIDTH**3 / 12
    rods = []
    for length, com, axis in ((L1, [L1 / 2, 0, 0], 0), (L2, [L1, L2 / 2, 0], 1)):
        m = RHO * area * length
        inertia = np.zeros((3, 3))
        inertia[axis, axis] = RHO * (iy + iz) * length  # torsion
        # about the other horizontal axis the section height (along Z) contributes Iy; about
        # Z the section width contributes Iz.
        other = 1 - axis
        inertia[other, other] = m * length**2 / 12 + RHO * iy * length
        inertia[2, 2] = m * length**2 / 12 + RHO * iz * length
        rods.append((m, np.array(com), inertia))
    mass = sum(m for m, _, _ in rods)
    com = sum(m * c for m, c, _ in rods) / mass
    inertia = sum(j + m * ((c - com) @ (c - com) * np.eye(3) - np.outer(c - com, c - com))
                  for m, c, j in rods)  # fmt: skip
    return mass, com, inertia


def test_invariants_match_rod_formulas_and_mean_axes():
    mass, com, inertia_g = frame_mass_properties()
    inv = free_modes(3).invariants
    assert float(inv.mass) == pytest.approx(mass, rel=1e-13)
    np.testing.assert_allclose(np.asarray(inv.first_moment), mass * com, rtol=1e-13, atol=1e-15)
    inertia_o = inertia_g + mass * (com @ com * np.eye(3) - np.outer(com, com))
    np.testing.assert_allclose(np.asarray(inv.inertia), inertia_o, rtol=1e-12, atol=1e-15)
    scale = float(inv.mass) * L1
    assert np.max(np.abs(np.asarray(inv.psi_integral))) < 1e-12 * scale
    assert np.max(np.abs(np.asarray(inv.rotation_coupling))) < 1e-12 * scale * L1
    j2 = np.asarray(inv.inertia_quadratic)
    np.testing.assert_allclose(j2, np.transpose(j2, (1, 0, 3, 2)), atol=1e-14)


def random_state(key, m):
    k = jax.random.split(jax.random.PRNGKey(key), 6)
    p = jax.random.normal(k[0], (4,))
    q_f = 1e-2 * jax.random.normal(k[1], (m,))
    return (
        jnp.concatenate([jax.random.normal(k[2], (3,)), p / jnp.linalg.norm(p), q_f]),
        jnp.concatenate([jax.random.normal(k[3], (6,)), 50 * jax.random.normal(k[4], (m,))]),
    )


def test_quadratic_velocity_forces_match_autodiff_of_the_kinetic_energy():
    body = FreeModalBody.from_modal_data(free_modes(3))
    inv = free_modes(3).invariants
    q, v = random_state(0, 3)

    def mass(q_):
        return ffr_mass_matrix(inv, q_[7:], quat_matrix_jnp(q_[3:7]))

    def kinetic(q_, v_):
        return 0.5 * v_ @ mass(q_) @ v_

    @jax.jit
    def both(q, v):
        def rotated(dpi):  # body-frame rotation of the frame: p ⊗ (1, δπ/2)
            w, x, d = q[3], q[4:7], dpi / 2
            prod = jnp.concatenate([jnp.array([w - x @ d]), w * d + x + jnp.cross(x, d)])
            return q.at[3:7].set(prod)

        mdot_v = jax.jvp(lambda q_: mass(q_) @ v, (q,), (body.qdot(q, v),))[1]
        dt_dpi = jax.grad(lambda d: kinetic(rotated(d), v))(jnp.zeros(3))
        dt_dqf = jax.grad(lambda qf: kinetic(q.at[7:].set(qf), v))(q[7:])
        h = (mass(q) @ v)[3:6]
        rot = -jnp.cross(v[3:6], h) + dt_dpi
        expected = -mdot_v + jnp.concatenate([jnp.zeros(3), rot, dt_dqf])
        got = ffr_quadratic_velocity_forces(inv, q[7:], v[3:6], v[6:], quat_matrix_jnp(q[3:7]))
        return got, expected

    got, expected = both(q, v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-10)


def quat_matrix_jnp(p):
    w, x, y, z = p / jnp.linalg.norm(p)
    return jnp.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def test_node_kinematics_are_time_derivatives_and_forces_do_virtual_work():
    body = FreeModalBody.from_modal_data(free_modes(3), gravity=(0.0, 0.0, -9.81))
    node = free_modes(3).node(TIP)
    q, v = random_state(1, 3)
    vdot = jax.random.normal(jax.random.PRNGKey(5), v.shape) * jnp.concatenate(
        [jnp.ones(6), 1e3 * jnp.ones(3)]
    )
    qd = body.qdot(q, v)

    def pos(q_):
        return node_position(q_[:3], quat_matrix_jnp(q_[3:7]), q_[7:], node)

    def vel(q_, v_):
        a = quat_matrix_jnp(q_[3:7])
        return node_velocity(v_[:3], a, v_[3:6], q_[7:], v_[6:], node)

    a = quat_matrix_jnp(q[3:7])
    np.testing.assert_allclose(jax.jvp(pos, (q,), (qd,))[1], vel(q, v), rtol=1e-12, atol=1e-12)
    acc = node_acceleration(vdot[:3], a, v[3:6], vdot[3:6], q[7:], v[6:], vdot[6:], node)
    expected = jax.jvp(vel, (q, v), (qd, vdot))[1]
    np.testing.assert_allclose(acc, expected, rtol=1e-10, atol=1e-10)
    # The node frame turns at the node's angular velocity: Ȧ_P A_Pᵀ = [ω_P]×, to first order
    # in the small elastic rotation θ = Ψθ q_f (here |θ| ≈ 1e-5 rad).
    small = q.at[7:].multiply(1e-3)
    rot = lambda q_: node_rotation(quat_matrix_jnp(q_[3:7]), q_[7:], node)
    spin = jax.jvp(rot, (small,), (body.qdot(small, v),))[1] @ rot(small).T
    omega = node_angular_velocity(a, v[3:6], v[6:], node)
    spin = jnp.array([spin[2, 1], spin[0, 2], spin[1, 0]])
    np.testing.assert_allclose(spin, omega, atol=1e-4 * float(jnp.linalg.norm(omega)))
    assert float(jnp.linalg.norm(node.rotation @ small[7:])) < 1e-4
    # Virtual power: Q·v equals f·v_P + τ·ω_P, and the weight's power is m g · d(COM)/dt.
    force, moment = jnp.array([3.0, -1.0, 2.0]), jnp.array([0.5, 0.2, -0.4])
    gen = node_generalized_force(a, q[7:], node, force, moment)
    power = force @ vel(q, v) + moment @ omega
    assert float(gen @ v) == pytest.approx(float(power), rel=1e-12)
    inv = free_modes(3).invariants
    com = lambda q_: q_[:3] * inv.mass + quat_matrix_jnp(q_[3:7]) @ inv.first_moment_at(q_[7:])
    weight = ffr_gravity_forces(inv, q[7:], a, body.gravity)
    assert float(weight @ v) == pytest.approx(
        float(body.gravity @ jax.jvp(com, (q,), (qd,))[1]), rel=1e-12
    )


TS = jnp.linspace(0.0, 0.04, 401)


def test_free_vibration_frequency_equals_the_fe_eigenvalue():
    lam = scipy.linalg.eigh(np.asarray(fe().stiffness), np.asarray(fe().mass), eigvals_only=True)
    omega = np.sqrt(lam[6])
    body = FreeModalBody.from_modal_data(free_modes(3))
    amp = 1e-6
    q0, v0 = body.initial_state(qdot_f=(amp, 0.0, 0.0))
    sol = simulate(body, q0, v0, TS, rtol=1e-10, atol=1e-14)
    t = np.asarray(TS)
    expected = amp / omega * np.sin(omega * t)  # ≈ 8 periods
    # measured 5e-7 of the amplitude after 8 periods: a frequency error of 1e-8
    np.testing.assert_allclose(np.asarray(sol.q[:, 7]), expected, atol=2e-6 * amp / omega)
    assert np.max(np.abs(np.asarray(sol.q[:, 8:]))) < 1e-9 * amp / omega


def test_free_tumbling_body_conserves_energy_and_momentum():
    body = FreeModalBody.from_modal_data(free_modes(3))
    inv = free_modes(3).invariants
    q0, v0 = body.initial_state(
        position=(0.1, -0.2, 0.3),
        quaternion=(0.9, 0.1, -0.3, 0.2),
        velocity=(0.5, -0.1, 0.2),
        omega_bar=(3.0, -5.0, 8.0),
        qdot_f=(1.0, -2.0, 1.5),
    )
    sol = simulate(body, q0, v0, TS, rtol=1e-10, atol=1e-12)
    k = np.asarray(body.stiffness)

    def invariants(q, v):
        a, q_f, w, qd = quat_matrix(q[3:7]), q[7:], v[3:6], v[6:]
        s_bar = np.asarray(inv.first_moment) + np.asarray(inv.psi_integral) @ q_f
        p = float(inv.mass) * v[:3] + a @ (np.cross(w, s_bar) + np.asarray(inv.psi_integral) @ qd)
        h = (
            np.cross(s_bar, a.T @ v[:3])
            + np.asarray(inv.inertia_at(jnp.asarray(q_f))) @ w
            + np.asarray(inv.coupling_at(jnp.asarray(q_f))) @ qd
        )
        mass = np.asarray(ffr_mass_matrix(inv, jnp.asarray(q_f), jnp.asarray(a)))
        energy = 0.5 * v @ mass @ v + 0.5 * q_f @ k @ q_f
        return energy, p, np.cross(q[:3], p) + a @ h

    rows = [invariants(q, v) for q, v in zip(np.asarray(sol.q), np.asarray(sol.v), strict=True)]
    e, p, h = (np.array([r[i] for r in rows]) for i in range(3))
    assert np.ptp(e) < 1e-8 * e[0]  # measured 6e-10 (integration error at rtol 1e-10)
    assert np.max(np.ptp(p, axis=0)) < 1e-11 * np.linalg.norm(p[0])  # measured 7e-15
    assert np.max(np.ptp(h, axis=0)) < 1e-11 * np.linalg.norm(h[0])  # measured 3e-13
    # The elastic coordinates did move and exchange energy with the rotation.
    assert np.max(np.abs(np.asarray(sol.q[:, 7:]))) > 1e-4


def test_zero_modes_is_a_rigid_body():
    mass, com, inertia_g = frame_mass_properties()
    g = np.array([0.0, 0.0, -9.81])
    body = FreeModalBody.from_modal_data(free_modes(0), gravity=g)
    assert body.n_modes == 0
    p0 = np.array([0.9, 0.1, -0.3, 0.2]) / np.linalg.norm([0.9, 0.1, -0.3, 0.2])
    r0, rdot0, w0 = np.array([0.1, 0.0, 1.0]), np.array([0.3, -0.2, 2.0]), np.array([2, -3, 5.0])
    ts = np.linspace(0.0, 1.0, 101)
    q0, v0 = body.initial_state(r0, p0, velocity=rdot0, omega_bar=w0)
    sol = simulate(body, q0, v0, jnp.asarray(ts), rtol=1e-11, atol=1e-12)

    def rhs(t, y):  # centre of mass, its velocity, quaternion, body angular velocity
        w = y[10:]
        wdot = np.linalg.solve(inertia_g, -np.cross(w, inertia_g @ w))
        return np.concatenate([y[3:6], g, quat_rate(y[6:10], w), wdot])

    a0 = quat_matrix(p0)
    y0 = np.concatenate([r0 + a0 @ com, rdot0 + a0 @ np.cross(w0, com), p0, w0])
    ref = scipy.integrate.solve_ivp(rhs, (0, 1), y0, t_eval=ts, rtol=1e-12, atol=1e-13,
                                    method="DOP853").y.T  # fmt: skip
    q = np.asarray(sol.q)
    for k in range(len(ts)):
        a, a_ref = quat_matrix(q[k, 3:7]), quat_matrix(ref[k, 6:10])
        np.testing.assert_allclose(a, a_ref, atol=1e-9)  # measured 5e-12
        np.testing.assert_allclose(q[k, :3] + a @ com, ref[k, :3], atol=1e-9)
        tip = q[k, :3] + a @ NODES[TIP]
        np.testing.assert_allclose(tip, ref[k, :3] + a_ref @ (NODES[TIP] - com), atol=1e-9)
