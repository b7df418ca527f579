"""The uncertainty of a least-squares fit and whether its parameters sit on their bounds.

Uncertainty is the Gauss–Newton (linearised) covariance in the unconstrained coordinates ``z``::

    cov_z = s² (JᵀJ)⁺,   s² = SSR / (m − p),   SSR = Σ rᵢ²

with ``J = ∂r/∂z`` (``m × p``) at the optimum, the pseudo-inverse taken through the SVD of ``J``
(singular values below ``rcond · σ_max`` dropped). For a ``"log"`` parameter ``std_z`` is the
relative standard deviation of ``θ`` (to first order); for every parameter ``std`` is the SI
standard deviation by the delta method, ``|dθ/dz| · std_z``.

Identifiability. A right singular vector of ``J`` whose singular value is below
``identifiability_tol · σ_max`` is a combination of parameters the data do not pin down: it is
reported (its components by parameter name), and parameters with a component above 0.1 in such
a direction get ``identifiable = False`` and an infinite standard deviation (the pseudo-inverse
would otherwise silently report a finite value for them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["AT_BOUND_MARGIN", "at_bounds", "gauss_newton_covariance"]


def gauss_newton_covariance(
    jac: np.ndarray,
    residuals: np.ndarray,
    *,
    rcond: float = 1e-12,
    identifiability_tol: float = 1e-6,
) -> dict[str, Any]:
    """Linearised covariance of a least-squares fit.

    Args:
        jac: ``∂r/∂z`` at the optimum, shape ``(m, p)``.
        residuals: ``r`` at the optimum, shape ``(m,)``.
        rcond: relative cut-off of the singular values in the pseudo-inverse.
        identifiability_tol: singular values below this fraction of the largest flag a
            non-identifiable direction.

    Returns:
        ``{"covariance" (p, p), "std" (p,), "correlation" (p, p), "s2", "dof", "rank",
        "singular_values" (p,), "null_directions" (list of (ratio, vector (p,))),
        "identifiable" (p,) bool}``. With ``m ≤ p`` there is no residual degree of freedom:
        ``s2`` is NaN and so are the covariances.
    """
    jac = np.asarray(jac, dtype=np.float64)
    r = np.asarray(residuals, dtype=np.float64)
    m, p = jac.shape
    dof = m - p
    ssr = float(r @ r)
    s2 = ssr / dof if dof > 0 else math.nan
    u, sv, vt = np.linalg.svd(jac, full_matrices=False)
    del u
    smax = float(sv[0]) if sv.size and sv[0] > 0 else 0.0
    keep = sv > rcond * smax if smax > 0 else np.zeros_like(sv, dtype=bool)
    inv = (vt[keep].T / sv[keep] ** 2) @ vt[keep]
    cov = s2 * inv
    weak = ~(sv > identifiability_tol * smax) if smax > 0 else np.ones_like(sv, dtype=bool)
    null_dirs = [
        (float(sv[i] / smax) if smax > 0 else 0.0, vt[i].copy()) for i in np.flatnonzero(weak)
    ]
    identifiable = np.ones(p, dtype=bool)
    for _, vec in null_dirs:
        identifiable &= np.abs(vec) <= 0.1
    std = np.sqrt(np.clip(np.diagonal(cov), 0.0, None))
    std = np.where(identifiable, std, math.inf)
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = cov / np.outer(std, std)
    corr = np.where(np.outer(identifiable, identifiable), corr, math.nan)
    np.fill_diagonal(corr, 1.0)
    return {
        "covariance": cov,
        "std": std,
        "correlation": corr,
        "s2": s2,
        "dof": dof,
        "rank": int(keep.sum()),
        "singular_values": sv,
        "null_directions": null_dirs,
        "identifiable": identifiable,
    }


AT_BOUND_MARGIN = 1e-3
"""A parameter is at a bound when its sampling coordinate (``ln θ`` or ``θ``, see
:meth:`~identification.Parameter.sampling_box`) lies within this fraction of the span from it."""


def at_bounds(space, values: np.ndarray) -> dict[str, str]:
    """Name → ``"lower"``/``"upper"`` of the parameters at (or beyond) a finite bound."""
    out = {}
    for prm, value in zip(space.parameters, values, strict=True):
        if not (math.isfinite(prm.lower) and math.isfinite(prm.upper)):
            continue
        if prm.log_scale and value <= 0:
            out[prm.name] = "lower"
            continue
        lo, hi = prm.sampling_box()
        x = math.log(value) if prm.log_scale else float(value)
        if x <= lo + AT_BOUND_MARGIN * (hi - lo):
            out[prm.name] = "lower"
        elif x >= hi - AT_BOUND_MARGIN * (hi - lo):
            out[prm.name] = "upper"
    return out
