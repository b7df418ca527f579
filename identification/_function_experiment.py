"""An experiment whose prediction is any pure function of the model (closed forms, surrogates,
models that are not simulated), compared in dB or linearly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from identification._experiments import (
    AbstractExperiment,
    _db_residuals,
    _positive,
    _vector,
    _weights,
)

__all__ = ["FunctionExperiment"]


class FunctionExperiment(AbstractExperiment):
    """Any prediction ``predict_fn(model) -> (n,)`` compared with ``measured`` ``(n,)``.

    - ``misfit="db"`` (default): ``r = w · 20 log10(pred / meas)`` (``measured`` > 0), as for
      an SRS;
    - ``misfit="linear"``: ``r = w · (pred − meas) / scale`` (``scale`` default 1).

    ``predict_fn`` must be a pure JAX function of the model's leaves (it is jitted, vmapped and
    differentiated); ``x`` ``(n,)`` is the abscissa for plots (default the frequencies
    ``1..n``), ``x_label`` and ``units`` label them.
    """

    name: str = eqx.field(static=True)
    model: Any
    predict_fn: Callable[[Any], Array] = eqx.field(static=True)
    measured: Array
    weights: Array
    misfit: str = eqx.field(static=True)
    scale: float = eqx.field(static=True)
    x: tuple[float, ...] = eqx.field(static=True)
    x_label: str = eqx.field(static=True)
    unit_label: str = eqx.field(static=True)

    def __init__(
        self,
        name: str,
        model: Any,
        predict_fn: Callable[[Any], Array],
        measured: ArrayLike,
        *,
        weights: ArrayLike | None = None,
        misfit: Literal["db", "linear"] = "db",
        scale: float = 1.0,
        x: Sequence[float] | None = None,
        x_label: str = "Natural frequency (Hz)",
        units: str = "m/s²",
    ):
        self.name = name
        meas = _vector(measured, "measured", name)
        if misfit not in ("db", "linear"):
            raise ValueError(f"experiment {name!r}: misfit must be 'db' or 'linear'")
        if misfit == "db":
            _positive(meas, "measured", name)
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"experiment {name!r}: scale must be positive, got {scale}")
        shape = jax.eval_shape(predict_fn, model).shape
        if shape != meas.shape:
            raise ValueError(
                f"experiment {name!r}: predict_fn(model) has shape {shape}, measured has "
                f"{meas.shape}"
            )
        self.model = model
        self.predict_fn = predict_fn
        self.measured = jnp.asarray(meas)
        self.weights = _weights(weights, meas.size, name)
        self.misfit = misfit
        self.scale = float(scale)
        xs = np.arange(1, meas.size + 1.0) if x is None else _vector(x, "x", name, meas.size)
        self.x = tuple(float(v) for v in xs)
        self.x_label = x_label
        self.unit_label = units

    @property
    def abscissa(self) -> np.ndarray:
        return np.asarray(self.x)

    @property
    def abscissa_label(self) -> str:
        return self.x_label

    @property
    def in_db(self) -> bool:
        return self.misfit == "db"

    @property
    def units(self) -> str:
        return self.unit_label

    def predict(self, model: Any) -> Array:
        return jnp.asarray(self.predict_fn(model))

    def residuals_from_prediction(self, prediction: Array) -> Array:
        pred = prediction
        if self.misfit == "db":
            return _db_residuals(pred, self.measured, self.weights)
        return self.weights * (pred - self.measured) / self.scale
