"""Rigid bodies: mass properties from meshes, validation, initial states.

References: closed-form mass and inertia of a box (m (b² + c²)/12 …) and of a sphere (2/5 m r²,
against a fine icosphere within its tessellation error); the parallel-axis shift of a box
translated off the origin; rigid-body kinematics for the body-frame origin versus the COM.
"""

import numpy as np
import pytest
import trimesh

import diffmbs.multibody as mb
from diffmbs.rotations import quat_from_axis_angle

DENSITY = 7850.0  # kg/m³


def box_inertia(mass, extents):
    a, b, c = extents
    return mass / 12 * np.diag([b * b + c * c, a * a + c * c, a * a + b * b])


def test_box_mesh_matches_closed_form_and_keeps_its_frame():
    extents = np.array([0.3, 0.2, 0.1])
    offset = np.array([0.5, -0.1, 0.2])
    mesh = trimesh.creation.box(extents=extents)
    mesh.apply_translation(offset)  # body frame origin away from the centre of mass
    body = mb.RigidBody.from_mesh("box", mesh, DENSITY, position=(1.0, 2.0, 3.0))
    mass = DENSITY * np.prod(extents)
    np.testing.assert_allclose(body.mass, mass, rtol=1e-12)
    np.testing.assert_allclose(body.com, offset, atol=1e-12)
    np.testing.assert_allclose(body.inertia, box_inertia(mass, extents), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(body.position, [1.0, 2.0, 3.0])


def test_sphere_mesh_from_file_matches_closed_form(tmp_path):
    radius = 0.04
    path = tmp_path / "ball.stl"
    trimesh.creation.icosphere(subdivisions=5, radius=radius).export(path)
    body = mb.RigidBody.from_mesh("ball", str(path), DENSITY)
    mass = DENSITY * 4 / 3 * np.pi * radius**3
    np.testing.assert_allclose(body.mass, mass, rtol=1e-3)  # inscribed polyhedron: −0.05 %
    np.testing.assert_allclose(
        body.inertia, 0.4 * mass * radius**2 * np.eye(3), rtol=2e-3, atol=1e-12
    )
    np.testing.assert_allclose(body.com, 0.0, atol=1e-12)


def test_open_and_inverted_meshes_are_rejected_by_name():
    mesh = trimesh.creation.box(extents=(1, 1, 1))
    open_mesh = trimesh.Trimesh(mesh.vertices, mesh.faces[:-2])
    with pytest.raises(ValueError, match="body 'lid': the mesh is not watertight"):
        mb.RigidBody.from_mesh("lid", open_mesh, DENSITY)
    inverted = mesh.copy()
    inverted.invert()
    with pytest.raises(ValueError, match="body 'inside_out': the mesh volume is -1"):
        mb.RigidBody.from_mesh("inside_out", inverted, DENSITY)
    with pytest.raises(ValueError, match="body 'box': density must be positive"):
        mb.RigidBody.from_mesh("box", mesh, -1.0)


@pytest.mark.parametrize(
    "mass, inertia, message",
    [
        (0.0, (1.0, 1.0, 1.0), "mass must be positive"),
        (-2.0, (1.0, 1.0, 1.0), "mass must be positive"),
        (1.0, [[1.0, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], "not symmetric"),
        (1.0, (1.0, -1.0, 1.0), "not positive definite"),
        (1.0, (1.0, 1.0, 3.0), "triangle inequality"),
        (1.0, (1.0, 1.0, np.nan), "not finite"),
    ],
)
def test_bad_mass_properties_are_rejected_by_name(mass, inertia, message):
    with pytest.raises(ValueError, match=f"body 'arm': .*{message}"):
        mb.RigidBody("arm", mass=mass, inertia=inertia)


def test_thin_rod_and_ground_name_and_zero_quaternion():
    mb.RigidBody("rod", mass=1.0, inertia=(1e-9, 1.0, 1.0))  # a thin rod is allowed
    with pytest.raises(ValueError, match="reserved"):
        mb.RigidBody("ground", mass=1.0, inertia=(1, 1, 1))
    with pytest.raises(ValueError, match="non-zero"):
        mb.RigidBody("spun", mass=1.0, inertia=(1, 1, 1), orientation=(0, 0, 0, 0))


def test_initial_state_refers_to_the_body_frame_origin():
    """q holds the COM and ṙ_G; the body's position/velocity are those of its frame origin."""
    com = np.array([0.2, 0.0, 0.1])
    turn = np.asarray(quat_from_axis_angle(np.array([0.0, 0.0, 1.0]), np.pi / 2))
    omega_bar = np.array([0.0, 0.0, 3.0])
    b = mb.ModelBuilder()
    b.add_body(
        mb.RigidBody(
            "arm",
            mass=2.0,
            inertia=(1, 1, 1),
            com=com,
            position=(1.0, 0.0, 0.0),
            orientation=turn,
            velocity=(0.0, 0.5, 0.0),
            angular_velocity=omega_bar,
        )
    )
    model = b.build()
    q0, v0 = model.initial_state()
    r_com = np.array([1.0, 0.0, 0.0]) + np.array([0.0, 0.2, 0.1])  # R_z(90°) c̄
    np.testing.assert_allclose(q0[:3], r_com, atol=1e-15)
    np.testing.assert_allclose(q0[3:], turn, atol=1e-15)
    v_com = np.array([0.0, 0.5, 0.0]) + np.cross([0, 0, 3.0], [0.0, 0.2, 0.1])
    np.testing.assert_allclose(v0[:3], v_com, atol=1e-15)
    np.testing.assert_allclose(v0[3:], omega_bar)
    state = model.body_state("arm", q0, v0)
    np.testing.assert_allclose(state.position, [1.0, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(state.velocity, [0.0, 0.5, 0.0], atol=1e-15)
    np.testing.assert_allclose(state.angular_velocity, omega_bar, atol=1e-15)
    np.testing.assert_allclose(state.com_position, r_com, atol=1e-15)
    np.testing.assert_allclose(model.mass(q0), np.diag([2, 2, 2, 1, 1, 1.0]))
