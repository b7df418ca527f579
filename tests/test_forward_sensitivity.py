"""Forward-mode derivatives under error control (``diffmbs.ForwardSensitivity``).

The case: a block on a moving belt held by a spring (stick–slip), its friction regularised
over 1e-4 m/s. While it sticks, the linearised friction is a damper of rate μN/(m v_ε)
= 4.9e4 1/s, outside the stability region of the explicit steps the controller picks for the
(smooth) stuck motion; the state does not notice (the friction saturates), the tangent does.
Reference, independent of the code under test's derivatives: central differences of runs at
rtol 1e-11 (converged to 1e-6 of the derivative). At rtol 1e-6, tangents carried along the
state's steps (``diffrax.ForwardMode``) are off by 9 % and 17× (this test checks the case is that
hard), the error-controlled ones agree with the reference to 1e-4.
"""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from systems import Pendulum

from diffmbs import ForwardSensitivity, MechanicalSystem, RosenbrockW, simulate, simulate_batch

TS = jnp.linspace(0.0, 3.0, 31)  # s: stuck until 0.49 s, then three slip–stick cycles
RTOL = 1e-6


class BeltBlock(MechanicalSystem):
    """A 1 kg block on a belt moving at 0.1 m/s, held by a spring of ``stiffness`` (N/m) to the
    wall; Coulomb friction ``friction`` (N), linear below 1e-4 m/s of slip. q = (x,) m."""

    stiffness: jax.Array
    friction: jax.Array

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        slip = 0.1 - v[0]
        inside = jnp.abs(slip) < 1e-4
        saturated = jnp.where(inside, slip / 1e-4, jnp.sign(slip))
        return jnp.array([-self.stiffness * q[0] + self.friction * saturated])


def displacement(log_parameters, rtol, adjoint=None):
    """x(TS) (m) for ``log(stiffness, friction)``."""
    block = BeltBlock(*jnp.exp(log_parameters))
    sol = simulate(block, jnp.zeros(1), jnp.zeros(1), TS, rtol=rtol, atol=1e-3 * rtol,
                   adjoint=adjoint, max_steps=100_000)  # fmt: skip
    return sol.q[:, 0]


THETA = jnp.log(jnp.array([100.0, 4.9]))


@pytest.fixture(scope="module")
def reference():
    """∂x(TS)/∂log θ by central differences at rtol 1e-11, (31, 2)."""
    step = 1e-5
    columns = [
        (displacement(THETA + step * e, 1e-11) - displacement(THETA - step * e, 1e-11)) / (2 * step)
        for e in jnp.eye(2)
    ]
    return np.stack(columns, axis=1)


def test_tangents_meet_the_tolerance_where_the_steps_alone_do_not(reference):
    scale = np.max(np.abs(reference), axis=0)
    controlled = jax.jacfwd(lambda p: displacement(p, RTOL, ForwardSensitivity()))(THETA)
    error = np.max(np.abs(np.asarray(controlled) - reference), axis=0) / scale
    assert np.all(error < 1e-4), error  # measured 2.8e-6, 8e-7
    along = jax.jacfwd(lambda p: displacement(p, RTOL, diffrax.ForwardMode()))(THETA)
    hard = np.max(np.abs(np.asarray(along) - reference), axis=0) / scale
    assert np.max(hard) > 0.05, hard  # the case is hard: carried tangents are off (0.09, 17)
    # the values themselves are those of the run without derivatives
    np.testing.assert_array_equal(
        np.asarray(displacement(THETA, RTOL, ForwardSensitivity())),
        np.asarray(displacement(THETA, RTOL)),
    )


@pytest.mark.parametrize("how", [pytest.param("linearly implicit solver", marks=pytest.mark.slow),
                                 "lockstep batch"])  # fmt: skip
def test_other_solvers_and_batches(reference, how):
    def first(log_parameters):
        stiffness, friction = jnp.exp(log_parameters)
        options = dict(rtol=RTOL, atol=1e-3 * RTOL, adjoint=ForwardSensitivity(), max_steps=100_000)
        if how == "lockstep batch":  # the block and a stiffer one, in one integration
            blocks = BeltBlock(stiffness * jnp.array([1.0, 1.1]), friction * jnp.ones(2))
            sol = simulate_batch(blocks, jnp.zeros((2, 1)), jnp.zeros((2, 1)), TS,
                                 system_axes=BeltBlock(0, 0), **options)  # fmt: skip
            return sol.q[0, :, 0]
        sol = simulate(BeltBlock(stiffness, friction), jnp.zeros(1), jnp.zeros(1), TS,
                       solver=RosenbrockW(), **options)  # fmt: skip
        return sol.q[:, 0]

    jacobian = np.asarray(jax.jacfwd(first)(THETA))
    error = np.max(np.abs(jacobian - reference), axis=0) / np.max(np.abs(reference), axis=0)
    assert np.all(error < 1e-4), error  # measured ≤ 1.4e-5


@pytest.mark.slow  # 14 s, mostly compiling the projection's derivative
def test_projected_steps_carry_the_projection_derivative():
    """A pendulum in Cartesian coordinates projected onto its constraint after every step:
    ∂(position)/∂(length) against central differences (rtol 1e-11)."""

    def positions(length, rtol, adjoint=None):
        pendulum = Pendulum(length=length)
        q0 = jnp.array([length * jnp.sin(1.0), -length * jnp.cos(1.0)])
        sol = simulate(pendulum, q0, jnp.zeros(2), jnp.linspace(0.0, 1.0, 11), rtol=rtol,
                       atol=1e-3 * rtol, adjoint=adjoint)  # fmt: skip
        return sol.q

    step = 1e-6
    reference = (positions(1.3 + step, 1e-11) - positions(1.3 - step, 1e-11)) / (2 * step)
    _, tangent = jax.jvp(lambda s: positions(s, 1e-8, ForwardSensitivity()), (1.3,), (1.0,))
    np.testing.assert_allclose(np.asarray(tangent), np.asarray(reference), atol=1e-5)
    # and the tangent stays on the constraint's tangent space: d(x² + y²)/dL = 2L
    dnorm = 2 * np.sum(np.asarray(positions(1.3, 1e-8)) * np.asarray(tangent), axis=1)
    np.testing.assert_allclose(dnorm, 2 * 1.3, rtol=1e-7)  # dense output between steps: 1e-8


@pytest.mark.parametrize("adjoint", ["carried", "controlled"])
def test_a_fit_report_says_when_its_jacobian_is_wrong(adjoint):
    """FitResult's probes (identification._jitter) compare the Jacobian with a central
    difference: the carried tangents are named in the message, the controlled ones pass."""
    import identification as idf

    method = diffrax.ForwardMode() if adjoint == "carried" else ForwardSensitivity()

    def predict(block):
        sol = simulate(block, jnp.zeros(1), jnp.zeros(1), TS, rtol=RTOL, atol=1e-3 * RTOL,
                       adjoint=method, max_steps=100_000)  # fmt: skip
        return sol.q[:, 0]

    truth = np.exp(np.asarray(THETA))
    noise = 1e-4 * np.random.default_rng(3).standard_normal(TS.shape[0])
    measured = np.asarray(displacement(THETA, RTOL)) + noise
    space = idf.ParameterSpace([
        idf.Parameter("stiffness", "stiffness", 10.0, 1e3, truth[0], "log", units="N/m"),
        idf.Parameter("friction", "friction", 0.5, 50.0, truth[1], "log", units="N"),
    ])  # fmt: skip
    experiment = idf.FunctionExperiment("x", BeltBlock(*truth), predict, measured,
                                        misfit="linear", scale=1e-4)  # fmt: skip
    problem = idf.Problem(space, [experiment])
    z = np.asarray(space.to_unconstrained(jnp.asarray(truth)))
    result = idf.FitResult.from_problem(problem, z, converged=True, solver_checks=2)
    error = result.solver_jitter["derivative_error"]
    if adjoint == "carried":
        assert error > 1.0 and not result.converged  # measured 19
        assert "the Jacobian's column of friction differs" in result.message
    else:
        assert error < 0.05 and "derivatives" not in result.message  # measured 1e-3
