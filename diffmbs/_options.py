"""The options of :func:`~diffmbs.simulate` and :func:`~diffmbs.simulate_batch` (layer 4).

One frozen dataclass shared by both entry points, so a run's settings are one value that can be
built once, stored and reused (``simulate(model, q0, v0, ts, options)``); keyword arguments
replace single fields (``simulate(model, q0, v0, ts, options, rtol=1e-10)``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import diffrax
from jaxtyping import ArrayLike

from diffmbs.system import AbstractKKTSolver

__all__ = ["DEFAULT_MAX_STEPS", "SimulationOptions"]

DEFAULT_MAX_STEPS = 200_000
"""Default step budget. It also sizes the reverse-mode memory: the step store of
:class:`~diffmbs.adjoint.DiscreteAdjoint` (``max_steps × n_state`` floats), or the checkpoints
of ``RecursiveCheckpointAdjoint`` (``≈ √(2 · max_steps)`` copies of the solver state). Every
gradient call allocates and fills that store, however few steps the run takes: a 30-link chain
in joint coordinates (60 states, 52 steps) took 95 ms per gradient at this default and 44 ms at
``max_steps=1024``. For repeated gradients (fits, sweeps) set ``max_steps`` to a few times the
steps a run takes (``Solution.stats["num_steps"]``)."""


@dataclasses.dataclass(frozen=True)
class SimulationOptions:
    """How to integrate (SI units); every field has a default.

    - ``solver``: a diffrax solver; default ``diffrax.Tsit5()``. For stiff models pass
      ``diffrax.Kvaerno5()`` (implicit). For smooth mechanisms without contact the 8th-order
      ``diffrax.Dopri8()`` reaches the same accuracy in fewer right-hand sides (10- and
      30-link chains at 1e-4 rad: a third of Tsit5's steps, 20–40 % less time).
    - ``adjoint``: reverse mode (``jax.grad``) by default: :class:`~diffmbs.adjoint.DiscreteAdjoint`
      with explicit solvers, ``diffrax.RecursiveCheckpointAdjoint()`` otherwise (see the module
      docstring); ``diffrax.ForwardMode()`` for ``jax.jacfwd``/``jax.jvp``.
    - ``stepsize_controller``: default ``diffrax.PIDController(rtol, atol, dtmin=1e-14 · span,
      force_dtmin=False)``; ``rtol``/``atol`` (relative / absolute, on ``q`` and ``v`` alike)
      are ignored when a controller is given.
    - ``dt0`` s: initial step; ``None`` lets the controller choose.
    - ``dtmax`` s: largest step of the default controller; ``None`` (default): no cap.
      ``"samples"``: the smallest spacing of the save times ``ts``, so that forcing which
      lasts at least one sample interval (a base pulse, a blow, a switched load) cannot be
      stepped over unseen — an adaptive step grows freely while nothing moves, and a 1 ms
      pulse after 0.1 s of rest is skipped entirely without a cap. Use it (or a number) for
      any model driven by short inputs. It is not the default because it costs at least one
      step per sample: an oscillator saved at 200 points then takes 200 steps at any tolerance.
    - ``max_steps``: step budget (static). Reverse mode stores up to this many steps and
      fills the store on every call: for repeated gradients set it to a few times the steps a
      run takes (see :data:`DEFAULT_MAX_STEPS`).
    - ``baumgarte``: ``(α, β)`` in 1/s, see :func:`diffmbs.system.accelerations`; default
      ``(0, 0)`` with ``step_projection`` (drift is removed at every step), else
      :data:`~diffmbs.system.DEFAULT_BAUMGARTE`.
    - ``step_projection``: end every accepted step of a constrained model with a
      mass-orthogonal projection of positions and velocities onto ``Φ = 0``, ``Φ̇ = 0``
      (:func:`diffmbs.system.project_state`; differentiated in reverse and forward mode). It
      keeps mechanisms right through singular positions, where Baumgarte terms do work on the
      spurious motion (the IFToMM double four-bar: energy conserved through every flat
      position). Costs the projection (~2 right-hand sides) and, with first-same-as-last
      solvers (Tsit5), one more right-hand side per step; ``True`` by default (models without
      constraints are never projected). ``False``: Baumgarte stabilisation only.
    - ``t0`` s: start time, default ``ts[0]``.
    - ``kkt_solver``: strategy for constrained systems, default
      :class:`~diffmbs.system.NullSpaceKKT`.
    - ``project``: project the saved ``(q, v)`` onto ``Φ = 0``, ``Φ̇ = 0`` (the same
      :func:`~diffmbs.system.project_state`, ``projection_iterations`` Newton steps) before
      evaluating accelerations and sensors. The integration itself is not altered.
    - ``output_chunk``: saved samples evaluated together (vectorised) for the outputs
      (v̇, multipliers, sensors, projection); the samples go through in chunks of this size,
      so memory stays bounded on long records and in batches. Default 1: vectorising the
      outputs doubles the compile time of a forward run (a pendulum: 4.0 → 7.8 s) for a small
      saving in run time; larger values suit a GPU, and a single run differentiated with XLA's
      multi-threaded CPU pool (all samples at once: ~10 % faster reverse pass for chain10 with
      two threads).
    - ``throw``: raise on failure (see the module docstring); ``False`` returns the partial
      :class:`Solution` with ``status``/``diagnosis``/``t_reached`` set.
    - ``check_derivatives``: first run :func:`diffmbs.check_derivatives` at ``(t0, q0, v0)``
      and raise its :class:`~diffmbs.derivatives.DerivativeCheckError` if the model's
      derivatives are wrong (a ``jnp.hypot``/``maximum``/``clip`` … on a differentiated path,
      or compiled derivatives that disagree with op-by-op ones or finite differences). Costs
      seconds to a minute; skipped when the inputs or the model are traced (``jit``, ``grad``).
    """

    solver: diffrax.AbstractSolver | None = None
    adjoint: diffrax.AbstractAdjoint | None = None
    stepsize_controller: diffrax.AbstractStepSizeController | None = None
    rtol: float = 1e-8
    atol: float = 1e-10
    dt0: float | None = None
    dtmax: float | str | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    baumgarte: tuple[ArrayLike, ArrayLike] | None = None
    t0: float | None = None
    kkt_solver: AbstractKKTSolver | None = None
    step_projection: bool = True
    project: bool = False
    projection_iterations: int = 3
    output_chunk: int = 1
    throw: bool = True
    check_derivatives: bool = False

    @classmethod
    def of(
        cls, options: SimulationOptions | None, overrides: dict[str, Any], where: str
    ) -> SimulationOptions:
        """``options`` (default: all defaults) with the fields named in ``overrides`` replaced;
        a name that is not a field is an error that lists the fields."""
        if options is None:
            options = cls()
        elif not isinstance(options, cls):
            raise TypeError(
                f"{where}: options must be a SimulationOptions, got {type(options).__name__}"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [key for key in overrides if key not in names]
        if unknown:
            raise TypeError(
                f"{where}: unknown option {unknown[0]!r}; the options are {', '.join(names)}"
            )
        return dataclasses.replace(options, **overrides) if overrides else options
