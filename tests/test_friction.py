"""Friction laws (diffmbs/friction.py) against closed forms: the regularised Coulomb and
Stribeck forces, and the speed at which regularised Coulomb friction creeps down a slope below
its friction angle."""

import math

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs
from diffmbs.friction import CoulombFriction, StribeckFriction

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
