"""Fitters as swappable strategy objects.

A fitter is a small ``equinox.Module`` holding its settings, with three pure methods:

* ``init(problem, z0) -> state`` — the state at the start (a pytree of arrays);
* ``step(problem, state) -> state`` — one iteration;
* ``done(state) -> bool`` — whether the fitter's own stopping rule has fired.

Every state has ``z`` (the current unconstrained vector, ``(p,)``) and ``loss`` (the loss at
``z``, or for the gradient methods at the last evaluated point). Concrete fitters:

* :class:`LevenbergMarquardt` — damped Gauss–Newton with Marquardt's diagonal scaling and
  Nielsen's damping update; the workhorse for least squares with a few parameters.
* :class:`GaussNewton` — undamped steps (least-squares solve, so rank deficiency is harmless)
  with a backtracking (Armijo) line search.
* :class:`Adam` and :class:`LBFGS` — optax's ``adam`` and ``lbfgs`` (zoom line search) on the
  scalar loss.

The model runs only inside compiled kernels shared by all fitters and by the results —
``evaluate`` (residuals and predictions) and ``residuals_and_jacobian`` (forward- or
reverse-mode Jacobian), see :mod:`identification._problem` — so a model is compiled once per
problem structure, whichever fitter runs, and a resumed run or the final covariance compiles
nothing new. Levenberg–Marquardt and Gauss–Newton do their ``p × p`` algebra in NumPy
(float64, deterministic); L-BFGS runs one compiled iteration (optax's zoom line search calls
the loss inside a ``while_loop``).

Why Levenberg–Marquardt is written here rather than taken from optimistix: the loop needs a
state of plain arrays (a checkpoint is just those arrays, and a resumed run repeats the
uninterrupted one bit for bit), the Jacobian only after accepted steps, and the shared kernels
above. ``optimistix.LevenbergMarquardt`` has ``init``/``step`` too, but its state carries
lineax operators and function-info objects whose layout is an implementation detail, it jits
the model into each step, and its damping rule is not Nielsen's. The algorithm is thirty
lines; owning them keeps checkpoints stable.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array

from identification._problem import Problem, evaluate, loss_and_grad, residuals_and_jacobian

__all__ = [
    "CONVERGED_REASONS",
    "LBFGS",
    "REASONS",
    "AbstractFitter",
    "Adam",
    "GaussNewton",
    "LevenbergMarquardt",
]

# Stop reasons (state.reason); 0 = still running.
REASONS: tuple[str, ...] = (
    "running",
    "relative loss change below ftol",
    "step below xtol",
    "loss below atol",
    "damping overflow: no step reduces the loss",
    "line search found no decrease",
    "gradient below gtol",
    "remaining Gauss–Newton step below sigma_tol standard deviations",
)

CONVERGED_REASONS = (1, 2, 3, 6, 7)
"""The stop reasons (indices into ``REASONS``) of a fit that reached its minimum."""


def _near_minimum(r: np.ndarray, jac: np.ndarray, sigma_tol: float) -> bool:
    """Whether the Gauss–Newton step from here, ``δ = −J⁺ r``, is shorter than ``sigma_tol``
    standard deviations of the estimate: ``δᵀ JᵀJ δ = ‖J J⁺ r‖² ≤ sigma_tol² s²`` with
    ``s² = ‖r‖² / (m − p)`` (the covariance is ``s² (JᵀJ)⁻¹``). Closer than that, more steps
    move the parameters by less than their uncertainty's resolution; on a misfit with
    discrepancy or solver jitter they only creep (``ftol``, ``xtol`` stop them much later)."""
    m, p = jac.shape
    if sigma_tol <= 0 or m <= p or not (np.all(np.isfinite(r)) and np.all(np.isfinite(jac))):
        return False
    projected = jac @ np.linalg.lstsq(jac, r, rcond=None)[0]
    return float(projected @ projected) <= sigma_tol**2 * float(r @ r) / (m - p)


def _final_step(problem, z, r, jac, max_box_step):
    """The last, undamped Gauss–Newton step of a fit stopped by ``sigma_tol`` (exact on a
    linear problem; kept only if it lowers the loss): ``(z, r, jac)``."""
    delta = np.linalg.lstsq(jac, -r, rcond=None)[0]
    if max_box_step is not None:
        delta, _ = _limit_box_step(problem.space, z, delta, max_box_step)
    r_new, jac_new = _rj(problem, z + delta)
    if np.all(np.isfinite(jac_new)) and float(r_new @ r_new) < float(r @ r):
        return z + delta, r_new, jac_new
    return z, r, jac


class AbstractFitter(eqx.Module):
    """Strategy for minimising a :class:`~identification.Problem`; see the module docstring.

    ``init`` and ``step`` are called from Python by :func:`fit`; they run the model only
    through compiled kernels (``jax.jit``), so a step costs the model evaluations it needs plus
    a few microseconds of Python. States are ``equinox.Module`` pytrees of arrays, which is
    all a checkpoint stores.
    """

    @abc.abstractmethod
    def init(self, problem: Problem, z0: Array) -> Any:
        """State at ``z0`` (shape ``(p,)``)."""

    @abc.abstractmethod
    def step(self, problem: Problem, state: Any) -> Any:
        """One iteration."""

    def done(self, state: Any) -> bool:
        """Whether the fitter has converged or cannot progress."""
        return int(state.reason) > 0

    def evaluations(self, state: Any, iterations: int) -> dict[str, int]:
        """Model runs so far, ``{"simulations": …, "jacobians": …}``, where the fitter counts
        them (``{}`` otherwise)."""
        del state, iterations
        return {}


def _f64(x) -> np.ndarray:
    return np.array(x, dtype=np.float64)


def _i64(x) -> np.ndarray:
    return np.array(x, dtype=np.int64)


# --------------------------------------------------------------------------- Levenberg–Marquardt


class LMState(eqx.Module):
    """``z`` ``(p,)``; ``residuals`` ``(m,)`` and ``jac`` ``(m, p)`` at ``z``; ``loss`` ``()``;
    damping ``mu`` (relative to diag(JᵀJ)) and its growth factor ``nu``; counts of accepted and
    rejected steps; ``reason`` (index into ``REASONS``, 0 while running). NumPy arrays."""

    z: np.ndarray
    residuals: np.ndarray
    jac: np.ndarray
    loss: np.ndarray
    mu: np.ndarray
    nu: np.ndarray
    accepted: np.ndarray
    rejected: np.ndarray
    reason: np.ndarray


def _rj(problem: Problem, z) -> tuple[np.ndarray, np.ndarray]:
    r, jac = residuals_and_jacobian(problem, jnp.asarray(z, dtype=float))
    return _f64(r), _f64(jac)


def _r(problem: Problem, z) -> np.ndarray:
    return _f64(evaluate(problem, jnp.asarray(z, dtype=float))[0])


def _box_position(space, z: np.ndarray) -> np.ndarray:
    """Each parameter's place in its span, in its sampling coordinate (0 at the lower bound, 1
    at the upper), shape ``(p,)``; NaN where a bound is infinite."""
    values = np.asarray(space.from_unconstrained(z))
    out = np.full(len(space), np.nan)
    for i, prm in enumerate(space.parameters):
        if math.isfinite(prm.lower) and math.isfinite(prm.upper):
            low, high = prm.sampling_box()
            s = math.log(values[i]) if prm.log_scale else values[i]
            out[i] = (s - low) / (high - low)
    return out


BOUND_CLEARANCE = 5e-4
"""A step stops a parameter this fraction of its span short of a bound (its sampling coordinate):
a bounded transform's ``∂θ/∂z`` falls to zero at the bound, where a parameter could not come
back; this close it is still reported as at its bound (``AT_BOUND_MARGIN``)."""


def _limit_box_step(
    space, z: np.ndarray, delta: np.ndarray, limit: float
) -> tuple[np.ndarray, np.ndarray]:
    """``delta`` shortened (direction kept) until no parameter moves more than ``limit`` of its
    span (the transforms are nonlinear: the factor is found by bisection), then any parameter
    that would come closer than ``BOUND_CLEARANCE`` to a bound stopped there. Returns
    ``(delta, stopped)``, ``stopped`` a mask of those parameters."""
    start = _box_position(space, z)

    def moved(factor: float) -> float:
        return float(np.nanmax(np.abs(_box_position(space, z + factor * delta) - start),
                               initial=0.0))  # fmt: skip

    if moved(1.0) > limit:
        low, high = 0.0, 1.0  # moved(low) <= limit < moved(high)
        for _ in range(40):
            mid = 0.5 * (low + high)
            low, high = (mid, high) if moved(mid) <= limit else (low, mid)
        delta = low * delta
    end = _box_position(space, z + delta)
    near = np.isfinite(end) & ((end < BOUND_CLEARANCE) | (end > 1.0 - BOUND_CLEARANCE))
    if np.any(near):
        kept = np.clip(np.where(near, end, 0.5), BOUND_CLEARANCE, 1.0 - BOUND_CLEARANCE)
        z_kept = np.asarray(space.to_unconstrained(space.from_box(kept)))
        delta = np.where(near, z_kept - z, delta)
    return delta, near


class LevenbergMarquardt(AbstractFitter):
    """Levenberg–Marquardt on the residuals, with Nielsen's damping update.

    Each step solves ``(JᵀJ + μ D) δ = −Jᵀ r`` with ``D = diag(JᵀJ)`` (Marquardt's scaling, so
    the steps do not depend on the units of ``z``; diagonal entries below ``1e-12 · max`` are
    raised to that). The gain ratio ``ρ = (F(z) − F(z+δ)) / (L(0) − L(δ))`` (``F = ½‖r‖²``,
    ``L`` its linear model) decides: ``ρ > 0`` accepts, ``μ ← μ · max(1/3, 1 − (2ρ − 1)³)``,
    ``ν ← 2``, and the Jacobian is recomputed there; otherwise ``μ ← μ ν``, ``ν ← 2ν``
    (Nielsen 1999). A trial point with non-finite residuals (a failed simulation) is rejected.
    One iteration costs one model evaluation, plus one Jacobian if the step is accepted.

    ``max_box_step`` limits how far one step moves a parameter with finite bounds: at most that
    fraction of its span in its sampling coordinate (``ln θ`` or ``θ``; the step is shortened,
    its direction kept, and ``ρ`` uses the linear model of the shortened step), and stops a
    parameter :data:`BOUND_CLEARANCE` of its span short of a bound. An SRS misfit is
    far from quadratic, and a full Gauss–Newton step from a start 2–5× off can throw parameters
    to their bounds, where a bounded transform's ``∂θ/∂z`` vanishes and they stay (seen on the
    3-D shock machine, data of its own structure: without the limit the fit stopped at
    2.9 dB² with three parameters on bounds). ``None`` lifts the limit.

    Stops when an accepted step changes the loss by less than ``ftol`` relative, when
    ``‖δ‖ ≤ xtol (‖z‖ + xtol)``, when the loss is at most ``atol``, when the undamped
    Gauss–Newton step is shorter than ``sigma_tol`` standard deviations of the estimate (its
    Mahalanobis length under ``s² (JᵀJ)⁻¹``; 0 turns it off: the fit then takes that step
    undamped if it lowers the loss, and stops), or when ``μ`` exceeds ``mu_max`` (no step
    helps). On a rough misfit (SRS maxima, solver jitter) accepted steps then only creep:
    ``sigma_tol`` ends the 3-D and lumped shock-machine fits in half the iterations.
    """

    ftol: float = 1e-10
    xtol: float = 1e-10
    atol: float = 0.0
    sigma_tol: float = 0.1
    mu0: float = 1e-3
    mu_max: float = 1e16
    max_box_step: float | None = 0.25

    def init(self, problem, z0):
        z0 = _f64(z0)
        r, jac = _rj(problem, z0)
        loss = np.mean(r**2)
        reason = 0 if np.isfinite(loss) and np.all(np.isfinite(jac)) else 4
        return LMState(
            z0, r, jac, _f64(loss), _f64(self.mu0), _f64(2.0), _i64(0), _i64(0), _i64(reason)
        )

    def evaluations(self, state: LMState, iterations: int) -> dict[str, int]:
        # One trial simulation per iteration; a Jacobian at the start and after each accepted step.
        # (and a Jacobian for the final step of a stop by sigma_tol)
        final = int(int(state.reason) == 7)
        return {"simulations": int(iterations), "jacobians": 1 + int(state.accepted) + final}

    def step(self, problem, state: LMState) -> LMState:
        z, r, jac, mu, nu = state.z, state.residuals, state.jac, float(state.mu), float(state.nu)
        a = jac.T @ jac
        g = jac.T @ r
        d = np.diagonal(a).copy()
        d = np.maximum(d, 1e-12 * np.max(d) + np.finfo(np.float64).tiny)
        damped = a + mu * np.diag(d)
        delta = np.linalg.solve(damped, -g)
        if self.max_box_step is not None and np.all(np.isfinite(delta)):
            delta, stopped = _limit_box_step(problem.space, z, delta, self.max_box_step)
            if np.any(stopped) and not np.all(stopped):  # the others' step, those held
                free = ~stopped
                delta[free] = np.linalg.solve(
                    damped[np.ix_(free, free)],
                    -g[free] - damped[np.ix_(free, stopped)] @ delta[stopped],
                )
                delta, _ = _limit_box_step(problem.space, z, delta, self.max_box_step)
        z_new = z + delta
        r_new = _r(problem, z_new)
        f_old = 0.5 * float(r @ r)
        f_new = 0.5 * float(r_new @ r_new)
        step_change = jac @ delta  # L(0) − L(δ) of the linear model, not F(z) − L(δ)
        predicted = -float(r @ step_change) - 0.5 * float(step_change @ step_change)
        rho = (f_old - f_new) / predicted if predicted > 0 else -1.0
        ok = bool(np.isfinite(f_new) and np.all(np.isfinite(delta)) and rho > 0)
        if ok:
            _, jac_new = _rj(problem, z_new)
            if not np.all(np.isfinite(jac_new)):
                ok = False
        if ok:
            z2, r2, jac2 = z_new, r_new, jac_new
            mu2, nu2 = mu * max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3), 2.0
        else:
            z2, r2, jac2, mu2, nu2 = z, r, jac, mu * nu, 2.0 * nu
        loss2 = float(np.mean(r2**2))
        if ok and f_old - f_new <= self.ftol * f_old:
            reason = 1
        elif np.linalg.norm(delta) <= self.xtol * (np.linalg.norm(z) + self.xtol):
            reason = 2
        elif loss2 <= self.atol:
            reason = 3
        elif _near_minimum(r2, jac2, self.sigma_tol):
            reason = 7
            z2, r2, jac2 = _final_step(problem, z2, r2, jac2, self.max_box_step)
            loss2 = float(np.mean(r2**2))
        elif mu2 > self.mu_max:
            reason = 4
        else:
            reason = 0
        return LMState(
            z2,
            r2,
            jac2,
            _f64(loss2),
            _f64(mu2),
            _f64(nu2),
            _i64(state.accepted + ok),
            _i64(state.rejected + (not ok)),
            _i64(reason),
        )


# --------------------------------------------------------------------------- Gauss–Newton


class GNState(eqx.Module):
    """``z``, ``residuals``, ``jac``, ``loss`` at ``z``; ``reason``. NumPy arrays."""

    z: np.ndarray
    residuals: np.ndarray
    jac: np.ndarray
    loss: np.ndarray
    reason: np.ndarray


class GaussNewton(AbstractFitter):
    """Gauss–Newton steps ``δ = −J⁺ r`` (least squares, minimum norm at rank deficiency) with a
    backtracking line search: ``α = 1, ½, ¼, …`` (at most ``max_backtracks`` halvings) until
    ``F(z + αδ) ≤ F(z) + c α ∇Fᵀδ`` (Armijo, ``c = armijo``). Stops as
    :class:`LevenbergMarquardt` (``ftol``, ``xtol``, ``atol``, ``sigma_tol``) or when no ``α``
    decreases the loss."""

    ftol: float = 1e-10
    xtol: float = 1e-10
    atol: float = 0.0
    sigma_tol: float = 0.1
    max_backtracks: int = 30
    armijo: float = 1e-4

    def init(self, problem, z0):
        z0 = _f64(z0)
        r, jac = _rj(problem, z0)
        loss = np.mean(r**2)
        return GNState(z0, r, jac, _f64(loss), _i64(0 if np.isfinite(loss) else 4))

    def step(self, problem, state: GNState) -> GNState:
        z, r, jac = state.z, state.residuals, state.jac
        delta = np.linalg.lstsq(jac, -r, rcond=None)[0]
        f_old = 0.5 * float(r @ r)
        slope = float((jac.T @ r) @ delta)  # ∇F · δ ≤ 0
        alpha, ok = 1.0, False
        for _ in range(self.max_backtracks + 1):
            r_new = _r(problem, z + alpha * delta)
            f_new = 0.5 * float(r_new @ r_new)
            if np.isfinite(f_new) and f_new <= f_old + self.armijo * alpha * slope:
                ok = f_new < f_old or f_old == 0.0
                break
            alpha *= 0.5
        if ok:
            z2 = z + alpha * delta
            _, jac2 = _rj(problem, z2)
            r2 = r_new
        else:
            z2, r2, jac2 = z, r, jac
        loss2 = float(np.mean(r2**2))
        if not ok:
            reason = 5
        elif f_old - f_new <= self.ftol * f_old:
            reason = 1
        elif alpha * np.linalg.norm(delta) <= self.xtol * (np.linalg.norm(z) + self.xtol):
            reason = 2
        elif loss2 <= self.atol:
            reason = 3
        elif _near_minimum(r2, jac2, self.sigma_tol):
            reason = 7
            z2, r2, jac2 = _final_step(problem, z2, r2, jac2, None)
            loss2 = float(np.mean(r2**2))
        else:
            reason = 0
        return GNState(z2, r2, jac2, _f64(loss2), _i64(reason))


# --------------------------------------------------------------------------- optax fitters


class OptaxState(eqx.Module):
    """``z``; optax's state; ``loss`` and ``grad_norm`` at the last evaluated point;
    ``reason``."""

    z: Array
    opt_state: Any
    loss: Array
    grad_norm: Array
    reason: Array


def _optax_init(optimizer, problem: Problem, z0) -> OptaxState:
    z0 = jnp.asarray(z0, dtype=float)
    loss, grad = loss_and_grad(problem, z0)
    return OptaxState(z0, optimizer.init(z0), loss, jnp.linalg.norm(grad), jnp.asarray(0))


@eqx.filter_jit
def _optax_update(fitter, grad, opt_state, z):
    updates, opt_state = fitter._optimizer().update(grad, opt_state, z)
    return optax.apply_updates(z, updates), opt_state


class Adam(AbstractFitter):
    """``optax.adam(learning_rate)`` on the loss, in ``z`` (a step of ``learning_rate`` in
    ``ln θ`` is a relative change of that size). Runs for the iterations :func:`fit` allows,
    or until ``‖∇loss‖ ≤ gtol``. ``state.loss`` is the loss before the latest update. The
    gradient comes from :func:`~identification._problem.loss_and_grad` (the shared forward-mode
    Jacobian kernel when ``jac="fwd"``)."""

    learning_rate: float = 0.05
    gtol: float = 0.0

    def _optimizer(self):
        return optax.adam(self.learning_rate)

    def init(self, problem, z0):
        return _optax_init(self._optimizer(), problem, z0)

    def step(self, problem, state: OptaxState) -> OptaxState:
        loss, grad = loss_and_grad(problem, state.z)
        z, opt_state = _optax_update(self, grad, state.opt_state, state.z)
        gnorm = jnp.linalg.norm(grad)
        reason = jnp.where(gnorm <= self.gtol, 6, 0)
        return OptaxState(z, opt_state, loss, gnorm, reason)


@eqx.filter_jit
def _lbfgs_step(fitter: LBFGS, problem: Problem, state: OptaxState) -> OptaxState:
    opt = fitter._optimizer()
    value_and_grad = optax.value_and_grad_from_state(problem.loss)
    value, grad = value_and_grad(state.z, state=state.opt_state)
    updates, opt_state = opt.update(
        grad, state.opt_state, state.z, value=value, grad=grad, value_fn=problem.loss
    )
    z = optax.apply_updates(state.z, updates)
    new_value = optax.tree_utils.tree_get(opt_state, "value")
    new_grad = optax.tree_utils.tree_get(opt_state, "grad")
    gnorm = jnp.linalg.norm(new_grad)
    change = jnp.abs(value - new_value)
    reason = jnp.select(
        [
            jnp.isfinite(new_value) & (change <= fitter.ftol * jnp.abs(value)),
            gnorm <= fitter.gtol,
            new_value <= fitter.atol,
        ],
        [1, 6, 3],
        0,
    )
    return OptaxState(z, opt_state, new_value, gnorm, reason)


class LBFGS(AbstractFitter):
    """``optax.lbfgs`` (memory ``memory_size``, zoom line search) on the loss.

    One iteration is one compiled function (the line search is a ``while_loop`` that calls the
    loss and its gradient). The value and gradient at each new point come from the line
    search's state (``optax.value_and_grad_from_state``). Stops when the loss changes by at
    most ``ftol`` relative between iterations, when ``‖∇loss‖ ≤ gtol``, or when the loss is at
    most ``atol``.
    """

    memory_size: int = eqx.field(static=True, default=10)
    ftol: float = 1e-12
    gtol: float = 1e-10
    atol: float = 0.0

    def _optimizer(self):
        return optax.lbfgs(memory_size=self.memory_size)

    def init(self, problem, z0):
        return _optax_init(self._optimizer(), problem, z0)

    def step(self, problem, state: OptaxState) -> OptaxState:
        return _lbfgs_step(self, problem, state)
