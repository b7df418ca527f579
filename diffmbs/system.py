"""The generic constrained mechanical system (layer 2).

A model supplies four small pure functions of its state and everything else is derived by
automatic differentiation:

* ``mass(q)`` — the generalized mass matrix ``M``, shape ``(n_v, n_v)``, symmetric;
* ``forces(t, q, v)`` — generalized applied and velocity-dependent forces ``Q``, shape ``(n_v,)``
  (gravity, springs, dampers, contact, and the Coriolis/gyroscopic terms, with their sign: the
  equations of motion read ``M v̇ = Q``);
* ``constraints(t, q)`` — the holonomic, possibly time-dependent constraints ``Φ(t, q) = 0``,
  shape ``(n_c,)`` (default: none);
* ``qdot(q, v)`` — the kinematic map ``q̇ = qdot(q, v)``, linear in ``v`` (default: ``q̇ = v``;
  a quaternion body uses ``q̇ = ½ q ⊗ ω̄``, say), shape ``(n_q,)``.

Coordinates ``q`` have shape ``(n_q,)`` and velocities ``v`` shape ``(n_v,)``; time ``t`` is a
scalar. Units are SI throughout (m, kg, s, N, rad); the units of ``q``, ``v`` and ``Q`` are those
of the coordinates the model chose (``Q`` is conjugate to ``v``: N for a translation, N·m for a
rotation).

Derived quantities, as pure functions ``f(system, ...)``:

* :func:`constraint_jacobian` — ``Φ_v = Φ_q · ∂qdot/∂v``, shape ``(n_c, n_v)``;
* :func:`velocity_constraints` — ``Φ̇ = Φ_q qdot(q, v) + Φ_t``, shape ``(n_c,)``;
* :func:`acceleration_rhs` — ``γ`` with ``Φ̈ = Φ_v v̇ − γ``, i.e. everything in the second time
  derivative of ``Φ`` that does not multiply ``v̇`` (including ``Φ_tt`` of prescribed motion and
  the derivative of the kinematic map), shape ``(n_c,)``;
* :func:`accelerations` — ``v̇`` and the multipliers ``λ`` from the index-1 (Baumgarte
  stabilised) equations of motion::

      [ M    Φ_vᵀ ] [ v̇ ]   [ Q                  ]
      [ Φ_v  0    ] [ λ  ] = [ γ − 2α Φ̇ − β² Φ  ]

  The constraint force on the system is ``−Φ_vᵀ λ`` (generalized, conjugate to ``v``); for a
  constraint written ``x − x_p(t) = 0`` on a free mass ``m``, ``λ = −m ẍ_p``.
* :func:`project_state` — mass-orthogonal projection of ``(q, v)`` onto ``Φ = 0``, ``Φ̇ = 0``
  (after every step of a simulation, and of its outputs).

How the KKT system is solved is a strategy object (:class:`AbstractKKTSolver`):

* :class:`NullSpaceKKT` (default) solves in the null space of the equilibrated ``Φ_v``, rank
  tolerant: redundant constraints and singular positions drop their zero singular values
  (see the class).
* :class:`AugmentedLagrangianKKT` (Bayo & García de Jalón) factors ``M + ρ Φ_vᵀ Φ_v``
  once by Cholesky and updates ``λ`` a fixed number of times (a static Python loop, so reverse
  mode works without a ``while_loop``). Redundant constraints are fine (``λ`` comes back as the
  minimum-norm split). Its Cholesky and solves go through :mod:`diffmbs._linalg`, so
  ``vmap`` over models is safe on CPU and derivatives are implicit through the same factor.
  Accuracy: round-off in float64 for well-scaled models (see the class).
* :class:`LeastSquaresKKT` solves the symmetrically equilibrated KKT matrix by SVD
  (``lineax.SVD``, the minimum-norm least-squares solution). It is exact to round-off for
  well-posed systems, and it is *well defined at rank deficiency*: redundant constraints (a
  planar mechanism built from 3-D joints, a constraint written twice) make the KKT matrix
  singular, yet ``v̇`` is still unique and ``λ`` comes back as the minimum-norm split of the
  reaction between the redundant equations. Derivatives go through ``lineax``'s implicit rules
  for the pseudo-inverse. A reference: several times slower than the default, and under
  ``vmap`` on CPU its batched SVD can hang jaxlib 0.10 (see :mod:`diffmbs._linalg`).

Each checks that the problem has a unique acceleration, i.e. that ``M`` is positive definite on
the null space of ``Φ_v`` (equivalently that ``M + Φ_vᵀ Φ_v`` is, after equilibration). A mass
matrix that fails this check (a massless coordinate left free, a negative mass, a non-SPD
inertia) gives a clear error from :func:`accelerations` (``eqx.error_if``, also under ``jit``),
and NaN accelerations inside the integrator, where :func:`diffmbs.integrate.simulate` turns the
resulting step rejections into an error that names the time and the cause.
"""

from __future__ import annotations

import abc
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, ArrayLike

from diffmbs import parameters as _parameters
from diffmbs._linalg import cho_solve, cholesky_factor, matvec, spd_solve, svd_factor, tmatvec

__all__ = [
    "DEFAULT_BAUMGARTE",
    "AbstractKKTSolver",
    "AugmentedLagrangianKKT",
    "LeastSquaresKKT",
    "MechanicalSystem",
    "MotionTerms",
    "NullSpaceKKT",
    "kkt_converged",
    "kkt_residuals",
    "acceleration_rhs",
    "accelerations",
    "constraint_jacobian",
    "constraint_terms",
    "mass_is_definite",
    "n_constraints",
    "project_state",
    "solve_motion",
    "velocity_constraints",
]

DEFAULT_BAUMGARTE: tuple[float, float] = (10.0, 10.0)
"""Default Baumgarte parameters ``(α, β)`` in 1/s: the drift obeys ``Φ̈ + 2αΦ̇ + β²Φ = 0``,
critically damped with a 0.1 s time constant — slow enough not to stiffen an explicit solver,
fast enough to stop drift from growing over a shock record. Terms vanish on the manifold."""

SINGULAR_MASS_MESSAGE = (
    "diffmbs: the mass matrix is singular or not positive definite on the motions the "
    "constraints allow (a massless coordinate left free, a negative mass or a non-SPD inertia?); "
    "the accelerations are not unique."
)


# --------------------------------------------------------------------------- the interface


class MechanicalSystem(eqx.Module):
    """A constrained mechanical system ``M(q) v̇ = Q(t, q, v) − Φ_vᵀ λ``, ``Φ(t, q) = 0``.

    Subclasses are ``equinox.Module`` pytrees: their float array fields are the parameters
    (differentiable, batchable); sizes and topology belong in static fields
    (``eqx.field(static=True)``). Shapes: ``q`` ``(n_q,)``, ``v`` ``(n_v,)``, ``t`` scalar (s).

    Implement :meth:`mass` and :meth:`forces`; override :meth:`constraints`, :meth:`qdot` and
    :meth:`sensors` where needed. Example, a damped oscillator::

        class Oscillator(MechanicalSystem):
            m: Array
            k: Array
            c: Array

            def mass(self, q):
                return self.m * jnp.eye(1)

            def forces(self, t, q, v):
                return -self.k * q - self.c * v
    """

    @abc.abstractmethod
    def mass(self, q: Array) -> Array:
        """Generalized mass matrix ``M(q)`` (kg, kg·m², …), symmetric positive definite on the
        motions the constraints allow."""

    @abc.abstractmethod
    def forces(self, t: ArrayLike, q: Array, v: Array) -> Array:
        """Generalized forces ``Q(t, q, v)`` conjugate to ``v`` (N, N·m): applied forces plus
        velocity-dependent inertia terms, so that ``M v̇ = Q`` without constraints."""

    def constraints(self, t: ArrayLike, q: Array) -> Array:
        """Holonomic constraints ``Φ(t, q) = 0``, shape ``(n_c,)``. Default: none, shape ``(0,)``.

        Explicit dependence on ``t`` is prescribed motion; its time derivatives are taken by
        autodiff, so ``Φ`` must be twice differentiable in ``t`` and ``q``."""
        del t
        return jnp.zeros((0,), dtype=jnp.result_type(q))

    def qdot(self, q: Array, v: Array) -> Array:
        """Kinematic map ``q̇ = qdot(q, v)``, linear in ``v``. Default: ``q̇ = v`` (n_q = n_v)."""
        del q
        return v

    def constraint_labels(self) -> tuple[str, ...] | None:
        """What each row of ``Φ`` belongs to (a joint's name, say), for error messages that
        name the constraints at fault; ``None`` (default): rows are named by index."""
        return None

    def mass_and_forces(self, t: ArrayLike, q: Array, v: Array) -> tuple[Array, Array]:
        """``(M(q), Q(t, q, v))`` together; override when both share expensive work."""
        return self.mass(q), self.forces(t, q, v)

    def default_solver(self):
        """The diffrax solver :func:`~diffmbs.simulate` uses for this model when none is given;
        ``None`` (default): ``diffrax.Tsit5()``. A model whose test has stretches of different
        character returns a :class:`~diffmbs.integrate.SolverPhases` (the shock machine's
        fall); the choice changes the cost, not the answer (every solver meets the run's
        tolerances)."""
        return None

    def default_kkt_solver(self):
        """The KKT strategy :func:`~diffmbs.simulate` uses for this model when none is given;
        ``None`` (default): :class:`NullSpaceKKT`, the rank-tolerant one. A model that knows
        its constraints (a small mechanism with one repeated equation, say) may return the
        cheaper :class:`AugmentedLagrangianKKT`."""
        return None

    # ------------------------------------------------------------------ internal states

    @property
    def n_internal(self) -> int:
        """Number of internal states ``z`` of the model's force elements (a friction bristle's
        elastic force, say), integrated with ``(q, v)`` as ``ż = internal_rate(t, q, v)``.
        Default 0: the state is ``(q, v)`` alone and the methods below are never called."""
        return 0

    def initial_internal_state(self) -> Array:
        """``z0`` ``(n_internal,)``, the internal states a simulation starts from (default
        zeros)."""
        return jnp.zeros((self.n_internal,))

    def with_internal_state(self, z: Array) -> MechanicalSystem:
        """A copy whose :meth:`forces` (and sensors) see the internal states ``z``
        ``(n_internal,)``; a model with internal states stores them in a leaf, so ``forces``
        keeps its signature and derivatives flow through ``z`` like through any parameter."""
        del z
        return self

    def internal_rate(self, t: ArrayLike, q: Array, v: Array) -> Array:
        """``ż`` ``(n_internal,)`` at the internal states this copy holds (see
        :meth:`with_internal_state`)."""
        del t, v
        return jnp.zeros((0,), dtype=jnp.result_type(q))

    def initial_state(self) -> tuple[Array, Array]:
        """``(q0 (n_q,), v0 (n_v,))``: the state a test starts from, as a function of the
        model's own leaves (so a fitted parameter such as a drop height moves it). Experiments,
        job files and ``diffmbs simulate`` need it; a model that is only simulated from given
        states need not define it."""
        raise NotImplementedError(
            f"{type(self).__name__} does not define initial_state() -> (q0, v0), which "
            "experiments and job files need"
        )

    # ------------------------------------------------------------------ parameters by name

    def resolve_parameter(self, path: str) -> _parameters.ParameterRef:
        """Where the parameter ``path`` lives (see :mod:`diffmbs.parameters`): by attribute path
        (``"k_channel"``, ``"springs[2].rate"``) unless a subclass names its parameters its own
        way. Raises :class:`~diffmbs.parameters.ParameterError` naming what exists where the path
        fails."""
        return _parameters.resolve_attribute_path(self, path)

    def parameter(self, path: str) -> Array:
        """The value of the parameter ``path``."""
        return _parameters.get_parameter(self, path)

    def with_parameter(self, path: str, value: ArrayLike):
        """A copy with the parameter ``path`` set to ``value`` (broadcast to its shape);
        differentiable in ``value``."""
        return _parameters.set_parameter(self, path, value)

    def parameter_paths(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Every parameter by name: ``{path: (shape, units)}`` (units from the fields'
        ``metadata["units"]``, "" where not given)."""
        return _parameters.parameter_paths(self)

    def sensors(
        self,
        t: ArrayLike,
        q: Array,
        v: Array,
        vdot: Array,
    ) -> dict[str, Array]:
        """Named scalar outputs at one state (accelerometers, energies, reactions …), given the
        accelerations ``vdot`` from the equations of motion. Default: none."""
        del t, q, v, vdot
        return {}


# --------------------------------------------------------------------------- derived kinematics


def _time(t: ArrayLike, q: Array) -> Array:
    return jnp.asarray(t, dtype=jnp.result_type(q, float))


def n_constraints(system: MechanicalSystem, t: ArrayLike, q: Array) -> int:
    """Number of constraint equations ``n_c`` (static: read from the shape of ``Φ``)."""
    return jax.eval_shape(system.constraints, _time(t, q), q).shape[0]


def velocity_constraints(system: MechanicalSystem, t: ArrayLike, q: Array, v: Array) -> Array:
    """``Φ̇ = Φ_q qdot(q, v) + Φ_t``, shape ``(n_c,)`` (one ``jax.jvp``)."""
    t = _time(t, q)
    return jax.jvp(system.constraints, (t, q), (jnp.ones_like(t), system.qdot(q, v)))[1]


def constraint_terms(
    system: MechanicalSystem, t: ArrayLike, q: Array, v: Array
) -> tuple[Array, Array, Array]:
    """``(Φ, Φ̇, γ)`` in one nested ``jax.jvp``, each of shape ``(n_c,)``.

    With ``Φ̇(t, q, v) = Φ_q qdot(q, v) + Φ_t`` and ``∂Φ̇/∂v = Φ_v``, the second derivative along a
    motion is ``Φ̈ = Φ_v v̇ + ∂Φ̇/∂t + ∂Φ̇/∂q · qdot(q, v)``, so
    ``γ = −(∂Φ̇/∂t + ∂Φ̇/∂q · qdot(q, v))``: the quadratic velocity terms, ``Φ_tt`` and the mixed
    terms of prescribed motion, and the derivative of the kinematic map.
    """
    t = _time(t, q)
    dt = jnp.ones_like(t)
    dq = system.qdot(q, v)

    def phi_and_phidot(t_, q_):
        return jax.jvp(system.constraints, (t_, q_), (dt, system.qdot(q_, v)))

    (phi, phidot), (_, phiddot0) = jax.jvp(phi_and_phidot, (t, q), (dt, dq))
    return phi, phidot, -phiddot0


def acceleration_rhs(system: MechanicalSystem, t: ArrayLike, q: Array, v: Array) -> Array:
    """``γ`` such that ``Φ̈ = Φ_v v̇ − γ``, shape ``(n_c,)``; see :func:`constraint_terms`."""
    return constraint_terms(system, t, q, v)[2]


def constraint_jacobian(system: MechanicalSystem, t: ArrayLike, q: Array, v: Array) -> Array:
    """Constraint Jacobian with respect to the velocity coordinates, ``Φ_v = Φ_q ∂qdot/∂v``.

    Shape ``(n_c, n_v)``. Computed as the forward-mode Jacobian (``n_v`` JVPs) of
    ``v ↦ Φ_q qdot(q, v)``, so ``Φ_q`` (shape ``(n_c, n_q)``) is never formed. ``v`` only fixes
    the size (the map is linear in ``v``).
    """
    t = _time(t, q)

    def phi_v_times(w):
        return jax.jvp(lambda q_: system.constraints(t, q_), (q,), (system.qdot(q, w),))[1]

    return jax.jacfwd(phi_v_times)(v)


# --------------------------------------------------------------------------- KKT strategies


def _equilibrate(mass: Array, jac: Array) -> tuple[Array, Array, Array, Array]:
    """Diagonal scalings that make ``diag(M) = 1`` and the rows of ``Φ_v`` unit vectors.

    Returns ``(s_v, s_c, M̃, Φ̃)`` with ``M̃ = S_v M S_v`` and ``Φ̃ = S_c Φ_v S_v``. This makes
    the rank cut-off and the definiteness check independent of units; non-positive diagonal
    entries and zero rows are left unscaled (and caught by the definiteness check). The
    scalings carry no gradient: the solutions do not depend on them.
    """
    d = jax.lax.stop_gradient(jnp.diagonal(mass))
    pos = d > 0
    s_v = jnp.where(pos, 1 / jnp.sqrt(jnp.where(pos, d, 1)), 1)
    jv = jac * s_v[None, :]
    r2 = jax.lax.stop_gradient(jnp.sum(jv * jv, axis=1))
    nz = r2 > 0
    s_c = jnp.where(nz, 1 / jnp.sqrt(jnp.where(nz, r2, 1)), 1)
    m_t = s_v[:, None] * mass * s_v[None, :]
    return s_v, s_c, m_t, s_c[:, None] * jv


def _cholesky_checked(a: Array) -> tuple[Array, Array]:
    """Cholesky factor (no gradient; see :mod:`diffmbs._linalg`) of a symmetric matrix with
    unit-order diagonal, and whether it is numerically positive definite: finite, with every
    pivot² above ``100 n ε · max diag``."""
    a = 0.5 * (a + a.T)
    n = a.shape[0]
    low = cholesky_factor(a)
    piv = jnp.diagonal(low)
    eps = jnp.finfo(a.dtype).eps
    scale = jnp.max(jnp.abs(jnp.diagonal(a)))
    ok = jnp.all(jnp.isfinite(low)) & jnp.all(piv * piv > 100 * n * eps * scale)
    return low, ok


def mass_is_definite(mass: Array, jac: Array) -> Array:
    """Whether ``M`` is positive definite on the null space of ``Φ_v`` (``v̇`` is unique).

    Tested as the Cholesky factorisation of the equilibrated ``M̃ + Φ̃ᵀ Φ̃``, which is positive
    definite exactly when no admissible motion ``w`` (``Φ_v w = 0``) has ``wᵀ M w ≤ 0``.
    """
    _, _, m_t, j_t = _equilibrate(mass, jac)
    return _cholesky_checked(m_t + j_t.T @ j_t)[1]


class AbstractKKTSolver(eqx.Module):
    """Strategy that solves ``[M Φ_vᵀ; Φ_v 0][v̇; λ] = [Q; c]``.

    ``__call__(mass (n_v, n_v), jac (n_c, n_v), force (n_v,), rhs (n_c,))`` returns
    ``(vdot (n_v,), lam (n_c,), ok ())`` where ``ok`` says the accelerations are unique (``M``
    positive definite on the null space of ``Φ_v``). Must be differentiable (no unbounded loops).
    ``n_c = 0`` is handled by :func:`accelerations` (Cholesky of ``M``) and never reaches it.
    """

    @abc.abstractmethod
    def __call__(
        self,
        mass: Array,
        jac: Array,
        force: Array,
        rhs: Array,
    ) -> tuple[Array, Array, Array]:
        """Solve the KKT system; see the class docstring."""


KKT_RESIDUAL_TOLERANCE = 1e-6
"""Largest relative residual of a KKT solve (either block row, equilibrated, against the size of
its terms) that counts as solved: above it the solver's ``ok`` is false and the simulation stops
with "the KKT solve did not converge", naming the joints of the worst rows."""


KKT_CONSISTENCY_TOLERANCE = 1e-3
"""Largest part of the equilibrated acceleration right-hand side, relative to its size, that
:class:`NullSpaceKKT` accepts along the directions its cut-off drops. It is round-off for
redundant rows on the manifold but can reach the stage error, divided by a vanishing singular
value, at a Runge–Kutta stage that lands on a singular position (the double four-bar in joint
coordinates, rtol 1e-10: up to ~1e-4), while constraints that contradict each other (two
drives of one joint) leave a part of order one."""


def kkt_residuals(
    mass: Array, jac: Array, force: Array, rhs: Array, vdot: Array, lam: Array
) -> tuple[Array, Array]:
    """Relative residuals ``(r_force (n_v,), r_constraint (n_c,))`` of a KKT solution on the
    equilibrated system: ``(Q − M v̇ − Φ_vᵀλ)`` and ``(Φ_v v̇ − c)``, each divided by the size of
    its row's terms (dimensionless; round-off is ~1e-15, :data:`KKT_RESIDUAL_TOLERANCE` flags a
    solve that did not converge or constraints that contradict each other). No gradient."""
    mass, jac, force, rhs, vdot, lam = jax.lax.stop_gradient((mass, jac, force, rhs, vdot, lam))
    s_v, s_c, m_t, j_t = _equilibrate(mass, jac)
    x, l_t, f_t, c_t = vdot / s_v, lam / s_c, s_v * force, s_c * rhs
    inertia, reaction, motion = matvec(m_t, x), tmatvec(j_t, l_t), matvec(j_t, x)
    tiny = jnp.finfo(x.dtype).tiny
    force_scale = jnp.abs(f_t) + jnp.abs(inertia) + jnp.abs(reaction)
    force_scale = jnp.maximum(force_scale, jnp.max(force_scale, initial=0.0) * 1e-3) + tiny
    con_scale = jnp.abs(c_t) + jnp.max(jnp.abs(x), initial=0.0) + tiny
    return (f_t - inertia - reaction) / force_scale, (motion - c_t) / con_scale


def kkt_converged(mass, jac, force, rhs, vdot, lam) -> Array:
    """Whether every relative KKT residual (:func:`kkt_residuals`) is within
    :data:`KKT_RESIDUAL_TOLERANCE`."""
    r_force, r_con = kkt_residuals(mass, jac, force, rhs, vdot, lam)
    worst = jnp.max(jnp.abs(jnp.concatenate([r_force, r_con])), initial=0.0)
    return worst <= KKT_RESIDUAL_TOLERANCE


def _column_equilibrate(jac: Array) -> tuple[Array, Array, Array]:
    """``(s_v, s_c, Φ̃)``: columns of ``Φ_v`` scaled to unit norm, then rows (norms floored at
    1e-3 of the largest).
    Unit-free (a change of units of a coordinate scales its column) and, unlike scaling by
    the mass matrix, not distorted by tiny or zero inertias. No gradient in the scalings."""
    def inverse_norms(squares):
        # Norms are floored at 1e-3 of the largest: a column that is nearly zero (the spin of a
        # top about the axis through its pivot; the rotation of a body pinned at its origin,
        # off the manifold by the drift) scaled up to unit norm would swamp the mass matrix.
        floor = 1e-6 * jnp.max(squares, initial=0.0)
        squares = jnp.maximum(squares, floor)  # no gradient: the scalings are stopped
        return jnp.where(squares > 0, 1 / jnp.sqrt(jnp.where(squares > 0, squares, 1)), 1)

    s_v = inverse_norms(jax.lax.stop_gradient(jnp.sum(jac * jac, axis=0)))
    jv = jac * s_v[None, :]
    s_c = inverse_norms(jax.lax.stop_gradient(jnp.sum(jv * jv, axis=1)))
    return s_v, s_c, s_c[:, None] * jv


class NullSpaceKKT(AbstractKKTSolver):
    """Direct, rank-tolerant KKT solve by the null-space method (the default).

    Columns of ``Φ_v`` are scaled to unit norm, then rows (:func:`_column_equilibrate`); the SVD
    ``Φ̃ = U Σ Vᵀ`` splits the velocity space into the constrained directions (``σ > rcond ·
    σ_max``) and the null space ``N`` of the admissible motions. Then::

        v̇_p = Φ̃⁺ c̃,   (Nᵀ M̃ N) z = Nᵀ (Q̃ − M̃ v̇_p),   v̇ = v̇_p + N z,   λ = (Φ̃ᵀ)⁺ (Q̃ − M̃ v̇)

    (Gauss's principle: ``v̇`` minimises the acceleration energy on the constraint set). It is
    exact to round-off whatever the spread of the inertias: the mass matrix only enters through
    ``Nᵀ M N``, which is well conditioned when the motion is (a 1 kg bob with 1e-9 kg·m² on a
    1 m pendulum: ``m L² + J``), so bodies with tiny or zero rotational inertia are fine when
    the joints fix their rotation. Redundant constraints (a planar loop of 3-D revolutes) and
    singular positions (a parallelogram passing its flat position) drop their zero singular
    values: ``λ`` is the minimum-norm split (see below for singular positions). ``ok`` is
    false where ``M`` is not positive definite on the admissible motions or the right-hand
    side has a part along the dropped rows (constraints that contradict each other, see
    :data:`KKT_CONSISTENCY_TOLERANCE`).

    Derivatives are implicit (``lax.custom_linear_solve`` on the KKT operator, the factors carry
    none), exact for ``v̇``. Cost: one SVD of ``Φ̃`` (``n_c × n_v``) and one Cholesky
    (``n_v × n_v``) per call, ~2× :class:`AugmentedLagrangianKKT` for small models.

    Near a singular position the smallest non-zero ``σ`` passes through 0 and ``u·c̃ / σ`` is
    0/0 on the manifold but ``(stage error)/σ`` at a Runge–Kutta stage. The pseudo-inverse is
    therefore the iterated-Tikhonov filter ``(1 − (μ²/(σ² + μ²))ᵏ)/σ`` with ``μ =
    regularization · σ_max`` and ``k = refinements``: ``1/σ`` to round-off for ``σ ≳ 75 μ``
    (every well-posed constraint), a gain of at most ``~k/μ`` as ``σ → 0``, where the
    constraint briefly holds softly (as in the augmented-Lagrangian formulations of Bayo &
    Avello, 1994); the per-step projection of :func:`diffmbs.simulate` removes what drifts.
    The IFToMM double four-bar passes 10 flat positions with B0 within 4e-8 m of the
    reference for μ from 1e-4 to 3e-3 and k from 4 to 8.

    ``rcond``: singular values below ``rcond · σ_max`` are dropped (redundant rows).
    ``regularization``, ``refinements``: ``μ / σ_max`` and ``k`` of the filter.
    """

    rcond: float = 1e-12
    regularization: float = 1e-3
    refinements: int = eqx.field(static=True, default=4)

    def __call__(self, mass, jac, force, rhs):
        n_v, n_c = mass.shape[0], jac.shape[0]
        s_v, s_c, j_t = _column_equilibrate(jac)
        m_t = s_v[:, None] * mass * s_v[None, :]
        m_t = 0.5 * (m_t + m_t.T)
        u, sigma, vt = svd_factor(j_t)
        k = sigma.shape[0]
        sigma_max = jnp.max(sigma, initial=0.0)
        kept = sigma > self.rcond * sigma_max
        # Iterated-Tikhonov filter: 1/σ to round-off for σ ≫ μ, gain at most ~k/μ near a
        # singular position (σ → 0), where the constraint then holds softly.
        safe = jnp.where(kept, sigma, 1.0)
        mu2 = (self.regularization * sigma_max) ** 2
        inv_sigma = jnp.where(
            kept, (1 - (mu2 / (safe * safe + mu2)) ** self.refinements) / safe, 0.0
        )
        free = jnp.concatenate([~kept, jnp.ones(n_v - k, bool)]) if k < n_v else ~kept[:n_v]
        u_full, u = u, u[:, :k]
        v_k = vt[:k].T  # (n_v, k): right singular vectors of the kept σ
        # Reduced mass Nᵀ M̃ N in the V basis; the constrained directions get a placeholder
        # on the diagonal so one Cholesky covers it (they decouple from the free ones).
        m_v = jax.lax.stop_gradient(vt @ m_t @ vt.T)
        scale = jnp.max(jnp.abs(jnp.diagonal(m_v)), initial=0.0)
        reduced = jnp.where(free[:, None] & free[None, :], m_v, 0.0) + jnp.diag(
            jnp.where(free, 0.0, scale)
        )
        low, definite = _cholesky_checked(reduced)

        def pinv(c):  # Φ̃⁺ c, (k,) → (n_v,)
            return matvec(v_k, inv_sigma * tmatvec(u, c))

        def pinv_t(f):  # (Φ̃ᵀ)⁺ f, (n_v,) → (n_c,)
            return matvec(u, inv_sigma * tmatvec(v_k, f))

        # One stacked vector z = (x, λ): a tuple right-hand side whose parts carry symbolic-zero
        # tangents is not accepted by custom_linear_solve's forward mode.
        def solve(_, b):
            f, c = b[:n_v], b[n_v:]
            x = pinv(c)
            r = jnp.where(free, matvec(vt, f - matvec(m_t_stop, x)), 0.0)
            x = x + tmatvec(vt, jnp.where(free, cho_solve(low, r), 0.0))
            return jnp.concatenate([x, pinv_t(f - matvec(m_t_stop, x))])

        m_t_stop = jax.lax.stop_gradient(m_t)

        def operator(z):
            x, lam = z[:n_v], z[n_v:]
            return jnp.concatenate([matvec(m_t, x) + tmatvec(j_t, lam), matvec(j_t, x)])

        b = jnp.concatenate([s_v * force, s_c * rhs])
        z = jax.lax.custom_linear_solve(operator, b, solve=solve, symmetric=True)
        x, lam = z[:n_v], z[n_v:]
        # Constraints that contradict each other leave a part of c̃ along the dropped singular
        # directions (round-off for redundant but consistent ones).
        c_t = jax.lax.stop_gradient(s_c * rhs)
        dropped = jnp.where(kept, 0.0, tmatvec(u, c_t))
        if n_c > k:  # rows beyond the rank of an (n_c × n_v) matrix
            dropped = jnp.concatenate([dropped, tmatvec(u_full[:, k:], c_t)])
        size = jnp.max(jnp.abs(c_t), initial=0.0) + jnp.max(jnp.abs(x), initial=0.0)
        consistent = jnp.max(jnp.abs(dropped), initial=0.0) <= KKT_CONSISTENCY_TOLERANCE * (
            jax.lax.stop_gradient(size) + jnp.finfo(size.dtype).tiny
        )
        return s_v * x, s_c * lam, definite & consistent


class LeastSquaresKKT(AbstractKKTSolver):
    """Minimum-norm least-squares solution of the equilibrated KKT system by SVD (a reference;
    not safe under ``vmap`` on CPU with jaxlib 0.10, see :mod:`diffmbs._linalg`).

    The KKT matrix is scaled symmetrically so that ``diag(M) = 1`` and each constraint row is a
    unit vector, then solved with ``lineax.SVD``: singular values below ``rcond · σ_max`` are
    dropped. With redundant constraints the KKT matrix is singular but consistent, ``v̇`` is
    unique and ``λ`` is the minimum-norm (evenly split, in scaled units) multiplier vector; the
    result is finite and differentiable (``lineax`` differentiates the pseudo-inverse
    implicitly). Cost ``O((n_v + n_c)³)`` per call with a large constant (SVD) — fine for the
    small and medium models this package targets; see :class:`AugmentedLagrangianKKT` otherwise.

    ``rcond``: relative cut-off for singular values; ``None`` = ``ε · (n_v + n_c)`` (lineax).
    """

    rcond: float | None = None

    def __call__(self, mass, jac, force, rhs):
        n_v = mass.shape[0]
        s_v, s_c, m_t, j_t = _equilibrate(mass, jac)
        ok = _cholesky_checked(m_t + j_t.T @ j_t)[1]
        n_c = j_t.shape[0]
        kkt = jnp.block([[m_t, j_t.T], [j_t, jnp.zeros((n_c, n_c), m_t.dtype)]])
        kkt = 0.5 * (kkt + kkt.T)
        b = jnp.concatenate([s_v * force, s_c * rhs])
        operator = lx.MatrixLinearOperator(kkt, lx.symmetric_tag)
        z = lx.linear_solve(operator, b, solver=lx.SVD(rcond=self.rcond), throw=False).value
        vdot, lam = s_v * z[:n_v], s_c * z[n_v:]
        return vdot, lam, ok & kkt_converged(mass, jac, force, rhs, vdot, lam)


class AugmentedLagrangianKKT(AbstractKKTSolver):
    """Augmented-Lagrangian iterations (Bayo, García de Jalón & Serna 1988), fixed count.

    On the equilibrated system (unit mass diagonal, unit constraint rows), factor
    ``A = M̃ + ρ Φ̃ᵀ Φ̃`` once by Cholesky and iterate, from ``v̇₀ = 0``, ``λ₀ = 0``::

        A v̇ₖ₊₁ = Q̃ − Φ̃ᵀ λₖ + ρ Φ̃ᵀ c̃,    λₖ₊₁ = λₖ + ρ (Φ̃ v̇ₖ₊₁ − c̃),

    written in defect-correction form (each solve is for the correction, from the current
    residuals of both KKT rows), so round-off does not grow with ``ρ``. ``A`` is positive definite
    whenever the accelerations are unique, redundant constraints or not, and ``λ`` stays in the
    range of ``Φ̃`` (the minimum-norm multipliers). The error contracts by ``1 / (1 + ρ s)`` per
    iteration, ``s`` the smallest non-zero eigenvalue of ``Φ̃ M̃⁻¹ Φ̃ᵀ`` (of order one for
    well-scaled models): the defaults (``ρ = 1e6``, 4 iterations) reach round-off in float64
    for ``s ≳ 1e-3`` (the pendulum: 2e-15 relative). The trip count is static (a Python loop),
    so reverse mode needs no ``while_loop``. Cheaper than the SVD for larger models and on GPUs
    (one Cholesky, a few triangular solves).
    """

    penalty: float = 1e6
    iterations: int = eqx.field(static=True, default=4)

    def __call__(self, mass, jac, force, rhs):
        s_v, s_c, m_t, j_t = _equilibrate(mass, jac)
        rho = jnp.asarray(self.penalty, dtype=m_t.dtype)
        jtj = j_t.T @ j_t
        a = m_t + rho * jtj
        a = 0.5 * (a + a.T)
        low, _ = _cholesky_checked(a)
        ok = _cholesky_checked(m_t + jtj)[1]
        f_t, c_t = s_v * force, s_c * rhs
        lam = jnp.zeros_like(c_t)
        z = jnp.zeros_like(f_t)
        for _ in range(self.iterations):
            # Defect-correction form of A z' = Q − Φᵀλ + ρ Φᵀ c: solve for the correction from
            # the current residuals, so round-off scales with the correction, not with ρ.
            r_force = f_t - matvec(m_t, z) - tmatvec(j_t, lam)
            r_con = c_t - matvec(j_t, z)
            z = z + spd_solve(a, r_force + rho * tmatvec(j_t, r_con), low)
            lam = lam + rho * (matvec(j_t, z) - c_t)
        vdot, lam = s_v * z, s_c * lam
        return vdot, lam, ok & kkt_converged(mass, jac, force, rhs, vdot, lam)


# --------------------------------------------------------------------------- equations of motion


def _solve_mass(mass: Array, force: Array) -> tuple[Array, Array]:
    """``M⁻¹ Q`` by Cholesky of the Jacobi-scaled ``M``, and whether ``M`` is definite."""
    s_v, _, m_t, _ = _equilibrate(mass, jnp.zeros((0, mass.shape[0]), mass.dtype))
    m_t = 0.5 * (m_t + m_t.T)
    low, ok = _cholesky_checked(m_t)
    return s_v * spd_solve(m_t, s_v * force, low), ok


class MotionTerms(NamedTuple):
    """The terms of one evaluation of the equations of motion (see :func:`accelerations`)."""

    mass: Array  # M, (n_v, n_v)
    force: Array  # Q, (n_v,)
    phi: Array  # Φ, (n_c,)
    phidot: Array  # Φ̇, (n_c,)
    gamma: Array  # γ, (n_c,)
    jac: Array  # Φ_v, (n_c, n_v)


def solve_motion(
    system: MechanicalSystem,
    t: ArrayLike,
    q: Array,
    v: Array,
    baumgarte: tuple[ArrayLike, ArrayLike] = DEFAULT_BAUMGARTE,
    *,
    kkt_solver: AbstractKKTSolver | None = None,
) -> tuple[Array, Array, Array, MotionTerms]:
    """``(v̇, λ, ok, terms)``: :func:`accelerations` without its check — ``ok`` (bool) says
    ``M`` is positive definite on the motions the constraints allow (``v̇`` is unique) — and the
    :class:`MotionTerms` it was computed from, for callers that also inspect them (the
    simulation's drift and failure diagnosis) without tracing the model a second time."""
    alpha, beta = baumgarte
    t = _time(t, q)
    mass, force = system.mass_and_forces(t, q, v)
    if n_constraints(system, t, q) == 0:
        vdot, ok = _solve_mass(mass, force)
        empty = jnp.zeros((0,), dtype=vdot.dtype)
        jac = jnp.zeros((0, v.shape[0]), dtype=vdot.dtype)
        return vdot, empty, ok, MotionTerms(mass, force, empty, empty, empty, jac)
    phi, phidot, gamma = constraint_terms(system, t, q, v)
    jac = constraint_jacobian(system, t, q, v)
    rhs = gamma - 2 * alpha * phidot - beta**2 * phi
    solver = NullSpaceKKT() if kkt_solver is None else kkt_solver
    vdot, lam, ok = solver(mass, jac, force, rhs)
    return vdot, lam, ok, MotionTerms(mass, force, phi, phidot, gamma, jac)


def accelerations(
    system: MechanicalSystem,
    t: ArrayLike,
    q: Array,
    v: Array,
    baumgarte: tuple[ArrayLike, ArrayLike] = DEFAULT_BAUMGARTE,
    *,
    kkt_solver: AbstractKKTSolver | None = None,
    check: bool = True,
) -> tuple[Array, Array]:
    """Accelerations ``v̇`` (shape ``(n_v,)``) and multipliers ``λ`` (shape ``(n_c,)``).

    Solves ``[M Φ_vᵀ; Φ_v 0][v̇; λ] = [Q; γ − 2α Φ̇ − β² Φ]`` with ``(α, β) = baumgarte`` (1/s)
    using ``kkt_solver`` (default :class:`NullSpaceKKT`); without constraints,
    ``M v̇ = Q`` by Cholesky. ``λ`` is in units of ``Q`` divided by those of ``Φ_v``; the
    constraint force is ``−Φ_vᵀ λ``.

    ``check=True``: a mass matrix that is not positive definite on the admissible motions raises
    (``eqx.error_if``: a Python error eagerly, a runtime error under ``jit``).
    ``check=False``: it returns NaN accelerations instead (used inside the integrator, which
    reports the failure with its time after the solve).
    """
    vdot, lam, ok, _ = solve_motion(system, t, q, v, baumgarte, kkt_solver=kkt_solver)
    if check:
        vdot = eqx.error_if(vdot, jnp.logical_not(ok), SINGULAR_MASS_MESSAGE)
    else:
        vdot = jnp.where(ok, vdot, jnp.nan)
    return vdot, lam


def project_state(
    system: MechanicalSystem,
    t: ArrayLike,
    q: Array,
    v: Array,
    *,
    iterations: int = 3,
    kkt_solver: AbstractKKTSolver | None = None,
) -> tuple[Array, Array]:
    """Mass-orthogonal projection of ``(q (n_q,), v (n_v,))`` onto ``Φ(t, q) = 0`` and
    ``Φ̇(t, q, v) = 0``, as the ALI3-P schemes of the multibody literature do it:

    * positions: ``iterations`` Newton steps of ``min ½ Δxᵀ M Δx`` subject to
      ``Φ_v Δx = −Φ(t, q)``, ``q ← q + qdot(q, Δx)`` (a static count in a ``scan``, no
      ``while_loop``: reverse mode stores each iterate);
    * velocities: ``min ½ Δvᵀ M Δv`` subject to ``Φ_v (v + Δv) + Φ_t = 0`` with ``Φ_v`` at the
      projected positions (one step: linear). (Near a singular position ``Φ_v`` turns fast with
      ``q``: velocities projected with the Jacobian of the unprojected state left the double
      four-bar's branch.)

    Each step is one KKT solve with zero force (:class:`NullSpaceKKT` by default, so redundant
    constraints, singular positions and zero inertias are fine). The metric is ``M`` at the
    unprojected ``q``: any positive metric projects onto the same manifold, ``M`` removes the
    least kinetic energy. Without constraints ``(q, v)`` is returned as is.
    """
    t = _time(t, q)
    if n_constraints(system, t, q) == 0:
        return q, v
    solver = NullSpaceKKT() if kkt_solver is None else kkt_solver
    mass = system.mass(q)
    zero = jnp.zeros_like(v)

    def newton(q, _):
        jac = constraint_jacobian(system, t, q, v)
        dx, _, _ = solver(mass, jac, zero, -system.constraints(t, q))
        return q + system.qdot(q, dx), None

    q, _ = jax.lax.scan(newton, q, length=iterations)
    jac = constraint_jacobian(system, t, q, v)
    dv, _, _ = solver(mass, jac, zero, -velocity_constraints(system, t, q, v))
    return q, v + dv
