"""Static equilibrium against hand calculations, and its derivatives.

References: a mass hanging on a spring along a vertical slide (z = z_anchor − L₀ − m g / k, so
dz/dm = −g/k and dz/dk = m g / k²); a hinged bar held up by an inclined spring, whose moment
balance about the hinge is solved here with scipy.optimize.brentq, and the sensitivity of that
root to the spring rate by central differences.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from multibody_models import G

import diffmbs.multibody as mb
from diffmbs.flex import (
    BeamModel,
    EulerBernoulli,
    FixedInterfaceModes,
    Material,
    RectangularSection,
    modal_data,
)
from diffmbs.system import accelerations

# --------------------------------------------------------------------------- hanging mass

HANG = {"mass": 3.0, "stiffness": 400.0, "free_length": 0.5, "anchor": 1.0}


def hanging_mass(p=HANG):
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    b.add_body(mb.RigidBody("mass", mass=p["mass"], inertia=(0.01, 0.01, 0.01)))
    b.add_joint("slide", mb.Prismatic("ground", mb.Frame((0, 0, 0)), "mass", mb.Frame((0, 0, 0))))
    b.add_force(
        "spring",
        mb.SpringDamper(
            "ground", (0.0, 0.0, p["anchor"]), "mass", (0, 0, 0), p["stiffness"], p["free_length"]
        ),
    )
    return b.build()


def test_mass_on_spring_equilibrium_and_its_gradients():
    model = hanging_mass()
    q = mb.static_equilibrium(model)
    z_ref = HANG["anchor"] - HANG["free_length"] - HANG["mass"] * G / HANG["stiffness"]
    np.testing.assert_allclose(q[2], z_ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(model.joint_coordinates("slide", q), [z_ref], atol=1e-12)

    def height(m, k):
        tuned = model.with_parameter("mass.mass", m).with_parameter("spring.stiffness", k)
        return mb.static_equilibrium(tuned)[2]

    dz_dm, dz_dk = jax.jit(jax.grad(height, argnums=(0, 1)))(HANG["mass"], HANG["stiffness"])
    np.testing.assert_allclose(dz_dm, -G / HANG["stiffness"], rtol=1e-10)
    np.testing.assert_allclose(dz_dk, HANG["mass"] * G / HANG["stiffness"] ** 2, rtol=1e-10)


# --------------------------------------------------------------------------- hinged bar

BAR = {"mass": 2.0, "length": 1.0, "attach": 0.8, "anchor_height": 0.6, "free_length": 0.3}
K_BAR = 150.0


def hinged_bar(k=K_BAR, p=BAR):
    """Uniform bar, body-frame origin at the hinge (COM at (L/2, 0, 0)), hinged to the world
    origin about y, horizontal at the start; spring from (a, 0, H) to the bar point (a, 0, 0)."""
    m, length = p["mass"], p["length"]
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    b.add_body(
        mb.RigidBody(
            "bar",
            mass=m,
            inertia=(1e-3, m * length**2 / 12, m * length**2 / 12),
            com=(length / 2, 0.0, 0.0),
        )
    )
    axis = (0.0, 1.0, 0.0)
    b.add_joint(
        "hinge",
        mb.Revolute(
            "ground",
            mb.Frame.from_axis((0, 0, 0), axis),
            "bar",
            mb.Frame.from_axis((0, 0, 0), axis),
        ),
    )
    anchor = (p["attach"], 0.0, p["anchor_height"])
    b.add_force(
        "spring",
        mb.SpringDamper("ground", anchor, "bar", (p["attach"], 0, 0), k, p["free_length"], 5.0),
    )
    return b.build()


def bar_elevation_by_hand(k, p=BAR):
    """Moment balance about the hinge for elevation θ (bar direction (cos θ, 0, sin θ))."""
    m, length, a, height, free = (
        p[key] for key in ("mass", "length", "attach", "anchor_height", "free_length")
    )

    def moment(theta):
        e = np.array([np.cos(theta), 0.0, np.sin(theta)])
        point, gap = a * e, np.array([a, 0.0, height]) - a * e
        tension = k * (np.linalg.norm(gap) - free)
        force = tension * gap / np.linalg.norm(gap)
        gravity = m * G * (length / 2) * np.cos(theta)  # y-moment of −m g ẑ at the COM
        return gravity + point[2] * force[0] - point[0] * force[2]

    return scipy.optimize.brentq(moment, 0.0, 0.8, xtol=1e-15, rtol=1e-15)


def test_hinged_bar_equilibrium_matches_moment_balance():
    model = hinged_bar()
    q = mb.static_equilibrium(model)
    theta = bar_elevation_by_hand(K_BAR)
    assert 0.1 < theta < 0.8
    com = BAR["length"] / 2 * np.array([np.cos(theta), 0.0, np.sin(theta)])
    np.testing.assert_allclose(model.body_state("bar", q).com_position, com, atol=1e-12)
    np.testing.assert_allclose(model.body_state("bar", q).position, 0.0, atol=1e-12)
    # At rest there: zero accelerations, and the model stays put.
    vdot, _ = jax.jit(lambda q_: accelerations(model, 0.0, q_, jnp.zeros(6)))(q)
    assert np.max(np.abs(np.asarray(vdot))) < 1e-9


def test_hinged_bar_equilibrium_sensitivity_by_implicit_differentiation():
    def com_height(k):
        return mb.static_equilibrium(hinged_bar().with_parameter("spring.stiffness", k))[2]

    grad = jax.jit(jax.grad(com_height))(K_BAR)
    h = 1e-3
    dtheta = (bar_elevation_by_hand(K_BAR + h) - bar_elevation_by_hand(K_BAR - h)) / (2 * h)
    theta = bar_elevation_by_hand(K_BAR)
    np.testing.assert_allclose(grad, BAR["length"] / 2 * np.cos(theta) * dtheta, rtol=1e-7)


def test_held_pendulum_and_sagging_modal_cantilever():
    """``hold``: a pendulum held (an extra constraint, not a joint of the model) at 30° below the
    horizontal beside a modal body: a steel cantilever (Euler–Bernoulli, root welded to the
    ground, 8 fixed-interface modes) that sags at its tip by ρAgL⁴/8EI."""
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -G))
    b.add_body(mb.RigidBody.point_mass("bob", 2.0, position=(1.0, 0.0, 0.0)))
    b.add_joint("pin", mb.Revolute("ground", mb.Frame.from_axis((0, 0, 0), (0, 1, 0)), "bob",
                                   mb.Frame.from_axis((-1.0, 0, 0), (0, 1, 0))))  # fmt: skip
    length, n = 1.0, 20
    nodes = np.stack([np.linspace(0, length, n + 1), np.zeros(n + 1), np.zeros(n + 1)], axis=1)
    section, steel = RectangularSection(0.02, 0.01), Material.steel()
    beam = BeamModel(nodes, np.stack([np.arange(n), np.arange(1, n + 1)], axis=1), section,
                     steel, theory=EulerBernoulli())  # fmt: skip
    fe = beam.assemble()
    data = modal_data(fe, FixedInterfaceModes(fe.dofs(0), n_modes=8)(fe))
    b.add_body(mb.ModalBody("beam", data, position=(0.0, 1.0, 0.0)))
    b.add_joint("weld", mb.Fixed("ground", (0.0, 1.0, 0.0), "beam", (0.0, 0.0, 0.0)))
    b.add_sensor("tip", mb.PointPosition(mb.node("beam", n)))
    model = b.build()
    angle = np.radians(30.0)
    swing = jnp.array([[np.cos(angle), 0.0, -np.sin(angle)]])

    def hold(q):  # the bob's height on the 1 m arm: −sin 30°
        return (q[model.q_slice("bob")][2:3] - swing[0, 2])

    guess = model.initial_state()[0].at[model.q_slice("bob")].set(
        jnp.concatenate([swing[0], jnp.array([1.0, 0.0, 0.0, 0.0])]))  # fmt: skip
    q = mb.static_equilibrium(model, guess, hold=hold)
    np.testing.assert_allclose(q[model.q_slice("bob")][:3], swing[0], atol=1e-9)
    props = section.properties()
    sag = float(steel.rho * props.area) * G * length**4 / (8 * float(steel.E * props.iy))
    tip = model.sensors(0.0, q, jnp.zeros(model.initial_state()[1].shape),
                        jnp.zeros(model.initial_state()[1].shape))["tip"]  # fmt: skip
    assert float(-tip[2]) == pytest.approx(sag, rel=2e-3)
