"""The TOML job file of ``diffmbs simulate | fit | sweep | sensitivity``, read whole.

A job file names a model with its options (see :mod:`diffmbs.app._models` for where names are
found), the simulation window and sensor, the SRS settings, the experiments, and for fits,
sweeps and sensitivities the parameters::

    [model]
    name = "lumped_contact"          # or "multibody", an entry point, "package.module:function"
    equipment_kg = 325.0             # options of the model's function, in its units
    parameters = { k_channel = 2.0e7 }   # optional: any model parameter by name, SI

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
    history = "test_1ft_accel.csv"   # the record itself, fitted with the SRS or alone (CSV,
                                     # .tdms, .mf4, .uff/.unv, .mat, .h5: by suffix), t = 0
                                     # the model's start; its samples before 0 (a pretrigger)
                                     # and after duration_s are not fitted
    history_channel = "top_face"     # its channel, where the file has several
    history_weight = 1.0             # its weight relative to the SRS of the test; 0: not
                                     # fitted, only the SRS over a stage's window (until_s)
    history_units = "m/s2"          # a CSV record's unit (default: [srs] units)
    recorder = { cutoff_hz = 2000.0, order = 4, oversample = 10, differentiate = false }
                                     # the record's anti-alias filter (diffmbs.recorder),
                                     # applied to the simulated sensor too
    model = { drop_height_ft = 1.0 } # per-test options (and parameters), on top of [model]
    profile = "bore_profile.csv"     # or a worn surface's profile: angle_deg, radius_um columns
    profile_surface = "bore"         # (the bore's radius minus the journal's nominal one) or
                                     # "journal" (its loss of radius); needs [wear]
    profile_filter_upr = 50.0        # the instrument's roundness filter (ISO 16610-21, UPR)

    [wear]                           # many cycles: diffmbs/app/_wear_settings.py
    element = "C"
    period_s = 0.6
    cycles = 1000000

    [[parameters]]
    name = "k_channel"               # label in reports
    path = "k_channel"               # the model's parameter name; default: name. A list
                                     # sets several to the one value (initial: the first's)
    lower = 1.0e6                    # bounds, SI
    upper = 1.0e8
    initial = 4.0e7                  # optional; default: the value in the first experiment's model
    transform = "log_bounded"        # log_bounded (default) | log | bounded | linear
    per_experiment = false           # true: one parameter per experiment, named "name@experiment"
    units = "N/m"                    # optional; default: the model's units for the parameter

    [fit]                            # every key: diffmbs/app/_fit_settings.py
    global = "cma_es"                # default with finite bounds: CMA-ES, then local fits
    max_iterations = 25              # per local fit
    profiles = true                  # profile-likelihood intervals in the report
    posterior = "nuts"               # NUTS samples of the posterior and a corner plot

    [sweep]
    design = "lhs"                   # | sobol | grid
    samples = 64                     # rows (a power of 2 for sobol), or points per parameter
    seed = 0
    chunk_size = 64                  # rows per compiled batch (memory)

Every error is a :class:`~diffmbs.app.ConfigError` (a ``ValueError``) whose one-line message
starts with the key at fault, e.g. ``experiments[1].srs: file not found: ...``.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diffrax
import numpy as np

from diffmbs.integrate import ForwardSensitivity
from diffmbs.io import acceleration_scale
from diffmbs.parameters import ParameterError
from diffmbs.recorder import Butterworth, Recorder
from diffmbs.srs import KINDS
from diffmbs.system import MechanicalSystem
from identification import TRANSFORMS, Parameter, ParameterSpace

from ._fit_settings import FIT_METHODS, FitSettings
from ._models import MODELS, build_model
from ._tables import (
    ConfigError,
    check_keys,
    is_number,
    read_bool,
    read_integer,
    read_number,
    read_string,
    table_of,
)
from ._wear_settings import WearSettings

__all__ = [
    "FIT_METHODS",
    "ExperimentSpec",
    "FitSettings",
    "Job",
    "SRSSettings",
    "SimulationSettings",
    "SweepSettings",
    "load_job",
]


@dataclass(frozen=True)
class SimulationSettings:
    """The simulated window: ``duration_s`` from the initial state, saved at ``sample_rate_hz``;
    tolerances; ``derivatives``: how fits and gradients take forward-mode derivatives,
    ``"steps"`` (carried along the state's steps, ``diffrax.ForwardMode``; the default) or
    ``"controlled"`` (under error control with the state, :class:`diffmbs.ForwardSensitivity`:
    needed where the steps resolve the motion but not its sensitivity, e.g. a journal riding
    its bore; the default of wear jobs)."""

    duration_s: float
    sample_rate_hz: float
    sensor: str
    rtol: float = 1e-8
    atol: float = 1e-10
    max_steps: int = 200_000
    derivatives: str = "steps"

    def adjoint(self):
        """The :func:`diffmbs.simulate` adjoint of :attr:`derivatives`."""
        if self.derivatives == "controlled":
            return ForwardSensitivity()
        return diffrax.ForwardMode()

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "simulation", window: bool = True):
        """``window=False`` (a wear job): ``duration_s`` and ``sample_rate_hz`` optional (the
        ``[wear]`` cycles set the time), NaN when absent."""
        keys = {"duration_s", "sample_rate_hz", "sensor", "rtol", "atol", "max_steps",
                "derivatives"}  # fmt: skip
        check_keys(table, keys, where)
        optional = None if window else math.nan
        derivatives = read_string(table, "derivatives", where,
                                  cls.derivatives if window else "controlled")  # fmt: skip
        if derivatives not in ("steps", "controlled"):
            raise ConfigError(f"{where}.derivatives: {derivatives!r} is not one of steps, "
                              "controlled")  # fmt: skip
        return cls(
            duration_s=read_number(table, "duration_s", where, optional),
            sample_rate_hz=read_number(table, "sample_rate_hz", where, optional),
            sensor=read_string(table, "sensor", where, "equipment_acceleration"),
            rtol=read_number(table, "rtol", where, cls.rtol),
            atol=read_number(table, "atol", where, cls.atol),
            max_steps=read_integer(table, "max_steps", where, cls.max_steps, minimum=1),
            derivatives=derivatives,
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
        damping = read_number(table, "damping", where, cls.damping)
        if damping >= 1:
            raise ConfigError(f"{where}.damping: a damping ratio below 1, got {damping}")
        settings = cls(
            damping=damping,
            kind=kind,
            units=units,
            f_min=read_number(table, "f_min", where, cls.f_min),
            f_max=read_number(table, "f_max", where, cls.f_max),
            per_octave=read_integer(table, "per_octave", where, cls.per_octave, minimum=1),
        )
        if settings.f_min >= settings.f_max:
            raise ConfigError(f"{where}: f_min ({settings.f_min}) must be below f_max")
        return settings

    @property
    def scale(self) -> float:
        """m/s² per reporting unit."""
        return acceleration_scale(self.units)


@dataclass(frozen=True)
class SweepSettings:
    """The ``[sweep]`` table: ``samples`` parameter sets over the parameters' bounds — a Latin
    hypercube (``"lhs"``), scrambled Sobol' points (``"sobol"``, a power of 2) or a full grid
    of ``samples`` points per parameter (``"grid"``) — run ``chunk_size`` at a time."""

    design: str = "lhs"
    samples: int = 64
    seed: int = 0
    chunk_size: int = 64

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "sweep"):
        check_keys(table, {"design", "samples", "seed", "chunk_size"}, where)
        design = table.get("design", cls.design)
        if design not in ("lhs", "sobol", "grid"):
            raise ConfigError(f"{where}.design: {design!r} is not 'lhs', 'sobol' or 'grid'")
        samples = read_integer(table, "samples", where, cls.samples, 2)
        if design == "sobol" and samples & (samples - 1):
            raise ConfigError(
                f"{where}.samples: Sobol' points keep their balance only in powers of 2; got "
                f"{samples} (use {1 << samples.bit_length()})"
            )
        return cls(
            design=design,
            samples=samples,
            seed=read_integer(table, "seed", where, cls.seed, 0),
            chunk_size=read_integer(table, "chunk_size", where, cls.chunk_size, 1),
        )


@dataclass(frozen=True)
class ExperimentSpec:
    """One test: its name, its model (the shared options plus its own), its measured SRS file
    and/or its measured time history (``history_path``, its channel ``history_channel`` where
    it has several, fitted jointly with the SRS with the relative weight ``history_weight``, 0:
    kept for the SRS over a stage's window alone;
    ``history_units`` of a CSV record, default the ``[srs]`` units; the ``recorder`` it went
    through), or a worn surface's measured profile (``profile_path``, ``profile_surface``, the
    instrument's roundness filter ``profile_filter_upr``)."""

    name: str
    model: MechanicalSystem
    model_options: dict[str, Any]
    srs_path: Path | None
    history_path: Path | None = None
    history_weight: float = 1.0
    history_channel: str | None = None
    history_units: str | None = None
    recorder: Recorder | None = None
    profile_path: Path | None = None
    profile_surface: str = "bore"
    profile_filter_upr: float | None = None


@dataclass(frozen=True)
class Job:
    """A job file, read and checked whole. ``parameters`` is ``None`` without
    ``[[parameters]]`` tables (a simulation job)."""

    path: Path
    model_name: str
    simulation: SimulationSettings
    srs: SRSSettings
    experiments: tuple[ExperimentSpec, ...]
    parameters: ParameterSpace | None
    fit: FitSettings
    sweep: SweepSettings
    wear: WearSettings | None = None

    def require_parameters(self) -> ParameterSpace:
        if self.parameters is None:
            raise ConfigError("parameters: expected one or more [[parameters]] tables")
        return self.parameters


JOB_KEYS = {"model", "simulation", "srs", "experiments", "parameters", "fit", "sweep", "wear"}


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"job file not found: {path}")
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: {err}") from err


def _experiments(raw, model_table, base_dir: Path) -> tuple[ExperimentSpec, ...]:
    """One model per ``[[experiments]]`` table (or one experiment, "run")."""
    name = model_table.get("name")
    shared_options = {k: v for k, v in model_table.items() if k not in ("name", "parameters")}
    shared_parameters = table_of(model_table.get("parameters", {}), "model.parameters")
    tables = raw.get("experiments", [{"name": "run"}])
    if not isinstance(tables, list) or not tables:
        raise ConfigError("experiments: expected one or more [[experiments]] tables")
    experiments, seen = [], set()
    for i, table in enumerate(tables):
        where = f"experiments[{i}]"
        check_keys(table, {"name", "srs", "model", "history", "history_channel",
                           "history_weight", "history_units", "recorder", "profile",
                           "profile_surface", "profile_filter_upr"}, where)  # fmt: skip
        exp_name = read_string(table, "name", where)
        if exp_name in seen:
            raise ConfigError(f"{where}.name: duplicate experiment name {exp_name!r}")
        seen.add(exp_name)
        own = dict(table_of(table.get("model", {}), f"{where}.model"))
        if "name" in own:
            raise ConfigError(f"{where}.model.name: every experiment uses [model] name")
        own_parameters = table_of(own.pop("parameters", {}), f"{where}.model.parameters")
        options = {**shared_options, **own}
        parameters = {**shared_parameters, **own_parameters}
        where_model = f"{where}.model" if own or own_parameters else "model"
        tables = {**dict.fromkeys(shared_options, "model"), **dict.fromkeys(own, f"{where}.model")}
        model = build_model(name, options, parameters, where_model, base_dir, tables)
        srs_path = None
        if "srs" in table:
            srs_path = (base_dir / read_string(table, "srs", where)).resolve()
            if not srs_path.is_file():
                raise ConfigError(f"{where}.srs: file not found: {srs_path}")
        history_path = None
        if "history" in table:
            history_path = (base_dir / read_string(table, "history", where)).resolve()
            if not history_path.is_file():
                raise ConfigError(f"{where}.history: file not found: {history_path}")
        weight = read_number(table, "history_weight", where, 1.0, positive=False)
        if weight < 0:
            raise ConfigError(f"{where}.history_weight: expected ≥ 0, got {weight:g}")
        channel = (read_string(table, "history_channel", where)
                   if "history_channel" in table else None)  # fmt: skip
        units = read_string(table, "history_units", where) if "history_units" in table else None
        if units is not None:
            try:
                acceleration_scale(units)
            except ValueError as err:
                raise ConfigError(f"{where}.history_units: {err}") from None
        recorder = _recorder(table, where) if "recorder" in table else None
        if (units is not None or recorder is not None) and history_path is None:
            raise ConfigError(f"{where}: history_units and recorder describe a 'history' record; "
                              "give one")  # fmt: skip
        profile_path = None
        if "profile" in table:
            if srs_path is not None or history_path is not None:
                raise ConfigError(f"{where}.profile: a wear profile is an experiment of its own; "
                                  "give it without srs and history")  # fmt: skip
            profile_path = (base_dir / read_string(table, "profile", where)).resolve()
            if not profile_path.is_file():
                raise ConfigError(f"{where}.profile: file not found: {profile_path}")
        surface = read_string(table, "profile_surface", where, "bore")
        if surface not in ("bore", "journal"):
            raise ConfigError(f"{where}.profile_surface: 'bore' or 'journal', got {surface!r}")
        upr = (read_number(table, "profile_filter_upr", where)
               if "profile_filter_upr" in table else None)  # fmt: skip
        if (surface != "bore" or upr is not None) and profile_path is None:
            raise ConfigError(f"{where}: profile_surface and profile_filter_upr describe a "
                              "'profile' record; give one")  # fmt: skip
        if parameters:
            options["parameters"] = parameters
        experiments.append(
            ExperimentSpec(exp_name, model, options, srs_path, history_path, weight, channel,
                           units, recorder, profile_path, surface, upr)  # fmt: skip
        )
    return tuple(experiments)


def _recorder(table, where: str) -> Recorder:
    """``recorder = { cutoff_hz, order = 4, oversample = 10, differentiate = false }``."""
    where = f"{where}.recorder"
    spec = table_of(table["recorder"], where)
    check_keys(spec, {"cutoff_hz", "order", "oversample", "differentiate"}, where)
    try:
        return Recorder(
            Butterworth(read_number(spec, "cutoff_hz", where, None),
                        read_integer(spec, "order", where, 4, 1)),
            oversample=read_integer(spec, "oversample", where, 10, 1),
            differentiate=read_bool(spec, "differentiate", where, False),
        )  # fmt: skip
    except ValueError as err:
        raise ConfigError(f"{where}: {err}") from None


_PARAMETER_KEYS = {
    "name", "path", "lower", "upper", "initial", "transform", "per_experiment", "units",
}  # fmt: skip


def _model_value(model: MechanicalSystem, path: str, where: str) -> tuple[float, str]:
    """The scalar value of parameter ``path`` in ``model`` and its units ("" if unknown)."""
    try:
        value = np.asarray(model.parameter(path))
    except ParameterError as err:
        raise ConfigError(f"{where}: {err}") from None
    if value.size != 1:
        raise ConfigError(f"{where}: {path!r} is not a scalar; give 'initial'")
    units = model.parameter_paths().get(path, ((), ""))[1]
    return float(value), units


def _read_paths(table: Any, where: str, name: str) -> tuple[str, ...]:
    """``path``: one model path, or a list of them set to the one value; default ``name``."""
    value = table.get("path", name)
    if isinstance(value, list):
        if not value or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"{where}.path: expected a path or a list of paths, got {value!r}")
        return tuple(value)
    return (read_string(table, "path", where, name),)


def _parameters(tables: Any, experiments: tuple[ExperimentSpec, ...]) -> ParameterSpace | None:
    """The ``[[parameters]]`` tables, checked against the experiments' models."""
    if tables is None:
        return None
    if not isinstance(tables, list) or not tables:
        raise ConfigError("parameters: expected one or more [[parameters]] tables")
    names = [e.name for e in experiments]
    parameters = []
    for i, table in enumerate(tables):
        where = f"parameters[{i}]"
        check_keys(table, _PARAMETER_KEYS, where)
        name = read_string(table, "name", where)
        paths = _read_paths(table, where, name)
        path = paths[0] if len(paths) == 1 else paths
        for key in ("lower", "upper"):
            if key not in table:
                raise ConfigError(f"{where}.{key}: missing (bounds in SI units)")
        lower, upper = table["lower"], table["upper"]
        if not (is_number(lower) and is_number(upper)):
            raise ConfigError(f"{where}: lower and upper must be numbers")
        if not lower < upper:
            raise ConfigError(f"{where}: lower ({lower:g}) must be below upper ({upper:g})")
        transform = table.get("transform", "log_bounded")
        if transform not in TRANSFORMS:
            raise ConfigError(f"{where}.transform: {transform!r} is not one of {TRANSFORMS}")
        per_experiment = read_bool(table, "per_experiment", where, False)
        # A test's own value also applies to its measured record (experiment "<test>:history").
        groups = [(e.name, f"{e.name}:history") if e.history_path and e.srs_path
                  and e.history_weight > 0 else (e.name,)
                  for e in experiments] if per_experiment else [None]  # fmt: skip
        for group in groups:
            label = name if group is None else f"{name}@{group[0]}"
            model = experiments[0 if group is None else names.index(group[0])].model
            value, units = _model_value(model, paths[0], f"{where}.path")
            for other in paths[1:]:
                _model_value(model, other, f"{where}.path")
            initial = table.get("initial", value)
            if not is_number(initial) or not lower <= initial <= upper:
                raise ConfigError(f"{where}.initial: {initial!r} is outside [{lower:g}, {upper:g}]")
            try:
                parameters.append(
                    Parameter(label, path, lower, upper, float(initial), transform,
                              experiments=group, units=table.get("units", units))
                )  # fmt: skip
            except ValueError as err:
                raise ConfigError(f"{where}: {err}") from err
    try:
        return ParameterSpace(parameters)
    except ValueError as err:
        raise ConfigError(f"parameters: {err}") from err


def load_job(path) -> Job:
    """Read and check a whole job file: one model per experiment (or one, named "run"), the
    parameters against those models, and the settings of every command."""
    path = Path(path).resolve()
    raw = _read_toml(path)
    check_keys(raw, JOB_KEYS, "job")
    model_table = table_of(raw.get("model", {}), "model")
    if "name" not in model_table:
        raise ConfigError(f"model.name: missing; one of {', '.join(MODELS)} or an import path")
    model_name = read_string(model_table, "name", "model")
    wear = WearSettings.from_table(table_of(raw["wear"], "wear")) if "wear" in raw else None
    if "simulation" not in raw and wear is None:
        raise ConfigError("simulation: missing table (duration_s, sample_rate_hz, sensor)")
    experiments = _experiments(raw, model_table, path.parent)
    for i, spec in enumerate(experiments):
        if spec.profile_path is not None and wear is None:
            raise ConfigError(f"experiments[{i}].profile: a wear profile needs the [wear] table "
                              "(element, period_s, cycles)")  # fmt: skip
    return Job(
        path=path,
        model_name=model_name,
        simulation=SimulationSettings.from_table(raw.get("simulation", {}), window=wear is None),
        srs=SRSSettings.from_table(raw.get("srs", {})),
        experiments=experiments,
        parameters=_parameters(raw.get("parameters"), experiments),
        fit=FitSettings.from_table(raw.get("fit", {})),
        sweep=SweepSettings.from_table(raw.get("sweep", {})),
        wear=wear,
    )
