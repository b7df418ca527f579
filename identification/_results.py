"""The outcome of a fit: parameters, misfits, uncertainty and identifiability.

:meth:`FitResult.from_problem` evaluates a problem at its optimum and assembles the Gauss–Newton
covariance (:func:`~identification._covariance.gauss_newton_covariance`), widened by the
residuals' structure and the solver's jitter, with the notes of whatever makes the fit not to be
trusted (a bound, a model discrepancy, wrong derivatives) in its ``message``; the text summary
and the saved report are in :mod:`identification._report`.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from identification._covariance import at_bounds, gauss_newton_covariance
from identification._discrepancy import residual_structure
from identification._experiments import misfit_report
from identification._jitter import DERIVATIVE_NOTE, JITTER_NOTE, add_jitter, solver_jitter
from identification._problem import evaluate, residuals_and_jacobian
from identification._report import save_report, summary_text

__all__ = ["FitResult", "load_result"]


def _clean(x: Any) -> Any:
    """JSON-safe copy: arrays to lists, non-finite floats to None."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if isinstance(x, np.ndarray | np.generic):
        return _clean(x.tolist())
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    return x


@dataclasses.dataclass
class FitResult:
    """Everything a fit produced (NumPy arrays and plain Python, SI units).

    - ``parameter_names`` ``(p,)``, ``parameters`` (name → value, SI), ``units``,
      ``transforms``, ``z`` ``(p,)``;
    - ``loss`` (final ``mean(r²)``, dB² for spectra), ``loss_history`` (one value per iteration,
      starting with the initial loss), ``iterations``, ``converged``, ``message``, ``fitter``;
    - ``experiments``: name → ``{"abscissa", "abscissa_label", "units", "in_db", "predicted",
      "measured", "residuals" (weighted), "misfit"}``; for dB experiments ``misfit`` is
      :func:`~identification.misfit_report` (dB errors, RMS, fractions within ±3/±6 dB),
      otherwise ``{"rms": …}`` of the residuals;
    - uncertainty (see the module docstring): ``covariance_z`` ``(p, p)``, ``std_z``,
      ``relative_std`` (``std_z`` for log parameters, ``std/|θ|`` otherwise), ``std`` (SI),
      ``correlation`` ``(p, p)``, ``s2``, ``dof``, ``rank``, ``singular_values``,
      ``non_identifiable`` (list of ``{"ratio", "direction": {name: component}}``),
      ``identifiable`` (name → bool), ``outside_bounds`` (names whose value left the bounds),
      ``at_bounds`` (name → ``"lower"`` or ``"upper"``: the value sits within
      :data:`~identification._covariance.AT_BOUND_MARGIN` of the span of a bound, in the
      sampling coordinate, or beyond it);
    - ``discrepancy``: :func:`~identification._discrepancy.residual_structure` of the
      residuals: the covariance and σ above are already widened by its ``inflation`` (``s2``
      is not), and when it detects structure beyond independent noise ``message`` says so;
    - ``solver_jitter``: :func:`~identification._jitter.solver_jitter` at the optimum
      (``checks``, ``sigma`` (p,) — the step sequence's own scatter in σ of the noise,
      ``residual_ratio``, ``derivative_error``): its covariance is already added to the one
      above; ``message`` names it from :data:`~identification._jitter.JITTER_NOTE` σ, and
      says the derivatives look wrong from a ``derivative_error`` of
      :data:`~identification._jitter.DERIVATIVE_NOTE` (then ``converged`` is false);
    - ``profiles`` (name → :meth:`Profile.to_dict`) and ``posterior``
      (:meth:`Posterior.to_dict`) when the caller computed them (``diffmbs fit`` does on
      request);
    - ``evaluations``: the fitter's model runs, ``{"simulations", "jacobians"}`` where it counts
      them; ``search``: the global stage of :func:`~identification.global_fit`, if one ran;
      ``stages``: the stages of :func:`~identification.fit_in_stages` (band, window, start and
      end loss, iterations, message), if it ran;
    - ``jacobian_z``: the weighted ``∂r/∂z`` ``(m, p)`` at ``z`` (not saved to JSON).

    A fit with a parameter at a bound is not reported as converged, whatever stopped it: the
    optimum the data point to lies outside the box (or the fit ran into it on the way), so the
    value is a limit, not an estimate. ``message`` says which.
    """

    parameter_names: list[str]
    parameters: dict[str, float]
    units: dict[str, str]
    transforms: dict[str, str]
    z: np.ndarray
    loss: float
    loss_history: list[float]
    iterations: int
    converged: bool
    message: str
    fitter: str
    experiments: dict[str, dict[str, Any]]
    covariance_z: np.ndarray
    std_z: np.ndarray
    relative_std: np.ndarray
    std: np.ndarray
    correlation: np.ndarray
    s2: float
    dof: int
    rank: int
    singular_values: np.ndarray
    non_identifiable: list[dict[str, Any]]
    identifiable: dict[str, bool]
    outside_bounds: list[str]
    at_bounds: dict[str, str] = dataclasses.field(default_factory=dict)
    evaluations: dict[str, int] = dataclasses.field(default_factory=dict)
    search: dict[str, Any] | None = None
    discrepancy: dict[str, Any] = dataclasses.field(default_factory=dict)
    stages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    solver_jitter: dict[str, Any] = dataclasses.field(default_factory=dict)
    profiles: dict[str, Any] | None = None
    posterior: dict[str, Any] | None = None
    jacobian_z: np.ndarray | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def from_problem(
        cls,
        problem,
        z: np.ndarray,
        *,
        loss_history: list[float] | None = None,
        iterations: int = 0,
        converged: bool = False,
        fitter: str = "",
        message: str = "",
        evaluations: dict[str, int] | None = None,
        rcond: float = 1e-12,
        identifiability_tol: float = 1e-6,
        solver_checks: int = 4,
    ) -> FitResult:
        """Evaluate ``problem`` at ``z`` (residuals, Jacobian, predictions) and assemble the
        result; ``solver_checks`` more simulations measure the solver's jitter (0: none)."""
        space = problem.space
        z = np.asarray(z, dtype=np.float64)
        r_evaluated, preds = evaluate(problem, jnp.asarray(z))
        r, jac = residuals_and_jacobian(problem, jnp.asarray(z))
        r, jac = np.asarray(r), np.asarray(jac)
        values = np.asarray(space.from_unconstrained(jnp.asarray(z)))
        names = list(space.names)
        failed = [n for n, ok in zip(names, np.isfinite(jac).all(axis=0), strict=True) if not ok]
        if failed:  # no uncertainty for them (a zero column: not identifiable), and said so
            jac = np.where(np.isfinite(jac), jac, 0.0)
            note = (f"the derivatives of {', '.join(failed)} are not finite at the end (a "
                    "simulation's derivative solve failed: raise [simulation] max_steps or "
                    "loosen rtol); no uncertainty for them")  # fmt: skip
            message = f"{message}; {note}" if message else note
            converged = False
        unc = gauss_newton_covariance(jac, r, rcond=rcond, identifiability_tol=identifiability_tol)
        slices = problem.residual_slices
        discrepancy = residual_structure({n: r[sl] for n, sl in slices.items()})
        inflation = discrepancy["inflation"]
        dtheta_dz = np.asarray(space.dvalues_dz(jnp.asarray(z)))
        jitter = solver_jitter(problem, z, np.asarray(r_evaluated), jac,
                               unc["std"] * math.sqrt(inflation), checks=solver_checks)
        covariance_z, jitter["sigma"] = add_jitter(unc["covariance"] * inflation, jitter)
        std_z = np.where(unc["identifiable"], np.sqrt(np.diagonal(covariance_z)), math.inf)
        with np.errstate(invalid="ignore", divide="ignore"):
            correlation = np.where(np.isfinite(unc["correlation"]),
                                   covariance_z / np.outer(std_z, std_z), math.nan)
        np.fill_diagonal(correlation, 1.0)
        # A parameter pinned at a bound of its transform has dθ/dz = 0 and std_z = inf: its
        # standard deviation is undefined (nan), and it is flagged non-identifiable.
        with np.errstate(divide="ignore", invalid="ignore"):
            std = np.abs(dtheta_dz) * std_z
            rel = np.array(
                [
                    std_z[i] if prm.transform == "log" else std[i] / abs(values[i])
                    for i, prm in enumerate(space.parameters)
                ]
            )
        experiments: dict[str, dict[str, Any]] = {}
        for e in problem.experiments:
            pred = np.asarray(preds[e.name])
            meas = np.asarray(e.measured)
            res = r[slices[e.name]]
            if e.in_db:
                report = misfit_report(pred, meas)
            else:
                report = {"rms": float(np.sqrt(np.mean(res**2)))}
            experiments[e.name] = {
                "abscissa": np.asarray(e.abscissa),
                "abscissa_label": e.abscissa_label,
                "units": e.units,
                "in_db": bool(e.in_db),
                "predicted": pred,
                "measured": meas,
                "residuals": res,
                "misfit": report,
            }
        non_ident = [
            {"ratio": ratio, "direction": dict(zip(names, vec.tolist(), strict=True))}
            for ratio, vec in unc["null_directions"]
        ]
        # Outside by more than round-off (1e-9 of the bound's magnitude).
        outside = [
            prm.name
            for prm, v in zip(space.parameters, values, strict=True)
            if not prm.lower - 1e-9 * abs(prm.lower) <= v <= prm.upper + 1e-9 * abs(prm.upper)
        ]
        bounds_hit = at_bounds(space, values)
        if bounds_hit:
            where = ", ".join(f"{n} ({side})" for n, side in bounds_hit.items())
            message = f"{message}; at a bound: {where}" if message else f"at a bound: {where}"
            converged = False
        if discrepancy["detected"]:
            note = (
                f"model discrepancy: {'; '.join(discrepancy['reasons'])}; uncertainties "
                f"widened ×{math.sqrt(inflation):.2g}"
            )
            message = f"{message}; {note}" if message else note
        if np.max(jitter["sigma"], initial=0.0) > JITTER_NOTE:
            worst = int(np.argmax(jitter["sigma"]))
            note = (
                f"solver jitter: the simulation's step sequence alone moves {names[worst]} by "
                f"{jitter['sigma'][worst]:.2g} σ of the noise (included in the uncertainties; "
                "tighten rtol/atol)"
            )
            message = f"{message}; {note}" if message else note
        if jitter["derivative_error"] > DERIVATIVE_NOTE:
            column = (
                f"derivatives: the Jacobian's column of {names[jitter['derivative_worst']]} "
                f"differs from central differences by {100 * jitter['derivative_error']:.3g} % "
            )
            if problem.jac == "differences":
                note = column + (
                    f"over 0.1 σ (the Jacobian's are over ±{problem.difference_step:g} in z): "
                    "the misfit is rough on the scale of the uncertainties, which are then not "
                    "to be trusted"
                )
            else:
                note = column + (
                    "— the fit and its uncertainties are not to be trusted; with simulations "
                    "take derivatives under error control (diffmbs.ForwardSensitivity, "
                    "[simulation] derivatives = \"controlled\") or tighten rtol"
                )
            message = f"{message}; {note}" if message else note
            converged = False
        history = [float(x) for x in (loss_history or [])]
        return cls(
            parameter_names=names,
            parameters={n: float(v) for n, v in zip(names, values, strict=True)},
            units={p.name: p.units for p in space.parameters},
            transforms={p.name: p.transform for p in space.parameters},
            z=z,
            loss=float(np.mean(r**2)),
            loss_history=history,
            iterations=int(iterations),
            converged=bool(converged),
            message=message,
            fitter=fitter,
            experiments=experiments,
            covariance_z=covariance_z,
            std_z=std_z,
            relative_std=rel,
            std=std,
            correlation=correlation,
            s2=float(unc["s2"]),
            dof=int(unc["dof"]),
            rank=int(unc["rank"]),
            singular_values=unc["singular_values"],
            non_identifiable=non_ident,
            identifiable={n: bool(b) for n, b in zip(names, unc["identifiable"], strict=True)},
            outside_bounds=outside,
            at_bounds=bounds_hit,
            evaluations=dict(evaluations or {}),
            discrepancy=discrepancy,
            solver_jitter={k: v for k, v in jitter.items() if k != "covariance_z"},
            jacobian_z=jac,
        )

    # ---------------------------------------------------------------- output

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dictionary (non-finite numbers become ``null``)."""
        d = dataclasses.asdict(self)
        del d["jacobian_z"]  # (m, p): in memory for the report's sensitivities, not in JSON
        d["std_by_name"] = dict(zip(self.parameter_names, self.std.tolist(), strict=True))
        d["relative_std_by_name"] = dict(
            zip(self.parameter_names, self.relative_std.tolist(), strict=True)
        )
        return _clean(d)

    def summary(self) -> str:
        """A short text table of the fitted parameters and the fit's diagnostics."""
        return summary_text(self)

    def save(
        self, directory: str | Path, *, srs_unit: tuple[str, float] | None = None
    ) -> dict[str, Path]:
        """Write the figures and then ``result.json`` into ``directory`` (created), each
        atomically, so that a ``result.json`` means a complete report: ``srs_<experiment>.png``
        (fit over measurement with ±3/±6 dB bands, in ``srs_unit = (label, SI per unit)``, e.g.
        ``("g", 9.80665)``, default SI; time histories as ``history_<experiment>.png``),
        ``convergence.png`` and ``correlation.png``. Returns label → path."""
        return save_report(self, directory, srs_unit=srs_unit)


def load_result(directory: str | Path) -> dict[str, Any]:
    """Read ``result.json`` written by :meth:`FitResult.save` (as a plain dictionary)."""
    return json.loads((Path(directory) / "result.json").read_text(encoding="utf-8"))
