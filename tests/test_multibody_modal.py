"""Modal (floating frame of reference) bodies inside the multibody engine, FE nodes as attachments.

References, none from the code under test:
- a zero-mode modal body against the same body as a ``RigidBody`` (mass properties by the
  parallel-axis theorem from the FE invariants);
- the first eigenvalue of the FE cantilever (scipy.linalg.eigh of K, M with the root DOFs
  removed), and the Euler–Bernoulli closed form 1.8751² √(EI/(ρA L⁴)) as a sanity bound;
- conservation of mechanical energy of a flexible pendulum;
- the static tip deflection P L³ / (3 E I) of an Euler–Bernoulli cantilever (equilibrium by
  Newton on the model's residual Q − Φ_vᵀλ, Φ).

Gradients through a modal body: ``test_gradient_crosschecks.py``.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import diffmbs.multibody as mb
from diffmbs import simulate
from diffmbs.flex import (
    BeamModel,
    CraigBampton,
    EulerBernoulli,
    FixedInterfaceModes,
    FreeFreeModes,
    Material,
    ModalDampingRatios,
    RectangularSection,
    beam_line,
    modal_data,
)
from diffmbs.rotations import quat_from_rotation_vector

L, N_EL, WIDTH, HEIGHT = 1.0, 4, 0.03, 0.02
E, RHO = 2.0e9, 1200.0  # a soft polymer: low frequencies, cheap explicit integration
I_Y = WIDTH * HEIGHT**3 / 12  # bending in the x–z plane (deflection along z)
TIP = N_EL


@functools.cache  # built on first use, not at collection (every test worker imports this file)
def beam_fe():
    nodes, elements = beam_line([0.0, 0.0, 0.0], [L, 0.0, 0.0], N_EL)
    section = RectangularSection(WIDTH, HEIGHT)
    beam = BeamModel(nodes, elements, section, Material(E, RHO, 0.3), theory=EulerBernoulli())
    return beam.assemble()


@functools.cache
def cantilever():
    """The beam's modal data clamped at its root: three fixed-interface modes."""
    return modal_data(beam_fe(), FixedInterfaceModes(beam_fe().dofs(0), n_modes=3)(beam_fe()))


def clamped(data, damping_ratio=0.0, gravity=(0.0, 0.0, 0.0)):
    """The beam clamped at its root node to the ground (Fixed joint)."""
    b = mb.ModelBuilder(gravity=gravity)
    b.add_body(mb.ModalBody("beam", data, damping=ModalDampingRatios(damping_ratio)))
    root = mb.node("beam", 0)
    b.add_joint("clamp", mb.Fixed("ground", mb.Frame((0.0, 0.0, 0.0)), root, mb.Frame((0, 0, 0))))
    b.add_sensor("tip", mb.PointPosition(mb.node("beam", TIP)))
    b.add_sensor("tip_acc", mb.PointAcceleration(mb.node("beam", TIP)))
    return b.build()


def cantilever_eigenvalue():
    free = np.setdiff1d(np.arange(beam_fe().n_dof), beam_fe().dofs(0))
    k, mm = (np.asarray(a)[np.ix_(free, free)] for a in (beam_fe().stiffness, beam_fe().mass))
    return np.sqrt(scipy.linalg.eigh(k, mm, eigvals_only=True)[0])


OMEGA = cantilever_eigenvalue()
AMP = 1e-4  # m/s per unit amplitude: initial rate of the first mode (bending along z)
TS = jnp.linspace(0.0, 8 * 2 * np.pi / OMEGA, 401)  # 8 periods
TIGHT = {"rtol": 1e-11, "atol": 1e-14}


def vibrate(model):
    """Free vibration from the first mode's rate ``AMP`` (one compiled ``simulate`` shared by
    the frequency and the gradient tests)."""
    q0, v0 = model.initial_state()
    return simulate(model, q0, v0.at[6].set(AMP), TS, **TIGHT)


# --------------------------------------------------------------------------- zero modes


def test_zero_mode_modal_body_is_the_rigid_body():
    data = modal_data(beam_fe(), FreeFreeModes(n_modes=0)(beam_fe()))
    inv = data.invariants
    m = float(inv.mass)
    c = np.asarray(inv.first_moment) / m
    j_g = np.asarray(inv.inertia) - m * (c @ c * np.eye(3) - np.outer(c, c))
    quat = np.array([np.cos(0.3), 0.2 * np.sin(0.3), -0.5 * np.sin(0.3), 0.4 * np.sin(0.3)])
    quat /= np.linalg.norm(quat)
    pose = {"orientation": quat, "angular_velocity": (1.5, -2.0, 4.0)}
    pin = (0.1, 0.0, 0.0)  # a point of the body frame (FE node 0 is at the origin)

    def build(body, attach):
        b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
        b.add_body(body)
        b.add_joint("ball", mb.Spherical("ground", mb.Frame(quat_apply(quat, pin)), attach, pin))
        return b.build()

    rigid = build(mb.RigidBody("beam", m, j_g, com=c, **pose), "beam")
    modal = build(mb.ModalBody("beam", data, **pose), mb.node("beam", 0))
    assert modal.modal_bodies[0].n_modes == 0
    ts = jnp.linspace(0.0, 0.5, 51)
    # The ball starts 0.013 m open (Baumgarte closes it); a per-step projection would close it
    # along each model's own metric (COM vs origin coordinates), so the two would differ.
    tight = {"rtol": 1e-12, "atol": 1e-14, "step_projection": False}
    run_r = simulate(rigid, *rigid.initial_state(), ts, **tight)
    run_m = simulate(modal, *modal.initial_state(), ts, **tight)
    state_r = jax.jit(jax.vmap(lambda q, v: rigid.body_state("beam", q, v)))(run_r.q, run_r.v)
    origin_r, omega_r = state_r.position, state_r.angular_velocity
    print(
        "zero modes: origin", np.max(np.abs(run_m.q[:, :3] - origin_r)),
        "omega", np.max(np.abs(run_m.v[:, 3:6] - omega_r)),
    )  # fmt: skip
    # measured 7e-14 m and 1.4e-12 rad/s after 0.5 s of tumbling (|ω| ≈ 5 rad/s)
    np.testing.assert_allclose(run_m.q[:, :3], origin_r, atol=1e-10)
    np.testing.assert_allclose(run_m.v[:, 3:6], omega_r, atol=1e-10)
    assert np.max(np.abs(run_m.q[:, :3] - run_m.q[0, :3])) > 0.05  # it did move


def quat_apply(p, x):
    w, u = p[0], np.asarray(p[1:])
    x = np.asarray(x, float)
    return x + 2 * w * np.cross(u, x) + 2 * np.cross(u, np.cross(u, x))


# --------------------------------------------------------------------------- cantilever


def test_clamped_cantilever_vibrates_at_the_fe_eigenvalue():
    closed_form = 1.8751**2 * np.sqrt(E * I_Y / (RHO * WIDTH * HEIGHT * L**4))
    assert abs(OMEGA / closed_form - 1) < 1e-4  # 4 elements: converged enough
    sol = vibrate(clamped(cantilever()))
    expected = AMP / OMEGA * np.sin(OMEGA * np.asarray(TS))
    print("cantilever: error / amplitude", np.max(np.abs(sol.q[:, 7] - expected)) / (AMP / OMEGA))
    # measured 4e-9 of the amplitude after 8 periods: a frequency error ~1e-10
    np.testing.assert_allclose(sol.q[:, 7], expected, atol=1e-7 * AMP / OMEGA)
    assert np.max(np.abs(sol.q[:, :3])) < 1e-12  # the frame stays clamped
    assert np.max(np.abs(sol.q[:, 8:])) < 1e-12  # the other modes stay at rest
    # the tip moves along z with the first mode's tip amplitude
    tip_shape = float(cantilever().translations[TIP, 2, 0])
    np.testing.assert_allclose(sol.sensors["tip"][:, 2], tip_shape * expected, atol=1e-12)


class ConstantForce(eqx.Module):
    value: jax.Array

    def __call__(self, t, kinematics):
        return self.value


def test_tip_force_deflects_the_cantilever_by_pl3_over_3ei():
    """Static equilibrium Q(q) = Φ_vᵀ λ, Φ(q) = 0 by Newton on the model's own residual."""
    tip = beam_fe().dofs(TIP, ("uz",))
    data = modal_data(beam_fe(), CraigBampton(tip, n_modes=2, fixed=beam_fe().dofs(0))(beam_fe()))
    p = 0.05  # N along −z: a deflection of about 1e-3 L
    b = mb.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_body(mb.ModalBody("beam", data))
    root = mb.node("beam", 0)
    b.add_joint("clamp", mb.Fixed("ground", mb.Frame((0.0, 0.0, 0.0)), root, mb.Frame((0, 0, 0))))
    force = ConstantForce(jnp.array([0.0, 0.0, -p]))
    b.add_force("load", mb.AppliedForce(mb.node("beam", TIP), (0.0, 0.0, 0.0), force))
    b.add_sensor("tip", mb.PointPosition(mb.node("beam", TIP)))
    model = b.build()
    q0, v0 = model.initial_state()
    n_v = v0.shape[0]

    def coords(y):
        return jnp.concatenate([y[:3], quat_from_rotation_vector(y[3:6]), y[6:n_v]])

    def residual(y):
        phi = lambda x: model.constraints(0.0, coords(x))  # noqa: E731
        jac = jax.jacfwd(phi)(y[:n_v])
        q = coords(y[:n_v])
        return jnp.concatenate([model.forces(0.0, q, v0) - jac.T @ y[n_v:], phi(y[:n_v])])

    residual = jax.jit(residual)  # eagerly, op by op, this test took 3× as long
    y = jnp.zeros(n_v + 6)
    step = jax.jit(lambda y: y - jnp.linalg.solve(jax.jacfwd(residual)(y), residual(y)))
    for _ in range(3):
        y = step(y)
    assert float(jnp.max(jnp.abs(residual(y)))) < 1e-10
    q = coords(y[:n_v])
    sensors = eqx.filter_jit(model.sensors)(0.0, q, v0, jnp.zeros_like(v0))
    deflection = float(sensors["tip"][2])
    expected = -p * L**3 / (3 * E * I_Y)
    print("tip deflection", deflection, "PL^3/3EI", expected, deflection / expected - 1)
    # measured relative error 2e-14: the EB element's statics are nodally exact and the
    # Craig–Bampton constraint mode at the tip spans the static response
    np.testing.assert_allclose(deflection, expected, rtol=1e-9)
    # the clamp carries the load: reaction on the node = (0, 0, p), moment p L about y
    reaction = eqx.filter_jit(model.joint_reaction)("clamp", 0.0, q, y[n_v:])
    np.testing.assert_allclose(reaction[:3], [0.0, 0.0, p], atol=1e-9)


# --------------------------------------------------------------------------- pendulum


@pytest.mark.slow  # test_multibody_tree checks the same pendulum's energy in joint coordinates
def test_flexible_pendulum_conserves_energy():
    fe = beam_fe()
    data = modal_data(fe, CraigBampton(fe.dofs(0), n_modes=3)(fe))  # free: 6 + 3 − 6 shapes
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mb.ModalBody("beam", data))
    pin = mb.Spherical("ground", mb.Frame((0.0, 0.0, 0.0)), mb.node("beam", 0), mb.Frame((0, 0, 0)))
    b.add_joint("pin", pin)
    b.add_sensor("energy", mb.MechanicalEnergy())
    b.add_sensor("tip", mb.PointPosition(mb.node("beam", TIP)))
    model = b.build()
    q0, v0 = model.initial_state()
    ts = jnp.linspace(0.0, 1.0, 101)
    sol = simulate(model, q0, v0, ts, rtol=1e-10, atol=1e-13)
    energy = np.asarray(sol.sensors["energy"])
    scale = float(data.invariants.mass) * 9.81 * L / 2
    print("pendulum: energy drift / mgL/2", np.max(np.abs(energy - energy[0])) / scale)
    # measured 2e-13 of m g L/2 over 1 s
    assert np.max(np.abs(energy - energy[0])) / scale < 1e-8
    assert float(sol.constraint_drift) < 1e-9
    tip = np.asarray(sol.sensors["tip"])
    assert tip[:, 2].min() < -0.9 * L  # it swung through the bottom
    assert np.max(np.abs(sol.q[:, 7:])) > 1e-6  # and deformed


def test_assemble_refuses_modal_bodies_by_name():
    with pytest.raises(mb.ModelError, match=r"modal bodies are not supported yet \(beam\)"):
        mb.assemble(clamped(cantilever()))
