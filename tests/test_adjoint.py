"""The discrete adjoint of the accepted steps, against central finite differences, against
diffrax's checkpointed adjoint (an independent reverse mode) and forward mode.

Models: a nonlinear (Duffing) oscillator, the constrained pendulum (KKT path with Baumgarte
terms) and the lumped MWSM contact model (gradients through the hammer impact).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from systems import Pendulum

import diffmbs  # noqa: F401
from diffmbs.adjoint import DiscreteAdjoint
from diffmbs.integrate import DISCRETE_ADJOINT_MAX_FLOATS, _default_adjoint, simulate
from diffmbs.models.mwsm import LumpedContactModel
from diffmbs.system import MechanicalSystem

TIGHT = {"rtol": 1e-11, "atol": 1e-13}
CHECKPOINTED = diffrax.RecursiveCheckpointAdjoint()
SEQUENTIAL = DiscreteAdjoint(jacobian_max_state=0)  # stage-wise vjps at the stored stages
RECOMPUTED = DiscreteAdjoint(jacobian_max_state=0, stage_store_max_floats=0)  # stages re-run


class Duffing(MechanicalSystem):
    m: jax.Array
    k: jax.Array
    c: jax.Array
    k3: jax.Array

    def mass(self, q):
        return self.m * jnp.eye(1)

    def forces(self, t, q, v):
        return -self.k * q - self.c * v - self.k3 * q**3 + jnp.sin(3.0 * t)

    def sensors(self, t, q, v, vdot):
        return {"acc": vdot[0]}


def duffing_loss(p, ts, adjoint, **kw):
    """Uses every output kind: positions, velocities, accelerations and a sensor."""
    m, k, c, k3, q0, v0 = p
    sol = simulate(Duffing(m, k, c, k3), q0[None], v0[None], ts, adjoint=adjoint, **kw)
    w = jnp.cos(ts)
    return (
        jnp.sum(w * sol.q[:, 0] ** 2)
        + jnp.sum(sol.v[:, 0] * w) * 0.1
        + jnp.sum(sol.sensors["acc"] ** 2) * 1e-3
        + sol.vdot[-1, 0]
    )


def central_differences(f, p, rel_step=1e-6, order=2, batched=False):
    """Central differences of ``f`` at ``p``, second order (two evaluations per parameter) or
    fourth order (four: ``(8 (f₁ − f₋₁) − (f₂ − f₋₂)) / 12h``), which allows a larger step and
    so less of the adaptive solver's step-selection noise (≈ rtol · |f| / h). The step is
    ``rel_step · max(|p_i|, 1)``. ``batched=True``: ``f`` takes every perturbed point at once,
    stacked ``(n_points, p.size)``, and returns their values ``(n_points,)`` (one ``vmap`` or
    ``simulate_batch`` call instead of one call per point)."""
    p = np.asarray(p, dtype=float)
    shifts = (1, -1) if order == 2 else (1, -1, 2, -2)
    steps = [rel_step * max(abs(x), 1.0) for x in p]
    points = []
    for i, h in enumerate(steps):
        e = np.zeros_like(p)
        e[i] = h
        points += [p + k * e for k in shifts]
    if batched:
        values = np.asarray(f(jnp.asarray(np.stack(points))), dtype=float)
    else:
        values = np.array([float(f(jnp.asarray(x))) for x in points])
    out = []
    for h, f_k in zip(steps, values.reshape(p.size, len(shifts)), strict=True):
        d1 = f_k[0] - f_k[1]
        out.append(d1 / (2 * h) if order == 2 else (8 * d1 - (f_k[2] - f_k[3])) / (12 * h))
    return np.array(out)


P_DUFFING = jnp.array([1.3, 7.0, 0.4, 3.0, 0.5, 0.3])  # m, k, c, k3, q0, v0


@pytest.mark.parametrize(
    "ts",
    [jnp.linspace(0.0, 3.0, 601), jnp.array([0.0, 0.7, 1.9, 3.0])],
    ids=["samples-every-step", "steps-without-samples"],
)
def test_duffing_gradient_matches_differences_and_other_adjoints(ts):
    grads = {
        name: np.asarray(jax.jit(jax.grad(lambda p, a=adj: duffing_loss(p, ts, a, **TIGHT)))(
            P_DUFFING
        ))
        for name, adj in (
            ("default", None),
            ("sequential", SEQUENTIAL),
            ("checkpointed", CHECKPOINTED),
        )
    }
    forward = jax.jit(
        jax.jacfwd(lambda p: duffing_loss(p, ts, diffrax.ForwardMode(), **TIGHT))
    )(P_DUFFING)
    fd = central_differences(jax.jit(lambda p: duffing_loss(p, ts, None, **TIGHT)), P_DUFFING)
    np.testing.assert_allclose(grads["default"], fd, rtol=1e-6, atol=1e-9)
    for other in (grads["sequential"], grads["checkpointed"], np.asarray(forward)):
        np.testing.assert_allclose(grads["default"], other, rtol=1e-9, atol=1e-12)



@pytest.mark.parametrize(
    "adjoint", [None, SEQUENTIAL, RECOMPUTED], ids=["jacobians", "stored-stages", "stages"]
)
def test_gradient_of_some_leaves_only(adjoint):
    """Only the leaves differentiated get cotangents: the spring rate and the initial state
    (the model's other arrays are arguments too, but not perturbed), or the initial state
    alone (no parameter pass at all)."""
    ts = jnp.linspace(0.0, 2.0, 41)

    def loss(k, y0, model):
        sol = simulate(eqx.tree_at(lambda m: m.k, model, k), y0[:1], y0[1:], ts, adjoint=adjoint,
                       **TIGHT)  # fmt: skip
        return jnp.sum(sol.q[:, 0] * jnp.cos(ts)) + 0.1 * jnp.sum(sol.v[:, 0] ** 2)

    model = Duffing(*(jnp.asarray(x) for x in P_DUFFING[:4]))
    k, y0 = P_DUFFING[1], P_DUFFING[4:]
    g_k, g_y0 = jax.jit(jax.grad(loss, argnums=(0, 1)))(k, y0, model)
    g_y0_alone = jax.jit(jax.grad(loss, argnums=1))(k, y0, model)
    f = jax.jit(lambda p: loss(p[0], p[1:], model))
    fd = central_differences(f, jnp.concatenate([k[None], y0]))
    np.testing.assert_allclose(np.r_[g_k, g_y0], fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(g_y0_alone, g_y0, rtol=1e-12)


def test_backward_path_choice():
    """Jacobians for small, cheap vector fields; stored stages while they fit the budget."""
    model = Duffing(*(jnp.asarray(x) for x in P_DUFFING[:4]))
    y0 = jnp.zeros(2)

    def field(t, y, args):
        return jnp.stack([y[1], args.forces(t, y[:1], y[1:])[0] / args.m])

    def path(adjoint, max_steps=1000):
        return adjoint.backward_path(field, diffrax.Tsit5(), 0.0, y0, model, max_steps)

    assert path(DiscreteAdjoint()) == "jacobians"
    assert path(DiscreteAdjoint(jacobian_max_equations=1)) == "stored stages"
    # a jitted vector field (as simulate's) is one call: its equations are counted inside it
    jitted = eqx.filter_jit(field)
    for limit, expected in ((1, "stored stages"), (400, "jacobians")):
        adjoint = DiscreteAdjoint(jacobian_max_equations=limit)
        assert adjoint.backward_path(jitted, diffrax.Tsit5(), 0.0, y0, model, 1000) == expected
    assert path(SEQUENTIAL) == "stored stages"
    assert path(SEQUENTIAL, max_steps=2**25 // 18) == "stored stages"  # 7 stages + 2, 2 states
    assert path(SEQUENTIAL, max_steps=2**25 // 18 + 1) == "stages"
    assert path(RECOMPUTED) == "stages"


def test_default_is_discrete_adjoint_and_falls_back():
    assert isinstance(_default_adjoint(diffrax.Tsit5(), 1000, 8), DiscreteAdjoint)
    assert isinstance(_default_adjoint(diffrax.Dopri5(), 1000, 8), DiscreteAdjoint)
    big = DISCRETE_ADJOINT_MAX_FLOATS // 8 + 1
    assert isinstance(_default_adjoint(diffrax.Tsit5(), big, 8), diffrax.RecursiveCheckpointAdjoint)
    assert isinstance(
        _default_adjoint(diffrax.Kvaerno5(), 1000, 8), diffrax.RecursiveCheckpointAdjoint
    )


def test_other_explicit_solver_and_implicit_solver_error():
    ts = jnp.linspace(0.0, 1.0, 101)
    g_dopri = jax.grad(lambda p: duffing_loss(p, ts, None, solver=diffrax.Dopri5(), **TIGHT))(
        P_DUFFING
    )
    g_tsit = jax.grad(lambda p: duffing_loss(p, ts, None, **TIGHT))(P_DUFFING)
    np.testing.assert_allclose(g_dopri, g_tsit, rtol=1e-7)
    with pytest.raises(ValueError, match="Kvaerno5 is not one"):
        duffing_loss(P_DUFFING, ts, DiscreteAdjoint(), solver=diffrax.Kvaerno5())


@pytest.mark.parametrize("adjoint", [DiscreteAdjoint(), SEQUENTIAL], ids=["jacobians", "stored"])
def test_fixed_step_dopri8_gradient_is_exact(adjoint):
    """With the steps fixed the discrete adjoint is the exact derivative of the numerical
    solution, interpolated samples included: Dopri8 (14 stages and its own dense output, 4
    samples per step here) by step Jacobians and by stage-wise vjps (the recomputed-stage path
    differs from the stored one only in where the stage inputs come from), against central
    differences of the same fixed-step solve, which agree to their own truncation error, not
    merely to a tolerance. (Tsit5's paths are checked against differences of the adaptive
    solve above.)"""
    ts = jnp.linspace(0.0, 2.0, 161)
    kw = dict(solver=diffrax.Dopri8(), stepsize_controller=diffrax.ConstantStepSize(), dt0=0.05)
    loss = lambda p: duffing_loss(p, ts, adjoint, **kw)  # noqa: E731
    np.testing.assert_allclose(
        jax.grad(loss)(P_DUFFING), central_differences(loss, P_DUFFING, 1e-5), rtol=1e-7, atol=1e-9
    )


def test_vmap_of_gradient_equals_loop():
    ts = jnp.linspace(0.0, 1.0, 101)
    batch = jnp.stack([P_DUFFING, P_DUFFING * 1.2])  # different step counts
    grad = jax.grad(lambda p: duffing_loss(p, ts, None, **TIGHT))
    batched = jax.jit(jax.vmap(grad))(batch)
    grad = jax.jit(grad)
    looped = np.stack([grad(p) for p in batch])
    np.testing.assert_allclose(batched, looped, rtol=1e-10)


def test_constrained_pendulum_gradient():
    """KKT accelerations with Baumgarte terms in every replayed step."""
    ts = jnp.linspace(0.0, 0.8, 81)

    def loss(p):
        m, length = p
        pend = Pendulum(m=m, length=length)
        sol = simulate(pend, jnp.stack([length, 0.0]), jnp.zeros(2), ts, **TIGHT)
        return jnp.sum(sol.q[:, 1] * jnp.sin(ts)) + jnp.sum(sol.multipliers[:, 0]) * 1e-3

    p = jnp.array([0.7, 1.3])
    g = np.asarray(jax.jit(jax.grad(loss))(p))
    # Second-order differences with a 1e-6 step are dominated by the step-size selection's
    # noise (≈ rtol / step): 4.7e-6 relative on an AMD EPYC VM, over the 3e-6 this test once
    # allowed. Fourth order with a 1e-3 step agrees with AD to 1.4e-9 there.
    fd = central_differences(jax.jit(loss), p, rel_step=1e-3, order=4)
    np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_gradient_through_hammer_impact():
    """The impact onset moves with the contact parameters; the gradient of the equipment
    acceleration history must follow (tight tolerances so FD is not step-size noise)."""
    base = LumpedContactModel.from_machine()
    ts = jnp.linspace(0.0, 0.03, 601)
    names = ("impact.stiffness", "impact.damping", "k_channel")

    def loss(z):
        model = base
        for i, name in enumerate(names):
            model = model.with_parameter(name, float(base.parameter(name)) * jnp.exp(z[i]))
        sol = simulate(model, *model.initial_state(), ts, **TIGHT)
        return jnp.sum((sol.sensors["equipment_acceleration"] / 9.80665) ** 2) * 1e-4

    z = jnp.array([0.1, -0.2, 0.05])
    g = np.asarray(jax.jit(jax.grad(loss))(z))
    fd = central_differences(jax.jit(loss), z, rel_step=1e-5)
    np.testing.assert_allclose(g, fd, rtol=1e-5)
