"""The outcome of a fit: parameters, misfits, uncertainty and identifiability; saved to disk.

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

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs.io import atomic_write
from diffmbs.plotting import plot_srs
from identification._discrepancy import residual_structure
from identification._experiments import misfit_report
from identification._jitter import DERIVATIVE_NOTE, JITTER_NOTE, add_jitter, solver_jitter
from identification._problem import evaluate, residuals_and_jacobian

__all__ = ["FitResult", "gauss_newton_covariance", "load_result"]

POSTERIOR_R_HAT_LIMIT = 1.1
"""Split Gelman–Rubin r-hat above which the summary says the posterior chain has not mixed
(Gelman et al., *Bayesian Data Analysis*, 3rd ed., §11.4)."""


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


AT_BOUND_MARGIN = 1e-3
"""A parameter is at a bound when its sampling coordinate (``ln θ`` or ``θ``, see
:meth:`~identification.Parameter.sampling_box`) lies within this fraction of the span from it."""


def _at_bounds(space, values: np.ndarray) -> dict[str, str]:
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
      :data:`AT_BOUND_MARGIN` of the span of a bound, in the sampling coordinate, or beyond it);
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
        at_bounds = _at_bounds(space, values)
        if at_bounds:
            where = ", ".join(f"{n} ({side})" for n, side in at_bounds.items())
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
            at_bounds=at_bounds,
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
        """A short text table of the fitted parameters."""
        lines = [
            f"{self.fitter}: {self.message}; {self.iterations} iterations, loss {self.loss:.6g}",
            f"{'parameter':<20} {'value':>14} {'rel. std':>10}  {'units':<10} note",
        ]
        for i, n in enumerate(self.parameter_names):
            rel = self.relative_std[i]
            known = self.identifiable[n] and np.isfinite(rel) and n not in self.at_bounds
            if n in self.at_bounds:
                note = f"at its {self.at_bounds[n]} bound: a limit, not an estimate"
            elif not known:
                note = self._flat_note(n)
            else:
                note = self._weak_note(i)
            lines.append(
                f"{n:<20} {self.parameters[n]:>14.6g} {f'{rel:.3g}' if known else '-':>10}  "
                f"{self.units[n]:<10} {note}".rstrip()
            )
        for name, prof in (self.profiles or {}).items():
            lo, hi = prof["lower"], prof["upper"]
            if lo is not None and hi is not None:
                interval = f"[{lo:.4g}, {hi:.4g}]"
            elif lo is not None or hi is not None:
                interval = f">= {lo:.4g}" if lo is not None else f"<= {hi:.4g}"
                interval += " (one-sided)"
            else:
                interval = "the whole box (no limit)"
            lines.append(f"profile {100 * prof['level']:.0f} % interval of {name}: {interval}")
        lines += self._plausible_lines()
        if self.posterior:
            post = self.posterior
            lines.append(
                f"posterior ({post['samples']} NUTS samples, {post['divergences']} divergent), "
                f"{100 * post['level']:.0f} % intervals: "
                + ", ".join(f"{n} [{q[0]:.4g}, {q[2]:.4g}]" for n, q in post["intervals"].items())
            )
            # NaN (a chain that never moved) counts as the worst.
            worst = max((math.inf if math.isnan(r) else r for r in post["r_hat"].values()),
                        default=1.0)  # fmt: skip
            if worst > POSTERIOR_R_HAT_LIMIT:
                lines.append(
                    f"  the chain has not mixed (split r-hat {worst:.3g} > "
                    f"{POSTERIOR_R_HAT_LIMIT}): these intervals are not reliable; raise "
                    "posterior_warmup and posterior_samples"
                )
        if self.search:
            ends = ", ".join(f"{r['loss']:.4g}" for r in self.search["refinements"])
            lines.append(
                f"global stage: {self.search['evaluations']} simulations "
                f"({self.search['strategy']}); local fits ended at losses {ends}"
            )
        if self.stages:
            lines.append("stages: " + "; ".join(
                f"{st['stage']} {st['start_loss']:.3g} → {st['loss']:.3g}"
                for st in self.stages))  # fmt: skip
        if self.solver_jitter.get("checks"):
            sigma = np.asarray(self.solver_jitter["sigma"])
            lines.append(
                f"solver jitter ({self.solver_jitter['checks']} checks): at most "
                f"{sigma.max():.2g} σ of the noise, on {self.parameter_names[int(sigma.argmax())]}"
                " (in the uncertainties above)"
            )
        for name, e in self.experiments.items():
            m = e["misfit"]
            if e["in_db"]:
                lines.append(
                    f"{name}: rms {m['rms_db']:.3g} dB, {100 * m['within_3db']:.0f} % within "
                    f"±3 dB, {100 * m['within_6db']:.0f} % within ±6 dB"
                )
            else:
                lines.append(f"{name}: rms residual {m['rms']:.3g}")
        return "\n".join(lines)

    def _flat_note(self, name: str) -> str:
        """Why a parameter is not identifiable: alone, or with which others its flat
        direction moves."""
        partners = sorted({other for d in self.non_identifiable if abs(d["direction"][name]) > 0.1
                           for other, c in d["direction"].items()
                           if other != name and abs(c) > 0.1})  # fmt: skip
        if partners:
            return f"not identifiable: flat in a combination with {', '.join(partners)}"
        return "not identifiable (no effect on the misfit)"

    def _plausible_lines(self) -> list[str]:
        """The parameters whose global-stage points as good as the fit
        (:func:`~identification.plausible_ranges`) reach beyond the local 95 % interval."""
        plausible = (self.search or {}).get("plausible")
        if not plausible:
            return []
        lines = []
        for i, name in enumerate(self.parameter_names):
            low, high = plausible["ranges"][name]
            value, reach = self.parameters[name], 1.96 * self.std[i]
            if low < value - reach or high > value + reach:
                lines.append(f"{name}: points of the global stage as good as the fit span "
                             f"[{low:.4g}, {high:.4g}], beyond its local 95 % interval: "
                             "these data do not pin it down")  # fmt: skip
        return lines

    def _weak_note(self, i: int) -> str:
        """Why an estimated parameter is poorly determined: a strong trade-off with another
        (|correlation| > 0.95) or a relative σ above 100 %; empty otherwise."""
        corr = np.where(np.eye(len(self.parameter_names), dtype=bool), 0.0, self.correlation)
        row = np.nan_to_num(corr[i])
        j = int(np.argmax(np.abs(row)))
        notes = []
        if abs(row[j]) > 0.95:
            notes.append(f"trades off with {self.parameter_names[j]} (ρ = {row[j]:+.2f})")
        if self.relative_std[i] > 1.0:
            notes.append("poorly determined (σ > 100 %)")
        return "; ".join(notes)

    def save(
        self, directory: str | Path, *, srs_unit: tuple[str, float] | None = None
    ) -> dict[str, Path]:
        """Write the figures and then ``result.json`` into ``directory`` (created), each
        atomically, so that a ``result.json`` means a complete report: ``srs_<experiment>.png``
        (fit over measurement with ±3/±6 dB bands, in ``srs_unit = (label, SI per unit)``, e.g.
        ``("g", 9.80665)``, default SI; time histories as ``history_<experiment>.png``),
        ``convergence.png`` and ``correlation.png``. Returns label → path."""
        directory = Path(directory)
        paths: dict[str, Path] = {}
        for name, e in self.experiments.items():
            safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
            if e["in_db"]:
                m = e["misfit"]
                label, scale = srs_unit or (e["units"], 1.0)
                paths[f"srs_{name}"] = plot_srs(
                    e["abscissa"],
                    {"fitted": e["predicted"] / scale},
                    units_label=label,
                    title=(
                        f"{name}: rms {m['rms_db']:.2f} dB, {100 * m['within_3db']:.0f} % "
                        f"within ±3 dB, {100 * m['within_6db']:.0f} % within ±6 dB"
                    ),
                    path=directory / f"srs_{safe}.png",
                    reference=(e["abscissa"], e["measured"] / scale, "measured"),
                )
            else:
                paths[f"history_{name}"] = _plot_history(e, name, directory / f"history_{safe}.png")
        paths["convergence"] = _plot_convergence(self, directory / "convergence.png")
        paths["correlation"] = _plot_correlation(self, directory / "correlation.png")
        text = json.dumps(self.to_dict(), indent=2, allow_nan=False)
        paths["result"] = atomic_write(directory / "result.json", text + "\n")
        return paths


def load_result(directory: str | Path) -> dict[str, Any]:
    """Read ``result.json`` written by :meth:`FitResult.save` (as a plain dictionary)."""
    return json.loads((Path(directory) / "result.json").read_text(encoding="utf-8"))


def _figure(size=(8.0, 5.0)):
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> Path:
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120))


def _plot_history(e: dict[str, Any], name: str, path: Path) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    ax.plot(e["abscissa"], e["measured"], "k--", linewidth=1.0, label="measured")
    ax.plot(e["abscissa"], e["predicted"], linewidth=1.2, label="fitted")
    ax.set_xlabel(e["abscissa_label"])
    ax.set_ylabel(f"({e['units']})")
    ax.set_title(f"{name}: rms residual {e['misfit']['rms']:.3g}")
    ax.grid(True, alpha=0.4)
    ax.legend(loc="best", fontsize="small")
    return _save(fig, path)


def _plot_convergence(result: FitResult, path: Path) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    hist = np.asarray(result.loss_history, dtype=np.float64)
    if hist.size:
        its = np.arange(hist.size)
        positive = np.isfinite(hist) & (hist > 0)
        ax.semilogy(its[positive], hist[positive], "o-", markersize=3)
    ax.set_xlabel("Iteration")
    ax.set_ylabel("Loss, mean(r²)")
    ax.set_title(f"Convergence ({result.message})")
    ax.grid(True, which="both", alpha=0.4)
    return _save(fig, path)


def _plot_correlation(result: FitResult, path: Path) -> Path:
    p = len(result.parameter_names)
    fig = _figure((1.2 + 0.7 * p + 2.0, 1.0 + 0.7 * p + 1.0))
    ax = fig.add_subplot()
    corr = np.asarray(result.correlation, dtype=np.float64)
    image = ax.imshow(corr, cmap="RdBu_r", vmin=-1.0, vmax=1.0)
    fig.colorbar(image, ax=ax, label="correlation")
    ax.set_xticks(range(p), result.parameter_names, rotation=45, ha="right")
    ax.set_yticks(range(p), result.parameter_names)
    for i in range(p):
        for j in range(p):
            text = "n/a" if not np.isfinite(corr[i, j]) else f"{corr[i, j]:.2f}"
            ax.text(j, i, text, ha="center", va="center", fontsize=8)
    ax.set_title("Parameter correlation (Gauss–Newton)")
    return _save(fig, path)
