"""The global stage: a batched CMA-ES over the box, then LM from the best distinct candidates.

References: a sinusoid whose frequency the misfit makes multimodal (the global minimum is the
generating frequency, known exactly; a local fit from the start stops in a side lobe), and an
uninterrupted run for resume."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import diffmbs
import identification as idf
from identification._global import _distinct_best

diffmbs.configure()

T = np.linspace(0.0, 1.0, 200)
TRUE_FREQUENCY, TRUE_AMPLITUDE = 7.3, 2.0  # Hz, 1


class Tone(eqx.Module):
    frequency: jnp.ndarray
    amplitude: jnp.ndarray


def tone(model: Tone):
    return model.amplitude * jnp.sin(2 * jnp.pi * model.frequency * T)


def tone_problem(initial_frequency: float = 2.5) -> idf.Problem:
    measured = TRUE_AMPLITUDE * np.sin(2 * np.pi * TRUE_FREQUENCY * T)
    experiment = idf.FunctionExperiment(
        "tone", Tone(jnp.asarray(1.0), jnp.asarray(1.0)), tone, measured, misfit="linear"
    )
    space = idf.ParameterSpace(
        [
            idf.Parameter("frequency", "frequency", 0.5, 20.0, initial_frequency, "log_bounded"),
            idf.Parameter("amplitude", "amplitude", 0.1, 10.0, 1.0, "log_bounded"),
        ]
    )
    return idf.Problem(space, [experiment])


def test_local_fit_stops_in_a_side_lobe_and_the_global_fit_finds_the_truth():
    problem = tone_problem()
    local = idf.fit(problem, max_iterations=50, progress=False)
    assert local.loss > 1.0  # a side lobe: the data's variance is 2.0, the truth's loss 0
    result = idf.global_fit(problem, idf.CMAES(population_size=16, generations=15),
                            progress=False)  # fmt: skip
    np.testing.assert_allclose(result.parameters["frequency"], TRUE_FREQUENCY, rtol=1e-8)
    np.testing.assert_allclose(result.parameters["amplitude"], TRUE_AMPLITUDE, rtol=1e-8)
    assert result.converged and result.loss < 1e-16
    search = result.search
    assert search["evaluations"] == 16 * 15
    assert np.all(np.diff(search["best_history"]) <= 0)  # the best so far never gets worse
    assert len(search["refinements"]) == 4  # three candidates and the initial values
    assert search["refinements"][-1]["loss"] == pytest.approx(local.loss)
    # noise-free data: no other point of the search is as good as the exact fit
    for name, (low, high) in search["plausible"]["ranges"].items():
        assert low == high == result.parameters[name]


def test_search_resumed_from_its_checkpoint_ends_where_an_uninterrupted_one_does(tmp_path):
    problem = tone_problem()
    search = idf.CMAES(population_size=8, generations=6)
    whole = idf.global_search(problem, search, seed=3, progress=False)
    path = tmp_path / "global.npz"
    idf.global_search(problem, search, generations=2, seed=3, checkpoint=path, progress=False)
    resumed = idf.global_search(problem, search, seed=3, checkpoint=path, resume=True,
                                progress=False)  # fmt: skip
    np.testing.assert_array_equal(resumed.z, whole.z)
    np.testing.assert_array_equal(resumed.best_history, whole.best_history)
    assert resumed.evaluations == whole.evaluations == 48
    with pytest.raises(ValueError, match="seed"):
        idf.global_search(problem, search, seed=4, checkpoint=path, resume=True, progress=False)
    with pytest.raises(ValueError, match="strategy"):
        idf.global_search(problem, idf.CMAES(population_size=8, generations=6, sigma0=0.2),
                          seed=3, checkpoint=path, resume=True, progress=False)  # fmt: skip


def test_a_finished_fit_resumed_with_more_generations_goes_on_and_refines_its_new_best(tmp_path):
    """A search's budget is not part of its identity: raising ``generations`` and resuming
    continues from the last generation (the same points as an uninterrupted longer run), and
    the refinement, whose candidate moved, starts from the new one, not from its old
    checkpoint."""
    problem = tone_problem()
    short, long = (idf.CMAES(population_size=8, generations=g) for g in (2, 6))
    first = idf.global_fit(problem, short, n_refine=1, refine_initial=False, seed=3,
                           max_iterations=2, checkpoint_dir=tmp_path, progress=False)  # fmt: skip
    more = idf.global_fit(problem, long, n_refine=1, refine_initial=False, seed=3,
                          max_iterations=2, checkpoint_dir=tmp_path, resume=True,
                          progress=False)  # fmt: skip
    whole = idf.global_search(problem, long, n_best=1, seed=3, progress=False)
    np.testing.assert_array_equal(more.search["best_history"], whole.best_history)
    assert more.search["evaluations"] == 48
    assert more.search["refinements"][0]["start_loss"] == pytest.approx(whole.loss[0], rel=1e-12)
    assert whole.loss[0] < first.search["best_history"][-1]  # the candidate did move


def test_batched_loss_in_chunks_equals_one_at_a_time():
    problem = tone_problem()
    zs = problem.space.to_unconstrained(idf.sample_values(problem.space, 7, seed=1))
    one_by_one = np.array([float(problem.loss(z)) for z in zs])
    np.testing.assert_allclose(idf.batched_loss(problem, zs, batch_size=3), one_by_one, rtol=1e-13)


def test_distinct_candidates_are_apart_and_best_first():
    u = np.array([[0.5, 0.5], [0.51, 0.5], [0.9, 0.1], [0.2, 0.2], [0.21, 0.2]])
    losses = np.array([1.0, 0.5, 3.0, 2.0, np.inf])
    np.testing.assert_array_equal(_distinct_best(u, losses, 3, 0.05), [1, 3, 2])
    np.testing.assert_array_equal(_distinct_best(u, losses, 2, 0.05), [1, 3])


def test_box_coordinates_round_trip_and_global_search_needs_finite_bounds():
    space = tone_problem().space
    values = np.array([[0.5, 10.0], [3.0, 1.0]])
    np.testing.assert_allclose(space.to_box(values), [[0.0, 1.0], [np.log(6) / np.log(40), 0.5]])
    np.testing.assert_allclose(space.from_box(space.to_box(values)), values, rtol=1e-14)
    unbounded = idf.ParameterSpace(
        [idf.Parameter("frequency", "frequency", 0.5, np.inf, 2.5, "log"),
         idf.Parameter("amplitude", "amplitude", 0.1, 10.0, 1.0)]
    )  # fmt: skip
    problem = idf.Problem(unbounded, tone_problem().experiments)
    with pytest.raises(ValueError, match="'frequency'.*finite bounds"):
        idf.global_search(problem, progress=False)


class Line(eqx.Module):
    intercept: jnp.ndarray
    slope: jnp.ndarray


X = np.linspace(-1.0, 2.0, 40)


def test_plausible_ranges_are_inner_bounds_of_the_exact_profile_intervals():
    """y = a + b x with Gaussian noise: the profile of each coefficient is exactly quadratic,
    so its 95 % interval is â ± 1.96 σ (closed form, ordinary least squares by NumPy). The
    ranges spanned by grid points whose statistic is under χ²₁(95 %) must lie inside those
    intervals and, on a fine grid, reach them."""
    rng = np.random.default_rng(5)
    measured = 0.7 + 1.3 * X + rng.normal(0.0, 0.2, X.size)
    experiment = idf.FunctionExperiment(
        "line", Line(jnp.asarray(0.0), jnp.asarray(0.0)),
        lambda m: m.intercept + m.slope * jnp.asarray(X), measured, misfit="linear",
    )  # fmt: skip
    space = idf.ParameterSpace([
        idf.Parameter("intercept", "intercept", -np.inf, np.inf, 0.0, "linear"),
        idf.Parameter("slope", "slope", -np.inf, np.inf, 0.0, "linear"),
    ])  # fmt: skip
    problem = idf.Problem(space, [experiment])
    result = idf.fit(problem, max_iterations=20, progress=False)
    assert result.discrepancy["inflation"] == 1.0  # independent noise: nothing widened

    design = np.column_stack([np.ones_like(X), X])
    coef, ssr, *_ = np.linalg.lstsq(design, measured, rcond=None)
    s2 = float(ssr[0]) / (X.size - 2)
    sigma = np.sqrt(np.diag(s2 * np.linalg.inv(design.T @ design)))
    np.testing.assert_allclose(result.z, coef, rtol=1e-9)
    np.testing.assert_allclose(result.std, sigma, rtol=1e-6)

    grid = np.stack(np.meshgrid(coef[0] + np.linspace(-4, 4, 161) * sigma[0],
                                coef[1] + np.linspace(-4, 4, 161) * sigma[1]), -1).reshape(-1, 2)
    losses = np.mean((grid @ design.T - measured) ** 2, axis=1)
    found = idf.plausible_ranges(problem, result, grid, losses)
    assert 0 < found["candidates"] < len(grid)
    for j, name in enumerate(("intercept", "slope")):
        low, high = found["ranges"][name]
        exact = coef[j] - 1.96 * sigma[j], coef[j] + 1.96 * sigma[j]
        assert exact[0] - 1e-9 <= low and high <= exact[1] + 1e-9, name
        assert high - low > 0.97 * (exact[1] - exact[0]), name  # the grid's spacing: 0.05 σ
