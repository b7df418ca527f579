"""diffmbs.selection, and the compiled tangents of everything in diffmbs that selects (issue 19).

References, never the code under test: analytic derivatives (NumPy); the same derivative
evaluated op by op (``jax.disable_jit``: every primitive is its own XLA computation, so no fusion
duplicates an operand, and even JAX's equality-based max/min rules are exact there); central
finite differences.
"""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_options import USERS_COMPILER_OPTIONS
from scipy.spatial.transform import Rotation

import diffmbs.multibody as mb
from diffmbs import selection
from diffmbs.contact import hunt_crossley_force
from diffmbs.rotations import quat_to_matrix
from diffmbs.srs import shock_response_spectrum

# Compiled with the options users' programs get (XLA's defaults), not the suite's cheaper ones
# (conftest.py): the hazard these tests guard against lives in the optimised, fused code.
users_jit = functools.partial(jax.jit, compiler_options=USERS_COMPILER_OPTIONS)

# Andrews' squeezer spring legs (the repro of issue 19): a(q), b(q) from sin, cos, mul, add.
SD, SC, XB, YB, XC, YC = 2e-2, 18e-3, -0.03635, 0.03273, 0.014, 0.072
QS = np.random.default_rng(0).uniform(-np.pi, np.pi, 2000)


def legs(q):
    a = SD * jnp.cos(q) + SC * jnp.sin(q) + XB - XC
    b = SD * jnp.sin(q) - SC * jnp.cos(q) + YB - YC
    return a, b


def legs_np(q):
    a = SD * np.cos(q) + SC * np.sin(q) + XB - XC
    b = SD * np.sin(q) - SC * np.cos(q) + YB - YC
    da = -SD * np.sin(q) + SC * np.cos(q)
    db = SD * np.cos(q) + SC * np.sin(q)
    return a, b, da, db


def compiled_derivatives(f, qs=QS):
    """d f / dq at every q: jit(vmap(jvp)) and jit(vmap(grad))."""
    q = jnp.asarray(qs)
    fwd = users_jit(jax.vmap(lambda q_: jax.jvp(f, (q_,), (jnp.ones_like(q_),))[1]))(q)
    rev = users_jit(jax.vmap(jax.grad(f)))(q)
    return np.asarray(fwd), np.asarray(rev)


def wrong(got, ref, rtol=1e-10):
    return np.abs(got - ref) > rtol * (np.abs(ref) + 1e-3 * np.max(np.abs(ref)))


def test_hypot_compiled_tangents_against_analytic():
    a, b, da, db = legs_np(QS)
    ref = (a * da + b * db) / np.hypot(a, b)
    fwd, rev = compiled_derivatives(lambda q: selection.hypot(*legs(q)))
    assert not wrong(fwd, ref).any() and not wrong(rev, ref).any()
    # the same values as jnp.hypot (undifferentiated here: only its values are the reference)
    np.testing.assert_array_equal(
        users_jit(jax.vmap(lambda q: selection.hypot(*legs(q))))(QS),
        users_jit(jax.vmap(lambda q: jnp.hypot(*legs(q))))(QS),
    )
    # The hazard itself depends on the CPU (FMA) and on XLA's fusion: noted, never asserted.
    fwd_jnp, _ = compiled_derivatives(lambda q: jnp.hypot(*legs(q)))
    if wrong(fwd_jnp, ref).any():
        warnings.warn(
            f"note: jnp.hypot's compiled JVP is wrong at {int(wrong(fwd_jnp, ref).sum())} of "
            f"{QS.size} points on this CPU (selection.hypot at none)",
            stacklevel=1,
        )


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_compiled_tangents_against_analytic(name):
    a, b, da, db = legs_np(QS)
    ref = np.where(a >= b, da, db) if name == "maximum" else np.where(a < b, da, db)
    fun = getattr(selection, name)
    fwd, rev = compiled_derivatives(lambda q: fun(*legs(q)))
    assert not wrong(fwd, ref).any() and not wrong(rev, ref).any()


def test_clip_compiled_tangents_against_analytic():
    def parts(q, xp):
        a, b = legs(q) if xp is jnp else legs_np(q)[:2]
        return a, b - 0.02, b + 0.01 * xp.cos(3 * q)  # x, lo, hi; hi > lo

    x, lo, hi = parts(QS, np)
    _, _, dx, db = legs_np(QS)
    dhi = db - 0.03 * np.sin(3 * QS)
    ref = np.where(x < lo, db, np.where(x > hi, dhi, dx))
    assert min(np.mean(x < lo), np.mean(x > hi), np.mean((x >= lo) & (x <= hi))) > 0.05
    fwd, rev = compiled_derivatives(lambda q: selection.clip(*parts(q, jnp)))
    assert not wrong(fwd, ref).any() and not wrong(rev, ref).any()


@pytest.mark.parametrize("name", ["max", "min"])
def test_reductions_compiled_tangents_against_analytic(name):
    k = np.arange(5)
    x_np = np.sin(QS[:, None] + 1.3 * k) * (1 + 0.1 * k) + SD * np.cos(2 * QS[:, None])
    dx = np.cos(QS[:, None] + 1.3 * k) * (1 + 0.1 * k) - 2 * SD * np.sin(2 * QS[:, None])
    pick = np.argmax(x_np, axis=1) if name == "max" else np.argmin(x_np, axis=1)
    ref = dx[np.arange(QS.size), pick]

    def fun(q):
        x = jnp.sin(q + 1.3 * k) * (1 + 0.1 * k) + SD * jnp.cos(2 * q)
        return getattr(selection, name)(x, axis=0)

    fwd, rev = compiled_derivatives(fun)
    assert not wrong(fwd, ref).any() and not wrong(rev, ref).any()


def test_values_ties_and_edge_cases():
    @users_jit
    def pairs(x):
        out = [(selection.clip(x, -0.5, 0.5), jnp.clip(x, -0.5, 0.5))]
        for axis in (None, 0, 1):
            for keep in (False, True):
                out.append((selection.max(x, axis, keep), jnp.max(x, axis=axis, keepdims=keep)))
                out.append((selection.min(x, axis, keep), jnp.min(x, axis=axis, keepdims=keep)))
        return out

    for got, ref in pairs(jnp.asarray(np.random.default_rng(1).normal(size=(4, 5)))):
        np.testing.assert_array_equal(got, ref)
    # At a tie the pair (max, min) carries (ȧ, ḃ): a permutation, so f(max, min) is right.
    jac = jax.jacfwd(lambda ab: jnp.stack([selection.maximum(*ab), selection.minimum(*ab)]))
    np.testing.assert_array_equal(jac(jnp.array([0.3, 0.3])), np.eye(2))
    assert np.isnan(float(selection.maximum(jnp.nan, 1.0)))
    assert np.isnan(float(selection.max(jnp.array([1.0, jnp.nan, 2.0]))))
    assert float(selection.hypot(3e300, 4e300)) == 5e300  # no overflow
    grad = jax.grad(selection.hypot, argnums=(0, 1))
    np.testing.assert_array_equal(grad(0.0, 0.0), (0.0, 0.0))
    np.testing.assert_allclose(grad(3e300, 4e300), (0.6, 0.8), rtol=1e-15)
    assert selection.maximum(jnp.float32(1.0), 0.0).dtype == jnp.float32


# --------------------------------------------------------------------------- force elements

COM = (np.array([0.01, -0.02, 0.03]), np.array([-0.02, 0.0, 0.01]))
STOPS = mb.LengthStops(0.27, 0.33, stiffness=2e6, damping=2.0, smoothing=1e-3)
KW = {"damping": 2.0, "smoothing": 1e-3}
P_I, P_J = np.array([0.02, 0.01, -0.01]), np.array([-0.01, 0.03, 0.02])
HINGE_I = mb.Frame.from_axis((0.1, 0.0, 0.0), (0.0, 1.0, 0.3))
HINGE_J = mb.Frame.from_axis((-0.1, 0.02, 0.0), (0.2, 1.0, 0.0))
NORMAL, PLANE_POINT = np.array([0.2, -0.1, 1.0]) / np.sqrt(1.05), np.array([0.0, 0.01, -0.02])


def user_law(length, rate):
    """A bilinear spring with a velocity-limited damper and a hypot term (N)."""
    return (
        300.0 * (length - 0.3)
        + 4e3 * selection.maximum(length - 0.31, 0.0)
        + 20.0 * selection.clip(rate, -0.4, 0.6)
        + 1e3 * selection.hypot(length - 0.3, 0.005)
    )


def pushing(t, kin):
    """Applied force (N), body axes, depending on time and the body's motion."""
    return jnp.array([1.0, 2.0, -1.0]) * (1 + t + kin.velocity[0] ** 2) + kin.angular_velocity


# (element, how body i is placed relative to body j: ("length", point_i, point_j) or
# ("height", point_i, radius), with the target range of the length or height)
ELEMENTS = {
    "spring_damper_stops": (
        mb.SpringDamper("i", P_I, "j", P_J, 300.0, 0.3, 4.0, 2.0, STOPS),
        ("length", P_I, P_J, (0.25, 0.35)),
    ),
    "user_law_stops": (
        mb.NonlinearSpringDamper("i", P_I, "j", P_J, user_law, STOPS),
        ("length", P_I, P_J, (0.25, 0.35)),
    ),
    "torsional_spring": (
        mb.RotationalSpringDamper("hinge", 5.0, 0.3, 0.2, -0.4).resolve(
            {"hinge": mb.Revolute("i", HINGE_I, "j", HINGE_J)}
        ),
        None,
    ),
    "bushing": (
        mb.Bushing("i", mb.Frame(P_I), "j", mb.Frame(P_J), (1e3, 2e3, 3e3), (10, 20, 30)),
        None,
    ),
    "applied_force": (
        mb.AppliedForce("i", P_I, pushing, axes="body"),
        None,
    ),
    "applied_torque": (mb.AppliedTorque("i", lambda t, k: 0.3 * k.angular_velocity), None),
    "sphere_plane": (
        mb.SpherePlane("i", P_I, 0.1, "j", PLANE_POINT, NORMAL, stiffness=1e6, **KW),
        ("height", P_I, 0.1, (-0.02, 0.005)),
    ),
    "point_plane": (
        mb.PointPlane("i", P_I, "j", PLANE_POINT, NORMAL, stiffness=1e6, **KW),
        ("height", P_I, 0.0, (-0.02, 0.005)),
    ),
    "sphere_sphere": (
        mb.SphereSphere("i", P_I, 0.1, "j", P_J, 0.12, stiffness=1e6, **KW),
        ("length", P_I, P_J, (0.2, 0.23)),
    ),
}
N_STATES = 300


def kinematics(x, com):
    """BodyKinematics from x = (r_G (3), quaternion (4, any norm), ṙ_G (3), ω (3))."""
    return mb.BodyKinematics(x[:3], quat_to_matrix(x[3:7]), jnp.asarray(com), x[7:10], x[10:13])


def random_states(rng, placement, element, n=N_STATES):
    """(n, 26) states of bodies i and j (r_G, quaternion, ṙ_G, ω each); body i moved so that
    the element's length or height lies in its range (contacts and stops engaged in part, the
    damping clamp 1 + χδ̇ ≥ 0 active in part)."""
    quat = rng.normal(0, 0.4, (n, 2, 4)) + [1.0, 0.0, 0.0, 0.0]
    quat /= np.linalg.norm(quat, axis=-1, keepdims=True)
    r = rng.normal(0, 0.05, (n, 2, 3))
    if placement is not None:
        rot = Rotation.from_quat(quat[..., [1, 2, 3, 0]].reshape(-1, 4)).as_matrix()
        rot = rot.reshape(n, 2, 3, 3)
        world = lambda b, point: r[:, b] + rot[:, b] @ (np.asarray(point) - COM[b])
        kind, point_i, other, (lo, hi) = placement
        target = rng.uniform(lo, hi, (n, 1))
        p_i = world(0, point_i)
        if kind == "length":
            d = world(1, other) - p_i
            r[:, 0] += d - target * d / np.linalg.norm(d, axis=-1, keepdims=True)
        else:
            normal = rot[:, 1] @ element.plane_normal
            height = np.sum((p_i - world(1, element.plane_point)) * normal, axis=-1)
            r[:, 0] += (other + target - height[:, None]) * normal
    velocities = np.concatenate([rng.normal(0, 0.8, (n, 2, 3)), rng.normal(0, 1.5, (n, 2, 3))], -1)
    return np.concatenate([r, quat, velocities], axis=-1).reshape(n, 26)


def element_function(element):
    """State (26,) → [wrench force (6,), points (6,), torques (6,)] (one row per body)."""

    def f(x):
        ki, kj = kinematics(x[:13], COM[0]), kinematics(x[13:], COM[1])
        ks = (ki, kj) if len(element.attachments) == 2 else (ki,)
        w = element.wrench(0.3, *ks)
        return [o.reshape(-1) for o in (w.force, w.point, w.torque)]

    return f


def assert_close_blocks(got, ref, rtol):
    """Per sample and output block: |got − ref| ≤ rtol (‖ref‖ + 1e-3 · max over samples)."""
    for g, r in zip(got, ref, strict=True):
        g, r = np.asarray(g), np.asarray(r)
        norm = np.linalg.norm(r, axis=-1, keepdims=True)
        bound = rtol * (norm + 1e-3 * norm.max() + 1e-300)
        assert np.all(np.abs(g - r) <= bound), np.max(np.abs(g - r) / bound)


def check_compiled_against_op_by_op(f, xs, tangents, rng, rtol=1e-10, h=1e-7, batched=False):
    """Forward and reverse tangents of ``f`` (x → list of 1-D blocks) at every state, compiled
    (jit(vmap(·))) against op by op, and the compiled forward ones against central
    differences (steps of h along the tangent). ``batched``: ``f`` maps the leading axis of
    ``xs`` itself (each output row depends on its own row only), so it is not ``vmap``ped.

    Both modes come from one ``jax.linearize``: its linear map is the JVP and its transpose the
    VJP that ``jax.grad`` runs (one compiled program instead of two). Returns the values."""

    def both(x, t, w):
        value, lin = jax.linearize(f, x)
        return value, lin(t), jax.linear_transpose(lin, x)(w)[0]

    mapped = both if batched else jax.vmap(both)
    ws = [jnp.asarray(rng.normal(size=v.shape)) for v in jax.eval_shape(jax.vmap(f), xs)]
    compiled = users_jit(mapped)
    values, fwd, rev = compiled(xs, tangents, ws)
    with jax.disable_jit():
        _, fwd_ref, rev_ref = mapped(xs, tangents, ws)
    assert_close_blocks(fwd, fwd_ref, rtol)
    assert_close_blocks([rev], [rev_ref], rtol)
    plus, minus = (
        compiled(xs + h * tangents, tangents, ws)[0],
        compiled(xs - h * tangents, tangents, ws)[0],
    )
    fd = [(p - m) / (2 * h) for p, m in zip(plus, minus, strict=True)]
    assert_close_blocks(fwd, fd, 1e-6)
    return values


@pytest.mark.parametrize("name", list(ELEMENTS))
def test_force_element_tangents_compiled_against_op_by_op(name):
    element, placement = ELEMENTS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    xs = jnp.asarray(random_states(rng, placement, element))
    tangents = jnp.asarray(rng.normal(size=xs.shape))
    values = check_compiled_against_op_by_op(element_function(element), xs, tangents, rng)
    if "sphere" in name or "plane" in name:  # in contact at part of the states, and F is
        force = np.linalg.norm(np.asarray(values[0])[:, 3:], axis=1)  # exactly 0 only where
        assert 0.2 < np.mean(force > 1.0) < 0.95 and np.mean(force == 0.0) > 0.1  # 1 + χδ̇ ≤ 0


def test_hunt_crossley_force_tangents_compiled_against_op_by_op():
    rng = np.random.default_rng(7)
    n = N_STATES
    args = np.stack(
        [
            rng.uniform(-3e-3, 2e-2, n),  # δ (m)
            rng.uniform(-2.0, 2.0, n),  # δ̇ (m/s): with χ below, 1 + χδ̇ < 0 at a third
            rng.uniform(1e5, 1e7, n),  # K
            rng.uniform(0.5, 2.0, n),  # χ (s/m)
            rng.uniform(1.0, 2.0, n),  # n
            rng.uniform(2e-4, 1e-3, n),  # ε (m)
        ],
        axis=1,
    )
    assert 0.2 < np.mean(1 + args[:, 3] * args[:, 1] < 0) < 0.5
    f = lambda a: [hunt_crossley_force(*a).reshape(1)]
    tangents = jnp.asarray(rng.normal(size=args.shape) * args)  # relative perturbations
    check_compiled_against_op_by_op(f, jnp.asarray(args), tangents, rng)


# --------------------------------------------------------------------------- SRS

SRS_DT, SRS_FREQS = 2e-4, np.array([40.0, 100.0, 250.0, 450.0])  # s, Hz: ≥ 11 samples a cycle


def srs_records(rng, n=16, length=16):
    """Noisy half-sine pulses (m/s²) of 0.6–2.4 ms, sampled at 5 kHz (op by op, every time step
    of the scans compiles its own slice: short records keep the test fast)."""
    t = np.arange(length) * SRS_DT
    tau = rng.uniform(0.6e-3, 2.4e-3, (n, 1))
    pulse = np.where(t < tau, np.sin(np.pi * t / tau), 0.0) * rng.uniform(50, 200, (n, 1))
    return pulse + rng.normal(0, 10.0, (n, length))


def test_srs_tangents_compiled_against_op_by_op():
    """Exact (peak read at one sample, custom JVP) and smooth (log-sum-exp) spectra at once."""
    rng = np.random.default_rng(11)
    records = jnp.asarray(srs_records(rng))
    f = lambda u: [
        shock_response_spectrum(u, SRS_DT, SRS_FREQS, smooth=smooth) for smooth in (None, 0.05)
    ]
    tangents = jnp.asarray(rng.normal(0, 10.0, records.shape))
    check_compiled_against_op_by_op(f, records, tangents, rng, h=1e-5, batched=True)
