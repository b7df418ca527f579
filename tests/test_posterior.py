"""NUTS posterior of a fit against the closed form: a straight line with Gaussian noise of
unknown variance and flat priors has a Student-t posterior (ν = m − p) centred on the least
squares estimate with scale s² (XᵀX)⁻¹ — computed here with NumPy — and resuming from the
chain's checkpoint gives the uninterrupted chain."""

import dataclasses

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import diffmbs
import identification as idf
from identification._posterior import plot_corner, sample_posterior

diffmbs.configure()

X = np.linspace(-1.0, 1.0, 30)


class Line(eqx.Module):
    a: jnp.ndarray
    b: jnp.ndarray


def line_problem():
    rng = np.random.default_rng(5)
    y = 0.7 + 1.3 * X + 0.2 * rng.standard_normal(X.size)
    experiment = idf.FunctionExperiment("line", Line(jnp.asarray(0.0), jnp.asarray(0.0)),
                                        lambda m: m.a + m.b * jnp.asarray(X), y,
                                        misfit="linear")  # fmt: skip
    space = idf.ParameterSpace([idf.Parameter("a", "a", -10.0, 10.0, 0.0, "linear"),
                                idf.Parameter("b", "b", -10.0, 10.0, 0.0, "linear")])  # fmt: skip
    return idf.Problem(space, [experiment]), y


@pytest.fixture(scope="module")
def fitted():
    problem, y = line_problem()
    return problem, y, idf.fit(problem, progress=False)


def test_nuts_posterior_matches_the_student_t_closed_form(fitted, tmp_path):
    problem, y, result = fitted
    design = np.column_stack([np.ones_like(X), X])
    coef, ssr, *_ = np.linalg.lstsq(design, y, rcond=None)
    nu = X.size - 2
    scale = np.sqrt(ssr[0] / nu * np.diag(np.linalg.inv(design.T @ design)))
    inflation = result.discrepancy["inflation"]  # ~1 here: the noise is independent
    assert inflation < 1.5
    # The sampler targets m_eff = m / inflation observations: the closed form with that count.
    nu_eff = X.size / inflation - 2
    scale_eff = scale * np.sqrt(nu / nu_eff)
    post = sample_posterior(problem, result, num_samples=500, num_warmup=150, progress=False)
    assert post.divergences == 0 and 0.6 < post.acceptance < 0.99
    for i, name in enumerate(("a", "b")):
        lo, med, hi = post.intervals[name]
        t_lo, t_hi = coef[i] + scale_eff[i] * stats.t.ppf([0.025, 0.975], nu_eff)
        mc_error = scale_eff[i] / np.sqrt(post.effective_sample_size[name])
        assert abs(med - coef[i]) < 4 * mc_error, name
        np.testing.assert_allclose([lo, hi], [t_lo, t_hi], atol=0.1 * (t_hi - t_lo))
        assert post.r_hat[name] < 1.02
    path = plot_corner(post, tmp_path / "corner.png", truths={"a": 0.7, "b": 1.3})
    assert path.stat().st_size > 5000


def test_resumed_chain_equals_the_uninterrupted_one(fitted, tmp_path):
    problem, _, result = fitted
    settings = dict(num_warmup=60, chunk=40, seed=2, progress=False)
    whole = sample_posterior(problem, result, num_samples=80, **settings)
    path = tmp_path / "chain.npz"
    sample_posterior(problem, result, num_samples=40, checkpoint=path, **settings)
    resumed = sample_posterior(problem, result, num_samples=80, checkpoint=path, resume=True,
                               **settings)  # fmt: skip
    np.testing.assert_array_equal(resumed.z_samples, whole.z_samples)


@pytest.mark.parametrize("r_hat, flagged", [(1.02, False), (1.7, True), (float("nan"), True)])
def test_summary_says_when_the_chain_has_not_mixed(fitted, r_hat, flagged):
    """Split r-hat above 1.1 (or NaN: eight identical draws, a chain stuck on one value) must
    be said beside the intervals, not left to read as a tight posterior."""
    _, _, result = fitted
    posterior = {"level": 0.95, "samples": 8, "divergences": 0, "r_hat": {"a": 1.0, "b": r_hat},
                 "intervals": {"a": [0.6, 0.7, 0.8], "b": [1.3, 1.3, 1.3]}}  # fmt: skip
    summary = dataclasses.replace(result, posterior=posterior).summary()
    assert ("the chain has not mixed" in summary) == flagged
