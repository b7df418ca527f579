"""One parameter resolver for every model (``diffmbs.parameters``, issue 20).

References: the model's own fields read directly (``model.k_bed``, ``model.bodies.mass[row]``),
never through the resolver under test; closed-form derivatives of what a parameter sets.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from multibody_models import four_bar

import diffmbs
import diffmbs.multibody as mb
from diffmbs.models.mwsm import LumpedContactModel
from diffmbs.parameters import get_parameter, parse_path, set_parameter
from identification import Parameter, ParameterSpace, TimeHistoryExperiment


class Springs(eqx.Module):
    rates: jax.Array
    table: dict
    pairs: list
    label: str = eqx.field(static=True, default="springs")


def springs():
    return Springs(jnp.array([1.0, 2.0, 3.0]), {"k": jnp.asarray(4.0)}, [jnp.asarray(5.0), 6.0])


def test_attribute_paths_read_and_write_the_fields():
    model = springs()
    assert parse_path("pairs[1]") == (("attr", "pairs"), ("index", 1))
    assert float(get_parameter(model, "rates[2]")) == 3.0
    assert float(get_parameter(model, "table['k']")) == 4.0
    assert float(get_parameter(model, "pairs[1]")) == 6.0  # a Python float leaf
    new = set_parameter(model, "rates[1]", 7.0)
    np.testing.assert_array_equal(new.rates, [1.0, 7.0, 3.0])
    np.testing.assert_array_equal(set_parameter(model, "rates", 0.5).rates, [0.5, 0.5, 0.5])
    assert float(set_parameter(model, "table['k']", 8.0).table["k"]) == 8.0
    np.testing.assert_array_equal(model.rates, [1.0, 2.0, 3.0])  # the original is untouched


def test_setting_a_parameter_is_differentiable():
    """d/dx Σ rates with rates[1] = x² is 2x; with the whole leaf set to x it is 3."""
    model = springs()
    grad = jax.grad(lambda x: jnp.sum(set_parameter(model, "rates[1]", x**2).rates))(1.5)
    assert float(grad) == pytest.approx(3.0)
    grad = jax.grad(lambda x: jnp.sum(set_parameter(model, "rates", x).rates))(1.5)
    assert float(grad) == pytest.approx(3.0)


def test_parameters_under_jit_and_vmap():
    """Traced models and values: set under ``jit``, read under ``vmap``."""
    model = springs()
    set_rate = jax.jit(lambda m, x: set_parameter(m, "rates[0]", x))
    np.testing.assert_array_equal(set_rate(model, 9.0).rates, [9.0, 2.0, 3.0])
    key = "table['k']"
    roundtrip = jax.vmap(lambda x: get_parameter(set_parameter(model, key, x), key))
    np.testing.assert_array_equal(roundtrip(jnp.arange(3.0)), [0.0, 1.0, 2.0])


@pytest.mark.parametrize(
    "path, message",
    [
        ("rate", r"'rate': Springs has no 'rate'; it has: rates, table, pairs"),
        ("rates[3]", r"index \(3,\) is out of range for shape \(3,\)"),
        ("rates.k", r"goes through an array of shape \(3,\)"),
        ("table['c']", r"dict has no \['c'\]; it has: 'k'"),
        ("label", r"Springs.label is a static field: structure, not a parameter"),
        ("table", r"parameter 'table': is a dict, not a float"),
    ],
)
def test_a_wrong_name_says_what_exists(path, message):
    with pytest.raises(KeyError, match=message):
        get_parameter(springs(), path)


def test_lumped_model_parameters_by_field_name_with_units():
    model = LumpedContactModel.from_machine()
    listed = model.parameter_paths()
    assert listed["k_channel"] == ((), "N/m") and listed["m_equipment"] == ((), "kg")
    assert listed["impact.stiffness"] == ((), "N/m^n") and listed["stops.damping"] == ((), "s/m")
    assert "impact.exponent" not in listed  # static
    assert float(model.with_parameter("k_bed", 2.0e7).k_bed) == 2.0e7
    assert float(model.parameter("zeta_channel")) == float(model.zeta_channel)
    with pytest.raises(KeyError, match="has no 'k_chanel'; it has: m_hammer"):
        model.parameter("k_chanel")


def spring_four_bar():
    def spring(builder):
        stops = mb.LengthStops(None, 0.95, stiffness=2e5, damping=0.2)
        builder.add_force("spring", mb.SpringDamper("ground", (0.5, 1.2, 0.0), "coupler",
                                                    (0.2, 0.0, 0.0), 200.0, 0.6, 0.5,
                                                    stops=stops))  # fmt: skip

    return four_bar(extra=spring, sensors=False)


def test_multibody_parameters_by_element_name():
    model = spring_four_bar()
    row = model.bodies.names.index("coupler")
    assert float(model.parameter("coupler.mass")) == float(model.bodies.mass[row])
    heavy = model.with_parameter("coupler.mass", 2.5)
    expected = np.asarray(model.bodies.mass).copy()
    expected[row] = 2.5
    np.testing.assert_array_equal(heavy.bodies.mass, expected)
    moved = model.with_parameter("coupler.com[1]", 0.01)
    assert float(moved.bodies.com[row, 1]) == 0.01 and float(moved.bodies.com[row, 0]) == 0.0
    assert float(model.with_parameter("spring.stops.stiffness", 3e5).parameter(
        "spring.stops.stiffness")) == 3e5  # fmt: skip
    np.testing.assert_array_equal(model.with_parameter("gravity", (0, 0, -1)).gravity, [0, 0, -1])
    # the same names in joint coordinates (they live in the full model)
    jm = mb.in_joint_coordinates(model)
    assert float(jm.with_parameter("coupler.mass", 2.5).full.bodies.mass[row]) == 2.5
    assert jm.parameter_paths() == model.parameter_paths()


def test_every_listed_multibody_parameter_round_trips():
    model = spring_four_bar()
    listed = model.parameter_paths()
    assert {"crank.mass", "spring.stiffness", "spring.stops.damping", "gravity"} <= set(listed)
    for path, (shape, _) in listed.items():
        value = np.asarray(model.parameter(path))
        assert value.shape == shape, path
        changed = model.with_parameter(path, value + 1.0)
        np.testing.assert_array_equal(changed.parameter(path), value + 1.0, err_msg=path)


def test_multibody_wrong_names_list_the_items():
    model = spring_four_bar()
    with pytest.raises(KeyError, match="no body, joint or force element 'couple'; the model has "
                                       "crank, coupler, rocker, A, B, C, D, spring and 'gravity'"):
        model.parameter("couple.mass")  # fmt: skip
    with pytest.raises(KeyError, match="BodyStack has no 'mas'; it has: mass, inertia"):
        model.parameter("coupler.mas")


def test_identification_uses_the_models_names():
    """A fitted parameter named as the model names it sets the same leaf as with_parameter."""
    model = spring_four_bar()
    space = ParameterSpace([Parameter("k", "spring.stiffness", 10.0, 1e4, 200.0),
                            Parameter("m", "coupler.mass", 0.1, 10.0, 1.2)])  # fmt: skip
    space.validate(model, "test")
    fitted = space.apply(model, jnp.array([350.0, 1.7]), "test")
    reference = model.with_parameter("spring.stiffness", 350.0).with_parameter("coupler.mass", 1.7)
    for path in ("spring.stiffness", "coupler.mass"):
        assert float(fitted.parameter(path)) == float(reference.parameter(path))
    bad = ParameterSpace([Parameter("k", "sprin.stiffness", 10.0, 1e4, 200.0)])
    with pytest.raises(ValueError, match="parameter 'k': path 'sprin.stiffness' not found in the "
                                         "model .* no body, joint or force"):
        bad.validate(model, "test")


class Bare(diffmbs.MechanicalSystem):
    """A system with no initial_state: it can be simulated, not fitted."""

    k: jax.Array

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        return -self.k * q


def test_a_system_without_initial_state_is_refused_by_name():
    with pytest.raises(NotImplementedError, match="Bare does not define initial_state"):
        Bare(jnp.asarray(1.0)).initial_state()
    with pytest.raises(ValueError, match=r"experiment 'tap': the model \(Bare\) must define"):
        TimeHistoryExperiment("tap", Bare(jnp.asarray(1.0)), "q", jnp.linspace(0, 1, 5),
                              jnp.zeros(5))  # fmt: skip
    assert float(Bare(jnp.asarray(2.0)).with_parameter("k", 3.0).k) == 3.0


def test_one_parameter_sets_every_path_it_lists():
    """A parameter with several paths (the lower and upper stops' stiffness) sets each to its
    value; a path shared with another parameter in the same experiment is refused, by name."""
    model = LumpedContactModel.from_machine()
    both = Parameter("k", ("stops.stiffness", "impact.stiffness"), 1e9, 1e13, 1e11)
    space = ParameterSpace([both])
    space.validate(model, "any")
    changed = space.apply(model, jnp.array([3e11]), "any")
    assert float(changed.stops.stiffness) == 3e11 and float(changed.impact.stiffness) == 3e11
    with pytest.raises(ValueError, match="both set path 'impact.stiffness'"):
        ParameterSpace([both, Parameter("k2", "impact.stiffness", 1e9, 1e13, 1e11)])
    with pytest.raises(ValueError, match="distinct paths"):
        Parameter("k3", ("impact.stiffness", "impact.stiffness"), 1e9, 1e13, 1e11)
