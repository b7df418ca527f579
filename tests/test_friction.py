"""Friction laws (diffmbs/friction.py) against closed forms: the regularised Coulomb and
Stribeck forces, and the speed at which regularised Coulomb friction creeps down a slope below
its friction angle."""

import math

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs
from diffmbs.friction import BristleFriction, CoulombFriction, StribeckFriction

diffmbs.configure()

G = 9.81
MASS = 1.0  # kg


def test_coulomb_and_stribeck_forces_oppose_the_sliding_with_their_coefficients():
    v = jnp.array([[0.3, -0.4, 0.0], [1e-9, 0.0, 0.0]])  # m/s: sliding, and nearly at rest
    normal = jnp.array([-50.0, 50.0])  # N, either sign
    law = CoulombFriction(0.3, viscous=2.0, v_epsilon=1e-5)
    f = np.asarray(law.force(v, normal))
    np.testing.assert_allclose(f[0], -0.3 * 50 * np.array([0.6, -0.8, 0]) - 2.0 * np.asarray(v[0]),
                               rtol=1e-9)  # fmt: skip
    # below v_ε the regularised force is linear: μ |F_n| v / v_ε (plus the viscous part)
    np.testing.assert_allclose(f[1, 0], -0.3 * 50 * 1e-9 / 1e-5 - 2.0 * 1e-9, rtol=1e-6)
    stribeck = StribeckFriction(0.5, 0.3, v_stribeck=0.01, v_epsilon=1e-7)
    assert float(stribeck.coefficient(jnp.asarray(0.0))) == pytest.approx(0.5)
    assert float(stribeck.coefficient(jnp.asarray(1.0))) == pytest.approx(0.3, rel=1e-12)
    slow = np.asarray(stribeck.force(jnp.array([1e-4, 0.0, 0.0]), 10.0))
    assert slow[0] == pytest.approx(-10.0 * float(stribeck.coefficient(jnp.asarray(1e-4))),
                                    rel=1e-6)  # fmt: skip


@pytest.mark.parametrize(("make", "match"), [
    (lambda: CoulombFriction(-0.1), r"CoulombFriction.mu must lie in \[0.0"),
    (lambda: CoulombFriction(0.3, v_epsilon=0.0), r"CoulombFriction.v_epsilon must lie in \(0.0"),
    (lambda: StribeckFriction(0.5, 0.3, v_stribeck=float("nan")), "StribeckFriction.v_stribeck"),
])  # fmt: skip
def test_bad_parameters_are_named(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def _slope(law, alpha, t1, ts):
    """A block released at rest on a slope of angle ``alpha``: ``(x (m), v (m/s))`` at ``ts``
    along the slope (downhill positive)."""
    normal = MASS * G * math.cos(alpha)

    def rhs(t, y, args):
        v, s = y[1], y[2:]
        v_t = jnp.stack([v, 0.0, 0.0])
        force = law.force(v_t, normal, s)[0]
        return jnp.concatenate([jnp.stack([v, G * math.sin(alpha) + force / MASS]),
                                law.state_rate(v_t, normal, s)])  # fmt: skip

    y0 = jnp.zeros(2 + law.state_size)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs), diffrax.Tsit5(), 0.0, t1, 1e-4, y0,
        saveat=diffrax.SaveAt(ts=ts), max_steps=200_000,
        stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-12),
    )  # fmt: skip
    return np.asarray(sol.ys[:, 0]), np.asarray(sol.ys[:, 1])


def test_regularised_coulomb_creeps_on_a_slope_at_its_closed_form_speed():
    """Below the friction angle, μ|F_n| v/sqrt(v² + v_ε²) = m g sin α: the block creeps at
    v = v_ε r / sqrt(1 − r²), r = tan α / μ — forever."""
    mu, v_eps, alpha = 0.5, 1e-4, math.atan(0.4)
    r = math.tan(alpha) / mu
    _, v = _slope(CoulombFriction(mu, v_epsilon=v_eps), alpha, 2.0, jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(v, v_eps * r / math.sqrt(1 - r * r), rtol=1e-6)


def test_bristle_friction_holds_a_block_on_a_slope_and_lets_it_slide_above_the_friction_angle():
    """Below the static friction angle the bristle holds the block: it settles near the
    bristle's deflection m g sin α / k_stick (plus what it slipped while the load came on at
    once) and stays (no creep); above it, the block slides with Coulomb's acceleration
    g (sin α − μ_d cos α)."""
    law = BristleFriction(0.5, 0.4, k_stick=1e7, c_stick=2 * math.sqrt(1e7), v_stick=3e-3)
    alpha = math.atan(0.45)  # between the dynamic and the static friction angles
    x, v = _slope(law, alpha, 2.0, jnp.array([1.0, 2.0]))
    held = MASS * G * math.sin(alpha) / 1e7  # m: the bristle's deflection under the load
    np.testing.assert_allclose(x, held, rtol=0.05)
    assert abs(x[1] - x[0]) < 1e-12 and np.all(np.abs(v) < 1e-11)  # m, m/s: at rest
    steep = math.atan(0.6)
    x, v = _slope(law, steep, 1.0, jnp.array([0.5, 1.0]))
    a = G * (math.sin(steep) - 0.4 * math.cos(steep))
    np.testing.assert_allclose(np.diff(v), a * 0.5, rtol=1e-4)  # after the break-away


def _stick_slip_period(law, t1=5.0):
    """A block (m = 1 kg) on a spring (k = 100 N/m) to the wall, on a belt moving at 0.1 m/s
    under it: the mean period of its stick–slip cycles (s) after the first."""
    k, v_belt = 100.0, 0.1

    def rhs(t, y, args):
        v_t = jnp.stack([y[1] - v_belt, 0.0, 0.0])
        force = law.force(v_t, MASS * G, y[2:])[0]
        return jnp.concatenate([jnp.stack([y[1], (force - k * y[0]) / MASS]),
                                law.state_rate(v_t, MASS * G, y[2:])])  # fmt: skip

    ts = jnp.linspace(0.0, t1, 50_001)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs), diffrax.Tsit5(), 0.0, t1, 1e-5,
        jnp.concatenate([jnp.array([0.0, v_belt]), law.initial_state()]),
        saveat=diffrax.SaveAt(ts=ts), max_steps=100_000,
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-11),
    )  # fmt: skip
    v, ts = np.asarray(sol.ys[:, 1]), np.asarray(ts)
    half = 0.5 * v_belt  # the slips start where v falls through half the belt's speed
    i = np.flatnonzero((v[:-1] >= half) & (v[1:] < half))
    starts = ts[i] + (half - v[i]) / (v[i + 1] - v[i]) * (ts[i + 1] - ts[i])
    return float(np.mean(np.diff(starts)[1:]))


def test_bristle_stick_slip_period_converges_to_coulombs_closed_form():
    """Coulomb stick–slip on a belt: the block sticks until k x = μ_s m g, then oscillates at
    ω = sqrt(k/m) about μ_d m g / k until it moves with the belt again. With a = (μ_s − μ_d) m g
    / k and tan φ = a ω / v_belt the period is T = (2π − 2φ)/ω + 2a/v_belt (0.8008 s here). The
    bristle law approaches it as k_stick grows with v_stick ∝ 1/sqrt(k_stick)."""
    w, a = 10.0, 0.2 * G / 100.0
    exact = (2 * math.pi - 2 * math.atan(a * w / 0.1)) / w + 2 * a / 0.1
    errors = [
        abs(_stick_slip_period(BristleFriction(0.6, 0.4, k, 2 * math.sqrt(k), v)) / exact - 1)
        for k, v in [(1e6, 1e-3), (1e8, 1e-4)]
    ]
    assert errors[1] < 2e-4 and errors[1] < errors[0] / 5, errors


def test_bristle_parameters_are_checked():
    with pytest.raises(ValueError, match="mu_dynamic"):
        BristleFriction(0.3, 0.4, 1e6, 1e3, 1e-3)
    with pytest.raises(ValueError, match="c_stick must lie in"):
        BristleFriction(0.5, 0.4, 1e6, 0.0, 1e-3)


def test_bristle_gradient_through_break_away_and_re_stick_matches_finite_differences():
    """d x(1.5 s) / d μ_s of the block on the belt, through a break-away and a re-stick:
    reverse mode (diffrax's checkpointed adjoint) against central differences."""

    def position(mu_static):
        law = BristleFriction(mu_static, 0.4, k_stick=1e6, c_stick=2e3, v_stick=1e-3)

        def rhs(t, y, args):
            v_t = jnp.stack([y[1] - 0.1, 0.0, 0.0])
            force = law.force(v_t, MASS * G, y[2:])[0]
            return jnp.concatenate([jnp.stack([y[1], (force - 100.0 * y[0]) / MASS]),
                                    law.state_rate(v_t, MASS * G, y[2:])])  # fmt: skip

        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs), diffrax.Tsit5(), 0.0, 1.5, 1e-5,
            jnp.concatenate([jnp.array([0.0, 0.1]), law.initial_state()]), max_steps=20_000,
            stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-13),
        )  # fmt: skip
        return sol.ys[-1, 0]

    grad = float(jax.jit(jax.grad(position))(0.6))
    h = 1e-5
    fd = (float(position(0.6 + h)) - float(position(0.6 - h))) / (2 * h)
    assert grad == pytest.approx(fd, rel=1e-4)
