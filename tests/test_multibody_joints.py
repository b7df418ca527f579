"""Each joint type: the number of equations, the motions it permits, its coordinates.

Every joint connects the ground (a frame at a random point with random axes) to its own body
(a random frame on a body whose centre of mass is off its frame origin), placed so that the joint
is assembled. References are rigid-body kinematics written here: the velocity ``(ṙ_G, ω̄)`` of a
rotation about a world axis through a point, or of a translation, must lie in the null space of
the joint's Jacobian block, and the null space must have exactly the joint's DOF.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import diffmbs.multibody as mb
from diffmbs.rotations import matrix_to_quat
from diffmbs.system import constraint_jacobian, constraint_terms, velocity_constraints

RNG = np.random.default_rng(42)
COM = np.array([0.05, -0.02, 0.03])
DISTANCE = 0.7
RATE = 1.7


def random_frame():
    return mb.Frame(RNG.normal(size=3) * 0.3, Rotation.random(random_state=RNG).as_matrix())


# name: (class, extra arguments, DOF)
JOINTS = {
    "spherical": (mb.Spherical, (), 3),
    "revolute": (mb.Revolute, (), 1),
    "universal": (mb.Universal, (), 2),
    "cylindrical": (mb.Cylindrical, (), 2),
    "prismatic": (mb.Prismatic, (), 1),
    "planar": (mb.Planar, (), 3),
    "fixed": (mb.Fixed, (), 0),
    "distance": (mb.Distance, (DISTANCE,), 5),
    "prescribed_revolute": (mb.PrescribedRevolute, (mb.ConstantRate(0.0, RATE),), 0),
    "prescribed_prismatic": (mb.PrescribedPrismatic, (mb.ConstantRate(0.0, RATE),), 0),
    "driven_by_function": (mb.PrescribedRevolute, (lambda t: 0.5 * RATE * t**2,), 0),
}


def allowed_motions(name, origin, axes, r_g, rot, offset):
    """Velocities (ṙ_G, ω̄) of the body that the joint must permit (world axes/points)."""

    def turn(axis, point):
        return np.concatenate([np.cross(axis, r_g - point), rot.T @ axis])

    def slide(axis):
        return np.concatenate([axis, np.zeros(3)])

    x, y, z = axes.T
    return {
        "spherical": [turn(a, origin) for a in (x, y, z)],
        "revolute": [turn(z, origin)],
        "universal": [turn(x, origin), turn(y, origin)],
        "cylindrical": [slide(z), turn(z, origin)],
        "prismatic": [slide(z)],
        "planar": [slide(x), slide(y), turn(z, origin)],
        # The body frame sits at origin + offset, offset along x: slides across it, any turn.
        "distance": [slide(y), slide(z)] + [turn(a, origin + offset) for a in (x, y, z)],
    }.get(name, [])


@pytest.fixture(scope="module")
def rig():
    b = mb.ModelBuilder()
    placements = {}
    for name, (cls, extra, _) in JOINTS.items():
        f_ground, f_body = random_frame(), random_frame()
        rot = np.asarray(f_ground.rotation) @ np.asarray(f_body.rotation).T
        offset = DISTANCE * np.asarray(f_ground.rotation)[:, 0] * (name == "distance")
        origin = np.asarray(f_ground.point)
        position = origin + offset - rot @ np.asarray(f_body.point)  # body-frame origin
        b.add_body(
            mb.RigidBody(
                f"body_{name}",
                mass=1.0 + RNG.random(),
                inertia=(0.02, 0.03, 0.04),
                com=COM,
                position=position,
                orientation=matrix_to_quat(rot),
            )
        )
        b.add_joint(name, cls("ground", f_ground, f"body_{name}", f_body, *extra))
        axes = np.asarray(f_ground.rotation)
        placements[name] = (origin, axes, position + rot @ COM, rot, offset)
    model = b.build()
    q, v = model.initial_state()
    terms = eqx.filter_jit(
        lambda m, q_: (
            constraint_jacobian(m, 0.0, q_, v),
            velocity_constraints(m, 0.0, q_, v),
            constraint_terms(m, 0.0, q_, v),
        )
    )(model, q)
    return model, q, *jax.tree.map(np.asarray, terms), placements


@pytest.mark.parametrize("name", list(JOINTS))
def test_equations_rank_and_permitted_motions(rig, name):
    model, q, jac, _, (phi, _, _), placements = rig
    cls, _, dof = JOINTS[name]
    rows, cols = model.joint_rows()[name], model.v_slice(f"body_{name}")
    assert rows.stop - rows.start == cls.n_equations == 6 - dof
    block = jac[rows]
    assert np.all(block[:, np.r_[: cols.start, cols.stop : jac.shape[1]]] == 0)
    block = block[:, cols]
    singular = np.linalg.svd(block, compute_uv=False)
    assert np.sum(singular > 1e-10 * singular[0]) == 6 - dof  # independent equations
    motions = allowed_motions(name, *placements[name])
    assert len(motions) == dof
    if dof:
        motions = np.stack(motions, axis=1)
        assert np.linalg.matrix_rank(motions) == dof  # together they span the null space
        np.testing.assert_allclose(block @ motions, 0.0, atol=1e-13)
    assert np.max(np.abs(phi[rows])) < 1e-14


@pytest.mark.parametrize(
    "name, expected",
    [
        ("revolute", [[1.0]]),
        ("prismatic", [[1.0]]),
        ("cylindrical", [[1.0, 0.0], [0.0, 1.0]]),
        ("planar", np.eye(3)),
        ("distance", np.zeros((1, 5))),
    ],
)
def test_joint_coordinate_rates_along_permitted_motions(rig, name, expected):
    model, q, *_, placements = rig
    motions = allowed_motions(name, *placements[name])
    sl = model.v_slice(f"body_{name}")

    def rates(w6):
        v = jnp.zeros(q.size // 7 * 6).at[sl].set(w6)
        return jax.jvp(lambda q_: model.joint_coordinates(name, q_), (q,), (model.qdot(q, v),))[1]

    got = np.stack([np.asarray(rates(jnp.asarray(m))) for m in motions], axis=1)
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_joint_coordinate_values(rig):
    model, q, *_ = rig
    np.testing.assert_allclose(model.joint_coordinates("revolute", q), [0.0], atol=1e-12)
    np.testing.assert_allclose(model.joint_coordinates("distance", q), [DISTANCE], atol=1e-12)
    np.testing.assert_allclose(model.joint_coordinates("planar", q), [0.0, 0.0, 0.0], atol=1e-12)


def test_prescribed_motion_time_derivatives_and_consistent_velocity(rig):
    model, q, _, bias, (_, _, gamma), placements = rig
    rows = model.joint_rows()
    # Φ_t of the drive equations at t = 0: −ṡ(0) (sin(θ − θ(t)) and s − s(t)); the quadratic
    # law has ṡ(0) = 0.
    np.testing.assert_allclose(bias[rows["prescribed_revolute"]], [0] * 5 + [-RATE], atol=1e-14)
    np.testing.assert_allclose(bias[rows["prescribed_prismatic"]], [0] * 5 + [-RATE], atol=1e-14)
    np.testing.assert_allclose(bias[rows["driven_by_function"]], 0.0, atol=1e-14)
    # γ of the quadratic law: Φ̈ = Φ_v v̇ − γ at rest contains −θ̈(t) = −RATE.
    np.testing.assert_allclose(gamma[rows["driven_by_function"]], [0] * 5 + [RATE], atol=1e-12)
    # Consistent velocities: the driven bodies turn / slide at the prescribed rate.
    v = np.asarray(mb.consistent_velocities(model, q, 0.0))
    origin, axes, r_g, rot, _ = placements["prescribed_revolute"]
    turn = np.concatenate([np.cross(axes[:, 2], r_g - origin), rot.T @ axes[:, 2]])
    got = v[model.v_slice("body_prescribed_revolute")]
    np.testing.assert_allclose(got, RATE * turn, atol=1e-12)
    _, axes, *_ = placements["prescribed_prismatic"]
    slide = np.concatenate([axes[:, 2], np.zeros(3)])
    got = v[model.v_slice("body_prescribed_prismatic")]
    np.testing.assert_allclose(got, RATE * slide, atol=1e-12)


def test_joint_between_two_moving_bodies_permits_rigid_motion_of_the_pair():
    rot = Rotation.from_rotvec([0.3, -0.2, 0.5]).as_matrix()
    b = mb.ModelBuilder()
    b.add_body(mb.RigidBody("a", mass=1.0, inertia=(1, 2, 2.5), com=COM, position=(0.1, 0, 0)))
    b.add_body(
        mb.RigidBody(
            "b",
            mass=2.0,
            inertia=(1, 1, 1),
            position=(0.6, 0.2, 0),
            orientation=matrix_to_quat(rot),
        )
    )
    hinge_world = np.array([0.4, 0.1, 0.0])
    b.add_joint(
        "hinge",
        mb.Revolute(
            "a",
            mb.Frame.from_axis(hinge_world - (0.1, 0, 0), (0, 0, 1)),
            "b",
            mb.Frame(rot.T @ (hinge_world - (0.6, 0.2, 0)), rot.T),
        ),
    )
    model = b.build()
    q, v = model.initial_state()
    jac = np.asarray(jax.jit(lambda q_: constraint_jacobian(model, 0.0, q_, v))(q))
    assert jac.shape == (5, 12) and np.linalg.matrix_rank(jac) == 5
    r_a, r_b = np.asarray(q[:3]), np.asarray(q[7:10])
    rots = [np.eye(3), rot]

    def rigid(axis, point):
        parts = [
            np.concatenate([np.cross(axis, r - point), rt.T @ axis])
            for r, rt in zip((r_a, r_b), rots, strict=True)
        ]
        return np.concatenate(parts)

    pair = [rigid(a, np.array([1.0, -2.0, 0.5])) for a in np.eye(3)]
    pair += [np.concatenate([a, np.zeros(3), a, np.zeros(3)]) for a in np.eye(3)]
    relative = np.concatenate([np.zeros(6), np.cross([0, 0, 1], r_b - hinge_world), rot.T[:, 2]])
    motions = np.stack([*pair, relative], axis=1)
    assert np.linalg.matrix_rank(motions) == 7 == 12 - 5
    np.testing.assert_allclose(jac @ motions, 0.0, atol=1e-13)


def test_elementary_rotation_derivatives_of_every_order():
    """The rotation's (cos, sin) go through a custom derivative (computed once, behind an
    optimisation barrier): d/dθ R = ẑ× R and d²/dθ² R = −(R − ẑẑᵀ) about z, also batched."""
    from diffmbs.multibody._joints import _elementary_rotation

    angles = jnp.array([-2.0, 0.0, 0.4, 3.0])
    rot = jax.vmap(lambda a: _elementary_rotation(2, a))(angles)
    first = jax.vmap(jax.jacfwd(lambda a: _elementary_rotation(2, a)))(angles)
    second = jax.vmap(jax.jacfwd(jax.jacrev(lambda a: _elementary_rotation(2, a))))(angles)
    z_cross = jnp.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(first, z_cross @ rot, atol=1e-15)
    np.testing.assert_allclose(second, -(rot - jnp.diag(jnp.array([0.0, 0.0, 1.0]))), atol=1e-15)
    np.testing.assert_allclose(rot[:, 0, 0], np.cos(angles), rtol=1e-15)
