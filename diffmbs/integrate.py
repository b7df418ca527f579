"""Time integration of a :class:`~diffmbs.system.MechanicalSystem` (layer 4).

:func:`simulate` integrates the index-1 equations of motion (see :mod:`diffmbs.system`) with
``diffrax.diffeqsolve`` on the state ``y = (q, v)``, ``ẏ = (qdot(q, v), v̇(t, q, v))``, and saves
at the sample times of the measurement (``diffrax.SaveAt(ts=...)``). A model whose force
elements keep internal states (:attr:`~diffmbs.system.MechanicalSystem.n_internal`, a friction
bristle say) adds them: ``y = (q, v, z)``, ``ż = internal_rate(t, q, v)``, through the same
solvers, adjoints, batches and error control (the projection leaves ``z`` alone). At the
saved states it evaluates, from the equations of motion (never by finite differences), the
accelerations, the multipliers and the system's sensors.

Solvers and adjoints are ``diffrax`` objects, swappable:

* default ``diffrax.Tsit5()`` (explicit, adaptive, 5th order) with a PID step-size controller;
* stiff models (stiff contact, bushings): ``solver=diffrax.Kvaerno5()`` (implicit, L-stable,
  same controller, Newton-chord iterations on the autodiff Jacobian);
* fixed steps: ``stepsize_controller=diffrax.ConstantStepSize(), dt0=...``;
* adjoint (reverse mode, ``jax.grad``): by default :class:`~diffmbs.adjoint.DiscreteAdjoint`
  for explicit Runge–Kutta solvers — the exact adjoint of the accepted steps, about 3–5× a
  forward solve, memory ``max_steps × n_state`` floats (``n_stages + 2`` times that when it
  keeps the stages, see :class:`~diffmbs.adjoint.DiscreteAdjoint`) — and diffrax's
  ``RecursiveCheckpointAdjoint()`` (binomial checkpointing, memory ``O(√max_steps)``, slower)
  for implicit solvers or when that store would exceed :data:`DISCRETE_ADJOINT_MAX_FLOATS`.
  The code here has no ``while_loop`` in a differentiated path: fixed-count loops are Python
  loops. Forward mode (``jax.jvp``/``jax.jacfwd``, efficient for a handful of parameters) needs
  ``adjoint=ForwardSensitivity()`` (the tangents under the controller's error control with
  the state: right where the steps resolve the motion but not its sensitivity, a journal
  riding its bore, stuck friction) or ``diffrax.ForwardMode()`` (tangents carried along the
  state's steps: cheaper, exact for the steps taken, wrong by orders of magnitude there);
  both reverse-mode adjoints are ``custom_vjp`` functions.

Failures. The solve runs with ``throw=False``; afterwards the result is classified
(:data:`FAILURES`: maximum number of steps, step-size collapse below ``dtmin``, other solver
failure, non-finite values in the saved output) and the last accepted state is examined
(:data:`DIAGNOSES`: non-finite state, mass matrix, forces, constraints, singular mass matrix,
accelerations, sensors). With ``throw=True`` (default):

* when the values are concrete (``simulate`` called outside ``jit``/``grad``/``vmap``), a
  :class:`SimulationError` (a ``RuntimeError``) is raised that names the time reached, the
  reason, the diagnosis, the offending coordinates and the state magnitudes;
* under a transformation, ``equinox.branched_error_if`` raises at run time with one message per
  (reason, diagnosis) pair; a traced time cannot go into the message, so use ``throw=False``
  and read :attr:`Solution.t_reached`, :attr:`Solution.status` and :attr:`Solution.diagnosis`,
  or call :meth:`Solution.message` on concrete values.

Batches: :func:`simulate_batch` integrates many variants (parameters, initial states) as one
system in lockstep, an alternative to ``jax.vmap(simulate)`` (see its docstring).

NaN never comes back silently with ``throw=True``: a NaN force makes every step crossing it
rejected, the step size collapses below ``dtmin`` (default ``1e-14 · (t1 − t0)``) and the solve
stops there with an error; with fixed steps the NaN reaches the saved output and is reported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs._forward_sensitivity import ForwardSensitivity, solve_with_forward_sensitivity
from diffmbs._options import DEFAULT_MAX_STEPS, SimulationOptions
from diffmbs._phases import SolverPhases, integrate_phases
from diffmbs._projection import ProjectedSolver
from diffmbs._rosenbrock import RosenbrockW
from diffmbs._settings import require_float64
from diffmbs.adjoint import (
    DiscreteAdjoint,
    check_supported,
    forward_solve,
    solve_with_discrete_adjoint,
)
from diffmbs.derivatives import check_derivatives as run_derivative_check
from diffmbs.system import (
    DEFAULT_BAUMGARTE,
    AbstractKKTSolver,
    LeastSquaresKKT,
    MechanicalSystem,
    accelerations,
    constraint_terms,
    kkt_residuals,
    mass_is_definite,
    n_constraints,
    project_state,
    solve_motion,
)

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DIAGNOSES",
    "DISCRETE_ADJOINT_MAX_FLOATS",
    "DTMIN_FRACTION",
    "FAILURES",
    "ForwardSensitivity",
    "RosenbrockW",
    "SimulationError",
    "SimulationOptions",
    "Solution",
    "SolverPhases",
    "simulate",
    "simulate_batch",
]

DISCRETE_ADJOINT_MAX_FLOATS = 2**25
"""Largest step store (``max_steps × n_state`` floats, 256 MiB in float64) for which
:func:`simulate` picks :class:`~diffmbs.adjoint.DiscreteAdjoint` by default."""

DTMIN_FRACTION = 1e-14
"""The default controller's minimum step, as a fraction of the integration span: below it the
step size has collapsed and the solve stops (``diffrax.RESULTS.dt_min_reached``)."""

FAILURES: tuple[str, ...] = (
    "successful",
    "the maximum number of steps was reached",
    "the step size collapsed (below dtmin: the solver rejected every step it tried)",
    "the differential equation solver failed",
    "non-finite values appeared in the saved output",
)
"""``Solution.status`` indexes this tuple: why the simulation stopped or failed."""

DIAGNOSES: tuple[str, ...] = (
    "no non-finite value or singular mass matrix at the last accepted state; the failure is in "
    "the step after it (a force or constraint that blows up or becomes non-finite just after "
    "that time, or a model too stiff for the solver: try solver=diffrax.Kvaerno5(), looser "
    "tolerances or more max_steps)",
    "the state (q, v) is non-finite",
    "system.mass(q) is non-finite",
    "system.forces(t, q, v) is non-finite",
    "system.constraints(t, q) or its derivatives are non-finite",
    "the mass matrix is singular or not positive definite on the motions the constraints allow",
    "the KKT solve did not converge, or the constraints contradict each other (their "
    "accelerations cannot all hold)",
    "the accelerations from the KKT solve are non-finite",
    "a sensor is non-finite",
)
"""``Solution.diagnosis`` indexes this tuple: what was found wrong at the last accepted state."""


class SimulationError(RuntimeError):
    """A simulation failed; ``t_reached`` (s), ``status``, ``diagnosis`` and the partial
    ``solution`` are attributes."""

    def __init__(self, message: str, solution: Solution):
        super().__init__(message)
        self.solution = solution
        self.t_reached = float(solution.t_reached)
        self.status = int(solution.status)
        self.diagnosis = int(solution.diagnosis)


class Solution(eqx.Module):
    """The output of :func:`simulate`; ``n_t`` saved times.

    - ``ts`` ``(n_t,)`` s: the saved times;
    - ``q`` ``(n_t, n_q)``, ``v`` ``(n_t, n_v)``: the state at ``ts`` (projected onto the
      constraints if ``project=True``); samples after a failure are ``inf``;
    - ``internal`` ``(n_t, n_internal)``: the force elements' internal states at ``ts``
      (``(n_t, 0)`` for a model without; resume a run from ``system.with_internal_state(
      internal[-1])``);
    - ``vdot`` ``(n_t, n_v)``: accelerations from the equations of motion at the saved states;
    - ``multipliers`` ``(n_t, n_c)``: the KKT multipliers λ (constraint force ``−Φ_vᵀ λ``);
    - ``sensors``: ``system.sensors`` at the saved states, each of shape ``(n_t, ...)``;
    - ``constraint_drift`` ``()``: ``max |Φ|`` over the saved states as integrated, before any
      projection (units of Φ; 0 without constraints); ``velocity_drift`` ``()``: ``max |Φ̇|``;
    - ``stats``: diffrax's step counts (``num_steps``, ``num_accepted_steps``,
      ``num_rejected_steps``, ``max_steps``);
    - ``result``: diffrax's ``RESULTS``; ``status`` ``()``: index into :data:`FAILURES`
      (0 = success); ``diagnosis`` ``()``: index into :data:`DIAGNOSES`, meaningful when
      ``status != 0``; ``t_reached`` ``()`` s: the last accepted time (``ts[-1]`` on success; on
      non-finite output, the first saved time with a non-finite value).
    """

    ts: Array
    q: Array
    v: Array
    internal: Array
    vdot: Array
    multipliers: Array
    sensors: dict[str, Array]
    constraint_drift: Array
    velocity_drift: Array
    stats: dict[str, Any]
    result: diffrax.RESULTS
    status: Array
    diagnosis: Array
    t_reached: Array
    q_reached: Array
    v_reached: Array

    @property
    def successful(self) -> Array:
        """Whether the simulation reached the last time with finite output."""
        return self.status == 0

    def message(self) -> str:
        """A human-readable account of the outcome (needs concrete values)."""
        status, diag = int(self.status), int(self.diagnosis)
        if status == 0:
            return f"simulation successful to t = {float(self.t_reached):.9g} s"
        where = "first non-finite output at" if status == 4 else "last accepted time"
        t_end = float(self.ts[-1])
        steps, budget = int(self.stats["num_steps"]), int(self.stats["max_steps"])
        return (
            f"diffmbs.simulate failed: {FAILURES[status]} ({where} t = "
            f"{float(self.t_reached):.9g} s, end time {t_end:.9g} s; {steps} steps of "
            f"max_steps = {budget}). Diagnosis: {DIAGNOSES[diag]}."
        )


# --------------------------------------------------------------------------- internals


# The solver calls the vector field some twenty times while tracing one simulation (the first
# step's size, each Runge–Kutta stage, the adjoint's passes) and each call would trace the
# model again; jitted, it is traced once per input structure and every call reuses the jaxpr
# (XLA inlines the calls: the compiled program is the same). Likewise the step projection.
@eqx.filter_jit
def _vector_field(t, y, args):
    system, baumgarte, kkt_solver = args
    q, v, *internal = y  # (q, v) or (q, v, z)
    if internal:
        system = system.with_internal_state(internal[0])
    vdot, _ = accelerations(system, t, q, v, baumgarte, kkt_solver=kkt_solver, check=False)
    rates = (system.qdot(q, v), vdot)
    return rates + ((system.internal_rate(t, q, v),) if internal else ())


def _batch_vector_field(t, y, args):
    """:func:`_vector_field` of every variant of a batch: ``y`` leaves ``(batch, ...)``; the
    system's leaves are batched along ``system_axes`` (a ``vmap`` ``in_axes`` prefix)."""
    system, baumgarte, kkt_solver, system_axes = args
    one = lambda system_, y_: _vector_field(t, y_, (system_, baumgarte, kkt_solver))  # noqa: E731
    return eqx.filter_vmap(one, in_axes=(system_axes, 0))(system, y)


@eqx.filter_jit
def _project_step(t, y, args):
    system, _, kkt_solver = args
    q, v, *internal = y
    return (*project_state(system, t, q, v, iterations=2, kkt_solver=kkt_solver), *internal)


def _batch_project_step(t, y, args):
    """:func:`_project_step` of every variant of a batch (as :func:`_batch_vector_field`)."""
    system, baumgarte, kkt_solver, system_axes = args
    one = lambda system_, y_: _project_step(t, y_, (system_, baumgarte, kkt_solver))  # noqa: E731
    return eqx.filter_vmap(one, in_axes=(system_axes, 0))(system, y)


def _batch_rms_norm(error: Any) -> Array:
    """The largest of the variants' RMS norms (leaves ``(batch, ...)``): a lockstep step is
    accepted only when every variant's error is within its tolerance."""
    leaves = jax.tree.leaves(error)
    squares = sum(jnp.sum(x.reshape(x.shape[0], -1) ** 2, axis=1) for x in leaves)
    size = sum(x[0].size for x in leaves)
    return jnp.sqrt(jnp.max(squares) / max(size, 1))


def _all_finite(tree: Any) -> Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.asarray(True)


def _in_chunks(fn: Callable, size: int) -> Callable:
    """``jax.vmap(fn)`` semantics, evaluated ``size`` samples at a time (a ``lax.map`` over
    chunks, each chunk vectorised; ``size = 1``: one unbatched call per sample).

    Why: vectorising a model's equations over every saved sample at once multiplies its
    working memory by the number of samples (and by the batch under an outer ``vmap``); at a
    few hundred thousand evaluations it no longer fits in cache and runs ~3× slower per
    evaluation, and a long record would not fit in memory at all."""
    if size == 1:
        return lambda *xs: jax.lax.map(lambda args: fn(*args), xs)

    def mapped(*xs):
        n = jax.tree.leaves(xs)[0].shape[0]
        chunk = min(size, n)
        pad = -n % chunk

        def split(x):
            x = jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)])
            return x.reshape(x.shape[0] // chunk, chunk, *x.shape[1:])  # a leaf may be empty

        ys = jax.lax.map(lambda args: jax.vmap(fn)(*args), jax.tree.map(split, xs))
        # explicit sizes: a leaf may be empty (no multipliers), where -1 is ambiguous
        return jax.tree.map(lambda y: y.reshape(y.shape[0] * chunk, *y.shape[2:])[:n], ys)

    return mapped


class _OutputOptions(eqx.Module):
    """How :func:`_finish` evaluates the saved samples (see :func:`simulate`)."""

    baumgarte: tuple[ArrayLike, ArrayLike]
    kkt_solver: AbstractKKTSolver | None
    project: bool = eqx.field(static=True)
    projection_iterations: int = eqx.field(static=True)
    output_chunk: int = eqx.field(static=True)


def _integrate(vector_field, args, y0, ts, t0, solver, adjoint, controller, dt0, max_steps):
    """``(ys, t_end, y_end, result, stats)``: the state at ``ts`` (leaves ``(n_t, ...)``), the
    last accepted time and state, diffrax's ``RESULTS`` and step statistics. With
    :class:`SolverPhases`, ``adjoint`` is a tuple, one per phase."""
    params, static = eqx.partition(args, eqx.is_inexact_array)

    def one(y0_, ts_, t0_, solver_, adjoint_):
        if isinstance(adjoint_, DiscreteAdjoint):
            ys, end = solve_with_discrete_adjoint(
                (params, y0_), static, vector_field, solver_, controller, ts_, t0_, dt0,
                max_steps, adjoint_,
            )
        elif isinstance(adjoint_, ForwardSensitivity):
            ys, end = solve_with_forward_sensitivity(
                (params, y0_), static=static, vector_field=vector_field, solver=solver_,
                controller=controller, ts=ts_, t0=t0_, dt0=dt0, max_steps=max_steps,
            )
        else:
            (ys, end), _ = forward_solve(
                (params, y0_), static, vector_field, solver_, controller, ts_, t0_, dt0,
                max_steps, store=None, adjoint=adjoint_,
            )
        return ys, *end

    if isinstance(solver, SolverPhases):
        return integrate_phases(one, solver, adjoint, y0, ts, t0)
    return one(y0, ts, t0, solver, adjoint)


@contextlib.contextmanager
def _forward_mode_hint():
    """Turn JAX's "can't apply forward-mode autodiff (jvp) to a custom_vjp function" into the
    fix: the default adjoint is reverse mode only."""
    try:
        yield
    except TypeError as err:
        if "forward-mode autodiff" not in str(err):
            raise
        raise TypeError(
            "simulate: forward-mode differentiation (jax.jvp, jax.jacfwd) needs "
            "adjoint=diffrax.ForwardMode(); the default DiscreteAdjoint is reverse mode "
            "(jax.grad, jax.vjp) only"
        ) from None


@eqx.filter_jit
def _simulate(
    system: MechanicalSystem,
    y0: tuple[Array, ...],
    ts: Array,
    t0: Array,
    solver: diffrax.AbstractSolver | SolverPhases,
    adjoint: diffrax.AbstractAdjoint | tuple[diffrax.AbstractAdjoint, ...],
    stepsize_controller: diffrax.AbstractStepSizeController,
    dt0: Array | None,
    max_steps: int,
    options: _OutputOptions,
) -> Solution:
    ys, t_end, y_end, result, stats = _integrate(
        _vector_field, (system, options.baumgarte, options.kkt_solver), y0, ts, t0,
        solver, adjoint, stepsize_controller, dt0, max_steps,
    )
    return _finish(system, ts, ys, t_end, y_end, result, stats, options)


@eqx.filter_jit
def _simulate_batch(
    system: MechanicalSystem,
    system_axes: Any,
    y0: tuple[Array, ...],
    ts: Array,
    t0: Array,
    solver: diffrax.AbstractSolver | SolverPhases,
    adjoint: diffrax.AbstractAdjoint | tuple[diffrax.AbstractAdjoint, ...],
    stepsize_controller: diffrax.AbstractStepSizeController,
    dt0: Array | None,
    max_steps: int,
    options: _OutputOptions,
) -> Solution:
    args = (system, options.baumgarte, options.kkt_solver, system_axes)
    ys, t_end, y_end, result, stats = _integrate(
        _batch_vector_field, args, y0, ts, t0, solver, adjoint, stepsize_controller, dt0,
        max_steps,
    )

    def finish(system_, ys_, y_end_):
        return _finish(system_, ts, ys_, t_end, y_end_, result, stats, options)

    return eqx.filter_vmap(finish, in_axes=(system_axes, 1, 0))(system, ys, y_end)


def _initial_state(system: MechanicalSystem, q0: Array, v0: Array) -> tuple[Array, ...]:
    """The integrated state at the start: ``(q0, v0)``, and the model's internal states when
    it has any (:meth:`~diffmbs.system.MechanicalSystem.initial_internal_state`)."""
    if not system.n_internal:
        return q0, v0
    return q0, v0, jnp.asarray(system.initial_internal_state(), dtype=q0.dtype)


def _finish(system, ts, ys, t_end, y_end, result, stats, options) -> Solution:
    """The :class:`Solution` of one run from its integrated samples ``ys`` (``(q, v)`` or
    ``(q, v, z)``, leaves ``(n_t, ...)``) and last accepted state ``y_end``: projection,
    accelerations, multipliers, sensors, drift and the classification of the outcome."""
    (q, v, *internal), (q_end, v_end, *internal_end) = ys, y_end
    z = internal[0] if internal else jnp.zeros(q.shape[:1] + (0,), q.dtype)
    z_end = internal_end[0] if internal else z[-1]
    baumgarte, kkt_solver = options.baumgarte, options.kkt_solver
    project, output_chunk = options.project, options.output_chunk
    projection_iterations = options.projection_iterations
    constrained = n_constraints(system, ts[0], q[0]) > 0
    if project and constrained:
        # drift of the integration itself, before the projection of the outputs
        phi, phidot, _ = jax.vmap(lambda t_, q_, v_: constraint_terms(system, t_, q_, v_))(
            ts, q, v
        )
        drift = jnp.max(jnp.abs(phi), initial=0.0)
        vdrift = jnp.max(jnp.abs(phidot), initial=0.0)

    # A batched lineax SVD (LeastSquaresKKT) can deadlock jaxlib 0.10's CPU thread pool (see
    # diffmbs._linalg); that solver's samples are evaluated one at a time.
    uses_svd = constrained and isinstance(kkt_solver, LeastSquaresKKT)
    per_sample = functools.partial(_in_chunks, size=1 if uses_svd else output_chunk)

    if project and constrained:
        q, v = per_sample(
            lambda t_, q_, v_: project_state(
                system, t_, q_, v_, iterations=projection_iterations, kkt_solver=kkt_solver
            )
        )(ts, q, v)

    def outputs(t_, q_, v_, z_):
        system_ = system.with_internal_state(z_) if internal else system
        vdot, lam, ok, terms = solve_motion(system_, t_, q_, v_, baumgarte, kkt_solver=kkt_solver)
        definite = mass_is_definite(terms.mass, terms.jac) if constrained else ok
        vdot = jnp.where(ok, vdot, jnp.nan)
        sensors = system_.sensors(t_, q_, v_, vdot)
        healthy = jnp.stack(  # one flag per entry of DIAGNOSES[1:], in that order
            [
                _all_finite((q_, v_, z_)),
                _all_finite(terms.mass),
                _all_finite(terms.force),
                _all_finite((terms.phi, terms.phidot, terms.gamma, terms.jac)),
                definite,
                ok,
                _all_finite((vdot, lam)),
                _all_finite(sensors),
            ]
        )
        drifts = jnp.stack(
            [jnp.max(jnp.abs(x), initial=0.0) for x in (terms.phi, terms.phidot)]
        )
        return vdot, lam, sensors, healthy, drifts

    # The samples and, as one more row, the last accepted state: its flags diagnose a solver
    # failure, so the model's equations are traced (and compiled) once, not twice.
    end = jax.lax.stop_gradient((t_end, q_end, v_end, z_end))
    rows = jax.tree.map(lambda x, e: jnp.concatenate([x, e[None]]), (ts, q, v, z), end)
    vdot, lam, sensors, healthy, drifts = per_sample(outputs)(*rows)
    healthy_end = healthy[-1]
    vdot, lam, sensors, healthy, drifts = jax.tree.map(
        lambda x: x[:-1], (vdot, lam, sensors, healthy, drifts)
    )
    if not (project and constrained):
        drift, vdrift = jnp.max(drifts, axis=0, initial=0.0)

    # Classify the outcome.
    row_ok = jnp.all(healthy, axis=1)
    first_bad = jnp.argmin(row_ok)
    solver_ok = result == diffrax.RESULTS.successful
    status = jnp.where(
        solver_ok,
        jnp.where(jnp.all(row_ok), 0, 4),
        jnp.where(
            result == diffrax.RESULTS.max_steps_reached,
            1,
            jnp.where(result == diffrax.RESULTS.dt_min_reached, 2, 3),
        ),
    )
    nonfinite_out = status == 4
    t_reached = jnp.where(nonfinite_out, ts[first_bad], t_end)
    q_reached = jnp.where(nonfinite_out, q[first_bad], q_end)
    v_reached = jnp.where(nonfinite_out, v[first_bad], v_end)
    flags = jnp.where(nonfinite_out, healthy[first_bad], healthy_end)
    diagnosis = jnp.where(jnp.all(flags), 0, jnp.argmin(flags) + 1)

    stats = {
        k: jnp.asarray(stats[k])
        for k in ("num_steps", "num_accepted_steps", "num_rejected_steps", "max_steps")
        if k in stats
    }
    return Solution(
        ts=ts,
        q=q,
        v=v,
        internal=z,
        vdot=vdot,
        multipliers=lam,
        sensors=sensors,
        constraint_drift=drift,
        velocity_drift=vdrift,
        stats=stats,
        result=result,
        status=status,
        diagnosis=diagnosis,
        t_reached=t_reached,
        q_reached=q_reached,
        v_reached=v_reached,
    )


_JIT_MESSAGES = [
    f"diffmbs.simulate failed: {reason}. Diagnosis at the last accepted state: {diag}. "
    "(The time reached cannot be shown under jit/grad/vmap: run with throw=False and read "
    "Solution.t_reached, or call simulate outside the transformation.)"
    for reason in FAILURES
    for diag in DIAGNOSES
]


def _is_traced(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


def _concrete_details(system: MechanicalSystem, sol: Solution, options: _OutputOptions) -> str:
    """Offending coordinates and magnitudes at the state reached (concrete values only)."""
    t = float(sol.t_reached)
    q, v = np.asarray(sol.q_reached), np.asarray(sol.v_reached)
    parts = [f"max|q| = {np.max(np.abs(q), initial=0):.3g}, max|v| = {np.max(np.abs(v)):.3g}"]
    try:
        force = np.asarray(system.forces(jnp.asarray(t), jnp.asarray(q), jnp.asarray(v)))
        parts.append(f"max|forces| = {np.max(np.abs(force), initial=0):.3g}")
        bad = np.flatnonzero(~np.isfinite(force))
        if bad.size:
            parts.append(f"non-finite forces at velocity coordinates {bad.tolist()}")
    except Exception as err:  # the forces themselves may raise; report, do not mask
        parts.append(f"system.forces raised {type(err).__name__}: {err}")
    for name, values in sol.sensors.items():
        if not np.all(np.isfinite(np.asarray(values))):
            parts.append(f"sensor {name!r} is non-finite")
    kkt_failed = DIAGNOSES[int(sol.diagnosis)].startswith("the KKT solve")
    if kkt_failed or (int(sol.diagnosis) == 0 and np.asarray(sol.multipliers).shape[-1] > 0):
        parts.append(_kkt_culprits(system, t, q, v, options.baumgarte, options.kkt_solver))
    return "; ".join(parts)


def _kkt_culprits(system, t, q, v, baumgarte, kkt_solver) -> str:
    """The constraints with the largest KKT residuals at a state, named by the system's
    :meth:`~diffmbs.system.MechanicalSystem.constraint_labels`."""
    q, v = jnp.asarray(q), jnp.asarray(v)
    vdot, lam, _, terms = solve_motion(system, t, q, v, baumgarte, kkt_solver=kkt_solver)
    rhs = terms.gamma - 2 * baumgarte[0] * terms.phidot - baumgarte[1] ** 2 * terms.phi
    _, r_con = kkt_residuals(terms.mass, terms.jac, terms.force, rhs, vdot, lam)
    r_con = np.abs(np.asarray(r_con))
    labels = system.constraint_labels() or tuple(f"constraint row {i}" for i in range(r_con.size))
    worst = dict.fromkeys(labels[i] for i in np.argsort(-r_con)[:4] if r_con[i] > 0)
    solver = type(kkt_solver).__name__ if kkt_solver is not None else "NullSpaceKKT"
    return (
        f"KKT solver {solver}: largest constraint residuals at {', '.join(worst)} "
        f"(relative {r_con.max(initial=0.0):.2g}); with AugmentedLagrangianKKT raise its "
        "iterations or penalty, or use the default NullSpaceKKT; otherwise check that these "
        "joints do not prescribe conflicting motions"
    )


def _as_float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def _validate(system, q0, v0, ts, t0) -> None:
    if ts.ndim != 1 or ts.shape[0] < 1:
        raise ValueError(f"simulate: ts must be a non-empty 1-D array of times, got {ts.shape}")
    if q0.ndim != 1 or v0.ndim != 1:
        raise ValueError(f"simulate: q0 and v0 must be 1-D, got {q0.shape} and {v0.shape}")
    _check_equation_shapes(system, q0, v0, t0)
    if not any(_is_traced(x) for x in (ts, t0)):
        t_np = np.asarray(ts)
        if not np.all(np.isfinite(t_np)) or np.any(np.diff(t_np) < 0):
            raise ValueError("simulate: ts must be finite and non-decreasing")
        if float(t0) > t_np[0]:
            raise ValueError(f"simulate: t0 = {float(t0)} is after the first saved time {t_np[0]}")
    for name, x in (("q0", q0), ("v0", v0)):
        if not _is_traced(x) and not np.all(np.isfinite(np.asarray(x))):
            raise ValueError(f"simulate: the initial state {name} is not finite: {np.asarray(x)}")
    _check_initial_constraints(system, q0, t0)


_SHAPES_CHECKED: dict = {}  # structure key -> True; see _check_equation_shapes
_SHAPES_CHECKED_MAX = 256


def _check_equation_shapes(system, q0, v0, t0) -> None:
    """Refuse a system whose ``qdot``, ``mass`` or ``forces`` have the wrong shapes for
    ``(q0, v0)``. Tracing the equations costs as much as a short run on a large model (0.6 s
    on the 3-D shock machine), so a structure that passed — its tree, its leaves' shapes and
    dtypes, the state's — is not traced again."""
    leaves, treedef = jax.tree.flatten(system)
    try:
        key = (treedef, tuple((np.shape(x), jnp.result_type(x)) for x in leaves),
               q0.shape, v0.shape, q0.dtype, v0.dtype)  # fmt: skip
        if key in _SHAPES_CHECKED:
            return
    except TypeError:  # an unhashable static field: check every time
        key = None
    shapes = {
        "qdot(q, v)": (jax.eval_shape(system.qdot, q0, v0).shape, q0.shape),
        "mass(q)": (jax.eval_shape(system.mass, q0).shape, (v0.shape[0], v0.shape[0])),
        "forces(t, q, v)": (jax.eval_shape(system.forces, t0, q0, v0).shape, v0.shape),
        "internal_rate(t, q, v)": (
            jax.eval_shape(system.internal_rate, t0, q0, v0).shape, (system.n_internal,)
        ),
    }
    for name, (got, want) in shapes.items():
        if got != want:
            raise ValueError(
                f"simulate: {type(system).__name__}.{name} has shape {got}, expected {want} "
                f"(n_q = {q0.shape[0]}, n_v = {v0.shape[0]})"
            )
    if key is not None:
        if len(_SHAPES_CHECKED) >= _SHAPES_CHECKED_MAX:
            _SHAPES_CHECKED.clear()
        _SHAPES_CHECKED[key] = True


INITIAL_CONSTRAINT_TOLERANCE = 1e-5
"""Largest ``|Φ(t0, q0)|`` (m or rad) :func:`simulate` accepts from a concrete initial state."""


def _check_initial_constraints(system, q0, t0) -> None:
    """Refuse an initial state off its constraints (a body 0.4 m from its hinge would otherwise
    simulate after a silent jump), naming the joint of the worst row."""
    if _is_traced(q0) or _is_traced(t0) or n_constraints(system, t0, q0) == 0:
        return
    phi = system.constraints(t0, q0)
    if _is_traced(phi):
        return
    phi = np.abs(np.asarray(phi))
    worst = int(np.argmax(phi))
    if phi[worst] <= INITIAL_CONSTRAINT_TOLERANCE:
        return
    labels = getattr(system, "constraint_labels", None)
    label = labels()[worst] if labels is not None else f"constraint row {worst}"
    raise ValueError(
        f"simulate: the initial state violates the constraints by {phi[worst]:.3g} at {label} "
        f"(tolerance {INITIAL_CONSTRAINT_TOLERANCE:g}); assemble it first "
        "(diffmbs.multibody.assemble) or project it (diffmbs.system.project_state)"
    )


def _default_adjoint(solver, max_steps: int, n_state: int) -> diffrax.AbstractAdjoint:
    """:class:`DiscreteAdjoint` for explicit Runge–Kutta solvers while its step store fits in
    :data:`DISCRETE_ADJOINT_MAX_FLOATS`; diffrax's checkpointed adjoint otherwise."""
    if isinstance(solver, diffrax.AbstractERK) and max_steps * n_state <= (
        DISCRETE_ADJOINT_MAX_FLOATS
    ):
        return DiscreteAdjoint()
    return diffrax.RecursiveCheckpointAdjoint()


# --------------------------------------------------------------------------- public entry point


def simulate(
    system: MechanicalSystem,
    q0: ArrayLike,
    v0: ArrayLike,
    ts: ArrayLike,
    options: SimulationOptions | None = None,
    **overrides: Any,
) -> Solution:
    """Integrate ``system`` from ``(q0, v0)`` at ``t0`` and save at the times ``ts``.

    **Arguments** (SI units):

    - ``system``: the model; its float array leaves may be traced (``grad``, ``vmap``).
    - ``q0`` ``(n_q,)``, ``v0`` ``(n_v,)``: initial coordinates and velocities, ideally
      consistent with the constraints (see :func:`diffmbs.system.project_state`).
    - ``ts`` ``(n_t,)`` s: non-decreasing save times; the solve ends at ``ts[-1]``.
    - ``options``: a :class:`SimulationOptions` (solver, adjoint, tolerances, projection,
      outputs, failure handling), and/or its fields as keyword arguments (``rtol=1e-10``),
      which replace those of ``options``.

    **Returns** a :class:`Solution`.
    """
    settings = SimulationOptions.of(options, overrides, "simulate")
    require_float64("simulate")
    q0, v0, ts = (_as_float(x) for x in (q0, v0, ts))
    t0 = ts[0] if settings.t0 is None else jnp.asarray(settings.t0, dtype=ts.dtype)
    _validate(system, q0, v0, ts, t0)
    if settings.check_derivatives and not any(
        _is_traced(x) for x in (q0, v0, t0, *jax.tree_util.tree_leaves(system))
    ):
        run_derivative_check(system, q0, v0, t0)
    projected = settings.step_projection and n_constraints(system, t0, q0) > 0
    y0 = _initial_state(system, q0, v0)
    solver, adjoint, stepsize_controller, options = _strategies(
        settings, ts, t0, sum(x.shape[0] for x in y0),
        step_projection=_project_step if projected else None,
        default_solver=system.default_solver(),
        default_kkt_solver=system.default_kkt_solver(),
    )
    with _forward_mode_hint():
        sol = _simulate(
            system, y0, ts, t0, solver, adjoint, stepsize_controller, settings.dt0,
            settings.max_steps, options,
        )
    if not settings.throw:
        return sol
    # Under grad outside jit the status is concrete but the time reached is not.
    if _is_traced(sol.status) or _is_traced(sol.t_reached):
        index = sol.status * len(DIAGNOSES) + sol.diagnosis
        return eqx.branched_error_if(sol, sol.status != 0, index, _JIT_MESSAGES)
    if int(sol.status) != 0:
        raise SimulationError(f"{sol.message()} {_concrete_details(system, sol, options)}.", sol)
    return sol


def _strategies(settings: SimulationOptions, ts, t0, n_state, norm=None, step_projection=None,
                default_solver=None, default_kkt_solver=None):
    """The solver, adjoint, controller and output options of a run: ``settings`` with their
    defaults filled in, checked; ``norm`` (the error norm of the default controller) is
    diffrax's RMS norm unless given; ``step_projection``: the projection after every step
    (:func:`_project_step` or its batch form), or ``None``; ``default_solver``: the model's
    (:meth:`~diffmbs.system.MechanicalSystem.default_solver`), used when none is given, and
    likewise ``default_kkt_solver``. With :class:`SolverPhases` the adjoint is a tuple, one per
    phase still within the run."""
    solver, adjoint, controller = settings.solver, settings.adjoint, settings.stepsize_controller
    baumgarte, output_chunk = settings.baumgarte, settings.output_chunk
    if not isinstance(output_chunk, int) or output_chunk < 1:
        raise ValueError(f"simulate: output_chunk must be a positive integer, got {output_chunk!r}")
    if solver is None:
        solver = default_solver if default_solver is not None else diffrax.Tsit5()
    if isinstance(solver, SolverPhases) and not _is_traced(solver.switch_times) and not (
        _is_traced(ts)
    ):
        used = 1 + int(np.sum(np.asarray(solver.switch_times) < float(ts[-1])))
        if used == 1:
            solver = solver.solvers[0]
        elif used < len(solver.solvers):
            solver = SolverPhases(solver.solvers[:used], solver.switch_times[: used - 1])
    phases = solver.solvers if isinstance(solver, SolverPhases) else (solver,)
    if step_projection is not None:
        phases = tuple(ProjectedSolver(s, step_projection) for s in phases)
    if baumgarte is None:
        baumgarte = (0.0, 0.0) if step_projection is not None else DEFAULT_BAUMGARTE
    if adjoint is None:
        adjoints = tuple(_default_adjoint(s, settings.max_steps, n_state) for s in phases)
    else:
        adjoints = (adjoint,) * len(phases)
        if isinstance(adjoint, DiscreteAdjoint):
            for s in phases:
                check_supported(s)
    if isinstance(solver, SolverPhases):
        solver, adjoint = SolverPhases(phases, solver.switch_times), adjoints
    else:
        (solver,), (adjoint,) = phases, adjoints
    if any(isinstance(a, diffrax.RecursiveCheckpointAdjoint) for a in adjoints) and isinstance(
        controller, diffrax.ConstantStepSize
    ):
        warnings.warn(
            "simulate: diffrax's RecursiveCheckpointAdjoint with ConstantStepSize gives wrong "
            "gradients (1-2 % seen) when sample times fall on step ends (diffrax 0.7.2; "
            "tests/test_gradient_crosschecks.py): for fixed steps use the default "
            "DiscreteAdjoint (explicit solvers) or diffrax.ForwardMode",
            stacklevel=3,
        )
    if controller is None:
        # Tolerances as arrays: changing them does not recompile.
        controller = diffrax.PIDController(
            rtol=jnp.asarray(settings.rtol, ts.dtype),
            atol=jnp.asarray(settings.atol, ts.dtype),
            dtmin=DTMIN_FRACTION * (ts[-1] - t0),
            dtmax=_largest_step(settings.dtmax, ts, t0),
            force_dtmin=False,
            **({} if norm is None else {"norm": norm}),
        )
    kkt_solver = settings.kkt_solver if settings.kkt_solver is not None else default_kkt_solver
    options = _OutputOptions(baumgarte, kkt_solver, settings.project,
                             settings.projection_iterations, output_chunk)  # fmt: skip
    return solver, adjoint, controller, options


def _largest_step(dtmax, ts, t0):
    """The default controller's ``dtmax`` (see :class:`SimulationOptions`): ``"samples"`` is
    the smallest positive spacing of ``ts`` (the span from ``t0`` for a single save time)."""
    if dtmax is None:
        return None
    if isinstance(dtmax, str):
        if dtmax != "samples":
            raise ValueError(f"simulate: dtmax must be a step in s, 'samples' or None, got "
                             f"{dtmax!r}")  # fmt: skip
        if ts.shape[0] < 2:
            return ts[-1] - t0
        # a step limit carries no derivative; stop_gradient also keeps min's tangent hazard out
        gaps = jax.lax.stop_gradient(jnp.diff(ts))
        return jnp.min(jnp.where(gaps > 0, gaps, jnp.inf))
    if not _is_traced(dtmax) and not float(dtmax) > 0:
        raise ValueError(f"simulate: dtmax must be positive, got {dtmax!r}")
    return jnp.asarray(dtmax, ts.dtype)


def simulate_batch(
    system: MechanicalSystem,
    q0: ArrayLike,
    v0: ArrayLike,
    ts: ArrayLike,
    options: SimulationOptions | None = None,
    *,
    system_axes: Any = None,
    **overrides: Any,
) -> Solution:
    """Simulate a batch of variants in lockstep: one integration of all of them together.

    The variants differ in their parameters, their initial state, or both:

    - ``system``: the model; ``system_axes`` says which of its leaves carry the batch, as
      ``jax.vmap``'s ``in_axes`` for it (a prefix of its pytree structure): ``None`` (default)
      shares one model, ``eqx.if_array(0)`` batches every array leaf along axis 0, e.g. a
      model made by ``eqx.filter_vmap(lambda k: model.with_parameter("spring.stiffness",
      k))(ks)``;
    - ``q0`` ``(batch, n_q)`` or ``(n_q,)`` (shared), ``v0`` ``(batch, n_v)`` or ``(n_v,)``.

    ``options`` and the keyword arguments are :func:`simulate`'s. The variants take the same
    steps: the error
    norm of the step-size controller is the largest of the variants' RMS norms, so each
    variant meets ``rtol``/``atol`` (a given ``diffrax.PIDController`` gets this norm; only it
    and ``diffrax.ConstantStepSize`` are accepted). The batch therefore takes the steps of
    its hardest variant at every moment; the others get smaller steps than they need (256
    variants of a 10-link chain: largest angle error 1.6e-4 rad against 6.9e-4 under
    ``vmap`` at the same tolerance).

    Against ``jax.vmap(simulate)``: under ``vmap`` the variants also advance together (the
    loop runs until the slowest is done), but each keeps its own step size, and its
    per-variant control flow costs a ``select`` over the whole state and the saved samples at
    every step and every saved sample. Here the saving is one unbatched write. For a
    256-variant 10-link chain on CPU this was 3–15 % faster; a batch of very different
    variants (one stiff, the others not) is better served by ``vmap``. Reverse mode works as
    for :func:`simulate`.

    **Returns** a :class:`Solution` whose every leaf has a leading batch axis, as
    ``jax.vmap(simulate)`` returns it; ``stats``, ``result`` and, on a solver failure,
    ``t_reached`` are the batch's, the same for every variant. With ``throw=True`` a failure
    raises :class:`SimulationError` for the first variant that failed, naming its index.
    """
    settings = SimulationOptions.of(options, overrides, "simulate_batch")
    require_float64("simulate_batch")
    if settings.check_derivatives:
        raise ValueError(
            "simulate_batch: check_derivatives is not supported; run diffmbs.check_derivatives "
            "on one variant"
        )
    q0, v0, ts = (_as_float(x) for x in (q0, v0, ts))
    t0 = ts[0] if settings.t0 is None else jnp.asarray(settings.t0, dtype=ts.dtype)
    size = _batch_size(system, system_axes, q0, v0)
    q0, v0 = (x if x.ndim == 2 else jnp.broadcast_to(x, (size,) + x.shape) for x in (q0, v0))
    for name, x in (("q0", q0), ("v0", v0)):
        bad = () if _is_traced(x) else np.flatnonzero(~np.isfinite(np.asarray(x)).all(axis=1))
        if len(bad):
            raise ValueError(f"simulate_batch: {name}[{bad[0]}] (variant {bad[0]}) is not finite")
    _validate(_variant(system, system_axes, 0), q0[0], v0[0], ts, t0)
    stepsize_controller = settings.stepsize_controller
    if isinstance(stepsize_controller, diffrax.PIDController):
        stepsize_controller = eqx.tree_at(lambda c: c.norm, stepsize_controller, _batch_rms_norm)
        settings = dataclasses.replace(settings, stepsize_controller=stepsize_controller)
    elif not (
        stepsize_controller is None
        or isinstance(stepsize_controller, diffrax.ConstantStepSize)
    ):
        raise ValueError(
            "simulate_batch: stepsize_controller must be a diffrax.PIDController (its error "
            "norm is replaced) or ConstantStepSize, got "
            f"{type(stepsize_controller).__name__}"
        )
    projected = settings.step_projection and n_constraints(
        _variant(system, system_axes, 0), t0, q0[0]
    ) > 0
    y0 = (q0, v0)
    if _variant(system, system_axes, 0).n_internal:
        z0 = eqx.filter_vmap(lambda s: _initial_state(s, q0[0], v0[0])[2],
                             in_axes=(system_axes,), axis_size=size)(system)  # fmt: skip
        y0 = (q0, v0, z0)
    solver, adjoint, stepsize_controller, options = _strategies(
        settings, ts, t0, sum(x[0].size for x in y0) * size,
        norm=_batch_rms_norm, step_projection=_batch_project_step if projected else None,
        default_solver=_variant(system, system_axes, 0).default_solver(),
        default_kkt_solver=_variant(system, system_axes, 0).default_kkt_solver(),
    )
    with _forward_mode_hint():
        sol = _simulate_batch(
            system, system_axes, y0, ts, t0, solver, adjoint, stepsize_controller,
            settings.dt0, settings.max_steps, options,
        )
    if not settings.throw:
        return sol
    failed = sol.status != 0
    # The variants step together, so a solver failure stops all of them; name the variant whose
    # own samples or last state show the fault, if one does.
    own = failed & ((sol.status == 4) | (sol.diagnosis != 0))
    first = jnp.where(jnp.any(own), jnp.argmax(own), jnp.argmax(failed))
    if _is_traced(sol.status):
        index = sol.status[first] * len(DIAGNOSES) + sol.diagnosis[first]
        return eqx.branched_error_if(sol, jnp.any(failed), index, _JIT_MESSAGES)
    if bool(jnp.any(failed)):
        k = int(first)
        one = jax.tree.map(lambda x: x[k], sol)
        details = _concrete_details(_variant(system, system_axes, k), one, options)
        who = (
            f"variant {k} of {size}"
            if bool(own[k])
            else f"the batch of {size} variants (they step together: one variant's failure "
            "stops all, and no variant's last state shows a fault; run them one by one with "
            f"simulate to find it; shown: variant {k})"
        )
        raise SimulationError(f"{who}: {one.message()} {details}.", one)
    return sol


def _batch_size(system: MechanicalSystem, system_axes: Any, q0: Array, v0: Array) -> int:
    """The number of variants, checked to agree between ``system``, ``q0`` and ``v0``."""
    sizes = {}
    for name, x in (("q0", q0), ("v0", v0)):
        if x.ndim not in (1, 2):
            raise ValueError(
                f"simulate_batch: {name} must be (batch, n) or (n,) (shared), got {x.shape}"
            )
        if x.ndim == 2:
            sizes[name] = x.shape[0]
    if system_axes is not None:
        try:
            shape = eqx.filter_eval_shape(  # a model may hold plain functions (a load's law)
                eqx.filter_vmap(lambda s: jnp.zeros(()), in_axes=(system_axes,)), system
            ).shape
        except ValueError as err:
            raise ValueError(f"simulate_batch: system_axes do not fit the system: {err}") from err
        sizes["system"] = shape[0]
    if not sizes:
        raise ValueError(
            "simulate_batch: nothing is batched: give q0/v0 a leading batch axis or "
            "system_axes (e.g. eqx.if_array(0))"
        )
    if len(set(sizes.values())) > 1:
        raise ValueError(f"simulate_batch: the batch sizes disagree: {sizes}")
    return next(iter(sizes.values()))


def _variant(system: MechanicalSystem, system_axes: Any, k: int) -> MechanicalSystem:
    """Variant ``k`` of a batched ``system`` (``system_axes`` as in :func:`simulate_batch`)."""
    if system_axes is None:
        return system
    stacked = eqx.filter_vmap(lambda s: s, in_axes=(system_axes,))(system)
    return jax.tree.map(lambda x: x[k] if eqx.is_array(x) else x, stacked)
