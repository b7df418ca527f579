"""identification: parameters, transforms, closed-form models (no simulation).

References: the closed-form least-squares solution and covariance s²(XᵀX)⁻¹ (NumPy), the
definition of a Latin hypercube (one point per bin per dimension), a Python loop of single
loss evaluations against the vmapped batch, and hand-computed dB errors.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import identification as idf
from identification._problem import evaluate

# --------------------------------------------------------------------------- cheap models


class Linear(eqx.Module):
    """y = a x₀ + b x₁ + c x₂ (a linear-in-parameters model)."""

    a: jax.Array
    b: jax.Array
    c: jax.Array


X = np.column_stack([np.ones(30), np.linspace(0.0, 2.0, 30), np.sin(np.linspace(0.0, 5.0, 30))])


def linear_predict(m):
    return m.a * X[:, 0] + m.b * X[:, 1] + m.c * X[:, 2]


class Resonance(eqx.Module):
    """An SDOF transmissibility curve A / √((1 − r²)² + (2ζr)²), r = f / fn."""

    amplitude: jax.Array
    fn: jax.Array
    zeta: jax.Array
    gains: jax.Array


FREQS = np.geomspace(10.0, 1000.0, 25)


def resonance_predict(m):
    r = FREQS / m.fn
    return m.amplitude * m.gains[0] / jnp.sqrt((1 - r**2) ** 2 + (2 * m.zeta * r) ** 2)


def resonance_model(amplitude=2.0, fn=120.0, zeta=0.1):
    return Resonance(
        jnp.asarray(amplitude), jnp.asarray(fn), jnp.asarray(zeta), jnp.asarray([1.0, 1.0])
    )


def resonance_space():
    return idf.ParameterSpace(
        [
            idf.Parameter("amplitude", "amplitude", 0.1, 10.0, 1.0, "log", units="m/s²"),
            idf.Parameter("fn", "fn", 20.0, 500.0, 200.0, "log", units="Hz"),
            idf.Parameter("zeta", "zeta", 0.01, 0.5, 0.2, "bounded"),
        ]
    )


@pytest.fixture(scope="module")
def resonance_problem():
    measured = np.asarray(resonance_predict(resonance_model()))
    exp = idf.FunctionExperiment(
        "res", resonance_model(1.0, 200.0, 0.2), resonance_predict, measured
    )
    return idf.Problem(resonance_space(), [exp])


# --------------------------------------------------------------------------- parameters


def test_transforms_round_trip_and_bounded_stays_inside():
    space = idf.ParameterSpace(
        [
            idf.Parameter("k", "a", 1e3, 1e9, 1e6, "log"),
            idf.Parameter("zeta", "b", 0.01, 0.3, 0.05, "bounded"),
            idf.Parameter("offset", "c", -2.0, 2.0, 0.0, "linear"),
        ]
    )
    rng = np.random.default_rng(1)
    values = np.column_stack(
        [
            np.exp(rng.uniform(np.log(1e3), np.log(1e9), 50)),
            rng.uniform(0.011, 0.299, 50),
            rng.uniform(-2, 2, 50),
        ]
    )
    z = space.to_unconstrained(values)
    np.testing.assert_allclose(space.from_unconstrained(z), values, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(z[:, 0], np.log(values[:, 0]), rtol=1e-14)
    # Bounded: any z maps inside [lower, upper], monotonically.
    zz = np.linspace(-60.0, 60.0, 241)
    theta = np.asarray(space.parameters[1].from_unconstrained(zz))
    assert np.all((theta >= 0.01) & (theta <= 0.3))
    assert np.all(np.diff(theta) >= 0)
    # The derivative of the transform matches finite differences.
    g = jax.grad(lambda z_: space.from_unconstrained(z_).sum())(jnp.asarray(z[3]))
    h = 1e-6
    fd = [
        (space.from_unconstrained(z[3] + h * e)[i] - space.from_unconstrained(z[3] - h * e)[i])
        / (2 * h)
        for i, e in enumerate(np.eye(3))
    ]
    np.testing.assert_allclose(g, fd, rtol=1e-6)
    np.testing.assert_allclose(space.dvalues_dz(z[3]), fd, rtol=1e-6)
    np.testing.assert_allclose(space.initial_z, [np.log(1e6), np.log(0.04 / 0.25), 0.0])


def test_log_bounded_transform():
    """ln θ = ln lo + (ln hi − ln lo)·sigmoid(z): inside the bounds for any z, exact round trip,
    derivatives against finite differences, and ∂z/∂ln θ consistent with ∂θ/∂z."""
    prm = idf.Parameter("k", "a", 1e9, 1e12, 3e10, "log_bounded")
    theta = np.exp(np.linspace(np.log(1.001e9), np.log(0.999e12), 40))
    z = np.asarray(prm.to_unconstrained(theta))
    np.testing.assert_allclose(prm.from_unconstrained(z), theta, rtol=1e-12)
    u = (np.log(theta) - np.log(1e9)) / (np.log(1e12) - np.log(1e9))
    np.testing.assert_allclose(z, np.log(u / (1 - u)), rtol=1e-12)
    wide = np.asarray(prm.from_unconstrained(np.linspace(-40.0, 40.0, 81)))
    assert np.all((wide >= 1e9 * (1 - 1e-12)) & (wide <= 1e12 * (1 + 1e-12)))
    assert np.all(np.diff(wide) >= 0)
    h = 1e-6
    fd = (prm.from_unconstrained(z + h) - prm.from_unconstrained(z - h)) / (2 * h)
    np.testing.assert_allclose(prm.dvalue_dz(z), fd, rtol=1e-6)
    np.testing.assert_allclose(prm.dz_dlog_value(theta) * prm.dvalue_dz(z) / theta, 1.0)
    assert prm.log_scale and prm.sampling_box() == (np.log(1e9), np.log(1e12))
    with pytest.raises(ValueError, match="log_bounded transform needs 0 < lower"):
        idf.Parameter("k", "a", 0.0, 1.0, 0.5, "log_bounded")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lower": 5.0, "upper": 5.0, "initial": 5.0}, "lower = 5 must be < upper"),
        ({"lower": 1.0, "upper": 2.0, "initial": 3.0}, "not within the bounds"),
        ({"lower": 0.0, "upper": 2.0, "initial": 1.0}, "log transform needs lower > 0"),
        (
            {"lower": 0.0, "upper": 1.0, "initial": 0.0, "transform": "bounded"},
            "not strictly within",
        ),
        (
            {"lower": 0.0, "upper": np.inf, "initial": 1.0, "transform": "bounded"},
            "finite bounds",
        ),
        ({"lower": 1.0, "upper": 2.0, "initial": 1.5, "transform": "cubic"}, "transform must"),
        ({"lower": 1.0, "upper": 2.0, "initial": 1.5, "path": "a..b"}, "malformed path"),
    ],
)
def test_bad_parameter_specs_name_the_parameter(kwargs, match):
    spec = {"name": "stiff_thing", "path": "a", **kwargs}
    with pytest.raises(ValueError, match=match) as info:
        idf.Parameter(**spec)
    assert "stiff_thing" in str(info.value)


def test_bad_spaces_and_problems_name_the_parameter():
    p = idf.Parameter("a", "a", 0.1, 10.0, 1.0)
    with pytest.raises(ValueError, match="duplicate parameter name 'a'"):
        idf.ParameterSpace([p, idf.Parameter("a", "b", 0.1, 10.0, 1.0)])
    with pytest.raises(ValueError, match="'a2'.*both set path 'a'"):
        idf.ParameterSpace([p, idf.Parameter("a2", "a", 0.1, 10.0, 1.0)])
    measured = np.asarray(linear_predict(Linear(1.0, 2.0, 3.0)))
    exp = idf.FunctionExperiment(
        "lin", Linear(1.0, 2.0, 3.0), linear_predict, measured, misfit="linear"
    )
    space = idf.ParameterSpace([p, idf.Parameter("wrong", "channel.stiffness", 1.0, 2.0, 1.5)])
    with pytest.raises(ValueError, match="parameter 'wrong': path 'channel.stiffness' not found"):
        idf.Problem(space, [exp])
    space = idf.ParameterSpace([idf.Parameter("h", "a", 0.1, 10.0, 1.0, experiments=("drop2",))])
    with pytest.raises(ValueError, match="parameter 'h' applies to experiment 'drop2'"):
        idf.Problem(space, [exp])
    with pytest.raises(ValueError, match="duplicate experiment name 'lin'"):
        idf.Problem(idf.ParameterSpace([p]), [exp, exp])


def test_apply_shared_per_test_and_element_paths():
    model = resonance_model()
    space = idf.ParameterSpace(
        [
            idf.Parameter("fn", "fn", 20.0, 500.0, 100.0),
            idf.Parameter("amp_A", "amplitude", 0.1, 10.0, 1.0, experiments=("A",)),
            idf.Parameter("amp_B", "amplitude", 0.1, 10.0, 1.0, experiments=("B",)),
            idf.Parameter("gain1", "gains[1]", -5.0, 5.0, 0.0, "linear"),
        ]
    )
    values = jnp.array([150.0, 3.0, 4.0, -2.5])
    a = space.apply(model, values, "A")
    b = space.apply(model, values, "B")
    c = space.apply(model, values, "C")
    assert float(a.fn) == float(b.fn) == float(c.fn) == 150.0
    assert float(a.amplitude) == 3.0 and float(b.amplitude) == 4.0
    assert float(c.amplitude) == float(model.amplitude)  # no per-test value for C
    np.testing.assert_array_equal(a.gains, [1.0, -2.5])
    # Differentiable through tree_at.
    g = jax.grad(lambda v: space.apply(model, v, "A").gains.sum() + space.apply(model, v, "A").fn)(
        values
    )
    np.testing.assert_array_equal(g, [1.0, 0.0, 0.0, 1.0])


# --------------------------------------------------------------------------- misfits


def test_misfit_report_counts_bands():
    meas = np.array([1.0, 1.0, 1.0, 1.0, 2.0])
    sim = np.array([1.0, 10 ** (2.9 / 20), 10 ** (-3.1 / 20), 10 ** (5.9 / 20), 0.0])
    rep = idf.misfit_report(sim, meas)
    np.testing.assert_allclose(rep["db_error"][:4], [0.0, 2.9, -3.1, 5.9], atol=1e-12)
    assert rep["db_error"][4] == pytest.approx(-240.0)  # floored, not -inf or NaN
    assert rep["within_3db"] == pytest.approx(2 / 5)
    assert rep["within_6db"] == pytest.approx(4 / 5)
    # The residuals of an experiment never NaN on a zero or negative prediction.
    exp = idf.FunctionExperiment(
        "f", resonance_model(), lambda m: -resonance_predict(m), meas[:1] * np.ones(25)
    )
    assert np.all(np.isfinite(exp.residuals(resonance_model())))


# --------------------------------------------------------------------------- covariance


def test_linear_least_squares_covariance_matches_closed_form():
    rng = np.random.default_rng(7)
    theta_true = np.array([0.5, -1.2, 2.0])
    y = X @ theta_true + 0.05 * rng.standard_normal(X.shape[0])
    exp = idf.FunctionExperiment("lin", Linear(0.0, 0.0, 0.0), linear_predict, y, misfit="linear")
    space = idf.ParameterSpace(
        [idf.Parameter(n, n, -10.0, 10.0, 0.0, "linear") for n in ("a", "b", "c")]
    )
    result = idf.fit(idf.Problem(space, [exp]), idf.LevenbergMarquardt(), progress=False)
    # Closed form.
    xtx_inv = np.linalg.inv(X.T @ X)
    theta_hat = xtx_inv @ X.T @ y
    s2 = np.sum((y - X @ theta_hat) ** 2) / (X.shape[0] - 3)
    cov = s2 * xtx_inv
    np.testing.assert_allclose([result.parameters[n] for n in "abc"], theta_hat, rtol=1e-9)
    np.testing.assert_allclose(result.s2, s2, rtol=1e-8)
    np.testing.assert_allclose(result.covariance_z, cov, rtol=1e-8)
    np.testing.assert_allclose(result.std, np.sqrt(np.diag(cov)), rtol=1e-8)
    corr = cov / np.outer(np.sqrt(np.diag(cov)), np.sqrt(np.diag(cov)))
    np.testing.assert_allclose(result.correlation, corr, rtol=1e-8, atol=1e-12)
    assert result.rank == 3 and not result.non_identifiable and result.dof == 27


def test_gauss_newton_fitter_and_non_identifiable_direction_flagged():
    # b and c enter only as b + c: one direction is not identifiable.
    def predict(m):
        return m.a * X[:, 0] + (m.b + m.c) * X[:, 1]

    y = X[:, 0] * 0.5 + X[:, 1] * 1.5
    exp = idf.FunctionExperiment("lin2", Linear(0.0, 0.0, 0.0), predict, y, misfit="linear")
    space = idf.ParameterSpace(
        [idf.Parameter(n, n, -10.0, 10.0, 0.1, "linear") for n in ("a", "b", "c")]
    )
    result = idf.fit(idf.Problem(space, [exp]), idf.GaussNewton(), progress=False)
    assert result.parameters["a"] == pytest.approx(0.5, rel=1e-9)
    assert result.parameters["b"] + result.parameters["c"] == pytest.approx(1.5, rel=1e-9)
    assert result.rank == 2
    (direction,) = result.non_identifiable
    v = np.array([direction["direction"][n] for n in "abc"])
    np.testing.assert_allclose(np.abs(v), [0.0, 1 / np.sqrt(2), 1 / np.sqrt(2)], atol=1e-8)
    assert result.identifiable == {"a": True, "b": False, "c": False}
    assert np.isinf(result.std[1]) and np.isfinite(result.std[0])
    summary = result.summary()
    assert "not identifiable: flat in a combination with c" in summary
    assert "not identifiable: flat in a combination with b" in summary


def test_a_fit_that_ends_on_a_bound_is_not_converged_and_says_which():
    """Data made with a = 3, b = −1.2, c = 2 while the box stops a at 2 ("bounded", so the fit
    can only approach it): LM stops, but the result names a as at its upper bound, reports no
    standard deviation for it, and is not converged; the free parameters are still fitted."""
    y = X @ np.array([3.0, -1.2, 2.0])
    exp = idf.FunctionExperiment("lin", Linear(0.0, 0.0, 0.0), linear_predict, y, misfit="linear")
    space = idf.ParameterSpace(
        [idf.Parameter("a", "a", -2.0, 2.0, 0.0, "bounded")]
        + [idf.Parameter(n, n, -10.0, 10.0, 0.0, "linear") for n in ("b", "c")]
    )
    result = idf.fit(idf.Problem(space, [exp]), idf.LevenbergMarquardt(), max_iterations=200,
                     progress=False)  # fmt: skip
    assert result.parameters["a"] == pytest.approx(2.0, abs=1e-2)
    assert result.at_bounds == {"a": "upper"}
    assert not result.converged and "at a bound: a (upper)" in result.message
    assert "at its upper bound: a limit, not an estimate" in result.summary()
    # the other two are the least-squares fit with a held at its final value
    rest = np.linalg.lstsq(X[:, 1:], y - result.parameters["a"] * X[:, 0], rcond=None)[0]
    np.testing.assert_allclose([result.parameters["b"], result.parameters["c"]], rest, rtol=1e-6)


def test_profile_interval_of_a_linear_model_is_the_closed_form_one():
    """For a model linear in its parameters the profile is exactly quadratic: the 95 % profile
    interval of b must be b̂ ± 1.959964 σ_b with σ_b² = s² [(XᵀX)⁻¹]_bb (closed form)."""
    rng = np.random.default_rng(3)
    y = X @ np.array([0.5, -1.2, 2.0]) + 0.05 * rng.standard_normal(X.shape[0])
    exp = idf.FunctionExperiment("lin", Linear(0.0, 0.0, 0.0), linear_predict, y, misfit="linear")
    space = idf.ParameterSpace(
        [idf.Parameter(n, n, -10.0, 10.0, 0.0, "linear") for n in ("a", "b", "c")]
    )
    problem = idf.Problem(space, [exp])
    result = idf.fit(problem, idf.LevenbergMarquardt(), progress=False)
    profile = idf.profile_likelihood(problem, result, "b", n_points=4)
    theta = np.linalg.lstsq(X, y, rcond=None)[0]
    s2 = np.sum((y - X @ theta) ** 2) / (X.shape[0] - 3)
    half = 1.959963985 * np.sqrt(s2 * np.linalg.inv(X.T @ X)[1, 1])
    assert profile.lower == pytest.approx(theta[1] - half, rel=1e-6)
    assert profile.upper == pytest.approx(theta[1] + half, rel=1e-6)


def test_profile_is_one_sided_where_the_data_give_only_a_limit():
    """y = a x₀ + x₁ / (1 + c) with c = 100 in the data: the x₁ term is below the noise, so the
    data bound c from below (a small c would show) but not from above: the upper end is None."""

    def predict(m):
        return m.a * X[:, 0] + X[:, 1] / (1.0 + m.c)

    rng = np.random.default_rng(5)
    y = np.asarray(predict(Linear(0.5, 0.0, 100.0))) + 0.05 * rng.standard_normal(X.shape[0])
    exp = idf.FunctionExperiment("sat", Linear(0.0, 0.0, 10.0), predict, y, misfit="linear")
    space = idf.ParameterSpace(
        [
            idf.Parameter("a", "a", -10.0, 10.0, 0.0, "linear"),
            idf.Parameter("c", "c", 1e-2, 1e4, 10.0, "log_bounded"),
        ]
    )
    problem = idf.Problem(space, [exp])
    result = idf.fit(problem, idf.LevenbergMarquardt(), max_iterations=100, progress=False)
    profile = idf.profile_likelihood(problem, result, "c", n_points=6)
    assert profile.upper is None
    assert profile.lower is not None and 1.0 < profile.lower < 100.0
    # the reference: the statistic at the lower end, recomputed here by a 1-D scan of a
    a_grid = lambda c: np.linalg.lstsq(X[:, :1], y - X[:, 1] / (1 + c), rcond=None)  # noqa: E731
    ssr = lambda c: float(a_grid(c)[1][0])  # noqa: E731
    ssr_min = min(ssr(c) for c in np.geomspace(1e-2, 1e4, 2001))
    n, s2 = X.shape[0], result.s2
    assert n * (ssr(profile.lower) / n - ssr_min / n) / s2 == pytest.approx(3.8415, rel=2e-2)


# --------------------------------------------------------------------------- sampling


def test_latin_hypercube_is_stratified():
    n, d = 37, 4
    u = idf.latin_hypercube(n, d, seed=3)
    assert u.shape == (n, d) and np.all((u > 0) & (u < 1))
    for j in range(d):
        np.testing.assert_array_equal(np.sort(np.floor(u[:, j] * n)), np.arange(n))
    h = idf.halton(8, 2)
    np.testing.assert_allclose(h[:4, 0], [0.5, 0.25, 0.75, 0.125])
    np.testing.assert_allclose(h[:3, 1], [1 / 3, 2 / 3, 1 / 9])
    # Sampled values are stratified in each parameter's sampling coordinate.
    space = resonance_space()
    vals = idf.sample_values(space, n, seed=5)
    s = np.column_stack([np.log(vals[:, 0]), np.log(vals[:, 1]), vals[:, 2]])
    lo = np.array([np.log(0.1), np.log(20.0), 0.01])
    hi = np.array([np.log(10.0), np.log(500.0), 0.5])
    bins = np.floor((s - lo) / (hi - lo) * n)
    for j in range(3):
        np.testing.assert_array_equal(np.sort(bins[:, j]), np.arange(n))


def test_multistart_vmap_equals_loop_and_finds_the_basin(resonance_problem):
    starts = idf.multistart(resonance_problem, 40, seed=11, n_best=3)
    loss_one = eqx.filter_jit(lambda problem, z: problem.loss(z))
    loop = np.array([float(loss_one(resonance_problem, jnp.asarray(z))) for z in starts.samples])
    np.testing.assert_allclose(starts.losses, loop, rtol=1e-12, atol=1e-14)
    assert starts.z.shape == (3, 3)
    np.testing.assert_allclose(starts.loss, np.sort(loop)[:3], rtol=1e-12)
    # Refining the best start reaches the truth.
    result = idf.fit(resonance_problem, z0=starts.z[0], progress=False)
    assert result.parameters["fn"] == pytest.approx(120.0, rel=1e-6)
    assert result.parameters["zeta"] == pytest.approx(0.1, rel=1e-6)
    assert result.parameters["amplitude"] == pytest.approx(2.0, rel=1e-6)


def test_sweep_matches_single_evaluations(resonance_problem):
    space = resonance_problem.space
    values = idf.grid_values(space, [2, 3, 2])
    assert values.shape == (12, 3)
    np.testing.assert_allclose(np.unique(values[:, 1]), [20.0, 100.0, 500.0], rtol=1e-12)
    preds = idf.sweep(resonance_problem, values, chunk_size=5)  # 3 chunks, the last padded
    losses = idf.sweep(resonance_problem, values, output="loss", chunk_size=5)
    assert preds["res"].shape == (12, 25) and losses.shape == (12,)
    for i in (0, 7, 11):
        model = space.apply(resonance_problem.experiments[0].model, values[i], "res")
        np.testing.assert_allclose(preds["res"][i], resonance_predict(model), rtol=1e-12)
        z = space.to_unconstrained(values[i])
        r, _ = evaluate(resonance_problem, z)
        np.testing.assert_allclose(losses[i], np.mean(np.asarray(r) ** 2), rtol=1e-12)
    assert idf.lhs_values(space, 6, seed=1).shape == (6, 3)


def test_lbfgs_and_adam_reach_the_levenberg_marquardt_optimum(resonance_problem):
    lm = idf.fit(resonance_problem, idf.LevenbergMarquardt(), progress=False)
    lbfgs = idf.fit(resonance_problem, idf.LBFGS(), max_iterations=200, progress=False)
    assert lbfgs.loss < 1e-3 * lbfgs.loss_history[0]
    for name, value in lm.parameters.items():
        assert lbfgs.parameters[name] == pytest.approx(value, rel=1e-3), name
    adam = idf.fit(resonance_problem, idf.Adam(0.02), max_iterations=30, progress=False)
    assert adam.loss < 0.5 * adam.loss_history[0]


def test_a_value_on_a_bound_to_round_off_is_not_outside_it():
    """exp(log(1e13)) differs from 1e13 in the last bits: at the bound, not outside it."""
    exp = idf.FunctionExperiment("k", Linear(0.0, 0.0, 0.0), lambda m: m.a * jnp.ones(3),
                                 np.full(3, 2.0), misfit="linear")  # fmt: skip
    space = idf.ParameterSpace([idf.Parameter("a", "a", 1.0, 1e13, 2.0, "log")])
    problem = idf.Problem(space, [exp])
    z = np.array([np.log(1e13) * (1 + 1e-16)])
    result = idf.FitResult.from_problem(problem, z)
    assert result.parameters["a"] != 1e13  # round-off above the bound
    assert result.outside_bounds == [] and result.at_bounds == {"a": "upper"}


def test_saved_srs_plots_are_in_the_requested_unit(tmp_path, monkeypatch):
    """FitResult.save(srs_unit=("g", g)) plots measured and fitted spectra divided by g."""
    import identification._report as results

    measured = np.array([9.80665, 19.6133, 4.903325])
    exp = idf.FunctionExperiment("drop", Linear(1.0, 0.0, 0.0), lambda m: m.a * jnp.ones(3),
                                 measured)  # fmt: skip
    space = idf.ParameterSpace([idf.Parameter("a", "a", 0.1, 100.0, 9.80665, "log")])
    problem = idf.Problem(space, [exp])
    result = idf.FitResult.from_problem(problem, np.asarray(problem.initial_z))
    seen = {}

    def spy(freqs, curves, *, units_label, reference, **kwargs):
        seen.update(units=units_label, fitted=curves["fitted"], measured=reference[1])
        return tmp_path / "x.png"

    monkeypatch.setattr(results, "plot_srs", spy)
    result.save(tmp_path, srs_unit=("g", 9.80665))
    assert seen["units"] == "g"
    np.testing.assert_allclose(seen["measured"], [1.0, 2.0, 0.5], rtol=1e-15)
    np.testing.assert_allclose(seen["fitted"], [1.0, 1.0, 1.0], rtol=1e-12)


def test_band_sensitivity_is_the_rms_in_each_octave_the_largest_over_tests():
    """Octave bands with edges at powers of 2 Hz; hand values: in [4, 8) Hz the first test's
    parameter 0 has sensitivities 1, 2, 2 (rms √3), the second's 4 (rms 4); [16, 32) is not
    sampled and left out."""
    from types import SimpleNamespace

    tests = [SimpleNamespace(name="a", abscissa=np.array([3.0, 5.0, 6.0, 7.0, 12.0]), in_db=True),
             SimpleNamespace(name="b", abscissa=np.array([4.0, 40.0]), in_db=True)]  # fmt: skip
    problem = SimpleNamespace(experiments=tests, n_parameters=2)
    sens = {"a": np.array([[3.0, 0.0], [1.0, 1.0], [2.0, 1.0], [2.0, 1.0], [-5.0, 0.5]]),
            "b": np.array([[4.0, 0.0], [0.1, 9.0]])}  # fmt: skip
    bands, table = idf.band_sensitivity(problem, sens)
    np.testing.assert_array_equal(bands, [[2, 4], [4, 8], [8, 16], [32, 64]])
    np.testing.assert_allclose(table, [[3.0, 4.0, 5.0, 0.1], [0.0, 1.0, 0.5, 9.0]])


# --------------------------------------------------------------------------- shared kernels

TRACES: list[str] = []


def joint_resonance_problem(jac="fwd"):
    """Three tests: two of one structure (their own fn, shared amplitude and ζ) and one with a
    different frequency grid. Its prediction functions are new ones (new compiled kernels)."""
    freqs_c = np.geomspace(20.0, 800.0, 17)

    def counted_resonance_predict(m):
        TRACES.append("resonance")  # runs once per trace, not per call
        return resonance_predict(m)

    def other_predict(m):
        TRACES.append("other")
        r = freqs_c / m.fn
        return m.amplitude / jnp.sqrt((1 - r**2) ** 2 + (2 * m.zeta * r) ** 2)

    truths = {"a": 100.0, "b": 150.0, "c": 80.0}
    experiments = []
    for name, fn in truths.items():
        predict = other_predict if name == "c" else counted_resonance_predict
        measured = np.asarray(predict(resonance_model(2.0, fn, 0.08)))
        experiments.append(idf.FunctionExperiment(name, resonance_model(), predict, measured))
    space = idf.ParameterSpace(
        [
            idf.Parameter("amplitude", "amplitude", 0.1, 10.0, 1.0, "log"),
            idf.Parameter("fn@a", "fn", 20.0, 500.0, 120.0, "log", experiments=("a",)),
            idf.Parameter("fn@b", "fn", 20.0, 500.0, 130.0, "log", experiments=("b",)),
            idf.Parameter("fn@c", "fn", 20.0, 500.0, 90.0, "log", experiments=("c",)),
            idf.Parameter("zeta", "zeta", 0.01, 0.5, 0.2, "log_bounded"),
        ]
    )
    TRACES.clear()
    return idf.Problem(space, experiments, jac=jac)


@pytest.mark.parametrize("jac", ["fwd", "bwd"])
def test_tests_of_one_structure_share_compiled_kernels_and_their_jacobian_is_exact(jac):
    """Experiments that differ only in name and data are evaluated by one compiled kernel (the
    predictions are traced once per structure, not per test), and the assembled Jacobian,
    each test differentiated in its own parameters only, equals central differences of the
    whole problem's residuals (a separate, uncompiled path); a test's block is zero in the other
    tests' parameters."""
    from identification._problem import residuals_and_jacobian

    problem = joint_resonance_problem(jac)
    z = np.asarray(problem.initial_z) + np.array([0.1, -0.05, 0.08, 0.02, 0.3])
    r_eval, _ = evaluate(problem, z)
    assert TRACES.count("resonance") == 1 and TRACES.count("other") == 1
    r, jac_matrix = residuals_and_jacobian(problem, z)
    assert TRACES.count("resonance") == 2 and TRACES.count("other") == 2
    np.testing.assert_allclose(r, r_eval, rtol=1e-12, atol=1e-12)

    residuals = jax.jit(lambda z_: problem.residuals(z_))  # the whole problem, one trace
    np.testing.assert_allclose(residuals(z), r, rtol=1e-10, atol=1e-10)
    h = 1e-6
    differences = np.column_stack(
        [(residuals(z + h * e) - residuals(z - h * e)) / (2 * h) for e in np.eye(len(z))]
    )
    np.testing.assert_allclose(jac_matrix, differences, rtol=1e-6, atol=1e-7)
    slices = problem.residual_slices
    assert np.all(np.asarray(jac_matrix)[slices["a"], 2:4] == 0.0)
    assert np.all(np.asarray(jac_matrix)[slices["c"], 1:3] == 0.0)

    loss, grad = idf._problem.loss_and_grad(problem, z)
    np.testing.assert_allclose(loss, np.mean(np.asarray(r) ** 2), rtol=1e-12)
    np.testing.assert_allclose(grad, 2 * differences.T @ np.asarray(r) / r.shape[0], rtol=1e-6)
    rows = np.stack([z, z + 0.1, z - 0.2])
    batched = idf.batched_loss(problem, rows)
    singles = [float(np.mean(np.asarray(evaluate(problem, row)[0]) ** 2)) for row in rows]
    np.testing.assert_allclose(batched, singles, rtol=1e-12)


def test_a_jacobian_by_differences_is_the_slope_over_its_step():
    """``jac="differences"``: the compiled Jacobian (each test's runs in one vmap, in its own
    parameters) equals central differences over ``±difference_step`` in z of the whole
    problem's residuals, taken here one run at a time; on this smooth problem it is within
    O(h²) of the exact Jacobian; the loss gradient and the sensitivities use the same slopes."""
    from identification._problem import residuals_and_jacobian

    h = 0.02
    problem = joint_resonance_problem("differences")
    problem = idf.Problem(problem.space, problem.experiments, jac="differences", difference_step=h)
    z = np.asarray(problem.initial_z) + np.array([0.1, -0.05, 0.08, 0.02, 0.3])
    r, jac_matrix = residuals_and_jacobian(problem, z)
    residuals = jax.jit(lambda z_: problem.residuals(z_))
    np.testing.assert_allclose(r, residuals(z), rtol=1e-12, atol=1e-12)
    steps = [(residuals(z + h * e) - residuals(z - h * e)) / (2 * h) for e in np.eye(len(z))]
    np.testing.assert_allclose(jac_matrix, np.column_stack(steps), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(problem.jacobian(z), jac_matrix, rtol=1e-10, atol=1e-10)
    exact = np.asarray(joint_resonance_problem("fwd").jacobian(z))
    scale = np.abs(exact).max()
    assert 1e-5 * scale < np.abs(jac_matrix - exact).max() < 2e-2 * scale  # O(h²), not exact
    _, grad = idf._problem.loss_and_grad(problem, z)
    np.testing.assert_allclose(grad, 2 * np.asarray(jac_matrix).T @ np.asarray(r) / r.shape[0],
                               rtol=1e-12)  # fmt: skip
    with pytest.raises(ValueError, match="difference_step must be in"):
        idf.Problem(problem.space, problem.experiments, jac="differences", difference_step=1.5)


def test_a_jacobian_by_differences_follows_the_trend_of_a_rough_misfit():
    """A spectrum with a fine ripple in fn (1 %, period 0.03 % in ln fn): its exact slope swings
    with the ripple by up to 1,700 dB per unit ln fn, 5 times the smooth spectrum's largest;
    the slope over ±2 % in ln fn is the smooth spectrum's (a separate problem without the
    ripple) to within the ripple's swing over the step, 20 log10(1.01/0.99) / 0.04 = 4.3 dB
    per unit ln fn at most (closed form)."""
    amplitude, h = 1e-2, 0.02

    def rippled(m):
        return resonance_predict(m) * (1.0 + amplitude * jnp.sin(2e4 * jnp.log(m.fn)))

    z = jnp.asarray([np.log(2.0), np.log(118.0), 0.0])
    space = idf.ParameterSpace([
        idf.Parameter("amplitude", "amplitude", 0.1, 10.0, 1.0, "log"),
        idf.Parameter("fn", "fn", 20.0, 500.0, 118.0, "log"),
        idf.Parameter("zeta", "zeta", 0.01, 0.5, 0.08, "linear"),
    ])  # fmt: skip
    measured = np.asarray(resonance_predict(resonance_model(2.0, 120.0, 0.08)))
    smooth, rough = (idf.FunctionExperiment("s", resonance_model(), fn, measured)
                     for fn in (resonance_predict, rippled))  # fmt: skip
    exact = np.asarray(idf.Problem(space, [rough]).jacobian(z))[:, 1]
    trend = np.asarray(idf.Problem(space, [smooth]).jacobian(z))[:, 1]
    assert np.abs(exact - trend).max() > 4.0 * np.abs(trend).max()
    slope, smooth_slope = (
        np.asarray(idf.Problem(space, [e], jac="differences", difference_step=h).jacobian(z))[:, 1]
        for e in (rough, smooth)
    )
    swing = 20.0 * np.log10((1.0 + amplitude) / (1.0 - amplitude)) / (2.0 * h)
    assert np.abs(slope - smooth_slope).max() <= swing
    assert np.abs(smooth_slope - trend).max() < 0.4 * np.abs(trend).max()  # a secant, not exact


def test_levenberg_marquardt_steps_stay_inside_a_quarter_box_and_short_of_the_bounds():
    """One step moves a parameter at most a quarter of its span (in ln θ or θ, as
    ``ParameterSpace.to_box`` measures it), in the direction asked; a step toward a bound stops
    ``BOUND_CLEARANCE`` of the span short of it (where ∂θ/∂z is not yet zero), and the other
    parameters' step is then solved again with that one held."""
    from identification._fitters import BOUND_CLEARANCE, _limit_box_step

    space = idf.ParameterSpace(
        [
            idf.Parameter("k", "a", 1e-2, 1e2, 1.0, "log_bounded"),
            idf.Parameter("b", "b", -100.0, 100.0, 0.0, "linear"),
        ]
    )
    box = lambda z: space.to_box(space.from_unconstrained(z))  # noqa: E731
    z = np.asarray(space.initial_z)
    delta, stopped = _limit_box_step(space, z, np.array([30.0, 5.0]), 0.25)
    moved = box(z + delta) - box(z)
    assert np.max(np.abs(moved)) == pytest.approx(0.25, rel=0.02) and not np.any(stopped)
    assert delta[1] / delta[0] == pytest.approx(5.0 / 30.0)  # the direction is kept
    z_near = np.asarray(space.to_unconstrained(space.from_box([0.9, 0.5])))
    delta, stopped = _limit_box_step(space, z_near, np.array([50.0, 0.0]), 0.25)
    assert stopped.tolist() == [True, False]
    assert box(z_near + delta)[0] == pytest.approx(1.0 - BOUND_CLEARANCE, rel=1e-9)

    # A fit whose data want k beyond its upper bound: k ends held just short of it, reported
    # at its bound, and b is the least-squares value with k held there.
    x = np.linspace(0.0, 1.0, 20)
    y = 120.0 * x + 0.3

    class Line(eqx.Module):
        a: jax.Array
        b: jax.Array

    exp = idf.FunctionExperiment("line", Line(1.0, 0.0), lambda m: m.a * x + m.b, y,
                                 misfit="linear")  # fmt: skip
    result = idf.fit(idf.Problem(space, [exp]), idf.LevenbergMarquardt(), max_iterations=100,
                     progress=False)  # fmt: skip
    assert result.at_bounds == {"k": "upper"}
    held = result.parameters["k"]
    assert box(result.z)[0] == pytest.approx(1.0 - BOUND_CLEARANCE, rel=1e-6)
    assert result.parameters["b"] == pytest.approx(np.mean(y - held * x), rel=1e-6)


def test_lm_stops_within_a_tenth_of_a_sigma_of_scipys_minimum():
    """``sigma_tol``: on a nonlinear least-squares problem (a decay ``a e^{−b x} + c`` with
    noise) the default fit stops once the Gauss–Newton step is below 0.1 σ, takes it, and
    ends within 0.01 σ (Mahalanobis, under its own covariance) of SciPy's minimum
    (``least_squares`` at tolerances 1e-15) — in fewer iterations than without the rule, which
    reaches the minimum itself."""
    import scipy.optimize

    x = np.linspace(0.0, 4.0, 40)
    rng = np.random.default_rng(3)
    y = 2.0 * np.exp(-1.3 * x) + 0.4 + 0.02 * rng.standard_normal(x.size)
    def decay(m):
        return m.a * jnp.exp(-m.b * x) + m.c

    exp = idf.FunctionExperiment("decay", Linear(1.0, 0.5, 0.0), decay, y, misfit="linear")
    space = idf.ParameterSpace([idf.Parameter(n, n, -10.0, 10.0, v, "linear")
                                for n, v in zip("abc", (1.0, 0.5, 0.0), strict=True)])  # fmt: skip
    problem = idf.Problem(space, [exp])
    scipy_fit = scipy.optimize.least_squares(
        lambda p: p[0] * np.exp(-p[1] * x) + p[2] - y, [1.0, 0.5, 0.0], xtol=1e-15,
        ftol=1e-15, gtol=1e-15)  # fmt: skip
    stopped = idf.fit(problem, idf.LevenbergMarquardt(), progress=False)
    exact = idf.fit(problem, idf.LevenbergMarquardt(sigma_tol=0.0), progress=False)
    assert stopped.converged and "sigma_tol" in stopped.message
    assert stopped.iterations < exact.iterations, (stopped.iterations, exact.iterations)
    np.testing.assert_allclose([exact.parameters[n] for n in "abc"], scipy_fit.x, rtol=1e-8)
    gap = np.asarray([stopped.parameters[n] for n in "abc"]) - scipy_fit.x
    assert float(gap @ np.linalg.solve(stopped.covariance_z, gap)) ** 0.5 < 0.01


def test_a_jacobian_column_that_is_not_finite_is_named_not_an_svd_failure():
    """A prediction whose derivative in b is NaN at the end (as a failed derivative solve
    gives): the result names b, gives it no uncertainty, is not converged; a keeps its σ."""

    @jax.custom_jvp
    def broken(b):
        return b

    @broken.defjvp
    def _broken_jvp(primals, tangents):  # NaN along b only, as a failed solve gives
        return primals[0], jnp.where(tangents[0] == 0, 0.0, jnp.nan)

    def predict(m):
        return jnp.stack([m.a, 2 * m.a, m.a + broken(m.b)])

    exp = idf.FunctionExperiment("k", Linear(1.0, 1.0, 0.0), predict, np.array([1.1, 1.9, 1.0]),
                                 misfit="linear")  # fmt: skip
    space = idf.ParameterSpace([idf.Parameter("a", "a", 0.1, 10.0, 1.0, "log"),
                                idf.Parameter("b", "b", 0.5, 2.0, 1.0, "linear")])  # fmt: skip
    problem = idf.Problem(space, [exp])
    result = idf.FitResult.from_problem(problem, np.asarray(problem.initial_z), converged=True)
    assert "derivatives of b are not finite" in result.message and not result.converged
    assert np.isfinite(result.relative_std[0]) and not np.isfinite(result.relative_std[1])
