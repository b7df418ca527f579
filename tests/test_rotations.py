"""Quaternions and rotation matrices against scipy.spatial.transform.Rotation.

SciPy stores quaternions scalar last (x, y, z, w); diffmbs scalar first (w, x, y, z). References:
SciPy's conversions and compositions, the kinematics of a constant-rate rotation (closed form
through SciPy's exponential map), and central finite differences for derivatives.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import diffmbs  # noqa: F401
from diffmbs.rotations import (
    frame_from_axes,
    matrix_to_quat,
    quat_conjugate,
    quat_derivative,
    quat_from_axis_angle,
    quat_from_rotation_vector,
    quat_multiply,
    quat_normalize,
    quat_rotate,
    quat_to_matrix,
    quat_to_rotation_vector,
    rotation_vector_to_matrix,
    safe_norm,
    skew,
    unskew,
)

ROTATIONS = Rotation.random(64, random_state=7)


def to_wxyz(xyzw):
    return np.roll(np.asarray(xyzw), 1, axis=-1)


def to_xyzw(wxyz):
    return np.roll(np.asarray(wxyz), -1, axis=-1)


def test_quaternion_to_matrix_matches_scipy_and_ignores_scale():
    quats = to_wxyz(ROTATIONS.as_quat())
    np.testing.assert_allclose(quat_to_matrix(quats), ROTATIONS.as_matrix(), atol=1e-14)
    # Homogeneous: any non-zero scale (and sign) gives the same rotation.
    scales = np.linspace(-3.0, 5.0, 64)
    scales[scales == 0] = 1.0
    np.testing.assert_allclose(
        quat_to_matrix(quats * scales[:, None]), ROTATIONS.as_matrix(), atol=1e-14
    )


def test_matrix_to_quaternion_matches_scipy_including_half_turns():
    half_turns = Rotation.from_rotvec(np.pi * np.eye(3))
    both = Rotation.concatenate([ROTATIONS, half_turns])
    got = np.asarray(matrix_to_quat(both.as_matrix()))
    ref = to_wxyz(both.as_quat())
    ref = ref * np.sign(ref[:, :1] + (ref[:, :1] == 0))  # w ≥ 0, as returned
    same = np.minimum(np.abs(got - ref).max(axis=1), np.abs(got + ref).max(axis=1))
    assert same.max() < 1e-13
    assert np.all(got[:, 0] >= 0)


def test_composition_rotation_and_inverse_match_scipy():
    a, b = ROTATIONS[:32], ROTATIONS[32:]
    qa, qb = to_wxyz(a.as_quat()), to_wxyz(b.as_quat())
    np.testing.assert_allclose(
        quat_to_matrix(quat_multiply(qa, qb)), (a * b).as_matrix(), atol=1e-14
    )
    np.testing.assert_allclose(quat_to_matrix(quat_conjugate(qa)), a.inv().as_matrix(), atol=1e-14)
    x = np.random.default_rng(0).normal(size=(32, 3))
    np.testing.assert_allclose(quat_rotate(qa, x), a.apply(x), atol=1e-13)


def test_axis_angle_and_rotation_vector_match_scipy():
    rotvecs = ROTATIONS.as_rotvec()
    angles = np.linalg.norm(rotvecs, axis=1)
    from_axis = quat_from_axis_angle(rotvecs / angles[:, None], angles)
    np.testing.assert_allclose(quat_to_matrix(from_axis), ROTATIONS.as_matrix(), atol=1e-14)
    np.testing.assert_allclose(
        quat_to_matrix(quat_from_rotation_vector(rotvecs)), ROTATIONS.as_matrix(), atol=1e-14
    )
    back = quat_to_rotation_vector(to_wxyz(ROTATIONS.as_quat()))
    np.testing.assert_allclose(back, rotvecs, atol=1e-13)
    # Tiny and zero angles: the series branch, continuous with the closed form.
    tiny = np.array([[1e-9, -2e-9, 3e-9], [0.0, 0.0, 0.0], [1e-5, 0.0, 0.0]])
    np.testing.assert_allclose(
        quat_to_rotation_vector(quat_from_rotation_vector(tiny)), tiny, rtol=1e-12, atol=1e-24
    )
    np.testing.assert_allclose(
        to_xyzw(quat_from_rotation_vector(tiny)), Rotation.from_rotvec(tiny).as_quat(), atol=1e-16
    )


def test_rotation_vector_to_matrix_matches_scipy_and_is_smooth_at_zero():
    rotvecs = ROTATIONS.as_rotvec()
    for vec, ref in zip(rotvecs, Rotation.from_rotvec(rotvecs).as_matrix(), strict=True):
        np.testing.assert_allclose(rotation_vector_to_matrix(vec), ref, atol=1e-14)
    for tiny in ([1e-9, -2e-9, 3e-9], [0.0, 0.0, 0.0]):
        ref = Rotation.from_rotvec(tiny).as_matrix()
        np.testing.assert_allclose(rotation_vector_to_matrix(np.array(tiny)), ref, atol=1e-16)
    # d/dθ exp([θ]×) at 0 along e_k is [e_k]× (finite, no 0/0)
    jac = jax.jacfwd(rotation_vector_to_matrix)(jnp.zeros(3))
    np.testing.assert_allclose(np.moveaxis(jac, -1, 0), skew(np.eye(3)), atol=1e-15)


def test_skew_and_unskew():
    w, x = np.array([0.3, -1.2, 2.0]), np.array([1.0, 0.5, -0.7])
    np.testing.assert_allclose(skew(w) @ x, np.cross(w, x), atol=1e-15)
    np.testing.assert_allclose(unskew(skew(w)), w, atol=1e-15)
    # For a rotation matrix: sin θ times the axis.
    rot = Rotation.from_rotvec([0.0, 0.0, 0.4])
    np.testing.assert_allclose(unskew(rot.as_matrix()), [0.0, 0.0, np.sin(0.4)], atol=1e-15)


def test_kinematics_of_constant_body_rate_match_scipy_exponential():
    """ṗ = ½ p ⊗ (0, ω̄) with constant ω̄ integrates to p(t) = p₀ ⊗ exp(ω̄ t)."""
    p0 = to_wxyz(ROTATIONS[0].as_quat())
    omega_bar = np.array([0.7, -1.9, 2.4])

    @jax.jit
    def rk4(p, dt, n):
        f = lambda p_: quat_derivative(p_, omega_bar)

        def step(_, p):
            k1 = f(p)
            k2 = f(p + 0.5 * dt * k1)
            k3 = f(p + 0.5 * dt * k2)
            k4 = f(p + dt * k3)
            return p + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)

        return jax.lax.fori_loop(0, n, step, p)

    t = 1.3
    p = rk4(jnp.asarray(p0), t / 400, 400)
    ref = ROTATIONS[0] * Rotation.from_rotvec(omega_bar * t)
    np.testing.assert_allclose(quat_to_matrix(p), ref.as_matrix(), atol=1e-9)
    # The continuous kinematics preserve the norm: p · ṗ = 0.
    assert abs(float(p0 @ quat_derivative(p0, omega_bar))) < 1e-15
    # ω̄ is the body-frame rate: Ṙ = R [ω̄]×.
    rdot = jax.jvp(quat_to_matrix, (p0,), (quat_derivative(p0, omega_bar),))[1]
    np.testing.assert_allclose(rdot, ROTATIONS[0].as_matrix() @ skew(omega_bar), atol=1e-14)


def test_guards_give_finite_derivatives_at_zero():
    for fn in (safe_norm, quat_from_rotation_vector, lambda x: quat_normalize(jnp.append(x, 0.0))):
        jac = jax.jit(jax.jacfwd(fn))(jnp.zeros(3))
        assert np.all(np.isfinite(jac))
    # exp'(0) = (0, ½ I): the body-rate map at the identity.
    jac = jax.jit(jax.jacfwd(quat_from_rotation_vector))(jnp.zeros(3))
    np.testing.assert_allclose(jac, np.vstack([np.zeros(3), 0.5 * np.eye(3)]), atol=1e-15)
    grad = jax.jit(jax.grad(lambda p: quat_to_matrix(p).sum()))(jnp.zeros(4))
    assert np.all(np.isfinite(grad))
    log_jac = jax.jit(jax.jacfwd(quat_to_rotation_vector))(jnp.array([1.0, 0.0, 0.0, 0.0]))
    np.testing.assert_allclose(log_jac[:, 1:], 2 * np.eye(3), atol=1e-15)


def test_derivative_of_rotation_vector_map_matches_finite_differences():
    phi = np.array([0.4, -1.1, 0.8])
    jac = jax.jacfwd(quat_from_rotation_vector)(jnp.asarray(phi))
    h = 1e-6
    fd = np.stack(
        [
            (
                np.asarray(quat_from_rotation_vector(phi + h * e))
                - np.asarray(quat_from_rotation_vector(phi - h * e))
            )
            / (2 * h)
            for e in np.eye(3)
        ],
        axis=1,
    )
    np.testing.assert_allclose(jac, fd, atol=1e-9)


def test_frame_from_axes():
    r = np.asarray(frame_from_axes([0.0, 2.0, 0.0], [1.0, 1.0, 0.0]))
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(np.linalg.det(r), 1.0)
    np.testing.assert_allclose(r[:, 2], [0, 1, 0])
    np.testing.assert_allclose(r[:, 0], [1, 0, 0], atol=1e-15)
    with pytest.raises(ValueError, match="parallel"):
        frame_from_axes([0, 0, 1], [0, 0, 3])
    with pytest.raises(ValueError, match="non-zero"):
        frame_from_axes([0, 0, 0])
