"""Per-step projection onto the constraint manifold (layer 4).

The index-1 equations of motion keep ``Φ̈ = 0`` but not ``Φ = 0`` or ``Φ̇ = 0``: the integration
error drifts off the constraints. Near a singular position (a parallelogram passing its flat
position, where ``Φ_v`` loses rank and the acceleration constraints stop holding a motion
mode) the drift jumps, and Baumgarte terms then do work on the spurious motion: energy is lost
at every pass and the mechanism can switch branch. Here, as in the ALI3-P schemes of the
multibody literature, every accepted step ends by projecting the state back, mass-orthogonally,
with :func:`diffmbs.system.project_state` (two Newton iterations for the positions: the drift
after one step is the local error). The projection is a pure function of the state and the
model's parameters, so reverse mode differentiates through it
(:class:`~diffmbs.adjoint.DiscreteAdjoint` pulls back through it after each step's stages).

:class:`ProjectedSolver` wraps a diffrax solver: it takes the wrapped solver's step, then
projects the new state (its error estimate is the wrapped solver's). The stored first-same-as-
last stage of Tsit5 and Dopri5 would belong to the unprojected state, so every step evaluates
its first stage afresh (one right-hand side more per step).
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx

__all__ = ["ProjectedSolver"]


class ProjectedSolver(diffrax.AbstractWrappedSolver):
    """A diffrax solver whose every step ends with ``projection(t1, y1, args)`` (see the module
    docstring). ``isinstance`` checks see the wrapped solver (diffrax's wrapped-solver rule), and
    ``tableau`` is the wrapped Runge–Kutta method's, so :class:`~diffmbs.adjoint.DiscreteAdjoint`
    replays the steps and the projections."""

    solver: diffrax.AbstractSolver
    projection: Callable = eqx.field(static=True)

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        return self.solver.interpolation_cls

    @property
    def tableau(self):
        return self.solver.tableau

    # Read (and replaced with eqx.tree_at, which follows these to the wrapped solver's fields)
    # by diffrax for Runge–Kutta and implicit solvers.
    @property
    def scan_kind(self):
        return self.solver.scan_kind

    @property
    def root_finder(self):
        return self.solver.root_finder

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        # made_jump: the stored first-same-as-last stage is of the unprojected state.
        y1, y_error, dense, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, True
        )
        y1 = self.projection(t1, y1, args)
        if "y1" in dense:
            dense = dict(dense, y1=y1)
        return y1, y_error, dense, solver_state, result
