"""Initial states: position analysis, consistent velocities, static equilibrium, projection.

All corrections are made in the velocity coordinates: a body moves by ``dx = (Δr_G, Δθ̄)``
(world translation, body-frame rotation vector), ``p ← normalise(p ⊗ exp(Δθ̄))`` — so the
Jacobians are the velocity-level ``Φ_v`` and the quaternions stay unit.

* :func:`assemble` — Gauss–Newton on ``Φ(t, q) = 0`` from a rough guess (minimum-norm steps by
  SVD, so redundant constraints are fine), holding chosen joint coordinates and body poses, with
  a fixed iteration count (``lax.fori_loop``, no ``while_loop``). A residual that stays large
  raises :class:`AssemblyError` naming the joint (or held item) with the largest residual; a
  singular configuration raises :class:`SingularConfigurationError` (:func:`check_configuration`).
* :func:`consistent_velocities` — velocities satisfying ``Φ_v v = −Φ_t`` exactly and a chosen
  subset of given velocities (joint rates, body velocities) in the least-squares sense.
* :func:`static_equilibrium` — Newton (optimistix) on ``Q(t, q, 0) − Φ_vᵀ λ = 0``, ``Φ = 0`` in
  the unknowns ``(dx, λ)``, differentiable through the solution by the implicit function theorem
  (``optimistix.ImplicitAdjoint``; pseudo-inverse solves, so redundant constraints are fine).
* :func:`project` — :func:`diffmbs.system.project_state` followed by quaternion normalisation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx
from jaxtyping import Array, ArrayLike

from diffmbs.multibody._model import ModelError, MultibodyModel
from diffmbs.rotations import (
    quat_conjugate,
    quat_from_rotation_vector,
    quat_multiply,
    quat_normalize,
    quat_to_rotation_vector,
)
from diffmbs.system import constraint_jacobian, project_state, velocity_constraints

__all__ = [
    "AssemblyError",
    "SingularConfigurationError",
    "assemble",
    "check_configuration",
    "consistent_velocities",
    "project",
    "retract",
    "static_equilibrium",
]


class AssemblyError(ModelError):
    """Position analysis failed: the joints cannot all be closed (the message names the worst)."""


class SingularConfigurationError(ModelError):
    """The constraint Jacobian loses rank at this configuration (a bifurcation or dead point):
    the motion is not determined there."""


def retract(q: Array, dx: Array) -> Array:
    """Move every body by ``dx`` (6n,) = per body (Δr_G world, Δθ̄ body): ``q ⊕ dx`` (7n,)."""
    qb, d = q.reshape(-1, 7), dx.reshape(-1, 6)
    p = quat_normalize(quat_multiply(qb[:, 3:], quat_from_rotation_vector(d[:, 3:])))
    return jnp.concatenate([qb[:, :3] + d[:, :3], p], axis=1).reshape(-1)


def _wrap(angle: Array) -> Array:
    return jnp.arctan2(jnp.sin(angle), jnp.cos(angle))


class _PositionProblem(eqx.Module):
    """Residuals of position analysis: Φ, then held body poses, then held joint coordinates."""

    model: MultibodyModel
    t: Array
    q_ref: Array
    held_bodies: tuple[int, ...] = eqx.field(static=True)
    coordinate_joints: tuple[str, ...] = eqx.field(static=True)
    coordinate_targets: tuple[Array, ...]

    def residual(self, q: Array) -> Array:
        parts = [self.model.constraints(self.t, q)]
        qb, qr = q.reshape(-1, 7), self.q_ref.reshape(-1, 7)
        for i in self.held_bodies:
            turn = quat_multiply(quat_conjugate(qr[i, 3:]), qb[i, 3:])
            parts += [qb[i, :3] - qr[i, :3], quat_to_rotation_vector(turn)]
        for name, target in zip(self.coordinate_joints, self.coordinate_targets, strict=True):
            kinds = type(self.model.joint(name)).coordinate_kinds
            error = self.model.joint_coordinates(name, q) - target
            angles = np.array([k == "angle" for k in kinds])
            parts.append(jnp.where(angles, _wrap(error), error))
        return jnp.concatenate(parts)

    def labels(self) -> list[str]:
        """A name for each residual row, for error messages."""
        out = []
        for name, rows in self.model.joint_rows().items():
            out += [f"joint {name!r} ({type(self.model.joint(name)).__name__})"] * (
                rows.stop - rows.start
            )
        for i in self.held_bodies:
            out += [f"held pose of body {self.model.bodies.names[i]!r}"] * 6
        for name in self.coordinate_joints:
            count = len(type(self.model.joint(name)).coordinate_kinds)
            out += [f"held coordinate of joint {name!r}"] * count
        return out


@eqx.filter_jit
def _gauss_newton(problem: _PositionProblem, q: Array, iterations: int) -> Array:
    def step(_, q_):
        zero = jnp.zeros(6 * problem.model.n_bodies, dtype=q_.dtype)
        jac = jax.jacfwd(lambda dx: problem.residual(retract(q_, dx)))(zero)
        op = lx.MatrixLinearOperator(jac)
        dx = lx.linear_solve(op, problem.residual(q_), solver=lx.SVD(), throw=False).value
        return retract(q_, -dx)

    return jax.lax.fori_loop(0, iterations, step, q)


def assemble(
    model: MultibodyModel,
    q: ArrayLike | None = None,
    t: float = 0.0,
    *,
    joint_coordinates: Mapping[str, ArrayLike] | None = None,
    hold: Sequence[str] = (),
    iterations: int = 30,
    tolerance: float = 1e-9,
    check_singular: bool = True,
) -> Array:
    """Position analysis: ``q`` with ``Φ(t, q) = 0``, from the rough guess ``q``.

    Args:
        model: the model; ``q`` defaults to its bodies' initial poses.
        t: time (s), for prescribed motion.
        joint_coordinates: ``{joint: value(s)}`` joint coordinates to hold (rad / m).
        hold: names of bodies whose pose stays at the guess.
        iterations: Gauss–Newton steps (fixed count).
        tolerance: largest acceptable residual (m or rad).
        check_singular: also run :func:`check_configuration` on the result.

    Returns:
        the assembled ``q`` (7n,), unit quaternions.

    Raises:
        AssemblyError: naming the joint (or held item) with the largest residual left.
        SingularConfigurationError: see :func:`check_configuration`.
        ModelError: an unknown joint or body name, or a joint without coordinates.
    """
    if model.modal_bodies:
        raise ModelError(
            "assemble: modal bodies are not supported yet "
            f"({', '.join(model.modal_names)}); give their initial poses consistent with the "
            "joints, or assemble the rigid bodies in a model without them"
        )
    q = model.initial_state()[0] if q is None else jnp.asarray(q, dtype=float)
    q = model.normalize(q)
    targets = dict(joint_coordinates or {})
    for name in targets:
        if name not in model.joint_names:
            raise ModelError(f"joint_coordinates: unknown joint {name!r}")
        if not type(model.joint(name)).coordinate_kinds:
            raise ModelError(f"joint_coordinates: joint {name!r} has no coordinates")
    for name in hold:
        if name not in model.bodies.names:
            raise ModelError(f"hold: unknown body {name!r}")
    problem = _PositionProblem(
        model,
        jnp.asarray(t, dtype=float),
        q,
        tuple(model.body_index(b) for b in hold),
        tuple(targets),
        tuple(jnp.atleast_1d(jnp.asarray(v, dtype=float)) for v in targets.values()),
    )
    q = _gauss_newton(problem, q, iterations)
    residual = np.abs(np.asarray(eqx.filter_jit(problem.residual)(q)))
    if residual.size and not residual.max() <= tolerance:
        worst = int(np.nanargmax(np.where(np.isfinite(residual), residual, np.inf)))
        raise AssemblyError(
            f"position analysis failed after {iterations} Gauss–Newton iterations: the largest "
            f"residual, {residual[worst]:.3g}, is in {problem.labels()[worst]} (tolerance "
            f"{tolerance:.3g}); the joints cannot all be closed from this guess — check the "
            "joint frames and the body poses"
        )
    if check_singular:
        check_configuration(model, q, t, iterations=iterations)
    return q


@eqx.filter_jit
def _velocity_terms(model: MultibodyModel, t: Array, q: Array) -> tuple[Array, Array]:
    """``(Φ_v, Φ_t)`` at ``(t, q)``."""
    zero = jnp.zeros(6 * model.n_bodies, dtype=q.dtype)
    return constraint_jacobian(model, t, q, zero), velocity_constraints(model, t, q, zero)


def _equilibrated_jacobian(model: MultibodyModel, q: Array, t: float) -> np.ndarray:
    jac = np.asarray(_velocity_terms(model, jnp.asarray(t, dtype=float), q)[0])
    norms = np.linalg.norm(jac, axis=1, keepdims=True)
    return jac / np.where(norms > 0, norms, 1.0)


def _rank_and_bases(jac: np.ndarray, rtol: float):
    """Rank, right null-space basis (columns) and left null-space basis (columns)."""
    u, s, vt = np.linalg.svd(jac)
    rank = int(np.sum(s > rtol * (s[0] if s.size else 1.0)))
    return rank, vt[rank:].T, u[:, rank:]


def check_configuration(
    model: MultibodyModel,
    q: ArrayLike,
    t: float = 0.0,
    *,
    rtol: float = 1e-8,
    step: float = 1e-3,
    iterations: int = 30,
) -> None:
    """Raise :class:`SingularConfigurationError` if ``q`` is a singular configuration.

    A configuration is singular when the (row-normalised) constraint Jacobian ``Φ_v`` has lower
    rank than at nearby assembled configurations: a change point or dead point (e.g. a
    parallelogram four-bar with all links in line), where the accelerations are not determined.
    Redundant constraints (a planar mechanism from 3-D joints) lower the rank everywhere and are
    not singular. Test: move by ``step`` (m / rad) along a fixed mix of the allowed motions,
    re-assemble (``iterations`` Gauss–Newton steps), and compare ranks (numerical rank: singular
    values above ``rtol · σ_max``).
    The message names the joints whose equations lose independence. A ``q`` that is not
    assembled (``|Φ| > 1e-5``) raises ``ValueError`` naming the worst joint first.
    """
    q = model.normalize(jnp.asarray(q, dtype=float))
    phi = np.abs(np.asarray(model.constraints(jnp.asarray(t, dtype=float), q)))
    if phi.size and phi.max() > 1e-5:
        worst = int(np.argmax(phi))
        raise ValueError(
            f"check_configuration: q is not assembled: the constraints are violated by "
            f"{phi[worst]:.3g} at {model.constraint_labels()[worst]}; call assemble first"
        )
    jac = _equilibrated_jacobian(model, q, t)
    if jac.shape[0] == 0:
        return
    rank, null, left = _rank_and_bases(jac, rtol)
    if null.shape[1] == 0 or left.shape[1] == 0:
        return
    weights = np.cos(np.arange(1, null.shape[1] + 1))  # a fixed, generic mix of the motions
    direction = null @ weights
    moved = retract(q, jnp.asarray(step * direction / np.linalg.norm(direction)))
    problem = _PositionProblem(model, jnp.asarray(t, dtype=float), moved, (), (), ())
    nearby = _gauss_newton(problem, moved, iterations)
    rank_nearby, _, left_nearby = _rank_and_bases(_equilibrated_jacobian(model, nearby, t), rtol)
    if rank_nearby <= rank:
        return
    lost = left - left_nearby @ (left_nearby.T @ left)  # dependencies that exist only here
    u = np.linalg.svd(lost)[0][:, 0]
    rows = model.joint_rows()
    weight = {name: float(np.linalg.norm(u[r])) for name, r in rows.items()}
    involved = [n for n, w in sorted(weight.items(), key=lambda kv: -kv[1]) if w > 1e-3]
    raise SingularConfigurationError(
        f"singular configuration at t = {t:g} s: the constraint Jacobian has rank {rank} here "
        f"but {rank_nearby} at nearby assembled configurations (a change point or dead point, "
        "where the motion is not determined); joints involved: "
        f"{', '.join(repr(n) for n in involved)}. Move the mechanism away from it (a different "
        "initial guess or held joint coordinate)."
    )


class _GivenVelocities(eqx.Module):
    """The linear maps ``v ↦`` (joint rates, origin velocities, ω̄) for the named items."""

    model: MultibodyModel
    q: Array
    joints: tuple[str, ...] = eqx.field(static=True)
    bodies: tuple[str, ...] = eqx.field(static=True)
    spinning: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, w: Array) -> Array:
        m, q = self.model, self.q
        parts = [
            jax.jvp(lambda q_, j=j: m.joint_coordinates(j, q_), (q,), (m.qdot(q, w),))[1]
            for j in self.joints
        ]
        parts += [m.body_state(b, q, w).velocity for b in self.bodies]
        parts += [w[m.v_slice(b)][3:] for b in self.spinning]
        return jnp.concatenate(parts)

    def labels(self) -> list[str]:
        out = []
        for j in self.joints:
            count = len(type(self.model.joint(j)).coordinate_kinds)
            out += [f"rate of joint {j!r}"] * count
        out += [f"velocity of body {b!r}" for b in self.bodies for _ in range(3)]
        out += [f"angular velocity of body {b!r}" for b in self.spinning for _ in range(3)]
        return out


@eqx.filter_jit
def _selection_matrix(given: _GivenVelocities) -> Array:
    return jax.jacfwd(given)(jnp.zeros(6 * given.model.n_bodies, dtype=given.q.dtype))


def consistent_velocities(
    model: MultibodyModel,
    q: ArrayLike,
    t: float = 0.0,
    *,
    v: ArrayLike | None = None,
    joint_rates: Mapping[str, ArrayLike] | None = None,
    body_velocities: Mapping[str, ArrayLike] | None = None,
    body_angular_velocities: Mapping[str, ArrayLike] | None = None,
    tolerance: float = 1e-8,
) -> Array:
    """Velocities ``v`` (6n,) with ``Φ_v v = −Φ_t`` at ``(t, q)`` and the given values.

    Given values: ``joint_rates`` ``{joint: rate(s)}`` (rad/s, m/s), ``body_velocities``
    ``{body: (3,)}`` (the body-frame origin's velocity, world, m/s), ``body_angular_velocities``
    ``{body: (3,)}`` (ω̄, body axes, rad/s). They are met in the least-squares sense subject to
    the constraints (exactly, when compatible); motions they leave free keep the components of
    the guess ``v`` (default: the bodies' initial velocities). Raises :class:`ModelError` when
    the given values conflict with the constraints, naming the first conflicting entry.
    """
    q = jnp.asarray(q, dtype=float)
    guess = np.asarray(model.initial_state()[1] if v is None else v, dtype=float)
    joint_rates, body_velocities = dict(joint_rates or {}), dict(body_velocities or {})
    body_angular_velocities = dict(body_angular_velocities or {})
    for name in joint_rates:
        if name not in model.joint_names:
            raise ModelError(f"joint_rates: unknown joint {name!r}")
    for name in (*body_velocities, *body_angular_velocities):
        if name not in model.bodies.names:
            raise ModelError(f"unknown body {name!r} in the given velocities")
    jac, bias = _velocity_terms(model, jnp.asarray(t, dtype=float), q)
    a, c = np.asarray(jac), -np.asarray(bias)
    if a.shape[0]:
        _, null, _ = _rank_and_bases(a, 1e-10)
        base = guess + np.linalg.pinv(a, rcond=1e-10) @ (c - a @ guess)
    else:
        null, base = np.eye(guess.size), guess
    result = base
    given = _GivenVelocities(
        model, q, tuple(joint_rates), tuple(body_velocities), tuple(body_angular_velocities)
    )
    values = [*joint_rates.values(), *body_velocities.values(), *body_angular_velocities.values()]
    if values:
        s = np.asarray(_selection_matrix(given))
        target = np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in values])
        if target.shape != s.shape[:1]:
            raise ModelError(
                f"consistent_velocities: {target.size} given values for {s.shape[0]} velocities "
                f"({', '.join(dict.fromkeys(given.labels()))})"
            )
        z = np.linalg.lstsq(s @ null, target - s @ base, rcond=1e-10)[0]
        result = base + null @ z
        misfit = np.abs(s @ result - target) / (1.0 + np.abs(target))
        if np.any(misfit > tolerance):
            worst = int(np.argmax(misfit))
            raise ModelError(
                f"consistent_velocities: the {given.labels()[worst]} cannot be "
                f"{target[worst]:.6g} (best is {(s @ result)[worst]:.6g}): it conflicts with "
                "the constraints or with another given velocity"
            )
    if a.shape[0] and np.max(np.abs(a @ result - c)) > tolerance * (1.0 + np.max(np.abs(c))):
        raise ModelError(
            "consistent_velocities: the velocity constraints have no solution here (a singular "
            "configuration?)"
        )
    return jnp.asarray(result)


def static_equilibrium(
    model: MultibodyModel,
    q: ArrayLike | None = None,
    t: float = 0.0,
    *,
    hold: Callable[[Array], Array] | None = None,
    rtol: float = 1e-10,
    atol: float = 1e-12,
    max_steps: int = 64,
    throw: bool = True,
) -> Array:
    """The configuration ``q`` at rest under the applied loads, near the guess ``q``.

    Solves ``Q(t, q, 0) − Φ_vᵀ λ = 0`` and ``Φ(t, q) = 0`` for ``(dx, λ)`` with ``q = q_guess ⊕ dx``
    by Newton's method (``optimistix.Newton``, SVD solves). This augmented (coordinates and
    multipliers) form has the same solutions as the reduced equations in independent coordinates
    and needs no choice of independent coordinates; the SVD makes redundant constraints (a
    non-unique λ) harmless. Modal bodies move by ``(Δr₀, Δθ̄, Δq_f)``. ``hold(q) -> (k,)``: extra
    constraints that hold while the equilibrium is sought, with their own multipliers (a hammer
    held raised, a load held by a hoist); they are not part of the model. The guess defaults to
    the bodies' initial poses and should be assembled or close. The result is differentiable
    with respect to the model's parameters (implicit function theorem; the guess is a
    constant). ``throw=False`` returns the last iterate instead of raising on failure. It finds
    an equilibrium, stable or not: start near the one wanted.
    """
    # The bodies' poses: MultibodyModel's own initial state, not a subclass's (which may be
    # this very equilibrium).
    poses = MultibodyModel.initial_state(model)
    q_ref = jax.lax.stop_gradient(poses[0] if q is None else jnp.asarray(q, dtype=float))
    t = jnp.asarray(t, dtype=float)
    n_v = poses[1].shape[0]
    n_c = jax.eval_shape(lambda: _held_constraints(model, hold, t, q_ref)).shape[0]
    # Constraint rows scaled to the stiffness of the forces, so the Newton matrix is balanced:
    # a 1e8 N/m clamp beside unit constraint rows left 1e-6 m in the joints (SVD accuracy is
    # relative to the largest singular value). The stiffness is a difference of the forces
    # along a fixed pseudo-random direction (entries ±0.5…1, so springs between bodies that move
    # together do not cancel) with steps of 1e-9: round-off leaves ε|q|/1e-9 ≈ 2e-7 of it at
    # |q| ~ 1 m, and a Hertzian contact 1 µm deep is linear over such a step. The two force
    # evaluations are one vmapped program; a Jacobian here cost a third of the compile time.
    rng = np.random.default_rng(0)
    direction = rng.choice([-1.0, 1.0], n_v) * rng.uniform(0.5, 1.0, n_v)
    step = jnp.asarray(1e-9 * direction, q_ref.dtype)
    forces = jax.lax.stop_gradient(jax.vmap(
        lambda d: model.forces(t, retract_model(model, q_ref, d), jnp.zeros(n_v, q_ref.dtype))
    )(jnp.stack([jnp.zeros(n_v, q_ref.dtype), step])))  # fmt: skip
    # Scales only, constants of the solve: the reductions sit under stop_gradient (their
    # tangent, which JAX gives by an equality test, is never asked for), and the floors of 1
    # are selected by a comparison.
    stiffness = jax.lax.stop_gradient(jnp.max(jnp.abs(forces[1] - forces[0]))) / 1e-9
    scale = jnp.where(stiffness > 1.0, stiffness, 1.0)
    # Rows in units of the largest load, so `atol` (optimistix tests it in residual space)
    # is relative to the loads: 1e-12 N is below round-off on a 40 t machine.
    largest = jax.lax.stop_gradient(jnp.max(jnp.abs(forces[0])))
    load = jnp.where(largest > 1.0, largest, 1.0)
    # The residual's round-off floor: a spring of the largest stiffness between coordinates of
    # size |q| is only known to ~eps |q| (a 7.7e9 N/m plate spring at z = 1 m leaves 4e-12 of
    # the load); a tolerance below it is never met.
    # A tolerance: q_ref is a constant and the whole floor is under stop_gradient, so jnp.max
    # has no tangent to drop; floor and atol are selected by a comparison, not jnp.maximum.
    floor = jax.lax.stop_gradient(
        16 * jnp.finfo(q_ref.dtype).eps * scale * jnp.max(jnp.abs(q_ref)) / load)
    solver = optx.Newton(rtol=rtol, atol=jnp.where(floor > atol, floor, atol),
                         linear_solver=lx.SVD())  # fmt: skip
    sol = optx.root_find(
        _equilibrium_residual,
        solver,
        jnp.zeros(n_v + n_c, dtype=q_ref.dtype),
        args=(model, hold, q_ref, t, n_v, scale, load),
        max_steps=max_steps,
        adjoint=optx.ImplicitAdjoint(linear_solver=lx.SVD()),
        throw=throw,
    )
    return retract_model(model, q_ref, sol.value[:n_v])


def retract_model(model: MultibodyModel, q: Array, dx: Array) -> Array:
    """:func:`retract` for every body of ``model``: rigid bodies as there, then each modal body
    by ``(Δr₀ world, Δθ̄ body, Δq_f)``."""
    n = model.n_bodies
    rigid = retract(q[: 7 * n], dx[: 6 * n])
    parts = [rigid]
    for body in model.modal_bodies:
        qs, vs = model.q_slice(body.name), model.v_slice(body.name)
        qk, dk = q[qs], dx[vs]
        frame = retract(qk[:7], dk[:6])
        parts.append(jnp.concatenate([frame, qk[7:] + dk[6:]]))
    return jnp.concatenate(parts)


def _held_constraints(model, hold, t, q):
    phi = model.constraints(t, q)
    return phi if hold is None else jnp.concatenate([phi, hold(q)])


def _equilibrium_residual(y: Array, args) -> Array:
    """``(Q(t, q, 0) − Φ_vᵀ λ, Φ(t, q))`` at ``q = q_ref ⊕ dx`` for ``y = (dx, λ)``; Φ includes
    the held constraints, and Φ_v is its derivative along the retraction (the velocity
    coordinates). Both the constraints and their multipliers are scaled by ``scale`` (N/m), and
    every row is divided by ``load`` (N)."""
    model, hold, q_ref, t, n_v, scale, load = args
    q = retract_model(model, q_ref, y[:n_v])
    zero = jnp.zeros(n_v, dtype=q.dtype)
    jac = jax.jacfwd(lambda d: _held_constraints(model, hold, t, retract_model(model, q, d)))(zero)
    residual = model.forces(t, q, zero) - scale * (jac.T @ y[n_v:])
    return jnp.concatenate([residual, scale * _held_constraints(model, hold, t, q)]) / load


def project(
    model: MultibodyModel, t: ArrayLike, q: Array, v: Array, *, iterations: int = 3
) -> tuple[Array, Array]:
    """:func:`diffmbs.system.project_state` (``Φ = 0``, ``Φ̇ = 0``), then unit quaternions."""
    q, v = project_state(model, t, q, v, iterations=iterations)
    return model.normalize(q), v
