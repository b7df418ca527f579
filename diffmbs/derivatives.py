"""A derivative self-check for models: :func:`check_derivatives`.

Why: JAX differentiates ``lax.max``/``lax.min`` and the ``max``/``min`` reductions by giving the
tangent to the operand that tests bit-equal to the result. Under ``jit`` XLA may recompute the
operands in several fusions that differ in the last bit (FMA contraction on CPUs), so in the fusion
that evaluates the tangent neither operand equals the result and the derivative is silently
dropped — at a few per cent of the states, by up to the whole derivative. ``jnp.maximum``,
``jnp.minimum``, ``jnp.clip``, ``jnp.hypot`` and ``jnp.max``/``jnp.min`` all lower to them (a
user's Andrews squeezer whose spring length was ``jnp.hypot(dx, dy)`` got dq/dk 5–22 % off through
``simulate``). Write ``diffmbs.selection.<fn>`` or ``jnp.where(a > b, a, b)`` instead.

:func:`check_derivatives` checks a :class:`~diffmbs.system.MechanicalSystem` two ways:

* statically (deterministic on every CPU): the jaxprs of ``mass``, ``forces``, ``constraints``,
  ``qdot`` (and ``mass_and_forces`` when overridden) are searched for those primitives on a
  differentiated path (:mod:`diffmbs._tangent_hazards`), reported with file and line;
* numerically, at random states near the one given: each function's compiled (``jit`` of a
  ``vmap`` over the states) forward- and reverse-mode derivatives with respect to ``q``, ``v`` and
  every float parameter, against each other at every state, against the same derivatives
  evaluated op by op (``jax.disable_jit``) on a few states, and against fourth-order central
  differences on a few more (:mod:`diffmbs._derivative_numerics`).

For a :class:`~diffmbs.multibody.MultibodyModel` every force element is also checked on its own
(its wrench, with respect to ``q``, ``v`` and its own parameters), so the report names it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, ArrayLike

from diffmbs import _derivative_names as names
from diffmbs._derivative_numerics import Comparison, Settings, Target, compare_target
from diffmbs._tangent_hazards import TangentHazard, find_tangent_hazards
from diffmbs.system import MechanicalSystem

__all__ = [
    "Comparison",
    "DerivativeCheckError",
    "DerivativeReport",
    "TangentHazard",
    "check_derivatives",
]

FUNCTIONS = ("mass", "forces", "constraints", "qdot", "mass_and_forces")
"""The functions of a :class:`~diffmbs.system.MechanicalSystem` that can be checked. By default:
all but ``mass_and_forces``, or, where the system overrides ``mass_and_forces`` (which the
equations of motion call), that one instead of ``mass`` and ``forces``."""

FIX = (
    "never use jnp.hypot, jnp.maximum, jnp.minimum, jnp.clip, jnp.max or jnp.min in a model; "
    "use diffmbs.selection.<fn> (hypot, maximum, minimum, clip, max, min) or jnp.where on a "
    "comparison, e.g. jnp.where(a > b, a, b)"
)


@dataclasses.dataclass(frozen=True)
class DerivativeReport:
    """What :func:`check_derivatives` found.

    ``comparisons``: one :class:`Comparison` per function (or force element) and kind of
    comparison, its worst disagreement; ``hazards``: the static findings
    (:class:`TangentHazard`, with file and line); ``samples``: states compared; ``t``: the time.
    """

    system: str
    comparisons: tuple[Comparison, ...]
    hazards: tuple[TangentHazard, ...]
    samples: int
    t: float

    @property
    def failures(self) -> tuple[Comparison, ...]:
        return tuple(c for c in self.comparisons if not c.passed)

    @property
    def passed(self) -> bool:
        return not self.failures and not self.hazards

    def message(self) -> str:
        """The error message: every static finding and failed comparison, then the fix."""
        bad = sorted({h.function for h in self.hazards} | {c.function for c in self.failures})
        lines = [f"diffmbs.check_derivatives: wrong derivatives of {self.system} in "
                 f"{', '.join(bad)} (t = {self.t:g}):"]  # fmt: skip
        lines += [
            f"  {h}. JAX picks its tangent by a bit-equality test that XLA's fusions break "
            "under jit (the derivative is silently dropped at some states)"
            for h in self.hazards
        ]
        lines += [f"  {_describe(c)}" for c in self.failures]
        fused = [c for c in self.failures if "finite differences" not in c.kind]
        if fused:
            lines.append(
                "  the compiled derivative differs from the op-by-op one or from the other mode: "
                "XLA's fusions changed it, the signature of the max/min tangent hazard"
            )
        elif self.failures:
            lines.append(
                "  compiled, op-by-op and reverse-mode derivatives agree but finite differences "
                "do not: a custom_jvp/custom_vjp rule, or a non-differentiable step on the path "
                "(stop_gradient, rounding), gives a wrong derivative there"
            )
        if self.hazards or fused:
            lines.append(f"Fix: {FIX}.")
        return "\n".join(lines)

    def __str__(self) -> str:
        head = f"derivative check of {self.system} at t = {self.t:g} ({self.samples} states)"
        rows = [
            head,
            f"  {'function':<22} {'comparison':<42} {'rel. error':>10} {'tol.':>7}  worst",
        ]
        for c in self.comparisons:
            mark = "" if c.passed else "  FAILED"
            rows.append(
                f"  {c.function:<22} {c.kind:<42} {c.relative_error:>10.2e} {c.tolerance:>7.0e}  "
                f"d {c.output} / d {c.input} (state {c.sample}){mark}"
            )
        rows += [f"  static: {h}" for h in self.hazards] or [
            "  static: no max/min-type tangent rule on a differentiated path"
        ]
        return "\n".join(rows)


class DerivativeCheckError(ValueError):
    """Raised by :func:`check_derivatives`; ``report`` is the :class:`DerivativeReport`."""

    def __init__(self, report: DerivativeReport):
        super().__init__(report.message())
        self.report = report


def _describe(c: Comparison) -> str:
    state = f"q = {np.array2string(np.asarray(c.q), precision=4)}"
    if c.v:
        state += f", v = {np.array2string(np.asarray(c.v), precision=4)}"
    return (
        f"{c.function}: {c.kind}: d {c.output} / d {c.input} disagrees, relative error "
        f"{c.relative_error:.3g} > {c.tolerance:g} (compiled {c.compiled:.6g}, reference "
        f"{c.reference:.6g}) at state {c.sample} ({state})"
    )


# --------------------------------------------------------------------------- targets


def _system_targets(system, q: Array, v: Array, t: Array, parameters: bool, functions):
    """The system's ``functions`` (names; None: all) as :class:`Target`s over its float
    leaves."""
    leaves, static = eqx.partition(system, eqx.is_inexact_array)
    if not parameters:
        leaves = jax.tree.map(lambda _: None, leaves)
        static = system
    flat, unravel = ravel_pytree(leaves)
    flat = flat if flat.size else jnp.zeros(0, q.dtype)
    pnames = names.parameter_names(system, leaves)
    n_q = q.shape[0]

    def model(p):
        return eqx.combine(unravel(p), static) if parameters else system

    def split(x):
        return x[:n_q], x[n_q:]

    table = {
        "mass": (False, lambda x, p, t: model(p).mass(x).reshape(-1)),
        "forces": (True, lambda x, p, t: model(p).forces(t, *split(x))),
        "constraints": (False, lambda x, p, t: model(p).constraints(t, x)),
        "qdot": (True, lambda x, p, t: model(p).qdot(*split(x))),
    }
    if type(system).mass_and_forces is not MechanicalSystem.mass_and_forces:
        # what the equations of motion call; mass and forces alone are then usually its parts
        if functions is None:
            functions = ("mass_and_forces", "constraints", "qdot")
        table["mass_and_forces"] = (
            True,
            lambda x, p, t: jnp.concatenate(
                [a.reshape(-1) for a in model(p).mass_and_forces(t, *split(x))]
            ),
        )  # fmt: skip
    unknown = set(functions or ()) - set(FUNCTIONS)
    if unknown:
        raise ValueError(f"check_derivatives: unknown functions {sorted(unknown)} ({FUNCTIONS})")
    out = []
    for name, (uses_v, fn) in table.items():
        if functions is not None and name not in functions:
            continue
        x = jnp.concatenate([q, v]) if uses_v else q
        n_out = jax.eval_shape(fn, x, flat, t).shape[0]
        if n_out == 0:
            continue
        inputs = names.state_names(system, n_q, x.shape[0] - n_q) + pnames
        outputs = names.output_names(system, name, n_out)
        out.append(Target(name, fn, uses_v, inputs, outputs, flat, name == "constraints"))
    return out


def _element_targets(model, q: Array, v: Array, t: Array) -> list[Target]:
    """One :class:`Target` per force element of a ``MultibodyModel``: its wrench rows (force,
    point, torque on each attached body, world axes) from the model's kinematics."""
    n_q = q.shape[0]
    out = []
    for group in model.force_groups:
        arrays, static = eqx.partition(group.elements, eqx.is_inexact_array)
        for k, name in enumerate(group.names):
            member = jax.tree.map(lambda a, k=k: a[k], arrays)
            flat, unravel = ravel_pytree(member)
            flat = flat if flat.size else jnp.zeros(0, q.dtype)

            def fn(x, p, t, group=group, arrays=arrays, static=static, unravel=unravel, k=k):
                rows = jax.tree.map(lambda a, r, k=k: a.at[k].set(r), arrays, unravel(p))
                moved = eqx.tree_at(lambda g: g.elements, group, eqx.combine(rows, static))
                wrench = moved.map("wrench", t, model.kinematics(x[:n_q], x[n_q:]))
                return jnp.concatenate(
                    [getattr(wrench, f)[k].reshape(-1) for f in ("force", "point", "torque")]
                )

            inputs = names.state_names(model, n_q, v.shape[0])
            inputs += names.element_parameter_names(name, member)
            bodies = [names.row_name(model, b) for b in group.body_index[k]]
            outputs = tuple(
                f"{field}['{body}'].{axis}"
                for field in ("force", "point", "torque")
                for body in bodies
                for axis in "xyz"
            )
            out.append(Target(f"element '{name}'", fn, True, inputs, outputs, flat))
    return out


# --------------------------------------------------------------------------- the check


def _samples(system, q, v, count: int, scale: float, seed: int):
    """``count`` states: the given one, then perturbations of relative size ``scale`` (per
    component: ``scale · max(|x_i|, rms(x))``, 1 where both are 0), quaternions kept unit
    through the system's ``normalize(q)`` when it has one. Also the typical magnitudes."""
    rng = np.random.default_rng(seed)

    def typical(x):
        x = np.abs(np.asarray(x))
        rms = np.sqrt(np.mean(x * x)) if x.size else 0.0
        size = np.maximum(x, rms)
        return np.where(size > 0, size, 1.0)

    tq, tv = typical(q), typical(v)
    qs = np.asarray(q) + scale * tq * rng.standard_normal((count, q.shape[0]))
    vs = np.asarray(v) + scale * tv * rng.standard_normal((count, v.shape[0]))
    qs[0], vs[0] = np.asarray(q), np.asarray(v)
    qs = jnp.asarray(qs)
    normalize = getattr(system, "normalize", None)
    if callable(normalize):
        qs = qs.at[1:].set(jax.jit(jax.vmap(normalize))(qs[1:]))
    return qs, jnp.asarray(vs), tq, tv


def _deduplicate(hazards: list[TangentHazard]) -> tuple[TangentHazard, ...]:
    """A function's finding that an element's finding explains (same line) is dropped: the
    element is the more precise name."""
    by_element = {h.location for h in hazards if h.function.startswith("element ")}
    return tuple(
        h for h in hazards if h.function.startswith("element ") or h.location not in by_element
    )


def check_derivatives(
    system: MechanicalSystem,
    q: ArrayLike,
    v: ArrayLike,
    t: ArrayLike = 0.0,
    *,
    samples: int = 64,
    scale: float = 0.1,
    seed: int = 0,
    rtol: float = 1e-6,
    fd_rtol: float = 1e-5,
    op_by_op_samples: int = 8,
    fd_samples: int = 16,
    fd_step: float = 1e-3,
    floor: float = 1e-8,
    max_inputs: int = 512,
    functions: Sequence[str] | None = None,
    parameters: bool = True,
    elements: bool = True,
    numeric: bool = True,
    static: bool = True,
    raise_on_failure: bool = True,
) -> DerivativeReport:
    """Check the derivatives JAX computes for ``system`` near the state ``(t, q, v)``.

    See the module docstring for what is compared. ``q`` ``(n_q,)``, ``v`` ``(n_v,)``, ``t`` s.

    Sampling: ``samples`` states, the given one first, the others perturbed component-wise by
    ``scale · max(|x_i|, rms(x)) · N(0, 1)`` (1 in the coordinate's unit where both are 0;
    ``seed`` for the generator); ``t`` is held fixed. The first ``op_by_op_samples`` states are
    also evaluated op by op (slow: ~0.1 s per state and function for a four-bar, plus a few
    seconds of first-call compilation), the first ``fd_samples`` by central differences with
    steps ``fd_step`` times the input's typical magnitude (its absolute value; 1 for a zero
    parameter). Inputs: ``q``, ``v`` where used, and with ``parameters`` every float leaf of the
    model (``eqx.is_inexact_array``), named by the model's parameter paths; above
    ``max_inputs`` inputs (or the ~200 MB memory budget), a random subset is compared.
    ``functions``: which of :data:`FUNCTIONS` to check (default all; ``()`` for the elements
    alone). ``elements``: also each force element of a ``MultibodyModel``.
    ``numeric``/``static``: run those parts.

    Tolerances, relative to the derivative's scale: for an entry ``∂y_o/∂x_i`` the scale is its
    largest magnitude over the compared states, plus ``floor`` times the largest change of
    ``y_o`` under a typical change of any input (per unit of ``x_i``), so entries that are
    round-off everywhere are not judged against themselves. A compiled derivative fails where
    ``|compiled − reference|`` exceeds ``rtol`` times that scale against the op-by-op
    derivative or the other mode (both exact to round-off, so ``1e-6`` leaves a margin of
    about 10⁹ ulps), or ``fd_rtol`` times it plus the difference's own error estimate (its
    distance to the second-order difference, plus 10 ε |y| / step) against finite differences,
    so kinks inside the step and cancellation do not trip it. Reverse mode is compared through
    a random cotangent ``u`` (scaled by the outputs' magnitudes): ``uᵀJ``. A static finding is
    a failure too.

    Returns a :class:`DerivativeReport`; with ``raise_on_failure`` a failed check raises
    :class:`DerivativeCheckError` (a ``ValueError``) naming the function or element, the input
    (``q[3]``, ``v[1]``, ``spring.stiffness``), the source line and the fix.
    """
    q = jnp.asarray(q, dtype=float)
    v = jnp.asarray(v, dtype=float)
    t = jnp.asarray(t, dtype=float)
    if q.ndim != 1 or v.ndim != 1 or t.ndim != 0:
        raise ValueError(
            f"check_derivatives: expected q (n_q,), v (n_v,) and a scalar t, got shapes "
            f"{q.shape}, {v.shape}, {t.shape}"
        )
    if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and np.isfinite(t)):
        raise ValueError("check_derivatives: q, v and t must be finite")
    if samples < 1 or min(op_by_op_samples, fd_samples) < 0 or not (scale >= 0 and fd_step > 0):
        raise ValueError(
            "check_derivatives: expected samples ≥ 1, op_by_op_samples ≥ 0, fd_samples ≥ 0, "
            f"scale ≥ 0 and fd_step > 0, got {samples}, {op_by_op_samples}, {fd_samples}, "
            f"{scale}, {fd_step}"
        )
    targets = _system_targets(system, q, v, t, parameters, functions)
    if elements and names.is_multibody(system):
        targets += _element_targets(system, q, v, t)
    hazards: list[TangentHazard] = []
    if static:
        for target in targets:
            x = jnp.concatenate([q, v]) if target.uses_v else q
            flags = (True, True, target.time_differentiated)
            hazards += find_tangent_hazards(target.name, target.fn, (x, target.params, t), flags)
    comparisons: list[Comparison] = []
    if numeric:
        qs, vs, tq, tv = _samples(system, q, v, samples, scale, seed)
        settings = Settings(op_by_op_samples, fd_samples, fd_step, rtol, fd_rtol, floor,
                            max_inputs, seed)  # fmt: skip
        for target in targets:
            typical = np.concatenate([tq, tv]) if target.uses_v else tq
            comparisons += compare_target(target, qs, vs, t, typical, settings)
    report = DerivativeReport(
        type(system).__name__, tuple(comparisons), _deduplicate(hazards), samples, float(t)
    )
    if raise_on_failure and not report.passed:
        raise DerivativeCheckError(report)
    return report
