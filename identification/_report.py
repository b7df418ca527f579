"""A fit's report: the text summary, the figures and ``result.json`` (what
:class:`~identification.FitResult`'s ``summary`` and ``save`` do; ``result`` below is one; this
module does not import it, which imports this one)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs.io import atomic_write
from diffmbs.plotting import plot_srs

__all__ = ["POSTERIOR_R_HAT_LIMIT", "save_report", "summary_text"]

POSTERIOR_R_HAT_LIMIT = 1.1
"""Split Gelman–Rubin r-hat above which the summary says the posterior chain has not mixed
(Gelman et al., *Bayesian Data Analysis*, 3rd ed., §11.4)."""


def summary_text(result) -> str:
    """A short text table of the fitted parameters and the fit's diagnostics."""
    head = f"{result.fitter}: {result.message}; {result.iterations} iterations"
    lines = [
        f"{head}, loss {result.loss:.6g}",
        f"{'parameter':<20} {'value':>14} {'rel. std':>10}  {'units':<10} note",
    ]
    for i, n in enumerate(result.parameter_names):
        rel = result.relative_std[i]
        known = result.identifiable[n] and np.isfinite(rel) and n not in result.at_bounds
        if n in result.at_bounds:
            note = f"at its {result.at_bounds[n]} bound: a limit, not an estimate"
        elif not known:
            note = _flat_note(result, n)
        else:
            note = _weak_note(result, i)
        lines.append(
            f"{n:<20} {result.parameters[n]:>14.6g} {f'{rel:.3g}' if known else '-':>10}  "
            f"{result.units[n]:<10} {note}".rstrip()
        )
    for name, prof in (result.profiles or {}).items():
        lo, hi = prof["lower"], prof["upper"]
        if lo is not None and hi is not None:
            interval = f"[{lo:.4g}, {hi:.4g}]"
        elif lo is not None or hi is not None:
            interval = f">= {lo:.4g}" if lo is not None else f"<= {hi:.4g}"
            interval += " (one-sided)"
        else:
            interval = "the whole box (no limit)"
        lines.append(f"profile {100 * prof['level']:.0f} % interval of {name}: {interval}")
    lines += _plausible_lines(result)
    if result.posterior:
        post = result.posterior
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
    if result.search:
        ends = ", ".join(f"{r['loss']:.4g}" for r in result.search["refinements"])
        lines.append(
            f"global stage: {result.search['evaluations']} simulations "
            f"({result.search['strategy']}); local fits ended at losses {ends}"
        )
    if result.stages:
        lines.append("stages: " + "; ".join(
            f"{st['stage']} {st['start_loss']:.3g} → {st['loss']:.3g}"
            for st in result.stages))  # fmt: skip
    if result.solver_jitter.get("checks"):
        sigma = np.asarray(result.solver_jitter["sigma"])
        lines.append(
            f"solver jitter ({result.solver_jitter['checks']} checks): at most "
            f"{sigma.max():.2g} σ of the noise, on {result.parameter_names[int(sigma.argmax())]}"
            " (in the uncertainties above)"
        )
    for name, e in result.experiments.items():
        m = e["misfit"]
        if e["in_db"]:
            lines.append(
                f"{name}: rms {m['rms_db']:.3g} dB, {100 * m['within_3db']:.0f} % within "
                f"±3 dB, {100 * m['within_6db']:.0f} % within ±6 dB"
            )
        else:
            lines.append(f"{name}: rms residual {m['rms']:.3g}")
    return "\n".join(lines)


def _flat_note(result, name: str) -> str:
    """Why a parameter is not identifiable: alone, or with which others its flat
    direction moves."""
    partners = sorted({other for d in result.non_identifiable if abs(d["direction"][name]) > 0.1
                       for other, c in d["direction"].items()
                       if other != name and abs(c) > 0.1})  # fmt: skip
    if partners:
        return f"not identifiable: flat in a combination with {', '.join(partners)}"
    return "not identifiable (no effect on the misfit)"


def _plausible_lines(result) -> list[str]:
    """The parameters whose global-stage points as good as the fit
    (:func:`~identification.plausible_ranges`) reach beyond the local 95 % interval."""
    plausible = (result.search or {}).get("plausible")
    if not plausible:
        return []
    lines = []
    for i, name in enumerate(result.parameter_names):
        low, high = plausible["ranges"][name]
        value, reach = result.parameters[name], 1.96 * result.std[i]
        if low < value - reach or high > value + reach:
            lines.append(f"{name}: points of the global stage as good as the fit span "
                         f"[{low:.4g}, {high:.4g}], beyond its local 95 % interval: "
                         "these data do not pin it down")  # fmt: skip
    return lines


def _weak_note(result, i: int) -> str:
    """Why an estimated parameter is poorly determined: a strong trade-off with another
    (|correlation| > 0.95) or a relative σ above 100 %; empty otherwise."""
    corr = np.where(np.eye(len(result.parameter_names), dtype=bool), 0.0, result.correlation)
    row = np.nan_to_num(corr[i])
    j = int(np.argmax(np.abs(row)))
    notes = []
    if abs(row[j]) > 0.95:
        notes.append(f"trades off with {result.parameter_names[j]} (ρ = {row[j]:+.2f})")
    if result.relative_std[i] > 1.0:
        notes.append("poorly determined (σ > 100 %)")
    return "; ".join(notes)


def save_report(
    result, directory: str | Path, *, srs_unit: tuple[str, float] | None = None
) -> dict[str, Path]:
    """:meth:`FitResult.save <identification.FitResult.save>` of ``result``: the figures, then
    ``result.json``, each written atomically; returns label → path."""
    directory = Path(directory)
    paths: dict[str, Path] = {}
    for name, e in result.experiments.items():
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
    paths["convergence"] = _plot_convergence(result, directory / "convergence.png")
    paths["correlation"] = _plot_correlation(result, directory / "correlation.png")
    text = json.dumps(result.to_dict(), indent=2, allow_nan=False)
    paths["result"] = atomic_write(directory / "result.json", text + "\n")
    return paths


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


def _plot_convergence(result, path: Path) -> Path:
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


def _plot_correlation(result, path: Path) -> Path:
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
