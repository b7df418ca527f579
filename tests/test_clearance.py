"""Joints with clearance (diffmbs/multibody/_clearance.py) against closed forms. Revolute: the
static sag of a loaded journal, the rebound speed of an impact against the restitution, the
tilt of a 3-D journal under a couple (two-point contact), Coulomb friction on a journal
sliding along its bearing. Translational: a block resting on its guide's lower wall, cocked by
a couple against opposite walls, sliding with friction. Both: reverse-mode gradients through
impacts against finite differences."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import brentq

import diffmbs
import diffmbs.multibody as mb
from diffmbs.contact import damping_from_restitution
from diffmbs.friction import CoulombFriction

diffmbs.configure()

MASS, CLEARANCE, RADIUS = 0.5, 5e-4, 0.01  # kg, m, m
INERTIA = (2e-4, 2e-4, 1e-4)  # kg m², the journal's axis is z


def _journal(law, *, gravity=(0.0, -9.81, 0.0), velocity=(0, 0, 0), spin=(0, 0, 0),
             torque=None, half_length=0.0, friction=None):  # fmt: skip
    """A free journal (body "pin") in a bearing on the ground, both axes along z."""
    b = mb.ModelBuilder(gravity=gravity)
    b.add_body(mb.RigidBody("pin", mass=MASS, inertia=INERTIA, velocity=velocity,
                            angular_velocity=spin))  # fmt: skip
    b.add_force("joint", mb.RevoluteClearance(
        "ground", (0, 0, 0), (0, 0, 1), "pin", (0, 0, 0), (0, 0, 1), CLEARANCE,
        journal_radius=RADIUS, half_length=half_length, friction=friction, **law))  # fmt: skip
    if torque is not None:
        b.add_force("couple", mb.AppliedTorque("pin", lambda t, k: jnp.asarray(torque)))
    return b.build()


def _run(model, t1, n=201, **options):
    q0, v0 = model.initial_state()
    ts = jnp.linspace(0.0, t1, n)
    sol = diffmbs.simulate(model, q0, v0, ts, rtol=1e-9, atol=1e-12, **options)
    return np.asarray(ts), np.asarray(sol.q), np.asarray(sol.v)


def test_a_loaded_journal_sags_by_its_weight_over_the_contact_stiffness():
    """Linear contact (exponent 1), damped: the journal drops through the clearance and rests at
    y = −(c + m g / K)."""
    k = 1e6
    model = _journal(dict(stiffness=k, damping=200.0, exponent=1.0, smoothing=1e-8))
    _, q, v = _run(model, 0.5)
    assert q[-1, 1] == pytest.approx(-(CLEARANCE + MASS * 9.81 / k), rel=1e-6)
    assert abs(q[-1, 0]) < 1e-12 and np.max(np.abs(v[-1, :3])) < 1e-9


def test_an_impact_against_the_bearing_rebounds_with_the_restitution():
    """No gravity: the journal crosses the clearance at v₀ and comes back at e v₀ (the exact
    restitution damping of diffmbs.contact, for a point mass, independent of K and n)."""
    v0, e = 0.2, 0.7
    chi = float(damping_from_restitution(e, v0))
    model = _journal(dict(stiffness=1e9, damping=chi, smoothing=1e-9), gravity=(0, 0, 0),
                     velocity=(0.6 * v0, -0.8 * v0, 0.0))  # fmt: skip
    _, _, v = _run(model, CLEARANCE / v0 + 2e-3, n=3)
    np.testing.assert_allclose(np.linalg.norm(v[-1, :3]), e * v0, rtol=1e-4)
    np.testing.assert_allclose(v[-1, :2] / (e * v0), [-0.6, 0.8], atol=1e-4)  # straight back


def test_a_couple_tilts_the_journal_into_two_point_contact():
    """A couple M about x on a journal of half-length d (no gravity): it tilts by θ until its
    ends touch opposite sides, each at eccentricity d sin θ, and the two contact forces (axial
    arm d cos θ) balance it: M = 2 K (d sin θ − c) d cos θ."""
    k, d, couple = 1e7, 0.02, 0.05
    model = _journal(dict(stiffness=k, damping=20.0, exponent=1.0, smoothing=1e-9),
                     gravity=(0, 0, 0), half_length=d, torque=(couple, 0, 0))  # fmt: skip
    _, q, _ = _run(model, 0.3, n=3)
    theta = brentq(lambda a: 2 * k * (d * math.sin(a) - CLEARANCE) * d * math.cos(a) - couple,
                   CLEARANCE / d, 0.5)  # fmt: skip
    w, x = q[-1, 3], q[-1, 4]  # the quaternion of a rotation about x
    assert 2 * math.atan2(x, w) == pytest.approx(theta, rel=1e-5)
    np.testing.assert_allclose(q[-1, :3], 0.0, atol=1e-10)  # the centre stays: the forces balance


def test_a_journal_sliding_along_its_bearing_slides_then_rolls_like_a_bowling_ball():
    """Coulomb friction μ on a journal (a contact point, ``half_length`` 0) resting in its
    bearing and sliding along the axis at v₀: friction μ m g slows it at μ g and spins it up
    about x at μ m g r / I until it rolls, v = ω r, at v₀ m r² / (I + m r²)."""
    mu, v0 = 0.3, 0.2
    law = dict(stiffness=1e7, damping=200.0, exponent=1.0, smoothing=1e-9)
    model = _journal(law, velocity=(0, 0, v0), friction=CoulombFriction(mu, v_epsilon=1e-5))
    q0, v_start = model.initial_state()
    q0 = q0.at[1].set(-(CLEARANCE + MASS * 9.81 / 1e7))  # resting on the bottom
    ts = np.linspace(0.0, 0.1, 11)
    v = np.asarray(diffmbs.simulate(model, q0, v_start, ts, rtol=1e-9, atol=1e-12).v)
    sliding = slice(1, 6)  # rolling starts at 0.054 s
    np.testing.assert_allclose(v[sliding, 2], v0 - mu * 9.81 * ts[sliding], rtol=1e-6)
    spin_up = mu * MASS * 9.81 * RADIUS / INERTIA[0]
    np.testing.assert_allclose(v[sliding, 3], spin_up * ts[sliding], rtol=1e-6)
    rolling = v0 * MASS * RADIUS**2 / (INERTIA[0] + MASS * RADIUS**2)
    np.testing.assert_allclose(v[-3:, 2], rolling, rtol=1e-6)
    np.testing.assert_allclose(v[-3:, 3] * RADIUS, rolling, rtol=1e-6)


def _check_gradient(model, names, coordinate, t1, rtol, rel_step):
    """Reverse mode (the default discrete adjoint) of the body's ``coordinate`` of q at ``t1``
    with respect to the parameters ``names``, against central differences (rel 1e-5)."""
    x0 = jnp.array([float(model.parameter(name)) for name in names])
    q0, v0 = model.initial_state()
    ts = jnp.array([0.0, t1])

    def final(x):
        m = model
        for name, value in zip(names, x, strict=True):
            m = m.with_parameter(name, value)
        return diffmbs.simulate(m, q0, v0, ts, rtol=rtol, atol=1e-3 * rtol).q[-1, coordinate]

    grad = np.asarray(jax.jit(jax.grad(final))(x0))
    for k, h in enumerate(rel_step * np.asarray(x0)):
        step = jnp.zeros(len(names)).at[k].set(h)
        fd = (float(final(x0 + step)) - float(final(x0 - step))) / (2 * h)
        assert grad[k] == pytest.approx(fd, rel=1e-5), names[k]


def test_gradients_through_an_impact_match_finite_differences():
    """The journal's position after it has hit the bearing and come back, with respect to the
    clearance, the contact stiffness and the damping, by the model's parameter names."""
    v0 = 0.2
    model = _journal(dict(stiffness=1e8, damping=1.5, smoothing=1e-9), gravity=(0, 0, 0),
                     velocity=(0.6 * v0, -0.8 * v0, 0.0))  # fmt: skip
    names = ("joint.clearance", "joint.stiffness", "joint.damping")
    _check_gradient(model, names, coordinate=1, t1=5e-3, rtol=1e-10, rel_step=1e-4)

# ----------------------------------------------------------------------- translational clearance

HALF_LENGTH, HALF_HEIGHT, GAP = 0.05, 0.01, 2e-4  # m: a block 100 × 20 mm, 0.2 mm of play
CORNERS = [(x, 0.0, z) for x in (-HALF_LENGTH, HALF_LENGTH) for z in (-HALF_HEIGHT, HALF_HEIGHT)]


def _block(law, *, gravity=(0.0, 0.0, -9.81), velocity=(0, 0, 0), torque=None, friction=None):
    """A free block (body "block") centred in a guide along x on the ground, walls ⊥ z."""
    b = mb.ModelBuilder(gravity=gravity)
    b.add_body(mb.RigidBody("block", mass=MASS, inertia=(1e-5, 4e-4, 4e-4), velocity=velocity))
    b.add_force("guide", mb.TranslationalClearance(
        "ground", (0, 0, 0), (0, 0, 1), HALF_HEIGHT + GAP, "block", CORNERS, friction=friction,
        **law))  # fmt: skip
    if torque is not None:
        b.add_force("couple", mb.AppliedTorque("block", lambda t, k: jnp.asarray(torque)))
    return b.build()


def test_a_block_in_a_guide_rests_on_its_lower_wall():
    """Linear contact: the block drops through the play and rests on its two lower corners at
    z = −(c + m g / (2K)), level."""
    k = 1e6
    _, q, v = _run(_block(dict(stiffness=k, damping=200.0, exponent=1.0, smoothing=1e-9)), 0.5)
    assert q[-1, 2] == pytest.approx(-(GAP + MASS * 9.81 / (2 * k)), rel=1e-6)
    np.testing.assert_allclose(q[-1, 4:7], 0.0, atol=1e-9)  # no tilt
    assert np.max(np.abs(v[-1])) < 1e-8


def test_a_couple_cocks_the_block_against_opposite_walls():
    """A couple M about y (no gravity): the block turns by θ until the corners (−a, b) and
    (a, −b) press on the opposite walls, each by δ = a sin θ + b cos θ − w, and balance it:
    M = 2 K δ (a cos θ − b sin θ)."""
    k, couple, a, b = 1e7, 0.5, HALF_LENGTH, HALF_HEIGHT
    w = HALF_HEIGHT + GAP
    model = _block(dict(stiffness=k, damping=20.0, exponent=1.0, smoothing=1e-9),
                   gravity=(0, 0, 0), torque=(0, couple, 0))  # fmt: skip
    _, q, _ = _run(model, 0.3, n=3)

    def residual(theta):
        delta = a * math.sin(theta) + b * math.cos(theta) - w
        return 2 * k * delta * (a * math.cos(theta) - b * math.sin(theta)) - couple

    theta = brentq(residual, 0.0, 0.1)
    assert 2 * math.atan2(q[-1, 5], q[-1, 3]) == pytest.approx(theta, rel=1e-5)
    np.testing.assert_allclose(q[-1, :3], 0.0, atol=1e-10)


def test_a_block_sliding_in_its_guide_slows_down_at_mu_g():
    """Coulomb friction μ on the lower wall: the block sliding along the guide at v₀ slows at
    μ g (its corners share its weight whatever the pitch friction gives it)."""
    mu, v0, k = 0.2, 0.3, 1e7
    model = _block(dict(stiffness=k, damping=300.0, exponent=1.0, smoothing=1e-9),
                   velocity=(v0, 0, 0), friction=CoulombFriction(mu, v_epsilon=1e-5))  # fmt: skip
    q0, v_start = model.initial_state()
    q0 = q0.at[2].set(-(GAP + MASS * 9.81 / (2 * k)))  # resting on the lower wall
    ts = np.linspace(0.0, 0.1, 11)
    v = np.asarray(diffmbs.simulate(model, q0, v_start, ts, rtol=1e-9, atol=1e-12).v)
    np.testing.assert_allclose(v[:, 0], v0 - mu * 9.81 * ts, rtol=1e-5)


def test_translational_clearance_gradient_matches_finite_differences():
    """The block's height after it fell through the play and bounced, by the element's
    parameter names. The adjoint differentiates the accepted steps, which near a sharp onset
    (ε = 1 nm) follow the exact solution's derivative only as closely as the tolerance allows:
    1.6e-4 off at rtol 1e-10, 1e-6 at 1e-12."""
    model = _block(dict(stiffness=1e8, damping=1.0, smoothing=1e-9), velocity=(0.1, 0, -0.05))
    names = ("guide.half_width", "guide.stiffness", "guide.damping")
    _check_gradient(model, names, coordinate=2, t1=8e-3, rtol=1e-12, rel_step=1e-5)


def test_a_described_clearance_joint_carries_its_friction_law():
    """A model file's ``friction`` table builds the law by its ``type``; a wrong key is named
    with its path."""
    joint = {"name": "joint", "type": "revolute_clearance", "body_i": "ground",
             "bearing_center": [0, 0, 0], "bearing_axis": [0, 0, 1], "body_j": "pin",
             "journal_center": [0, 0, 0], "journal_axis": [0, 0, 1], "clearance": CLEARANCE,
             "stiffness": 1e8, "friction": {"type": "coulomb", "mu": 0.3}}  # fmt: skip
    description = {"bodies": [{"name": "pin", "mass": MASS, "inertia": list(INERTIA)}],
                   "forces": [joint]}  # fmt: skip
    friction = mb.model_from_dict(description).force_groups[0].member(0).friction
    assert isinstance(friction, CoulombFriction) and float(friction.mu) == pytest.approx(0.3)
    joint["friction"] = {"type": "coulomb", "mu": 0.3, "v_eps": 1e-4}
    with pytest.raises(mb.ModelError, match=r"forces\[0\]\.friction"):
        mb.model_from_dict(description)
