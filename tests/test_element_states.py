"""Force elements with internal states, integrated with the bodies: a block in a guide with a
gap (mb.TranslationalClearance) whose four corners carry bristle friction
(diffmbs.friction.BristleFriction, 3 states per corner and wall). References: the static
balance on a slope and regularised Coulomb's closed-form creep; a block pushed by a ramp force
against Coulomb's closed-form motion; joint coordinates, lockstep batches and every adjoint
against the full model, each other and finite differences."""

import math

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs
import diffmbs.multibody as mb
from diffmbs.friction import BristleFriction, CoulombFriction

diffmbs.configure()

MASS, HALF_LENGTH, HALF_HEIGHT, GAP, G = 1.0, 0.05, 0.02, 1e-3, 9.81  # kg, m, m, m, m/s²
GUIDE_STIFFNESS = 1e6  # N/m, linear contact per corner; its damping χ = 50 s/m (restitution
# 0.6 at 1 cm/s): at χ ~ 1e3 s/m the corners sit where 1 + χ δ̇ reaches zero, on the law's kink,
# and a gradient is whichever side each step's rounding picked
RAMP = 20.0  # N/s, the push of the ramp tests
K_STICK = 1e6  # N/m


def _bristle(mu_static=0.5, mu_dynamic=0.5):
    return BristleFriction(mu_static, mu_dynamic, k_stick=K_STICK,
                           c_stick=2 * math.sqrt(K_STICK * MASS), v_stick=1e-3)  # fmt: skip


def _block(friction, gravity=(0.0, -G, 0.0), push=False):
    """A block of 2·HALF_LENGTH × 2·HALF_HEIGHT resting on the lower wall of a guide (normal y)
    with the gap GAP above it; ``push``: a force RAMP·t along x at its centre."""
    b = mb.ModelBuilder(gravity=gravity)
    sag = MASS * -gravity[1] / (2 * GUIDE_STIFFNESS)
    b.add_body(mb.RigidBody("block", mass=MASS, inertia=(1e-3, 1e-3, 1e-3),
                            position=(0.0, -GAP - sag, 0.0)))  # fmt: skip
    corners = [(sx * HALF_LENGTH, sy * HALF_HEIGHT, 0.0) for sx in (-1, 1) for sy in (-1, 1)]
    b.add_force("guide", mb.TranslationalClearance(
        "ground", (0, 0, 0), (0, 1, 0), HALF_HEIGHT + GAP, "block", corners,
        stiffness=GUIDE_STIFFNESS, damping=50.0, exponent=1.0, smoothing=1e-9,
        friction=friction))  # fmt: skip
    if push:
        b.add_force("push", mb.AppliedForce(
            "block", (0, 0, 0), lambda t, k: jnp.stack([RAMP * t, 0.0 * t, 0.0 * t])))  # fmt: skip
    return b.build()


def _slope(alpha):
    return (G * math.sin(alpha), -G * math.cos(alpha), 0.0)


TOL = dict(rtol=1e-8, atol=1e-10)


def test_bristle_friction_in_a_guide_holds_a_block_on_a_slope_where_coulomb_creeps():
    """tan α = 0.4 below μ_s = 0.5: the bristles hold the block (no creep once settled) and
    together carry its weight along the slope, m g sin α; regularised Coulomb (no state) creeps
    at its closed-form speed v_ε r/√(1 − r²), r = tan α / μ. The corners against the open upper
    wall keep relaxed bristles."""
    alpha = math.atan(0.4)
    model = _block(_bristle(), gravity=_slope(alpha))
    assert model.n_internal == 4 * 2 * 3 and model.internal_slices() == {"guide": slice(0, 24)}
    q0, v0 = model.initial_state()
    ts = jnp.linspace(0.0, 1.0, 11)
    sol = diffmbs.simulate(model, q0, v0, ts, **TOL)
    x = np.asarray(sol.q[:, 0])
    assert abs(x[-1] - x[1]) < 1e-8  # 0.9 s at rest (Coulomb below moves 1.2e-4 m)
    z = np.asarray(sol.internal[-1]).reshape(4, 2, 3)  # corner, wall (−, +), xyz
    np.testing.assert_allclose(np.sum(z[:, 0, 0]), MASS * G * math.sin(alpha), rtol=1e-6)
    assert np.max(np.abs(z[:, 1])) < 1e-8

    creeping = _block(CoulombFriction(0.5, v_epsilon=1e-4), gravity=_slope(alpha))
    assert creeping.n_internal == 0
    v = np.asarray(diffmbs.simulate(creeping, q0, v0, ts, **TOL).v[-1, 0])
    np.testing.assert_allclose(v, 1e-4 * 0.8 / math.sqrt(1 - 0.8**2), rtol=1e-6)


def _closed_form_travel(mu, t1):
    """Coulomb friction μ (static = dynamic): the ramp breaks the block away at
    t* = μ m g / ρ; after it m ẍ = ρ (t − t*), so x(t1) = ρ (t1 − t*)³ / (6 m) (m)."""
    t_star = mu * MASS * G / RAMP
    return RAMP * (t1 - t_star) ** 3 / (6 * MASS)


T1 = 0.5
TS = jnp.linspace(0.0, T1, 51)


def test_a_pushed_block_breaks_away_and_slides_in_full_and_joint_coordinates_and_batches():
    """Closed form within the bristle's compliance and blend (5e-4 measured, at k_stick 1e6
    N/m, v_stick 1 mm/s); the joint-coordinate model and a lockstep batch of two friction
    coefficients carry the same internal states as the full model."""
    model = _block(_bristle(), push=True)
    q0, v0 = model.initial_state()
    sol = diffmbs.simulate(model, q0, v0, TS, **TOL)
    np.testing.assert_allclose(sol.q[-1, 0], _closed_form_travel(0.5, T1), rtol=1e-3)

    tree = mb.in_joint_coordinates(model)
    qt, vt = tree.initial_state()
    tree_sol = diffmbs.simulate(tree, qt, vt, TS, **TOL)
    np.testing.assert_allclose(tree.to_maximal(tree_sol.q[-1])[0][:3], sol.q[-1, :3], atol=1e-9)
    np.testing.assert_allclose(tree_sol.internal, sol.internal, atol=1e-6)  # N, of ~2.5 N

    mus = jnp.array([0.5, 0.3])
    batch = eqx.filter_vmap(lambda mu: model.with_parameter("guide.friction.mu_static", mu)
                            .with_parameter("guide.friction.mu_dynamic", mu))(mus)  # fmt: skip
    both = diffmbs.simulate_batch(batch, q0, v0, TS, system_axes=eqx.if_array(0), **TOL)
    assert both.internal.shape == (2, TS.shape[0], 24)
    np.testing.assert_allclose(both.q[0, -1, :3], sol.q[-1, :3], atol=1e-9)
    np.testing.assert_allclose(both.internal[0], sol.internal, atol=1e-6)
    np.testing.assert_allclose(both.q[1, -1, 0], _closed_form_travel(0.3, T1), rtol=1e-3)

    # resuming from a saved state, bristles included, continues the same motion
    half = TS.shape[0] // 2
    resumed = diffmbs.simulate(model.with_internal_state(sol.internal[half]), sol.q[half],
                               sol.v[half], TS[half:], **TOL)  # fmt: skip
    np.testing.assert_allclose(resumed.q[-1, :3], sol.q[-1, :3], atol=1e-9)


@pytest.mark.parametrize(
    "adjoint",
    # forward mode's tangents through contact are checked in the suite on the four-bar
    # (test_gradient_crosschecks); here make test-slow runs it with the checkpointed adjoint
    [None, pytest.param(diffrax.RecursiveCheckpointAdjoint(), marks=pytest.mark.slow),
     pytest.param(diffrax.ForwardMode(), marks=pytest.mark.slow)],
    ids=["discrete", "checkpointed", "forward"],
)
def test_the_travels_gradient_through_break_away_matches_differences_in_every_adjoint(adjoint):
    """∂x(t1)/∂(μ_s, μ_d) through the bristles' stick, break-away and slide, against central
    differences of the simulation; at μ_s = μ_d their sum against Coulomb's closed form
    ∂x/∂μ = −g (t1 − t*)² / 2, within the bristle model's own difference from Coulomb."""
    model = _block(_bristle(), push=True)
    q0, v0 = model.initial_state()
    options = dict(rtol=1e-10, atol=1e-12, max_steps=16_384)
    if adjoint is not None:
        options["adjoint"] = adjoint
    derive = jax.jacfwd if isinstance(adjoint, diffrax.ForwardMode) else jax.grad

    def travel(mu):
        moved = model.with_parameter("guide.friction.mu_static", mu[0]).with_parameter(
            "guide.friction.mu_dynamic", mu[1])
        return diffmbs.simulate(moved, q0, v0, TS, **options).q[-1, 0]

    mu, h = jnp.array([0.5, 0.45]), 1e-5
    differences = [(travel(mu + e) - travel(mu - e)) / (2 * h) for e in np.eye(2) * h]
    np.testing.assert_allclose(derive(travel)(mu), differences, rtol=1e-3)
    if adjoint is not None:
        return
    t_star = 0.5 * MASS * G / RAMP
    np.testing.assert_allclose(jnp.sum(derive(travel)(jnp.array([0.5, 0.5]))),
                               -G * (T1 - t_star) ** 2 / 2, rtol=3e-3)  # fmt: skip
