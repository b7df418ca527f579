"""The ``[fit]`` table of a job file: global stage, local fitter, uncertainty extras.

::

    [fit]
    global = "cma_es"                # | "none"; "auto" (default): cma_es when every bound is finite
    population = 64                  # global search: candidates per generation (one batch)
    generations = 30
    refine = 3                       # local fits from the best distinct candidates
    refine_initial = true            # and one from the initial values
    method = "levenberg_marquardt"   # the local fitter: | gauss_newton | adam | lbfgs
    max_iterations = 25              # per local fit
    jacobian = "exact"               # | "differences": central differences over
    difference_step = 0.01           #   ±difference_step in z (a misfit rough on a finer scale)
    multistart = 16                  # without a global stage: LHS samples scored in one vmap
    stages = [{ band_hz = 30.0, until_s = 0.025 }, { band_hz = 100.0 }]
                                     # time histories: fit low-passed (and cut) first, stage by
                                     # stage, then whole (identification.fit_in_stages); SRS
                                     # with their record: until_s = the SRS of the first part;
                                     # the global stage runs in the first stage
    seed = 0
    checkpoint_every = 2
    profiles = ["k_stop"]            # profile-likelihood intervals (true: every parameter)
    posterior = "nuts"               # | "none": NUTS samples of the posterior, corner plot
    posterior_samples = 500
    posterior_warmup = 300
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from identification import (
    CMAES,
    LBFGS,
    Adam,
    GaussNewton,
    LevenbergMarquardt,
    ParameterSpace,
    Stage,
)

from ._tables import ConfigError, check_keys, read_bool, read_integer, read_number, table_of

__all__ = ["FIT_METHODS", "GLOBAL_METHODS", "FitSettings"]

FIT_METHODS = {
    "levenberg_marquardt": LevenbergMarquardt,
    "gauss_newton": GaussNewton,
    "adam": Adam,
    "lbfgs": LBFGS,
}
"""``[fit] method`` → the fitter class (:mod:`identification`)."""

GLOBAL_METHODS = ("auto", "cma_es", "none")
JACOBIAN_METHODS = {"exact": "fwd", "differences": "differences"}
"""``[fit] jacobian`` → :class:`identification.Problem`'s ``jac``."""
POSTERIOR_METHODS = ("none", "nuts")


def _choice(table: Mapping[str, Any], key: str, where: str, default: str, options) -> str:
    value = table.get(key, default)
    if value not in options:
        raise ConfigError(f"{where}.{key}: {value!r} is not one of {', '.join(options)}")
    return value


def _difference_step(table: Mapping[str, Any], where: str) -> float:
    step = read_number(table, "difference_step", where, FitSettings.difference_step, False)
    if not 0.0 < step < 1.0:
        raise ConfigError(f"{where}.difference_step: must be in (0, 1) (a step in the fitted "
                          f"coordinate z: 0.01 is 1 % of a log-scaled parameter), got {step!r}")
    return step


def _profiles(table: Mapping[str, Any], where: str) -> tuple[str, ...] | bool:
    value = table.get("profiles", False)
    if isinstance(value, bool):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise ConfigError(
        f"{where}.profiles: expected true, false or a list of parameter names, got {value!r}"
    )


def _stages(table: Mapping[str, Any], where: str) -> tuple[Stage, ...]:
    """``stages = [{ band_hz = 30.0, until_s = 0.025, free = ["clearance"] }, ...]``, each key
    optional (the names in ``free`` are checked against the parameters by the fit)."""
    value = table.get("stages", [])
    if not isinstance(value, list):
        raise ConfigError(f"{where}.stages: expected a list of {{ band_hz, until_s }} tables")
    stages = []
    for i, spec in enumerate(value):
        at = f"{where}.stages[{i}]"
        spec = table_of(spec, at)
        check_keys(spec, {"band_hz", "until_s", "free"}, at)
        free = spec.get("free")
        if free is not None and not (
            isinstance(free, list) and free and all(isinstance(n, str) and n for n in free)
        ):
            raise ConfigError(f"{at}.free: expected a list of parameter names, got {free!r}")
        stages.append(Stage(*(read_number(spec, key, at) if key in spec else None
                              for key in ("band_hz", "until_s")),
                            None if free is None else tuple(free)))  # fmt: skip
    return tuple(stages)


@dataclass(frozen=True)
class FitSettings:
    """The ``[fit]`` table (see the module docstring): the global stage (``"auto"`` = CMA-ES
    when every parameter has finite bounds), the local fitter (``max_iterations`` per local
    fit), multi-start without a global stage, seed, checkpoint cadence, the stages of a
    time-history fit, and the uncertainty extras of the report (profiles, posterior)."""

    method: str = "levenberg_marquardt"
    max_iterations: int = 25
    multistart: int = 0
    seed: int = 0
    checkpoint_every: int = 2
    global_search: str = "auto"
    population: int = 64
    generations: int = 30
    refine: int = 3
    refine_initial: bool = True
    profiles: tuple[str, ...] | bool = False
    posterior: str = "none"
    posterior_samples: int = 500
    posterior_warmup: int = 300
    stages: tuple[Stage, ...] = ()
    jacobian: str = "exact"
    difference_step: float = 0.01

    @classmethod
    def from_table(cls, table: Mapping[str, Any], where: str = "fit"):
        keys = {"method", "max_iterations", "multistart", "seed", "checkpoint_every", "global",
                "population", "generations", "refine", "refine_initial", "profiles", "posterior",
                "posterior_samples", "posterior_warmup", "stages", "jacobian",
                "difference_step"}  # fmt: skip
        check_keys(table, keys, where)
        integer = lambda key, low: read_integer(table, key, where, getattr(cls, key), low)  # noqa: E731
        return cls(
            method=_choice(table, "method", where, cls.method, tuple(FIT_METHODS)),
            max_iterations=integer("max_iterations", 1),
            multistart=integer("multistart", 0),
            seed=integer("seed", 0),
            checkpoint_every=integer("checkpoint_every", 1),
            global_search=_choice(table, "global", where, cls.global_search, GLOBAL_METHODS),
            population=integer("population", 2),
            generations=integer("generations", 1),
            refine=integer("refine", 1),
            refine_initial=read_bool(table, "refine_initial", where, cls.refine_initial),
            profiles=_profiles(table, where),
            posterior=_choice(table, "posterior", where, cls.posterior, POSTERIOR_METHODS),
            posterior_samples=integer("posterior_samples", 1),
            posterior_warmup=integer("posterior_warmup", 1),
            stages=_stages(table, where),
            jacobian=_choice(table, "jacobian", where, cls.jacobian, tuple(JACOBIAN_METHODS)),
            difference_step=_difference_step(table, where),
        )

    @property
    def problem_jacobian(self) -> dict[str, Any]:
        """The keyword arguments of :class:`identification.Problem` for :attr:`jacobian`."""
        return {"jac": JACOBIAN_METHODS[self.jacobian], "difference_step": self.difference_step}

    def fitter(self):
        return FIT_METHODS[self.method]()

    def search(self, space: ParameterSpace) -> CMAES | None:
        """The global strategy for ``space``, or None: ``"auto"`` searches when every bound
        is finite."""
        bounded = all(math.isfinite(p.lower) and math.isfinite(p.upper) for p in space.parameters)
        if self.global_search == "none" or (self.global_search == "auto" and not bounded):
            return None
        if not bounded:
            names = [p.name for p in space.parameters if not math.isfinite(p.upper - p.lower)]
            raise ConfigError(
                f"fit.global: a global search needs finite bounds; parameters {names} have none"
            )
        return CMAES(population_size=self.population, generations=self.generations)

    def profiled(self, space: ParameterSpace) -> tuple[str, ...]:
        """The names to profile; raises naming ``fit.profiles`` for an unknown one."""
        if self.profiles is True:
            return space.names
        if not self.profiles:
            return ()
        for name in self.profiles:
            if name not in space.names:
                raise ConfigError(
                    f"fit.profiles: {name!r} is not a fitted parameter; have "
                    f"{', '.join(space.names)}"
                )
        return tuple(self.profiles)
