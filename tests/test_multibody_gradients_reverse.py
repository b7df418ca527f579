"""Reverse mode (default checkpointed adjoint + ``jax.grad``) through a contact event.

The model and output of ``test_multibody_gradients.py`` (a ball on a spring thrown at the
ground). Reference: central finite differences of the simulation (steps of 1e-4 relative), as
there; forward mode gives the same discrete derivative, to round-off.
"""

import jax
import numpy as np
from test_multibody_gradients import VALUES, mean_height


def test_reverse_mode_gradient_matches_finite_differences():
    grad = np.asarray(jax.jit(jax.grad(mean_height))(VALUES))
    run = jax.jit(mean_height)
    steps = 1e-4 * VALUES
    fd = [
        (run(VALUES + h * e) - run(VALUES - h * e)) / (2 * h)
        for h, e in zip(steps, np.eye(3), strict=True)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-5)
