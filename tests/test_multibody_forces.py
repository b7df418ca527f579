"""Force elements and sensors against forces computed by hand at one state.

Three free bodies (centres of mass off their frame origins, arbitrary poses and velocities) carry
one element of every kind. The expected generalized forces are assembled here from each
element's physical law — Hooke's law plus Hunt–Crossley stops ``K δⁿ (1 + χ δ̇)`` along the
spring, the torsional law about the hinge axis, the bushing's diagonal stiffness in frame i, the
Hunt–Crossley contact law along the contact normal, the applied loads — and Newton–Euler:
``Q = (Σ F + m g, Rᵀ Σ (ρ × F + τ) − ω̄ × J̄ ω̄)``. Rates are central finite differences of the
geometry along the motion. Sensors: a spinning, free-falling body's accelerometer readings.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from scipy.spatial.transform import Rotation

import diffmbs.multibody as mb
from diffmbs.rotations import matrix_to_quat
from diffmbs.system import accelerations

G_VEC = np.array([0.0, 0.0, -9.81])
T = 0.25


def rotation(vec):
    return Rotation.from_rotvec(vec).as_matrix()


class Pose:
    """A body's state in world terms: COM r, rotation R, COM velocity v, world ω."""

    def __init__(self, com_body, r, rot, v, omega):
        self.c, self.r, self.rot, self.v, self.w = map(np.asarray, (com_body, r, rot, v, omega))

    def point(self, s):
        return self.r + self.rot @ (np.asarray(s) - self.c)

    def velocity(self, s):
        return self.v + np.cross(self.w, self.rot @ (np.asarray(s) - self.c))

    def moved(self, h):
        """The pose after time h of the rigid motion (for finite differences of rates)."""
        return Pose(self.c, self.r + h * self.v, rotation(h * self.w) @ self.rot, self.v, self.w)


MASS = {"a": 2.0, "b": 1.5, "c": 0.8}
INERTIA = {
    "a": np.diag([0.02, 0.03, 0.04]),
    "b": np.diag([0.01, 0.01, 0.02]),
    "c": np.diag([0.005, 0.006, 0.007]),
}
COM = {
    "a": np.array([0.03, -0.02, 0.01]),
    "b": np.array([0.0, 0.04, -0.01]),
    "c": np.array([0.02, 0.0, 0.0]),
}

# Poses: a anywhere; b placed so that its sphere overlaps a's by 2 cm; c's sphere 1 cm into a
# tilted ground plane.
SPHERE_A, SPHERE_B, SPHERE_C = (0.05, 0.0, 0.0), (0.0, -0.05, 0.0), (0.0, 0.0, -0.02)
R_SPHERE = 0.1
PLANE_NORMAL = np.array([0.1, 0.0, 1.0]) / np.linalg.norm([0.1, 0.0, 1.0])
POSES = {
    "a": Pose(
        COM["a"], (0.0, 0.0, 0.5), rotation([0.2, 0.4, -0.1]), (0.1, -0.2, 0.05), (0.3, -0.1, 0.2)
    )
}
_rot_b = rotation([-0.3, 0.1, 0.5])
_center_b = POSES["a"].point(SPHERE_A) + 0.18 * np.array([0.6, 0.8, 0.0])
POSES["b"] = Pose(
    COM["b"],
    _center_b - _rot_b @ (np.array(SPHERE_B) - COM["b"]),
    _rot_b,
    (-0.05, 0.1, 0.2),
    (0.1, 0.4, -0.3),
)
_rot_c = rotation([0.5, -0.2, 0.3])
_lateral = np.array([0.3, -0.2, 0.0])
_center_c = _lateral - (_lateral @ PLANE_NORMAL) * PLANE_NORMAL + 0.09 * PLANE_NORMAL  # 9 cm up
POSES["c"] = Pose(
    COM["c"],
    _center_c - _rot_c @ (np.array(SPHERE_C) - COM["c"]),
    _rot_c,
    (0.2, 0.0, -0.4),
    (-0.2, 0.5, 0.1),
)

ANCHOR, SPRING_POINT = np.array([0.1, 0.2, 1.2]), np.array([0.02, 0.05, 0.1])
K, C, L0, F_ACT = 300.0, 4.0, 0.3, 2.0
_spring_length = np.linalg.norm(POSES["a"].point(SPRING_POINT) - ANCHOR)
STOP = {"upper": _spring_length - 0.01, "stiffness": 2e6, "damping": 0.5, "exponent": 1.5}
HINGE_I = mb.Frame.from_axis((0.1, 0.0, 0.0), (0.0, 1.0, 0.3))
HINGE_J = mb.Frame.from_axis((-0.1, 0.02, 0.0), (0.2, 1.0, 0.0))
K_ROT, C_ROT, THETA0, TAU_ACT = 5.0, 0.3, 0.2, -0.4
BUSH_I, BUSH_J = mb.Frame((0.0, 0.1, 0.0), rotation([0.1, 0.0, 0.2])), mb.Frame((0.05, 0.0, 0.0))
K_BUSH, C_BUSH = np.array([1e3, 2e3, 3e3]), np.array([5.0, 6.0, 7.0])
KR_BUSH, CR_BUSH = np.array([10.0, 20.0, 30.0]), np.array([0.1, 0.2, 0.3])
K_CONTACT, CHI, EXPONENT = 1e6, 0.4, 1.5
POINT_B = np.array([0.0, 0.1, 0.05])
PLANE_ON_A_NORMAL = np.array([0.0, 0.0, 1.0])
# The plane on a passes 5 mm above b's point (normal a's body z).
_n_world = POSES["a"].rot @ PLANE_ON_A_NORMAL
PLANE_ON_A_POINT = (
    POSES["a"].rot.T @ (POSES["b"].point(POINT_B) + 0.005 * _n_world - POSES["a"].r) + COM["a"]
)
APPLIED_POINT = np.array([0.0, 0.03, 0.0])


def applied_force(t, k):
    return jnp.array([1.0, -2.0, 0.5]) * (1 + t)


def applied_torque(t, k):
    return jnp.array([0.1, 0.0, -0.2]) + 0.3 * k.velocity


def build():
    b = mb.ModelBuilder(gravity=G_VEC)
    for name, pose in POSES.items():
        origin = pose.r - pose.rot @ pose.c
        b.add_body(
            mb.RigidBody(
                name,
                mass=MASS[name],
                inertia=INERTIA[name],
                com=COM[name],
                position=origin,
                orientation=matrix_to_quat(pose.rot),
                velocity=pose.velocity(np.zeros(3)),
                angular_velocity=pose.rot.T @ pose.w,
            )
        )
    b.add_joint("hinge", mb.Revolute("a", HINGE_I, "b", HINGE_J))  # not assembled: irrelevant
    stops = mb.LengthStops(None, STOP["upper"], stiffness=STOP["stiffness"],
                           damping=STOP["damping"])  # fmt: skip
    b.add_force(
        "spring", mb.SpringDamper("ground", ANCHOR, "a", SPRING_POINT, K, L0, C, F_ACT, stops)
    )
    b.add_force("torsion", mb.RotationalSpringDamper("hinge", K_ROT, C_ROT, THETA0, TAU_ACT))
    b.add_force("bush", mb.Bushing("b", BUSH_I, "c", BUSH_J, K_BUSH, KR_BUSH, C_BUSH, CR_BUSH))
    b.add_force(
        "ball_ball",
        mb.SphereSphere("a", SPHERE_A, R_SPHERE, "b", SPHERE_B, R_SPHERE, stiffness=K_CONTACT,
                        damping=CHI),  # fmt: skip
    )
    b.add_force(
        "ball_floor",
        mb.SpherePlane("c", SPHERE_C, R_SPHERE, "ground", (0, 0, 0), PLANE_NORMAL,
                       stiffness=K_CONTACT, damping=CHI),  # fmt: skip
    )
    b.add_force(
        "tip", mb.PointPlane("b", POINT_B, "a", PLANE_ON_A_POINT, PLANE_ON_A_NORMAL,
                            stiffness=K_CONTACT, damping=CHI)  # fmt: skip
    )
    b.add_force("push", mb.AppliedForce("c", APPLIED_POINT, applied_force, axes="body"))
    b.add_force("twist", mb.AppliedTorque("a", applied_torque))
    return b.build()


def hunt_crossley(delta, rate, k, chi, n=EXPONENT):
    assert delta > 1e-4  # far beyond the smoothing length: the plain law applies
    return k * delta**n * (1 + chi * rate)


def rate_of(fn, h=1e-6):
    """d/dt of fn(poses) along the rigid motions, by central differences."""
    plus = {k: p.moved(h) for k, p in POSES.items()}
    minus = {k: p.moved(-h) for k, p in POSES.items()}
    return (np.asarray(fn(plus)) - np.asarray(fn(minus))) / (2 * h)


def expected_loads():
    """Per body: world force (3,) and world torque about the COM (3,), by hand."""
    loads = {k: [np.zeros(3), np.zeros(3)] for k in POSES}

    def apply(body, force, point=None, couple=None):
        pose = POSES[body]
        loads[body][0] += force
        arm = np.zeros(3) if point is None else point - pose.r
        loads[body][1] += np.cross(arm, force) + (0.0 if couple is None else couple)

    # Spring with upper stop: tension along the line.
    spring_len = lambda p: np.linalg.norm(p["a"].point(SPRING_POINT) - ANCHOR)
    length, length_rate = spring_len(POSES), rate_of(spring_len)
    tension = K * (length - L0) + C * length_rate + F_ACT
    tension += hunt_crossley(
        length - STOP["upper"], length_rate, STOP["stiffness"], STOP["damping"]
    )
    p_a = POSES["a"].point(SPRING_POINT)
    apply("a", -tension * (p_a - ANCHOR) / length, p_a)

    # Torsional spring: angle of x_j about z_i from x_i; torque about z_i on b.
    def angle(p):
        xi = p["a"].rot @ np.asarray(HINGE_I.rotation)
        xj = p["b"].rot @ np.asarray(HINGE_J.rotation)
        return np.arctan2(xj[:, 0] @ xi[:, 1], xj[:, 0] @ xi[:, 0])

    axis = POSES["a"].rot @ np.asarray(HINGE_I.rotation)[:, 2]
    torque = -K_ROT * (angle(POSES) - THETA0) - C_ROT * (axis @ (POSES["b"].w - POSES["a"].w))
    torque += TAU_ACT
    apply("b", np.zeros(3), None, torque * axis)
    apply("a", np.zeros(3), None, -torque * axis)

    # Bushing, frame-i components; rates by differences of the deflections.
    def deflection(p):
        xi = p["b"].rot @ np.asarray(BUSH_I.rotation)
        xj = p["c"].rot @ np.asarray(BUSH_J.rotation)
        d = xi.T @ (p["c"].point(BUSH_J.point) - p["b"].point(BUSH_I.point))
        rel = xi.T @ xj
        return np.concatenate(
            [
                d,
                0.5
                * np.array([rel[2, 1] - rel[1, 2], rel[0, 2] - rel[2, 0], rel[1, 0] - rel[0, 1]]),
            ]
        )

    defl = deflection(POSES)
    d_rate = rate_of(deflection)[:3]
    xi = POSES["b"].rot @ np.asarray(BUSH_I.rotation)
    omega_rel = xi.T @ (POSES["c"].w - POSES["b"].w)
    force = xi @ (-K_BUSH * defl[:3] - C_BUSH * d_rate)
    couple = xi @ (-KR_BUSH * defl[3:] - CR_BUSH * omega_rel)
    at = POSES["c"].point(BUSH_J.point)
    apply("c", force, at, couple)
    apply("b", -force, at, -couple)
    # Sphere–sphere.
    gap = lambda p: np.linalg.norm(p["b"].point(SPHERE_B) - p["a"].point(SPHERE_A))
    c_a, c_b = POSES["a"].point(SPHERE_A), POSES["b"].point(SPHERE_B)
    normal = (c_b - c_a) / gap(POSES)
    delta = 2 * R_SPHERE - gap(POSES)
    f = hunt_crossley(delta, -rate_of(gap), K_CONTACT, CHI)
    at = c_a + (R_SPHERE - delta / 2) * normal
    apply("b", f * normal, at)
    apply("a", -f * normal, at)
    # Sphere–plane (ground).
    height = lambda p: p["c"].point(SPHERE_C) @ PLANE_NORMAL
    f = hunt_crossley(R_SPHERE - height(POSES), -rate_of(height), K_CONTACT, CHI)
    apply("c", f * PLANE_NORMAL, POSES["c"].point(SPHERE_C) - height(POSES) * PLANE_NORMAL)

    # Point–plane, plane on a.
    def depth(p):
        n = p["a"].rot @ PLANE_ON_A_NORMAL
        return -(p["b"].point(POINT_B) - p["a"].point(PLANE_ON_A_POINT)) @ n

    f = hunt_crossley(depth(POSES), rate_of(depth), K_CONTACT, CHI)
    n = POSES["a"].rot @ PLANE_ON_A_NORMAL
    at = POSES["b"].point(POINT_B) + depth(POSES) * n
    apply("b", f * n, at)
    apply("a", -f * n, at)
    # Applied loads: a body-axes force on c, a world torque on a.
    apply(
        "c", POSES["c"].rot @ np.array([1.0, -2.0, 0.5]) * (1 + T), POSES["c"].point(APPLIED_POINT)
    )
    apply("a", np.zeros(3), None, np.array([0.1, 0.0, -0.2]) + 0.3 * POSES["a"].v)
    return loads


def test_generalized_forces_of_every_element_match_hand_calculation():
    model = build()
    q, v = model.initial_state()
    got = np.asarray(eqx.filter_jit(lambda m, q_, v_: m.forces(T, q_, v_))(model, q, v))
    loads = expected_loads()
    for i, name in enumerate(POSES):
        pose = POSES[name]
        omega_bar = pose.rot.T @ pose.w
        force = loads[name][0] + MASS[name] * G_VEC
        torque = pose.rot.T @ loads[name][1] - np.cross(omega_bar, INERTIA[name] @ omega_bar)
        scale = np.max(np.abs(loads[name][0])) + 1.0
        np.testing.assert_allclose(got[6 * i : 6 * i + 3], force, rtol=0, atol=2e-7 * scale)
        np.testing.assert_allclose(got[6 * i + 3 : 6 * i + 6], torque, rtol=0, atol=2e-7 * scale)


def test_element_outputs_and_potential_energy():
    model = build()
    q, v = model.initial_state()
    tension = float(model.element_output("spring", T, q, v))
    stretch = np.linalg.norm(POSES["a"].point(SPRING_POINT) - ANCHOR)
    assert tension > K * (stretch - L0)  # the stop adds to it
    floor = float(model.element_output("ball_floor", T, q, v))
    assert floor > 0
    # Potential energy: gravity + ½ k (L − L₀)² + stop + bushing + contacts (K δⁿ⁺¹/(n+1)).
    energy = -sum(MASS[k] * G_VEC @ POSES[k].r for k in POSES)
    energy += 0.5 * K * (stretch - L0) ** 2
    energy += STOP["stiffness"] * (stretch - STOP["upper"]) ** 2.5 / 2.5
    energy += expected_deflection_energy()
    for delta in contact_depths():
        energy += K_CONTACT * delta**2.5 / 2.5
    np.testing.assert_allclose(model.potential_energy(T, q), energy, rtol=1e-9)


def expected_deflection_energy():
    xi = POSES["b"].rot @ np.asarray(BUSH_I.rotation)
    xj = POSES["c"].rot @ np.asarray(BUSH_J.rotation)
    d = xi.T @ (POSES["c"].point(BUSH_J.point) - POSES["b"].point(BUSH_I.point))
    rel = xi.T @ xj
    phi = 0.5 * np.array([rel[2, 1] - rel[1, 2], rel[0, 2] - rel[2, 0], rel[1, 0] - rel[0, 1]])
    xa = POSES["a"].rot @ np.asarray(HINGE_I.rotation)
    xb = POSES["b"].rot @ np.asarray(HINGE_J.rotation)
    theta = np.arctan2(xb[:, 0] @ xa[:, 1], xb[:, 0] @ xa[:, 0])
    return 0.5 * (d @ (K_BUSH * d) + phi @ (KR_BUSH * phi)) + 0.5 * K_ROT * (theta - THETA0) ** 2


def contact_depths():
    gap = np.linalg.norm(POSES["b"].point(SPHERE_B) - POSES["a"].point(SPHERE_A))
    height = POSES["c"].point(SPHERE_C) @ PLANE_NORMAL
    n = POSES["a"].rot @ PLANE_ON_A_NORMAL
    depth = -(POSES["b"].point(POINT_B) - POSES["a"].point(PLANE_ON_A_POINT)) @ n
    return [2 * R_SPHERE - gap, R_SPHERE - height, depth]


def test_accelerometer_on_a_spinning_body_in_free_fall():
    """Torque-free spin about a principal axis, in free fall: every point accelerates at
    g − ω² ρ⊥; an accelerometer (specific force) reads −ω² ρ⊥ only."""
    spin, point = 7.0, np.array([0.1, 0.05, 0.2])
    rot = rotation([0.3, -0.5, 0.2])
    b = mb.ModelBuilder(gravity=G_VEC)
    b.add_body(
        mb.RigidBody(
            "rotor",
            mass=1.0,
            inertia=(0.01, 0.02, 0.03),
            orientation=matrix_to_quat(rot),
            velocity=(0.5, 0.0, 1.0),
            angular_velocity=(0.0, 0.0, spin),
        )
    )
    for name, kwargs in {
        "kinematic_world": {},
        "accelerometer_world": {"include_gravity": True},
        "accelerometer_body": {"include_gravity": True, "axes": "body"},
    }.items():
        b.add_sensor(name, mb.PointAcceleration("rotor", point, **kwargs))
    b.add_sensor("velocity_body", mb.PointVelocity("rotor", point, axes="body"))
    b.add_sensor("position", mb.PointPosition("rotor", point))
    b.add_sensor("omega_world", mb.BodyAngularVelocity("rotor", axes="world"))
    b.add_sensor("kinetic", mb.KineticEnergy())
    model = b.build()
    q, v = model.initial_state()

    @jax.jit
    def read(q_, v_):
        vdot, _ = accelerations(model, 0.0, q_, v_)
        return model.sensors(0.0, q_, v_, vdot)

    out = jax.tree.map(np.asarray, read(q, v))
    centripetal_body = -(spin**2) * np.array([point[0], point[1], 0.0])
    np.testing.assert_allclose(out["accelerometer_body"], centripetal_body, atol=1e-12)
    np.testing.assert_allclose(out["accelerometer_world"], rot @ centripetal_body, atol=1e-12)
    np.testing.assert_allclose(out["kinematic_world"], rot @ centripetal_body + G_VEC, atol=1e-12)
    v_body = rot.T @ np.array([0.5, 0.0, 1.0]) + np.cross([0, 0, spin], point)
    np.testing.assert_allclose(out["velocity_body"], v_body, atol=1e-12)
    np.testing.assert_allclose(out["position"], rot @ point, atol=1e-15)
    np.testing.assert_allclose(out["omega_world"], rot @ [0, 0, spin], atol=1e-12)
    np.testing.assert_allclose(out["kinetic"], 0.5 * (1.25 + 0.03 * spin**2), rtol=1e-14)


def test_derivatives_stay_finite_at_degenerate_geometry():
    """Zero spring length and coincident sphere centres: the direction is undefined, the loads
    and their derivatives must be finite (guarded norms, no NaN in untaken branches)."""
    still = mb.BodyKinematics(jnp.zeros(3), jnp.eye(3), jnp.zeros(3), jnp.zeros(3), jnp.zeros(3))
    elements = [
        mb.SpringDamper("a", (0, 0, 0), "b", (0, 0, 0), 10.0, 0.5, 1.0),
        mb.SphereSphere("a", (0, 0, 0), 0.1, "b", (0, 0, 0), 0.1, stiffness=1e5, damping=0.3),
    ]
    for element in elements:

        def load(position, element=element):
            moved = mb.BodyKinematics(
                position, still.rotation, still.com, jnp.zeros(3), jnp.zeros(3)
            )
            return element.wrench(0.0, still, moved).force

        jac = jax.jit(jax.jacfwd(load))(jnp.zeros(3))
        assert np.all(np.isfinite(np.asarray(jac)))
        assert np.all(np.isfinite(np.asarray(jax.jit(load)(jnp.zeros(3)))))


def test_points_against_a_plane_act_as_separate_point_contacts():
    """``PointsPlane`` (four corners of a tilted, spinning plate on a tilted ground plane, two of
    them penetrating) gives the generalized forces, element outputs and potential energy of four
    ``PointPlane`` elements with the same parameters."""
    corners = np.array([[x, y, -0.05] for x in (-0.4, 0.4) for y in (-0.3, 0.3)])
    normal = np.array([0.05, -0.1, 1.0])
    orientation = matrix_to_quat(jnp.asarray(Rotation.from_rotvec([0.02, -0.03, 0.1]).as_matrix()))
    law = dict(stiffness=2e9, damping=0.4, smoothing=1e-5)

    def build(split: bool):
        b = mb.ModelBuilder()
        b.add_body(mb.RigidBody("plate", mass=50.0, inertia=[2.0, 3.0, 4.0],
                                position=(0.0, 0.0, 0.0502), orientation=orientation,
                                velocity=(0.1, -0.2, -0.5), angular_velocity=(0.3, -0.2, 0.7)))
        if split:
            for k, c in enumerate(corners):
                b.add_force(f"c{k}", mb.PointPlane("plate", c, "ground", (0, 0, 0), normal, **law))
        else:
            b.add_force("c", mb.PointsPlane("plate", corners, "ground", (0, 0, 0), normal, **law))
        return b.build()  # fmt: skip

    one, four = build(False), build(True)
    q, v = one.initial_state()
    np.testing.assert_allclose(one.forces(0.0, q, v), four.forces(0.0, q, v), rtol=1e-12,
                               atol=1e-9)  # fmt: skip
    outputs = one.element_output("c", 0.0, q, v)
    separate = np.array([four.element_output(f"c{k}", 0.0, q, v) for k in range(4)])
    np.testing.assert_allclose(outputs, separate, rtol=1e-12)
    assert np.sum(separate > 1.0) == 2  # two corners in contact, two clear
    np.testing.assert_allclose(one.potential_energy(0.0, q), four.potential_energy(0.0, q),
                               rtol=1e-12)  # fmt: skip
