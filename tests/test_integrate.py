"""Time integration against closed forms, conservation laws and finite differences.

References: the damped harmonic oscillator in closed form; the period of the large-amplitude
pendulum, 4 √(L/g) K(sin²(θ₀/2)) (complete elliptic integral, scipy.special.ellipk), its energy
and its rod tension m g (3 cos θ − 2 cos θ₀); a driven mass–spring with a steady sinusoidal
response; the matrix exponential of a linear stiff chain (scipy.linalg.expm); central finite
differences for gradients.
"""

import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.special
from systems import G, Pendulum

import diffmbs  # noqa: F401
from diffmbs.integrate import DIAGNOSES, SimulationError, Solution, simulate, simulate_batch
from diffmbs.system import MechanicalSystem

# --------------------------------------------------------------------------- models


class Oscillator(MechanicalSystem):
    """m q̈ + c q̇ + k q = 0 (1 DOF); sensors: acceleration and spring force."""

    m: jax.Array
    k: jax.Array
    c: jax.Array

    def mass(self, q):
        return self.m * jnp.eye(1)

    def forces(self, t, q, v):
        return -self.k * q - self.c * v

    def sensors(self, t, q, v, vdot):
        return {"acc": vdot[0], "spring": self.k * q[0]}


class DrivenPair(MechanicalSystem):
    """Mass 1 driven, x₁ = A sin ωt (written A sin ωt − x₁ = 0), mass 2 on a spring k to it."""

    m1: float = 2.0
    m2: float = 0.5
    k: float = 100.0
    amp: float = 0.05
    omega: float = 5.0

    def mass(self, q):
        return jnp.diag(jnp.array([self.m1, self.m2]))

    def forces(self, t, q, v):
        f = self.k * (q[1] - q[0])
        return jnp.array([f, -f])

    def constraints(self, t, q):
        return jnp.array([self.amp * jnp.sin(self.omega * t) - q[0]])


class Chain(MechanicalSystem):
    """wall –k1– m1 –(k2, c2)– m2, with a stiff, heavily damped second link."""

    k1: float = 100.0
    k2: float = 1e7
    c2: float = 2e4

    def mass(self, q):
        return jnp.eye(2)

    def forces(self, t, q, v):
        f2 = self.k2 * (q[1] - q[0]) + self.c2 * (v[1] - v[0])
        return jnp.array([-self.k1 * q[0] + f2, -f2])


class Explosive(MechanicalSystem):
    """q̈ = 10¹² q³: reaches infinity in finite time."""

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        return 1e12 * q**3


class PoisonedAt(MechanicalSystem):
    """A unit oscillator whose force turns NaN after t_bad."""

    t_bad: float = 0.35

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        return -q + jnp.where(t > self.t_bad, jnp.nan, 0.0)


# --------------------------------------------------------------------------- oscillator

# 0.5 s at 20 kHz: 10,001 samples (the sampling of a shock record).
TS = jnp.linspace(0.0, 0.5, 10_001)
Q0, V0 = 0.01, 1.0
TIGHT = {"rtol": 1e-10, "atol": 1e-12}


def oscillator(k=4e4, c=0.0, m=1.0):
    return Oscillator(jnp.asarray(m), jnp.asarray(k), jnp.asarray(c))


def oscillator_closed_form(m, k, c, t, q0=Q0, v0=V0):
    wn = np.sqrt(k / m)
    a = c / (2 * m)
    wd = np.sqrt(wn**2 - a**2)
    big_a, big_b = q0, (v0 + a * q0) / wd
    e, cs, sn = np.exp(-a * t), np.cos(wd * t), np.sin(wd * t)
    q = e * (big_a * cs + big_b * sn)
    v = e * (-a * (big_a * cs + big_b * sn) + wd * (-big_a * sn + big_b * cs))
    return q, v


def test_options_object_and_keywords_are_one_setting():
    """``SimulationOptions`` reused, keywords replacing its fields, and wrong names listed."""
    settings = diffmbs.SimulationOptions(rtol=1e-10, atol=1e-12, max_steps=4096)
    q0, v0, ts = jnp.array([Q0]), jnp.array([V0]), TS[:201]
    by_object = simulate(oscillator(), q0, v0, ts, settings)
    by_keywords = simulate(oscillator(), q0, v0, ts, rtol=1e-10, atol=1e-12, max_steps=4096)
    np.testing.assert_array_equal(by_object.q, by_keywords.q)
    q_ref, _ = oscillator_closed_form(1.0, 4e4, 0.0, np.asarray(ts))
    np.testing.assert_allclose(by_object.q[:, 0], q_ref, atol=1e-9)
    coarse = simulate(oscillator(), q0, v0, ts, settings, rtol=1e-4, atol=1e-6)
    assert coarse.stats["num_steps"] < by_object.stats["num_steps"]  # the keywords won
    with pytest.raises(TypeError, match="unknown option 'rtoll'; the options are solver"):
        simulate(oscillator(), q0, v0, ts, rtoll=1e-9)
    with pytest.raises(ValueError, match="simulate_batch: check_derivatives is not supported"):
        simulate_batch(oscillator(), q0, v0, ts, check_derivatives=True)


def test_checkpointed_adjoint_with_fixed_steps_warns():
    """diffrax 0.7.2's checkpointed adjoint is wrong with samples on fixed step ends
    (``test_gradient_crosschecks``): asking for it says so (traced only, nothing compiled)."""
    kwargs = {"stepsize_controller": diffrax.ConstantStepSize(), "dt0": 1e-3}
    run = lambda adjoint: jax.eval_shape(  # noqa: E731
        lambda: simulate(oscillator(), jnp.array([Q0]), jnp.array([V0]), TS[:11], adjoint=adjoint,
                         **kwargs)
    )
    with pytest.warns(UserWarning, match="RecursiveCheckpointAdjoint with ConstantStepSize"):
        run(diffrax.RecursiveCheckpointAdjoint())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(None)  # the default, DiscreteAdjoint: no warning


@pytest.mark.parametrize("c", [0.0, 20.0], ids=["undamped", "damped"])
def test_oscillator_matches_closed_form(c):
    m, k = 1.0, 4e4
    sol = simulate(oscillator(k, c, m), [Q0], [V0], TS, **TIGHT)
    assert isinstance(sol, Solution) and bool(sol.successful)
    t = np.asarray(TS)
    q_ref, v_ref = oscillator_closed_form(m, k, c, t)
    a_ref = -(k * q_ref + c * v_ref) / m
    assert sol.q.shape == sol.v.shape == sol.vdot.shape == (t.size, 1)
    assert sol.multipliers.shape == (t.size, 0)
    np.testing.assert_allclose(sol.ts, t)
    for got, ref in ((sol.q[:, 0], q_ref), (sol.v[:, 0], v_ref), (sol.vdot[:, 0], a_ref)):
        assert np.max(np.abs(got - ref)) <= 1e-7 * np.max(np.abs(ref))
    # Accelerations are the equations of motion at the saved states, not differences.
    np.testing.assert_allclose(
        sol.vdot[:, 0], -(k * sol.q[:, 0] + c * sol.v[:, 0]) / m, rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(sol.sensors["acc"], sol.vdot[:, 0])
    np.testing.assert_allclose(sol.sensors["spring"], k * sol.q[:, 0])
    assert float(sol.constraint_drift) == 0.0
    assert 0 < int(sol.stats["num_steps"]) < int(sol.stats["max_steps"])
    assert float(sol.t_reached) == 0.5


class PulsedOscillator(MechanicalSystem):
    """q̈ + ω² q = F sin(π (t − t_on)/τ) during t_on < t < t_on + τ, else 0: at rest until a
    short half-sine pulse (a base shock seen in the equipment's frame)."""

    omega: jax.Array
    force: jax.Array
    t_on: jax.Array
    width: jax.Array

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        s = t - self.t_on
        on = (s > 0) & (s < self.width)
        pulse = jnp.where(on, self.force * jnp.sin(jnp.pi * s / self.width), 0.0)
        return -self.omega**2 * q + pulse

    def sensors(self, t, q, v, vdot):
        return {"energy": 0.5 * v[0] ** 2 + 0.5 * self.omega**2 * q[0] ** 2}


def test_a_short_pulse_after_rest_is_not_stepped_over():
    """A 1 ms pulse 0.1 s into a record sampled at 1 kHz: the adaptive step grows while nothing
    moves and steps clean over it (no response at all) unless ``dtmax`` caps the step at the
    sample spacing. Reference: Duhamel's integral, residual amplitude
    A = (F/ω) Ω |1 + e^{−iωτ}| / |Ω² − ω²| with Ω = π/τ, energy ½ ω² A² after the pulse."""
    omega, force, t_on, width = 2 * np.pi * 20.0, 1000.0, 0.1, 1e-3
    model = PulsedOscillator(*map(jnp.asarray, (omega, force, t_on, width)))
    ts = jnp.linspace(0.0, 0.5, 501)
    sol = simulate(model, [0.0], [0.0], ts, rtol=1e-8, atol=1e-12, dtmax="samples")
    big = np.pi / width
    amplitude = force / omega * big * 2 * abs(np.cos(omega * width / 2)) / abs(big**2 - omega**2)
    after = np.asarray(ts) > t_on + width
    np.testing.assert_allclose(sol.sensors["energy"][after], 0.5 * omega**2 * amplitude**2,
                               rtol=1e-6)  # fmt: skip
    # without the cap (the default): the hazard it guards against
    skipped = simulate(model, [0.0], [0.0], ts, rtol=1e-8, atol=1e-12)
    assert float(np.max(np.abs(skipped.q))) < 1e-3 * amplitude


def final_position(p, adjoint=None):
    k, c, m = p
    return simulate(oscillator(k, c, m), [Q0], [V0], TS, adjoint=adjoint, **TIGHT).q[-1, 0]


def test_gradients_reverse_and_forward_match_finite_differences():
    p = jnp.array([4e4, 20.0, 1.0])  # k (N/m), c (N·s/m), m (kg)
    grad = jax.jit(jax.grad(final_position))(p)  # reverse mode, checkpointed over 10,001 saves
    jac = jax.jit(jax.jacfwd(lambda p_: final_position(p_, diffrax.ForwardMode())))(p)
    steps = 1e-6 * np.asarray(p)
    fd = [
        (final_position(p.at[i].add(h)) - final_position(p.at[i].add(-h))) / (2 * h)
        for i, h in enumerate(steps)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-5)
    np.testing.assert_allclose(jac, fd, rtol=1e-5)
    np.testing.assert_allclose(grad, jac, rtol=1e-8)


def test_forward_mode_without_forward_adjoint_says_what_to_pass():
    p = jnp.array([4e4, 20.0, 1.0])
    with pytest.raises(TypeError, match=r"needs adjoint=diffrax\.ForwardMode\(\)"):
        jax.jacfwd(final_position)(p)


def test_vmap_over_stiffness_equals_loop():
    ks = jnp.linspace(1e4, 8e4, 8)

    def response(k):
        return simulate(oscillator(k, 20.0), [Q0], [V0], TS, **TIGHT).q[:, 0]

    batched = jax.jit(jax.vmap(response))(ks)
    looped = np.stack([response(k) for k in ks])
    np.testing.assert_allclose(batched, looped, rtol=1e-9, atol=1e-13)


# --------------------------------------------------------------------------- batches in lockstep

BATCH_TS = jnp.linspace(0.0, 0.1, 2_001)
BATCH_K = np.array([1e4, 2.5e4, 4e4, 8e4])


def oscillators(ks, c):
    return eqx.filter_vmap(lambda k: oscillator(k, c))(jnp.asarray(ks))


@pytest.mark.parametrize("c", [0.0, 20.0], ids=["undamped", "damped"])
def test_batch_in_lockstep_matches_closed_form_per_variant(c):
    """Variants with their own stiffness and initial position, one shared initial velocity."""
    q0s = np.array([[0.01], [-0.02], [0.005], [0.0]])
    sol = simulate_batch(
        oscillators(BATCH_K, c), q0s, [V0], BATCH_TS, system_axes=eqx.if_array(0), **TIGHT
    )
    t = np.asarray(BATCH_TS)
    assert sol.q.shape == sol.vdot.shape == (4, t.size, 1)
    assert np.all(np.asarray(sol.status) == 0)
    steps = np.asarray(sol.stats["num_steps"])
    assert np.all(steps == steps[0]), "the variants share their steps"
    for b, k in enumerate(BATCH_K):
        q_ref, v_ref = oscillator_closed_form(1.0, k, c, t, q0=q0s[b, 0])
        for got, ref in ((sol.q[b, :, 0], q_ref), (sol.v[b, :, 0], v_ref)):
            assert np.max(np.abs(got - ref)) <= 1e-7 * np.max(np.abs(ref)), (b, k)
        np.testing.assert_allclose(
            sol.vdot[b, :, 0], -(k * sol.q[b, :, 0] + c * sol.v[b, :, 0]), rtol=1e-12, atol=1e-9
        )
        np.testing.assert_allclose(sol.sensors["spring"][b], k * sol.q[b, :, 0])


def test_batch_gradient_matches_closed_form():
    """d q_b(T)/d k_b through the lockstep batch (discrete adjoint), against the derivative of
    q = q0 cos ωt + v0/ω sin ωt, ω = √(k/m)."""
    t_end = float(BATCH_TS[-1])

    def loss(ks):
        sol = simulate_batch(
            oscillators(ks, 0.0), [Q0], [V0], BATCH_TS, system_axes=eqx.if_array(0), **TIGHT
        )
        return jnp.sum(sol.q[:, -1, 0])

    grad = jax.jit(jax.grad(loss))(jnp.asarray(BATCH_K))
    w = np.sqrt(BATCH_K)
    dq_dw = (
        -Q0 * t_end * np.sin(w * t_end)
        - V0 / w**2 * np.sin(w * t_end)
        + V0 * t_end / w * np.cos(w * t_end)
    )
    np.testing.assert_allclose(grad, dq_dw / (2 * w), rtol=1e-6)


def test_batch_errors_name_the_variant_and_argument():
    ts = jnp.linspace(0.0, 1.0, 11)
    one = oscillator()
    with pytest.raises(ValueError, match="batch sizes disagree"):
        simulate_batch(one, np.zeros((3, 1)), np.zeros((4, 1)), ts)
    with pytest.raises(ValueError, match="nothing is batched"):
        simulate_batch(one, [Q0], [V0], ts)
    with pytest.raises(ValueError, match=r"q0\[1\] \(variant 1\) is not finite"):
        simulate_batch(one, [[Q0], [np.nan]], [V0], ts)
    with pytest.raises(ValueError, match="stepsize_controller"):
        simulate_batch(one, [[Q0]], [V0], ts, stepsize_controller=diffrax.StepTo(ts))
    poisoned = eqx.filter_vmap(PoisonedAt)(jnp.array([2.0, 0.35, 3.0]))
    collapsed = r"batch of 3 variants.*step size collapsed.*t = 0\.35"
    with pytest.raises(SimulationError, match=collapsed):
        simulate_batch(poisoned, [1.0], [0.0], ts, system_axes=eqx.if_array(0))
    sol = simulate_batch(poisoned, [1.0], [0.0], ts, system_axes=eqx.if_array(0), throw=False)
    assert np.all(np.asarray(sol.status) == 2), "the batch stops together"
    # A fault only one variant's samples show is that variant's.
    sensing = eqx.filter_vmap(SensorFaultAt)(jnp.array([2.0, 0.35, 3.0]))
    with pytest.raises(SimulationError, match=r"variant 1 of 3: .*non-finite.*a sensor is non"):
        simulate_batch(sensing, [1.0], [0.0], ts, system_axes=eqx.if_array(0))
    sol = simulate_batch(sensing, [1.0], [0.0], ts, system_axes=eqx.if_array(0), throw=False)
    assert np.asarray(sol.status).tolist() == [0, 4, 0]


class SensorFaultAt(MechanicalSystem):
    """A unit oscillator whose sensor turns NaN after t_bad (the motion stays finite)."""

    t_bad: jax.Array

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        return -q

    def sensors(self, t, q, v, vdot):
        return {"x": jnp.where(t > self.t_bad, jnp.nan, q[0])}


def test_output_chunk_does_not_change_outputs():
    """The saved samples' accelerations, multipliers and sensors are evaluated in chunks; any
    chunk size (1, one that does not divide the sample count, all samples at once) gives the
    same values up to round-off (vectorised and single evaluations fuse differently, and the
    augmented-Lagrangian multiplier updates amplify it to ~1e-10); the constrained pendulum has
    multipliers, the oscillator none."""
    pend = Pendulum()
    ts = jnp.linspace(0.0, 1.0, 11)
    cases = [(oscillator(), [Q0], [V0]), (pend, [pend.length, 0.0], [0.0, 0.0])]
    for system, q0, v0 in cases:
        runs = [simulate(system, q0, v0, ts, output_chunk=c, **TIGHT) for c in (1, 5, 64)]
        for run in runs[1:]:
            for a, b in zip(jax.tree.leaves(runs[0]), jax.tree.leaves(run), strict=True):
                np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="output_chunk"):
        simulate(oscillator(), [Q0], [V0], ts, output_chunk=0)


# --------------------------------------------------------------------------- pendulum

THETA0 = np.pi / 2
PEND_TS = jnp.linspace(0.0, 4.1, 4_101)  # one and a half periods at 1 kHz


@pytest.fixture(scope="module")
def pendulum_run():
    pend = Pendulum()
    sol = simulate(pend, [pend.length, 0.0], [0.0, 0.0], PEND_TS, rtol=1e-11, atol=1e-13)
    return pend, sol


def zero_crossings(sol):
    """Times where x = 0, by the second-order Taylor root from the nearest sample."""
    t, x = np.asarray(sol.ts), np.asarray(sol.q[:, 0])
    xd, xdd = np.asarray(sol.v[:, 0]), np.asarray(sol.vdot[:, 0])
    roots = []
    for i in np.flatnonzero(np.sign(x[:-1]) != np.sign(x[1:])):
        j = i if abs(x[i]) < abs(x[i + 1]) else i + 1
        tau = -x[j] / xd[j]
        for _ in range(3):  # Newton on x + ẋ τ + ½ ẍ τ²
            tau -= (x[j] + xd[j] * tau + 0.5 * xdd[j] * tau**2) / (xd[j] + xdd[j] * tau)
        roots.append(t[j] + tau)
    return np.array(roots)


def test_pendulum_period_matches_elliptic_integral(pendulum_run):
    pend, sol = pendulum_run
    period = 4 * np.sqrt(pend.length / G) * scipy.special.ellipk(np.sin(THETA0 / 2) ** 2)
    crossings = zero_crossings(sol)  # T/4, 3T/4, 5T/4
    assert crossings.size == 3
    np.testing.assert_allclose(crossings[2] - crossings[0], period, rtol=1e-6)
    np.testing.assert_allclose(crossings[1] - crossings[0], period / 2, rtol=1e-6)


def test_pendulum_energy_constraint_and_tension(pendulum_run):
    pend, sol = pendulum_run
    scale = pend.m * G * pend.length
    energy = np.asarray(sol.sensors["energy"])
    assert np.max(np.abs(energy - energy[0])) / scale < 1e-8
    assert float(sol.constraint_drift) < 1e-9  # m², reported by the solution
    assert float(sol.velocity_drift) < 1e-8
    # Rod tension: constraint force −Φ_vᵀ λ = −2λ q, so T = 2 λ L; closed form along the path.
    tension = 2 * np.asarray(sol.multipliers[:, 0]) * pend.length
    cos_theta = -np.asarray(sol.q[:, 1]) / pend.length
    np.testing.assert_allclose(
        tension, pend.m * G * (3 * cos_theta - 2 * np.cos(THETA0)), rtol=0, atol=1e-7 * pend.m * G
    )
    # At the lowest point: m g (3 − 2 cos θ₀), read at the sample nearest the bottom.
    bottom = np.argmin(np.asarray(sol.q[:, 1]))
    np.testing.assert_allclose(tension[bottom], pend.m * G * (3 - 2 * np.cos(THETA0)), rtol=1e-5)


def test_redundant_constraint_same_motion_and_projection(pendulum_run):
    pend, sol = pendulum_run
    twice = simulate(
        Pendulum(copies=2),
        [pend.length, 0.0],
        [0.0, 0.0],
        PEND_TS,
        rtol=1e-11,
        atol=1e-13,
        project=True,
    )
    assert twice.multipliers.shape == (PEND_TS.size, 2)
    assert np.all(np.isfinite(twice.q)) and np.all(np.isfinite(twice.multipliers))
    np.testing.assert_allclose(twice.q, sol.q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(twice.multipliers, 0.5 * sol.multipliers.repeat(2, 1), atol=1e-6)
    # The saved states are projected onto |q| = L, q·v = 0 (the drift is reported before that).
    q, v = np.asarray(twice.q), np.asarray(twice.v)
    assert np.max(np.abs(np.sum(q * q, axis=1) - pend.length**2)) < 1e-14
    assert np.max(np.abs(np.sum(q * v, axis=1))) < 1e-13
    assert 0 < float(twice.constraint_drift) < 1e-9


# --------------------------------------------------------------------------- prescribed motion


def test_prescribed_motion_multiplier():
    drv = DrivenPair()
    a, w, k = drv.amp, drv.omega, drv.k
    big_y = a * k / (k - drv.m2 * w**2)  # steady response of mass 2, x₂ = Y sin ωt
    ts = jnp.linspace(0.0, 2.0, 401)
    sol = simulate(drv, [0.0, 0.0], [a * w, big_y * w], ts, **TIGHT)
    t = np.asarray(ts)
    s = np.sin(w * t)
    np.testing.assert_allclose(sol.q[:, 0], a * s, rtol=0, atol=1e-10)
    np.testing.assert_allclose(sol.q[:, 1], big_y * s, rtol=0, atol=1e-8)
    x_pp = -a * w**2 * s
    np.testing.assert_allclose(sol.vdot[:, 0], x_pp, rtol=0, atol=1e-8)
    # M ẍ + Φ_vᵀ λ = Q with Φ_v = [−1, 0]: λ = m₁ ẍ_p − k (x₂ − x₁), i.e. m₁ ẍ_p minus the
    # spring's pull — the force the drive must supply.
    lam_ref = drv.m1 * x_pp - k * (big_y - a) * s
    np.testing.assert_allclose(sol.multipliers[:, 0], lam_ref, rtol=0, atol=1e-7)


# --------------------------------------------------------------------------- stiff: implicit


def test_implicit_solver_on_stiff_chain_matches_explicit_and_expm():
    chain = Chain()
    q0, v0 = np.array([0.01, 0.0105]), np.array([0.0, 0.0])
    ts = jnp.linspace(0.0, 0.2, 201)
    implicit = simulate(chain, q0, v0, ts, solver=diffrax.Kvaerno5(), rtol=1e-9, atol=1e-11)
    explicit = simulate(chain, q0, v0, ts, rtol=1e-9, atol=1e-11)
    a = np.zeros((4, 4))
    a[:2, 2:] = np.eye(2)
    a[2:, :2] = [[-chain.k1 - chain.k2, chain.k2], [chain.k2, -chain.k2]]
    a[2:, 2:] = [[-chain.c2, chain.c2], [chain.c2, -chain.c2]]
    y0 = np.concatenate([q0, v0])
    ref = np.stack([scipy.linalg.expm(a * t) @ y0 for t in np.asarray(ts)])
    for sol in (implicit, explicit):
        np.testing.assert_allclose(sol.q, ref[:, :2], rtol=0, atol=1e-8)
    np.testing.assert_allclose(implicit.q, explicit.q, rtol=0, atol=1e-8)
    # The point of an implicit solver: far fewer steps on a stiff problem.
    assert int(implicit.stats["num_steps"]) * 5 < int(explicit.stats["num_steps"]), (
        implicit.stats,
        explicit.stats,
    )


# --------------------------------------------------------------------------- failures


def test_blow_up_raises_with_time_reached():
    ts = jnp.linspace(0.0, 1.0, 11)
    with pytest.raises(SimulationError, match=r"maximum number of steps.*t = [0-9.e+-]+ s") as err:
        simulate(Explosive(), [1.0], [0.0], ts, max_steps=50)
    assert 0.0 < err.value.t_reached < 1.0
    assert err.value.status == 1


def test_nan_force_raises_eagerly_and_under_jit():
    ts = jnp.linspace(0.0, 1.0, 11)
    poisoned = PoisonedAt()
    with pytest.raises(SimulationError, match=r"step size collapsed.*t = 0\.35") as err:
        simulate(poisoned, [1.0], [0.0], ts)
    assert abs(err.value.t_reached - 0.35) < 1e-9
    # Without throwing: the partial solution, with the samples reached and the time.
    sol = simulate(poisoned, [1.0], [0.0], ts, throw=False)
    assert int(sol.status) == 2 and abs(float(sol.t_reached) - 0.35) < 1e-9
    assert np.all(np.isfinite(sol.q[:4])) and np.all(np.isinf(sol.q[4:]))
    assert "t = 0.35" in sol.message()
    # Under jit the error is raised at run time, naming the reason.
    with pytest.raises(Exception, match="step size collapsed"):
        jax.block_until_ready(jax.jit(lambda q0: simulate(poisoned, q0, [0.0], ts).q)(jnp.ones(1)))


def test_nan_with_fixed_steps_is_reported_not_returned():
    ts = jnp.linspace(0.0, 1.0, 11)
    with pytest.raises(SimulationError, match=r"non-finite values.*t = 0\.4 s") as err:
        simulate(
            PoisonedAt(),
            [1.0],
            [0.0],
            ts,
            stepsize_controller=diffrax.ConstantStepSize(),
            dt0=0.01,
        )
    assert err.value.status == 4 and abs(err.value.t_reached - 0.4) < 1e-12


class Faulty(MechanicalSystem):
    """A unit oscillator that goes wrong in one named way: ``fault`` is ``"mass"`` (a massless
    coordinate: singular mass matrix from the start) or ``"sensor"`` (a sensor that turns NaN
    after 0.35 s while the motion stays finite)."""

    fault: str = eqx.field(static=True)

    def mass(self, q):
        return jnp.zeros((1, 1)) if self.fault == "mass" else jnp.eye(1)

    def forces(self, t, q, v):
        return -q

    def sensors(self, t, q, v, vdot):
        return {"x": jnp.where(t > 0.35, jnp.nan, q[0])}


@pytest.mark.parametrize(
    "system, status, diagnosis, t_reached",
    [
        (Faulty("mass"), 2, "the mass matrix is singular", 0.0),
        (Faulty("sensor"), 4, "a sensor is non-finite", 0.4),
        (PoisonedAt(), 2, "no non-finite value", 0.35),
    ],
)
def test_diagnosis_names_what_is_wrong(system, status, diagnosis, t_reached):
    """The diagnosis is of the state where the simulation stopped (the last accepted step, or
    the first non-finite sample), so it names the fault built into each model."""
    sol = simulate(system, [1.0], [0.0], jnp.linspace(0.0, 1.0, 11), throw=False)
    assert int(sol.status) == status
    assert DIAGNOSES[int(sol.diagnosis)].startswith(diagnosis), DIAGNOSES[int(sol.diagnosis)]
    assert abs(float(sol.t_reached) - t_reached) < 1e-9


class _WrongMass(Pendulum):
    def mass(self, q):
        return self.m * jnp.eye(3)


def test_equations_of_the_wrong_shape_are_named_on_every_call():
    """A mass matrix of the wrong shape is refused before any solve, naming the method and the
    shapes — again on a second call (a structure is remembered only once it passed)."""
    q0, v0, ts = jnp.array([1.3, 0.0]), jnp.zeros(2), jnp.linspace(0.0, 0.1, 3)
    for _ in range(2):
        with pytest.raises(ValueError, match=r"_WrongMass.mass\(q\) has shape \(3, 3\), "
                                             r"expected \(2, 2\)"):  # fmt: skip
            simulate(_WrongMass(), q0, v0, ts)
    # A structure that passed is not traced again; new parameter values keep that structure.
    traced = []

    class Counting(Pendulum):
        def forces(self, t, q, v):
            traced.append(1)
            return super().forces(t, q, v)

    simulate(Counting(m=jnp.asarray(0.7)), q0, v0, ts)
    before = len(traced)
    simulate(Counting(m=jnp.asarray(0.9)), q0, v0, ts)
    assert len(traced) == before
