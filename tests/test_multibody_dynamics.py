"""Rigid-body dynamics of the multibody layer against closed forms and conservation laws.

References: the large-amplitude period of a physical pendulum, 4 √(ℓ/g) K(sin²(θ₀/2)) with
ℓ = I_O/(m d) (scipy.special.ellipk); its energy; its hinge reaction from Newton's law along and
across the rod (θ̇² from energy conservation); the steady precession rate of a heavy symmetric top
from the Lagrangian (root of (I₃ − I₁′) cos θ φ̇² + I₃ ψ̇ φ̇ − m g l = 0).
"""

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from multibody_models import PENDULUM, G, pendulum, quat_about

import diffmbs.multibody as mb
from diffmbs.integrate import simulate
from diffmbs.rotations import quat_to_matrix

TIGHT = {"rtol": 1e-11, "atol": 1e-13}
THETA0 = np.pi / 2
M, D = PENDULUM["mass"], PENDULUM["distance"]
I_O = PENDULUM["inertia"][1] + M * D**2  # about the hinge axis (body y)
PERIOD = 4 * np.sqrt(I_O / (M * D) / G) * scipy.special.ellipk(np.sin(THETA0 / 2) ** 2)


@pytest.fixture(scope="module")
def pendulum_run():
    model = pendulum(THETA0)
    q0, v0 = model.initial_state()
    ts = jnp.linspace(0.0, 1.6 * PERIOD, 1601)
    return model, simulate(model, q0, v0, ts, **TIGHT)


def crossings(t, x, xd, xdd):
    """Times where x = 0, by Newton on the second-order Taylor expansion at the nearest sample."""
    roots = []
    for i in np.flatnonzero(np.sign(x[:-1]) != np.sign(x[1:])):
        j = i if abs(x[i]) < abs(x[i + 1]) else i + 1
        tau = -x[j] / xd[j]
        for _ in range(4):
            tau -= (x[j] + xd[j] * tau + 0.5 * xdd[j] * tau**2) / (xd[j] + xdd[j] * tau)
        roots.append(t[j] + tau)
    return np.array(roots)


def test_pendulum_period_matches_elliptic_integral(pendulum_run):
    _, sol = pendulum_run
    # The COM passes under the hinge (x_G = 0) at T/4, 3T/4, 5T/4; x_G, ẋ_G, ẍ_G are q, v, v̇.
    t = crossings(np.asarray(sol.ts), *(np.asarray(a[:, 0]) for a in (sol.q, sol.v, sol.vdot)))
    assert t.size == 3
    np.testing.assert_allclose(t[2] - t[0], PERIOD, rtol=1e-8)
    np.testing.assert_allclose(t[0], PERIOD / 4, rtol=1e-8)


def test_pendulum_energy_drift_and_quaternion_norm(pendulum_run):
    model, sol = pendulum_run
    energy = np.asarray(sol.sensors["energy"])
    scale = M * G * D
    assert np.max(np.abs(energy - energy[0])) / scale < 1e-8
    assert float(sol.constraint_drift) < 1e-10  # m and rad (mixed), the stated tolerance
    assert float(sol.velocity_drift) < 1e-9
    norms = np.linalg.norm(np.asarray(sol.q)[:, 3:7], axis=1)
    assert np.max(np.abs(norms - 1)) < 1e-9
    # The joint angle is −θ (x_j measured from x_i about y): it starts at −θ₀.
    np.testing.assert_allclose(sol.sensors["angle"][0, 0], -THETA0, atol=1e-12)


def test_pendulum_hinge_reaction_matches_newton_along_and_across_the_rod(pendulum_run):
    _, sol = pendulum_run
    theta = -np.asarray(sol.sensors["angle"][:, 0])
    theta_dot_sq = 2 * M * G * D * (np.cos(theta) - np.cos(THETA0)) / I_O
    tension = M * D * theta_dot_sq + M * G * np.cos(theta)  # pulls the COM towards the hinge
    # Across the rod: m d θ̈ = −m g sin θ + F_t with θ̈ = −m g d sin θ / I_O.
    across = M * G * np.sin(theta) * (1 - M * D**2 / I_O)
    reaction = np.asarray(sol.sensors["reaction"])  # on the bob, frame-j axes (x, y = −rod, z)
    scale = M * G
    np.testing.assert_allclose(-reaction[:, 1], tension, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(reaction[:, 0], across, rtol=0, atol=1e-8 * scale)
    assert np.max(np.abs(reaction[:, 2:])) < 1e-8 * scale  # no axial force, no moments
    # At the bottom: m g (1 + 2 m d² (1 − cos θ₀) / I_O).
    bottom = np.argmin(np.abs(theta))
    np.testing.assert_allclose(
        -reaction[bottom, 1],
        M * G * (1 + 2 * M * D**2 * (1 - np.cos(THETA0)) / I_O),
        rtol=1e-5,
    )


# --------------------------------------------------------------------------- heavy top

TOP = {"mass": 1.2, "height": 0.05, "transverse": 2e-3, "axial": 3e-3}  # kg, m, kg·m² (COM)
NUTATION, SPIN = 0.5, 60.0  # rad, rad/s


def steady_precession():
    """The slow root φ̇ of (I₃ − I₁′) cos θ φ̇² + I₃ ψ̇ φ̇ − m g l = 0, I₁′ = I₁ + m l²."""
    m, arm = TOP["mass"], TOP["height"]
    i1, i3 = TOP["transverse"] + m * arm**2, TOP["axial"]
    roots = np.roots([(i3 - i1) * np.cos(NUTATION), i3 * SPIN, -m * G * arm])
    return roots[np.argmin(np.abs(roots))]


def test_symmetric_top_precesses_at_the_analytic_rate():
    precession = steady_precession()
    arm = TOP["height"]
    rot = quat_about((1, 0, 0), NUTATION)
    r = np.asarray(quat_to_matrix(rot))
    axis = r[:, 2]  # the symmetry axis, (0, −sin θ, cos θ)
    omega = precession * np.array([0.0, 0.0, 1.0]) + SPIN * axis
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    b.add_body(
        mb.RigidBody(
            "top",
            mass=TOP["mass"],
            inertia=(TOP["transverse"], TOP["transverse"], TOP["axial"]),
            position=arm * axis,
            orientation=rot,
            velocity=np.cross(omega, arm * axis),
            angular_velocity=r.T @ omega,
        )
    )
    b.add_joint("pivot", mb.Spherical("ground", mb.Frame((0, 0, 0)), "top", (0.0, 0.0, -arm)))
    b.add_sensor("R", mb.BodyOrientation("top", "matrix"))
    model = b.build()
    q0, v0 = model.initial_state()
    ts = jnp.linspace(0.0, 2.0, 401)  # more than one precession period (1.86 s)
    sol = simulate(model, q0, v0, ts, **TIGHT)
    e3 = np.asarray(sol.sensors["R"])[:, :, 2]
    phi = np.unwrap(np.arctan2(e3[:, 1], e3[:, 0]))
    slope = np.polyfit(np.asarray(ts), phi, 1)[0]
    np.testing.assert_allclose(slope, precession, rtol=1e-7)
    assert np.max(np.abs(e3[:, 2] - np.cos(NUTATION))) < 1e-7  # nutation stays at θ
    assert float(sol.constraint_drift) < 1e-10
