"""The Rosenbrock–W solver (diffmbs.RosenbrockW) and solver phases (diffmbs.SolverPhases).

References outside the code under test: the exact solution of a linear system (SciPy's matrix
exponential), SciPy's DOP853 at tight tolerances, the explicit stability bound, central
differences, forward-mode derivatives."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import diffmbs  # noqa: F401
from diffmbs.integrate import RosenbrockW, SimulationError, SolverPhases, simulate
from diffmbs.system import MechanicalSystem


class StructureOnSprings(MechanicalSystem):
    """A slow mass on a soft spring (ω ≈ 10 rad/s) carrying a stiff, lightly damped part
    (ω ≈ 10⁴ rad/s, ζ = 2 %): a machine swinging slowly while a structure rings on its stiff
    modes, the shock machine's fall in two coordinates."""

    m1: jax.Array = 10.0
    m2: jax.Array = 1.0
    k1: jax.Array = 1.1e3
    k2: jax.Array = 1e8
    zeta2: float = 0.02

    def mass(self, q):
        return jnp.diag(jnp.array([self.m1, self.m2]))

    def forces(self, t, q, v):
        c2 = 2 * self.zeta2 * jnp.sqrt(self.k2 * self.m2)
        inner = self.k2 * (q[1] - q[0]) + c2 * (v[1] - v[0])
        return jnp.array([-self.k1 * q[0] + inner, -inner])

    def first_order_matrix(self) -> np.ndarray:
        """``A`` of ``d/dt (q, v) = A (q, v)``, for the exact solution ``expm(A t) y0``."""
        m1, m2, k1, k2 = (float(x) for x in (self.m1, self.m2, self.k1, self.k2))
        c2 = 2 * self.zeta2 * np.sqrt(k2 * m2)
        stiffness = np.array([[k1 + k2, -k2], [-k2, k2]])
        damping = np.array([[c2, -c2], [-c2, c2]])
        minv = np.diag([1 / m1, 1 / m2])
        return np.block([[np.zeros((2, 2)), np.eye(2)], [-minv @ stiffness, -minv @ damping]])


Q0, V0 = jnp.array([0.1, 0.1]), jnp.array([0.0, 0.0])
TS = jnp.linspace(0.0, 2.0, 201)


def exact(system, ts=TS, q0=Q0, v0=V0):
    a, y0 = system.first_order_matrix(), np.concatenate([q0, v0])
    return np.array([scipy.linalg.expm(a * t) @ y0 for t in np.asarray(ts)])


def test_stiff_structure_at_steps_far_beyond_the_explicit_limit():
    """The stiff part is stable at any step: RosenbrockW follows the exact solution within its
    tolerance in far fewer steps than the explicit stability limit allows any explicit
    Runge–Kutta method (|hλ| ≲ 3.5 at λ ≈ 10⁴: ≥ 5,700 steps over 2 s; measured 785 against
    Tsit5's 2,800, most of them while the stiff part's start-up ringing decays)."""
    system = StructureOnSprings()
    sol = simulate(system, Q0, V0, TS, solver=RosenbrockW(), rtol=1e-5, atol=1e-8)
    y = np.concatenate([sol.q, sol.v], axis=1)
    reference = exact(system)
    scale = np.max(np.abs(reference), axis=0)
    print("largest error / scale", np.max(np.abs(y - reference) / scale, axis=0))
    assert np.max(np.abs(y - reference) / scale) < 1e-3
    stiff = float(np.sqrt(system.k2 / system.m2))
    assert int(sol.stats["num_steps"]) < 2.0 * stiff / 3.5 / 4, sol.stats


def _van_der_pol(t, y):
    return np.array([y[1], (1 - y[0] ** 2) * y[1] - y[0] + np.cos(t)])


def test_third_order_with_the_jacobian_frozen_at_the_start():
    """A W-method keeps its order with any Jacobian: on van der Pol's equation (whose Jacobian
    changes along the path) with the one of t = 0 kept, fixed steps converge at rate 3 to
    SciPy's DOP853 (rtol 1e-13)."""
    y0 = np.array([2.0, 0.0])
    reference = scipy.integrate.solve_ivp(_van_der_pol, (0.0, 1.0), y0, method="DOP853",
                                          rtol=1e-13, atol=1e-13).y[:, -1]  # fmt: skip

    def term(t, y, args):
        return jnp.array([y[1], (1 - y[0] ** 2) * y[1] - y[0] + jnp.cos(t)])

    errors = []
    for n in (10, 20, 40, 80):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(term), RosenbrockW(), 0.0, 1.0, 1.0 / n,
                                  jnp.asarray(y0), max_steps=200)  # fmt: skip
        errors.append(np.max(np.abs(np.asarray(sol.ys[-1]) - reference)))
    rates = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    print("errors", errors, "rates", rates)
    assert np.all((rates[1:] > 2.8) & (rates[1:] < 3.3)), rates


def test_phases_follow_the_exact_solution_and_add_up_their_steps():
    """RosenbrockW to 1 s then Tsit5: every sample (either side of the switch) within the
    tolerance of the exact solution; the steps are the two phases' together (within a few
    steps that rounding can tip, measured 2 of 7,787); a switch at or after the last sample
    leaves only the first solver (the same run as it alone)."""
    system = StructureOnSprings()
    tight = dict(rtol=1e-7, atol=1e-10, max_steps=20_000)
    phases = SolverPhases((RosenbrockW(), diffrax.Tsit5()), 1.0)
    sol = simulate(system, Q0, V0, TS, solver=phases, **tight)
    y = np.concatenate([sol.q, sol.v], axis=1)
    reference = exact(system)
    assert np.max(np.abs(y - reference) / np.max(np.abs(reference), axis=0)) < 1e-4
    first = simulate(system, Q0, V0, TS[:101], solver=RosenbrockW(), **tight)
    second = simulate(system, first.q_reached, first.v_reached, TS[100:], **tight)
    # the same steps (counted below) in other programs: equal up to rounding, which can tip an
    # accept-or-reject decision and move the samples within the tolerance (1e-7 of the 0.1 m
    # amplitude); the sample at t = 1 s is the first phase's
    np.testing.assert_allclose(sol.q[:101], first.q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(sol.q[101:], second.q[1:], rtol=0, atol=1e-8)
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps"):  # ~7,800 in all
        parts = int(first.stats[key]) + int(second.stats[key])
        assert abs(int(sol.stats[key]) - parts) <= 0.005 * int(sol.stats["num_steps"]), key

    late = SolverPhases((RosenbrockW(), diffrax.Tsit5()), 2.0)
    alone = simulate(system, Q0, V0, TS, solver=RosenbrockW(), **tight)
    np.testing.assert_allclose(simulate(system, Q0, V0, TS, solver=late, **tight).q, alone.q,
                               rtol=0, atol=1e-8)  # fmt: skip


def test_a_failure_in_either_phase_names_its_time():
    class PoisonedAt(MechanicalSystem):
        t_bad: float

        def mass(self, q):
            return jnp.eye(1)

        def forces(self, t, q, v):
            return -q + jnp.where(t > self.t_bad, jnp.nan, 0.0)

    ts = jnp.linspace(0.0, 1.0, 11)
    phases = SolverPhases((RosenbrockW(), diffrax.Tsit5()), 0.5)
    for t_bad in (0.35, 0.75):
        with pytest.raises(SimulationError, match=f"last accepted time t = {t_bad}"):
            simulate(PoisonedAt(t_bad), jnp.ones(1), jnp.zeros(1), ts, solver=phases)
        sol = simulate(PoisonedAt(t_bad), jnp.ones(1), jnp.zeros(1), ts, solver=phases,
                       throw=False)  # fmt: skip
        assert float(sol.t_reached) == pytest.approx(t_bad, abs=1e-9)


@pytest.mark.slow
def test_phases_are_differentiable_through_the_switch():
    """Fixed steps: forward mode through both phases equals central differences of the same
    discrete map (measured 1.4e-7). Adaptive steps: reverse mode (checkpointed adjoint in the
    implicit phase, the discrete adjoint in the explicit one) equals forward mode to the run's
    tolerance: forward mode also differentiates the step sizes the controller picks, the
    discrete adjoint holds them fixed. For the soft spring that difference is 3e-5. For the
    stiff one it is the integration error itself: its derivative runs through the stiff part's
    1e-7 m stretch, 10⁴ atol above zero, and comes out −1.56 … −1.58 from the adaptive runs
    (−1.09 from the fixed steps' map), moving by 1 % with the last bits of rounding (XLA's
    optimisation level), so reverse and forward agree there only to ~1 %. The fixed-step check
    holds both to 1e-6."""
    ts = jnp.linspace(0.0, 0.2, 21)
    phases = SolverPhases((RosenbrockW(), diffrax.Tsit5()), 0.08)
    weights = 1.0 + jnp.sin(7.0 * ts)
    adaptive = dict(rtol=1e-8, atol=1e-11, max_steps=20_000)
    fixed = dict(stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-4, max_steps=2_500)

    def loss(log_k, adjoint=None, steps=adaptive):
        system = StructureOnSprings(k1=1.1e3 * jnp.exp(log_k[0]), k2=1e8 * jnp.exp(log_k[1]))
        sol = simulate(system, Q0, V0, ts, solver=phases, adjoint=adjoint, **steps)
        stretch = sol.q[:, 1] - sol.q[:, 0]  # of the stiff part, ~1e-7 m: weighted up
        return jnp.sum(weights * (sol.q[:, 1] + 1e6 * stretch))

    z = jnp.zeros(2)
    forward_fixed = np.asarray(
        jax.jacfwd(lambda z: loss(z, diffrax.ForwardMode(), fixed))(z)
    )
    step = 1e-3

    def at(i, k):  # (forward mode only for its plain solve: no checkpointed fixed steps)
        return float(loss(z.at[i].add(k * step), diffrax.ForwardMode(), fixed))

    differences = np.array([  # fourth order
        (at(i, -2) - 8 * at(i, -1) + 8 * at(i, 1) - at(i, 2)) / (12 * step) for i in range(2)
    ])  # fmt: skip
    print("forward (fixed steps)", forward_fixed, "differences", differences)
    np.testing.assert_allclose(forward_fixed, differences, rtol=1e-6)

    reverse = np.asarray(jax.grad(loss)(z))
    forward = np.asarray(jax.jacfwd(lambda z: loss(z, diffrax.ForwardMode()))(z))
    print("reverse", reverse, "forward", forward)
    np.testing.assert_allclose(reverse[0], forward[0], rtol=5e-4)
    np.testing.assert_allclose(reverse[1], forward[1], rtol=2e-2)


def test_switch_times_are_checked():
    with pytest.raises(ValueError, match="2 solvers need 1 switch"):
        SolverPhases((RosenbrockW(), diffrax.Tsit5()), [0.1, 0.2])
    with pytest.raises(ValueError, match="must increase"):
        SolverPhases((RosenbrockW(), diffrax.Tsit5(), diffrax.Tsit5()), [0.3, 0.2])
