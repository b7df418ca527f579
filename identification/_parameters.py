"""Named parameters, their transforms, and where they live in a model pytree.

A :class:`Parameter` names one physical quantity of a model (a stiffness, a damping ratio, a drop
velocity), says where it lives in the model pytree (an attribute path such as
``"channel.stiffness"`` or ``"springs[2].rate"``), its bounds, its initial value and how it is
mapped to an *unconstrained* coordinate ``z`` in which the fitters work:

* ``"log"``: ``z = log θ``; keeps ``θ > 0`` and makes steps relative (needs ``lower > 0``). The
  natural choice for stiffnesses, masses, damping coefficients.
* ``"bounded"``: ``θ = lower + (upper − lower) · sigmoid(z)``; keeps ``lower < θ < upper``
  (finite bounds needed).
* ``"log_bounded"``: ``ln θ = ln lower + (ln upper − ln lower) · sigmoid(z)``; relative steps
  *and* ``lower < θ < upper`` (finite positive bounds): the choice for stiffnesses and damping
  coefficients whose bounds span decades, and the default of job files.
* ``"linear"``: ``z = θ``; for quantities of either sign (offsets, clearances about zero).

For ``"log"`` and ``"linear"`` the bounds are *not* enforced during a fit (the map is onto the
whole allowed half-line or line): they validate the initial value, set the sampling box of
multi-start and sweeps, and a final value outside them is flagged in the fit report. Use
``"bounded"`` or ``"log_bounded"`` when a bound must hold.

A :class:`ParameterSpace` is an ordered set of parameters. Its vectors have shape ``(p,)`` with
``p = len(space)``: ``values`` in SI units, ``z`` unconstrained.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs.parameters import ParameterError, get_parameter, parse_path, set_parameter

__all__ = ["TRANSFORMS", "Parameter", "ParameterSpace"]

Transform = Literal["log", "bounded", "log_bounded", "linear"]
TRANSFORMS: tuple[str, ...] = Transform.__args__


class Parameter(eqx.Module):
    """One fitted quantity.

    - ``name``: unique label (reports, checkpoints, CLI configs).
    - ``path``: attribute path into the model pytree, e.g. ``"channel.stiffness"``,
      ``"springs[0].rate"`` or ``"params['k']"``; an index after an array leaf sets that
      element (``"stiffness[2]"``). The value is broadcast to the leaf's shape, so one parameter
      may set a whole array. A sequence of paths sets every one of them to the one value (the
      damping of four channels, the stiffness of the lower and the upper stops).
    - ``lower``, ``upper``: bounds in SI units (``upper`` may be ``inf`` for ``"log"`` and
      ``"linear"``, ``lower`` ``-inf`` for ``"linear"``; multi-start needs finite ones).
    - ``initial``: starting value, SI, within the bounds (strictly for ``"bounded"``).
    - ``transform``: ``"log"`` (default, needs ``lower > 0``), ``"log_bounded"`` (``ln θ``
      between finite bounds; the job files' default), ``"bounded"`` or ``"linear"``.
    - ``experiments``: ``None`` = shared by every experiment (a machine parameter), or a tuple
      of experiment names it applies to (a per-test parameter such as a drop height).
    - ``units``: label for reports, e.g. ``"N/m"``.
    """

    name: str = eqx.field(static=True)
    path: str | tuple[str, ...] = eqx.field(static=True)
    lower: float = eqx.field(static=True)
    upper: float = eqx.field(static=True)
    initial: float = eqx.field(static=True)
    transform: str = eqx.field(static=True, default="log")
    experiments: tuple[str, ...] | None = eqx.field(static=True, default=None)
    units: str = eqx.field(static=True, default="")

    def __init__(
        self,
        name: str,
        path: str | Sequence[str],
        lower: float,
        upper: float,
        initial: float,
        transform: Transform = "log",
        experiments: Sequence[str] | str | None = None,
        units: str = "",
    ):
        if not isinstance(name, str) or not name:
            raise ValueError(f"parameter name must be a non-empty string, got {name!r}")
        self.name = name
        paths = (path,) if isinstance(path, str) else tuple(path)
        if not paths or len(set(paths)) != len(paths):
            raise ValueError(f"parameter {name!r}: expected one path or distinct paths, got "
                             f"{path!r}")  # fmt: skip
        for one in paths:
            try:
                parse_path(one)
            except (ValueError, TypeError) as err:
                raise ValueError(f"parameter {name!r}: {err}") from None
        self.path = paths[0] if len(paths) == 1 else paths
        try:
            self.lower, self.upper, self.initial = float(lower), float(upper), float(initial)
        except (TypeError, ValueError):
            raise ValueError(
                f"parameter {name!r}: lower, upper and initial must be numbers, got "
                f"{lower!r}, {upper!r}, {initial!r}"
            ) from None
        if transform not in TRANSFORMS:
            raise ValueError(
                f"parameter {name!r}: transform must be one of {', '.join(TRANSFORMS)}, "
                f"got {transform!r}"
            )
        self.transform = transform
        if isinstance(experiments, str):
            experiments = (experiments,)
        self.experiments = None if experiments is None else tuple(experiments)
        if self.experiments is not None and not self.experiments:
            raise ValueError(
                f"parameter {name!r}: experiments must be None (shared) or a non-empty tuple "
                "of experiment names"
            )
        self.units = units
        self._check()

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the value sets."""
        return (self.path,) if isinstance(self.path, str) else self.path

    def _check(self) -> None:
        lo, hi, x0, name = self.lower, self.upper, self.initial, self.name
        if math.isnan(lo) or math.isnan(hi) or not math.isfinite(x0):
            raise ValueError(f"parameter {name!r}: bounds and initial value must not be NaN")
        if not lo < hi:
            raise ValueError(f"parameter {name!r}: lower = {lo:g} must be < upper = {hi:g}")
        if self.transform == "log" and not lo > 0:
            raise ValueError(
                f"parameter {name!r}: the log transform needs lower > 0, got lower = {lo:g} "
                "(use transform='linear' or 'bounded' for quantities that can be ≤ 0)"
            )
        if self.transform == "log_bounded" and not (lo > 0 and math.isfinite(hi)):
            raise ValueError(
                f"parameter {name!r}: the log_bounded transform needs 0 < lower < upper < inf, "
                f"got [{lo:g}, {hi:g}]"
            )
        if self.transform == "bounded" and not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError(
                f"parameter {name!r}: the bounded transform needs finite bounds, got "
                f"[{lo:g}, {hi:g}]"
            )
        strict = self.transform in ("bounded", "log_bounded")
        inside = lo < x0 < hi if strict else lo <= x0 <= hi
        if not inside:
            which = "strictly " if strict else ""
            raise ValueError(
                f"parameter {name!r}: initial = {x0:g} is not {which}within the bounds "
                f"[{lo:g}, {hi:g}]"
            )

    def applies_to(self, experiment: str) -> bool:
        """Whether this parameter is set in the model of ``experiment``."""
        return self.experiments is None or experiment in self.experiments

    # ---------------------------------------------------------------- scalar transforms (jnp)

    def to_unconstrained(self, value: ArrayLike) -> Array:
        """``θ → z`` (SI value to unconstrained coordinate)."""
        value = jnp.asarray(value, dtype=float)
        if self.transform == "log":
            return jnp.log(value)
        if self.transform == "bounded":
            u = (value - self.lower) / (self.upper - self.lower)
            return jnp.log(u) - jnp.log1p(-u)
        if self.transform == "log_bounded":
            u = (jnp.log(value) - math.log(self.lower)) / self._log_span
            return jnp.log(u) - jnp.log1p(-u)
        return value

    def from_unconstrained(self, z: ArrayLike) -> Array:
        """``z → θ``; differentiable, and for ``"bounded"`` always inside the bounds."""
        z = jnp.asarray(z, dtype=float)
        if self.transform == "log":
            return jnp.exp(z)
        if self.transform == "bounded":
            return self.lower + (self.upper - self.lower) * jax.nn.sigmoid(z)
        if self.transform == "log_bounded":
            return jnp.exp(math.log(self.lower) + self._log_span * jax.nn.sigmoid(z))
        return z

    def dvalue_dz(self, z: ArrayLike) -> Array:
        """``∂θ/∂z`` at ``z``."""
        z = jnp.asarray(z, dtype=float)
        if self.transform == "log":
            return jnp.exp(z)
        if self.transform == "bounded":
            s = jax.nn.sigmoid(z)
            return (self.upper - self.lower) * s * (1.0 - s)
        if self.transform == "log_bounded":
            s = jax.nn.sigmoid(z)
            return self.from_unconstrained(z) * self._log_span * s * (1.0 - s)
        return jnp.ones_like(z)

    def dz_dlog_value(self, value: ArrayLike) -> Array:
        """``∂z/∂ log θ = θ · ∂z/∂θ`` (1 for ``"log"``; ``θ`` for ``"linear"``, i.e. the
        *scaled* sensitivity ``θ ∂/∂θ`` that is also defined for ``θ ≤ 0``)."""
        value = jnp.asarray(value, dtype=float)
        if self.transform == "log":
            return jnp.ones_like(value)
        if self.transform == "bounded":
            return value * (self.upper - self.lower) / ((value - self.lower) * (self.upper - value))
        if self.transform == "log_bounded":
            u = (jnp.log(value) - math.log(self.lower)) / self._log_span
            return 1.0 / (self._log_span * u * (1.0 - u))
        return value

    @property
    def log_scale(self) -> bool:
        """Whether the parameter varies on a log scale (sampling, relative uncertainties)."""
        return self.transform in ("log", "log_bounded")

    @property
    def _log_span(self) -> float:
        return math.log(self.upper) - math.log(self.lower)

    def sampling_box(self) -> tuple[float, float]:
        """Bounds of the coordinate in which multi-start samples uniformly: ``log θ`` for
        ``"log"`` and ``"log_bounded"``, ``θ`` for ``"linear"`` and ``"bounded"``. Raises if a
        bound is infinite."""
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ValueError(
                f"parameter {self.name!r}: sampling needs finite bounds, got "
                f"[{self.lower:g}, {self.upper:g}]"
            )
        if self.log_scale:
            return math.log(self.lower), math.log(self.upper)
        return self.lower, self.upper


class ParameterSpace(eqx.Module):
    """An ordered set of :class:`Parameter`; vectors over it have shape ``(p,)``.

    ``to_unconstrained(values) -> z`` and ``from_unconstrained(z) -> values`` work on arrays of
    shape ``(..., p)`` and are differentiable (``jnp``); ``apply(model, values, experiment)``
    writes the values of the parameters that apply to ``experiment`` into a copy of ``model``.
    """

    parameters: tuple[Parameter, ...] = eqx.field(static=True)

    def __init__(self, parameters: Sequence[Parameter]):
        parameters = tuple(parameters)
        if not parameters:
            raise ValueError("ParameterSpace needs at least one parameter")
        seen: set[str] = set()
        for prm in parameters:
            if not isinstance(prm, Parameter):
                raise TypeError(f"expected Parameter objects, got {type(prm).__name__}")
            if prm.name in seen:
                raise ValueError(f"duplicate parameter name {prm.name!r}")
            seen.add(prm.name)
        for i, a in enumerate(parameters):
            for b in parameters[i + 1 :]:
                common = sorted(set(a.paths) & set(b.paths))
                if common and _overlap(a.experiments, b.experiments):
                    raise ValueError(
                        f"parameters {a.name!r} and {b.name!r} both set path {common[0]!r} in "
                        "the same experiment; give them disjoint experiments"
                    )
        self.parameters = parameters

    # ---------------------------------------------------------------- basic properties

    def __len__(self) -> int:
        return len(self.parameters)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    def initial(self) -> np.ndarray:
        """Initial values, SI, shape ``(p,)``."""
        return np.array([p.initial for p in self.parameters])

    @property
    def initial_z(self) -> Array:
        """Initial unconstrained vector, shape ``(p,)``."""
        return self.to_unconstrained(self.initial)

    @property
    def lower(self) -> np.ndarray:
        return np.array([p.lower for p in self.parameters])

    @property
    def upper(self) -> np.ndarray:
        return np.array([p.upper for p in self.parameters])

    def index(self, name: str) -> int:
        """Position of the parameter ``name`` in the vectors."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(f"no parameter named {name!r}; have {', '.join(self.names)}") from None

    # ---------------------------------------------------------------- transforms

    def to_unconstrained(self, values: ArrayLike) -> Array:
        """``values (..., p)`` SI → ``z (..., p)``."""
        values = jnp.asarray(values, dtype=float)
        self._check_last_axis(values, "values")
        return jnp.stack(
            [p.to_unconstrained(values[..., i]) for i, p in enumerate(self.parameters)], axis=-1
        )

    def from_unconstrained(self, z: ArrayLike) -> Array:
        """``z (..., p)`` → ``values (..., p)`` SI."""
        z = jnp.asarray(z, dtype=float)
        self._check_last_axis(z, "z")
        return jnp.stack(
            [p.from_unconstrained(z[..., i]) for i, p in enumerate(self.parameters)], axis=-1
        )

    def dvalues_dz(self, z: ArrayLike) -> Array:
        """``∂θ_i/∂z_i`` for each parameter, shape ``(..., p)``."""
        z = jnp.asarray(z, dtype=float)
        return jnp.stack([p.dvalue_dz(z[..., i]) for i, p in enumerate(self.parameters)], axis=-1)

    def dz_dlog_values(self, values: ArrayLike) -> Array:
        """``∂z_i/∂ log θ_i`` for each parameter, shape ``(..., p)``; see
        :meth:`Parameter.dz_dlog_value`."""
        values = jnp.asarray(values, dtype=float)
        return jnp.stack(
            [p.dz_dlog_value(values[..., i]) for i, p in enumerate(self.parameters)], axis=-1
        )

    def from_box(self, u: ArrayLike) -> np.ndarray:
        """Unit-box coordinates ``u (..., p)`` in ``[0, 1]`` → values SI: ``u = 0`` is the
        lower bound, ``u = 1`` the upper, linear in each parameter's sampling coordinate
        (:meth:`Parameter.sampling_box`: ``log θ`` or ``θ``). Needs finite bounds."""
        u = np.asarray(u, dtype=np.float64)
        self._check_last_axis(u, "u")
        lo, hi = np.array([p.sampling_box() for p in self.parameters]).T
        s = lo + (hi - lo) * u
        log = np.array([p.log_scale for p in self.parameters])
        return np.where(log, np.exp(np.where(log, s, 0.0)), s)

    def to_box(self, values: ArrayLike) -> np.ndarray:
        """Values SI ``(..., p)`` → unit-box coordinates; the inverse of :meth:`from_box`."""
        values = np.asarray(values, dtype=np.float64)
        self._check_last_axis(values, "values")
        lo, hi = np.array([p.sampling_box() for p in self.parameters]).T
        log = np.array([p.log_scale for p in self.parameters])
        with np.errstate(divide="ignore", invalid="ignore"):
            s = np.where(log, np.log(np.where(log, values, 1.0)), values)
        return (s - lo) / (hi - lo)

    def _check_last_axis(self, x: Array, what: str) -> None:
        if x.ndim == 0 or x.shape[-1] != len(self):
            raise ValueError(
                f"{what} must have shape (..., {len(self)}) for parameters "
                f"{', '.join(self.names)}; got {x.shape}"
            )

    # ---------------------------------------------------------------- models

    def applying_to(self, experiment: str) -> tuple[int, ...]:
        """Indices of the parameters set in the model of ``experiment``."""
        return tuple(i for i, p in enumerate(self.parameters) if p.applies_to(experiment))

    def validate(self, model: Any, experiment: str) -> None:
        """Check that every parameter applying to ``experiment`` resolves to a float leaf (or
        an element of one) of ``model``; raises ValueError naming the parameter otherwise."""
        for i in self.applying_to(experiment):
            prm = self.parameters[i]
            for path in prm.paths:
                try:
                    get_parameter(model, path)
                except ParameterError as err:
                    raise ValueError(
                        f"parameter {prm.name!r}: path {path!r} not found in the model "
                        f"({type(model).__name__}) of experiment {experiment!r}: {err.reason}"
                    ) from None

    def apply(self, model: Any, values: ArrayLike, experiment: str) -> Any:
        """A copy of ``model`` with the parameters that apply to ``experiment`` set to
        ``values`` (shape ``(p,)``, SI). Differentiable in ``values`` (``eqx.tree_at``)."""
        values = jnp.asarray(values, dtype=float)
        for i in self.applying_to(experiment):
            for path in self.parameters[i].paths:
                model = set_parameter(model, path, values[i])
        return model


def _overlap(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> bool:
    return a is None or b is None or bool(set(a) & set(b))
