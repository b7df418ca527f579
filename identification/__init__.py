"""identification: fitting diffmbs models to measurements (SRS or time histories).

Generic over any model pytree (an ``equinox.Module``):

* :class:`ParameterSpace` of :class:`Parameter` — named paths into the model, bounds,
  transforms (log / bounded / linear), shared or per-test;
* experiments — :class:`SRSExperiment`, :class:`TimeHistoryExperiment`,
  :class:`FunctionExperiment`, :class:`WearProfileExperiment` — one record each, with its own
  test model;
* :class:`Problem` — residuals, loss and Jacobian as pure functions of the unconstrained ``z``;
* fitters — :class:`LevenbergMarquardt`, :class:`GaussNewton`, :class:`Adam`, :class:`LBFGS` —
  run by :func:`fit` (progress, checkpoints, resume) after an optional :func:`multistart`;
* :func:`fit_in_stages` — time histories of impacts fitted through :class:`Stage` s of
  widening band and window (a spike train's misfit is one bowl only when low-passed), ending
  on the whole record;
* :func:`global_fit` — a batched global search (:class:`CMAES`) over the box, then the local
  fitter from the best distinct candidates: what finds the basin of an SRS misfit;
* :class:`FitResult` — parameters, misfits in dB, Gauss–Newton covariance, correlations,
  identifiability; ``save`` writes JSON and figures;
* :func:`profile_likelihood` — confidence intervals by profiling, one-sided where only a limit
  exists; :func:`plausible_ranges` — what those intervals contain at least, from the points a
  global search already evaluated; :func:`sample_posterior` — NUTS samples of the posterior
  (numpyro), with :func:`plot_corner`; the fit's own σ are widened when its residuals show
  model discrepancy;
* :func:`srs_sensitivity`, :func:`band_sensitivity`, :func:`save_identifiability`,
  :func:`sweep` — scaled sensitivities (per frequency band: where each parameter acts) and
  batched forward runs;

Job files and the command line are :mod:`diffmbs.app`'s, a layer above this one.
"""

from identification._covariance import gauss_newton_covariance
from identification._experiments import (
    DB_FLOOR,
    AbstractExperiment,
    SRSExperiment,
    misfit_report,
)
from identification._fit import fit
from identification._fitters import LBFGS, AbstractFitter, Adam, GaussNewton, LevenbergMarquardt
from identification._function_experiment import FunctionExperiment
from identification._global import (
    CMAES,
    AbstractGlobalSearch,
    GlobalSearchResult,
    global_fit,
    global_search,
)
from identification._parameters import TRANSFORMS, Parameter, ParameterSpace
from identification._posterior import Posterior, plot_corner, sample_posterior
from identification._problem import Problem
from identification._profile import Profile, plausible_ranges, profile_likelihood
from identification._results import FitResult, load_result
from identification._sampling import (
    Starts,
    batched_loss,
    halton,
    latin_hypercube,
    multistart,
    sample_values,
)
from identification._sensitivity import (
    band_sensitivity,
    save_identifiability,
    save_sensitivity,
    srs_sensitivity,
)
from identification._stages import Stage, fit_in_stages, in_stage
from identification._sweep import grid_values, lhs_values, sweep
from identification._time_history import TimeHistoryExperiment
from identification._wear_profile import WearProfileExperiment

__all__ = [
    "band_sensitivity",
    "CMAES",
    "AbstractGlobalSearch",
    "GlobalSearchResult",
    "global_fit",
    "global_search",
    "DB_FLOOR",
    "LBFGS",
    "TRANSFORMS",
    "AbstractExperiment",
    "AbstractFitter",
    "Adam",
    "FitResult",
    "FunctionExperiment",
    "GaussNewton",
    "LevenbergMarquardt",
    "Parameter",
    "ParameterSpace",
    "Problem",
    "Posterior",
    "Profile",
    "SRSExperiment",
    "Starts",
    "TimeHistoryExperiment",
    "WearProfileExperiment",
    "batched_loss",
    "fit",
    "fit_in_stages",
    "in_stage",
    "Stage",
    "gauss_newton_covariance",
    "grid_values",
    "halton",
    "latin_hypercube",
    "lhs_values",
    "load_result",
    "misfit_report",
    "multistart",
    "plot_corner",
    "plausible_ranges",
    "profile_likelihood",
    "sample_posterior",
    "sample_values",
    "save_identifiability",
    "save_sensitivity",
    "srs_sensitivity",
    "sweep",
]
