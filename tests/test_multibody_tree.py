"""Joint-coordinate models (``JointCoordinateModel``) against independent references.

* Every tree-joint motion satisfies that joint's constraint equations Φ = 0 (written separately,
  in ``_joints.py``) and inverts to the coordinates it came from.
* Accelerations of a mixed tree (all joint types, reversed joints, a floating body, springs)
  equal the maximal-coordinate KKT solution of the same model.
* Pendulum period against the complete elliptic integral; four-bar closed by a constraint
  against the circle-intersection closed form; energy conservation.
* Gradients of a trajectory loss against central finite differences; clear errors.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from multibody_models import (
    PENDULUM,
    G,
    four_bar,
    four_bar_pins,
    pendulum,
    quat_about,
)
from test_gradient_crosschecks import free_beam
from test_multibody_modal import TIP, L, cantilever

import diffmbs.multibody as mb
from diffmbs.flex import ModalDampingRatios
from diffmbs.integrate import simulate
from diffmbs.rotations import quat_to_matrix
from diffmbs.system import LeastSquaresKKT, accelerations, velocity_constraints

RNG = np.random.default_rng(7)


def _random_frame(scale=0.3):
    axis = RNG.normal(size=3)
    return mb.Frame(RNG.normal(size=3) * scale, np.asarray(quat_to_matrix(quat_about(axis, 1.0))))


def _body(name):
    inertia = np.diag(RNG.uniform(0.1, 0.2, 3))  # satisfies the triangle inequality
    return mb.RigidBody(
        name, mass=RNG.uniform(0.5, 2.0), inertia=inertia, com=RNG.normal(size=3) * 0.1
    )


TREE_JOINTS = [
    mb.Revolute,
    mb.Prismatic,
    mb.Cylindrical,
    mb.Planar,
    mb.Universal,
    mb.Spherical,
    mb.Fixed,
]


@pytest.mark.parametrize("kind", TREE_JOINTS, ids=lambda k: k.__name__)
@pytest.mark.parametrize("reverse", [False, True], ids=["child_j", "child_i"])
def test_tree_motion_satisfies_the_joint_constraints(kind, reverse):
    b = mb.ModelBuilder()
    b.add_body(_body("base"))
    b.add_body(_body("link"))
    b.add_joint("mount", mb.Revolute("ground", _random_frame(), "base", _random_frame()))
    pair = ("link", "base") if reverse else ("base", "link")
    b.add_joint("joint", kind(pair[0], _random_frame(), pair[1], _random_frame()))
    model = b.build()
    jm = mb.in_joint_coordinates(model)
    assert jm.tree_joints == ("mount", "joint") and jm.loop_joints == ()
    nq, nv = kind.motion_sizes
    q = jnp.asarray(RNG.uniform(-3.0, 3.0, size=jm.n_q))
    v = jnp.asarray(RNG.normal(size=jm.n_v))
    if nq == 4:
        q = jm.normalize(q)
    q_max, v_max = eqx.filter_jit(jm.to_maximal)(q, v)
    assert float(jnp.max(jnp.abs(model.constraints(0.0, q_max)))) < 1e-13
    assert float(jnp.max(jnp.abs(velocity_constraints(model, 0.0, q_max, v_max)))) < 1e-13
    q_back, v_back = jm.from_maximal(q_max, v_max)  # angles come back in (−π, π]: q is drawn there
    if nq == 4:  # q and −q are the same rotation
        sl = jm.q_slice("joint")
        q_back = q_back.at[sl].multiply(jnp.sign(q_back[sl][0] * q[sl][0]))
    np.testing.assert_allclose(q_back, q, atol=1e-12)
    np.testing.assert_allclose(v_back, v, atol=1e-11)
    if kind.coordinate_kinds and not reverse:  # the joint's own coordinate read-out agrees
        np.testing.assert_allclose(
            model.joint_coordinates("joint", q_max), q[jm.q_slice("joint")], atol=1e-12
        )


def _mixed_tree():
    """Every tree-joint type, two joints written child-first, a floating body tied by a spring,
    a loop closed by a distance constraint."""
    b = mb.ModelBuilder(gravity=(0.3, -1.0, -9.81))
    for name in ("a", "b", "c", "d", "e", "f", "g", "h", "free"):
        b.add_body(_body(name))
    f = _random_frame
    b.add_joint("j_a", mb.Spherical("ground", f(), "a", f()))
    b.add_joint("j_b", mb.Revolute("b", f(), "a", f()))  # child first: reversed
    b.add_joint("j_c", mb.Prismatic("b", f(), "c", f()))
    b.add_joint("j_d", mb.Universal("a", f(), "d", f()))
    b.add_joint("j_e", mb.Cylindrical("e", f(), "d", f()))  # reversed
    b.add_joint("j_f", mb.Planar("ground", f(), "f", f()))
    b.add_joint("j_g", mb.Fixed("f", f(), "g", f()))
    b.add_joint("j_h", mb.Revolute("g", f(), "h", f()))
    b.add_force("spring", mb.SpringDamper("free", (0.1, 0, 0), "c", (0, 0.1, 0), 40.0, 0.7, 0.3))
    b.add_force("twist", mb.RotationalSpringDamper("j_h", 3.0, 0.2))
    b.add_sensor("energy", mb.MechanicalEnergy())
    b.add_sensor("accel", mb.PointAcceleration("h", (0.1, 0.2, 0.0)))
    return b.build()


def test_mixed_tree_accelerations_equal_the_maximal_kkt_solution():
    model = _mixed_tree()
    jm = mb.in_joint_coordinates(model)
    assert jm.floating_bodies == ("free",)
    assert set(jm.tree_joints) == {f"j_{c}" for c in "abcdefgh"}
    assert (jm.n_q, jm.n_v) == (
        4 + 1 + 1 + 2 + 2 + 3 + 0 + 1 + 7,
        3 + 1 + 1 + 2 + 2 + 3 + 0 + 1 + 6,
    )
    q = jm.normalize(jnp.asarray(RNG.normal(size=jm.n_q)))
    v = jnp.asarray(RNG.normal(size=jm.n_v))

    @jax.jit
    def both(q, v):
        vdot, lam = accelerations(jm, 0.3, q, v)
        q_max, v_max, vdot_max = jm.to_maximal(q, v, vdot)
        ref, _ = accelerations(model, 0.3, q_max, v_max, kkt_solver=LeastSquaresKKT())
        sensors = (jm.sensors(0.3, q, v, vdot), model.sensors(0.3, q_max, v_max, ref))
        return lam, vdot_max, ref, sensors

    lam, vdot_max, ref, (s_tree, s_full) = both(q, v)
    assert lam.shape == (0,)
    np.testing.assert_allclose(vdot_max, ref, rtol=1e-9, atol=1e-9 * float(jnp.max(jnp.abs(ref))))
    np.testing.assert_allclose(s_tree["accel"], s_full["accel"], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(s_tree["energy"], s_full["energy"], rtol=1e-12)


def test_mass_matrix_is_the_kinetic_energy_hessian():
    model = _mixed_tree()
    jm = mb.in_joint_coordinates(model)
    q = jm.normalize(jnp.asarray(RNG.normal(size=jm.n_q)))
    v = jnp.asarray(RNG.normal(size=jm.n_v))
    kinetic = lambda v_: model.kinetic_energy(jm.to_maximal(q, v_)[1])  # noqa: E731
    mass, hessian = jax.jit(lambda v_: (jm.mass(q), jax.hessian(kinetic)(v_)))(v)
    np.testing.assert_allclose(mass, hessian, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- dynamics


def test_pendulum_period_and_energy_in_joint_coordinates():
    theta0 = np.pi / 2
    m, d = PENDULUM["mass"], PENDULUM["distance"]
    i_o = PENDULUM["inertia"][1] + m * d**2
    period = 4 * np.sqrt(i_o / (m * d) / G) * scipy.special.ellipk(np.sin(theta0 / 2) ** 2)
    jm = mb.in_joint_coordinates(pendulum(theta0))
    q0, v0 = jm.initial_state()
    assert jm.n_q == 1
    np.testing.assert_allclose(q0, [-theta0], atol=1e-12)  # angle of x_j about y from x_i
    ts = jnp.linspace(0.0, 1.1 * period, 881)
    sol = simulate(jm, q0, v0, ts, rtol=1e-11, atol=1e-13)
    # Released from −θ₀ at rest, the angle crosses 0 at T/4 and 3T/4.
    x, xd, xdd = (np.asarray(a[:, 0]) for a in (sol.q, sol.v, sol.vdot))
    t = []
    for i in np.flatnonzero(np.sign(x[:-1]) != np.sign(x[1:])):
        j = i if abs(x[i]) < abs(x[i + 1]) else i + 1  # Newton on the Taylor expansion there
        tau = -x[j] / xd[j]
        for _ in range(4):
            tau -= (x[j] + xd[j] * tau + 0.5 * xdd[j] * tau**2) / (xd[j] + xdd[j] * tau)
        t.append(float(ts[j]) + tau)
    assert len(t) == 2
    np.testing.assert_allclose(t[0], period / 4, rtol=1e-8)
    np.testing.assert_allclose(t[1] - t[0], period / 2, rtol=1e-8)
    energy = np.asarray(sol.sensors["energy"])
    assert np.max(np.abs(energy - energy[0])) / (m * G * d) < 1e-9
    assert float(sol.constraint_drift) == 0.0  # no constraints left


def test_four_bar_closed_by_one_constraint_follows_the_closed_form():
    model = four_bar()
    q0_max = mb.assemble(model, joint_coordinates={"A": np.pi / 3})
    v0_max = mb.consistent_velocities(model, q0_max, joint_rates={"A": 3.0})
    jm = mb.in_joint_coordinates(model)
    assert jm.loop_joints == ("C",) and jm.n_q == 3
    q0, v0 = jm.from_maximal(q0_max, v0_max)
    np.testing.assert_allclose(q0[jm.q_slice("A")], [np.pi / 3], atol=1e-12)
    ts = jnp.linspace(0.0, 2.0, 401)
    sol = simulate(jm, q0, v0, ts, rtol=1e-10, atol=1e-12)
    energy = np.asarray(sol.sensors["energy"])
    assert np.max(np.abs(energy - energy[0])) / np.abs(energy[0]) < 1e-8
    assert float(sol.constraint_drift) < 1e-9
    theta = np.asarray(sol.q[:, jm.q_slice("A")][:, 0])
    np.testing.assert_allclose(
        np.asarray(sol.sensors["crank_angle"][:, 0]), _wrap(theta), atol=1e-9
    )
    assert np.ptp(theta) > 2.0
    q_max = np.asarray(jax.vmap(lambda q: jm.to_maximal(q)[0])(sol.q))
    c_sim, c_ref = four_bar_pins(theta, q_max[:, 7:10])  # coupler COM
    np.testing.assert_allclose(c_sim, c_ref, atol=1e-9)

def _modal_tree():
    """Modal bodies in every role: welded to a floating rigid body (its frame a tree child, as
    the shock machine's channels), on a revolute to it, and floating, pinned to the ground at
    one of its nodes (a joint on a node stays a constraint); a spring between nodes."""
    b = mb.ModelBuilder(gravity=(0.3, -1.0, -9.81))
    b.add_body(_body("base"))
    b.add_body(mb.ModalBody("welded", cantilever(), damping=ModalDampingRatios(0.05)))
    b.add_body(mb.ModalBody("hinged", cantilever()))
    b.add_body(mb.ModalBody("loose", free_beam(), position=(0.2, 0.1, -0.3)))
    f = _random_frame
    b.add_joint("weld", mb.Fixed("base", f(), "welded", mb.Frame((0.0, 0.0, 0.0))))
    b.add_joint("hinge", mb.Revolute("base", f(), "hinged", mb.Frame((0.0, 0.0, 0.0))))
    b.add_joint("pin", mb.Spherical("ground", f(), mb.node("loose", 0), mb.Frame((0, 0, 0))))
    b.add_force("tie", mb.SpringDamper(mb.node("welded", TIP), (0, 0, 0), mb.node("loose", TIP),
                                       (0, 0, 0), 300.0, 0.5, 0.4))  # fmt: skip
    b.add_force("mount", mb.Bushing("ground", (0.0, 0.0, 0.0), "base", (0.0, 0.0, 0.0),
                                    stiffness=(50.0,) * 3, damping=(0.2,) * 3,
                                    rotational_stiffness=(5.0,) * 3))  # fmt: skip
    b.add_sensor("energy", mb.MechanicalEnergy())
    b.add_sensor("tip", mb.PointAcceleration(mb.node("hinged", TIP)))
    return b.build()


@pytest.mark.long
def test_modal_bodies_in_the_tree_equal_the_maximal_kkt_solution():
    """Accelerations (deformation-dependent FFR mass, quadratic velocity forces, loads on nodes)
    and sensors in joint coordinates equal the maximal-coordinate KKT solution at a random
    state, the mass matrix is the kinetic energy's Hessian, and the state maps both ways."""
    model = _modal_tree()
    jm = mb.in_joint_coordinates(model)
    assert set(jm.tree_joints) == {"hinge", "weld"} and jm.loop_joints == ("pin",)
    assert jm.floating_bodies == ("base", "loose")
    modes = 2 * cantilever().n_modes + free_beam().n_modes
    assert (jm.n_q, jm.n_v) == (1 + 0 + 7 + 7 + modes, 1 + 0 + 6 + 6 + modes)
    assert jm.q_slice("loose.modes").stop - jm.q_slice("loose.modes").start == free_beam().n_modes
    rng = np.random.default_rng(11)  # its own: the test's state does not depend on the order
    q = jm.normalize(jnp.asarray(rng.normal(size=jm.n_q)) * 0.5)
    for body in ("welded", "hinged", "loose"):  # deflections of a few cm
        q = q.at[jm.q_slice(f"{body}.modes")].multiply(0.02)
    v = jnp.asarray(rng.normal(size=jm.n_v))

    @jax.jit
    def both(q, v):
        vdot, _ = accelerations(jm, 0.3, q, v)
        q_max, v_max, vdot_max = jm.to_maximal(q, v, vdot)
        ref, lam_ref = accelerations(model, 0.3, q_max, v_max, kkt_solver=LeastSquaresKKT())
        sensors = (jm.sensors(0.3, q, v, vdot), model.sensors(0.3, q_max, v_max, ref))
        kinetic = lambda v_: model.kinetic_energy(jm.to_maximal(q, v_)[1], q_max)  # noqa: E731
        return vdot_max, ref, sensors, jm.mass(q), jax.hessian(kinetic)(v), q_max, v_max

    vdot_max, ref, (s_tree, s_full), mass, hessian, q_max, v_max = both(q, v)
    # the reference's own error: the pin's loop closure through LeastSquaresKKT (≤ 1e-8 seen)
    scale = float(jnp.max(jnp.abs(ref)))
    np.testing.assert_allclose(vdot_max, ref, rtol=1e-7, atol=1e-9 * scale)
    np.testing.assert_allclose(s_tree["tip"], s_full["tip"], rtol=1e-8, atol=1e-8 * scale)
    np.testing.assert_allclose(s_tree["energy"], s_full["energy"], rtol=1e-12)
    np.testing.assert_allclose(mass, hessian, rtol=1e-11, atol=1e-11 * float(jnp.max(mass)))
    back_q, back_v = jm.from_maximal(q_max, v_max)  # quaternions come back up to their sign
    np.testing.assert_allclose(jm.to_maximal(back_q)[0], q_max, atol=1e-12)
    np.testing.assert_allclose(back_v, v, atol=1e-11)


def test_flexible_pendulum_in_joint_coordinates_conserves_energy():
    """A cantilever's modal body on a revolute at its clamped end (its frame), swinging under
    gravity through the bottom: 1 + 3 coordinates, no constraint, energy conserved."""
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mb.ModalBody("beam", cantilever()))
    b.add_joint("hinge", mb.Revolute("ground", mb.Frame.from_axis((0, 0, 0), (0, 1, 0)), "beam",
                                     mb.Frame.from_axis((0, 0, 0), (0, 1, 0))))  # fmt: skip
    b.add_sensor("energy", mb.MechanicalEnergy())
    b.add_sensor("tip", mb.PointPosition(mb.node("beam", TIP)))
    jm = mb.in_joint_coordinates(b.build())
    assert (jm.n_q, jm.n_v, jm.loop_joints) == (1 + 3, 1 + 3, ())
    q0, v0 = jm.initial_state()
    sol = simulate(jm, q0, v0, jnp.linspace(0.0, 1.0, 101), rtol=1e-10, atol=1e-13)
    energy = np.asarray(sol.sensors["energy"])
    scale = float(cantilever().invariants.mass) * 9.81 * L / 2
    assert np.max(np.abs(energy - energy[0])) / scale < 1e-8
    assert np.asarray(sol.sensors["tip"])[:, 2].min() < -0.9 * L  # it swung through the bottom
    assert np.max(np.abs(sol.q[:, 1:])) > 1e-6  # and deformed


def _wrap(a):
    return np.arctan2(np.sin(a), np.cos(a))


# --------------------------------------------------------------------------- errors


def test_unassembled_state_names_the_joint():
    model = four_bar()  # rough initial poses: the rocker (joint D) is off the most
    jm = mb.in_joint_coordinates(model)
    with pytest.raises(mb.ModelError, match=r"tree joint 'D' is not assembled \(\|Φ\| = 0.117\)"):
        jm.initial_state()


def test_bad_cut_and_unknown_names_are_reported():
    model = four_bar()
    with pytest.raises(mb.ModelError, match="cut joint 'Z' is not a joint"):
        mb.in_joint_coordinates(model, cut=("Z",))
    jm = mb.in_joint_coordinates(model, cut=("A",))
    assert jm.loop_joints == ("A",) and "A" not in jm.tree_joints
    with pytest.raises(KeyError, match="'A' has no joint coordinates"):
        jm.q_slice("A")
