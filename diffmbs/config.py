"""TOML job files shared by ``diffmbs simulate`` and ``diffmbs fit``.

A job file names a model from :data:`MODELS` with its options, the simulation window and sensor,
the SRS settings, and (for fitting) the experiments and parameters::

    [model]
    name = "lumped_contact"          # a key of MODELS
    equipment_kg = 325.0             # options of the model's from_machine(), in its units

    [simulation]
    duration_s = 0.15
    sample_rate_hz = 10000.0
    sensor = "equipment_acceleration"

    [srs]
    damping = 0.05
    kind = "maximax"
    units = "g"                      # unit of measured SRS files and of reports

    [[experiments]]
    name = "drop_1ft"
    srs = "test_1ft_srs.csv"         # relative to this file: frequency_Hz, value columns
    model = { drop_height_ft = 1.0 } # per-test options, on top of [model]

Every error is a :class:`ConfigError` (a ``ValueError``) whose one-line message starts with the
key at fault, e.g. ``experiments[1].srs: file not found: ...``.
"""

from __future__ import annotations

import inspect
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from diffmbs.io import acceleration_scale
from diffmbs.models import LumpedContactModel, TwoDofBedModel, WelchSaundersModel
from diffmbs.srs import KINDS

__all__ = [
    "MODELS",
    "ConfigError",
    "Job",
    "ExperimentSpec",
    "SRSSettings",
    "SimulationSettings",
    "build_model",
    "check_keys",
    "load_job",
]

MODELS: dict[str, Callable[..., Any]] = {
    "lumped_contact": LumpedContactModel.from_machine,
    "two_dof_bed": TwoDofBedModel.from_machine,
    "welch_saunders": WelchSaundersModel.from_machine,
}
"""Model name in a job file → constructor taking the model options as keyword arguments."""


class ConfigError(ValueError):
    """A job file problem; the message names the key at fault."""


def check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    """Refuse keys of ``table`` that are not in ``allowed``."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: expected a table, got {type(table).__name__}")
    for key in table:
        if key not in allowed:
            raise ConfigError(
                f"{where}.{key}: unknown key; expected one of {', '.join(sorted(allowed))}"
            )


def _number(table: Mapping[str, Any], key: str, where: str, default=None, positive=True) -> float:
    if key not in table:
        if default is None:
            raise ConfigError(f"{where}.{key}: missing")
        return default
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}.{key}: expected a finite number, got {value!r}")
    if positive and value <= 0:
        raise ConfigError(f"{where}.{key}: must be positive, got {value!r}")
    return float(value)


def build_model(name: Any, options: Mapping[str, Any], where: str):
    """Instantiate ``MODELS[name](**options)``, naming the key at fault on any error."""
    if name not in MODELS:
        raise ConfigError(f"{where}.name: unknown model {name!r}; one of {', '.join(MODELS)}")
    factory = MODELS[name]
    accepted = set(inspect.signature(factory).parameters)
    check_keys(options, accepted, where)
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ConfigError(f"{where}.{key}: expected a number, got {value!r}")
    try:
        return factory(**options)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"{where}: {err}") from err


@dataclass(frozen=True)
class SimulationSettings:
    """The simulated window: ``duration_s`` from the initial state, saved at ``sample_rate_hz``."""

    duration_s: float
    sample_rate_hz: float
    sensor: str
    rtol: float = 1e-8
    atol: float = 1e-10
    max_steps: int = 200_000

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "simulation"):
        keys = {"duration_s", "sample_rate_hz", "sensor", "rtol", "atol", "max_steps"}
        check_keys(table, keys, where)
        sensor = table.get("sensor", "equipment_acceleration")
        if not isinstance(sensor, str):
            raise ConfigError(f"{where}.sensor: expected a sensor name, got {sensor!r}")
        return cls(
            duration_s=_number(table, "duration_s", where),
            sample_rate_hz=_number(table, "sample_rate_hz", where),
            sensor=sensor,
            rtol=_number(table, "rtol", where, cls.rtol),
            atol=_number(table, "atol", where, cls.atol),
            max_steps=int(_number(table, "max_steps", where, cls.max_steps)),
        )

    @property
    def dt(self) -> float:
        return 1.0 / self.sample_rate_hz

    def sample_times(self) -> np.ndarray:
        """Saved times, s, shape ``(n,)``: 0, dt, ..., duration."""
        n = int(round(self.duration_s * self.sample_rate_hz))
        return np.arange(n + 1) * self.dt


@dataclass(frozen=True)
class SRSSettings:
    """Damping, kind and reporting unit of the SRS; frequencies come from the data or a band."""

    damping: float = 0.05
    kind: str = "maximax"
    units: str = "g"
    f_min: float = 5.0
    f_max: float = 1000.0
    per_octave: int = 12

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "srs"):
        check_keys(table, {"damping", "kind", "units", "f_min", "f_max", "per_octave"}, where)
        kind = table.get("kind", cls.kind)
        if kind not in KINDS:
            raise ConfigError(f"{where}.kind: {kind!r} is not one of {', '.join(KINDS)}")
        units = table.get("units", cls.units)
        try:
            acceleration_scale(units)
        except ValueError as err:
            raise ConfigError(f"{where}.units: {err}") from err
        damping = _number(table, "damping", where, cls.damping)
        if damping >= 1:
            raise ConfigError(f"{where}.damping: a damping ratio below 1, got {damping}")
        settings = cls(
            damping=damping,
            kind=kind,
            units=units,
            f_min=_number(table, "f_min", where, cls.f_min),
            f_max=_number(table, "f_max", where, cls.f_max),
            per_octave=int(_number(table, "per_octave", where, cls.per_octave)),
        )
        if settings.f_min >= settings.f_max:
            raise ConfigError(f"{where}: f_min ({settings.f_min}) must be below f_max")
        return settings

    @property
    def scale(self) -> float:
        """m/s² per reporting unit."""
        return acceleration_scale(self.units)


@dataclass(frozen=True)
class ExperimentSpec:
    """One test: its name, its model (the shared options plus its own), its measured SRS file."""

    name: str
    model: Any
    model_options: dict[str, Any]
    srs_path: Path | None


@dataclass(frozen=True)
class Job:
    """A parsed job file. ``raw`` keeps the tables other commands read (parameters, fit)."""

    path: Path
    model_name: str
    simulation: SimulationSettings
    srs: SRSSettings
    experiments: tuple[ExperimentSpec, ...]
    raw: dict[str, Any]

    def resolve(self, value: Any, where: str) -> Path:
        """A file named in the job, relative to the job file's folder; it must exist."""
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a file path, got {value!r}")
        path = (self.path.parent / value).resolve()
        if not path.is_file():
            raise ConfigError(f"{where}: file not found: {path}")
        return path


JOB_KEYS = {"model", "simulation", "srs", "experiments", "parameters", "fit"}


def load_job(path) -> Job:
    """Read and check a job file; build one model per experiment (or one, named "run")."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"job file not found: {path}")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: {err}") from err
    check_keys(raw, JOB_KEYS, "job")
    model_table = dict(raw.get("model", {}))
    check_keys(model_table, {"name"} | set(_all_model_options()), "model")
    name = model_table.pop("name", None)
    if name is None:
        raise ConfigError("model.name: missing; one of " + ", ".join(MODELS))
    if "simulation" not in raw:
        raise ConfigError("simulation: missing table (duration_s, sample_rate_hz, sensor)")
    simulation = SimulationSettings.from_table(raw["simulation"])
    srs = SRSSettings.from_table(raw.get("srs", {}))
    job = Job(path.resolve(), name, simulation, srs, (), raw)

    tables = raw.get("experiments", [{"name": "run"}])
    if not isinstance(tables, list) or not tables:
        raise ConfigError("experiments: expected one or more [[experiments]] tables")
    experiments, seen = [], set()
    for i, table in enumerate(tables):
        where = f"experiments[{i}]"
        check_keys(table, {"name", "srs", "model"}, where)
        exp_name = table.get("name")
        if not isinstance(exp_name, str) or not exp_name:
            raise ConfigError(f"{where}.name: missing or not a string")
        if exp_name in seen:
            raise ConfigError(f"{where}.name: duplicate experiment name {exp_name!r}")
        seen.add(exp_name)
        options = {**model_table, **table.get("model", {})}
        model = build_model(name, options, f"{where}.model" if "model" in table else "model")
        srs_path = job.resolve(table["srs"], f"{where}.srs") if "srs" in table else None
        experiments.append(ExperimentSpec(exp_name, model, options, srs_path))
    return Job(path.resolve(), name, simulation, srs, tuple(experiments), raw)


def _all_model_options() -> set[str]:
    return {p for factory in MODELS.values() for p in inspect.signature(factory).parameters}
