"""Solver jitter: how far the simulation's own step sequence moves the fitted parameters.

An adaptive ODE solver accepts a sequence of steps that changes *discontinuously* with the
parameters: a step accepted at one value is rejected at a neighbouring one. The simulated
response is then the smooth response of the equations plus an error ``e(θ)`` of the order of
the tolerances that jumps at every such change. Gradients stay exact for each step sequence,
but a least-squares fit stops wherever ``Jᵀ(r + e) = 0``: at ``θ̂ − θ* ≈ −(JᵀJ)⁻¹Jᵀ e(θ̂)``,
an error the Gauss–Newton covariance (noise alone) does not contain. Through impacts and
chaotic motion it is large: the slider-crank's 60 ms record at ``rtol = 1e-6`` moves the
fitted clearance by about one σ this way, at ``rtol = 1e-8`` by 1e-3 σ, at equal cost.

:func:`solver_jitter` measures it at the optimum: the residuals at ``z`` and at ``checks``
points ``z + δ_k`` a ten-thousandth of σ away (so the smooth response barely moves and its
linear part ``J δ_k`` is subtracted) differ by ``e_k = e(z + δ_k) − e(z)``; the spread of
their parameter shifts ``s_k = J⁺ e_k`` over the probes estimates the jitter's covariance.
(Not their mean square: the fit chose ``z`` among the jitter's dimples, so ``e(z)`` is no
independent draw — in a straight line's test the mean square missed 40 % of the variance.)
:class:`~identification.FitResult` adds it to the noise covariance ``s² (JᵀJ)⁻¹`` after
taking the jitter's share out of ``s²`` (the residuals' variance holds both): jitter spread
over the residuals like noise then changes nothing, while jitter along the columns of ``J`` —
impacts a little earlier or later — is small in the residuals and large in the parameters,
and widens them. The message says so when it matters.
Fixed-step models have no jitter: the shifts are zero to round-off.

The Jacobian itself is checked too: two more simulations per parameter, ``z ± h e_i`` with ``h``
:data:`DERIVATIVE_PROBE` σ, give a central difference that column ``J_i`` must match up to the
jitter (``derivative_error``: the largest relative difference). The step is at least
:data:`DERIVATIVE_JITTER_MARGIN` times the jitter's σ of that parameter, so that the difference
measures the slope and not the jitter; where it errs beyond the note, a second difference at
3h (two simulations more) stands in, for one step sequence may jump (the gear rig's friction
coefficient, jittered by 0.5 σ: its column is right to 2–6 % at steps of 0.01–0.1 in z, and
single differences at 1e-3 and at 0.0228 called it 125 % and 85 % wrong). Derivatives taken
along steps that resolve the motion but not its sensitivity are off by orders of magnitude (a
journal riding its bore: 10⁴; ``diffmbs.ForwardSensitivity`` is the cure); the fit's message
names an error above :data:`DERIVATIVE_NOTE`.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from identification._problem import evaluate

__all__ = ["add_jitter", "solver_jitter"]

JITTER_NOTE = 0.3
"""Jitter (in σ of the noise) from which the fit's message names it."""

PROBE_SCALE = 1e-4
"""Size of the probes ``δ_k`` in σ of each parameter."""

DERIVATIVE_PROBE = 0.1
"""Step (σ of the parameter) of the central differences that check the Jacobian."""

DERIVATIVE_STEP_FLOOR = 1e-3
"""Their smallest step in the fit's coordinate z."""

DERIVATIVE_JITTER_MARGIN = 10.0
"""Their smallest step in units of the parameter's jitter σ (in z)."""

DERIVATIVE_NOTE = 0.5
"""Relative difference between ``J δ`` and the central difference from which the fit's message
says the derivatives look wrong (a rough misfit's kinks and the jitter stay well below)."""


def solver_jitter(
    problem,
    z: np.ndarray,
    residuals: np.ndarray,
    jac: np.ndarray,
    std_z: np.ndarray,
    *,
    checks: int = 4,
    seed: int = 0,
) -> dict:
    """The jitter of the module docstring at the optimum ``z``.

    Args:
        problem: the :class:`~identification.Problem`.
        z: the optimum ``(p,)``; ``residuals`` ``(m,)`` there, from the same compiled
            evaluation :func:`~identification._problem.evaluate` the probes use.
        jac: ``∂r/∂z`` ``(m, p)``; ``std_z``: the noise's σ ``(p,)`` (``inf`` where not
            identifiable: those directions are probed at 1e-9 of ``1 + |z|``).
        checks: probes (simulations), at least 2; 0 skips the check.

    Returns:
        ``{"checks", "covariance_z" (p, p), "residual_ratio" — RMS of the jitter over RMS of the
        residuals, "derivative_error", "derivative_worst" — :func:`derivative_error`}``.
    """
    p = z.size
    zero = {"checks": 0, "covariance_z": np.zeros((p, p)), "residual_ratio": 0.0,
            "derivative_error": 0.0, "derivative_worst": 0}  # fmt: skip
    if checks < 2 or residuals.size <= p:
        return zero
    finite = np.isfinite(std_z) & (std_z > 0)
    scale = np.where(finite, PROBE_SCALE * np.where(finite, std_z, 0.0), 1e-9 * (1.0 + np.abs(z)))
    rng = np.random.default_rng(seed)
    pinv = np.linalg.pinv(jac, rcond=1e-12)  # as the noise covariance (gauss_newton_covariance)
    shifts, jitter = [], []
    for _ in range(checks):
        delta = scale * rng.standard_normal(p)
        probed = np.asarray(evaluate(problem, jnp.asarray(z + delta))[0])
        e = probed - residuals - jac @ delta
        if not np.all(np.isfinite(e)):
            return zero
        shifts.append(pinv @ e)
        jitter.append(e)
    rms = math.sqrt(float(np.mean(residuals**2)))
    spread = float(np.mean(np.var(np.array(jitter), axis=0, ddof=1)))
    covariance = np.atleast_2d(np.cov(np.array(shifts), rowvar=False))
    error, worst = derivative_error(problem, z, jac, std_z, np.sqrt(np.diagonal(covariance)))
    return {"checks": checks, "covariance_z": covariance,
            "residual_ratio": math.sqrt(spread) / rms if rms > 0 else 0.0,
            "derivative_error": error, "derivative_worst": worst}  # fmt: skip


def derivative_error(problem, z: np.ndarray, jac: np.ndarray, std_z: np.ndarray,
                     jitter_z: np.ndarray | None = None) -> tuple[float, int]:  # fmt: skip
    """``(largest, its parameter's index)`` over the parameters of ``‖d_i − J_i‖ / ‖d_i‖``,
    ``d_i`` the central difference of the residuals along parameter i with a step of
    :data:`DERIVATIVE_PROBE` σ_i (at least :data:`DERIVATIVE_STEP_FLOOR` in z: a wrong column
    has a wrong, small σ; and :data:`DERIVATIVE_JITTER_MARGIN` times ``jitter_z`` ``(p,)``, the
    jitter's σ in z), and where that errs by more than :data:`DERIVATIVE_NOTE` again at three
    times the step: the smaller of the two errors counts (a jump of the solver's step sequence
    can spoil one difference, a wrong column spoils both); ``2p`` evaluations, two more per
    doubtful column. 0 where a difference is zero or not finite."""
    largest, worst = 0.0, 0
    jitter_z = np.zeros_like(z) if jitter_z is None else np.nan_to_num(jitter_z)
    for i in range(z.size):
        sigma = std_z[i] if np.isfinite(std_z[i]) else 0.0
        h = max(DERIVATIVE_PROBE * sigma, DERIVATIVE_STEP_FLOOR,
                DERIVATIVE_JITTER_MARGIN * jitter_z[i])  # fmt: skip
        error = _column_error(problem, z, jac, i, h)
        if error > DERIVATIVE_NOTE:  # a jump of the step sequence, or a wrong column?
            error = min(error, _column_error(problem, z, jac, i, 3.0 * h))
        if error > largest:
            largest, worst = error, i
    return largest, worst


def _column_error(problem, z: np.ndarray, jac: np.ndarray, i: int, h: float) -> float:
    """``‖d − J_i‖ / ‖d‖`` for the central difference ``d`` along parameter i with step h in z
    (0 where it is zero or not finite)."""
    step = np.zeros_like(z)
    step[i] = h
    above, below = (np.asarray(evaluate(problem, jnp.asarray(z + sign * step))[0])
                    for sign in (1.0, -1.0))  # fmt: skip
    difference = (above - below) / (2.0 * h)
    size = float(np.linalg.norm(difference))
    error = float(np.linalg.norm(difference - jac[:, i])) / size if size > 0 else 0.0
    return error if math.isfinite(error) else 0.0


def add_jitter(noise_covariance: np.ndarray, jitter: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(covariance (p, p), sigma (p,))``: the noise's covariance with the jitter's share of
    ``s²`` taken out, plus the jitter's; ``sigma`` is the jitter's σ in units of the noise's."""
    noise = noise_covariance * max(1.0 - jitter["residual_ratio"] ** 2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(np.diagonal(jitter["covariance_z"]) / np.diagonal(noise))
    return noise + jitter["covariance_z"], np.where(np.isfinite(sigma), sigma, 0.0)
