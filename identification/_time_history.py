"""Time-history experiments: a measured record compared sample by sample, through the
recorder it went through, in a band and a window (see :mod:`identification._stages`)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs.recorder import Butterworth, Recorder
from identification._experiments import (
    AbstractExperiment,
    _check_sensor,
    _default_simulate_kwargs,
    _simulated_sensor,
    _vector,
    _weights,
)

__all__ = ["TimeHistoryExperiment"]


class TimeHistoryExperiment(AbstractExperiment):
    """A measured time history at one sensor, compared sample by sample.

    - ``model``, ``sensor``, ``simulate_kwargs``: as :class:`SRSExperiment` (``ts`` need not be
      uniform).
    - ``ts`` ``(n_t,)`` s and ``measured`` ``(n_t,)`` (SI): the record.
    - ``weights`` ``(n_t,)``: non-negative (default 1).
    - ``scale``: divides the residuals, in the unit of the record; default the RMS of
      ``measured`` (1 if that is 0), so the residuals are dimensionless.
    - ``recorder``: a :class:`~diffmbs.recorder.Recorder` — the record went through the
      recorder's anti-alias filter (uniform ``ts``): the sensor is simulated at its fine times
      and filtered the same way (with ``differentiate``, a velocity sensor for an acceleration
      record: exact through impacts shorter than a sample, where sampling a simulated
      acceleration aliases them). ``None``: the sensor's values at ``ts``.
    - ``band_hz``: compare the slow content only — record and prediction both through the same
      2-pole Butterworth low-pass at ``band_hz`` (on the record's samples, linear between
      them); the default ``scale`` is then the RMS of the filtered record. A record of impacts
      is a train of spikes whose times move with the parameters: compared sample by sample, the
      misfit has a basin as wide as one spike (±1.5 % of the clearance on the slider-crank);
      low-passed, the spikes overlap and the basin spans the range. :func:`fit_in_stages`
      fits through a sequence of bands to the full record. ``None``: the whole record.

    ``residuals = w · (F sim − F meas) / scale``, F the band's filter (identity without one),
    shape ``(n_t,)``.
    """

    name: str = eqx.field(static=True)
    model: Any
    sensor: str = eqx.field(static=True)
    ts: Array
    measured: Array
    weights: Array
    scale: float = eqx.field(static=True)
    simulate_kwargs: dict[str, Any]
    recorder: Recorder | None
    fine_ts: Array | None  # the recorder's sampling of the sensor, s
    fine_dt: float | None = eqx.field(static=True)
    band_hz: float | None = eqx.field(static=True)
    given_scale: float | None = eqx.field(static=True)
    _record_dt: float = eqx.field(static=True)
    _measured_in_band: Array  # the record through the band's filter, once

    def __init__(
        self,
        name: str,
        model: Any,
        sensor: str,
        ts: ArrayLike,
        measured: ArrayLike,
        weights: ArrayLike | None = None,
        scale: float | None = None,
        simulate_kwargs: dict[str, Any] | None = None,
        recorder: Recorder | None = None,
        band_hz: float | None = None,
    ):
        self.name = name
        ts_np = _vector(ts, "ts", name)
        if np.any(np.diff(ts_np) <= 0):
            raise ValueError(f"experiment {name!r}: ts must be increasing")
        meas = _vector(measured, "measured", name, ts_np.size)
        _check_sensor(model, sensor, float(ts_np[0]), name)
        self.band_hz = None if band_hz is None else float(band_hz)
        self.given_scale = scale
        self._record_dt = float(ts_np[1] - ts_np[0]) if ts_np.size > 1 else 0.0
        if band_hz is not None:
            try:
                self._band().fine_times(ts_np)
            except ValueError as err:
                raise ValueError(f"experiment {name!r}: band_hz: {err}") from None
        self._measured_in_band = jnp.asarray(self._in_band(jnp.asarray(meas)))
        if scale is None:
            rms = float(np.sqrt(np.mean(np.asarray(self._measured_in_band) ** 2)))
            scale = rms if rms > 0 else 1.0
        if not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"experiment {name!r}: scale must be positive, got {scale}")
        self.model = model
        self.sensor = sensor
        self.ts = jnp.asarray(ts_np)
        self.measured = jnp.asarray(meas)
        self.weights = _weights(weights, ts_np.size, name)
        self.scale = float(scale)
        self.simulate_kwargs = _default_simulate_kwargs(simulate_kwargs)
        self.recorder, self.fine_ts, self.fine_dt = recorder, None, None
        if recorder is not None:
            try:
                fine_ts = recorder.fine_times(ts_np)
            except ValueError as err:
                raise ValueError(f"experiment {name!r}: {err}") from None
            self.fine_ts, self.fine_dt = jnp.asarray(fine_ts), float(fine_ts[1] - fine_ts[0])

    def _band(self) -> Recorder | None:
        return None if self.band_hz is None else Recorder(Butterworth(self.band_hz, 2), 1)

    def _in_band(self, signal: Array) -> Array:
        band = self._band()
        return signal if band is None else band.record(signal, self._record_dt)

    def in_stage(self, band_hz: float | None, until_s: float | None = None):
        """This experiment compared in the band up to ``band_hz`` (``None``: the whole band)
        and up to the time ``until_s`` (s; later samples weigh 0, the arrays keep their
        shapes so compiled programs are shared), its scale recomputed unless one was given."""
        weights = self.weights
        if until_s is not None:
            weights = jnp.where(self.ts <= until_s, weights, 0.0)
        return TimeHistoryExperiment(
            self.name, self.model, self.sensor, self.ts, self.measured, weights,
            self.given_scale, self.simulate_kwargs, self.recorder, band_hz,
        )  # fmt: skip

    @property
    def abscissa(self) -> np.ndarray:
        return np.asarray(self.ts)

    @property
    def in_db(self) -> bool:
        return False

    def predict(self, model: Any) -> Array:
        if self.recorder is None:
            out, ok = _simulated_sensor(model, self.ts, self.sensor, self.simulate_kwargs)
        else:
            fine, ok = _simulated_sensor(model, self.fine_ts, self.sensor, self.simulate_kwargs)
            out = self.recorder.record(fine, self.fine_dt)
        return jnp.where(ok, out, jnp.nan)

    def residuals_from_prediction(self, prediction: Array) -> Array:
        difference = self._in_band(prediction) - self._measured_in_band
        return self.weights * difference / self.scale
