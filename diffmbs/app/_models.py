"""The model registry of job files: ``[model] name`` → a function building the model.

A job file's ``[model] name`` is found, in this order,

1. among :data:`MODELS`: the lumped shock-machine models (their ``from_machine`` options, in lb
   and ft as the machine's drawings give them), the 3-D machine ``"mwsm3d"``
   (:func:`diffmbs.models.mwsm3d.mwsm3d`) and ``"multibody"``, a model described in a
   TOML file (:func:`diffmbs.multibody.model_from_toml`; ``description = "model.toml"``,
   relative to the job file, and ``coordinates = "full"`` or ``"joint"``);
2. among the installed packages' entry points of the group ``"diffmbs.models"`` (a package
   registers its models in its ``pyproject.toml``:
   ``[project.entry-points."diffmbs.models"] my_rig = "my_package.models:build_rig"``);
3. as an import path ``"package.module:function"``.

The function takes the model options of the job file (every key of ``[model]`` but ``name`` and
``parameters``) as keyword arguments and returns a :class:`~diffmbs.system.MechanicalSystem`.
Then ``[model.parameters]`` sets any of its parameters by name, through the system's parameter
contract (:meth:`~diffmbs.system.MechanicalSystem.with_parameter`), e.g.
``"impact.stiffness" = 2e9`` for a multibody model's contact element named ``impact``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import numpy as np

from diffmbs.models import LumpedContactModel, TwoDofBedModel, WelchSaundersModel
from diffmbs.models.mwsm3d import mwsm3d
from diffmbs.multibody import in_joint_coordinates, model_from_toml
from diffmbs.parameters import ParameterError
from diffmbs.system import MechanicalSystem

from ._tables import ConfigError, check_keys, is_number, table_of

__all__ = ["ENTRY_POINT_GROUP", "MODELS", "ModelSource", "build_model", "find_model"]

ENTRY_POINT_GROUP = "diffmbs.models"


@dataclass(frozen=True)
class ModelSource:
    """A model constructor of job files: ``factory(**options)``; the options named in
    ``file_options`` are file paths, taken relative to the job file's folder."""

    factory: Callable[..., MechanicalSystem]
    file_options: frozenset[str] = frozenset()

    def accepted_options(self) -> set[str] | None:
        """The keyword options of the factory (``None``: it takes ``**kwargs``)."""
        parameters = inspect.signature(self.factory).parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
            return None
        return {p.name for p in parameters}


def multibody_from_file(description: str, coordinates: str = "full") -> MechanicalSystem:
    """A multibody model from its TOML description (:func:`~diffmbs.multibody.model_from_toml`),
    in full (body) coordinates or, with ``coordinates="joint"``, in joint coordinates
    (:func:`~diffmbs.multibody.in_joint_coordinates`: the fewest states, no constraints on a
    tree)."""
    model = model_from_toml(description)
    if coordinates == "joint":
        return in_joint_coordinates(model)
    if coordinates != "full":
        raise ValueError(f"coordinates: {coordinates!r} is neither 'full' nor 'joint'")
    return model


MODELS: dict[str, ModelSource] = {
    "lumped_contact": ModelSource(LumpedContactModel.from_machine),
    "two_dof_bed": ModelSource(TwoDofBedModel.from_machine),
    "welch_saunders": ModelSource(WelchSaundersModel.from_machine),
    "mwsm3d": ModelSource(mwsm3d),
    "multibody": ModelSource(multibody_from_file, frozenset({"description"})),
}
"""Models known to every job file by name (see the module docstring for the other two ways)."""


def find_model(name: Any, where: str) -> ModelSource:
    """The :class:`ModelSource` of ``name`` (registry, entry point, then import path)."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{where}.name: missing; one of {', '.join(MODELS)}")
    if name in MODELS:
        return MODELS[name]
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return ModelSource(entry.load())
    if ":" not in name:
        raise ConfigError(
            f"{where}.name: unknown model {name!r}; one of {', '.join(MODELS)}, a model "
            f"registered under the entry-point group {ENTRY_POINT_GROUP!r}, or an import path "
            "'package.module:function'"
        )
    module_name, _, attribute = name.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"{where}.name: cannot import {name!r}: {err}") from None
    if not callable(factory):
        raise ConfigError(f"{where}.name: {name!r} is not a function")
    return ModelSource(factory)


def _option(value: Any, key: str, where: str):
    if isinstance(value, str | bool) or is_number(value):
        return value
    if isinstance(value, float):
        raise ConfigError(f"{where}.{key}: must be a finite number, got {value!r}")
    if isinstance(value, list) and all(is_number(x) for x in np.ravel(value)):
        return np.asarray(value, dtype=float)
    raise ConfigError(f"{where}.{key}: expected a number, string, boolean or numbers: {value!r}")


def build_model(
    name: Any,
    options: Mapping[str, Any],
    parameters: Mapping[str, Any],
    where: str,
    base_dir: Path,
    option_tables: Mapping[str, str] | None = None,
) -> MechanicalSystem:
    """The model ``name`` built from ``options`` (see the module docstring), its parameters set
    from ``parameters`` (name → SI value); every error names the key at fault under ``where``,
    or under ``option_tables[key]`` (the table an option came from) where given."""
    source = find_model(name, where)
    accepted = source.accepted_options()
    if accepted is not None:
        check_keys(options, accepted, where)
    tables = {key: (option_tables or {}).get(key, where) for key in options}
    kwargs = {key: _option(value, key, tables[key]) for key, value in options.items()}
    for key in source.file_options & set(kwargs):
        path = (base_dir / str(kwargs[key])).resolve()
        if not path.is_file():
            raise ConfigError(f"{where}.{key}: file not found: {path}")
        kwargs[key] = str(path)
    try:
        model = source.factory(**kwargs)
    except (ValueError, TypeError) as err:
        # "<option>: …" from the factory names the key: report it under its table.
        key, sep, rest = str(err).partition(": ")
        if sep and key in options:
            raise ConfigError(f"{tables[key]}.{key}: {rest}") from None
        raise ConfigError(f"{where}: {err}") from err
    if not isinstance(model, MechanicalSystem):
        raise ConfigError(
            f"{where}.name: {name!r} built a {type(model).__name__}, not a MechanicalSystem"
        )
    for path, value in table_of(parameters, f"{where}.parameters").items():
        if not is_number(value):
            raise ConfigError(f"{where}.parameters.{path}: expected a number, got {value!r}")
        try:
            model = model.with_parameter(path, float(value))
        except ParameterError as err:
            raise ConfigError(f"{where}.parameters: {err}") from None
    return model
