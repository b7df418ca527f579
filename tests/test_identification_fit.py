"""identification on a simulated model: recovery, joint fits, resume, optax fitters, sensitivity.

The model is a 1-DOF oscillator in free vibration (m = 1 kg, stiffness k, damping ratio ζ,
initial velocity v₀), simulated for 0.2 s at 5 kHz; its SRS at 20 frequencies is the data.
References: the known parameters of noise-free synthetic data, an uninterrupted run (for
resume), central finite differences (for sensitivities). L-BFGS is tested on the closed-form
problem of test_identification.py (its compiled line search is the costliest to build).
"""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import identification as idf
from diffmbs.system import MechanicalSystem
from identification._problem import evaluate

TS = np.arange(1000) / 5000.0
FREQS = np.geomspace(20.0, 400.0, 20)
K_TRUE = (2 * np.pi * 100.0) ** 2  # 100 Hz
ZETA_TRUE = 0.03


class FreeOscillator(MechanicalSystem):
    """q̈ + 2ζ√k q̇ + k q = 0, q(0) = 0, q̇(0) = v₀; sensor "acc" = q̈ (m/s²)."""

    k: jax.Array
    zeta: jax.Array
    v0: jax.Array

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        return -self.k * q - 2 * self.zeta * jnp.sqrt(self.k) * v

    def sensors(self, t, q, v, vdot):
        return {"acc": vdot[0]}

    def initial_state(self):
        return jnp.zeros(1), jnp.reshape(self.v0, (1,))


def oscillator(k=K_TRUE, zeta=ZETA_TRUE, v0=1.0):
    return FreeOscillator(jnp.asarray(k), jnp.asarray(zeta), jnp.asarray(v0))


def make_problem(space, truths):
    """Problem whose measured SRS are the model's own at the true values (noise-free). The data
    come from the same compiled kernel the fit uses (a problem of the same structure)."""
    dummy = [idf.SRSExperiment(n, oscillator(), "acc", TS, FREQS, np.ones(20)) for n in truths]
    dummy_problem = idf.Problem(space, dummy)
    measured = {}
    for name, values in truths.items():
        _, preds = evaluate(dummy_problem, space.to_unconstrained(np.asarray(values)))
        measured[name] = np.asarray(preds[name])
    exps = [idf.SRSExperiment(n, oscillator(), "acc", TS, FREQS, measured[n]) for n in truths]
    return idf.Problem(space, exps)


@pytest.fixture(scope="module")
def single():
    """k, ζ, v₀ started 50 % off (k +50 %, ζ −50 %, v₀ −50 %)."""
    space = idf.ParameterSpace(
        [
            idf.Parameter("k", "k", 1e4, 1e7, 1.5 * K_TRUE, "log", units="N/m"),
            idf.Parameter("zeta", "zeta", 1e-3, 0.5, 0.5 * ZETA_TRUE, "bounded"),
            idf.Parameter("v0", "v0", 0.1, 10.0, 0.5, "log", units="m/s"),
        ]
    )
    truth = np.array([K_TRUE, ZETA_TRUE, 1.0])
    return make_problem(space, {"drop": truth}), truth


@pytest.fixture(scope="module")
def lm_result(single):
    problem, _ = single
    return idf.fit(problem, idf.LevenbergMarquardt(), max_iterations=40, progress=False)


def test_lm_recovers_parameters_from_50_percent_off(single, lm_result):
    _, truth = single
    res = lm_result
    fitted = np.array([res.parameters[n] for n in ("k", "zeta", "v0")])
    np.testing.assert_allclose(fitted, truth, rtol=1e-2)  # the brief: 1 %
    np.testing.assert_allclose(fitted, truth, rtol=1e-6)  # noise-free: much better
    assert res.converged and res.loss < 1e-12 and res.loss_history[0] > 1.0
    assert res.experiments["drop"]["misfit"]["within_3db"] == 1.0


def test_joint_fit_shared_and_per_test_parameters():
    space = idf.ParameterSpace(
        [
            idf.Parameter("k", "k", 1e4, 1e7, 0.6 * K_TRUE, "log", units="N/m"),
            idf.Parameter("zeta", "zeta", 1e-3, 0.5, 1.4 * ZETA_TRUE, "bounded"),
            idf.Parameter("v0_a", "v0", 0.1, 10.0, 1.5, "log", experiments=("a",)),
            idf.Parameter("v0_b", "v0", 0.1, 10.0, 1.5, "log", experiments=("b",)),
        ]
    )
    truths = {"a": [K_TRUE, ZETA_TRUE, 1.0, 1.0], "b": [K_TRUE, ZETA_TRUE, 2.5, 2.5]}
    problem = make_problem(space, truths)
    res = idf.fit(problem, max_iterations=40, progress=False)
    expected = {"k": K_TRUE, "zeta": ZETA_TRUE, "v0_a": 1.0, "v0_b": 2.5}
    for name, value in expected.items():
        assert res.parameters[name] == pytest.approx(value, rel=1e-2), name
    # The per-test parameter of a does not move b's spectrum: zero Jacobian block.
    sl = problem.residual_slices
    jac = np.asarray(problem.jacobian(jnp.asarray(res.z)))
    assert np.all(jac[sl["b"], 2] == 0) and np.all(jac[sl["a"], 3] == 0)
    assert np.any(jac[sl["a"], 2] != 0) and np.any(jac[sl["b"], 3] != 0)


def test_resume_after_interruption_gives_the_same_result(single, lm_result, tmp_path):
    problem, _ = single
    ckpt = tmp_path / "fit.npz"

    class Killed(Exception):
        pass

    def kill_at_3(iteration, state):
        if iteration == 3:
            raise Killed

    with pytest.raises(Killed):
        idf.fit(
            problem,
            max_iterations=40,
            checkpoint=ckpt,
            checkpoint_every=2,
            callback=kill_at_3,
            progress=False,
        )
    with np.load(ckpt) as data:
        assert json.loads(str(data["meta"]))["iteration"] == 2  # the last checkpoint
    resumed = idf.fit(problem, max_iterations=40, checkpoint=ckpt, resume=True, progress=False)
    np.testing.assert_allclose(resumed.z, lm_result.z, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(resumed.loss_history, lm_result.loss_history, rtol=1e-12)
    assert resumed.iterations == lm_result.iterations
    # A checkpoint from another fitter, or from another start, is refused.
    with pytest.raises(ValueError, match="written by LevenbergMarquardt"):
        idf.fit(problem, idf.GaussNewton(), checkpoint=ckpt, resume=True, progress=False)
    with pytest.raises(ValueError, match="was started from z0"):
        idf.fit(problem, z0=problem.initial_z + 0.1, checkpoint=ckpt, resume=True,
                progress=False)  # fmt: skip


def test_adam_reduces_the_loss(single):
    problem, _ = single
    adam = idf.fit(problem, idf.Adam(learning_rate=0.05), max_iterations=15, progress=False)
    assert adam.loss < 0.5 * adam.loss_history[0]
    assert adam.iterations == 15 and not adam.converged


def test_srs_sensitivity_matches_finite_differences(single, lm_result):
    problem, _ = single
    z = jnp.asarray(lm_result.z) + jnp.array([0.05, -0.1, 0.02])  # not exactly at the truth
    sens = idf.srs_sensitivity(problem, z)["drop"]
    assert sens.shape == (20, 3)
    values = np.asarray(problem.values(z))
    h = 1e-5
    fd = np.empty_like(sens)
    for j in range(3):
        levels = []
        for sign in (1, -1):
            v = values.copy()
            v[j] *= np.exp(sign * h)  # a step in ln θ_j
            _, preds = evaluate(problem, problem.space.to_unconstrained(v))
            levels.append(20 * np.log10(np.asarray(preds["drop"])))
        fd[:, j] = (levels[0] - levels[1]) / (2 * h)
    scale = np.max(np.abs(fd), axis=0)
    np.testing.assert_allclose(sens, fd, rtol=0, atol=1e-4 * scale.max())
    np.testing.assert_allclose(sens[:, 2], 20 / np.log(10), rtol=1e-8)  # SRS ∝ v₀
    # weights shape the misfit, not the spectrum: a weighted twin has the same sensitivity
    (drop,) = problem.experiments
    weighted = eqx.tree_at(lambda e: e.weights, drop, jnp.linspace(0.0, 3.0, 20))
    twin = idf.Problem(problem.space, [weighted])
    np.testing.assert_allclose(idf.srs_sensitivity(twin, z)["drop"], sens, rtol=1e-12, atol=0)
    # rescaled from a fit's weighted Jacobian instead of simulated again: the same numbers
    jac = np.asarray(problem.jacobian(z))
    positive = eqx.tree_at(lambda e: e.weights, drop, jnp.linspace(0.5, 3.0, 20))
    heavy = idf.Problem(problem.space, [positive])
    rescaled = idf.srs_sensitivity(heavy, z, jacobian=np.asarray(heavy.jacobian(z)))["drop"]
    np.testing.assert_allclose(rescaled, sens, rtol=1e-9, atol=1e-9 * np.abs(sens).max())
    np.testing.assert_allclose(idf.srs_sensitivity(problem, z, jacobian=jac)["drop"], sens,
                               rtol=1e-9, atol=1e-9 * np.abs(sens).max())  # fmt: skip


def test_save_writes_json_and_figures(single, lm_result, tmp_path):
    problem, _ = single
    paths = lm_result.save(tmp_path / "out")
    for name in ("result.json", "srs_drop.png", "convergence.png", "correlation.png"):
        assert (tmp_path / "out" / name).is_file(), name
    for p in paths.values():
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = idf.load_result(tmp_path / "out")
    for key in (
        "parameters",
        "z",
        "loss",
        "loss_history",
        "iterations",
        "experiments",
        "covariance_z",
        "std_z",
        "relative_std",
        "correlation",
        "singular_values",
        "non_identifiable",
    ):
        assert key in data, key
    assert data["parameters"]["k"] == pytest.approx(K_TRUE, rel=1e-6)
    exp = data["experiments"]["drop"]
    assert len(exp["predicted"]) == len(exp["measured"]) == 20
    assert exp["misfit"]["within_3db"] == 1.0 and "within_6db" in exp["misfit"]
    assert np.asarray(data["correlation"]).shape == (3, 3)
    sens_paths = idf.save_sensitivity(
        tmp_path / "sens", problem, idf.srs_sensitivity(problem, jnp.asarray(lm_result.z))
    )
    header = sens_paths["csv_drop"].read_text().splitlines()[0]
    assert header == "frequency_hz,k,zeta,v0"
    assert sens_paths["png_drop"].is_file()
