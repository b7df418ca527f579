"""A posterior of the parameters by gradient-based MCMC (NUTS from ``numpyro``).

Where the misfit is far from quadratic (a stiffness seen only from below, a damping near a
bound, a trade-off between two contacts) the linearised σ of a fit mislead; samples of the
posterior do not. The target, in the unconstrained ``z`` of the fit::

    log p(z | data) = −(m_eff / 2) · log SSR(z) + log prior(z)

* ``SSR(z) = Σ rᵢ²`` over the ``m`` residuals, the noise variance integrated out under
  Jeffreys' prior ``p(σ) ∝ 1/σ``;
* ``m_eff = m / inflation`` with the fit's discrepancy inflation
  (:mod:`identification._discrepancy`): correlated residuals count as fewer observations, as in
  the widened covariance;
* the prior is uniform in each parameter's sampling coordinate over its bounds (``log θ`` for
  ``"log_bounded"``, ``θ`` for ``"bounded"``): ``log prior = Σ log(u (1 − u))``,
  ``u = sigmoid(z)``; flat in ``z`` for ``"log"`` and ``"linear"``.

The gradient of ``log p`` comes from the same Jacobian kernel as the fit (forward mode for
simulations with ``diffrax.ForwardMode``). Sampling starts at the fit's optimum, adapts the
step size and a diagonal mass matrix during warm-up, and then runs in chunks: after each chunk
the chain's state and the samples so far are checkpointed (atomically), so a long run resumes.
Why numpyro: its NUTS takes a ``potential_fn`` of arrays directly, its state is a pytree, and
it installs light (jax, numpy, tqdm, multipledispatch).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from diffmbs.io import atomic_write
from identification._checkpoint import load_npz, save_npz
from identification._problem import Problem
from identification._results import FitResult

__all__ = ["Posterior", "log_posterior", "plot_corner", "sample_posterior"]


def log_posterior(problem: Problem, z, m_eff: float):
    """``log p(z | data)`` of the module docstring, up to a constant; differentiable."""
    z = jnp.asarray(z, dtype=float)
    ssr = problem.n_residuals * problem.loss(z)
    log_prior = 0.0
    for i, prm in enumerate(problem.space.parameters):
        if prm.transform in ("bounded", "log_bounded"):
            log_prior = log_prior + jax.nn.log_sigmoid(z[i]) + jax.nn.log_sigmoid(-z[i])
    return -0.5 * m_eff * jnp.log(ssr) + log_prior


@dataclasses.dataclass
class Posterior:
    """Samples of the posterior: ``samples`` ``(n, p)`` SI and ``z_samples`` ``(n, p)``; for
    each parameter ``intervals[name] = (lower, median, upper)`` (equal-tailed, ``level``);
    ``effective_sample_size`` and split ``r_hat`` by name; ``divergences`` (NUTS transitions
    that diverged: a warning sign when not 0); ``acceptance`` (mean acceptance probability)."""

    names: list[str]
    samples: np.ndarray
    z_samples: np.ndarray
    level: float
    intervals: dict[str, tuple[float, float, float]]
    effective_sample_size: dict[str, float]
    r_hat: dict[str, float]
    divergences: int
    acceptance: float

    def to_dict(self) -> dict:
        """JSON-ready summary (no samples)."""
        return {
            "level": self.level,
            "samples": int(len(self.samples)),
            "intervals": {n: list(v) for n, v in self.intervals.items()},
            "effective_sample_size": self.effective_sample_size,
            "r_hat": self.r_hat,
            "divergences": self.divergences,
            "acceptance": self.acceptance,
        }


def sample_posterior(
    problem: Problem,
    result: FitResult,
    *,
    num_samples: int = 500,
    num_warmup: int = 300,
    seed: int = 0,
    level: float = 0.95,
    chunk: int = 100,
    max_tree_depth: int = 8,
    checkpoint: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
) -> Posterior:
    """NUTS samples of the posterior of the module docstring, started at ``result.z``.

    ``num_warmup`` adaptation steps, then ``num_samples`` draws in chunks of ``chunk`` (one
    compiled program); ``checkpoint`` (``.npz``) is written after each chunk and continued with
    ``resume`` (the parameters, experiments and settings must match). ``max_tree_depth`` caps a
    transition at ``2^depth`` gradient evaluations.
    """
    from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
    from numpyro.infer import MCMC, NUTS

    m_eff = problem.n_residuals / result.discrepancy.get("inflation", 1.0)
    kernel = NUTS(potential_fn=lambda z: -log_posterior(problem, z, m_eff),
                  max_tree_depth=max_tree_depth)  # fmt: skip
    mcmc = MCMC(kernel, num_warmup=num_warmup, num_samples=chunk, progress_bar=progress)
    meta = {
        "format": "identification.posterior checkpoint v1",
        "parameters": list(problem.space.names),
        "experiments": list(problem.experiment_names),
        "settings": [num_warmup, chunk, seed, max_tree_depth],
    }
    path = None if checkpoint is None else Path(checkpoint)
    z_hat = jnp.asarray(result.z, dtype=float)
    drawn = np.empty((0, problem.n_parameters))
    diverging = np.empty(0, dtype=bool)
    accept = np.empty(0)
    if resume and path is not None and path.exists():
        saved, leaves, named = load_npz(path)
        for key in ("parameters", "experiments", "settings"):
            if saved[key] != meta[key]:
                raise ValueError(
                    f"checkpoint {path}: {key} {saved[key]} differ from this run's {meta[key]}"
                )
        template = kernel.init(jax.random.PRNGKey(seed), num_warmup, z_hat, (), {})
        treedef = jax.tree_util.tree_structure(template)
        mcmc.post_warmup_state = jax.tree_util.tree_unflatten(
            treedef, [jnp.asarray(x) for x in leaves]
        )
        drawn, diverging, accept = named["z_samples"], named["diverging"], named["accept"]
    fields = ("diverging", "accept_prob")
    # Raw uint32 keys (jax.random.PRNGKey), so that the chain's state saves as plain arrays.
    while len(drawn) < num_samples:
        if mcmc.post_warmup_state is None:
            mcmc.run(jax.random.PRNGKey(seed), init_params=z_hat, extra_fields=fields)
        else:
            mcmc.run(mcmc.post_warmup_state.rng_key, extra_fields=fields)
        mcmc.post_warmup_state = mcmc.last_state
        extra = mcmc.get_extra_fields()
        drawn = np.concatenate([drawn, np.asarray(mcmc.get_samples())])
        diverging = np.concatenate([diverging, np.asarray(extra["diverging"])])
        accept = np.concatenate([accept, np.asarray(extra["accept_prob"])])
        if path is not None:
            save_npz(path, meta, mcmc.last_state, z_samples=drawn, diverging=diverging,
                     accept=accept)
    drawn, diverging, accept = drawn[:num_samples], diverging[:num_samples], accept[:num_samples]
    values = np.asarray(problem.space.from_unconstrained(jnp.asarray(drawn)))
    names = list(problem.space.names)
    tail = (1.0 - level) / 2.0
    quantiles = np.quantile(values, [tail, 0.5, 1.0 - tail], axis=0)
    ess = np.asarray(effective_sample_size(values[None]))
    r_hat = np.asarray(split_gelman_rubin(values[None])) if len(values) >= 4 else np.full(
        len(names), math.nan)  # fmt: skip
    return Posterior(
        names=names,
        samples=values,
        z_samples=np.asarray(drawn),
        level=level,
        intervals={n: tuple(float(q) for q in quantiles[:, i]) for i, n in enumerate(names)},
        effective_sample_size={n: float(ess[i]) for i, n in enumerate(names)},
        r_hat={n: float(r_hat[i]) for i, n in enumerate(names)},
        divergences=int(np.sum(diverging)),
        acceptance=float(np.mean(accept)),
    )


def plot_corner(posterior: Posterior, path: str | Path, *, log_scale=None, truths=None) -> Path:
    """A corner plot of ``posterior`` written to ``path`` (PNG, atomically): histograms on the
    diagonal, pairwise scatter below it; parameters in ``log_scale`` (names) on log axes (by
    default those whose samples are all positive and span more than a factor 3); ``truths``
    (name → value) drawn as lines."""
    names, x = posterior.names, posterior.samples
    p = len(names)
    if log_scale is None:
        log_scale = {n for i, n in enumerate(names)
                     if np.all(x[:, i] > 0) and x[:, i].max() > 3 * x[:, i].min()}  # fmt: skip
    data = np.array([np.log10(x[:, i]) if n in log_scale else x[:, i]
                     for i, n in enumerate(names)]).T  # fmt: skip
    label = [f"log10 {n}" if n in log_scale else n for n in names]
    fig = Figure(figsize=(2.2 * p, 2.2 * p))
    FigureCanvasAgg(fig)
    axes = fig.subplots(p, p, squeeze=False)
    for i in range(p):
        for j in range(p):
            ax = axes[i, j]
            if j > i:
                ax.set_axis_off()
                continue
            if i == j:
                ax.hist(data[:, i], bins=30, color="0.4")
            else:
                ax.plot(data[:, j], data[:, i], ".", ms=1.5, alpha=0.4, color="C0")
            if truths and names[j] in truths:
                t = truths[names[j]]
                ax.axvline(math.log10(t) if names[j] in log_scale else t, color="C3", lw=1)
            ax.tick_params(labelsize=6)
            if i == p - 1:
                ax.set_xlabel(label[j], fontsize=7)
            if j == 0 and i > 0:
                ax.set_ylabel(label[i], fontsize=7)
    fig.suptitle(f"posterior ({len(x)} NUTS samples, {posterior.divergences} divergent)")
    fig.tight_layout()
    path = Path(path)
    return atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=90, format="png"))
