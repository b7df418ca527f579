"""Gradients of a trajectory through a contact event against central finite differences.

A ball hangs from a spring–damper and is thrown at the ground plane (Hunt–Crossley sphere–plane
contact), bounces and swings. The output, the mean height over the record, depends on the impact
time and depth; its derivatives with respect to the ball's mass, the spring rate and the contact
stiffness come from forward mode (``diffrax.ForwardMode`` + ``jax.jacfwd``), checked here against
central differences of the simulation itself. Reverse mode through contact events is checked
in ``test_gradient_crosschecks.py``.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from multibody_models import G

import diffmbs.multibody as mb
from diffmbs.integrate import simulate

RADIUS = 0.05
PARAMS = ("ball.mass", "spring.stiffness", "contact.stiffness")
VALUES = np.array([0.5, 20.0, 1e5])  # kg, N/m, N/m^1.5
TS = jnp.linspace(0.0, 0.3, 61)
# Derivatives of the adaptive solution converge to the true ones with the tolerance (through an
# impact, measured: 5e-4 relative at rtol 1e-10, 1e-6 at 1e-12); central differences with
# steps of 1e-4 relative are then accurate to ~1e-6 (truncation and solver noise).
TIGHT = {"rtol": 1e-12, "atol": 1e-14}


def drop_model():
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    inertia = 0.4 * VALUES[0] * RADIUS**2
    b.add_body(
        mb.RigidBody(
            "ball",
            mass=VALUES[0],
            inertia=(inertia, inertia, inertia),
            position=(0.0, 0.0, 0.2),
            velocity=(0.3, 0.0, -1.0),
        )
    )
    b.add_force(
        "spring", mb.SpringDamper("ground", (0.1, 0.0, 1.0), "ball", (0, 0, 0), VALUES[1], 0.7, 0.5)
    )
    b.add_force(
        "contact",
        mb.SpherePlane("ball", (0, 0, 0), RADIUS, "ground", (0, 0, 0), (0, 0, 1),
                       stiffness=VALUES[2], damping=0.3),  # fmt: skip
    )
    b.add_sensor("contact_force", mb.ElementForce("contact"))
    return b.build()


MODEL = drop_model()
Q0, V0 = MODEL.initial_state()


def mean_height(values, adjoint=None):
    model = MODEL
    for path, value in zip(PARAMS, values, strict=True):
        model = model.with_parameter(path, value)
    sol = simulate(model, Q0, V0, TS, adjoint=adjoint, **TIGHT)
    return jnp.mean(sol.q[:, 2])


@pytest.fixture(scope="module")
def finite_differences():
    steps = 1e-4 * VALUES
    run = jax.jit(mean_height)
    return np.array(
        [
            (run(VALUES + h * e) - run(VALUES - h * e)) / (2 * h)
            for h, e in zip(steps, np.eye(3), strict=True)
        ]
    )


def test_the_ball_really_hits_the_ground():
    sol = simulate(MODEL, Q0, V0, TS, **TIGHT)
    force = np.asarray(sol.sensors["contact_force"])
    assert force.max() > 10 * VALUES[0] * G  # an impact (as sampled), not resting contact
    assert force[0] < 1e-6 and force[-1] < 1e-6  # and it leaves again
    assert np.all(np.isfinite(np.asarray(sol.q)))


def forward_mode(values):
    return jax.jit(jax.jacfwd(lambda p: mean_height(p, diffrax.ForwardMode())))(values)


def test_forward_mode_gradient_matches_finite_differences(finite_differences):
    assert np.all(np.abs(finite_differences) > 1e-9)  # every parameter matters
    np.testing.assert_allclose(forward_mode(VALUES), finite_differences, rtol=1e-5)
