"""Position analysis and consistent velocities: failures that must be reported clearly.

References: a four-bar whose links cannot span the ground link (no assembly exists); the
flattened parallelogram four-bar, a known change point (the Jacobian loses a rank there);
a velocity request that contradicts a joint rate.
"""

import numpy as np
import pytest
from multibody_models import four_bar

import diffmbs.multibody as mb

PARALLELOGRAM = {"ground": 1.0, "crank": 0.5, "coupler": 1.0, "rocker": 0.5}


def test_inconsistent_assembly_names_a_joint():
    short = {"ground": 1.0, "crank": 0.2, "coupler": 0.3, "rocker": 0.2}  # cannot span 1 m
    with pytest.raises(mb.AssemblyError, match=r"residual.*joint '[ABCD]' \(Revolute\)"):
        mb.assemble(four_bar(lengths=short), joint_coordinates={"A": 0.0})


def test_singular_configuration_is_reported_not_integrated():
    flat = four_bar(0.0, PARALLELOGRAM, pin_c=(1.5, 0.0, 0.0), rough=False)  # all links in line
    message = r"rank 16 here but 17 .*joints involved"
    with pytest.raises(mb.SingularConfigurationError, match=message):
        mb.assemble(flat, joint_coordinates={"A": 0.0})
    # Away from the change point the same mechanism (redundant constraints) is fine.
    pin_c = (1.0 + 0.5 * np.cos(1.0), 0.5 * np.sin(1.0), 0.0)
    q = mb.assemble(four_bar(1.0, PARALLELOGRAM, pin_c=pin_c), joint_coordinates={"A": 1.0})
    assert np.all(np.isfinite(np.asarray(q)))


def test_assembly_and_velocity_arguments_are_checked():
    model = four_bar()
    with pytest.raises(mb.ModelError, match="unknown joint 'Z'"):
        mb.assemble(model, joint_coordinates={"Z": 0.0})
    q = mb.assemble(model, joint_coordinates={"A": np.pi / 3})
    # The crank's ω̄_z is the rate of joint A: 1 and 5 conflict (the compromise is 3).
    with pytest.raises(mb.ModelError, match=r"rate of joint 'A' cannot be 1 \(best is 3\)"):
        mb.consistent_velocities(
            model, q, joint_rates={"A": 1.0}, body_angular_velocities={"crank": (0, 0, 5.0)}
        )
    v = mb.consistent_velocities(model, q, body_angular_velocities={"crank": (0, 0, 2.0)})
    np.testing.assert_allclose(v[model.v_slice("crank")][3:], [0, 0, 2.0], atol=1e-12)
