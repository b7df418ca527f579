"""Experiments: one measured record with the model of its test setup, and its misfit.

An experiment holds the model of one test (the machine with that test's settings: drop height,
payload, anvil…), what was measured, and how to compare a prediction with it. The fitting
machinery only needs two methods, both pure functions of a model (same pytree structure as
``experiment.model``, with some leaves replaced by the fitted parameters):

* ``predict(model) -> array`` — the simulated counterpart of ``measured`` (an SRS curve, a time
  history), same shape, SI units;
* ``residuals(model) -> array`` — the weighted misfit, dimensionless (dB for spectra), shape
  ``(n_residuals,)``. The fit minimises the mean of their squares over all experiments.
  Experiments implement it as ``residuals_from_prediction(predict(model))``, so that one
  simulation gives both the curve and the misfit.

Concrete experiments:

* :class:`SRSExperiment` — simulate, take one sensor's acceleration, its SRS at given natural
  frequencies, and compare in dB: ``r = w · 20 log10(SRS_sim / SRS_meas)``;
* :class:`TimeHistoryExperiment` (in ``_time_history``) — simulate and compare a sensor
  sample by sample, through a recorder's filter: ``r = w · (sim − meas) / scale``;
* :class:`FunctionExperiment` (in ``_function_experiment``) — any ``predict_fn(model)`` (closed
  forms, surrogates, models that are not simulated), compared in dB or linearly.

Simulation failures do not stop a fit: by default ``simulate`` runs with ``throw=False``, and a
failed run predicts NaN (so its residuals are NaN and a Levenberg–Marquardt trial step there is
rejected). Pass ``simulate_kwargs={"throw": True}`` to raise instead.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike

from diffmbs import selection
from diffmbs.channels import channel, check_channel
from diffmbs.integrate import simulate
from diffmbs.srs import KINDS, shock_response_spectrum

__all__ = [
    "DB_FLOOR",
    "AbstractExperiment",
    "SRSExperiment",
    "misfit_report",
]

DB_FLOOR = 1e-12
"""A predicted spectrum value below ``DB_FLOOR × measured`` counts as that (−240 dB): the log
of zero or of a negative number never makes a NaN or an infinite residual."""


def _db_residuals(sim: Array, meas: Array, weights: Array) -> Array:
    """``w · 20 log10(max(sim, floor·meas) / meas)``; NaN in ``sim`` propagates (failed run)."""
    ratio = selection.maximum(sim, DB_FLOOR * meas) / meas
    return weights * 20.0 * jnp.log10(ratio)


def _vector(x: ArrayLike, what: str, name: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"experiment {name!r}: {what} must be a non-empty 1-D array, got {arr.shape}"
        )
    if n is not None and arr.size != n:
        raise ValueError(f"experiment {name!r}: {what} has {arr.size} values, expected {n}")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"experiment {name!r}: {what}[{i}] = {arr[i]} is not finite")
    return arr


def _weights(weights: ArrayLike | None, n: int, name: str) -> Array:
    if weights is None:
        return jnp.ones(n)
    w = _vector(weights, "weights", name, n)
    if (w < 0).any():
        i = int(np.argmax(w < 0))
        raise ValueError(f"experiment {name!r}: weights[{i}] = {w[i]} is negative")
    return jnp.asarray(w)


def _positive(x: np.ndarray, what: str, name: str) -> None:
    if (x <= 0).any():
        i = int(np.argmax(x <= 0))
        raise ValueError(f"experiment {name!r}: {what}[{i}] = {x[i]} must be > 0 (compared in dB)")


def _uniform_dt(ts: np.ndarray, name: str) -> float:
    if ts.size < 2:
        raise ValueError(f"experiment {name!r}: ts needs at least 2 samples")
    steps = np.diff(ts)
    dt = float((ts[-1] - ts[0]) / (ts.size - 1))
    if not dt > 0 or np.max(np.abs(steps - dt)) > 1e-6 * dt:
        i = int(np.argmax(np.abs(steps - dt)))
        raise ValueError(
            f"experiment {name!r}: ts must be uniformly sampled and increasing; step {i} is "
            f"{steps[i]:.9g} s against the mean {dt:.9g} s"
        )
    return dt


def _initial_state(model: Any, name: str):
    message = (
        f"experiment {name!r}: the model ({type(model).__name__}) must define "
        "initial_state() -> (q0, v0)"
    )
    if not callable(getattr(model, "initial_state", None)):
        raise ValueError(message)
    try:
        return model.initial_state()
    except NotImplementedError:  # MechanicalSystem declares it; this model does not define it
        raise ValueError(message) from None


def _check_sensor(model: Any, sensor: str, t0: float, name: str) -> None:
    q0, v0 = _initial_state(model, name)
    q0, v0 = jnp.asarray(q0, float), jnp.asarray(v0, float)
    shapes = jax.eval_shape(model.sensors, jnp.asarray(t0), q0, v0, v0)
    try:
        check_channel({k: v.shape for k, v in shapes.items()}, sensor)
    except ValueError as err:
        raise ValueError(f"experiment {name!r}: {err}") from None


def _simulated_sensor(model: Any, ts: Array, sensor: str, kwargs: dict) -> Array:
    """History ``(n_t,)`` of the sensor channel ``sensor`` (``"name"`` or ``"name[k]"``, see
    :mod:`diffmbs.channels`) from ``model.initial_state()``; NaN where the run failed."""
    q0, v0 = model.initial_state()
    sol = simulate(model, q0, v0, ts, **kwargs)
    out = channel(sol.sensors, sensor)
    ok = sol.successful & jnp.all(jnp.isfinite(out))
    # Zeros (not inf) downstream of a failure keep the SRS's own finiteness check quiet; the
    # NaN is put back at the end.
    return jnp.where(ok, out, 0.0), ok


def _default_simulate_kwargs(kwargs: dict | None) -> dict:
    merged: dict[str, Any] = {"adjoint": diffrax.ForwardMode(), "throw": False}
    merged.update(kwargs or {})
    return merged


class AbstractExperiment(eqx.Module):
    """One measured record and the model of its test.

    Attributes every experiment has: ``name`` (unique in a problem), ``model`` (the test's
    model, the template into which :class:`~identification.ParameterSpace` writes parameters)
    and ``measured`` (shape ``(n,)``, SI). Plots and reports read ``abscissa`` (frequencies in Hz
    or times in s, shape ``(n,)``), ``abscissa_label``, ``units`` (of ``measured``) and
    ``in_db`` (whether the misfit is a level ratio in dB).
    """

    name: eqx.AbstractVar[str]
    model: eqx.AbstractVar[Any]
    measured: eqx.AbstractVar[Array]

    @abc.abstractmethod
    def predict(self, model: Any) -> Array:
        """Prediction of ``measured`` (same shape, SI) by ``model``."""

    @abc.abstractmethod
    def residuals_from_prediction(self, prediction: Array) -> Array:
        """Weighted, dimensionless misfit of a prediction, shape ``(n_residuals,)``."""

    def residuals(self, model: Any) -> Array:
        """Weighted, dimensionless misfit of ``model``, shape ``(n_residuals,)``."""
        return self.residuals_from_prediction(self.predict(model))

    @property
    @abc.abstractmethod
    def abscissa(self) -> np.ndarray:
        """x values of ``measured`` for plots, shape ``(n,)``."""

    @property
    def abscissa_label(self) -> str:
        return "Natural frequency (Hz)" if self.in_db else "Time (s)"

    @property
    def in_db(self) -> bool:
        return True

    @property
    def units(self) -> str:
        return "m/s²"


class SRSExperiment(AbstractExperiment):
    """A measured shock response spectrum at one sensor.

    **Arguments** (SI):

    - ``name``: unique label.
    - ``model``: the test's :class:`~diffmbs.system.MechanicalSystem`, which must define
      ``initial_state() -> (q0 (n_q,), v0 (n_v,))`` (as a function of its own leaves, so that
      fitted initial conditions propagate) and the sensor channel ``sensor`` (an acceleration:
      a scalar sensor's name, or ``"name[k]"`` for component k of a vector sensor).
    - ``ts`` ``(n_t,)`` s: uniformly spaced sample times of the simulated record; ``dt`` is
      their spacing.
    - ``freqs`` ``(n_freq,)`` Hz: natural frequencies of the SRS (below Nyquist).
    - ``measured_srs`` ``(n_freq,)``: the measured SRS, > 0, in the unit of the sensor (m/s²).
    - ``damping``, ``kind``, ``smooth``: see :func:`diffmbs.srs.shock_response_spectrum`
      (``smooth`` = a log-sum-exp temperature for smoother gradients, ``None`` = exact max).
    - ``weights`` ``(n_freq,)``: non-negative weights of the dB residuals (default 1).
    - ``simulate_kwargs``: passed to :func:`diffmbs.simulate`; defaults
      ``{"adjoint": diffrax.ForwardMode(), "throw": False}``, which suits the forward-mode
      Jacobians that Levenberg–Marquardt uses (``Problem(jac="fwd")``, the default). For
      reverse mode (``Problem(jac="bwd")``) pass ``{"adjoint":
      diffmbs.adjoint.DiscreteAdjoint()}``.
    - ``record``: optional ``(times (n_r,) s, values (n_r,))``, the measured record the SRS
      came from, in the sensor's unit, its times uniform and ``t = 0`` at the model's start
      (earlier samples, a pretrigger, may come first). It is not fitted; it lets
      :meth:`windowed` compare the first part of the test alone.

    ``residuals = w · 20 log10(SRS_sim / SRS_meas)`` in dB, shape ``(n_freq,)``.
    """

    name: str = eqx.field(static=True)
    model: Any
    sensor: str = eqx.field(static=True)
    ts: Array
    freqs: tuple[float, ...] = eqx.field(static=True)
    measured: Array
    weights: Array
    damping: float = eqx.field(static=True)
    kind: str = eqx.field(static=True)
    smooth: float | None = eqx.field(static=True)
    simulate_kwargs: dict[str, Any]
    dt: float = eqx.field(static=True)
    record_ts: Array | None
    record: Array | None

    def __init__(
        self,
        name: str,
        model: Any,
        sensor: str,
        ts: ArrayLike,
        freqs: ArrayLike,
        measured_srs: ArrayLike,
        damping: float = 0.05,
        kind: str = "maximax",
        weights: ArrayLike | None = None,
        smooth: float | None = None,
        simulate_kwargs: dict[str, Any] | None = None,
        record: tuple[ArrayLike, ArrayLike] | None = None,
    ):
        self.name = name
        ts_np = _vector(ts, "ts", name)
        self.dt = _uniform_dt(ts_np, name)
        freqs_np = _vector(freqs, "freqs", name)
        _positive(freqs_np, "freqs", name)
        nyquist = 0.5 / self.dt
        if freqs_np.max() >= nyquist:
            raise ValueError(
                f"experiment {name!r}: frequency {freqs_np.max():g} Hz is at or above the "
                f"Nyquist frequency {nyquist:g} Hz of ts"
            )
        meas = _vector(measured_srs, "measured_srs", name, freqs_np.size)
        _positive(meas, "measured_srs", name)
        if kind not in KINDS:
            raise ValueError(f"experiment {name!r}: kind must be one of {', '.join(KINDS)}")
        if not 0 <= damping < 1:
            raise ValueError(f"experiment {name!r}: damping ratio {damping} not in [0, 1)")
        _check_sensor(model, sensor, float(ts_np[0]), name)
        self.model = model
        self.sensor = sensor
        self.ts = jnp.asarray(ts_np)
        self.freqs = tuple(float(f) for f in freqs_np)
        self.measured = jnp.asarray(meas)
        self.weights = _weights(weights, freqs_np.size, name)
        self.damping = float(damping)
        self.kind = kind
        self.smooth = smooth
        self.simulate_kwargs = _default_simulate_kwargs(simulate_kwargs)
        self.record_ts, self.record = None, None
        if record is not None:
            times = _vector(record[0], "record times", name)
            values = _vector(record[1], "record", name, times.size)
            if 0.5 / _uniform_dt(times, name) <= freqs_np.max():
                raise ValueError(f"experiment {name!r}: frequency {freqs_np.max():g} Hz is at "
                                 "or above the Nyquist frequency of the record")  # fmt: skip
            self.record_ts, self.record = jnp.asarray(times), jnp.asarray(values)

    def windowed(self, until_s: float) -> SRSExperiment:
        """This test up to the time ``until_s`` (s) alone: the simulation ends there, and its
        SRS is compared with the SRS of the measured :attr:`record` up to the same time.

        A maximax SRS grows with the record only at the natural frequencies whose largest
        response comes late — for a shock, the lowest. The window's misfit keeps the rest of
        the spectrum at a fraction of a simulation's cost, and it leaves out the late record,
        whose sensitivity to the parameters can grow without bound where impacts repeat
        (data/mwsm3d/README.md): a global search ranks its candidates on it (``Stage.until_s``,
        :func:`~identification.fit_in_stages`). Needs the record.
        """
        if self.record is None:
            raise ValueError(f"experiment {self.name!r}: a window (until_s = {until_s:g} s) "
                             "compares the SRS of the measured record's first part; give the "
                             "record the SRS came from (a job's 'history')")  # fmt: skip
        ts, times = np.asarray(self.ts), np.asarray(self.record_ts)
        kept, recorded = ts <= until_s * (1 + 1e-9), times <= until_s * (1 + 1e-9)
        if np.count_nonzero(kept) < 2 or np.count_nonzero(times[recorded] >= ts[0]) < 2:
            raise ValueError(f"experiment {self.name!r}: the window up to {until_s:g} s holds "
                             "fewer than two samples")  # fmt: skip
        freqs = np.asarray(self.freqs)
        measured = shock_response_spectrum(self.record[recorded], float(times[1] - times[0]),
                                           freqs, damping=self.damping, kind=self.kind)  # fmt: skip
        return SRSExperiment(self.name, self.model, self.sensor, ts[kept], freqs, measured,
                             self.damping, self.kind, self.weights, self.smooth,
                             self.simulate_kwargs, (self.record_ts, self.record))  # fmt: skip

    @property
    def abscissa(self) -> np.ndarray:
        return np.asarray(self.freqs)

    def time_history(self, model: Any) -> Array:
        """The simulated sensor record, shape ``(n_t,)`` (NaN if the simulation failed)."""
        out, ok = _simulated_sensor(model, self.ts, self.sensor, self.simulate_kwargs)
        return jnp.where(ok, out, jnp.nan)

    def predict(self, model: Any) -> Array:
        """Simulated SRS, shape ``(n_freq,)`` (NaN if the simulation failed)."""
        accel, ok = _simulated_sensor(model, self.ts, self.sensor, self.simulate_kwargs)
        srs = shock_response_spectrum(
            accel,
            self.dt,
            np.asarray(self.freqs),
            damping=self.damping,
            kind=self.kind,
            smooth=self.smooth,
        )
        return jnp.where(ok, srs, jnp.nan)

    def residuals_from_prediction(self, prediction: Array) -> Array:
        return _db_residuals(prediction, self.measured, self.weights)


def misfit_report(
    simulated: ArrayLike, measured: ArrayLike, bands_db: Sequence[float] = (3.0, 6.0)
) -> dict[str, Any]:
    """Level errors of a spectrum in dB and how much of it lies inside tolerance bands.

    Args:
        simulated: the simulated spectrum, shape ``(n,)``.
        measured: the measured spectrum, shape ``(n,)`` (> 0).
        bands_db: half-widths of the tolerance bands, dB.

    Returns:
        ``{"db_error": [n floats], "rms_db", "max_abs_db", "mean_db", "within_3db",
        "within_6db", …}``: ``db_error = 20 log10(sim/meas)`` (with the :data:`DB_FLOOR` guard;
        NaN where ``simulated`` is NaN), its RMS, largest magnitude and mean (bias), and for each
        band the fraction of points with ``|db_error| ≤ band`` (NaN counts as outside).
    """
    sim = np.asarray(simulated, dtype=np.float64)
    meas = np.asarray(measured, dtype=np.float64)
    if sim.shape != meas.shape:
        raise ValueError(f"simulated {sim.shape} and measured {meas.shape} differ in shape")
    if np.any(meas <= 0):
        raise ValueError("measured spectrum values must be > 0 for a dB misfit")
    err = 20.0 * np.log10(np.maximum(sim, DB_FLOOR * meas) / meas)
    report: dict[str, Any] = {
        "db_error": [float(e) for e in err],
        "rms_db": float(np.sqrt(np.mean(err**2))),
        "max_abs_db": float(np.max(np.abs(err))),
        "mean_db": float(np.mean(err)),
    }
    finite = np.isfinite(err)
    for band in bands_db:
        inside = finite & (np.abs(np.where(finite, err, 0.0)) <= band)
        report[f"within_{band:g}db"] = float(np.mean(inside))
    return report
