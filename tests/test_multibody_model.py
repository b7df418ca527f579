"""Model building: the Python API, plain-data descriptions, errors, parameters, stacking.

References: the same mechanism written three ways (Python builder, dict, TOML file) must give
identical initial states and accelerations; error messages must name the offending item; the
traced graph of a chain must not grow with its length (elements of one type are vmapped).
"""

import tomllib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import trimesh
from multibody_models import chain

import diffmbs.multibody as mb
from diffmbs.system import accelerations

# --------------------------------------------------------------------------- one model, 3 ways

TOML = """
gravity = [0.0, 0.0, -9.81]

[[bodies]]
name = "crank"
mass = 1.5
inertia = [0.01, 0.02, 0.02]
com = [0.1, 0.0, 0.0]
position = [0.0, 0.0, 0.0]

[[bodies]]
name = "block"
mesh = "block.stl"
density = 2700.0
position = [0.3, 0.0, -0.2]
velocity = [0.0, 0.0, 0.1]

[[joints]]
name = "drive"
type = "prescribed_revolute"
body_i = "ground"
frame_i = { point = [0.0, 0.0, 0.0], z_axis = [0.0, 1.0, 0.0] }
body_j = "crank"
frame_j = { point = [0.0, 0.0, 0.0], z_axis = [0.0, 1.0, 0.0] }
motion = { type = "constant_rate", start = 0.0, rate = 3.0 }

[[joints]]
name = "rail"
type = "cylindrical"
body_i = "ground"
frame_i = { point = [0.3, 0.0, -0.2], orientation = [1.0, 0.0, 0.0, 0.0] }
body_j = "block"
frame_j = [0.0, 0.0, 0.0]

[[forces]]
name = "link"
type = "spring_damper"
body_i = "crank"
point_i = [0.2, 0.0, 0.0]
body_j = "block"
point_j = [0.0, 0.0, 0.0]
stiffness = 500.0
free_length = 0.25
damping = 3.0
stops = { upper = 0.4, stiffness = 1e6, damping = 0.2 }

[[forces]]
name = "floor"
type = "sphere_plane"
body_i = "block"
center = [0.0, 0.0, -0.05]
radius = 0.03
body_j = "ground"
plane_point = [0.0, 0.0, -0.3]
plane_normal = [0.0, 0.0, 1.0]
stiffness = 1e6
damping = 0.3

[[forces]]
name = "torsion"
type = "rotational_spring_damper"
joint = "drive"
stiffness = 2.0

[[sensors]]
name = "acc"
type = "point_acceleration"
body = "block"
point = [0.0, 0.0, 0.01]
include_gravity = true
axes = "body"

[[sensors]]
name = "energy"
type = "mechanical_energy"
"""


def python_model(mesh):
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mb.RigidBody("crank", mass=1.5, inertia=(0.01, 0.02, 0.02), com=(0.1, 0, 0)))
    b.add_body(
        mb.RigidBody.from_mesh("block", mesh, 2700.0, position=(0.3, 0, -0.2), velocity=(0, 0, 0.1))
    )
    y = (0.0, 1.0, 0.0)
    b.add_joint(
        "drive",
        mb.PrescribedRevolute(
            "ground",
            mb.Frame.from_axis((0, 0, 0), y),
            "crank",
            mb.Frame.from_axis((0, 0, 0), y),
            mb.ConstantRate(0.0, 3.0),
        ),
    )
    b.add_joint("rail", mb.Cylindrical("ground", mb.Frame((0.3, 0, -0.2)), "block", (0, 0, 0)))
    stops = mb.LengthStops(None, 0.4, stiffness=1e6, damping=0.2)
    b.add_force(
        "link",
        mb.SpringDamper("crank", (0.2, 0, 0), "block", (0, 0, 0), 500.0, 0.25, 3.0, 0.0, stops),
    )
    b.add_force(
        "floor",
        mb.SpherePlane("block", (0, 0, -0.05), 0.03, "ground", (0, 0, -0.3), (0, 0, 1),
                       stiffness=1e6, damping=0.3),  # fmt: skip
    )
    b.add_force("torsion", mb.RotationalSpringDamper("drive", 2.0))
    b.add_sensor("acc", mb.PointAcceleration("block", (0, 0, 0.01), "body", True))
    b.add_sensor("energy", mb.MechanicalEnergy())
    return b.build()


@pytest.fixture(scope="module")
def three_ways(tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    mesh = trimesh.creation.box(extents=(0.1, 0.08, 0.06))
    mesh.export(folder / "block.stl")
    (folder / "model.toml").write_text(TOML)
    as_dict = tomllib.loads(TOML)
    return (
        python_model(str(folder / "block.stl")),  # STL stores float32: read it back everywhere
        mb.model_from_dict(as_dict, base_dir=str(folder)),
        mb.model_from_toml(folder / "model.toml"),
    )


def test_builder_dict_and_toml_give_the_same_model(three_ways):
    results = []
    evaluate = eqx.filter_jit(
        lambda m, q, v: (accelerations(m, 0.1, q, v), m.sensors(0.1, q, v, jnp.zeros_like(v)))
    )
    for model in three_ways:
        q, v = model.initial_state()
        results.append((q, v, *evaluate(model, q, v)))
    reference = jax.tree.map(np.asarray, results[0])
    for other in results[1:]:
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13),
            reference,
            jax.tree.map(np.asarray, other),
        )
    # Same structure, so one compiled function serves all three.
    structures = {jax.tree_util.tree_structure(eqx.filter(m, eqx.is_array)) for m in three_ways}
    assert len(structures) == 1
    assert np.all(np.isfinite(reference[2][0]))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda d: d["joints"][1].update(type="hinge"), r"joints\[1\]\.type: expected one of"),
        (lambda d: d["joints"][0].update(frmae_i=[0, 0, 0]), r"joints\[0\]\.frmae_i: unknown key"),
        (lambda d: d["bodies"][0].pop("mass"), r"bodies\[0\]: missing key 'mass'"),
        (lambda d: d["bodies"][0].update(mass=-1.0), r"bodies\[0\]: body 'crank': mass must be"),
        (lambda d: d["forces"][0].update(body_j="blok"), r"forces\[0\]: .*unknown body 'blok'"),
        (lambda d: d["forces"][2].update(joint="rail"), r"forces\[2\]: .*not a revolute"),
        (lambda d: d["sensors"][0].update(axes="up"), r"sensors\[0\]: axes must be one of"),
        (
            lambda d: d["joints"][0]["frame_i"].update(z_axis=[0, 0, 0]),
            r"joints\[0\]\.frame_i: z_axis must be a non-zero",
        ),
        (lambda d: d["joints"][0]["motion"].update(type="jerk"), r"joints\[0\]\.motion\.type"),
        (lambda d: d.update(gravity=[0, 1]), r"gravity: expected a 3-vector"),
        (lambda d: d.update(bodys=[]), r"model\.bodys: unknown key"),
    ],
)
def test_description_errors_name_the_key(tmp_path, edit, message):
    trimesh.creation.box(extents=(0.1, 0.08, 0.06)).export(tmp_path / "block.stl")
    description = tomllib.loads(TOML)
    edit(description)
    with pytest.raises(mb.ModelError, match=message):
        mb.model_from_dict(description, base_dir=str(tmp_path))


def test_toml_file_errors(tmp_path):
    with pytest.raises(mb.ModelError, match="missing.toml"):
        mb.model_from_toml(tmp_path / "missing.toml")
    (tmp_path / "bad.toml").write_text("[[bodies]\nname =")
    with pytest.raises(mb.ModelError, match="invalid TOML"):
        mb.model_from_toml(tmp_path / "bad.toml")


# --------------------------------------------------------------------------- builder errors


def one_body_builder():
    b = mb.ModelBuilder()
    b.add_body(mb.RigidBody("link", mass=1.0, inertia=(1, 1, 1)))
    return b


def test_unknown_bodies_joints_and_elements_are_named():
    b = one_body_builder()
    b.add_joint("hinge", mb.Revolute("ground", mb.Frame((0, 0, 0)), "lnk", mb.Frame((0, 0, 0))))
    with pytest.raises(mb.ModelError, match="joint 'hinge': unknown body 'lnk'") as err:
        b.build()
    assert err.value.item == "hinge"
    b = one_body_builder()
    b.add_force("spring", mb.SpringDamper("ground", (0, 0, 1), "lnk", (0, 0, 0), 1.0, 1.0))
    with pytest.raises(mb.ModelError, match="force element 'spring': unknown body 'lnk'"):
        b.build()
    b = one_body_builder()
    b.add_force("torsion", mb.RotationalSpringDamper("hinge", 1.0))
    with pytest.raises(mb.ModelError, match="force element 'torsion': unknown joint 'hinge'"):
        b.build()
    b = one_body_builder()
    b.add_sensor("angle", mb.JointCoordinates("hinge"))
    with pytest.raises(mb.ModelError, match="sensor 'angle': unknown joint 'hinge'"):
        b.build()
    b = one_body_builder()
    b.add_joint("self", mb.Spherical("link", mb.Frame((0, 0, 0)), "link", mb.Frame((1, 0, 0))))
    with pytest.raises(mb.ModelError, match="joint 'self' connects body 'link' to itself"):
        b.build()
    with pytest.raises(mb.ModelError, match="at least one body"):
        mb.ModelBuilder().build()


def test_duplicate_and_reserved_names_and_wrong_types():
    b = one_body_builder()
    with pytest.raises(mb.ModelError, match="duplicate name 'link': already used by a body"):
        b.add_joint("link", mb.Spherical("ground", mb.Frame((0, 0, 0)), "link", (0, 0, 0)))
    with pytest.raises(mb.ModelError, match="duplicate name 'link'"):
        b.add_body(mb.RigidBody("link", mass=2.0, inertia=(1, 1, 1)))
    with pytest.raises(mb.ModelError, match="reserved"):
        b.add_sensor("ground", mb.KineticEnergy())
    with pytest.raises(mb.ModelError, match="joint 'j': expected a AbstractJoint"):
        b.add_joint("j", mb.KineticEnergy())


# --------------------------------------------------------------------------- parameters, stacking


def test_parameters_by_name_and_vmap_over_them():
    model = chain(3)
    assert float(model.parameter("link1.mass")) == 1.0
    heavy = model.with_parameter("link1.mass", 4.0).with_parameter("gravity", (0, 0, -1.0))
    np.testing.assert_allclose(heavy.bodies.mass, [1.0, 4.0, 1.0])
    np.testing.assert_allclose(heavy.parameter("gravity"), [0, 0, -1.0])
    with pytest.raises(KeyError, match="no body, joint or force element 'link9'"):
        model.parameter("link9.mass")
    # A batch of models, one per mass, in one vmap: the potential energy is linear in the mass.
    q, _ = model.initial_state()
    masses = jnp.linspace(1.0, 3.0, 4)
    energies = jax.jit(
        jax.vmap(lambda m: model.with_parameter("link2.mass", m).potential_energy(0.0, q))
    )(masses)
    z = float(q[7 * 2 + 2])
    np.testing.assert_allclose(np.diff(energies), 9.81 * z * np.diff(masses), rtol=1e-12)  # m g z


def test_elements_of_one_type_are_stacked_and_the_graph_does_not_grow():
    short, long = chain(2), chain(12)
    assert len(long.joint_groups) == 1 and long.joint_groups[0].names[-1] == "hinge11"
    assert long.joint_groups[0].elements.frame_i.point.shape == (12, 3)

    def count(jaxpr):
        inner = [
            p.jaxpr if isinstance(p, jax.extend.core.ClosedJaxpr) else p
            for e in jaxpr.eqns
            for p in e.params.values()
            if isinstance(p, jax.extend.core.ClosedJaxpr | jax.extend.core.Jaxpr)
        ]
        return len(jaxpr.eqns) + sum(count(j) for j in inner)

    def size(model):
        q, v = model.initial_state()
        fn = lambda q_, v_: accelerations(model, 0.0, q_, v_, check=False)
        return count(jax.make_jaxpr(fn)(q, v).jaxpr)

    assert size(short) == size(long)


def _pendulum():
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mb.RigidBody("link", mass=2.0, inertia=(0.17, 0.17, 0.002),
                            position=(0, 0, -0.5)))  # fmt: skip
    axis = (0.0, 1.0, 0.0)
    b.add_joint("hinge", mb.Revolute("ground", mb.Frame.from_axis((0, 0, 0), axis),
                                     "link", mb.Frame.from_axis((0, 0, 0.5), axis)))  # fmt: skip
    return b.build()


@pytest.mark.parametrize(
    "path, value, match",
    [
        ("link.mass", 0.0, r"parameter 'link\.mass': must be positive, got 0\.0"),
        ("link.mass", float("nan"), r"parameter 'link\.mass': must be finite"),
        ("link.mas", 1.0, r"parameter 'link\.mas': .* has no 'mas'; it has: mass, inertia"),
    ],
)
def test_with_parameter_refuses_unphysical_values_and_unknown_names(path, value, match):
    with pytest.raises(ValueError, match=match):
        _pendulum().with_parameter(path, value)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"radius": -0.1, "stiffness": 1e6}, r"'SpherePlane\.radius': must be positive"),
        ({"radius": 0.1, "stiffness": -1e6}, r"'SpherePlane\.stiffness': must not be negative"),
        ({"radius": 0.1, "stiffness": 1e6, "damping": -0.5},
         r"'SpherePlane\.damping': must not be negative"),
    ],
)
def test_contacts_refuse_negative_radius_stiffness_and_damping(kwargs, match):
    radius = kwargs.pop("radius")
    with pytest.raises(ValueError, match=match):
        mb.SpherePlane("link", (0.0, 0.0, 0.0), radius, "ground", (0.0, 0.0, 0.0),
                       (0.0, 0.0, 1.0), **kwargs)  # fmt: skip


def test_an_initial_state_off_its_joint_is_refused_naming_the_joint():
    import diffmbs

    model = _pendulum()
    q0, v0 = model.initial_state()
    off = q0.at[0].add(0.4)  # the body's x moved 0.4 m away from the hinge
    with pytest.raises(ValueError, match=r"violates the constraints by 0\.4 at joint 'hinge'"):
        diffmbs.simulate(model, off, v0, jnp.linspace(0.0, 0.01, 3))
    with pytest.raises(ValueError, match=r"not assembled.*violated by 0\.4 at joint 'hinge'"):
        mb.check_configuration(model, off)
    mb.check_configuration(model, q0)  # assembled and regular: no error
