"""A Rosenbrock–W solver for diffrax: linearly implicit, with a Jacobian frozen at the start.

Why: a modal body's stiffest modes (a supporting channel's ~1 kHz Craig–Bampton modes) hold an
explicit solver at its stability limit, ~0.5 ms a step, through phases where nothing moves
fast (the 1.4 s fall of the shock machine's hammer: ~4,000 steps). A linearly implicit method
is stable there at any step, and its steps follow the slow motion. diffrax 0.7 has no
Rosenbrock method, and its IMEX KenCarp methods collapse their steps on a stiff transient at
tight tolerances (their error estimate is not filtered), so this module writes one.

The method is Rang and Angermann's ROS34PW2 (BIT Numer. Math. 45, 761–787, 2005; coefficients
as in PETSc's ``TSROSWRA34PW2``): four stages, order 3 with an embedded order-2 estimate, stiffly
accurate and L-stable, and a *W-method*: its order holds for any matrix in place of the
Jacobian. So the Jacobian is computed once, at the start of the solve (``jax.jacfwd`` of the
vector field over the flattened state), and kept; it only has to capture the stiff directions,
which for structural modes change little with the configuration. The time enters as a state
whose Jacobian column is left out (allowed for a W-method), so no ∂f/∂t is needed.

Per step: one LU factorisation of ``I − hγJ`` (n × n: ~0.1 ms at n = 121), four evaluations
of the vector field (three stages and the end point, which is the next step's first stage and
gives the cubic Hermite dense output). Differentiable by diffrax's checkpointed adjoint (the
step is plain JAX; the frozen Jacobian is differentiated too, so the gradient is the discrete
map's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import diffrax
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax.flatten_util import ravel_pytree

__all__ = ["RosenbrockW"]

_GAMMA = 4.3586652150845900e-01
# Rang & Angermann (2005), ROS34PW2: stage inputs Y_i = y + Σ_j α_ij k_j, stage equations
# (I − hγJ) k_i = h f(Y_i) + hJ Σ_j γ_ij k_j, solution y + Σ b_i k_i, estimate Σ (b_i − b̂_i) k_i.
_ALPHA = np.array([
    [0.0, 0.0, 0.0],
    [8.7173304301691801e-01, 0.0, 0.0],
    [8.4457060015369423e-01, -1.1299064236484185e-01, 0.0],
    [0.0, 0.0, 1.0],
])  # fmt: skip
_GAMMAS = np.array([
    [0.0, 0.0, 0.0],
    [-8.7173304301691801e-01, 0.0, 0.0],
    [-9.0338057013044082e-01, 5.4180672388095326e-02, 0.0],
    [2.4212380706095346e-01, -1.2232505839045147e00, 5.4526025533510214e-01],
])  # fmt: skip
_B = np.array([2.4212380706095346e-01, -1.2232505839045147e00, 1.5452602553351020e00,
               4.3586652150845900e-01])  # fmt: skip
_B_EMBEDDED = np.array([3.7810903145819369e-01, -9.6042292212423178e-02, 0.5,
                        2.1793326075422950e-01])  # fmt: skip
_C = _ALPHA.sum(axis=1)


class RosenbrockW(diffrax.AbstractAdaptiveSolver):
    """ROS34PW2 (module docstring): a 3rd-order L-stable Rosenbrock–W method whose Jacobian is
    computed once, at ``t0``, and kept for the whole solve. For ODEs (one ``diffrax.ODETerm``);
    use it where stiff, slowly changing linear dynamics (structural modes, stiff springs) limit
    an explicit solver's step, not for stiff contact onsets, whose Jacobian changes each step.

    Solver state: ``(J, f0)``, the frozen Jacobian ``(n, n)`` of the flattened state and the
    vector field at the step's start (first same as last)."""

    term_structure: ClassVar = diffrax.AbstractTerm
    interpolation_cls: ClassVar[Callable[..., diffrax.AbstractLocalInterpolation]] = (
        diffrax.ThirdOrderHermitePolynomialInterpolation
    )

    def order(self, terms):
        return 3

    def error_order(self, terms):
        return 3  # the local error of the order-2 estimate: O(h³)

    def strong_order(self, terms):
        return None

    def init(self, terms, t0, t1, y0, args):
        flat, unravel = ravel_pytree(y0)
        field = lambda x: ravel_pytree(terms.vf(t0, unravel(x), args))[0]  # noqa: E731
        return jax.jacfwd(field)(flat), field(flat)

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        jacobian, f_start = solver_state
        flat, unravel = ravel_pytree(y0)

        def field(t, x):
            return ravel_pytree(terms.vf(t, unravel(x), args))[0]

        f_start = jax.lax.cond(made_jump, lambda: field(t0, flat), lambda: f_start)
        h = t1 - t0
        lu = jsl.lu_factor(jnp.eye(flat.shape[0], dtype=flat.dtype) - (h * _GAMMA) * jacobian)
        ks = []
        for i in range(4):
            stage_input = flat + sum((_ALPHA[i, j] * ks[j] for j in range(i)), jnp.zeros_like(flat))
            f = f_start if i == 0 else field(t0 + _C[i] * h, stage_input)
            coupling = sum((_GAMMAS[i, j] * ks[j] for j in range(i)), jnp.zeros_like(flat))
            ks.append(jsl.lu_solve(lu, h * (f + jacobian @ coupling)))
        y1 = flat + sum(b * k for b, k in zip(_B, ks, strict=True))
        # Filtered (Shampine): the embedded method is not L-stable (R̂(∞) ≈ 0.48), so its raw
        # estimate of a stiff component is about half the component's distance from its
        # quasi-static value however small the step; (I − hγJ)⁻¹ damps it by ~1/(hγ|λ|) and
        # leaves the smooth components' O(h³) estimate as it was.
        error = jsl.lu_solve(
            lu, sum((b - e) * k for b, e, k in zip(_B, _B_EMBEDDED, ks, strict=True))
        )
        f_end = field(t1, y1)
        dense = dict(y0=y0, y1=unravel(y1), k0=unravel(h * f_start), k1=unravel(h * f_end))
        return unravel(y1), unravel(error), dense, (jacobian, f_end), diffrax.RESULTS.successful
