"""A planar four-bar built from 3-D revolute joints: redundant constraints.

Four revolutes give 20 equations on 18 velocities for 1 DOF (rank 17). References: the coupler
pin C from the intersection of two circles (about the crank pin B and the rocker pivot D) at the
simulated crank angle; energy conservation; the rank of the Jacobian.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from multibody_models import four_bar, four_bar_pins

import diffmbs.multibody as mb
from diffmbs.integrate import simulate
from diffmbs.system import constraint_jacobian

TIGHT = {"rtol": 1e-10, "atol": 1e-12}


@pytest.fixture(scope="module")
def four_bar_run():
    model = four_bar()
    q0 = mb.assemble(model, joint_coordinates={"A": np.pi / 3})
    v0 = mb.consistent_velocities(model, q0, joint_rates={"A": 3.0})
    ts = jnp.linspace(0.0, 2.0, 401)
    return model, q0, simulate(model, q0, v0, ts, **TIGHT)


def test_four_bar_jacobian_is_redundant_and_assembly_holds_the_crank(four_bar_run):
    model, q0, _ = four_bar_run
    jac = np.asarray(jax.jit(lambda q: constraint_jacobian(model, 0.0, q, jnp.zeros(18)))(q0))
    assert jac.shape == (20, 18)
    assert np.linalg.matrix_rank(jac, tol=1e-9 * np.abs(jac).max()) == 17  # 1 DOF, 3 redundant
    np.testing.assert_allclose(model.joint_coordinates("A", q0), [np.pi / 3], atol=1e-12)
    assert max(float(r) for r in model.joint_residuals(0.0, q0).values()) < 1e-12


def test_four_bar_conserves_energy_and_follows_loop_closure(four_bar_run):
    model, q0, sol = four_bar_run
    energy = np.asarray(sol.sensors["energy"])
    assert np.max(np.abs(energy - energy[0])) / np.abs(energy[0]) < 1e-8
    assert float(sol.constraint_drift) < 1e-9
    # Coupler point C from the crank angle alone: circle (B, coupler) ∩ circle (D, rocker).
    theta = np.asarray(sol.sensors["crank_angle"][:, 0])
    assert np.ptp(np.unwrap(theta)) > 2.0  # the crank moves a good deal
    coupler = np.asarray(sol.q)[:, 7:10]  # COM of the coupler, midway between B and C
    c_sim, c_ref = four_bar_pins(theta, coupler)
    np.testing.assert_allclose(c_sim, c_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(coupler[:, 2], 0.0, atol=1e-12)  # stays in its plane
