"""The constrained engine on problems it was not tuned for: IFToMM A01 with tiny rotational
inertias and A02 through its singular positions, against references outside diffmbs
(elliptic-integral period, SciPy integration of the one-degree-of-freedom equation)."""

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
from iftomm import (
    bob_inertia,
    double_four_bar,
    double_four_bar_passes,
    double_four_bar_tip,
    pendulum,
    pendulum_bottom_speed,
    pendulum_period,
)

import diffmbs
import diffmbs.multibody as mb
from diffmbs.system import AugmentedLagrangianKKT


@pytest.mark.parametrize("coordinates", ["full", "joint"])
@pytest.mark.parametrize("inertia", [1e-6, 1e-9, "point mass"])
def test_pendulum_with_tiny_inertia_keeps_its_period(inertia, coordinates):
    """A 1 kg bob 1 m from the pivot, released horizontally. A quarter period later it passes
    the bottom at full speed, so the timing error is |x(T/4)| / speed; it must be below 1e-6 s.
    (The augmented Lagrangian used to leave the bob 1.29 m from the pivot at 1e-9 kg·m².) The
    point mass is the builder's (a 1 µm sphere, 4e-13 kg·m²); all cases share one program."""
    model = pendulum(inertia)
    q0, v0 = model.initial_state()
    if coordinates == "joint":
        model = mb.in_joint_coordinates(model)
        q0, v0 = model.from_maximal(q0, v0)
    inertia = bob_inertia(inertia)
    period = pendulum_period(inertia)
    ts = jnp.array([0.0, period / 4, period])
    sol = diffmbs.simulate(
        model, q0, v0, ts, solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12, max_steps=4096
    )
    bob = np.asarray(sol.sensors["bob position"])
    assert abs(bob[1, 0]) / pendulum_bottom_speed(inertia) < 1e-6
    np.testing.assert_allclose(np.hypot(*bob[:, :2].T), 1.0, atol=1e-9)
    np.testing.assert_allclose(bob[2, :2], [1.0, 0.0], atol=1e-6)
    energy = np.asarray(sol.sensors["energy"])
    np.testing.assert_allclose(energy, energy[0], atol=1e-9)


def test_unconverged_augmented_lagrangian_is_an_error_that_names_the_joint():
    """The old default (augmented Lagrangian, 4 iterations) cannot solve the 1e-6 kg·m² bob to
    round-off: instead of a silently wrong period, the simulation stops and names the joint."""
    model = pendulum(1e-6)
    q0, v0 = model.initial_state()
    with pytest.raises(diffmbs.SimulationError, match=r"AugmentedLagrangianKKT.*'pivot'"):
        diffmbs.simulate(
            model, q0, v0, jnp.linspace(0.0, 1.0, 5), kkt_solver=AugmentedLagrangianKKT(),
            rtol=1e-10, atol=1e-10, max_steps=4096,
        )  # fmt: skip


JOINT_BRANCH_SWITCH = pytest.mark.xfail(
    strict=False,
    reason="known defect: in joint coordinates (B1, B2 as loop constraints) round-off decides "
    "the branch at the first flat position on some CPUs (AMD EPYC, AVX-512: cranks 1 and 2 "
    "stop at π, B0 leaves the reference by 0.13 m at 10 s); passes elsewhere",
)


# The joint case gates nothing (a non-strict xfail) and costs ~25 s: make test-slow runs it.
@pytest.mark.parametrize("coordinates", [
    "full", pytest.param("joint", marks=(JOINT_BRANCH_SWITCH, pytest.mark.slow)),
])  # fmt: skip
def test_double_four_bar_through_its_singular_positions(coordinates):
    """A02: B0 after 10 s (10 flat positions) within 1e-5 m of the reference, energy
    conserved through every pass, no branch switch (the reference has none)."""
    model = double_four_bar()
    q0, v0 = model.initial_state()
    if coordinates == "joint":
        model = mb.in_joint_coordinates(model)
        q0, v0 = model.from_maximal(q0, v0)
    ts = jnp.linspace(0.0, 10.0, 1001)
    sol = diffmbs.simulate(
        model, q0, v0, ts, solver=diffrax.Dopri8(), rtol=1e-10, atol=1e-10, max_steps=20_000
    )
    reference = double_four_bar_tip(np.asarray(ts))
    tip = np.asarray(sol.sensors["tip"])[:, :2]
    passes = double_four_bar_passes(np.asarray(ts))
    assert len(passes) == 10
    np.testing.assert_allclose(tip[-1], reference[-1], atol=1e-5)
    np.testing.assert_allclose(tip, reference, atol=1e-5)
    energy = np.asarray(sol.sensors["energy"])
    np.testing.assert_allclose(energy[passes], energy[0], atol=1e-5)
    np.testing.assert_allclose(energy, energy[0], atol=1e-5)
