"""Profile-likelihood intervals: honest where the linearised covariance is not.

The Gauss–Newton standard deviations of :class:`~identification.FitResult` assume the misfit
is quadratic in ``z`` over the interval. For the strongly nonlinear parameters of contact
models (a stiffness the spectrum only sees from below, a damping near a bound) it is not. The
profile of parameter ``j`` is the misfit minimised over all the other parameters with ``θ_j``
held at each value of a grid; with Gaussian residuals of variance ``s²`` (the fit's residual
variance),

    ΔSSR(θ_j) / s² = n (L(θ_j) − L_min) / s²  ≤  χ²₁(level)

bounds the ``level`` confidence interval (Venzon & Moolgavkar 1988). Where the profile stays
below the threshold up to a bound of the parameter, only a one-sided limit exists: that end is
reported as ``None``. For a model linear in its parameters the profile is exactly quadratic and
the interval equals ``θ̂ ± z_level σ`` of the covariance; the crossing is interpolated by a
quadratic through the three grid points around it, exact in that case.

Each grid value is one fit of the remaining parameters (warm-started from its neighbour), with
the same compiled programs for every value (the held value is a leaf of the models).

When the fit detected model discrepancy (``result.discrepancy``), ``s²`` is multiplied by its
variance inflation, as the covariance is (see :mod:`identification._discrepancy`).
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist

import jax.numpy as jnp
import numpy as np

from identification._fit import fit
from identification._fitters import LevenbergMarquardt
from identification._problem import Problem, holding
from identification._results import FitResult

__all__ = ["Profile", "plausible_ranges", "profile_likelihood"]


def _chi2_one_dof(level: float) -> float:
    """χ²₁ quantile: the square of the two-sided normal quantile."""
    return NormalDist().inv_cdf(0.5 + level / 2) ** 2


@dataclasses.dataclass
class Profile:
    """The profile of one parameter: ``values`` ``(m,)`` SI (sorted), ``statistic`` ``(m,)``
    (``ΔSSR / s²``), the threshold ``χ²₁(level)``, and the interval ends ``lower``/``upper``
    (SI; ``None`` where the profile does not reach the threshold inside the bounds: a one-sided
    interval)."""

    name: str
    values: np.ndarray
    statistic: np.ndarray
    threshold: float
    level: float
    estimate: float
    lower: float | None
    upper: float | None

    def to_dict(self) -> dict:
        """JSON-ready: the interval, level and the profile's grid."""
        return {"estimate": self.estimate, "lower": self.lower, "upper": self.upper,
                "level": self.level, "values": self.values.tolist(),
                "statistic": self.statistic.tolist(), "threshold": self.threshold}  # fmt: skip


def _with_held(problem: Problem, j: int, value: float) -> Problem:
    """The problem over every parameter but ``j``, with parameter ``j`` held at ``value``."""
    return holding(problem, [j], [value])


def _crossing(x: np.ndarray, y: np.ndarray, threshold: float, k: int, outward: int) -> float:
    """Where ``y`` crosses ``threshold`` between ``x[k]`` (below) and ``x[k + outward]``
    (above): a quadratic through the bracket and the point inward of it."""
    idx = sorted({k - outward, k, k + outward} & set(range(len(x))))
    coeffs = np.polyfit(x[idx], y[idx] - threshold, min(2, len(idx) - 1))
    lo, hi = sorted((x[k], x[k + outward]))
    roots = [r.real for r in np.roots(coeffs) if abs(r.imag) < 1e-12 and lo <= r.real <= hi]
    if roots:
        return float(roots[0])
    t = (threshold - y[k]) / (y[k + outward] - y[k])  # fall back to linear
    return float(x[k] + t * (x[k + outward] - x[k]))


def _refine(statistic, x, y, z, threshold, k, outward, tol=1e-3, iterations=12) -> float:
    """The crossing in the bracket ``x[k]`` (below) … ``x[k + outward]`` (above), first by the
    quadratic of :func:`_crossing`, then by regula falsi (Illinois) on new profile points until
    the statistic is within ``tol × threshold`` of it."""
    below, above = (x[k], y[k], z[k]), (x[k + outward], y[k + outward], z[k + outward])
    guess = _crossing(x, y, threshold, k, outward)
    side = 0

    def halved(point):  # Illinois: the end kept twice weighs half as much
        return point[0], (point[1] - threshold) / 2 + threshold, point[2]

    for _ in range(iterations):
        value, z_new = statistic(guess, below[2])
        if abs(value - threshold) <= tol * threshold:
            return guess
        if value < threshold:
            below = (guess, value, z_new)
            above = halved(above) if side < 0 else above
            side = -1
        else:
            above = (guess, value, z_new)
            below = halved(below) if side > 0 else below
            side = 1
        t = (threshold - below[1]) / (above[1] - below[1])
        guess = below[0] + t * (above[0] - below[0])
    return guess


def profile_likelihood(
    problem: Problem,
    result: FitResult,
    name: str,
    *,
    level: float = 0.95,
    n_points: int = 9,
    span: float = 3.0,
    fitter=None,
    max_iterations: int = 40,
) -> Profile:
    """Profile of parameter ``name`` about the fit ``result`` of ``problem``.

    The grid has ``n_points`` values on each side of the estimate, evenly spaced in the
    parameter's sampling coordinate (``ln θ`` or ``θ``) out to ``span`` times the distance at
    which the linearised profile reaches the threshold (or to the bound, whichever comes first;
    the whole way to the bounds where the covariance gives no finite σ). Each grid value is a
    fit of the other parameters by ``fitter`` (default Levenberg–Marquardt), warm-started from
    the neighbouring value.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    space = problem.space
    j = space.index(name)
    prm = space.parameters[j]
    fitter = LevenbergMarquardt() if fitter is None else fitter
    threshold = _chi2_one_dof(level)
    n = problem.n_residuals
    s2 = result.s2 * result.discrepancy.get("inflation", 1.0)  # widened under discrepancy
    s2 = s2 if s2 > 0 else float(np.finfo(float).tiny)
    loss_min = result.loss
    estimate = result.parameters[name]

    log = prm.log_scale
    to_x = (lambda v: math.log(v)) if log else float  # noqa: E731
    from_x = math.exp if log else float
    x_hat = to_x(estimate)
    box = prm.sampling_box() if math.isfinite(prm.lower) and math.isfinite(prm.upper) else None
    sigma_x = result.std[j] / abs(estimate) if log else result.std[j]
    reach = span * math.sqrt(threshold) * sigma_x if np.isfinite(sigma_x) and sigma_x > 0 else None

    z_rest = np.delete(np.asarray(result.z), j)

    def statistic(x: float, z_start):
        held = _with_held(problem, j, from_x(x))
        sub = fit(held, fitter, z0=z_start, max_iterations=max_iterations, progress=False,
                  solver_checks=0)  # fmt: skip
        return n * (sub.loss - loss_min) / s2, sub.z

    xs, stats, starts = [x_hat], [0.0], [z_rest]
    for outward in (-1, 1):
        bound = None if box is None else box[0 if outward < 0 else 1]
        end = bound if reach is None else x_hat + outward * reach
        if bound is not None:
            end = max(end, bound) if outward < 0 else min(end, bound)
        if end is None:
            raise ValueError(f"parameter {name!r}: no finite σ and no finite bound to profile to")
        z_start = z_rest
        for x in np.linspace(x_hat, end, n_points + 1)[1:]:
            stat, z_start = statistic(float(x), z_start)
            xs.append(float(x))
            stats.append(stat)
            starts.append(z_start)
    order = np.argsort(xs)
    x_arr, stat = np.asarray(xs)[order], np.maximum(np.asarray(stats)[order], 0.0)
    z_arr = [starts[i] for i in order]

    k_hat = int(np.searchsorted(x_arr, x_hat))
    ends: list[float | None] = []
    for outward in (-1, 1):
        k, crossed = k_hat, None
        while 0 <= k + outward < len(x_arr):
            if stat[k + outward] > threshold:
                crossed = from_x(_refine(statistic, x_arr, stat, z_arr, threshold, k, outward))
                break
            k += outward
        ends.append(crossed)
    return Profile(
        name=name,
        values=np.asarray([from_x(x) for x in x_arr]),
        statistic=stat,
        threshold=threshold,
        level=level,
        estimate=estimate,
        lower=ends[0],
        upper=ends[1],
    )


def plausible_ranges(
    problem: Problem,
    result: FitResult,
    candidates_z: np.ndarray,
    candidate_losses: np.ndarray,
    level: float = 0.95,
) -> dict:
    """What the profile intervals contain at least, from points already evaluated (the
    archive of a global search): a candidate ``z`` whose statistic ``n (L − L_min) / s²``
    (``s²`` widened as in :func:`profile_likelihood`) is at most ``χ²₁(level)`` bounds the
    profile of *every* parameter from above at its value, since the profile minimises over
    the others; so each parameter's profile interval contains all such values. Where distinct
    candidates as good as the fit lie far apart, the data do not pin those parameters down,
    whatever the curvature at the fitted point says; a local σ cannot see it.

    ``candidates_z`` ``(m, p)``, ``candidate_losses`` ``(m,)``. Returns ``{"level",
    "threshold", "candidates"`` (how many qualify), ``"ranges"``: name → ``[low, high]`` SI
    (the fitted value included)``}``."""
    threshold = _chi2_one_dof(level)
    s2 = result.s2 * result.discrepancy.get("inflation", 1.0)
    s2 = s2 if s2 > 0 else float(np.finfo(float).tiny)
    losses = np.asarray(candidate_losses, dtype=float)
    statistic = problem.n_residuals * (losses - result.loss) / s2
    keep = np.isfinite(losses) & (statistic <= threshold)
    values = np.asarray(problem.space.from_unconstrained(jnp.asarray(candidates_z)))[keep]
    fitted = np.array([result.parameters[n] for n in problem.space.names])
    values = np.vstack([values, fitted[None]])
    ranges = {name: [float(values[:, j].min()), float(values[:, j].max())]
              for j, name in enumerate(problem.space.names)}  # fmt: skip
    return {"level": level, "threshold": threshold, "candidates": int(keep.sum()),
            "ranges": ranges}  # fmt: skip
