"""diffmbs.check_derivatives (issue 19): the static search for equality-based tangent rules and
the numerical comparisons, each against a reference the check does not compute itself: the line
numbers come from this file's source, the wrong derivative from its closed form, the names from
the models' own parameter paths."""

import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jaxtyping import Array
from multibody_models import pendulum

import diffmbs
import diffmbs.multibody as mb
from diffmbs import DerivativeCheckError, check_derivatives
from diffmbs.system import MechanicalSystem

# Andrews' squeezer: the spring from point C on the crank (angle q) to the fixed point (xc, yc)
# (Hairer & Wanner; as in /work/shared/repro/jax_max_tangent.py). m, N/m.
SD, SC, XB, YB, XC, YC, L0, K = 2e-2, 18e-3, -0.03635, 0.03273, 0.014, 0.072, 7785e-5, 4530.0
Q0 = 0.4552798191630704  # rad, the initial crank angle of the benchmark


def legs(q):
    """Spring legs (dx, dy) (m) at crank angle ``q`` (rad)."""
    c, s = jnp.cos(q), jnp.sin(q)
    return SD * c + SC * s + XB - XC, SD * s - SC * c + YB - YC


def hypot_length(dx, dy):
    return jnp.hypot(dx, dy)  # the hazard


def sqrt_length(dx, dy):
    return jnp.sqrt(dx * dx + dy * dy)


def line_of(function, text: str) -> int:
    """Line number of the first source line of ``function`` containing ``text``."""
    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if text in line)


class AndrewsSpring(MechanicalSystem):
    """A crank (inertia kg·m²) driven by Andrews' spring: ``Q = −k (L − L0) ∂L/∂q``, ``L`` from
    ``length(dx, dy)``; one coordinate (rad)."""

    stiffness: Array
    inertia: Array
    length: object = eqx.field(static=True)

    def mass(self, q):
        return self.inertia * jnp.eye(1)

    def forces(self, t, q, v):
        dx, dy = legs(q[0])
        c, s = jnp.cos(q[0]), jnp.sin(q[0])
        dx_dq, dy_dq = -SD * s + SC * c, SD * c + SC * s
        length = self.length(dx, dy)
        return jnp.stack([-self.stiffness * (length - L0) / length * (dx * dx_dq + dy * dy_dq)])


def spring(length):
    return AndrewsSpring(jnp.asarray(K), jnp.asarray(2.194e-6), length)


SMALL = {"samples": 12, "op_by_op_samples": 2, "fd_samples": 4}


def test_hypot_spring_is_flagged_and_sqrt_passes():
    q, v = jnp.array([Q0]), jnp.array([1.0])
    with pytest.raises(DerivativeCheckError) as caught:
        check_derivatives(spring(hypot_length), q, v, scale=1.0, **SMALL)
    line = line_of(hypot_length, "jnp.hypot")
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert f"{__file__}:{line}" in message and "jnp.hypot(dx, dy)" in message
    assert "forces" in message and "diffmbs.selection.hypot" in message
    assert "jnp.where(a > b, a, b)" in message
    (hazard,) = caught.value.report.hazards
    assert (hazard.function, hazard.operation, hazard.line) == ("forces", "jnp.hypot", line)

    report = check_derivatives(spring(sqrt_length), q, v, scale=1.0, **SMALL)
    assert report.passed and not report.hazards
    kinds = {(c.function, c.kind) for c in report.comparisons}
    assert ("forces", "forward (compiled) vs op-by-op") in kinds
    assert ("forces", "reverse (compiled) vs finite differences") in kinds
    assert {c.inputs for c in report.comparisons if c.function == "forces"} == {4}  # q v k I
    assert "static: no max/min" in str(report)


class OneSidedSpring(MechanicalSystem):
    """A unit mass on a spring that pushes only: ``Q = −k · law(q)``."""

    stiffness: Array
    law: object = eqx.field(static=True)

    def mass(self, q):
        return jnp.eye(1)

    def forces(self, t, q, v):
        return -self.stiffness * self.law(q)


def pushes_maximum(q):
    return jnp.maximum(q, 0.0)  # the hazard


def pushes_where(q):
    return jnp.where(q > 0, q, 0.0)


def pushes_selection(q):
    return diffmbs.selection.maximum(q, 0.0)


def pushes_guarded(q):  # max/min off the differentiated path: in a comparison, stop_gradient
    scale = jax.lax.stop_gradient(jnp.maximum(jnp.abs(q), 1.0))
    return jnp.where(jnp.max(jnp.abs(q)) > 0, q, 0.0) * scale / scale


def test_maximum_in_forces_is_flagged_statically():
    q, v = jnp.array([0.1]), jnp.array([0.0])
    with pytest.raises(DerivativeCheckError) as caught:
        check_derivatives(OneSidedSpring(jnp.asarray(3.0), pushes_maximum), q, v, numeric=False)
    (hazard,) = caught.value.report.hazards
    assert hazard.function == "forces" and hazard.operation == "jnp.maximum"
    assert hazard.line == line_of(pushes_maximum, "jnp.maximum")
    assert "diffmbs.selection.maximum" in str(caught.value)
    for law in (pushes_where, pushes_selection, pushes_guarded):
        report = check_derivatives(OneSidedSpring(jnp.asarray(3.0), law), q, v, numeric=False)
        assert report.hazards == (), law.__name__


def test_correct_multibody_model_passes():
    model = pendulum(theta0=0.6)
    q, v = model.initial_state()
    v = v.at[model.v_slice("bob")].set(jnp.array([0.3, 0.0, -0.4, 0.0, 1.5, 0.0]))
    report = check_derivatives(model, q, v, samples=8, op_by_op_samples=1, fd_samples=3)
    assert report.passed, str(report)
    assert {c.function for c in report.comparisons} == {"mass", "forces", "constraints", "qdot"}
    worst = {c.kind: c.relative_error for c in report.comparisons if c.function == "forces"}
    assert worst["forward (compiled) vs op-by-op"] < 1e-12
    assert worst["forward (compiled) vs finite differences"] < 1e-6
    samples = {c.kind.split(" vs ")[-1]: c.samples for c in report.comparisons}
    assert samples == {"reverse (both compiled)": 8, "op-by-op": 1, "finite differences": 3}


@jax.custom_jvp
def restoring_torque(q, k):
    return -k * jnp.sin(q)


@restoring_torque.defjvp
def _restoring_torque_jvp(primals, tangents):  # wrong: forgets the stiffness's tangent
    (q, k), (dq, dk) = primals, tangents
    del dk
    return restoring_torque(q, k), -k * jnp.cos(q) * dq


class CustomRule(MechanicalSystem):
    """A rotor (kg·m²) on a torsional spring whose torque has a hand-written derivative rule."""

    stiffness: Array

    def mass(self, q):
        return 0.2 * jnp.eye(1)

    def forces(self, t, q, v):
        return restoring_torque(q, self.stiffness)


def test_wrong_custom_jvp_is_caught_by_finite_differences():
    q, v = jnp.array([0.7]), jnp.array([0.0])
    with pytest.raises(DerivativeCheckError) as caught:
        check_derivatives(CustomRule(jnp.asarray(5.0)), q, v, **SMALL)
    report = caught.value.report
    assert report.hazards == ()  # nothing static: only the numbers show it
    failed = {c.kind: c for c in report.failures}
    assert set(failed) == {
        "forward (compiled) vs finite differences",
        "reverse (compiled) vs finite differences",
    }
    worst = failed["forward (compiled) vs finite differences"]
    assert (worst.function, worst.input, worst.output) == ("forces", "stiffness", "Q[0]")
    # the reference is ∂(−k sin q)/∂k = −sin q at the worst state; the rule gives 0
    np.testing.assert_allclose(worst.reference, -np.sin(worst.q[0]), rtol=1e-8)
    assert worst.compiled == 0.0
    message = str(caught.value)
    assert "forces" in message and "stiffness" in message and "custom_jvp" in message


def cable_law(length, rate):
    """Tension (N) of a cable that only pulls: 400 N/m beyond 0.5 m, 2 N·s/m."""
    return 400.0 * jnp.maximum(length - 0.5, 0.0) + 2.0 * rate  # the hazard


def test_bad_force_element_is_named():
    b = mb.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_body(mb.RigidBody("bob", mass=1.3, inertia=(0.02, 0.03, 0.015), position=(0.6, 0, -0.5)))
    b.add_joint("hinge", mb.Revolute("ground", mb.Frame((0, 0, 0)), "bob", mb.Frame((0, 0, 0.8))))
    b.add_force(
        "cable", mb.NonlinearSpringDamper("ground", (1.0, 0, 0), "bob", (0, 0, 0), cable_law)
    )
    b.add_force("spring", mb.SpringDamper("ground", (0, 0, -1.0), "bob", (0, 0, 0), 50.0, 0.3))
    model = b.build()
    q, v = model.initial_state()
    with pytest.raises(DerivativeCheckError) as caught:
        check_derivatives(model, q, v, numeric=False)
    (hazard,) = caught.value.report.hazards  # the forces' own finding is the element's
    assert hazard.function == "element 'cable'" and hazard.operation == "jnp.maximum"
    assert hazard.line == line_of(cable_law, "jnp.maximum")
    assert "element 'cable'" in str(caught.value) and "'spring'" not in str(caught.value)

    report = check_derivatives(
        model, q, v, samples=4, op_by_op_samples=0, fd_samples=2, static=False, functions=()
    )
    assert {c.function for c in report.comparisons} == {"element 'cable'", "element 'spring'"}
    inputs = {c.function: c.inputs for c in report.comparisons}
    # q (7) and v (6), then the element's own parameters: two points, and k, L0, c, F_a
    assert inputs["element 'cable'"] == 13 + 6 and inputs["element 'spring'"] == 13 + 10
