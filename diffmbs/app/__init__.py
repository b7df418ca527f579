"""The application layer: TOML job files, the model registry and the ``diffmbs`` command line.

It sits on top of everything else (no module below imports it):

* :func:`load_job` reads a whole job file (:mod:`diffmbs.app._schema` documents the layout)
  into a :class:`Job`; every error is a :class:`ConfigError` naming the key at fault;
* :data:`MODELS` and :func:`find_model`: where a job's ``[model] name`` comes from (the lumped
  shock-machine models, ``"multibody"`` from a description file, entry points of the group
  ``"diffmbs.models"``, or an import path ``"package.module:function"``);
* :func:`problem_from_job`, :func:`run_fit_job`, :func:`run_sweep_job`,
  :func:`run_sensitivity_job`, :func:`run_wear_job`, :func:`simulate_experiment`: what the
  commands do;
* :func:`main`: ``diffmbs srs | simulate | fit | sweep | sensitivity | wear``.
"""

from diffmbs.app._models import ENTRY_POINT_GROUP, MODELS, ModelSource, find_model
from diffmbs.app._problem_job import problem_from_job
from diffmbs.app._runs import run_fit_job, run_sensitivity_job, simulate_experiment
from diffmbs.app._schema import (
    FIT_METHODS,
    ExperimentSpec,
    FitSettings,
    Job,
    SimulationSettings,
    SRSSettings,
    SweepSettings,
    load_job,
)
from diffmbs.app._sweep_job import join_processes, run_sweep_job
from diffmbs.app._tables import ConfigError
from diffmbs.app._wear_job import run_wear_job
from diffmbs.app._wear_settings import WearSettings
from diffmbs.app.cli import main

__all__ = [
    "ENTRY_POINT_GROUP",
    "FIT_METHODS",
    "MODELS",
    "ConfigError",
    "ExperimentSpec",
    "FitSettings",
    "Job",
    "ModelSource",
    "SRSSettings",
    "SimulationSettings",
    "SweepSettings",
    "WearSettings",
    "find_model",
    "load_job",
    "main",
    "problem_from_job",
    "run_fit_job",
    "run_sensitivity_job",
    "join_processes",
    "run_sweep_job",
    "run_wear_job",
    "simulate_experiment",
]
