"""A spatial slider-crank driven at constant crank speed, against its closed-form kinematics.

The crank turns about z by a prescribed revolute; the rod has a spherical joint at the crank pin
and a universal joint at the slider, which runs on a line (s, e, h) out of the crank's plane.
Reference: s(θ) = r cos θ + √(L² − (r sin θ − e)² − h²) and its time derivative, written from
the geometry (``multibody_models.slider_position``).
"""

import jax.numpy as jnp
import numpy as np
from multibody_models import SLIDER_CRANK, slider_crank, slider_position

import diffmbs.multibody as mb
from diffmbs.integrate import simulate

TIGHT = {"rtol": 1e-10, "atol": 1e-12}


def slider_velocity(theta, omega, p=SLIDER_CRANK):
    r, length, e, h = p["crank"], p["rod"], p["offset_y"], p["offset_z"]
    root = np.sqrt(length**2 - (r * np.sin(theta) - e) ** 2 - h**2)
    return omega * (-r * np.sin(theta) - (r * np.sin(theta) - e) * r * np.cos(theta) / root)


def test_spatial_slider_crank_follows_closed_form_kinematics():
    model = slider_crank()
    q0 = mb.assemble(model, t=0.0)  # from the rough guess; 0 DOF, so fully determined
    v0 = mb.consistent_velocities(model, q0, 0.0)
    ts = jnp.linspace(0.0, 1.0, 201)  # one crank revolution
    sol = simulate(model, q0, v0, ts, **TIGHT)
    omega = SLIDER_CRANK["speed"]
    theta = omega * np.asarray(ts)
    np.testing.assert_allclose(
        sol.sensors["crank_angle"][:, 0], np.angle(np.exp(1j * theta)), atol=1e-9
    )
    s_ref = slider_position(theta)
    assert np.ptp(s_ref) > 0.35  # a real stroke, out of the crank's plane
    np.testing.assert_allclose(sol.sensors["s"][:, 0], s_ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        sol.sensors["s_dot"][:, 0], slider_velocity(theta, omega), rtol=0, atol=1e-8
    )
    assert float(sol.constraint_drift) < 1e-10
